"""``colltune probe``: measure every model's parameters inside the running MPI job and build a
:class:`~colltune.profiles.Profile` (on rank 0).

What is measured, and how (kernels in :mod:`colltune.probe.measure`, fits in
:mod:`colltune.probe.fit`):

- round trips RTT(s) and Netgauge's PRTT(n, 0, s) and PRTT(n, d, s) between ranks 0 and 1 over
  the message sizes, which give Hockney (least squares of RTT/2; with a topology, of the larger of
  alpha + beta m and the path's wire time, as the simulator carries it), LogGP and LogP (Netgauge's
  method) and pLogP (the fast method of Kielmann et al.: g(0) from the rate of zero-byte sends,
  L from RTT(0) = 2(L + g(0)), g(m) = RTT(m)/2 - L), with os(m) and or(m) timed on the send and
  receive calls;
- the same round trips with both ranks sending at once, for the bidirectional pLogP (paper 001
  section III-B-1);
- PlogPT's b(h) and d(h) for h = 1 .. floor(log2 P) by the xor-partner load of paper 001
  section III-C, uni- and bidirectionally, and epsilon_S from their spread;
- the latency between every pair of ranks (paper 004) and its grouping into levels;
- the eager threshold, LogGP's S: the largest size whose send does not wait while its receiver
  makes no MPI call; where a larger one waited, the profile's topology gets it as ``ack_above``
  (a send of more bytes completes once its receiver has processed it and the acknowledgement is
  back: MPICH's sends over libfabric's tcp provider above 128 B on the testbed);
- paper 000's cluster parameters that software can measure, per packet size up to the MTU: Os
  (the send call), gs (the PRTT gap), gr (all ranks sending to rank 0 at once), Or (the receive
  call of an arrived message), Ur (the probe that finds it) and L(m, p) by regression over
  concurrent ping-pong pairs (a ping-pong costs 2(Os + L + Or + Ur));
- from the same concurrent pairs, how much longer a message takes when every rank communicates
  than when two do (paper 000's a p, :func:`colltune.probe.fit.loaded_latency`), added to the
  latency of the models fitted on one idle ping-pong (Hockney, LogP, LogGP, pLogP, the latency
  matrix): collectives keep every rank busy, and where ranks share cores (the 8-host testbed on
  2 cores) a step costs tens of microseconds more than an idle ping-pong says;
- where the topology says that the hosts share fewer cores than the job has ranks (the testbed's
  topology file does), the processor time a message takes of those cores
  (:func:`colltune.probe.fit.fit_message_cpu`: every rank sending one byte to the next against two
  ranks), kept among the measurements but not yet applied (:func:`_measure_message_cpu` says why;
  :meth:`colltune.sim.topology.Topology.message_cpu_of`), and from the same shifts the mean of a
  random hold at every send (:func:`colltune.probe.fit.fit_send_hold`), written into the profile's
  topology after the check (:func:`_measure_send_hold`);
- where the topology has links between switches that every rank sending to the rank half the job
  away loads both ways (tree:2's uplinks), the share of such a link a flow can use meanwhile
  (:func:`colltune.probe.fit.fit_trunk_duplex`, through the simulator), written into the profile's
  topology (:meth:`colltune.sim.topology.Topology.trunk_duplex_factor`);
- with a topology and more than 2 ranks, the direct all-to-all and the pairwise exchange of the
  first duplex size, one right after the other: how much of the shifts' duplex shortfall a
  collective's steps, back to back, meet, and the part of it that many streams into one host
  recover together (:func:`_measure_collective_duplex`), written into the profile's topology
  (``duplex`` and ``duplex_streams``, :meth:`colltune.sim.topology.Topology.duplex_factor`);
- a check: the times of a few collectives (:data:`CHECKS`) at a few sizes, run by colltune's
  executor, then of as many more cases again on which the two network models that predict the
  first ones best disagree most (:func:`discriminating_cases`), and of the algorithms that the
  :data:`colltune.probe.choices.FINALISTS` models best on the first ones would choose where their
  choices differ (:mod:`colltune.probe.choices`): the profile's ``default_network`` is the
  finalist whose choices ran fastest, scores within :data:`colltune.probe.choices.CHOICE_TIE` of
  the fastest counting as equal, and among equals the one that predicts every case of the check
  best (:func:`choose_network`); the analytic ``default_model`` stays pLogP, whose formulas cover
  the most algorithms.

Every quantity is kept in the profile's ``measurements`` with its median, quartiles, repetitions
and rejected outliers; every fit in ``fits`` with its residuals.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from mpi4py import MPI

from colltune import __version__
from colltune.algorithms import REGISTRY
from colltune.collectives import get_collective
from colltune.errors import ColltuneError
from colltune.grid.levels import group_levels
from colltune.models.params import (
    ClusterModel,
    Hockney,
    Linear,
    LogP,
    Piecewise,
    PLogP,
    PlogPT,
    PLogPTable,
    TreeLevels,
    floor_log2,
)
from colltune.probe import fit
from colltune.probe.choices import (
    CHOICE_TIE,
    FINALISTS,
    choice_scores,
    choose_by_choices,
    disputed,
    in_rounds,
    model_choices,
    price_cells,
    round_count,
    short_cases,
)
from colltune.probe.cores import shift_excess
from colltune.probe.hosts import (
    Crowd,
    every_pair,
    fit_shared_memory,
    groups_of,
    host_topology,
    link_burst,
    link_rate,
    loaded_increment,
    pair_matrix,
    shared_memory_rtt,
)
from colltune.probe.measure import Meter
from colltune.probe.stats import derived, series, summarise, summarised
from colltune.probe.trunks import trunk_distance, trunk_shift_time
from colltune.profiles.format import Fit, Models, Profile, Provenance, Series, Spread
from colltune.report.fidelity import BEST_TOLERANCE
from colltune.runtime.hosts import host_labels
from colltune.runtime.quiet import sleep_until
from colltune.schedule import Schedule
from colltune.sim import NETWORKS, Topology, topology_for
from colltune.sim.calls import steady_call
from colltune.tune.measure import REST, time_collective
from colltune.tune.timing import MEAN_CALL, Timing

KiB = 1024


class ProbeError(ColltuneError):
    """A probe that cannot run here (too few ranks, bad sizes); raised on every rank."""


@dataclass(frozen=True)
class Plan:
    """How much a probe measures: repetitions, sizes (bytes) and load."""

    reps: int
    warmup: int
    sizes: tuple[int, ...]
    packet_sizes: tuple[int, ...]
    train: int  # n of PRTT(n, ., s), and messages per sender when converging on rank 0
    tree_size: int
    tree_bursts: int
    pings: int
    train_bytes: int | None = None  # PRTT(n, ., s) keeps n s within this (n >= 2)
    budget: float | None = None  # seconds per measured point (Meter.budget)
    check_sizes: tuple[int, ...] = (4 * KiB, 64 * KiB)  # block sizes of the collectives that choose the network
    incast_sizes: tuple[int, ...] = (4 * KiB, 16 * KiB, 64 * KiB)  # bytes per sender of the controlled incast
    incast_reps: int = 5
    duplex_sizes: tuple[int, ...] = (64 * KiB,)  # bytes per message of the shifts one way and both ways
    cpu_sizes: tuple[int, ...] = (1,)  # bytes per message of the shifts of all ranks and of two
    cpu_reps: int = 40
    #: Bytes per message of the round trips between two ranks of one host.  They reach 4 MiB, whose
    #: copies (about 1 ms one way at the few GB/s measured here) outlast a wait for a core where
    #: ranks share cores; up to 64 KiB the copies add 30 us, less than such a wait in a median of 7,
    #: so that a fit over those sizes alone can find no slope.
    memory_sizes: tuple[int, ...] = (0, 1, 256, 4 * KiB, 64 * KiB, 256 * KiB, 1024 * KiB, 4096 * KiB)

    def trains(self) -> list[int]:
        """n of PRTT(n, ., s) at each size: ``train``, shortened to ``train_bytes`` of messages."""
        if self.train_bytes is None:
            return [self.train] * len(self.sizes)
        return [max(2, min(self.train, self.train_bytes // max(s, 1))) for s in self.sizes]


#: The default mode measures g(m) up to 1 MiB, half a second per measured point and trains of at
#: most 1 MiB.  Its duplex table goes on to 4 MiB, the longest run a stream has in the collectives
#: it prices: the ring all-gather of 512 KiB blocks on 8 ranks carries 3.5 MiB per call over one
#: connection, and a stream's run goes on from call to call.
PLANS = {
    "quick": Plan(reps=7, warmup=3, sizes=(0, 1, 256, 4 * KiB, 64 * KiB), packet_sizes=(1, 16, 40, 512, 1500),
                  train=8, tree_size=64 * KiB, tree_bursts=4, pings=5),
    "default": Plan(reps=25, warmup=5, sizes=(0, *(2 ** k for k in range(21))),
                    packet_sizes=(1, 8, 16, 24, 32, 40, 64, 128, 256, 512, 1024, 1500), train=16,
                    tree_size=256 * KiB, tree_bursts=8, pings=10, train_bytes=1024 * KiB, budget=0.5,
                    check_sizes=(4 * KiB, 64 * KiB, 512 * KiB), incast_sizes=tuple(2 ** k * KiB for k in range(3, 10)),
                    incast_reps=7, duplex_sizes=(64 * KiB, 256 * KiB, 1024 * KiB, 4096 * KiB)),
    "thorough": Plan(reps=50, warmup=5, sizes=(0, *(2 ** k for k in range(23))),
                     packet_sizes=(1, 4, 8, 16, 24, 32, 40, 64, 128, 256, 384, 512, 768, 1024, 1280, 1500),
                     train=32, tree_size=1024 * KiB, tree_bursts=8, pings=20, train_bytes=8192 * KiB, budget=5.0,
                     incast_sizes=tuple(2 ** k * KiB for k in range(2, 11)), incast_reps=11,
                     duplex_sizes=tuple(4 ** k * KiB for k in range(2, 7)), cpu_reps=100),
}

#: The collectives the probe times at the end, each by an algorithm whose traffic differs (one
#: sender at a time, a ring, all pairs at once, many senders to one, a reduction, and a pipeline
#: through every rank), so that the network model that predicts them best becomes the profile's
#: ``default_network``.
CHECKS = (("bcast", "binomial_tree"), ("allgather", "ring"), ("alltoall", "pairwise_exchange"),
          ("gather", "flat_tree"), ("allreduce", "recursive_doubling"), ("bcast", "chain"))
#: The collectives the probe times, one right after the other, to measure how deep a topology's
#: ``duplex`` shortfall reaches in a collective's steps and its ``duplex_streams``: the direct
#: all-to-all, every host sending to and receiving from every other at once (each host's sends
#: posted starting with the next rank), and the pairwise exchange, one stream into each host at a
#: time.
STREAMS_CASES = (("alltoall", "direct_rotated"), ("alltoall", "pairwise_exchange"))
#: Rounds of :data:`STREAMS_CASES` and repetitions of each in a round (after one warm-up); the
#: median of the rounds' ratios counts, since one round's ratio varies from probe to probe.
STREAMS_ROUNDS, STREAMS_REPS = 3, 5
#: The least time, s, a receiver holds off while the probe looks for the eager threshold: half of
#: it (what a send must take to count as waiting) is 50 times a small eager send here (10 us).
MIN_HOLD = 1e-3
#: Repetitions of each check (after one warm-up), and seconds each may take at most (down to
#: :data:`colltune.tune.timing.MIN_REPS`).
CHECK_REPS, CHECK_BUDGET = 7, 1.0
#: ``progress(description, steps done, steps in all)``, called on rank 0 as each step starts.
Progress = Callable[[str, int, int], None]

Case = tuple[str, str, int]  # (collective, algorithm, block size in bytes)


def discriminating_cases(models: Models, procs: int, errors: dict[str, float], sizes: Sequence[int],
                         done: Sequence[Case], count: int, topology: Topology | None = None) -> list[Case]:
    """The ``count`` cases (every registered algorithm with its default parameters, at the block
    ``sizes`` in bytes, none of ``done``) on which the two network models with the smallest
    ``errors`` predict the most different times (the largest |log(t_a / t_b)|): timing them tells
    the two apart where a fixed check cannot (the design of experiments that discriminate between
    models: Box and Hill 1967): a fixed check can put two models within a point of each other,
    the winner changing from run to run."""
    a, b = sorted(errors, key=lambda n: (errors[n], n))[:2]
    scored = []
    for alg in REGISTRY:
        if alg.hierarchical:
            continue  # as the flat algorithm of its network level on one rank per host
        for size in sizes:
            case = (alg.collective, alg.name, size)
            if case in done or get_collective(alg.collective).synchronizes:
                continue  # a barrier moves no blocks
            try:
                schedule = alg.schedule(procs, 0, size)
                t = [steady_call(schedule, net, getattr(models, NETWORKS[net].params),
                                 topology=topology_for(topology, net, procs)) for net in (a, b)]
            except ColltuneError:
                continue  # needs parameters, or not on this many ranks
            scored.append((-abs(float(np.log(t[0] / t[1]))) if min(t) > 0 else 0.0, case))
    return [case for _, case in sorted(scored)[:count]]


class _SecondCheck:
    """The discriminating check, which rank 0 chooses after fitting while the other ranks wait:
    :meth:`follow` (ranks > 0) times what rank 0 sends, :meth:`lead` (rank 0) sends and times it,
    and :meth:`release` (rank 0, always) tells the waiting ranks to stop if rank 0 failed before.
    The waiting ranks sleep between tests of a non-blocking barrier
    (:func:`colltune.runtime.quiet.sleep_until`) instead of spinning in MPI: with more ranks than
    cores (8 on the testbed's 2) spinning ranks take the processor from rank 0's fits and
    simulations.  The ``crowd`` of a larger job (:class:`colltune.probe.hosts.Crowd`) sleeps
    meanwhile too, and polls again while the second check is timed."""

    def __init__(self, comm: MPI.Comm, crowd: Crowd | None = None) -> None:
        self.comm, self.crowd, self.waiting = comm, crowd, False

    def arm(self) -> None:
        """Rank 0, once the other ranks have gone to :meth:`follow`."""
        self.waiting = True
        if self.crowd is not None:
            self.crowd.pause()

    def follow(self) -> None:
        if self.crowd is not None:
            self.crowd.pause()
        sleep_until(self.comm.Ibarrier())
        cases = self.comm.bcast(None, root=0)
        if cases is None:
            raise ProbeError("the probe failed on rank 0 while fitting the models (its error says why)")
        if self.crowd is not None:
            self.crowd.resume()
        _time_cases(self.comm, cases)

    def lead(self, cases: list[Case]) -> list[Timing]:
        self.waiting = False
        self.comm.Ibarrier().Wait()
        order = self.comm.bcast(cases, root=0)
        if self.crowd is not None:
            self.crowd.resume()
        return _time_cases(self.comm, order)

    def release(self) -> None:
        if self.waiting:
            self.waiting = False
            self.comm.Ibarrier().Wait()
            self.comm.bcast(None, root=0)


def _time_cases(comm: MPI.Comm, cases: Sequence[Case]) -> list[Timing]:
    return [time_collective(comm, coll, alg, size, {}, CHECK_REPS, 1, CHECK_BUDGET, rest=REST)
            for coll, alg, size in cases]


def _check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    if any(s < 0 for s in sizes):
        raise ProbeError(f"--sizes: sizes must be >= 0 bytes, got {min(sizes)}")
    out = sorted(set(sizes) | {0})  # the fast pLogP method needs RTT(0)
    if len(out) < 2:
        raise ProbeError("--sizes: give at least one size above 0 bytes (Hockney and LogGP fit a line)")
    return tuple(out)


def plan_for(mode: str, sizes: Sequence[int] | None = None) -> Plan:
    """The plan of ``mode`` (quick, default, thorough), with ``sizes`` (bytes) if given."""
    if mode not in PLANS:
        raise ProbeError(f"unknown probe mode {mode!r}; valid: {', '.join(PLANS)}")
    return PLANS[mode] if sizes is None else replace(PLANS[mode], sizes=_check_sizes(sizes))


def _diff(long: Series, short: Series, n: int | Sequence[int], extra: float | Sequence[float], name: str,
          method: str) -> Series:
    """``(long - short) / (n-1) - extra`` point by point (``n`` one or per point), with the spreads added."""
    sub = np.asarray(extra, dtype=np.float64) * np.ones(len(long.x))
    ns = np.asarray(n, dtype=np.float64) * np.ones(len(long.x))
    med = [(a.median - b.median) / (k - 1) - e for a, b, e, k in zip(long.points, short.points, sub, ns, strict=True)]
    half = [(a.iqr + b.iqr) / 2 / (k - 1) for a, b, k in zip(long.points, short.points, ns, strict=True)]
    reps = [min(a.reps, b.reps) for a, b in zip(long.points, short.points, strict=True)]
    return derived(long.unit, long.x_name, long.x, med, half, reps, f"{name}: {method}")


def _stderr(ser: Series) -> list[float]:
    """Standard error of each median of ``ser``, from its IQR (IQR / 1.349 is sigma for normal
    noise; the median's error is about 1.25 sigma / sqrt(reps)), floored at 1 ns."""
    return [max(1.25 * p.iqr / 1.349 / max(p.reps, 1) ** 0.5, 1e-9) for p in ser.points]


def probe(comm: MPI.Comm, mode: str = "default", sizes: Sequence[int] | None = None, name: str = "probe",
          topology: Topology | None = None, progress: Progress | None = None) -> Profile | None:
    """Measure the network of ``comm`` (collective: call on every rank) and return the profile on
    rank 0 (None elsewhere).  ``progress`` (rank 0 only) hears what is measured as it starts.

    The probe finds which ranks share a host (:func:`colltune.runtime.hosts.host_labels`).  Where
    some host has several, it times ping-pongs between two ranks of one host (shared memory's
    latency and bandwidth, :mod:`colltune.probe.hosts`), then measures the network among one rank
    per host (the lowest) while the others wait in MPI as in a collective (polling, so that where
    ranks share cores the measuring ranks get the share they get in a collective; asleep while rank
    0 fits: :class:`colltune.probe.hosts.Crowd`), and the profile's topology places every rank on
    its host, which its ranks share; the ranks of a job on one machine are measured as hosts of
    their own; the latency matrix is measured among every rank, in concurrent pairs as on hosts of
    one rank, where ranks that share cores pay for one another as in a collective
    (:func:`colltune.probe.hosts.every_pair`), and a default network that builds its own tree (of the
    leaders) gives way to pLogP carried over the hosts' topology.  ``topology`` (the network's, if the user knows it) is kept
    in the profile, its ranks placed on the hosts the ranks run on where those are its nodes (the
    testbed names its hosts so), else rank r on its host r; without one, the probe infers a star
    of the hosts it found at the link rate and burst it measured.  The check chooses the network model
    carried over the topology."""
    P, me = comm.Get_size(), comm.Get_rank()
    if P < 2:
        raise ProbeError(f"colltune probe measures between ranks: run it on at least 2 (mpiexec -n 2 or more), "
                         f"not {P}")
    if topology is not None and topology.procs < P:
        raise ProbeError(f"topology {topology.name!r} places {topology.procs} ranks; the probe runs {P}")
    labels = host_labels(comm)
    if len(set(labels)) == 1:  # one machine: its ranks are measured as hosts of their own
        labels = tuple(range(P))
    groups = groups_of(labels)
    names = tuple(comm.allgather(MPI.Get_processor_name()))
    if topology is not None:
        known = {n.name for n in topology.nodes}
        topology = topology.model_copy(update={"hosts": names}) if set(names) <= known else topology.first(P)
    if all(len(g) == 1 for g in groups):
        return _run(comm, mode, sizes, name, topology, progress,
                    None if topology is not None else lambda rate, burst: host_topology(labels, rate, burst))
    plan = plan_for(mode, sizes)
    within = shared_memory_rtt(comm, groups, plan.memory_sizes, plan.reps, plan.warmup)
    pairs = Meter(comm, plan.reps, plan.warmup).all_pairs()  # every rank, in concurrent pairs
    leaders = [g[0] for g in groups]
    sub = comm.Split(0 if me in leaders else MPI.UNDEFINED, me)
    crowd = Crowd(comm)
    profile = None
    if sub != MPI.COMM_NULL:
        given = None if topology is None else topology.model_copy(
            update={"hosts": tuple(topology.hosts[r] for r in leaders)})
        profile = _run(sub, mode, sizes, name, given, progress,
                       None if topology is not None else
                       lambda rate, burst: host_topology(range(len(leaders)), rate, burst), crowd)
        sub.Free()
        crowd.end()
    else:  # the ranks that lead no host wait in MPI as in a collective, asleep while rank 0 fits
        crowd.follow()
    if me != 0:
        return None
    assert profile is not None and profile.topology is not None and within is not None
    (latency, bandwidth), shared_fit = fit_shared_memory(within)
    placed = topology.hosts if topology is not None else host_topology(labels, 1.0).hosts
    note = (f"hosts: {len(groups)} ({', '.join(str(len(g)) for g in groups)} ranks); the network measured among "
            f"ranks {', '.join(map(str, leaders))}, one per host, the latency matrix among every rank; shared "
            f"memory: {latency * 1e6:.2f} us and {bandwidth / 1e9:.2f} GB/s (ping-pongs between two ranks of one host)")
    provenance = profile.provenance.model_copy(update={"procs": P, "hosts": names,
                                                       "notes": (*profile.provenance.notes, note)})
    models = profile.models
    if models.latency is not None:  # measured among every rank, with the leaders' load increment
        assert pairs is not None
        models = models.model_copy(update={"latency": every_pair(pairs, placed, loaded_increment(profile, len(leaders)))})
    network = profile.default_network
    if NETWORKS[network].own_topology:  # its tree was measured among the leaders: it cannot place every rank
        network = "plogp"
        note += (f"; default_network plogp carried over the hosts' topology, not {profile.default_network}, whose "
                 f"own tree of the {len(groups)} hosts' leaders has no place for the other ranks")
        provenance = provenance.model_copy(update={"notes": (*profile.provenance.notes, note)})
    return profile.model_copy(update={
        "models": models, "default_network": network,
        "topology": profile.topology.model_copy(update={"hosts": placed, "shared_memory": (latency, bandwidth)}),
        "measurements": {**profile.measurements, "shared_memory_rtt": within},
        "fits": {**profile.fits, "shared_memory": shared_fit}, "provenance": provenance,
        "description": f"measured by colltune probe ({mode}) on {P} ranks, {len(groups)} hosts"})


def _run(comm: MPI.Comm, mode: str, sizes: Sequence[int] | None, name: str, topology: Topology | None,
         progress: Progress | None, infer: Callable[[float, float], Topology] | None,
         crowd: Crowd | None = None) -> Profile | None:
    """:func:`_probe` with its second check released on rank 0 however it ends; ``crowd``: the
    ranks of a larger job that wait meanwhile, paused while rank 0 fits."""
    second = _SecondCheck(comm, crowd)
    try:
        return _probe(comm, mode, sizes, name, topology, progress, second, infer)
    finally:
        if comm.Get_rank() == 0:
            second.release()


def _probe(comm: MPI.Comm, mode: str, sizes: Sequence[int] | None, name: str, topology: Topology | None,
           progress: Progress | None, second: _SecondCheck,
           infer: Callable[[float, float], Topology] | None = None) -> Profile | None:
    """The probe on ``comm``, one rank per host; ``infer`` makes the topology from the link rate
    (B/s) and burst (B) that the first round trips measure, where none is given."""
    P = comm.Get_size()
    if P < 2:
        raise ProbeError(f"colltune probe measures between ranks: run it on at least 2 (mpiexec -n 2 or more), "
                         f"not {P}")
    if topology is not None and topology.procs < P:
        raise ProbeError(f"topology {topology.name!r} places {topology.procs} ranks; the probe runs {P}")
    plan = plan_for(mode, sizes)
    meter = Meter(comm, plan.reps, plan.warmup, plan.budget)
    me = comm.Get_rank()

    depth = floor_log2(P)
    shared = topology is not None and topology.cores is not None and P > topology.cores
    across = None if topology is None else trunk_distance(topology.first(P))
    many = (topology is not None or infer is not None) and P > 2
    total = 16 + 2 * depth + P // 2 + shared + (across is not None) + many  # the step() calls below
    steps = iter(range(total))

    def step(what: str) -> None:
        done = next(steps)
        if me == 0 and progress is not None:
            progress(what, done, total)

    m: dict[str, Series] = {}
    fits: dict[str, Fit] = {}
    notes: list[str] = []
    n = plan.train
    trains = plan.trains()

    def sweep(key: str, sizes: Sequence[int], unit: str, method: str, kernel) -> None:  # type: ignore[no-untyped-def]
        samples = [kernel(s) for s in sizes]
        if me == 0:
            m[key] = series(unit, "bytes", sizes, samples, method)

    # -- point to point, ranks 0 and 1 ---------------------------------------------------------
    step("round trips between ranks 0 and 1")
    meter.pace(max(plan.sizes))  # also warms the path up before anything is recorded
    sweep("rtt", plan.sizes, "s", "PRTT(1, 0, s): a message and its reply", lambda s: meter.prtt(1, 0.0, s))
    if infer is not None:
        link: tuple[float, float] | str = (0.0, 0.0)
        if me == 0:
            try:
                link = (link_rate(plan.sizes, m["rtt"].medians), link_burst(plan.sizes, m["rtt"].medians))
            except ColltuneError as exc:
                link = str(exc)
        link = comm.bcast(link)
        if isinstance(link, str):
            raise ProbeError(link)
        rate, burst = link
        topology = infer(rate, burst)
        notes.append(f"topology inferred: one switch, a link of {rate * 8 / 1e6:.1f} Mbit/s to every host (the "
                     "slope of the round trips between ranks 0 and 1 over the larger half of the sizes) that passes "
                     f"{burst:.0f} B at once after an idle spell (a token bucket: where that line meets the time "
                     "axis below the smallest message's one-way time)")
    per_size = dict(zip(plan.sizes, trains, strict=True))
    name_n = f"n = {n}" if len(set(trains)) == 1 else f"n = {n}, at most {plan.train_bytes} B of messages and n >= 2"
    step(f"send gaps (trains of {n} messages)")
    sweep("prtt_train", plan.sizes, "s", f"PRTT(n, 0, s), {name_n}", lambda s: meter.prtt(per_size[s], 0.0, s))
    # d(s) must exceed the gap g + (s-1)G for PRTT(n, d, s) to time o + (s-1)O + d
    delays = comm.bcast([2 * max((b.median - a.median) / (k - 1), a.median / 2) for a, b, k in
                         zip(m["rtt"].points, m["prtt_train"].points, trains, strict=True)] if me == 0 else None)
    step("send overheads (trains with busy waits)")
    samples = [meter.prtt(k, d, s) for s, d, k in zip(plan.sizes, delays, trains, strict=True)]
    if me == 0:
        m["prtt_delay"] = series("s", "bytes", plan.sizes, samples, f"PRTT(n, d, s), {name_n}, d(s) = 2 max(gap, RTT/2)")
    step("send and receive call times")
    calls = [meter.overheads(s) for s in plan.sizes]
    step("eager threshold: sends while the receiver holds off")
    held, holds = [], []
    for s in plan.sizes:  # ascending; every size above the first that waits is taken to wait too
        holds.append(max(2 * meter.round_trip(s), MIN_HOLD))
        held.append(meter.held_sends(s, holds[-1]))
        if comm.bcast(bool(fit.send_waited(summarise(held[-1]).median, holds[-1])) if me == 0 else None):
            break
    step("bidirectional round trips")
    sweep("rtt_bi", plan.sizes, "s", "PRTT(1, 0, s) with both ranks sending", lambda s: meter.prtt(1, 0.0, s, both=True))
    sweep("prtt_train_bi", plan.sizes, "s", f"PRTT(n, 0, s), {name_n}, with both ranks sending",
          lambda s: meter.prtt(per_size[s], 0.0, s, both=True))

    # -- PlogPT's tree --------------------------------------------------------------------------
    tree: dict[bool, list] = {False: [], True: []}
    for both in (False, True):
        for h in range(1, depth + 1):
            step(f"tree load at height {h}{' (bidirectional)' if both else ''}")
            tree[both].append(meter.tree_load(h, depth, plan.tree_size, plan.tree_bursts, plan.pings, both))
    step("idle latency across the tree")
    idle = [meter.prtt(1, 0.0, 1, peer=(1 << h) - 1) for h in range(1, depth + 1)]

    # -- all pairs ------------------------------------------------------------------------------
    step("latency between every pair of ranks")
    pairs = meter.all_pairs()

    # -- paper 000's cluster model ----------------------------------------------------------------
    step("cluster model: send and receive calls per packet")
    packet_calls = [meter.overheads(s) for s in plan.packet_sizes]
    step("cluster model: send gaps per packet")
    sweep("packet_rtt", plan.packet_sizes, "s", "PRTT(1, 0, s)", lambda s: meter.prtt(1, 0.0, s))
    sweep("packet_train", plan.packet_sizes, "s", f"PRTT({n}, 0, s)", lambda s: meter.prtt(n, 0.0, s))
    step("cluster model: every rank sending to rank 0")
    sweep("receive_gap", plan.packet_sizes, "s", f"gr: {P - 1} ranks send {n} packets each to rank 0 at once; "
          "mean time between arrivals", lambda s: meter.converge(s, n))
    transfers = {}
    for k in range(1, P // 2 + 1):
        step(f"cluster model: {k} concurrent ping-pong pair{'s' if k > 1 else ''}")
        transfers[2 * k] = [meter.pair_pingpongs(k, s) for s in plan.packet_sizes]
    step(f"incast: {P - 1} rank{'s' if P > 2 else ''} sending to rank 0 at once, to provoke losses")
    incast = [meter.incast(s, plan.incast_reps) for s in plan.incast_sizes]
    step("duplex: every rank sending to the next, against every other rank")
    # After the incast on purpose: at 256 KiB-1 MiB the share depends on the connections' losses
    # before (0.85-0.96 in a fresh job, 0.75-0.79 after incasts; docs/fidelity.md), and the
    # collectives of a job run over connections that incasts have been through.
    shifts = {both: [meter.shift(s, plan.incast_reps, both) for s in plan.duplex_sizes] for both in (False, True)}
    trunk_shifts = None
    if across is not None:
        step(f"trunks: every rank sending to the rank {across} after it, across the links between switches")
        trunk_shifts = [meter.shift(s, plan.incast_reps, True, distance=across) for s in plan.duplex_sizes]
    streams = None
    if many:
        step(f"duplex streams: the direct all-to-all of {plan.duplex_sizes[0]} B blocks ({P - 1} streams into "
             "every host that sends) and the pairwise exchange (one)")
        streams = [time_collective(comm, coll, alg, plan.duplex_sizes[0], {}, STREAMS_REPS, 1, rest=REST)
                   for _ in range(STREAMS_ROUNDS) for coll, alg in STREAMS_CASES]
    cpu_shifts = None
    if shared:
        assert topology is not None and topology.cores is not None
        step(f"shared cores: every rank sending to the next, against two ({P} ranks on {topology.cores} cores)")
        cpu_shifts = {k: [meter.shift(s, plan.cpu_reps, True, among=k) for s in plan.cpu_sizes] for k in (P, 2)}
    step(f"check: {len(CHECKS)} collectives at {len(plan.check_sizes)} sizes, to choose the network model")
    cases = [(coll, alg, size) for size in plan.check_sizes for coll, alg in CHECKS]
    checks = _time_cases(comm, cases)
    hosts = comm.gather(MPI.Get_processor_name(), root=0)
    if me != 0:
        second.follow()
        return None
    second.arm()

    # -- rank 0: summaries and fits -------------------------------------------------------------
    step("fitting the models")
    sz = plan.sizes
    m["send_call"] = series("s", "bytes", sz, [c[0] for c in calls], "os(m): time of MPI_Send (rank 0)")
    m["recv_call"] = series("s", "bytes", sz, [c[1] for c in calls], "or(m): time of MPI_Recv of an arrived message")
    m["gap"] = _diff(m["prtt_train"], m["rtt"], trains, 0.0, "gap", "(PRTT(n, 0, s) - PRTT(1, 0, s)) / (n-1)")
    m["overhead"] = _diff(m["prtt_delay"], m["rtt"], trains, delays, "overhead",
                          "(PRTT(n, d, s) - PRTT(1, 0, s)) / (n-1) - d(s)")
    m["gap_bi"] = _diff(m["prtt_train_bi"], m["rtt_bi"], trains, 0.0, "bidirectional gap",
                        "(PRTT(n) - PRTT(1)) / (n-1)")
    rtt, gap = np.array(m["rtt"].medians), np.array(m["gap"].medians)
    pair = np.zeros(len(sz), dtype=np.int64)
    wire = None if topology is None else topology.wire_times(pair, pair + 1, np.asarray(sz))
    hockney, fits["hockney"] = fit.fit_hockney(sz, rtt / 2, wire)
    loggp, fits["loggp"] = fit.fit_loggp(sz, rtt, gap, m["overhead"].medians, _stderr(m["gap"]),
                                         _stderr(m["overhead"]))
    held_sizes = sz[:len(held)]
    m["held_send"] = series("s", "bytes", held_sizes, held, "time of MPI_Send while the receiver holds off (makes "
                            f"no MPI call) for two estimated round trips of the size (at least {MIN_HOLD * 1e3:g} "
                            "ms); sizes up to the first that waits")
    S, found = fit.eager_threshold(held_sizes, m["held_send"].medians, holds)
    S = max(S, 0)  # -1 (even the smallest waited) is S = 0: every message with bytes waits
    acked = S if found else None  # over a topology, the sends that wait for their receiver (ack_above)
    loggp = loggp.model_copy(update={"S": S})
    notes.append(f"loggp: S = {S} B, the largest size whose send did not wait for its receiver"
                 + (f" (the next measured size, {held_sizes[-1]} B, waited)" if found else
                    " (no size measured waited)"))
    L, g, fits["plogp"] = fit.fit_plogp(sz, rtt, float(gap[0]), gap)
    L_bi, g_bi, fits["plogp_bidirectional"] = fit.fit_plogp(sz, m["rtt_bi"].medians, m["gap_bi"].medians[0],
                                                            m["gap_bi"].medians)
    for tag, fn in (("", g), ("_bi", g_bi)):
        # g(m) = RTT(m)/2 - RTT(0)/2 + g(0): the half-spreads of the three add up
        round_trip, g0 = m[f"rtt{tag}"].points, m[f"gap{tag}"].points[0]
        half = [g0.iqr / 2] + [(p.iqr + round_trip[0].iqr) / 4 + g0.iqr / 2 for p in round_trip[1:]]
        m[f"g{tag}"] = derived("s", "bytes", sz, fn.values, half, [p.reps for p in round_trip],
                               "pLogP g(m): g(0) from the train, RTT(m)/2 - L above")
    plogp = PLogP(L=L, unidirectional=fit.table(sz, g, m["send_call"].medians, m["recv_call"].medians),
                  bidirectional=PLogPTable(g=g_bi))

    heights = list(range(1, depth + 1))
    levels: dict[bool, TreeLevels] = {}
    spreads = {}
    for both in (False, True):
        tag = "_bi" if both else ""
        m[f"tree_bandwidth{tag}"] = series("B/s", "height", heights, [t[0] for t in tree[both]],
                                          "total rate of the bursts k -> k xor 2^(h-1)" + (", per direction" if both else ""))
        m[f"tree_latency{tag}"] = series("s", "height", heights, [t[1] for t in tree[both]],
                                        "one-way latency between ranks 0 and 2^h - 1 under that load")
        if not both:
            m["tree_latency_idle"] = series("s", "height", heights, [s / 2 for s in idle],
                                            "one-way latency between ranks 0 and 2^h - 1 without load")
        levels[both], fits[f"plogpt{tag}"] = fit.fit_tree(m[f"tree_bandwidth{tag}"].medians,
                                                          m[f"tree_latency{tag}"].medians,
                                                          m["tree_latency_idle"].medians, depth, both, MPI.Wtick())
        scale = 2.0 ** np.array(heights) / 2 ** depth
        spreads[both] = ([(p.q1 * s, p.q3 * s) for p, s in zip(m[f"tree_bandwidth{tag}"].points, scale, strict=True)],
                         [(p.q1 - i.median, p.q3 - i.median) for p, i in
                          zip(m[f"tree_latency{tag}"].points, m["tree_latency_idle"].points, strict=True)])
    eps_s = fit.epsilon_s(*spreads[True])
    m["incast"] = series("s", "bytes", plan.incast_sizes, incast, f"{P - 1} ranks send one message of the size to "
                         "rank 0 at once after a barrier: time on rank 0 to the last arrival")
    lost, fits["incast"] = fit.fit_incast(plan.incast_sizes, incast, P - 1)
    m["incast_late"] = derived("fraction", "bytes", plan.incast_sizes, lost.late, [0.0] * len(lost.late),
                               [plan.incast_reps] * len(lost.late), "repetitions of the incast later than its "
                               f"lossless line by more than {fit.TCP_RTO_MIN / 2:g} s (a retransmission timeout)")
    notes.append(_incast_note(lost))
    rto, share = lost.charged_rto(), lost.timeout_share()
    rto_why = (f"{rto * 1e3:.0f} ms, as the incast measured it (it timed out in {share or 0:.0%} of its repetitions "
               "from the first size that timed out on)" if rto > 0 else
               f"0 (a drop costs only its resend): the incast timed out in {share or 0:.0%} of its repetitions "
               "from the first size that timed out on, so a timeout does not move a median time")
    eps_t = fit.epsilon_t([(p.q1, p.q3) for p in m["tree_latency_bi"].points], float(m["receive_gap"].medians[-1]))
    plogpt = PlogPT(L=L_bi, g=g_bi, bidirectional=levels[True], unidirectional=levels[False], eps_s=eps_s,
                    t_rto=rto, eps_t=eps_t)
    notes.append(f"plogpt: tree of depth {depth} over ranks 0..{2 ** depth - 1}; epsilon_S = {eps_s:.3g} from the "
                 f"spread of the bidirectional b(h), d(h); epsilon_T = {eps_t * 1e6:.0f} us, the widest spread of d(h) "
                 f"(at least one packet's receive gap); T_RTO {rto_why}")

    assert pairs is not None
    keys = sorted(pairs)
    m["pair_latency"] = series("s", "pair", range(len(keys)), [pairs[k] / 2 for k in keys],
                               "one-way latency (half the round trip) of pairs " +
                               ", ".join(f"{i}-{j}" for i, j in keys))
    latency = pair_matrix({k: p.median for k, p in zip(keys, m["pair_latency"].points, strict=True)}, hosts)
    for threshold, groups in group_levels(np.asarray(latency.latency)):
        notes.append(f"latency level up to {threshold:.3g} s: groups {groups}")

    ps = plan.packet_sizes
    m["packet_send_call"] = series("s", "bytes", ps, [c[0] for c in packet_calls], "Os: time of MPI_Send")
    m["packet_recv_call"] = series("s", "bytes", ps, [c[1] for c in packet_calls], "Or: time of MPI_Recv, arrived")
    m["packet_poll"] = series("s", "bytes", ps, [c[2] for c in packet_calls], "Ur: the MPI_Iprobe that finds it")
    m["packet_gap"] = _diff(m["packet_train"], m["packet_rtt"], n, 0.0, "gs", "(PRTT(n, 0, s) - PRTT(1, 0, s)) / (n-1)")
    costs = {}
    for key, series_name in (("Os", "packet_send_call"), ("gs", "packet_gap"), ("gr", "receive_gap"),
                             ("Or", "packet_recv_call")):
        costs[key], res = fit.fit_piecewise(ps, m[series_name].medians)
        fits[f"cluster_{key}"] = fit.record((series_name,), "non-negative least squares per side of 40 B", res)
    ur = max(float(np.median(m["packet_poll"].medians)), 0.0)
    costs["Ur"] = Piecewise.same(Linear(intercept=ur))
    procs_col, size_col, transfer, one_way = [], [], [], []
    for p, samples in transfers.items():
        key = f"transfer_p{p}"
        m[key] = series("s", "bytes", ps, samples, f"round trips in {p // 2} concurrent ping-pong pairs")
        for s, point in zip(ps, m[key].points, strict=True):
            procs_col.append(p)
            size_col.append(s)
            transfer.append(point.median / 2 - costs["Os"](s) - costs["Or"](s) - ur)
            one_way.append(point.median / 2)
    cl, res = fit.fit_cluster_latency(procs_col, size_col, transfer, costs["gs"], one_way)
    fits["cluster_L"] = fit.record(tuple(f"transfer_p{p}" for p in transfers),
                                   "L = RTT/2 - Os - Or - Ur, least squares of a p + b + c m max(1, p m/(R gs)) "
                                   "relative to RTT/2", res)
    buffer = lost.buffer()
    cluster = ClusterModel(Os=costs["Os"], gs=costs["gs"], gr=costs["gr"], Or=costs["Or"], Ur=costs["Ur"], L=cl,
                           BL=0 if buffer is None else int(buffer // max(ps)), mtu=max(ps))
    notes.append("cluster: BL from the incast (" + ("no size passed it: 0" if buffer is None else
                 f"{buffer:.0f} B, a lower bound" if lost.lossy is not None else
                 f"at least {buffer:.0f} B: no size timed out") + "); Ts and the memory copy costs are "
                 "not measured; Or is the receive call of an arrived message, since an MPI library without "
                 "asynchronous progress handles a reception inside that call")
    if P < 4:
        notes.append("cluster: with fewer than 4 ranks L(m, p) is fitted at p = 2 only, so its a (per process) is 0")

    m["check"] = summarised("s", "case", range(len(cases)), [_spread(t) for t in checks],
                            "the slowest rank's median time of " + ", ".join(f"{c}/{a}" for c, a in CHECKS) +
                            f", each with blocks of {', '.join(str(s) for s in plan.check_sizes)} B in turn")
    ds = plan.duplex_sizes
    m["duplex_one_way"] = series("s", "bytes", ds, shifts[False], "each even rank sends one message of the size "
                                 "to the odd rank after it, after a barrier: the slowest rank's time")
    m["duplex_both_ways"] = series("s", "bytes", ds, shifts[True], "every rank r sends one message of the size to "
                                   "rank r+1 and receives one from r-1, after a barrier: the slowest rank's time")
    one, both = m["duplex_one_way"].points, m["duplex_both_ways"].points
    duplex, fits["duplex"] = fit.fit_duplex(ds, [p.median for p in one], [p.median for p in both])
    m["duplex"] = derived("fraction", "bytes", ds, [e for _, e in duplex],
                          [e * (a.iqr / a.median + b.iqr / b.median) / 2 for (_, e), a, b in zip(duplex, one, both,
                                                                                                   strict=True)],
                          [b.reps for b in both],
                          "share of the link into its receiver's host a flow can use while that host sends: one "
                          "way over both ways")
    notes.append("duplex: a flow can use " + ", ".join(f"{e:.2f} at {int(b)} B" for b, e in duplex) + " of the link "
                 "into its receiver's host while that host sends (the shifts' median times, one way over both ways)")
    if topology is not None:
        topology = topology.model_copy(update={"rto": rto, "duplex": duplex, "ack_above": acked})
        notes.append(f"topology {topology.name!r}: rto {rto_why}; duplex as measured; " +
                     ("no send waited for a receiver that made no MPI call, so a send completes when its flow "
                      "ends" if acked is None else f"a send above {acked} B completes once its receiver has "
                      "processed it and the acknowledgement is back (ack_above: such a send waited for a "
                      "receiver that made no MPI call)"))
    if trunk_shifts is not None:
        assert topology is not None and across is not None
        topology = _measure_trunk_duplex(topology, hockney, ds, trunk_shifts, P, across, m, fits, notes)
    if streams is not None:
        assert topology is not None
        topology = _measure_collective_duplex(topology, hockney, plan.duplex_sizes[0], streams, P, m, fits, notes)
    hold = 0.0
    if cpu_shifts is not None:
        assert topology is not None
        _measure_message_cpu(topology, hockney, plan.cpu_sizes, cpu_shifts, P, m, fits, notes)
        hold = _measure_send_hold(topology, hockney, plan.cpu_sizes[0], P, m, fits, notes)
    delta, increments = fit.loaded_latency({p: m[f"transfer_p{p}"].medians for p in transfers}, P)
    if increments:
        m["loaded_latency"] = derived(
            "s", "processes", list(increments), list(increments.values()),
            [(m[f"transfer_p{p}"].points[0].iqr + m["transfer_p2"].points[0].iqr) / 4 for p in increments],
            [m[f"transfer_p{p}"].points[0].reps for p in increments],
            "one-way time in p/2 concurrent ping-pong pairs less that of one pair (median over the packet sizes)")
    models = fit.with_loaded_latency(
        Models(hockney=hockney, logp=LogP(L=loggp.L, o=loggp.o, g=loggp.g), loggp=loggp, plogp=plogp,
               cluster=cluster, plogpt=plogpt, latency=latency), delta)
    notes.append(f"loaded latency: {delta * 1e6:.1f} us added to the latency of hockney, logp, loggp, plogp and "
                 f"latency (fitted on one idle ping-pong): a message takes that much longer when all {P} ranks "
                 "communicate at once (paper 000's a p, from the concurrent ping-pong pairs)")
    network = _check_by_choices(models, P, cases, checks, plan.check_sizes, topology, second, step, m, notes)
    if hold > 0:
        assert topology is not None
        topology = topology.model_copy(update={"send_hold": hold})

    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    command = "colltune probe" + ("" if mode == "default" else f" --{mode}")
    provenance = Provenance(source=command, date=when, colltune_version=__version__,
                            mpi_library=MPI.Get_library_version().strip().splitlines()[0].strip(),
                            hosts=tuple(hosts), procs=P, notes=tuple(notes))
    return Profile(name=name, description=f"measured by colltune probe ({mode}) on {P} ranks",
                   default_model="plogp", default_network=network, topology=topology, provenance=provenance,
                   models=models, measurements=m, fits=fits)


def _check_by_choices(models: Models, P: int, cases: list[Case], checks: Sequence[Timing], sizes: Sequence[int],
                      topology: Topology | None, second: _SecondCheck, step: Callable[[str], None],
                      m: dict[str, Series], notes: list[str]) -> str:
    """Rank 0's second check and the profile's ``default_network`` (:mod:`colltune.probe.choices`):
    from the first check's ``cases`` and their ``checks``, the discriminating cases and the
    algorithms the :data:`FINALISTS` would choose where they disagree (block ``sizes`` in bytes)
    are timed with the waiting ranks (``second``); the series and the note are recorded in ``m``
    and ``notes``."""
    _, first = choose_network(models, P, cases, [t.median for t in checks], topology)
    extra = discriminating_cases(models, P, first, sizes, cases, len(CHECKS), topology)
    finalists = sorted(first, key=lambda n: (first[n], n))[:FINALISTS]
    prices = price_cells(models, P, finalists, sizes, topology)
    placed = topology is not None and len(topology.hosts) >= P
    choices = model_choices(prices, P, topology.host_labels(P) if placed else None)
    contested = disputed(choices)
    chosen = [case for case in contested if case not in cases and case not in extra]
    short = short_cases(contested, prices, MEAN_CALL)
    n_rounds = round_count(sum(REST + (CHECK_REPS + 1) * max(p[(c, s)][a] for p in prices.values())
                               for c, a, s in short))
    step(f"check: {len(extra)} more cases, where the two best network models disagree most, and {len(chosen)} "
         f"algorithms that the {len(finalists)} best would choose where they disagree ({len(short)} of those they "
         f"dispute in {n_rounds} rounds)")
    order = in_rounds([*extra, *chosen], short, n_rounds)
    more = second.lead(order)
    m["check_discriminating"] = summarised(
        "s", "case", range(len(extra)), [_spread(t) for t in more[:len(extra)]],
        "the slowest rank's median time of " + ", ".join(f"{c}/{a} {s} B" for c, a, s in extra)
        + ": the cases on which the two network models that predict the check best disagree most")
    rounds: dict[Case, list[Timing]] = {}
    for case, timing in zip([*cases, *order], [*checks, *more], strict=True):
        rounds.setdefault(case, []).append(timing)
    summary = {case: _over_rounds(rounds[case]) for case in contested}
    if summary:  # a series has points
        m["check_choices"] = summarised(
            "s", "case", range(len(contested)), list(summary.values()),
            "the slowest rank's time of " + ", ".join(f"{c}/{a} {s} B" for c, a, s in contested) +
            f": the algorithms that the network models {', '.join(finalists)} would choose where they disagree; the "
            f"median of {n_rounds} rounds' medians for those they all price below {MEAN_CALL * 1e3:g} ms")
    timed = [*cases, *extra, *chosen]
    measured = [rounds[c][0].median for c in timed]
    _, errors = choose_network(models, P, timed, measured, topology)
    scores = choice_scores(choices, {case: spread.median for case, spread in summary.items()})
    network = choose_by_choices(scores, errors)
    over = "" if topology is None else f" (endpoint models carried over topology {topology.name!r})"
    ranked = ", ".join(f"{n} {e:.0%}" for n, e in sorted(errors.items(), key=lambda ne: ne[1]))
    ranked_first = ", ".join(f"{n} {first[n]:.0%}" for n in finalists)
    cells = sorted({(c, s) for c, _, s in contested})
    notes.append(f"default_network {network}: of the {len(finalists)} network models with the smallest check error "
                 f"on the check ({ranked_first}; the mean of the median and the 90th percentile of the relative "
                 f"errors), of those whose choices ran within {CHOICE_TIE:.0%} of the fastest in the {len(cells)} "
                 f"cells where they choose differently (" + (", ".join(f"{c} {s} B" for c, s in cells) or "none") + "; measured over the "
                 f"fastest choice, a choice within {BEST_TOLERANCE:.0%} of it counting as 1, geometric mean: " +
                 ", ".join(f"{n} {scores[n]:.3f}" for n in finalists) + "), the one with the smallest check error on "
                 f"every case of the check, the {len(extra)} where the two best disagree most and the chosen "
                 f"algorithms{over} ({ranked})")
    return network


def _spread(timing: Timing) -> Spread:
    """A timing's median and quartiles (s) and repetitions as a profile keeps them."""
    return Spread(median=timing.median, q1=timing.q1, q3=timing.q3, reps=timing.reps)


def _over_rounds(timings: Sequence[Timing]) -> Spread:
    """One case timed in one or more rounds: the median of the rounds' medians (s) between the
    quartiles of those medians (of the one round's runs if alone), and the repetitions in all."""
    if len(timings) == 1:
        return _spread(timings[0])
    q1, median, q3 = np.percentile([t.median for t in timings], [25, 50, 75])
    return Spread(median=float(median), q1=float(q1), q3=float(q3), reps=sum(t.reps for t in timings))


def _incast_note(lost: fit.Incast) -> str:
    """The profile's note on what the controlled incast showed."""
    late = ", ".join(f"{s} B {f:.0%}" for s, f in zip(lost.sizes, lost.late, strict=True))
    rto = ("no repetition timed out" if lost.t_rto is None else
           f"a timeout cost {lost.t_rto * 1e3:.0f} ms over the lossless line (T_RTO)")
    where = ("no size timed out in most repetitions" if lost.lossy is None else
             f"most repetitions timed out from {lost.lossy} B per sender on")
    return f"incast: {lost.senders} senders; repetitions that timed out: {late}; {where}; {rto}"


def _measure_trunk_duplex(topology: Topology, hockney: Hockney, sizes: Sequence[int], shifts: list, procs: int,
                          distance: int, m: dict[str, Series], fits: dict[str, Fit], notes: list[str]) -> Topology:
    """``topology`` with the ``trunk_duplex`` that the shift across its links between switches
    measured (:func:`colltune.probe.fit.fit_trunk_duplex`, simulated with Hockney's idle fit over
    the topology with its measured host ``duplex``); the series, fit and note recorded."""
    m["trunk_shift"] = series("s", "bytes", sizes, shifts, f"every rank r of {procs} sends one message of the size to "
                              f"r+{distance} and receives one from r-{distance} (modulo {procs}), after a barrier: "
                              "the slowest rank's time")
    time = trunk_shift_time(topology.first(procs), hockney, sizes)
    table, fits["trunk_duplex"] = fit.fit_trunk_duplex(sizes, m["trunk_shift"].medians, time)
    spreads = []
    for (size, e), point in zip(table, m["trunk_shift"].points, strict=True):
        de = 0.01
        slope = (time(int(size), e - de) - time(int(size), e)) / de if e > de else 0.0
        spreads.append(point.iqr / slope if slope > 0 else 0.0)
    m["trunk_duplex"] = derived("fraction", "bytes", sizes, [e for _, e in table], spreads,
                                [p.reps for p in m["trunk_shift"].points],
                                "share of a link between switches a flow can use while data crosses it the other "
                                "way: the one whose simulated shift across those links matches the measured one")
    notes.append("trunk_duplex: a flow can use " + ", ".join(f"{e:.2f} at {int(b)} B" for b, e in table) +
                 " of a link between switches while data crosses it the other way (the shift of every rank by "
                 f"{distance}, inverted through the simulator); applied in the topology")
    return topology.model_copy(update={"trunk_duplex": table})


def _measure_collective_duplex(topology: Topology, hockney: Hockney, size: int, timings: Sequence[Timing],
                               procs: int, m: dict[str, Series], fits: dict[str, Fit], notes: list[str]) -> Topology:
    """``topology`` with the duplex table as a collective's steps meet it and its
    ``duplex_streams``, from :data:`STREAMS_ROUNDS` rounds of :data:`STREAMS_CASES` of ``size``
    bytes blocks (``timings``, round after round), each simulated as the third of calls back to back
    (Hockney's idle fit over the topology with every table measured before).  The series, fits and
    notes recorded.

    - The depth (:func:`colltune.probe.fit.fit_duplex_depth`): the part of the shifts' shortfall
      at which the simulated pairwise exchange takes its measured median.  The shifts start every
      host's exchange at once after a barrier; the pairwise exchange runs the same both-ways shift
      at each distance, its steps back to back, as a collective's steps run.  The table keeps the
      shifts' shape over sizes, its shortfall cut to that depth (none left at depth 0).
    - The part of the remaining shortfall that many streams into one host recover together
      (:func:`colltune.probe.fit.fit_duplex_streams`): at which the simulated direct all-to-all
      runs as much faster than the simulated pairwise exchange as measured, by the median of the
      rounds' ratios (one round's ratio varies less from probe to probe than either time); not
      applied if none is recovered."""
    n = len(STREAMS_CASES)
    by_case = [list(timings[k::n]) for k in range(n)]
    m["duplex_streams_alltoall"] = summarised(
        "s", "case", range(n), [_over_rounds(t) for t in by_case],
        "the slowest rank's time of " + " and ".join(f"{c}/{a}" for c, a in STREAMS_CASES) +
        f" with blocks of {size} B, one right after the other, in {len(by_case[0])} rounds (the median of the "
        f"rounds' medians): {procs - 1} streams into every host while it sends, and one")
    direct, pairwise = (REGISTRY.get(c, a).schedule(procs, 0, size) for c, a in STREAMS_CASES)
    streams = float(procs - 1)
    shifts = topology.duplex

    def time(schedule: Schedule, depth: float, part: float) -> float:
        table = None if shifts is None else fit.deepened(shifts, depth)
        topo = topology.model_copy(update={"duplex": table,
                                           "duplex_streams": (streams, part) if part > 0 and table else None})
        return steady_call(schedule, "hockney", hockney, topology=topo)

    depth = 0.0
    if shifts is not None:
        measured = m["duplex_streams_alltoall"].points[1].median
        depth, fits["duplex_depth"] = fit.fit_duplex_depth(measured, lambda k: time(pairwise, k, 0.0))
        notes.append(f"duplex: a collective's steps meet {depth:.2f} of the shifts' shortfall (the pairwise exchange "
                     f"of {size} B blocks took {measured * 1e3:.2f} ms, the median of {len(by_case[1])} rounds; "
                     "inverted through the simulator); the table's shares " +
                     ("cut to that depth" if depth > 0 else "all 1: not applied"))
        topology = topology.model_copy(update={"duplex": fit.deepened(shifts, depth)})
    if topology.duplex is None:
        return topology
    ratio = float(np.median([d.median / p.median for d, p in zip(*by_case, strict=True)]))
    target = time(pairwise, depth, 0.0) * ratio  # the direct one at the simulated pairwise's level
    part, fits["duplex_streams"] = fit.fit_duplex_streams(target, lambda r: time(direct, depth, r))
    notes.append(f"duplex_streams: {procs - 1} streams into a host that sends recover {part:.2f} of the duplex "
                 f"table's shortfall (the direct all-to-all of {size} B blocks ran {ratio:.2f} of the pairwise "
                 f"exchange's time, the median of {len(by_case[0])} rounds; inverted through the simulator)"
                 + ("" if part > 0 else "; not applied"))
    return topology if part <= 0 else topology.model_copy(update={"duplex_streams": (streams, part)})


def _measure_message_cpu(topology: Topology, hockney: Hockney, sizes: Sequence[int], shifts: dict[int, list],
                         procs: int, m: dict[str, Series], fits: dict[str, Fit], notes: list[str]) -> None:
    """Record the ``message_cpu`` that ``topology``'s shared cores give the shifts of every rank and
    of two, one byte per message (:func:`colltune.probe.fit.fit_message_cpu`, simulated with
    Hockney's idle fit over the topology): the series, the fit, the cost and a note.

    It is measured, not written into the profile's topology (the loaded latency stands for it):
    its value varies from probe to probe by a factor of two.  One byte per message, because at
    kilobytes the shifts hold more than processor time (a host's acknowledgements queue behind
    its data)."""
    m["cpu_shift_all"] = series("s", "bytes", sizes, shifts[procs], f"every rank r of {procs} sends one message of "
                                "the size to r+1 and receives one from r-1, after a barrier: the slowest rank's time")
    m["cpu_shift_pair"] = series("s", "bytes", sizes, shifts[2], "the same between ranks 0 and 1 alone")
    excess = shift_excess(topology.first(procs), hockney, sizes)
    table, fits["message_cpu"] = fit.fit_message_cpu(sizes, m["cpu_shift_all"].medians, m["cpu_shift_pair"].medians,
                                                     excess)
    spreads = [_spread_through(lambda v, s=int(size): excess(s, v), c, a, b)
               for (size, c), a, b in zip(table, m["cpu_shift_all"].points, m["cpu_shift_pair"].points, strict=True)]
    m["message_cpu"] = derived("s", "bytes", sizes, [c for _, c in table], spreads,
                               [p.reps for p in m["cpu_shift_all"].points],
                               f"processor time a message takes of one of the {topology.cores} cores the hosts share, "
                               "at each end: the one whose simulated shift of every rank exceeds that of two by as "
                               "much as measured")
    notes.append("message_cpu: a message takes " + ", ".join(f"{c * 1e6:.1f} us at {int(b)} B" for b, c in table) +
                 f" of one of the {topology.cores} cores the hosts share, at each end (the shift of every rank "
                 "against that of two, inverted through the simulator); measured, not applied: the loaded latency "
                 "stands for it")


def _spread_through(excess: Callable[[float], float], value: float, crowded: Spread, pair: Spread) -> float:
    """Half the spread of a ``value`` inverted from the excess of the ``crowded`` shift over the
    ``pair``'s: their mean interquartile range carried back through the simulated ``excess`` (its
    mean slope from 0 to ``value``); 0 where the value is 0 or the excess does not grow."""
    slope = (excess(value) - excess(0.0)) / value if value > 0 else 0.0
    return (crowded.iqr + pair.iqr) / 2 / slope if slope > 0 else 0.0


def _measure_send_hold(topology: Topology, hockney: Hockney, size: int, procs: int, m: dict[str, Series],
                       fits: dict[str, Fit], notes: list[str]) -> float:
    """The ``send_hold`` (s) whose random holds at every send make the simulated shift of every
    rank exceed that of two by as much as the shifts of ``size`` bytes in ``m`` did
    (:func:`colltune.probe.fit.fit_send_hold`, Hockney's idle fit over the topology): the series,
    the fit and a note are recorded.  The caller writes it into the profile's topology once the
    check has chosen the network model (the check prices without it: each hold costs
    :data:`colltune.sim.engine.HOLD_DRAWS` simulations, which the probe's budget has no room for).

    Why a hold: a step in which every rank takes part waits for the latest of its senders, and
    with more ranks than cores a sender waits for a core a varying time; the loaded latency, a
    flat increment, keeps the ranks in lock step, which a random hold does not."""
    index = m["cpu_shift_all"].x.index(size)
    a, b = m["cpu_shift_all"].points[index], m["cpu_shift_pair"].points[index]
    crowded, pair = a.median, b.median
    excess = shift_excess(topology.first(procs), hockney, [size], cost="send_hold")
    hold, fits["send_hold"] = fit.fit_send_hold(crowded, pair, lambda h: excess(size, h))
    m["send_hold"] = derived("s", "bytes", [size], [hold], [_spread_through(lambda h: excess(size, h), hold, a, b)],
                             [a.reps], "mean of a random hold at every send: the one whose simulated shift of every "
                             "rank exceeds that of two by as much as measured")
    notes.append(f"send_hold: {hold * 1e6:.1f} us, the mean of a random hold at every send (the shift of every rank "
                 f"of {size} B against that of two, {(crowded - pair) * 1e6:.1f} us longer, inverted through the "
                 "simulator); applied to the profile's topology after the check, which prices without it")
    return hold


def choose_network(models: Models, procs: int, cases: Sequence[tuple[str, str, int]],
                   measured: Sequence[float], topology: Topology | None = None) -> tuple[str, dict[str, float]]:
    """The simulator's network model whose predictions of ``cases`` (collective, algorithm, block
    size in bytes) at ``procs`` ranks come closest to ``measured`` (seconds, in the same order), by
    :func:`check_error`, and that error for every network model ``models`` can price; each
    endpoint model is carried over ``topology`` if given (:func:`colltune.sim.topology_for`), and
    there priced as the third of calls made back to back, as the check times them and the tuner
    prices them (:func:`colltune.sim.calls.steady_call`)."""
    errors = {}
    for net in NETWORKS.values():
        params = getattr(models, net.params, None)
        if params is None:
            continue
        try:
            topo = topology_for(topology, net.name, procs)
            predicted = [steady_call(REGISTRY.get(coll, alg).schedule(procs, 0, size), net.name, params,
                                     topology=topo) for coll, alg, size in cases]
        except ColltuneError:
            continue
        errors[net.name] = check_error(predicted, measured)
    return min(errors, key=lambda n: (errors[n], n)), errors


def check_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """How far ``predicted`` is from ``measured`` (seconds, case by case): the mean of the median
    and the 90th percentile of the relative errors |p - t| / t, the two figures the fidelity
    benchmark sets targets for.  By the median alone, a model that misses a few patterns badly (its 90th
    percentile far behind) can win by a point."""
    errors = np.abs(np.asarray(predicted, dtype=float) - measured) / np.asarray(measured, dtype=float)
    return float((np.median(errors) + np.quantile(errors, 0.9)) / 2)

