"""Time a schedule on a network model: the Python face of the C++ engine (``_engine.cpp``).

:func:`simulate` prices the schedule's messages with a registered network model
(:mod:`colltune.sim.network`), hands the schedule's columns to the engine without copying them,
and returns a :class:`SimResult`: per op its start and end, per rank its completion, and the
total.  For PlogPT with its retransmission rule (paper 001 eq. 8, 9, 14), the rule looks at sends
that start around the time another one ends, which a causal simulation cannot know in advance:
colltune simulates without retransmissions, marks the sends the rule hits, simulates again with
T_RTO added to them, and repeats until no further send is hit (at most ``MAX_RTO_ROUNDS`` times).
Finite switch-port buffers (:mod:`colltune.sim.drops`, paper 000 eq. 3-4) are charged the same way.
A topology's ``send_hold`` adds to every send's processor time ``cs`` a random hold (exponential,
of that mean; the message still leaves at once): the schedule is simulated with ``HOLD_DRAWS``
seeded draws and the draw of median total is the result, so that the same inputs always give the
same times.  Without a topology the engine counts whole picoseconds (:data:`TICKS`), so that its
sums are exact and its ties those of an integer clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from colltune.errors import ColltuneError
from colltune.limits import MAX_PROCS
from colltune.models.params import ParamSet, PlogPT
from colltune.models.plogpt import switch_between
from colltune.schedule import Buf, Kind, Region, Schedule, ScheduleBuilder
from colltune.sim import _engine
from colltune.sim.drops import Rule, drop_rule
from colltune.sim.network import NETWORKS, Costs, Messages, Network, NetworkError, local_costs, on_topology
from colltune.sim.topology import TCP_RTO_MIN, Topology

MAX_RTO_ROUNDS = 10
#: Without a topology the engine counts time in whole ticks, this many to the second (picoseconds;
#: or 10^-12 of a profile's abstract unit): each op's costs are rounded to the nearest tick, so
#: that every sum the engine makes is exact, as in an integer clock (LogGOPSim's), below 2^53 ticks
#: (about 2.5 hours); ties then break as they would in integers, not by how the sums round.
TICKS = 1e12
#: Seeded draws of a topology's ``send_hold`` (seeds 0 .. HOLD_DRAWS-1); the simulation keeps the
#: draw of median total.  Odd, so that the median is a draw; five keep a schedule's price at five
#: simulations.
HOLD_DRAWS = 5

Sharing = Literal["equal", "maxmin"]


class SimulationError(ColltuneError):
    """A schedule that cannot complete (a receive without its send, a cycle of waits)."""


@dataclass(frozen=True, eq=False)
class SimResult:
    """A simulated run.  Times are in seconds (or the profile's abstract unit).  Without a topology
    ``flow_end``, ``flow_rate``, ``rto`` and ``penalty`` are read-only views of one value at every
    op (NaN, NaN, False, 0), held once.

    Attributes
    ----------
    total:
        When the last rank is done (its CPU idle and its last op complete).
    completion:
        ``(P,)``: when each rank is done.
    start, end:
        Per op: when it started (a send left, a receive was posted, a local op began) and when it
        completed (a receive: its message processed; a send: it may be reused).
    flow_end, flow_rate:
        Per send with a topology: when its flow ended and its rate then (units per second); NaN
        elsewhere.
    rto:
        Per op: True for the sends charged a retransmission timeout.
    penalty:
        Per op: the retransmission charge added between its flow's end and its arrival (0 if none).
    """

    network: str
    total: float
    completion: np.ndarray
    start: np.ndarray
    end: np.ndarray
    flow_end: np.ndarray
    flow_rate: np.ndarray
    rto: np.ndarray
    penalty: np.ndarray
    events: int
    messages: int
    rounds: int = 1
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self, ops: bool = False) -> dict[str, Any]:
        """JSON-ready summary; with ``ops``, the per-op times too."""
        out: dict[str, Any] = {"network": self.network, "total": self.total, "completion": self.completion.tolist(),
                               "messages": self.messages, "events": self.events,
                               "retransmissions": int(self.rto.sum()), "rounds": self.rounds, **self.meta}
        if ops:
            out["start"] = self.start.tolist()
            out["end"] = self.end.tolist()
        return out


def _column(schedule: Schedule, name: str, dtype: type) -> np.ndarray:
    arr = schedule.columns[name] if name in schedule.columns else getattr(schedule, name)
    return np.ascontiguousarray(arr, dtype=dtype)  # no copy when the type already matches


@dataclass(frozen=True)
class Classes:
    """Ops that cost the same under a network that prices messages by their size alone (the same
    kind, length and delay): ``of`` gives each op's class (int32), ``ops`` one op of each."""

    of: np.ndarray
    ops: np.ndarray

    @classmethod
    def of_schedule(cls, schedule: Schedule) -> Classes:
        of, ops = _engine.op_classes(_column(schedule, "kind", np.int8), _column(schedule, "length", np.int64),
                                     _column(schedule, "delay", np.float64))
        return cls(of, ops)


def price(schedule: Schedule, network: str, params: ParamSet,
          topology: Topology | None = None) -> tuple[Costs, Classes | None]:
    """The engine's cost columns for ``schedule`` on ``network`` (a name in :data:`NETWORKS`),
    carried over ``topology`` if given: one entry per op, or, where the network prices by size
    alone and no topology carries it, one per class of ops that cost the same (the classes
    returned beside), so that a million messages of one size are priced, and held, once."""
    net = NETWORKS.get(network)
    if net is None:
        raise NetworkError(f"unknown network model {network!r}; valid: {', '.join(NETWORKS)}")
    classes = Classes.of_schedule(schedule) if net.by_size and topology is None else None
    msgs = Messages.of(schedule, None if classes is None else classes.ops)
    costs = net.price(params, msgs)
    if topology is not None:
        if costs.topology is not None:
            raise NetworkError(f"{network} brings its own topology; --topology applies to endpoint models only")
        back = None if topology.ack_above is None else _ack_latency(net, params, msgs)
        costs = on_topology(costs, msgs, topology, back)
    return costs, classes


def _ack_latency(net: Network, params: ParamSet, msgs: Messages) -> np.ndarray:
    """Per send of ``msgs``, ``net``'s latency (s) of an empty message the other way, from its start
    to its arrival: what the receiver's acknowledgement takes (:func:`colltune.sim.network.on_topology`),
    priced once per pair of ranks."""
    back = np.stack([msgs.dst[msgs.sends], msgs.src[msgs.sends]], axis=1)
    pairs, which = np.unique(back, axis=0, return_inverse=True)
    b = ScheduleBuilder(msgs.procs)
    for sender, receiver in pairs:
        b.recv(int(receiver), int(sender), Region(Buf.RECV, 0, 0))
        b.send(int(sender), int(receiver), Region(Buf.SEND, 0, 0))
    empty = b.build()
    sends = empty.columns["kind"] == Kind.SEND
    lat = net.price(params, Messages.of(empty)).lat[sends]
    order = np.lexsort((empty.columns["peer"][sends], empty.columns["rank"][sends]))  # as np.unique sorts
    out = np.zeros(len(msgs.sends))
    out[msgs.sends] = lat[order][which.reshape(-1)]
    return out


def simulate(schedule: Schedule, network: str, params: ParamSet, *, topology: Topology | None = None,
             sharing: Sharing = "equal") -> SimResult:
    """Time ``schedule`` on ``network`` with ``params``.

    ``topology`` carries the messages of an endpoint model as flows over a switched network;
    ``sharing`` is how a link's bandwidth is split among the streams crossing it (the messages of
    one sender to one receiver form one stream, carried in order, as over one TCP connection):
    ``equal`` (paper 001 eq. 7: each stream gets the minimum over its path of capacity / streams)
    or ``maxmin`` (max-min fairness).  Registry schedules post each rank's ops in list order (an implicit *irequires*
    of each op on the one before it); schedules read from GOAL carry only their own dependencies.
    """
    if schedule.procs > MAX_PROCS:
        raise SimulationError(f"the simulator handles up to {MAX_PROCS} ranks; the schedule has {schedule.procs}")
    if sharing not in ("equal", "maxmin"):
        raise SimulationError(f"sharing must be 'equal' or 'maxmin', not {sharing!r}")
    with np.errstate(over="ignore", invalid="ignore"):  # _check_finite names what overflowed
        costs, classes = price(schedule, network, params, topology)
        cost = local_costs(schedule, params, None if classes is None else classes.ops)
    _check_finite(schedule, {"local cost": cost, **{name: getattr(costs, name) for name in ("cs", "gs", "lat", "cr",
                                                                                            "gr", "rdv")}},
                  None if classes is None else classes.ops)
    rules = [] if costs.topology is None else \
        [rule for rule in (_rto_rule(params, costs), drop_rule(costs.topology, costs.vol)) if rule is not None]
    hold = 0.0 if costs.topology is None else costs.topology.send_hold
    if hold == 0:
        raw, arrays, penalty, rounds = _charged(schedule, costs, classes, cost, rules, sharing)
    else:  # the draw of median total among HOLD_DRAWS seeded ones
        sends = schedule.columns["kind"] == Kind.SEND
        draws = []
        for seed in range(HOLD_DRAWS):
            held = np.random.default_rng(seed).exponential(hold, len(schedule)) * sends
            draws.append(_charged(schedule, replace(costs, cs=costs.cs + held), None, cost, rules, sharing))
        raw, arrays, penalty, rounds = sorted(draws, key=lambda d: float(d[0]["total"]))[HOLD_DRAWS // 2]
    meta: dict[str, Any] = {} if costs.topology is None else {"sharing": sharing}
    if hold:
        meta.update(send_hold=hold, draws=HOLD_DRAWS)
    n = len(schedule)
    none = np.broadcast_to(np.nan, (n,))  # no flows: NaN at every op, held once
    return SimResult(network=network, total=float(raw["total"]), completion=arrays["completion"],
                     start=arrays["start"], end=arrays["end"], flow_end=arrays.get("flow_end", none),
                     flow_rate=arrays.get("flow_rate", none),
                     rto=penalty > 0 if costs.topology is not None else np.broadcast_to(False, (n,)), penalty=penalty,
                     events=int(raw["events"]), messages=schedule.num_messages, rounds=rounds, meta=meta)


def _charged(schedule: Schedule, costs: Costs, classes: Classes | None, cost: np.ndarray, rules: list[Rule],
             sharing: Sharing) -> tuple[dict[str, Any], dict[str, np.ndarray], np.ndarray, int]:
    """One simulation with the retransmission and drop ``rules`` charged until no further op is hit:
    the engine's raw result, its arrays, the per-op charges (s; without a topology none, held as
    one zero) and the rounds it took."""
    n = len(schedule)
    penalty = np.zeros(n) if costs.topology is not None else np.broadcast_to(0.0, (n,))
    for rounds in range(1, MAX_RTO_ROUNDS + 2):
        raw, arrays = _run(schedule, costs, classes, cost, penalty, sharing)
        if not rules or rounds > MAX_RTO_ROUNDS:
            break
        charge = sum(rule(schedule, arrays) for rule in rules)
        new = (charge > 0) & (penalty == 0)  # an op keeps the charge of the round that first hit it
        if not new.any():
            break
        penalty[new] = charge[new]
    _check_complete(schedule, raw, arrays)
    return raw, arrays, penalty, rounds


def _run(schedule: Schedule, costs: Costs, classes: Classes | None, cost: np.ndarray, penalty: np.ndarray,
         sharing: Sharing) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    n, P = len(schedule), schedule.procs
    flows = ("flow_start", "flow_end", "flow_rate") if costs.topology is not None else ()
    arrays = {name: np.empty(n) for name in ("start", "end", *flows)}
    arrays["completion"] = np.zeros(P)
    none_i, none_f = np.zeros(0, dtype=np.int32), np.zeros(0)
    duplex_sizes, duplex_shares, trunk_duplex, cores, core_cost = none_f, none_f, none_f, 0, none_f
    many = (0.0, 0.0)
    if costs.topology is not None:
        if costs.topology.cores is not None:
            cores, core_cost = costs.topology.cores, costs.topology.message_cpu_of(schedule.columns["length"])
        parent, up, down, _, host_node = costs.topology.arrays()
        burst, vol = costs.topology.bursts(), costs.vol
        fifo = 0.0 if costs.topology.window is None else float(costs.topology.on_wire(costs.topology.window))
        if costs.topology.duplex is not None:  # looked up by each stream's run (Topology.duplex_factor)
            duplex_sizes, duplex_shares = (np.array(column, dtype=np.float64) for column in zip(*costs.topology.duplex))
            if costs.topology.duplex_streams is not None:
                many = costs.topology.duplex_streams
        if costs.topology.trunk_duplex is not None:
            trunk_duplex = costs.topology.trunk_duplex_factor(schedule.columns["length"])
    else:
        parent, up, down, burst, host_node, vol, fifo = none_i, none_f, none_f, none_f, none_i, none_f, 0.0
    ticks = 1.0 if costs.topology is not None else TICKS
    cs, gs, lat, cr, gr = costs.cs, costs.gs, costs.lat, costs.cr, costs.gr
    if ticks != 1.0:  # whole ticks: every sum the engine makes is exact
        cost, cs, gs, lat, cr, gr = (np.rint(column * ticks) for column in (cost, cs, gs, lat, cr, gr))
    raw = _engine.simulate(
        P, _column(schedule, "kind", np.int8), _column(schedule, "rank", np.int32),
        _column(schedule, "peer", np.int32), _column(schedule, "tag", np.int32),
        _column(schedule, "rank_ptr", np.int64), _column(schedule, "dep_ptr", np.int64),
        _column(schedule, "dep_idx", np.int64), _column(schedule, "dep_start", np.bool_),
        bool(schedule.meta.get("posting_order", True)), none_i if classes is None else classes.of, cost, cs, gs, lat, cr, gr,
        costs.rdv, none_f if costs.ack is None else costs.ack, vol,
        penalty if costs.topology is not None else none_f, duplex_sizes, duplex_shares, TCP_RTO_MIN,
        float(many[0]), float(many[1]), trunk_duplex, parent, up, down,
        burst, host_node,
        sharing == "maxmin", fifo, cores, core_cost, arrays["start"], arrays["end"],
        *(arrays[name] if name in arrays else none_f for name in ("flow_start", "flow_end", "flow_rate")),
        arrays["completion"])
    if ticks != 1.0:
        for column in arrays.values():
            column /= ticks
        raw["total"] /= ticks
    return raw, arrays


def _check_finite(schedule: Schedule, columns: dict[str, np.ndarray], ops: np.ndarray | None = None) -> None:
    """Raise :class:`SimulationError` naming the first op that a column (of one entry per op, or
    per class of ops, ``ops`` naming one op of each) prices at an infinite or undefined time
    (parameters too large for a double: 1e308 s/B times 1000 B)."""
    for name, column in columns.items():
        bad = np.flatnonzero(~np.isfinite(column))
        if len(bad):
            op = int(bad[0]) if ops is None else int(ops[bad[0]])
            raise SimulationError(f"the model's times overflow: {schedule.describe(op)} costs {column[bad[0]]} "
                                  f"s ({name}); its parameters are too large to simulate")


def _check_complete(schedule: Schedule, raw: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    if np.isinf(raw["total"]) or np.isinf(arrays["end"]).any():  # (ops that never ran end in NaN)
        raise SimulationError(f"the simulated times overflow (total {raw['total']} s): the model's parameters are "
                              f"too large to simulate")
    if raw["unfinished"]:
        i = int(raw["first_unfinished"])
        state = "started but never completed" if raw["first_unfinished_started"] else "never started"
        raise SimulationError(f"the schedule cannot complete: {raw['unfinished']} ops are stuck, the first is "
                              f"{schedule.describe(i)}, which {state} (a receive without its send, or a cycle "
                              f"of waits)")
    if raw["unreceived"]:
        raise SimulationError(f"{raw['unreceived']} messages arrived that no receive matched")


def _rto_rule(params: ParamSet, costs: Costs) -> Rule | None:
    """The sends paper 001's RTO rule (eq. 8, 9, 14) hits, charged T_RTO; None when the profile
    lacks d(h), T_RTO or epsilon_T."""
    if not isinstance(params, PlogPT) or params.eps_t is None or params.bidirectional.d is None \
            or params.t_rto <= 0:
        return None
    tree, eps_s, eps_t = params.bidirectional, params.eps_s, params.eps_t
    topology = costs.topology
    assert topology is not None

    def rule(schedule: Schedule, arrays: dict[str, np.ndarray]) -> np.ndarray:
        c = schedule.columns
        sends = np.flatnonzero(c["kind"] == Kind.SEND)
        src, dst = c["rank"][sends], c["peer"][sends]
        _, height = topology.pair_properties(src, dst)
        start, ends, rate = arrays["start"][sends], arrays["flow_end"][sends], arrays["flow_rate"][sends]
        d = np.asarray(tree.d)[np.maximum(height, 1) - 1]
        full = (height > 0) & (d * rate < c["length"][sends])  # P_B, eq. 8-9
        order = np.lexsort((start, dst))
        dst_sorted, start_sorted = dst[order], start[order]
        out = np.zeros(len(schedule))
        for k in np.flatnonzero(full):
            lo = np.searchsorted(dst_sorted, dst[k], "left")
            hi = np.searchsorted(dst_sorted, dst[k], "right")
            window = order[lo + np.flatnonzero(np.abs(start_sorted[lo:hi] - ends[k]) < eps_t)]
            if any(j != k and height[j] > 0 and switch_between(tree, int(height[k]), int(height[j]), eps_s)
                   for j in window):
                out[sends[k]] = params.t_rto
        return out

    return rule
