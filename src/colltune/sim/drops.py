"""Finite switch-port buffers that drop when full: paper 000's bottleneck stage (section 5.2,
eq. 3-4) at every switch egress port of a topology.

A node's ``buffer`` is the queue, in bytes, of each switch port that feeds its link: the parent
switch's port towards the node, and the node's own port towards its parent when the node is a
switch.  A host's NIC never drops; it holds its sender back.

A fluid simulation has no queues (every flow's rate already fits its path), so what overflows a
port is what the senders *offer*, as paper 000's x senders each push a packet every gs
regardless of the root: a sender pushes each flow's bytes at its host's up bandwidth, split
evenly among its flows in progress when the flow starts, and capped by the narrowest link the
flow crosses before the port; a flow starts when the engine starts moving it (behind the one
before it in its (sender, receiver) stream, or its sender's queue).  At a port of bandwidth D
and buffer B, the offered rates of the flows through it are summed over time; an *episode* is a
maximal interval in which that sum exceeds D.  Over an episode offering k bytes at the mean rate A = k / duration, the buffer is
full after tau = B / (A - D) (eq. 3) and the transfer ratio is min(1, D/A + B/k) (eq. 4,
:func:`colltune.models.cluster.transfer_ratio`).  Below 1, every flow still offering bytes after
tau loses the fraction 1 - D/A of them: it is charged the topology's retransmission timeout
``rto`` plus the time to resend what it lost (over all the ports that dropped it) at its final
simulated rate.  The resent bytes are not simulated as flows of their own.  With ``rto`` 0 a hit
flow pays the resend only: what TCP's fast retransmit costs, and what ``colltune probe`` keeps in
a profile's topology when its controlled incast timed out in fewer than half of its repetitions at
every size (a timeout that does not happen in most runs does not move a median time).

TCP does not push at line rate: a sender keeps at most its window in flight, and sends more only as
acknowledgements come back.  With the topology's ``window`` (bytes), an episode loses what the
windows of its flows, each capped by the bytes the flow offers in the episode, exceed the port's
buffer by, shared among the flows by their windows, once (but never more than eq. 4's share): a
flow that loses a segment shrinks its window (TCP's multiplicative decrease), and the port stays
busy with what the others keep in flight, so the bytes a sender pushes at line rate past eq. 3's
moment are not lost as in paper 000.  The testbed's topology files give Linux's initial window (10
segments of 1448 B, RFC 6928), which fits the losses measured on its 128 KiB ports
(``benchmarks/fidelity_testbed.py``) far better than eq. 4's share of everything past eq. 3's
moment, which charged windows that fit the buffer with losses TCP did not suffer.  Without a window, every sender pushes at
line rate, as in paper 000.

Like paper 001's RTO rule, drops depend on when the flows run, so :func:`colltune.sim.simulate`
re-simulates with the charges until no further flow is hit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from colltune.models.cluster import transfer_ratio
from colltune.schedule import Kind, Schedule
from colltune.sim.topology import Topology

#: A retransmission rule: from a schedule and its simulated op times, the charge in seconds of
#: every op it hits (0 elsewhere).
Rule = Callable[[Schedule, dict[str, np.ndarray]], np.ndarray]

#: Relative slack when comparing an offered rate with a port's bandwidth, so that flows that
#: exactly fill a port (float rounding aside) do not count as overflowing it.
_RATE_SLACK = 1e-9


def drop_rule(topology: Topology, vol: np.ndarray) -> Rule | None:
    """The flows that overflow ``topology``'s finite port buffers, with ``vol[i]`` bytes carried
    by send op i; None when every buffer is unlimited."""
    parent, up, down, _, host_node = topology.arrays()
    buffer = np.array([np.inf if n.buffer is None else n.buffer for n in topology.nodes])
    is_host = np.zeros(len(parent), dtype=bool)
    is_host[host_node] = True
    up_buffer = np.where(is_host, np.inf, buffer)
    if not (np.isfinite(buffer) & (parent >= 0)).any():  # the root has no link, so no port
        return None
    # a window's bytes as the port's queue holds them (with their frames' headers), like the flows'
    window = None if topology.window is None else float(topology.on_wire(topology.window))

    def rule(schedule: Schedule, arrays: dict[str, np.ndarray]) -> np.ndarray:
        c = schedule.columns
        sends = np.flatnonzero(c["kind"] == Kind.SEND)
        src, dst = c["rank"][sends], c["peer"][sends]
        start, end, rate = arrays["flow_start"][sends], arrays["flow_end"][sends], arrays["flow_rate"][sends]
        size = vol[sends]
        pair, paths = topology.routes(src, dst)
        crosses = np.array([bool(climb or descend) for climb, descend, _ in paths], dtype=bool)[pair]
        moving = crosses & (size > 0) & (end > start)
        offered = _sender_share(src, start, end, up[host_node[src]], moving)
        ports: dict[tuple[int, bool], tuple[float, float, list[int], list[float]]] = {}
        for k, (climb, descend, _) in enumerate(paths):
            cap = np.inf
            for v, bandwidth, room, is_up in [(v, up[v], up_buffer[v], True) for v in climb] + \
                                             [(v, down[v], buffer[v], False) for v in descend]:
                if np.isfinite(room):
                    entry = ports.setdefault((v, is_up), (bandwidth, room, [], []))
                    entry[2].append(k)
                    entry[3].append(cap)
                cap = min(cap, bandwidth)
        lost = np.zeros(len(sends))
        for bandwidth, room, pairs, caps in ports.values():
            cap_of_pair = np.full(len(paths), np.inf)
            cap_of_pair[pairs] = caps
            flows = np.flatnonzero(moving & np.isin(pair, pairs))
            r = np.minimum(offered[flows], cap_of_pair[pair[flows]])
            s = start[flows]
            lost[flows] += _port_losses(s, s + size[flows] / r, r, bandwidth, room, window)
        hit = lost > 0
        charge = np.zeros(len(schedule))
        charge[sends[hit]] = topology.rto + lost[hit] / rate[hit]
        return charge

    return rule


def _sender_share(src: np.ndarray, start: np.ndarray, end: np.ndarray, bandwidth: np.ndarray,
                  moving: np.ndarray) -> np.ndarray:
    """Per flow, the rate its sender offers it, B/s: the sender's ``bandwidth`` over the number of
    its moving flows in progress (simulated interval [start, end)) when the flow starts."""
    share = np.full(len(src), np.inf)
    for rank in np.unique(src[moving]):
        mine = np.flatnonzero(moving & (src == rank))
        starts, ends = np.sort(start[mine]), np.sort(end[mine])
        running = np.searchsorted(starts, start[mine], "right") - np.searchsorted(ends, start[mine], "right")
        share[mine] = bandwidth[mine] / running
    return share


def _port_losses(s: np.ndarray, e: np.ndarray, r: np.ndarray, bandwidth: float, room: float,
                 window: float | None = None) -> np.ndarray:
    """Bytes each flow loses at one port of ``bandwidth`` B/s and ``room`` bytes of buffer, the flows
    offering ``r`` B/s over [s, e) (eq. 3-4 per overflow episode; see the module docstring)."""
    times = np.concatenate([s, e])
    delta = np.concatenate([r, -r])
    order = np.lexsort((delta, times))  # at equal times, ends before starts
    times, rate = times[order], np.cumsum(delta[order])
    keep = np.diff(times) > 0  # intervals of positive length, contiguous once the others are dropped
    lo, hi, rate = times[:-1][keep], times[1:][keep], rate[:-1][keep]
    over = rate > bandwidth * (1 + _RATE_SLACK)
    lost = np.zeros(len(s))
    edges = np.flatnonzero(np.diff(np.concatenate([[0], over.astype(np.int8), [0]])))
    for first, stop in zip(edges[::2], edges[1::2], strict=True):
        t0, t1 = lo[first], hi[stop - 1]
        offered = float(np.dot(rate[first:stop], hi[first:stop] - lo[first:stop]))
        mean = offered / (t1 - t0)
        if transfer_ratio(mean, bandwidth, room, offered) >= 1:
            continue
        full = t0 + room / (mean - bandwidth)  # eq. 3
        after = np.clip(np.minimum(e, t1) - np.maximum(s, full), 0, None)
        pushed = (1 - bandwidth / mean) * r * after  # eq. 4's share, lost by senders at line rate
        if window is not None:  # each flow keeps at most a window in flight; what overflows is lost once
            inside = np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None) * r
            flight = np.minimum(inside, window)
            excess = flight.sum() - room
            pushed = np.minimum(pushed, excess * flight / flight.sum()) if excess > 0 else 0.0
        lost += pushed
    return lost
