"""Timing calls in the running MPI job: the loop every timer shares, the library's own collective,
and the network warm-up.

The tuners price a candidate by :attr:`Timing.price`: the slowest rank's median call, or its mean
call (what the OSU-style C client of ``bench --library`` reports) where calls take
:data:`MEAN_CALL` or more; ``bench`` records the median and quartiles of the slowest rank per
repetition.

One timing (:func:`time_calls`): every rank sleeps for a moment (:data:`TUNE_REST` in the tuners,
:data:`colltune.tune.measure.REST` in the fidelity benchmark and the probe's check, not in
``bench``), makes the call ``warmup`` times, then ``reps`` times, each after a barrier, timing its
own call with ``MPI.Wtime``.  A repetition's time is the slowest rank's (one ``allreduce`` with MAX
over the vector of repetitions, so every rank holds the same numbers and takes the same decisions),
and the result is the median of the repetitions with its quartiles.

This module imports only mpi4py, numpy and colltune's description of the collectives: the jobs
that :mod:`colltune.tune.spawn` starts import it and little else, since 8 processes importing the
whole package on the testbed's 2 cores took 1.7 s against 0.7 s for mpi4py and numpy alone,
and a tune spawns up to a dozen such jobs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from mpi4py import MPI

from colltune.collectives import Problem, get_collective
from colltune.tune.warmup import NETWORK_BLOCK

#: Seconds: where the slowest rank's median call takes at least this long, the tuners price a
#: candidate by the slowest rank's mean call (:attr:`Timing.price`), as the C client of ``bench
#: --library`` and a program pay it, rather than by its median: a median cannot see a loss (a
#: retransmission, a timeout) that strikes one call in ten.  Below, a mean would count what the
#: median is there to leave out: with more ranks than cores some calls wait milliseconds for a
#: core, a few percent of a 10 ms call but several times a call of a few hundred microseconds.
MEAN_CALL = 0.01
#: With a time budget, at least this many timed repetitions are kept: the median of three is the
#: smallest that discards one outlier.
MIN_REPS = 3
#: Seconds one timing of a candidate may take when the tuners time in the job (warm-up included,
#: down to MIN_REPS repetitions): the hybrid tuner times about a thousand candidates at P = 8 up
#: to 512 KiB on a 100 Mbit/s network within its five-minute target.
TIMING_BUDGET = 1.0
#: Seconds of timed calls the tuners' timings fill at least, by repeating a cheap call up to
#: :data:`FILL_FACTOR` times the requested repetitions: where a call takes a few milliseconds the
#: differences the tuners must see are near their tolerance, and a few dozen calls cost little
#: beside a timing's fixed cost (plan, barriers, warm-up).
TIMING_FILL = 0.1
FILL_FACTOR = 4
#: The fraction of :data:`TIMING_BUDGET` and :data:`TIMING_FILL` a timing takes at the counts the
#: hybrid tuner decides quickly (below the job's, :func:`colltune.tune.select.narrowed`): there a
#: candidate is timed only where the job's count showed the model needs it, and a decision rests on
#: one timing per candidate anyway, so half as many calls buy a tune of every count from 2 to 8 on
#: the testbed within its time target (450 s, of which the job's own count takes 250-320 s) at a
#: noisier decision; the job's own count, which the tuner decides with second looks, fresh jobs and
#: in-order checks, keeps whole timings.
QUICK_TIMING = 0.5
#: Seconds every rank sleeps before each of the tuners' timings: the shortest
#: :data:`colltune.tune.measure.REST` that clears the slow cases it describes, since the hybrid
#: tuner makes about 1200 timings within its five-minute target.
TUNE_REST = 0.01


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


def time_calls(comm: MPI.Comm, call: Callable[[], Any], reps: int, warmup: int, budget: float | None = None,
               fill: float = 0.0, rest: float = 0.0, fill_factor: int = FILL_FACTOR) -> Timing:
    """Time ``call``, a collective call on ``comm`` (every rank of ``comm`` calls this with the same
    arguments).

    With ``budget`` or ``fill`` (seconds), the first warm-up call is timed (slowest rank).  With
    ``budget``, the other warm-up calls are skipped if they would take more than a tenth of the
    budget, and the repetitions are cut to what fits in the budget, but not below
    :data:`MIN_REPS`; with ``fill`` they are first raised to what fills ``fill``, but not above
    ``fill_factor`` times ``reps``.  With ``rest`` (seconds), every rank sleeps that long between
    two barriers before the first warm-up call."""
    if rest > 0:
        comm.Barrier()
        time.sleep(rest)
        comm.Barrier()
    for i in range(warmup):
        if (budget is None and fill <= 0) or i > 0:
            call()
            continue
        comm.Barrier()
        t0 = MPI.Wtime()
        call()
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
        call()
        mine[i] = MPI.Wtime() - t0
    # one reduction: each repetition's slowest rank, then the largest rank median and rank mean
    mine = np.append(mine, [np.median(mine), np.mean(mine)])
    largest = np.empty_like(mine)
    comm.Allreduce(mine, largest, op=MPI.MAX)
    q1, med, q3 = np.percentile(largest[:reps], [25, 50, 75])
    return Timing(float(med), float(q1), float(q3), reps, float(largest[reps]), float(largest[reps + 1]))


def buffers(collective: str, procs: int, me: int, size: int) -> tuple[Any, ...]:
    """Rank ``me``'s buffers for ``collective`` with blocks of ``size`` bytes (uint8 data; root 0):
    ``(buf,)`` for a broadcast, none for a barrier, else ``(sendbuf, recvbuf)``."""
    send, recv = get_collective(collective).buffers(Problem(collective, procs, 0, size))
    if collective == "bcast":
        return (np.zeros(recv[me], np.uint8),)
    if get_collective(collective).synchronizes:
        return ()
    return np.ones(send[me], np.uint8), np.zeros(recv[me], np.uint8)


def library_call(comm: MPI.Comm, collective: str, size: int) -> Callable[[], Any]:
    """The MPI library's own ``collective`` on ``comm`` with blocks of ``size`` bytes from root 0,
    as the C client of ``bench --library`` (and the OSU micro-benchmarks) call it: reductions sum
    ``size / 4`` floats where ``size`` is a multiple of 4, else unsigned bytes (a library may
    segment and combine by element, and a float sum is what programs ask of it)."""
    bufs = buffers(collective, comm.Get_size(), comm.Get_rank(), size)
    if collective in ("reduce", "allreduce") and size % 4 == 0:
        bufs = tuple(np.ones(len(b) // 4, np.float32) for b in bufs)
    root0 = comm.Get_rank() == 0
    if collective == "bcast":
        return lambda: comm.Bcast(bufs[0], 0)
    if collective == "barrier":
        return comm.Barrier
    send, recv = bufs
    calls: dict[str, Callable[[], Any]] = {
        "scatter": lambda: comm.Scatter(send if root0 else None, recv, 0),
        "gather": lambda: comm.Gather(send, recv if root0 else None, 0),
        "allgather": lambda: comm.Allgather(send, recv),
        "alltoall": lambda: comm.Alltoall(send, recv),
        "reduce": lambda: comm.Reduce(send, recv if root0 else None, op=MPI.SUM, root=0),
        "allreduce": lambda: comm.Allreduce(send, recv, op=MPI.SUM),
    }
    return calls[collective]


class Forcing(Protocol):
    """What :func:`time_forced` needs of a forcer (:class:`colltune.tune.mpit.ControlVariables`):
    write a set of control variables, put back what it wrote, and whether the library reads them
    when a communicator is created (``fresh_communicator``) rather than on every call."""

    fresh_communicator: bool

    def apply(self, settings: dict[str, int | bool]) -> None: ...

    def restore(self) -> None: ...


def time_forced(comm: MPI.Comm, forcing: Forcing, settings: dict[str, int | bool], collective: str, size: int, reps: int, warmup: int, budget: float | None, fill: float,
                rest: float) -> Timing:
    """Time the library's own ``collective`` (:func:`library_call`, :func:`time_calls`) with the
    control variables ``settings`` written through ``forcing``, on a duplicate of ``comm`` made after
    writing them where the library reads them when a communicator is created
    (``forcing.fresh_communicator``); the variables are put back afterwards.  The tuning job's
    :class:`colltune.tune.measure.LibraryTimer` and the jobs of :mod:`colltune.tune.spawn` time the
    library this way."""
    forcing.apply(settings)
    try:
        on = comm.Dup() if forcing.fresh_communicator else comm
        try:
            return time_calls(on, library_call(on, collective, size), reps, warmup, budget, fill, rest)
        finally:
            if on is not comm:
                on.Free()
    finally:
        forcing.restore()


def warm_network(comm: MPI.Comm, seconds: float) -> int:
    """Rounds of a pairwise exchange of :data:`colltune.tune.warmup.NETWORK_BLOCK` bytes (in step
    ``i`` of a round every rank sends to rank + ``i`` and receives from rank - ``i``: one peer each
    way at a time, so no incast) until rank 0 has seen ``seconds`` pass: the C client's warm-up
    (:data:`colltune.tune.warmup.NETWORK_WARMUP` says why).  Collective; returns the rounds made (0 where ``seconds`` is 0 or ``comm`` has one
    rank)."""
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


__all__ = ["FILL_FACTOR", "MEAN_CALL", "MIN_REPS", "QUICK_TIMING", "TIMING_BUDGET", "TIMING_FILL", "TUNE_REST", "Forcing", "Timing", "buffers", "library_call", "time_calls", "time_forced", "warm_network"]
