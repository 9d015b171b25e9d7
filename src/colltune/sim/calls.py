"""Back-to-back calls: the time of the last of several calls of a schedule, each after a barrier.

:func:`colltune.sim.simulate` prices one call with every stream cold.  A benchmark (the fidelity
benchmark, the tuners' timings, an OSU-style client) times a collective as the median of calls
made back to back, each after a barrier, and a program calls its collectives over and over: a
stream that a call used keeps its run into the next call if it was idle for less than
:data:`colltune.sim.topology.TCP_RTO_MIN` in between (:meth:`colltune.sim.topology.Topology.duplex_factor`),
and a link's token bucket refills only while it is idle.  :func:`last_call` builds the schedule of
``calls`` calls, each rank starting a call once its part of the barrier after the previous one is
done, and prices the last one as those benchmarks time it: each rank from its exit of the barrier
before the call to the completion of its last op of the call, the slowest rank.

Where a network is carried over a topology, what colltune prices is that third call
(:func:`steady_call`): the tuner (:class:`colltune.tune.select.SimPricer`), the probe's check that
chooses the profile's network model, and the fidelity benchmark's default predictor
(``simulate:NAME@topology-third``): on the emulated cluster the third call is priced closer and
chooses as well or better than one cold call.  Without a topology the endpoint models keep nothing from one call to the next, and a single
call is priced.
"""

from __future__ import annotations

import numpy as np

from colltune.algorithms import REGISTRY
from colltune.errors import ScheduleError
from colltune.models.params import ParamSet
from colltune.schedule import Kind, Schedule
from colltune.schedule.ir import COLUMNS
from colltune.sim.engine import Sharing, simulate
from colltune.sim.topology import Topology

#: The tags of piece ``k`` of a repeated schedule (a call or a barrier) are its own plus ``k`` times
#: this, so that no message of one piece can match a receive of another.
TAG_STRIDE = 1 << 20
#: The call :func:`steady_call` prices over a topology: the third, the first whose streams and token
#: buckets come from two calls before it as the benchmarks' timed calls do (after two warm-up calls).
STEADY_CALLS = 3


def repeated(call: Schedule, barrier: Schedule, calls: int) -> tuple[Schedule, list[np.ndarray]]:
    """The schedule of ``calls`` calls of ``call``, with ``barrier`` between each two (same
    ``procs``), and for each piece (call, barrier, call, ...) the new global index of each of its
    ops (indexed by the piece's own global op index).  Every op of a piece requires every op of
    the piece before it on its rank: a rank enters the barrier once its call is done and starts
    the next call once it has left the barrier."""
    if calls < 1:
        raise ScheduleError(f"calls must be >= 1, got {calls}")
    if barrier.procs != call.procs:
        raise ScheduleError(f"the barrier has {barrier.procs} ranks, the call {call.procs}")
    for piece, name in ((call, "call"), (barrier, "barrier")):
        tags = piece.columns["tag"][np.isin(piece.columns["kind"], (Kind.SEND, Kind.RECV))]
        if len(tags) and (tags.min() < 0 or tags.max() >= TAG_STRIDE):
            raise ScheduleError(f"the {name}'s tags must lie in 0..{TAG_STRIDE - 1} to be repeated")
    procs = call.procs
    pieces = [call] + [barrier, call] * (calls - 1)
    counts = np.array([np.diff(p.rank_ptr) for p in pieces], dtype=np.int64)  # piece x rank
    rank_ptr = np.zeros(procs + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=rank_ptr[1:])
    before = np.cumsum(counts, axis=0) - counts  # ops of the earlier pieces, per rank
    maps = []
    for k, p in enumerate(pieces):
        rank = p.columns["rank"].astype(np.int64)
        maps.append(rank_ptr[rank] + before[k][rank] + (np.arange(len(p)) - p.rank_ptr[rank]))
    n = int(rank_ptr[-1])
    cols = {name: np.empty(n, dtype=dtype) for name, (dtype, _) in COLUMNS.items()}
    dep_op, dep_on, dep_start = [], [], []
    for k, (p, where) in enumerate(zip(pieces, maps)):
        for name in COLUMNS:
            cols[name][where] = p.columns[name]
        messages = np.isin(p.columns["kind"], (Kind.SEND, Kind.RECV))
        cols["tag"][where[messages]] += k * TAG_STRIDE
        dep_op.append(where[np.repeat(np.arange(len(p)), np.diff(p.dep_ptr))])
        dep_on.append(where[p.dep_idx])
        dep_start.append(np.asarray(p.dep_start, dtype=bool))
        if k == 0:
            continue
        prev, prev_where = pieces[k - 1], maps[k - 1]
        for r in range(procs):
            mine = where[p.rank_ptr[r]:p.rank_ptr[r + 1]]
            theirs = prev_where[prev.rank_ptr[r]:prev.rank_ptr[r + 1]]
            dep_op.append(np.repeat(mine, len(theirs)))
            dep_on.append(np.tile(theirs, len(mine)))
            dep_start.append(np.zeros(len(mine) * len(theirs), dtype=bool))
    ops, on, start = np.concatenate(dep_op), np.concatenate(dep_on), np.concatenate(dep_start)
    order = np.lexsort((on, ops))
    dep_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ops, minlength=n), out=dep_ptr[1:])
    schedule = Schedule(procs=procs, buffer_sizes=np.maximum(call.buffer_sizes, barrier.buffer_sizes),
                        columns=cols, rank_ptr=rank_ptr, dep_ptr=dep_ptr, dep_idx=on[order],
                        dep_start=start[order], meta={**call.meta, "calls": calls})
    return schedule, maps


def last_call(call: Schedule, barrier: Schedule, network: str, params: ParamSet, *, calls: int = 3,
              topology: Topology | None = None, sharing: Sharing = "equal") -> float:
    """Seconds (or the profile's unit): the last of ``calls`` calls of ``call``, each after
    ``barrier`` (see the module docstring), simulated as :func:`colltune.sim.simulate` does; with
    ``calls`` 1, the single call's total."""
    if calls == 1:
        return simulate(call, network, params, topology=topology, sharing=sharing).total
    schedule, maps = repeated(call, barrier, calls)
    end = simulate(schedule, network, params, topology=topology, sharing=sharing).end
    slowest = 0.0
    for r in range(call.procs):
        mine = maps[-1][call.rank_ptr[r]:call.rank_ptr[r + 1]]
        if not len(mine):
            continue
        left = maps[-2][barrier.rank_ptr[r]:barrier.rank_ptr[r + 1]]
        slowest = max(slowest, float(end[mine].max()) - (float(end[left].max()) if len(left) else 0.0))
    return slowest


def steady_call(call: Schedule, network: str, params: ParamSet, *, topology: Topology | None = None,
                sharing: Sharing = "equal") -> float:
    """Seconds (or the profile's unit): ``call`` as a program that makes it over and over meets it,
    and as a benchmark times it (see the module docstring): over ``topology``, the last of
    :data:`STEADY_CALLS` calls, each after a dissemination barrier (MPICH's barrier, which the
    benchmarks call between two calls); without one, the single call's total."""
    if topology is None:
        return simulate(call, network, params, sharing=sharing).total
    barrier = REGISTRY.get("barrier", "dissemination").schedule(call.procs, 0, 0)
    return last_call(call, barrier, network, params, calls=STEADY_CALLS, topology=topology, sharing=sharing)


__all__ = ["STEADY_CALLS", "TAG_STRIDE", "last_call", "repeated", "steady_call"]
