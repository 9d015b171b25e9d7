"""Network models of the simulator: how each model's parameters price one message.

Every model turns the messages of a schedule into the engine's per-message columns (seconds, or
the profile's abstract unit):

- ``cs``: how long the send keeps the sender's CPU busy;
- ``gs``: how long it keeps the sender's NIC busy (the gap before the next send);
- ``lat``: from the send's start to the message's arrival at the receiver (with a topology: from
  the end of its flow);
- ``cr``, ``gr``: how long processing the arrived message keeps the receiver's CPU and NIC busy; the
  receive completes when the CPU part is done;
- ``rdv``: whether the send waits for its receive to be matched (rendezvous);
- ``ack``: with a topology whose ``ack_above`` is set, how long after its message was processed
  the send completes (the acknowledgement's way back), or -1 (it does not wait for one);
- ``vol``: with a topology, the units of link capacity the message's flow must carry.

Local operations cost ``delay`` seconds (DELAY ops), ``gamma`` per byte for reductions when the
model has one (Hockney), and nothing otherwise.  Models register with :func:`network`; the CLI's
``--model`` choices and ``docs/simulator.md`` come from :data:`NETWORKS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from colltune.errors import ColltuneError
from colltune.models.params import (
    ClusterModel,
    Hockney,
    LatencyMatrix,
    LogGP,
    LogP,
    ParamSet,
    PLogP,
    PlogPT,
    PLogPTable,
    Postal,
    Tabulated,
)
from colltune.schedule import Kind, Schedule
from colltune.sim.topology import Topology, binary_tree

if TYPE_CHECKING:
    from colltune.profiles.format import Profile


class NetworkError(ColltuneError):
    """A network model that cannot time this schedule (missing parameters, wrong size)."""


@dataclass(frozen=True)
class Messages:
    """The messages of some ops of a schedule, one entry per op (meaningful at SEND ops): ``size``
    bytes, ``src`` and ``dst`` ranks, ``sends`` the mask of SEND ops; ``procs`` is P."""

    size: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    sends: np.ndarray
    procs: int

    @classmethod
    def of(cls, schedule: Schedule, ops: np.ndarray | None = None) -> Messages:
        """The messages of ``schedule``'s ops, or of the ops numbered ``ops``."""
        c = schedule.columns

        def pick(a: np.ndarray) -> np.ndarray:
            return a if ops is None else a[ops]

        return cls(pick(c["length"]), pick(c["rank"]), pick(c["peer"]), pick(c["kind"]) == Kind.SEND, schedule.procs)

    def per_size(self, fn: Callable[[int], float]) -> np.ndarray:
        """``fn(size)`` at every op, computed once per distinct size."""
        sizes, inverse = np.unique(self.size, return_inverse=True)
        return np.array([fn(int(s)) for s in sizes], dtype=np.float64)[inverse.reshape(-1)]


@dataclass
class Costs:
    """The engine's per-op columns for one schedule (see the module docstring)."""

    cs: np.ndarray
    gs: np.ndarray
    lat: np.ndarray
    cr: np.ndarray
    gr: np.ndarray
    rdv: np.ndarray
    vol: np.ndarray | None = None
    topology: Topology | None = None
    ack: np.ndarray | None = None


@dataclass(frozen=True)
class Network:
    """A registered network model: its name, the profile model its parameters come from, how it
    prices messages, and its documentation."""

    name: str
    params: str
    source: str
    doc: str
    price: Callable[[ParamSet, Messages], Costs]
    own_topology: bool = False  # it builds its network from its parameters; --topology does not apply
    by_size: bool = False  # a message's costs depend on its size alone (not on its ranks)

    @property
    def summary(self) -> str:
        return " ".join(self.doc.strip().split("\n\n")[0].split())


NETWORKS: dict[str, Network] = {}


def network(name: str, params: str, source: str, doc: str | None = None, own_topology: bool = False,
            by_size: bool = False) -> Callable[
        [Callable[[ParamSet, Messages], Costs]], Callable[[ParamSet, Messages], Costs]]:
    """Register a network model ``name`` priced from the profile model ``params``; its
    documentation is ``doc`` or the function's docstring; ``own_topology``: it builds its switched
    network from its parameters (a topology cannot carry it); ``by_size``: it prices a message by
    its size alone, so the simulator prices each size once."""
    def deco(fn: Callable[[ParamSet, Messages], Costs]) -> Callable[[ParamSet, Messages], Costs]:
        if name in NETWORKS:
            raise ValueError(f"network model {name!r} registered twice")
        NETWORKS[name] = Network(name, params, source, doc or fn.__doc__ or "", fn, own_topology, by_size)
        return fn
    return deco


def default_network(model: str) -> str:
    """The first network model priced from the profile model ``model``."""
    for net in NETWORKS.values():
        if net.params == model:
            return net.name
    raise NetworkError(f"no network model simulates the {model!r} parameters; valid: {', '.join(NETWORKS)}")


def profile_network(profile: Profile) -> str:
    """The network model to simulate ``profile`` with when none is named: its ``default_network``
    (which ``colltune probe`` chooses from its measurements), else the first one priced from its
    ``default_model``."""
    return profile.default_network or default_network(profile.default_model)


def topology_for(topology: Topology | None, network: str, procs: int) -> Topology | None:
    """What carries ``network`` for ``procs`` ranks over ``topology`` (a profile's, say): its
    first ``procs`` ranks, for an endpoint model and a job no larger than it; else None (PlogPT
    brings its own tree; a larger job has no hosts to run on)."""
    if topology is None or NETWORKS[network].own_topology or procs > topology.procs:
        return None
    return topology.first(procs)


def _columns(msgs: Messages, cs, gs, lat, cr, gr, rdv=None) -> Costs:  # type: ignore[no-untyped-def]
    n = len(msgs.sends)

    def full(x: float | np.ndarray) -> np.ndarray:
        out = np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)).copy()
        out[~msgs.sends] = 0.0
        return out

    flags = np.zeros(n, dtype=np.uint8) if rdv is None else (np.asarray(rdv) & msgs.sends).astype(np.uint8)
    return Costs(full(cs), full(gs), full(lat), full(cr), full(gr), flags)


@network("loggops", "loggp", "LogGOPSim (Hoefler, Schneider, Lumsdaine 2010), its 2023 rules", by_size=True)
def _loggops(p: LogGP, msgs: Messages) -> Costs:
    """LogGOPS endpoints, by LogGOPSim's rules.

    A send of s bytes keeps the sender's CPU busy for o + (s-1)O and its NIC for g + (s-1)G; the
    message arrives o + L after the send started and keeps the receiver's CPU busy for
    o + max((s-1)O, (s-1)G) and its NIC for g + (s-1)G.  Sends above S bytes are rendezvous: they
    complete when their receive is matched.  (s-1) is taken as 0 for empty messages.
    """
    extra = np.maximum(msgs.size - 1, 0).astype(np.float64)
    return _columns(msgs, p.o + extra * p.O, p.g + extra * p.G, p.o + p.L, p.o + np.maximum(extra * p.O, extra * p.G),
                    p.g + extra * p.G, msgs.size > p.S)


@network("logp", "logp", "Culler et al. 1993", by_size=True)
def _logp(p: LogP, msgs: Messages) -> Costs:
    """LogP endpoints: LogGOPS with G = O = 0 and no rendezvous.

    A send keeps the CPU busy for o and the NIC for g; the message arrives o + L after the start
    and costs the receiver o of CPU and g of NIC.
    """
    return _columns(msgs, p.o, p.g, p.o + p.L, p.o, p.g)


@network("postal", "postal", "Bar-Noy and Kipnis 1992; paper 000 footnote 2", by_size=True)
def _postal(p: Postal, msgs: Messages) -> Costs:
    """The Postal model: a send keeps the sender busy for one step; the message is there lambda
    after the send started; receiving is free."""
    return _columns(msgs, p.step, p.step, p.lam, 0.0, 0.0)


@network("hockney", "hockney", "Hockney 1994", by_size=True)
def _hockney(p: Hockney, msgs: Messages) -> Costs:
    """Hockney's linear model: a message of m bytes takes alpha + beta m, during which its sender
    can send nothing else (one port, full duplex); receiving is free."""
    t = p.alpha + p.beta * msgs.size.astype(np.float64)
    return _columns(msgs, t, t, t, 0.0, 0.0)


def _plogp(table: PLogPTable, L: float, msgs: Messages) -> Costs:
    zero = Tabulated.constant(0.0)
    g = msgs.per_size(table.g)
    os_ = msgs.per_size(table.os or zero)
    or_ = msgs.per_size(table.or_ or zero)
    return _columns(msgs, os_, g, np.maximum(g + L - or_, 0.0), or_, g)


_PLOGP_DOC = """A send of m bytes keeps the sender's CPU busy for os(m) and its NIC for g(m); the receive
completes g(m) + L after the send started (so the message reaches the receiver's CPU
g(m) + L - or(m) after the start), and the receiver's NIC takes one message per g(m).  A missing
os or or is 0.  Table 1 and 2 of paper 003 follow from these rules where their assumptions hold.
"""


@network("plogp", "plogp", "Kielmann et al. 2000; paper 003 section 2", by_size=True, doc=
         "pLogP endpoints with the unidirectional os(m), or(m) and g(m).\n\n" + _PLOGP_DOC)
def _plogp_uni(p: PLogP, msgs: Messages) -> Costs:
    return _plogp(p.unidirectional, p.L, msgs)


@network("plogp-bi", "plogp", "paper 001 section III-B-1", by_size=True, doc=
         "pLogP endpoints with the bidirectional os(m), or(m) and g(m), measured with both ends sending.\n\n"
         + _PLOGP_DOC)
def _plogp_bi(p: PLogP, msgs: Messages) -> Costs:
    if p.bidirectional is None:
        raise NetworkError("plogp-bi needs the profile's bidirectional pLogP table")
    return _plogp(p.bidirectional, p.L, msgs)




@network("cluster", "cluster", "paper 000 section 3, eq. 2", by_size=True)
def _cluster(p: ClusterModel, msgs: Messages) -> Costs:
    """Paper 000's cluster model: receiving occupies the CPU, so a node that receives delays its
    own sends (eq. 2).

    A message of m bytes travels as n = ceil(m / mtu) packets of at most mtu bytes (at least one).
    The send keeps the CPU busy for n Os and the NIC for n gs; the last packet arrives
    Os + L(packet, P) + (n-1) max(gs, gr) after the start; processing it costs the receiver
    Or + Ur of CPU, and its NIC takes n gr.  For one packet this is eq. 2's hop Os + L + Or + Ur.
    """
    P = msgs.procs

    def one(m: int) -> tuple[float, ...]:
        n = max(1, math.ceil(m / p.mtu))
        s = min(m, p.mtu)
        gap = max(p.gs(s), p.gr(s))
        return (n * p.Os(s), n * p.gs(s), p.Os(s) + p.latency(s, P) + (n - 1) * gap, p.Or(s) + p.Ur(s),
                n * p.gr(s))

    sizes, inverse = np.unique(msgs.size, return_inverse=True)
    table = np.array([one(int(s)) for s in sizes], dtype=np.float64).reshape(-1, 5)[inverse.reshape(-1)]
    return _columns(msgs, *table.T)


@network("latency", "latency", "paper 004 eq. 2")
def _latency(p: LatencyMatrix, msgs: Messages) -> Costs:
    """Per-pair latency from a latency matrix (grids, paper 004).

    A send keeps the sender's CPU busy for T_SO and its NIC for T_SO + T_G; the message arrives
    L(i, j) after the start and costs the receiver T_RO.  A child that is sent to c-th by its parent
    thus receives (c-1)(T_SO + T_G) + L(j, i) + T_RO after its parent had the message (eq. 2).
    Message sizes do not enter.  A schedule of fewer ranks than the matrix runs on its first P ranks
    (where a tune in an MPI job times its smaller communicators: :mod:`colltune.tune.subcomms`).
    """
    if len(p.names) < msgs.procs:
        raise NetworkError(f"the latency matrix has {len(p.names)} ranks; the schedule has P = {msgs.procs}")
    matrix = np.asarray(p.latency, dtype=np.float64)
    lat = np.zeros(len(msgs.sends))
    lat[msgs.sends] = matrix[msgs.src[msgs.sends], msgs.dst[msgs.sends]]
    return _columns(msgs, p.o_s, p.o_s + p.gap, lat, p.o_r, 0.0)


@network("plogpt", "plogpt", "paper 001 section III-B and III-D, eq. 6-7, 12-15", own_topology=True)
def _plogpt(p: PlogPT, msgs: Messages) -> Costs:
    """PlogPT: flows on the perfect binary tree of switches with b(h) per edge of height h.

    Posting a send or a receive costs nothing (eq. 12); a send's flow carries b(1) g(m) (eq. 6)
    at the equal share of its bottleneck edge (eq. 7), and the send completes when the flow ends
    (eq. 13); the receive completes L later (eq. 15).  With d(h), T_RTO and epsilon_T in the
    profile, the retransmission rule of eq. 8, 9 and 14 adds T_RTO to a send that ends while
    another send to the same destination starts within epsilon_T, across a switch, with the
    buffers full.
    """
    if p.g is None or p.L is None:
        missing = " and ".join(n for n, v in (("g", p.g), ("L", p.L)) if v is None)
        raise NetworkError(f"plogpt needs {missing}; give them in the profile or with --set")
    costs = _columns(msgs, 0.0, 0.0, p.L, 0.0, 0.0)
    costs.vol = np.where(msgs.sends, p.bidirectional.b[0] * msgs.per_size(p.g), 0.0)
    costs.topology = binary_tree(msgs.procs, p.bidirectional)
    return costs


def on_topology(costs: Costs, msgs: Messages, topology: Topology, back: np.ndarray | None = None) -> Costs:
    """Carry the messages of ``costs`` as flows over ``topology``, each carrying its bytes on the
    wire (its size, with its frames' headers where the topology gives ``framing``:
    :meth:`~colltune.sim.topology.Topology.on_wire`), without counting the wire twice.

    An endpoint model measured on a network already holds its wire time: g(m), beta m, G m grow
    with the bytes on the link.  The flow now carries them, so the endpoint's costs keep only what
    exceeds the message's wire time on its path alone, w = v / (the narrowest link of the path), v
    its bytes on the wire, or
    (v - b) / (the narrowest link) when every link of the path passes b bytes at once after an idle
    spell (the least :attr:`~colltune.sim.topology.Node.burst` of the path; the engine's buckets;
    :meth:`~colltune.sim.topology.Topology.wire_times`):
    the sender's CPU and NIC times and the receiver's NIC gap lose w (a blocking send of a large
    message returns once its bytes are on the wire, so os(m) holds them too), and the time from
    the send to the receive's completion loses w, taken
    from the latency first and from the receiver's processing for what the latency lacks (LogGOPS
    counts the bytes there).  The path's link latencies are added to the latency.  A message that
    has its path to itself thus takes what the endpoint model says (plus the link latencies), and
    sharing a link is what makes it slower.

    Where the topology's ``ack_above`` is set, a send of more bytes completes ``back`` (s per op:
    for a send, the endpoint model's latency of an empty message from its receiver to its sender;
    0 if not given) plus the path's link latencies after its message was processed: the
    acknowledgement's way back: MPICH over libfabric's tcp provider completes a send above 128 B
    only then, so a ring of such steps takes one more latency a step.

    Where the topology gives ``shared_memory``, a message between two ranks of one host costs what
    :meth:`~colltune.sim.topology.Topology.memory_costs` says instead of the endpoint model's
    (which was measured over the network): its sender copies it, it arrives the shared memory's
    latency later, its receiver only matches it, and it waits for no acknowledgement."""
    if topology.procs != msgs.procs:
        raise NetworkError(f"the topology places {topology.procs} ranks; the schedule has P = {msgs.procs}")
    src, dst = msgs.src[msgs.sends], msgs.dst[msgs.sends]
    path_lat, _ = topology.pair_properties(src, dst)
    wire = np.zeros(len(msgs.sends))
    wire[msgs.sends] = topology.wire_times(src, dst, msgs.size[msgs.sends])

    def less_wire(column: np.ndarray) -> np.ndarray:
        return np.maximum(column - wire, 0.0)

    lat = less_wire(costs.lat)
    cr = np.maximum(costs.cr - np.maximum(wire - costs.lat, 0.0), 0.0)
    lat[msgs.sends] += path_lat
    vol = np.where(msgs.sends, topology.on_wire(msgs.size), 0.0)
    ack = None
    if topology.ack_above is not None:
        ack = np.full(len(msgs.sends), -1.0)
        big = msgs.size[msgs.sends] > topology.ack_above
        waits = np.flatnonzero(msgs.sends)[big]
        ack[waits] = (0.0 if back is None else back[waits]) + path_lat[big]
    cs, gs, gr = less_wire(costs.cs), less_wire(costs.gs), less_wire(costs.gr)
    if topology.shared_memory is not None:
        host_node = topology.arrays()[4]
        local = np.flatnonzero(msgs.sends)[host_node[src] == host_node[dst]]
        if len(local):
            busy, arrive = topology.memory_costs(msgs.size[local])
            cs[local], gs[local], lat[local], cr[local], gr[local] = busy, busy, arrive, 0.0, 0.0
            vol[local] = 0.0
            if ack is not None:
                ack[local] = -1.0
    return Costs(cs, gs, lat, cr, gr, costs.rdv, vol, topology, ack)


def local_costs(schedule: Schedule, params: ParamSet, ops: np.ndarray | None = None) -> np.ndarray:
    """CPU time of every local op (of the ops numbered ``ops``), s: DELAY ops their delay;
    reductions ``gamma`` per byte when the parameters have one (Hockney); copies nothing; 0 for
    sends and receives."""
    c = schedule.columns
    kind, delay, length = (c[name] if ops is None else c[name][ops] for name in ("kind", "delay", "length"))
    cost = np.where(kind == Kind.DELAY, delay, 0.0).astype(np.float64)
    gamma = getattr(params, "gamma", None)
    if gamma:
        red = kind == Kind.REDUCE
        cost[red] = gamma * length[red]
    return cost
