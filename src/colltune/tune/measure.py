"""Timing collectives in the running MPI job: the measuring tuner, the library timer of the hybrid
tuner, and ``colltune bench``.

One timing of one of colltune's algorithms: every rank builds the plan
(:func:`colltune.runtime.plan`) on buffers of the right sizes and times its calls as
:func:`colltune.tune.timing.time_calls` does (which says how, and what a timing prices); the
library timer times the library's own collective instead (:func:`colltune.tune.timing.time_forced`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from mpi4py import MPI

from colltune import __version__
from colltune.collectives import get_collective
from colltune.errors import ParameterError
from colltune.models import Unavailable
from colltune.profiles.format import Provenance
from colltune.runtime.api import plan
from colltune.tune.bench import BenchPoint, BenchResults, BenchSeries, Predictor, bench_runs, predicted
from colltune.tune.forcing import MpichForcer, OpenMPIForcer
from colltune.tune.select import Pricer
from colltune.tune.table import DecisionTable
from colltune.tune.timing import (
    FILL_FACTOR,
    MEAN_CALL,
    TIMING_BUDGET,
    TIMING_FILL,
    TUNE_REST,
    Timing,
    buffers,
    time_calls,
    time_forced,
)
from colltune.tune.warmup import NETWORK_WARMUP

#: Seconds: where a call takes at least this long, the tuner's confirming timings
#: (:meth:`colltune.tune.select.Tuner._confirmed`) are made twice in a row and the second counts.
#: A timing that follows another algorithm's pays for the switch: the connections the new pattern
#: wakes restart from a small congestion window, a transient that lasts about a second and is
#: invisible in calls much shorter than this.
SETTLE_CALL = 0.03

#: Seconds every rank sleeps before a case's first call when its timings must not pay for the case
#: before (``time_collective(rest=...)``; the fidelity benchmark and the probe's check).  With more
#: ranks than cores, a case that follows one in which some ranks computed far more than others (a
#: large reduction or all-to-all) can run several times slower until every rank has slept: the CPU
#: scheduler's memory of what each rank used, which a sleep clears.  50 ms leaves a margin.
REST = 0.05


def time_collective(comm: MPI.Comm, collective: str, algorithm: str, size: int, params: dict[str, Any],
                    reps: int, warmup: int, budget: float | None = None, fill: float = 0.0,
                    rest: float = 0.0, fill_factor: int = FILL_FACTOR) -> Timing:
    """Time one collective call of colltune's ``algorithm`` with ``params`` (``native``: the
    library's own) on blocks of ``size`` bytes (collective: every rank of ``comm`` calls it with the
    same arguments): a plan built once, timed by :func:`colltune.tune.timing.time_calls` with
    ``reps``, ``warmup``, ``budget``, ``fill`` (seconds), ``rest`` (seconds, once the plan is built:
    :data:`REST`) and ``fill_factor``."""
    procs, me = comm.Get_size(), comm.Get_rank()
    op = "sum" if get_collective(collective).reduces else None
    with plan(collective, *buffers(collective, procs, me, size), comm=comm, algorithm=algorithm, op=op,
              **params) as p:
        return time_calls(comm, p.run, reps, warmup, budget, fill, rest, fill_factor)


def network_warmup(comm: MPI.Comm) -> float:
    """Seconds a timing job on ``comm`` warms its network for before it times anything: on ranks
    of more than one host (by processor name) :data:`~colltune.tune.warmup.NETWORK_WARMUP`,
    as the C client of ``bench --library`` does on a testbed; else 0 (collective)."""
    return NETWORK_WARMUP if len(set(comm.allgather(MPI.Get_processor_name()))) > 1 else 0.0


def _at_job_size(comm: MPI.Comm, procs: int) -> None:
    """Raise :class:`Unavailable` unless ``procs`` is the size of ``comm``: a measurement is made on
    a communicator of that size (a tune's smaller counts on their own: :mod:`colltune.tune.subcomms`)."""
    if procs != comm.Get_size():
        raise Unavailable(f"a measurement runs at its communicator's {comm.Get_size()} processes, not {procs}")


@dataclass
class MeasurePricer:
    """Prices by timing each candidate in the running job (the tuner's ``--method measure``).

    ``procs`` must be the communicator's size (:class:`colltune.tune.subcomms.OnSubComms` gives
    each count its own).
    """

    comm: MPI.Comm
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    #: Seconds per call from which the tuner settles its confirming timings (:data:`SETTLE_CALL`).
    settle_call: float = SETTLE_CALL
    #: Seconds per call from which a timing prices the mean call, below which the tuner confirms a
    #: lead by the fastest timings (:data:`colltune.tune.timing.MEAN_CALL`).
    mean_call: float = MEAN_CALL
    #: Seconds every rank sleeps before each timing (:data:`colltune.tune.timing.TUNE_REST`).
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
    (:mod:`colltune.tune.forcing`) and timing the library's collective
    (:func:`colltune.tune.timing.time_forced`, as the jobs of :mod:`colltune.tune.spawn` do);
    ``native`` is the library's own decision under the same settings.  Raises
    :class:`Unavailable` for a candidate the job cannot force."""

    comm: MPI.Comm
    forcer: MpichForcer | OpenMPIForcer
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    #: Seconds per call from which the tuner settles its confirming timings (:data:`SETTLE_CALL`).
    settle_call: float = SETTLE_CALL
    #: Seconds per call from which a timing prices the mean call, below which the tuner confirms a
    #: lead by the fastest timings (:data:`colltune.tune.timing.MEAN_CALL`).
    mean_call: float = MEAN_CALL
    #: Seconds every rank sleeps before each timing (:data:`colltune.tune.timing.TUNE_REST`).
    rest: float = TUNE_REST

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        _at_job_size(self.comm, procs)
        why = self.forcer.forceable(collective, algorithm, params)
        if why:
            raise Unavailable(why)
        settings = self.forcer.settings(collective, algorithm, params)
        t = time_forced(self.comm, self.forcer, settings, collective, size, self.reps, self.warmup, self.budget,
                        self.fill, self.rest)
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
