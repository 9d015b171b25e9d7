"""Timing collectives in the running MPI job: the measuring tuner, the library timer of the hybrid
tuner, and ``colltune bench``.

The tuners price a candidate by :attr:`Timing.price`: the slowest rank's median call, or its mean
call (what the OSU-style C client of ``bench --library`` reports) where calls take
:data:`MEAN_CALL` or more; ``bench`` records the median and quartiles of the slowest rank per
repetition.

One timing of a candidate: every rank builds the plan (:func:`colltune.runtime.plan`) on buffers
of the right sizes, sleeps for a moment (:data:`TUNE_REST` in the tuners, :data:`REST` in the
fidelity benchmark and the probe's check, not in ``bench``), runs it ``warmup`` times, then
``reps`` times, each after a barrier, timing its own call with ``MPI.Wtime``.  A repetition's time
is the slowest rank's (one ``allreduce`` with MAX over the vector of repetitions, so every rank
holds the same numbers and takes the same decisions), and the result is the median of the
repetitions with its quartiles.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune import __version__
from colltune.collectives import Problem, get_collective
from colltune.errors import ParameterError
from colltune.models import Unavailable
from colltune.profiles.format import Provenance
from colltune.runtime.api import plan
from colltune.tune.bench import BenchPoint, BenchResults, BenchSeries, Predictor, bench_runs, predicted
from colltune.tune.forcing import MpichForcer, OpenMPIForcer
from colltune.tune.library_bench import NETWORK_BLOCK, NETWORK_WARMUP
from colltune.tune.select import Pricer
from colltune.tune.table import NATIVE, DecisionTable

#: Seconds: where the slowest rank's median call takes at least this long, the tuners price a
#: candidate by the slowest rank's mean call (:attr:`Timing.price`), as the C client of ``bench
#: --library`` and a program pay it, rather than by its median.  A median cannot see a loss that
#: strikes one call in ten: on the 8-host testbed (100 Mbit/s, cubic), Open MPI's linear gather of
#: 32 KiB (every rank sends at once, eagerly) had a median call of 19 ms like the other gathers, but
#: one call in 10-40 took 35-40 ms (a fast retransmission) or 230 ms (a timeout) at the switch port
#: of the root, which made its mean 23.5-30.6 ms in 5 of 6 rounds of fresh jobs against 19.3-19.9
#: for the others (``benchmarks/call_regimes.py --library openmpi --collective gather --size 32KiB
#: --algorithms native,basic_linear,linear_sync``, 2026-11-27); the hybrid tuner had chosen it
#: there on its median (20.4 against 25.6 ms), and the C client found the file 0.79 times as fast
#: as Open MPI's defaults.  Below, a mean would count what the median is there to leave out: with
#: 8 ranks on 2 cores some calls wait 2-5 ms for a core (the same runs: 22-27 ms calls among the
#: 19 ms ones of every gather), which is a few percent of a 10 ms call over 20 calls but several
#: times a call of a few hundred microseconds.
MEAN_CALL = 0.01


@dataclass(frozen=True)
class Timing:
    """Median and quartiles of a collective's time, in seconds, over ``reps`` repetitions (each
    repetition's time the slowest rank's), ``rank_median``: the largest over the ranks of each
    rank's median time, the OSU-style figure (the slowest rank's typical call) without the
    outliers an average keeps, and ``rank_mean``: the largest over the ranks of each rank's mean
    time, the C client's figure."""

    median: float
    q1: float
    q3: float
    reps: int
    rank_median: float
    rank_mean: float

    @property
    def price(self) -> float:
        """Seconds per call the tuners price the candidate at: ``rank_mean`` where ``rank_median``
        is :data:`MEAN_CALL` or more (a long call, where a loss is not an outlier to leave out but
        part of what it costs), else ``rank_median``."""
        return self.rank_mean if self.rank_median >= MEAN_CALL else self.rank_median


def _buffers(collective: str, procs: int, me: int, size: int) -> tuple[Any, ...]:
    """Buffers for ``collective`` with blocks of ``size`` bytes (uint8 data; root 0)."""
    send, recv = get_collective(collective).buffers(Problem(collective, procs, 0, size))
    if collective == "bcast":
        return (np.zeros(recv[me], np.uint8),)
    if get_collective(collective).synchronizes:
        return ()
    return np.ones(send[me], np.uint8), np.zeros(recv[me], np.uint8)


#: With a time budget, at least this many timed repetitions are kept: the median of three is the
#: smallest that discards one outlier.
MIN_REPS = 3
#: Seconds one timing of a candidate may take when the tuners time in the job (warm-up included,
#: down to MIN_REPS repetitions): the hybrid tuner times about a thousand candidates at P = 8 up
#: to 512 KiB on the 100 Mbit/s testbed, most of them far shorter, and issue #19 gives it five
#: minutes in all.
TIMING_BUDGET = 1.0
#: Seconds of timed calls the tuners' timings fill at least, by repeating a cheap call up to
#: :data:`FILL_FACTOR` times the requested repetitions.  Below about 8 KiB a call on the 8-host
#: testbed takes a few milliseconds, and there the differences the tuners must see are near their
#: tolerance: MPICH's pairwise all-to-all of 4 KiB was timed 6 % ahead of the default by the
#: hybrid tuner, then not confirmed, and was 12 % ahead in the C client.  A few dozen calls of a
#: few milliseconds cost little beside a timing's fixed cost (plan, barriers, warm-up).
TIMING_FILL = 0.1
FILL_FACTOR = 4


#: Seconds: where a call takes at least this long, the tuner's confirming timings
#: (:meth:`colltune.tune.select.Tuner._confirmed`) are made twice in a row and the second counts.
#: A timing that follows another algorithm's pays for the switch: the connections the new pattern
#: wakes restart from a small congestion window.  On the 8-host testbed (100 Mbit/s, cubic), in one
#: MPICH job, the recursive-doubling allgather of 128 KiB after the ring took 106 ms falling to
#: 86 ms over ten calls (1 s), and the hybrid tuner's confirming timings had it at 117 and 114 ms
#: against the ring's 89 ms, where the C client found it 5 % faster than the ring; at 32 KiB (24 ms
#: calls) no such transient was seen.
SETTLE_CALL = 0.03

#: Seconds every rank sleeps before a case's first call when its timings must not pay for the case
#: before (``time_collective(rest=...)``; the fidelity benchmark and the probe's check).  With more
#: ranks than cores (the testbed runs 8 on 2) a case that follows one in which some ranks computed
#: far more than others (a 512 KiB reduction or all-to-all) can run several times slower, in steps
#: of about 5.6 ms per call: on the star (2026-11-25), a stretch of 76 cases of the fidelity
#: benchmark timed back to back had 1-7 such cases per run (a 4 KiB broadcast 11.1 ms against
#: 1.1 ms), none with every rank asleep for 10, 50 or 500 ms before each case, and 1-5 with the
#: ranks spinning in MPI for 20 ms instead.  So it is most likely the CPU scheduler's memory of what
#: each rank used, which a sleep clears, not traffic left on the network (docs/fidelity.md).  50 ms
#: leaves a margin.
REST = 0.05
#: Seconds every rank sleeps before each of the tuners' timings: the shortest :data:`REST` that
#: cleared the slow cases above (10 ms), since the hybrid tuner makes about 1200 timings within the
#: five minutes of issue #19.  In one MPICH job on the testbed, eight pairs of timings of MPICH's
#: ring allreduce of 32 KiB and its own put the ring at 0.79-1.06 and 0.84-0.99 of MPICH's time
#: without it, 0.82-0.92 and 0.83-0.92 with it.
TUNE_REST = 0.01


def time_collective(comm: MPI.Comm, collective: str, algorithm: str, size: int, params: dict[str, Any],
                    reps: int, warmup: int, budget: float | None = None, fill: float = 0.0,
                    rest: float = 0.0, fill_factor: int = FILL_FACTOR) -> Timing:
    """Time one collective call (collective: every rank of ``comm`` calls it with the same arguments).

    With ``budget`` or ``fill`` (seconds), the first warm-up run is timed (slowest rank).  With
    ``budget``, the other warm-up runs are skipped if they would take more than a tenth of the
    budget, and the repetitions are cut to what fits in the budget, but not below
    :data:`MIN_REPS`; with ``fill`` they are first raised to what fills ``fill``, but not above
    ``fill_factor`` times ``reps``.  With ``rest`` (seconds), every rank sleeps that long between
    two barriers once the plan is built, before the first warm-up run (:data:`REST`)."""
    procs, me = comm.Get_size(), comm.Get_rank()
    op = "sum" if get_collective(collective).reduces else None
    with plan(collective, *_buffers(collective, procs, me, size), comm=comm, algorithm=algorithm, op=op,
              **params) as p:
        if rest > 0:
            comm.Barrier()
            time.sleep(rest)
            comm.Barrier()
        for i in range(warmup):
            if (budget is None and fill <= 0) or i > 0:
                p.run()
                continue
            comm.Barrier()
            t0 = MPI.Wtime()
            p.run()
            first = max(comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX), 1e-9)
            reps = max(reps, min(fill_factor * reps, int(fill / first)))
            if budget is not None:
                reps = min(reps, max(MIN_REPS, int(budget / first)))
                if first * warmup > budget / 10:
                    break
        mine = np.empty(reps)
        for i in range(reps):
            comm.Barrier()
            t0 = MPI.Wtime()
            p.run()
            mine[i] = MPI.Wtime() - t0
    # one reduction: each repetition's slowest rank, then the largest rank median and rank mean
    mine = np.append(mine, [np.median(mine), np.mean(mine)])
    largest = np.empty_like(mine)
    comm.Allreduce(mine, largest, op=MPI.MAX)
    q1, med, q3 = np.percentile(largest[:reps], [25, 50, 75])
    return Timing(float(med), float(q1), float(q3), reps, float(largest[reps]), float(largest[reps + 1]))


def network_warmup(comm: MPI.Comm) -> float:
    """Seconds a timing job on ``comm`` warms its network for before it times anything: on ranks
    of more than one host (by processor name) :data:`~colltune.tune.library_bench.NETWORK_WARMUP`,
    as the C client of ``bench --library`` does on a testbed; else 0 (collective)."""
    return NETWORK_WARMUP if len(set(comm.allgather(MPI.Get_processor_name()))) > 1 else 0.0


def warm_network(comm: MPI.Comm, seconds: float) -> int:
    """Rounds of a pairwise exchange of :data:`~colltune.tune.library_bench.NETWORK_BLOCK` bytes
    (in step ``i`` of a round every rank sends to rank + ``i`` and receives from rank - ``i``: one
    peer each way at a time, so no incast) until rank 0 has seen ``seconds`` pass: the C client's
    warm-up (:data:`~colltune.tune.library_bench.NETWORK_WARMUP` says why).  Collective; returns
    the rounds made (0 where ``seconds`` is 0 or ``comm`` has one rank)."""
    procs, me = comm.Get_size(), comm.Get_rank()
    if seconds <= 0 or procs < 2:
        return 0
    out = np.zeros(NETWORK_BLOCK, np.uint8)
    into = np.empty_like(out)
    start, rounds, done = MPI.Wtime(), 0, False
    while not done:
        for i in range(1, procs):
            comm.Sendrecv(out, dest=(me + i) % procs, recvbuf=into, source=(me - i) % procs)
        rounds += 1
        done = comm.bcast(MPI.Wtime() - start >= seconds if me == 0 else None, root=0)
    return rounds


def _at_job_size(comm: MPI.Comm, procs: int) -> None:
    """Raise :class:`Unavailable` unless ``procs`` is the size of ``comm``: a measurement can only
    be made at the job's P."""
    if procs != comm.Get_size():
        raise Unavailable(f"a measurement runs at the job's {comm.Get_size()} processes, not {procs}")


@dataclass
class MeasurePricer:
    """Prices by timing each candidate in the running job (the tuner's ``--method measure``).

    ``procs`` must be the communicator's size: a measurement can only be made at the job's P.
    """

    comm: MPI.Comm
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    #: Seconds per call from which the tuner settles its confirming timings (:data:`SETTLE_CALL`).
    settle_call: float = SETTLE_CALL
    #: Seconds per call from which a timing prices the mean call, below which the tuner confirms a
    #: lead by the fastest timings (:data:`MEAN_CALL`).
    mean_call: float = MEAN_CALL
    #: Seconds every rank sleeps before each timing (:data:`TUNE_REST`).
    rest: float = TUNE_REST

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        _at_job_size(self.comm, procs)
        try:
            t = time_collective(self.comm, collective, algorithm, size, params, self.reps, self.warmup, self.budget,
                                self.fill, self.rest)
        except ParameterError as exc:
            raise Unavailable(str(exc)) from None
        return t.price, dict(params)


@dataclass
class LibraryTimer:
    """Prices one of the MPI library's own algorithms by forcing the library to run it in this job
    (:mod:`colltune.tune.forcing`; on a communicator duplicated after forcing where the library
    reads its choice when a communicator is created) and timing the library's collective as
    :func:`time_collective` times ``native``; ``native`` is the library's own decision under the
    same settings.  Raises :class:`Unavailable` for a candidate the job cannot force."""

    comm: MPI.Comm
    forcer: MpichForcer | OpenMPIForcer
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    #: Seconds per call from which the tuner settles its confirming timings (:data:`SETTLE_CALL`).
    settle_call: float = SETTLE_CALL
    #: Seconds per call from which a timing prices the mean call, below which the tuner confirms a
    #: lead by the fastest timings (:data:`MEAN_CALL`).
    mean_call: float = MEAN_CALL
    #: Seconds every rank sleeps before each timing (:data:`TUNE_REST`).
    rest: float = TUNE_REST

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        _at_job_size(self.comm, procs)
        why = self.forcer.forceable(collective, algorithm, params)
        if why:
            raise Unavailable(why)
        self.forcer.force(collective, algorithm, params)
        comm = self.comm.Dup() if self.forcer.fresh_communicator else self.comm
        try:
            t = time_collective(comm, collective, NATIVE, size, {}, self.reps, self.warmup, self.budget, self.fill,
                                self.rest)
        finally:
            if comm is not self.comm:
                comm.Free()
            self.forcer.restore()
        return t.price, dict(params)


def bench(comm: MPI.Comm, table: DecisionTable, table_name: str, collectives: Sequence[str], sizes: Sequence[int],
          reps: int, warmup: int, pricer: Pricer | None = None, predictor: Predictor | None = None,
          progress: Callable[[int, int], None] | None = None) -> BenchResults:
    """Time the runs of :func:`colltune.tune.bench.bench_runs` for each of ``collectives`` at the
    size of ``comm`` (every rank calls this with the same arguments and gets the same results),
    with ``pricer``'s prediction beside each.  ``progress(done, total)`` is called after each run."""
    procs = comm.Get_size()
    todo = {c: bench_runs(table, c, procs, sizes) for c in collectives}
    total, done = sum(len(r) for r in todo.values()), 0
    out: dict[str, tuple[BenchSeries, ...]] = {}
    for coll, runs in todo.items():
        points: dict[str, list[BenchPoint]] = {}
        for run in runs:
            t = time_collective(comm, coll, run.algorithm, run.size, run.params, reps, warmup)
            points.setdefault(run.algorithm, []).append(BenchPoint(
                size=run.size, params=run.params, chosen=run.chosen, median=t.median, q1=t.q1, q3=t.q3,
                reps=t.reps, predicted=predicted(pricer, coll, procs, run)))
            done += 1
            if progress is not None:
                progress(done, total)
        out[coll] = tuple(BenchSeries(algorithm=a, points=tuple(p)) for a, p in points.items())
    provenance = Provenance(source=f"colltune bench (reps {reps}, warm-up {warmup})",
                            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            colltune_version=__version__, mpi_library=MPI.Get_library_version().strip(),
                            hosts=tuple(comm.allgather(MPI.Get_processor_name())), procs=procs)
    return BenchResults(procs=procs, reps=reps, warmup=warmup, table=table_name,
                        table_source=table.provenance.source, predictor=predictor, provenance=provenance,
                        collectives=out)
