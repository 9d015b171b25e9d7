"""The hosts of a probed job: which ranks share one, what a message between two of them costs,
and the topology the probe infers where it is given none.

A cluster's node runs many ranks, which exchange messages through memory they share and share the
node's network link.  The probe finds the hosts with ``MPI_Comm_split_type``
(:func:`colltune.runtime.hosts.host_labels`), times ping-pongs between two ranks of one host
(:func:`shared_memory_rtt`), and fits a latency and a copy bandwidth to them
(:func:`fit_shared_memory`: RTT(m) / 2 = L + m / B), which the
simulator charges every message within a host (:meth:`colltune.sim.topology.Topology.memory_costs`).
The network is measured among one rank per host while the other ranks wait in MPI as they do in
a collective (:class:`Crowd`), and the ranks of a host share its link in the topology, where
their flows share it as they do on the wire.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mpi4py import MPI

from colltune.errors import ColltuneError
from colltune.models.params import LatencyMatrix
from colltune.probe.fit import loaded_latency, record
from colltune.probe.measure import Meter
from colltune.probe.stats import series
from colltune.profiles.format import Fit, Profile, Series
from colltune.runtime.quiet import sleep_until
from colltune.sim.topology import Topology, star


def groups_of(labels: Sequence[int]) -> list[list[int]]:
    """The ranks of each host, ascending, hosts in the order of their lowest rank."""
    out: dict[int, list[int]] = {}
    for r, label in enumerate(labels):
        out.setdefault(label, []).append(r)
    return list(out.values())


def host_topology(labels: Sequence[int], rate: float, burst: float = 0.0) -> Topology:
    """One switch with every host of ``labels`` on a link of ``rate`` B/s each way that passes
    ``burst`` bytes at once after an idle spell, rank r on the host of its label: the topology the
    probe infers from the hosts it found and the link it measured (:func:`link_rate`,
    :func:`link_burst`)."""
    groups = groups_of(labels)
    names = {r: f"h{g}" for g, ranks in enumerate(groups) for r in ranks}
    base = star(len(groups), rate)
    nodes = tuple(n if n.parent is None else n.model_copy(update={"burst": burst}) for n in base.nodes)
    return base.model_copy(update={"name": f"star-{len(groups)}-hosts", "nodes": nodes,
                                   "hosts": tuple(names[r] for r in range(len(labels))),
                                   "description": f"inferred by colltune probe: one switch, {len(groups)} hosts "
                                                  f"at {rate:g} B/s" + (f", bursts of {burst:.0f} B" if burst else "")})


def _wire_line(sizes: Sequence[float], rtt: Sequence[float]) -> tuple[float, float]:
    """Slope (s/B) and intercept (s) of the one-way time RTT(m) / 2 where the wire decides: over the
    larger half of the sizes, then again over those of them above twice the burst that first line
    implies (:func:`link_burst`), if three remain, so that sizes a token bucket still shortens do not
    bend it."""
    m = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(rtt, dtype=np.float64) / 2
    keep = m >= np.median(m)
    if keep.sum() < 2:
        keep = m >= 0
    slope, intercept = np.polyfit(m[keep], t[keep], 1)
    if slope > 0:
        above = keep & (m >= 2 * (t[int(np.argmin(m))] - intercept) / slope)
        if above.sum() >= 3:
            slope, intercept = np.polyfit(m[above], t[above], 1)
    return float(slope), float(intercept)


def link_rate(sizes: Sequence[float], rtt: Sequence[float]) -> float:
    """The rate, B/s, of the link between two ranks: one over the slope of RTT(m) / 2 over the
    larger half of the sizes (where the wire decides); :class:`ColltuneError` if it does not grow."""
    slope, _ = _wire_line(sizes, rtt)
    if not slope > 0:
        raise ColltuneError("the round trips between ranks 0 and 1 do not grow with the message size, so the probe "
                            "cannot tell the link's rate; give the network with --topology")
    return 1 / slope


def link_burst(sizes: Sequence[float], rtt: Sequence[float]) -> float:
    """The bytes the link between two ranks passes at once after an idle spell (a token bucket's
    depth: tc tbf's burst, a cloud NIC's allowance), from the same round trips as
    :func:`link_rate`: a bucket of B bytes makes a message of m > B bytes take a + (m - B) / R one
    way, so the line through the larger sizes meets the time axis B / R below a, the one-way time of
    the smallest message; B = R (a - intercept), 0 where the line does not pass below a (a wire
    without a bucket, whose store-and-forward hops put it above)."""
    slope, intercept = _wire_line(sizes, rtt)
    smallest = float(np.asarray(rtt, dtype=np.float64)[int(np.argmin(sizes))]) / 2
    return max(0.0, (smallest - intercept) / slope) if slope > 0 else 0.0


class Crowd:
    """The ranks of a job that take no part in a measurement, waiting as ranks wait in a collective.

    In a collective every rank of the job is inside an MPI call, and MPICH and Open MPI poll for
    progress while a call waits.  Where ranks share cores (8 on the testbed's 2), the ranks that
    take part then get only their share of the cores, and every message waits until its receiver
    runs again.  So while some ranks measure, the others wait in MPI (polling) too, and sleep only
    while rank 0 fits, which takes no network: :meth:`follow` on the waiting ranks, and on the
    measuring ones :meth:`pause` as the fits start, :meth:`resume` as the timing goes on and
    :meth:`end` (each once, in this order; every call is a non-blocking barrier of ``comm``)."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm

    def follow(self) -> None:
        """The waiting ranks: polling until :meth:`pause`, asleep until :meth:`resume`, polling
        until :meth:`end`."""
        self.comm.Ibarrier().Wait()
        sleep_until(self.comm.Ibarrier())
        self.comm.Ibarrier().Wait()

    def pause(self) -> None:
        self.comm.Ibarrier().Wait()

    def resume(self) -> None:
        self.comm.Ibarrier().Wait()

    def end(self) -> None:
        sleep_until(self.comm.Ibarrier())


def shared_memory_rtt(comm: MPI.Comm, groups: list[list[int]], sizes: Sequence[int], reps: int,
                      warmup: int) -> Series | None:
    """Round trips (s) between the two lowest ranks of the first host that has two, at ``sizes``
    (collective; the series on rank 0, None elsewhere).  The other ranks wait in MPI, polling as in
    a collective (:class:`Crowd`)."""
    a, b = next(g[:2] for g in groups if len(g) > 1)
    me = comm.Get_rank()
    pair = comm.Split(0 if me in (a, b) else MPI.UNDEFINED, me)
    samples = None
    if pair != MPI.COMM_NULL:
        meter = Meter(pair, reps, warmup)
        samples = [meter.prtt(1, 0.0, s) for s in sizes]
        pair.Free()
    comm.Ibarrier().Wait()  # polling
    if a != 0:
        if me == a:
            comm.send(samples, 0, tag=77)
        elif me == 0:
            samples = comm.recv(source=a, tag=77)
    if me != 0:
        return None
    return series("s", "bytes", sizes, samples, f"PRTT(1, 0, s) between ranks {a} and {b}, which share a host")


def fit_shared_memory(rtt: Series) -> tuple[tuple[float, float], Fit]:
    """``(latency s, bandwidth B/s)`` of shared memory from round trips within a host: the latency
    is half the round trip of the smallest size, the bandwidth one over the slope of RTT(m) / 2
    over the larger half of the sizes (:func:`link_rate`), where the copies decide.  A fit of both
    by relative least squares weighs the small sizes, whose times the latency decides, and on
    this machine put the bandwidth ten times above what a 1 MiB ping-pong moves."""
    m = np.asarray(rtt.x, dtype=np.float64)
    t = np.asarray(rtt.medians, dtype=np.float64)
    try:
        bandwidth = link_rate(m, t)
    except ColltuneError:
        raise ColltuneError("the round trips within a host do not grow with the message size; the probe cannot "
                            "tell shared memory's bandwidth") from None
    latency = float(t[np.argmin(m)] / 2)
    return (latency, bandwidth), record(("shared_memory_rtt",), "latency: RTT(smallest)/2; bandwidth: 1 / the slope "
                                        "of RTT(m)/2 over the larger half of the sizes",
                                        t / 2 - (latency + m / bandwidth))


def pair_matrix(one_way: dict[tuple[int, int], float], hosts: Sequence[str], added: float = 0.0) -> LatencyMatrix:
    """The latency matrix of ranks on ``hosts`` (each rank's host) from the one-way latency (s) of
    each pair (i, j) in ``one_way``, plus ``added`` (s) off the diagonal, the ranks named
    ``HOST:RANK``."""
    procs = len(hosts)
    lat = np.zeros((procs, procs))
    for (i, j), value in one_way.items():
        lat[i, j] = lat[j, i] = value + added
    names = tuple(f"{h}:{r}" for r, h in enumerate(hosts))
    return LatencyMatrix(names=names, latency=tuple(tuple(float(v) for v in row) for row in lat))


def every_pair(pairs: dict[tuple[int, int], np.ndarray], hosts: Sequence[str], loaded: float) -> LatencyMatrix:
    """The latency matrix of every rank from the round trips ``pairs`` (s, per pair (i, j), i < j:
    :meth:`colltune.probe.measure.Meter.all_pairs` over the whole job, whose rounds of concurrent
    pairs load the cores as a collective does where ranks share them): half the median round trip
    plus ``loaded`` (s, :func:`loaded_increment`), the ranks named ``HOST:RANK`` by ``hosts`` (each
    rank's host)."""
    return pair_matrix({pair: float(np.median(samples)) / 2 for pair, samples in pairs.items()}, hosts, loaded)


def loaded_increment(profile: Profile, procs: int) -> float:
    """The load increment (s) that the probe among ``procs`` hosts' leaders added to its models'
    latencies, fitted again from its concurrent ping-pong pairs (:func:`colltune.probe.fit.loaded_latency`)."""
    transfers = {int(key.removeprefix("transfer_p")): series.medians
                 for key, series in profile.measurements.items() if key.startswith("transfer_p")}
    return loaded_latency(transfers, procs)[0] if 2 in transfers else 0.0
