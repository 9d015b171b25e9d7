"""Switched topologies for the simulator: a tree of switches with per-link bandwidth and latency.

A topology is a rooted tree of nodes: switches and the hosts at its leaves (ranks are mapped
to hosts by ``hosts``; two ranks on one host talk without crossing a link).  Every node but the
root has one link to its parent, full duplex: ``up`` bytes per second towards the parent, ``down``
from it, and ``latency`` seconds each way.  A message from rank a to rank b climbs from a's host
to the lowest common switch and descends to b's host; its flow shares each link it crosses with
the other flows crossing that link in the same direction (paper 001 eq. 6-7); the flows of one
sender to one receiver form one stream that takes one share and carries them in order, as MPI's
messages between two ranks share one connection.  With a ``window`` (TCP's, bytes), a sender's
messages within it leave its host one after the other in posting order, as from a NIC's queue; a
link with a ``burst`` (a token bucket) passes that many bytes at once after an idle spell; with a
``duplex`` table, a flow can use only a share of the link into a host that sends
(:meth:`Topology.duplex_factor`), and with a ``trunk_duplex`` table only a share of a link between
two switches that carries data the other way (:meth:`Topology.trunk_duplex_factor`); with
``cores``, the hosts share that many processor cores, and a message takes one at each end for
``message_cpu`` seconds, waiting when more want them than there are
(:meth:`Topology.message_cpu_of`); with a ``send_hold``, every send keeps its sender busy for a
random time of that mean, so that ranks stop moving in lock step (:func:`colltune.sim.simulate`).

The file format (JSON, ``format: colltune-topology``, ``version: 1``) is the one the [testbed]
writes for the network it emulates, so that simulation and emulation describe the same network.
Built-in shapes: :func:`star` (one switch) and :func:`binary_tree` (PlogPT's perfect binary tree,
paper 001 section III-A, with b(h) on every edge of height h).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Literal

import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from colltune.errors import ColltuneError
from colltune.files import read_json
from colltune.models.params import TreeLevels

FORMAT = "colltune-topology"
VERSION = 1


#: Linux's TCP_RTO_MIN, s: a retransmission timeout delays a flow by at least this much, and a
#: connection idle for longer than its retransmission timeout starts its window again (RFC 5681
#: section 4.1; Linux's ``tcp_slow_start_after_idle``), so a stream idle for less keeps its run
#: (:meth:`Topology.duplex_factor`).
TCP_RTO_MIN = 0.2

#: A table by message size: (bytes, value) pairs, sizes ascending; looked up by :func:`_by_size`.
SizeTable = tuple[tuple[float, float], ...]


def _by_size(table: SizeTable | None, size: np.ndarray, otherwise: float) -> np.ndarray:
    """``table``'s value at each ``size`` (bytes): interpolated in log size between its sizes, clamped
    at its ends; ``otherwise`` everywhere without a table."""
    size = np.asarray(size, dtype=np.float64)
    if table is None:
        return np.full(size.shape, otherwise)
    at, value = np.log2([s for s, _ in table]), np.array([v for _, v in table])
    return np.interp(np.log2(np.maximum(size, 1.0)), at, value)


#: How ranks are placed on hosts (:meth:`Topology.placed`).
PLACEMENTS = ("block", "round-robin")


class TopologyError(ColltuneError):
    """A topology file or shape that cannot be used."""


class Node(BaseModel):
    """A switch or host; its link to ``parent`` (none for the root) has the given rates.  An
    unlimited bandwidth is written ``"Infinity"`` in the file."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    name: str = Field(min_length=1)
    parent: str | None = Field(None, description="name of the parent switch; None for the root")
    up: float = Field(math.inf, gt=0, description="bandwidth towards the parent, B/s")
    down: float = Field(math.inf, gt=0, description="bandwidth from the parent, B/s")
    latency: float = Field(0.0, ge=0, allow_inf_nan=False, description="one-way latency of the link, s")
    buffer: float | None = Field(None, gt=0, description="queue of each switch port feeding the link, bytes; "
                                                         "None for unlimited (no drops)")
    burst: float = Field(0.0, ge=0, allow_inf_nan=False,
                         description="bytes the link passes at once after an idle spell, in each direction: "
                                     "the depth of a token bucket that refills at the link's rate (tc tbf's "
                                     "burst, a cloud NIC's allowance); 0 for a wire")


class Topology(BaseModel):
    """A tree of switches and hosts; ``hosts[r]`` is the node of rank r."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["colltune-topology"] = FORMAT
    version: Literal[1] = VERSION
    name: str = "topology"
    description: str = ""
    nodes: tuple[Node, ...] = Field(min_length=1)
    hosts: tuple[str, ...] = Field(min_length=1, description="node name of each rank, in rank order")
    rto: float = Field(0.2, ge=0, allow_inf_nan=False,
                       description="retransmission timeout charged for a dropped flow, s (default: Linux's "
                                   "TCP_RTO_MIN, 200 ms; 0: a drop costs the resend only, as when TCP "
                                   "recovers by fast retransmit in most runs)")
    framing: tuple[int, int] | None = Field(
        None, description="[payload, header]: a message travels in frames of at most payload bytes of its data, and "
                          "each frame adds header bytes on every link (the headers the link's rate counts; the "
                          "testbed's tc tbf counts a TCP segment's Ethernet, IP and TCP headers: [1448, 66]); "
                          "None: a message carries only its bytes")
    window: float | None = Field(None, gt=0, allow_inf_nan=False,
                                 description="bytes a flow keeps in flight at most (TCP's window): a port "
                                             "overflows only if its flows' windows exceed its queue; None: "
                                             "senders push at line rate (paper 000)")

    duplex: SizeTable | None = Field(
        None, description="[bytes, efficiency] pairs, sizes ascending: the share of the link into its "
                          "receiver's host that a stream can use while that host sends, once it has carried that "
                          "many bytes back to back (its acknowledgements queue behind the host's data); in "
                          "between, interpolated in log size, clamped at the ends; None: the whole link")
    duplex_streams: tuple[float, float] | None = Field(
        None, description="[streams, part]: with duplex, the part of the duplex table's shortfall (1 - its share) "
                          "that this many streams into one host recover together (each needs a smaller window to "
                          "fill its share of the link, so the acknowledgements' wait behind the host's data costs "
                          "them less); fewer streams recover less, by log streams, one none; None: none")
    trunk_duplex: SizeTable | None = Field(
        None, description="[bytes, efficiency] pairs, sizes ascending: the share of a link between two switches "
                          "that a flow of that many bytes can use while data crosses that link the other way (its "
                          "acknowledgements queue behind that data); interpolated as duplex; None: the whole link")
    cores: int | None = Field(None, ge=1, description="processor cores all hosts share, as the hosts of a cluster "
                                                      "emulated on one machine do; None: each host has its own")
    message_cpu: SizeTable | None = Field(
        None, description="with cores: [bytes, seconds] pairs, sizes ascending: the processor time a message of "
                          "that many bytes takes of one of those cores at its sender and again at its receiver (a "
                          "copy or reduction takes its cost, a delay none); interpolated in log size, clamped at "
                          "the ends; only waiting for a core costs time")
    ack_above: int | None = Field(
        None, ge=0, description="bytes: a send of more than this many completes only once its receiver has "
                                "processed the message and an acknowledgement has come back, an empty message's "
                                "latency later (MPICH's sends over libfabric's tcp provider do above its eager "
                                "threshold, which the probe measures: a send that waits for a receiver that "
                                "makes no MPI call); None: a send completes when its flow ends")
    shared_memory: tuple[float, float] | None = Field(
        None, description="[latency s, bandwidth B/s]: a message between two ranks of one host takes its "
                          "sender that many bytes over the bandwidth (it copies them into memory the host's "
                          "ranks share) and arrives the latency after that; no link carries it "
                          "(:meth:`Topology.memory_costs`); None: such a message costs what the endpoint "
                          "model says of any message")
    send_hold: float = Field(
        0.0, ge=0, allow_inf_nan=False,
        description="mean of a random hold, s, added to the processor time of every send (exponential, drawn "
                    "per send; :data:`colltune.sim.engine.HOLD_DRAWS` seeded draws, the median total): the "
                    "message leaves at once, but its sender can do nothing else and the send does not complete "
                    "before the hold ends, as a rank that waits for a processor it shares; a flow that takes "
                    "longer hides it; 0: none")

    @model_validator(mode="after")
    def _check(self) -> Topology:
        for field, table in (("duplex", self.duplex), ("trunk_duplex", self.trunk_duplex),
                             ("message_cpu", self.message_cpu)):
            if table is None:
                continue
            sizes = [size for size, _ in table]
            if not sizes or any(b <= a for a, b in itertools.pairwise(sizes)) or sizes[0] <= 0:
                raise ValueError(f"{field}: sizes must be positive and ascending, not {sizes}")
        for field, table in (("duplex", self.duplex), ("trunk_duplex", self.trunk_duplex)):
            bad = [eff for _, eff in table or () if not 0 < eff <= 1]
            if bad:
                raise ValueError(f"{field}: efficiencies must lie in (0, 1], not {bad[0]}")
        if self.framing is not None and not (self.framing[0] >= 1 and self.framing[1] >= 0):
            raise ValueError(f"framing: a frame's payload must be at least 1 B and its header at least 0 B, "
                             f"not {list(self.framing)}")
        if self.shared_memory is not None and not (self.shared_memory[0] >= 0 and self.shared_memory[1] > 0
                                                    and all(map(math.isfinite, self.shared_memory))):
            raise ValueError(f"shared_memory: the latency must be finite and >= 0 s and the bandwidth finite "
                             f"and > 0 B/s, not {list(self.shared_memory)}")
        if self.duplex_streams is not None:
            streams, part = self.duplex_streams
            if not (streams > 1 and 0 < part <= 1 and math.isfinite(streams)):
                raise ValueError(f"duplex_streams: streams must be more than 1 and the part in (0, 1], "
                                 f"not {list(self.duplex_streams)}")
            if self.duplex is None:
                raise ValueError("duplex_streams needs duplex: the share one stream can use")
        if self.message_cpu is not None:
            bad = [t for _, t in self.message_cpu if not 0 <= t < math.inf]
            if bad:
                raise ValueError(f"message_cpu: times must be finite and >= 0 s, not {bad[0]}")
            if self.cores is None:
                raise ValueError("message_cpu needs cores: the number of processor cores the hosts share")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"node name {dup!r} appears twice")
        known = set(names)
        roots = [n.name for n in self.nodes if n.parent is None]
        if len(roots) != 1:
            raise ValueError(f"a topology has exactly one root (a node without parent); found {roots or 'none'}")
        for n in self.nodes:
            if n.parent is not None and n.parent not in known:
                raise ValueError(f"node {n.name!r}: parent {n.parent!r} is not a node")
        for r, h in enumerate(self.hosts):
            if h not in known:
                raise ValueError(f"hosts[{r}] = {h!r} is not a node")
        parent = self.arrays()[0]
        for start in range(len(names)):  # every node must reach the root
            v, steps = start, 0
            while parent[v] >= 0:
                v, steps = int(parent[v]), steps + 1
                if steps > len(names):
                    raise ValueError(f"node {names[start]!r} is on a cycle of parent links")
        return self

    @property
    def procs(self) -> int:
        """Number of ranks the topology places."""
        return len(self.hosts)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(parent, up, down, latency, host_node)`` as the engine reads them: parent index per
        node (-1 for the root), bandwidths in B/s, latency in s, and the node of each rank."""
        index = {n.name: i for i, n in enumerate(self.nodes)}
        parent = np.array([index[n.parent] if n.parent is not None else -1 for n in self.nodes], dtype=np.int32)
        up = np.array([n.up for n in self.nodes], dtype=np.float64)
        down = np.array([n.down for n in self.nodes], dtype=np.float64)
        latency = np.array([n.latency for n in self.nodes], dtype=np.float64)
        host_node = np.array([index[h] for h in self.hosts], dtype=np.int32)
        return parent, up, down, latency, host_node

    def duplex_factor(self, size: np.ndarray) -> np.ndarray:
        """At each ``size`` (bytes of a stream's run, below), the share of the link into its
        receiver's host that the stream can use while that host sends (the topology's ``duplex``):
        1 everywhere without a duplex table.

        A TCP flow's acknowledgements leave its receiver's host over that host's link up.  When
        the host sends too, they wait behind its data in the host's queue (on the testbed Linux's
        FIFO of 1000 frames, as on any host without fair queueing), so the flow's round trip
        grows, and its window, which grows by round trips, fills the link later: on the testbed,
        every host sending to the next while receiving from the one before takes up to 1.5x as long
        as each host only sending or only receiving, the more so the smaller the messages, and
        cutting the hosts' queue shortens the wait.

        So while any flow climbs from a host, a stream into it can use ``duplex`` of its share of
        the link into that host (of the equal split; under max-min fairness that link carries the
        smallest share of the streams into it), taken at ``size``: the bytes of the stream's run,
        its messages carried back to back (none after the stream was idle for more than
        :data:`TCP_RTO_MIN`) up to the one in flight; interpolated in log size between the table's
        sizes, clamped at its ends.  The window a run has grown carries the run's next message,
        and a connection idle for longer than its retransmission timeout starts it again (RFC 5681
        section 4.1): the ring all-gather's steps each carry a block over the same connection, whose
        window the earlier steps have grown, where the pairwise all-to-all opens a new connection
        at each step.  A stream held
        back by another link (an oversubscribed uplink) keeps its rate: its window then covers the
        longer round trip.  ``colltune probe`` measures the table (``fit_duplex``): both shifts
        above at 64 KiB, 256 KiB, 1 MiB and 4 MiB, the time one way over the time both ways, each
        after a barrier that starts every host at once; then, with more than 2 hosts, it cuts each
        shortfall 1 - d to the depth at which the pairwise all-to-all, the same shift at each
        distance with its steps back to back as a collective's run, takes its measured time
        (:func:`colltune.probe.fit.fit_duplex_depth`).

        Several streams into one host recover part of the shortfall together (the topology's
        ``duplex_streams``, [N, r]: with n streams into the host, the share is d + (1 - d) r min(1,
        ln n / ln N), d the table's): each needs a window of only its part of the link, which it
        fills sooner for the same wait of its acknowledgements.  ``colltune probe`` measures r from the ratio of those two
        all-to-alls (:func:`colltune.probe.fit.fit_duplex_streams`)."""
        return _by_size(self.duplex, size, 1.0)

    def trunk_duplex_factor(self, size: np.ndarray) -> np.ndarray:
        """Per message of ``size`` bytes, the share of a link between two switches (an uplink of
        a tree) that its flow can use while data crosses that link the other way (the topology's
        ``trunk_duplex``): 1 everywhere without a table.

        The cause is the one of :meth:`duplex_factor`: a flow's acknowledgements cross the link
        the other way and queue behind the data there, here in a switch port's queue, which fills
        when more than one link feeds it.  A loss-driven TCP keeps the link busy only while its
        windows cover the round trip, and the acknowledgements' wait lengthens it by up to that
        queue: over oversubscribed uplinks, the patterns that cross them both ways run slower than
        whole uplinks would carry them.
        ``colltune probe`` measures the table where its topology has such links
        (:func:`colltune.probe.fit.fit_trunk_duplex`: every rank sending to the rank half the job
        away and receiving from it, the share at which the simulated time matches the measured
        one); interpolated in log size between the table's sizes, clamped at its ends."""
        return _by_size(self.trunk_duplex, size, 1.0)

    def message_cpu_of(self, size: np.ndarray) -> np.ndarray:
        """Per message of ``size`` bytes, the processor time (s) it takes of one of the cores the
        hosts share (the topology's ``cores``) at its sender and again at its receiver: 0 without
        a ``message_cpu`` table.

        The testbed runs its 8 hosts on this machine's 2 cores: every rank's sends and receives,
        and the kernel's work that carries them over the emulated links, take time of the same two
        cores, so a step in which every rank sends costs more than the same step between two ranks,
        while a message alone costs what an idle ping-pong says.  With ``cores`` the simulator
        keeps that many cores for all hosts: each send and each message processed takes the
        earliest free one for ``message_cpu`` at the message's size (interpolated in log size,
        clamped at the table's ends), and each copy or reduction for its cost; an item fires only
        when a core is free, so a message waits only when more items want the cores than there
        are.  A delay (GOAL's ``calc``, the time a recorded run spent outside MPI) takes no core: it
        is time that passes on its rank, and a recorded gap already holds whatever sharing its run
        met.  ``colltune testbed up`` writes the
        machine's cores into the topology file (so its reductions share them), and ``colltune
        probe`` measures the cost per message when its topology gives ``cores`` and the job has
        more ranks (:func:`colltune.probe.fit.fit_message_cpu`: every
        rank sending one byte to the next against ranks 0 and 1 alone, the cost whose simulated
        excess matches the measured one), but keeps it out of the profile's topology and adds the
        loaded latency to the models instead, a flat increment that charges every message alike.
        Applied, the cost lowered the prediction error of all-rank steps but made the choices
        worse, and the probe's pattern measures it with a spread as large as the value
        (``colltune.probe.run._measure_message_cpu``).

        A rank that waits for a shared core does not wait the same time at every send, and a
        deterministic cost keeps every rank of a symmetric pattern in lock step.  A topology's
        ``send_hold`` (s) adds to every send's processor time a random hold of that mean
        (exponential, drawn per send; the message leaves at once, and a flow that takes longer
        hides the hold), simulated in :data:`colltune.sim.engine.HOLD_DRAWS` seeded draws of which
        the one of median total is the result: a step waits for the latest of its senders.
        ``colltune probe`` fits it from the same shifts as ``message_cpu``
        (:func:`colltune.probe.fit.fit_send_hold`) and writes it into the profile's topology."""
        return _by_size(self.message_cpu, size, 0.0)

    def memory_costs(self, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per message of ``size`` bytes between two ranks of one host, under ``shared_memory``
        [L, B]: ``(busy, latency)``, the time its sender copies it, m / B (s), and the time from
        its send's start to its arrival, L + m / B (s).

        The ranks of a host exchange messages through memory they share (MPICH's and Open MPI's
        shared-memory transports): the sender copies the message into a shared buffer and the
        receiver's copy out overlaps it in cells, so a ping-pong of m bytes takes 2 (L + m / B),
        the copy bandwidth B and the latency L that ``colltune probe`` measures between two
        ranks of one host.  No link carries the message: a host's ranks share its link only for
        what leaves the host."""
        if self.shared_memory is None:
            raise TopologyError("this topology gives no shared_memory costs")
        latency, bandwidth = self.shared_memory
        busy = np.asarray(size, dtype=np.float64) / bandwidth
        return busy, latency + busy

    def bursts(self) -> np.ndarray:
        """Each node's link bucket, bytes (:attr:`Node.burst`)."""
        return np.array([n.burst for n in self.nodes], dtype=np.float64)

    def _depth_height(self, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per node: its depth (links to the root) and height (links down to its deepest leaf)."""
        n = len(parent)
        depth = np.zeros(n, dtype=np.int64)
        for v in range(n):
            u = v
            while parent[u] >= 0:
                u = parent[u]
                depth[v] += 1
        height = np.zeros(n, dtype=np.int64)
        for v in np.argsort(-depth, kind="stable"):  # children before parents
            if parent[v] >= 0:
                height[parent[v]] = max(height[parent[v]], height[v] + 1)
        return depth, height

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, list[tuple[list[int], list[int], int]]]:
        """The paths of messages from ranks ``src`` to ``dst``: ``(pair, paths)`` where message k
        takes ``paths[pair[k]] = (climb, descend, top)``: the nodes whose up link it crosses (from
        the sender's host), the nodes whose down link it crosses (towards the receiver's host), and
        the node index of the highest switch on the path."""
        parent, _, _, _, host_node = self.arrays()
        depth, _ = self._depth_height(parent)
        pairs, inverse = np.unique(np.stack([src, dst]).reshape(2, -1), axis=1, return_inverse=True)
        paths = []
        for a, b in pairs.T:
            a, b = int(host_node[a]), int(host_node[b])
            climb: list[int] = []
            descend: list[int] = []
            while a != b:
                if depth[a] >= depth[b]:
                    climb.append(a)
                    a = int(parent[a])
                else:
                    descend.append(b)
                    b = int(parent[b])
            paths.append((climb, descend[::-1], a))
        return inverse.reshape(-1), paths

    def on_wire(self, size: np.ndarray) -> np.ndarray:
        """Per message of ``size`` bytes, the bytes (float) its flow carries on each link: its size
        and, with ``framing`` [payload, header], header bytes for each of its ceil(size / payload)
        frames; an empty message carries none (its frame is the endpoint model's latency, measured
        with it).

        A link's rate counts the frames' headers as well as the data: the testbed's tc tbf at 100
        Mbit/s passes 12.5e6 B/s of 1514-byte frames, which hold 1448 B of a TCP stream each, so a
        stream gets 95.6 Mbit/s of it, what MPI measures there; carried without the headers, every
        message whose wire time decides its time would be priced 4.4 % short."""
        size = np.asarray(size, dtype=np.float64)
        if self.framing is None:
            return size
        payload, header = self.framing
        return size + np.ceil(size / payload) * header

    def wire_times(self, src: np.ndarray, dst: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Per message of ``size[k]`` bytes from rank ``src[k]`` to ``dst[k]``, the time (s) its bytes
        take on its path with the path to itself: (v - b) / (the narrowest link of the path), v its
        bytes on the wire (:meth:`on_wire`) and b the bytes every link of the path passes at once
        after an idle spell (the least :attr:`Node.burst` of the path), at least 0; 0 between two
        ranks on one host."""
        _, up, down, _, _ = self.arrays()
        pair, paths = self.routes(np.asarray(src), np.asarray(dst))
        burst = self.bursts()
        narrowest = np.array([min([up[v] for v in climb] + [down[v] for v in descend], default=math.inf)
                              for climb, descend, _ in paths])
        passed = np.array([min((burst[v] for v in climb + descend), default=0.0) for climb, descend, _ in paths])
        return np.maximum(self.on_wire(size) - passed[pair], 0.0) / narrowest[pair]

    def pair_properties(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For messages from ranks ``src`` to ``dst``: the path's total link latency (s) and the
        height of the communication, the height of the highest switch on the path (paper 001
        section III-A; 0 when both ranks share a host)."""
        parent, _, _, latency, _ = self.arrays()
        _, height = self._depth_height(parent)
        pair, paths = self.routes(src, dst)
        lat = np.array([latency[climb].sum() + latency[descend].sum() for climb, descend, _ in paths])
        top = np.array([height[t] if climb or descend else 0 for climb, descend, t in paths], dtype=np.int64)
        return lat[pair], top[pair]

    @property
    def host_names(self) -> tuple[str, ...]:
        """The hosts that ranks are placed on, each once, in the order of their first rank."""
        return tuple(dict.fromkeys(self.hosts))

    @property
    def ranks_per_host(self) -> int:
        """The most ranks any host has."""
        return max(self.hosts.count(h) for h in self.host_names)

    def host_labels(self, procs: int | None = None) -> tuple[int, ...]:
        """The host of each of the first ``procs`` ranks (all by default) as a number, in the order
        of :attr:`host_names`: what a schedule's :attr:`colltune.collectives.Problem.hosts` reads."""
        index = {name: h for h, name in enumerate(self.host_names)}
        return tuple(index[h] for h in self.hosts[:procs])

    def shares_hosts(self, procs: int | None = None) -> bool:
        """True where the first ``procs`` ranks run on several hosts and some host has two or more
        of them: where a hierarchical algorithm differs from both its levels."""
        labels = self.host_labels(procs)
        return 1 < len(set(labels)) < len(labels)

    def placed(self, ranks_per_host: int, placement: str = "block") -> Topology:
        """This topology with ``ranks_per_host`` ranks on each of its hosts (:attr:`host_names`):
        ``block`` puts ranks ``k h .. k h + k - 1`` on host h, ``round-robin`` rank r on host
        ``r mod N`` (N hosts), as ``colltune testbed run --placement`` starts them."""
        if ranks_per_host < 1:
            raise TopologyError(f"ranks per host must be at least 1, not {ranks_per_host}")
        if placement not in PLACEMENTS:
            raise TopologyError(f"placement {placement!r}: valid are {', '.join(PLACEMENTS)}")
        names = self.host_names
        if placement == "block":
            hosts = tuple(h for h in names for _ in range(ranks_per_host))
        else:
            hosts = tuple(names[r % len(names)] for r in range(len(names) * ranks_per_host))
        return self.model_copy(update={"hosts": hosts})

    def first(self, procs: int) -> Topology:
        """This topology with ranks ``0 .. procs-1`` only (on the same hosts), for a job smaller
        than the network; :class:`TopologyError` if it places fewer than ``procs`` ranks."""
        if procs > self.procs:
            raise TopologyError(f"topology {self.name!r} places {self.procs} ranks, not {procs}")
        return self if procs == self.procs else self.model_copy(update={"hosts": self.hosts[:procs]})

    def with_buffer(self, buffer: float) -> Topology:
        """This topology with ``buffer`` bytes of queue at every switch port."""
        nodes = [{**n.model_dump(), "buffer": buffer} for n in self.nodes]
        return Topology.model_validate({**self.model_dump(), "nodes": nodes})

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def star(procs: int, bandwidth: float, latency: float = 0.0) -> Topology:
    """One switch with ``procs`` hosts, each on a link of ``bandwidth`` B/s each way."""
    nodes = [Node(name="switch")] + [Node(name=f"h{r}", parent="switch", up=bandwidth, down=bandwidth,
                                          latency=latency) for r in range(procs)]
    return Topology(name=f"star-{procs}", nodes=tuple(nodes), hosts=tuple(f"h{r}" for r in range(procs)),
                    description=f"one switch, {procs} hosts at {bandwidth:g} B/s")


def two_level(procs: int, per_switch: int, bandwidth: float, uplink: float) -> Topology:
    """Leaf switches of ``per_switch`` hosts each (``bandwidth`` B/s per host link), joined by one
    core switch over uplinks of ``uplink`` B/s each way."""
    if per_switch < 1:
        raise TopologyError(f"tree:K needs K >= 1 hosts per switch, not {per_switch}")
    leaves = (procs + per_switch - 1) // per_switch
    nodes = [Node(name="core")] + [Node(name=f"leaf{k}", parent="core", up=uplink, down=uplink)
                                   for k in range(leaves)]
    nodes += [Node(name=f"h{r}", parent=f"leaf{r // per_switch}", up=bandwidth, down=bandwidth) for r in range(procs)]
    return Topology(name=f"tree{per_switch}-{procs}", nodes=tuple(nodes), hosts=tuple(f"h{r}" for r in range(procs)),
                    description=f"{leaves} leaf switches of {per_switch} hosts at {bandwidth:g} B/s, "
                                f"uplinks {uplink:g} B/s to one core switch")


def binary_tree(procs: int, levels: TreeLevels) -> Topology:
    """PlogPT's perfect binary tree (paper 001 section III-A) for ``procs`` ranks: rank r is leaf
    r, and every edge of height h carries ``levels.b[h-1]`` B/s each way.  Needs
    ``procs <= 2^D`` with D the number of levels."""
    D = levels.depth
    if procs > 2 ** D:
        raise TopologyError(f"P = {procs} ranks need a binary tree of depth {math.ceil(math.log2(procs))}; "
                            f"the profile's b(h) has depth {D}")
    nodes = []
    for h in range(D, 0, -1):  # switch (h, k) covers leaves k 2^h .. (k+1) 2^h - 1
        for k in range((procs - 1) // 2 ** h + 1):
            parent = f"s{h + 1}_{k // 2}" if h < D else None
            b = levels.b[h] if h < D else math.inf
            nodes.append(Node(name=f"s{h}_{k}", parent=parent, up=b, down=b))
    nodes += [Node(name=f"h{r}", parent=f"s1_{r // 2}", up=levels.b[0], down=levels.b[0]) for r in range(procs)]
    return Topology(name=f"binary-{procs}", nodes=tuple(nodes), hosts=tuple(f"h{r}" for r in range(procs)),
                    description=f"PlogPT binary tree of depth {D}, b(h) = {list(levels.b)} B/s")


def read_topology(path: str | Path) -> Topology:
    """Read and validate a topology file; errors name the file and the field."""
    p = Path(path)
    data = read_json(p, "topology file", TopologyError)
    try:
        return Topology.model_validate(data)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise TopologyError(f"{p}: {where}: {err['msg']}") from None
