"""Timing at every communicator size of one job: the tuners' sub-communicators.

A program calls collectives on communicators of many sizes (the rows of a process grid, the ranks
of a node, a solver's subgroup), so ``colltune tune`` under mpiexec decides for every process
count of ``--procs`` in the one job: by default every count from 2 to 16, then the powers of two
and the counts half-way between them, and the job's P (:func:`default_procs`).  The
``p``-process timings run on a communicator of the job's first ``p`` ranks
(:class:`SubComms`), placed as those ranks are (on the testbed, rank r on host r // K); the
other ranks wait asleep for the result (:func:`colltune.runtime.quiet.quiet_bcast`), so they
take no core from the timed ranks, and every rank then holds the same time and takes the same
decisions.  :class:`OnSubComms` is the pricer that does this around a timer of one communicator
(:class:`colltune.tune.measure.MeasurePricer`, :class:`colltune.tune.measure.LibraryTimer`).

What a timing on the first ranks prices is a communicator of that size running alone: a program
whose other ranks run the same collective on their own communicators at the same time (all the rows
of a grid) shares the hosts' links and cores with them, which this timing does not see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from mpi4py import MPI

from colltune.errors import ParameterError, Unavailable
from colltune.runtime.quiet import quiet_bcast
from colltune.tune.select import Pricer

#: Seconds the ranks outside a sub-communicator sleep at most between two looks for its timing's
#: result: a timing takes 0.1 s or more (:data:`colltune.tune.timing.TIMING_FILL`), and a rank that
#: looks late delays nothing but its own next look.
SUB_POLL = 0.002


def job_procs(procs: Iterable[int], size: int) -> list[int]:
    """The process counts a tune in a job of ``size`` ranks decides for, sorted: ``procs`` (from
    ``--procs``), each of which must be at most ``size``.  Raises :class:`ParameterError` naming the
    first count beyond the job."""
    counts = sorted(set(procs))
    beyond = [p for p in counts if p > size]
    if beyond:
        raise ParameterError(f"--procs {beyond[0]}: the job has {size} processes; a count is timed on the job's "
                             f"first ranks, so it must be at most {size} (run mpiexec -n {beyond[0]} or more)")
    return counts


#: Without ``--procs``, a tune in a job decides for every count up to this one, then for the powers
#: of two and the counts half-way between them (24, 32, 48, 64, 96, ...): the spacing of the offline
#: default (``2-16,24,32,48,64``).  A rule holds up to the next tuned count, and above 16 the
#: algorithms' steps change with the powers of two, not with each count.
EVERY_COUNT_UP_TO = 16


def default_procs(size: int) -> list[int]:
    """The process counts a tune in a job of ``size`` ranks decides for without ``--procs``: every
    count from 2 to :data:`EVERY_COUNT_UP_TO`, then the powers of two and the counts half-way
    between them, each below ``size``, and ``size`` itself (just 1 in a job of one rank)."""
    counts = {c for c in range(2, min(size, EVERY_COUNT_UP_TO) + 1)}
    power = EVERY_COUNT_UP_TO
    while power < size:
        counts |= {c for c in (power + power // 2, 2 * power) if c < size}
        power *= 2
    return sorted(counts | {size}) if size > 1 else [1]


@dataclass
class SubComms:
    """Communicators of the first ``p`` ranks of ``comm``, for each ``p`` of ``procs`` (made at
    once, collectively: every rank of ``comm`` calls this with the same ``procs``).  ``of(p)`` is
    ``comm`` itself for its own size, else the sub-communicator on its first ``p`` ranks and
    None on the others."""

    comm: MPI.Comm
    procs: Iterable[int]
    _subs: dict[int, MPI.Comm | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        size, me = self.comm.Get_size(), self.comm.Get_rank()
        for p in job_procs(self.procs, size):
            if p == size:
                self._subs[p] = self.comm
                continue
            sub = self.comm.Split(0 if me < p else MPI.UNDEFINED, me)
            self._subs[p] = None if sub == MPI.COMM_NULL else sub

    def of(self, procs: int) -> MPI.Comm | None:
        """The communicator of the first ``procs`` ranks (None on the other ranks)."""
        if procs not in self._subs:
            raise Unavailable(f"no communicator of {procs} processes in this job (tuned: {sorted(self._subs)})")
        return self._subs[procs]

    def free(self) -> None:
        """Free the sub-communicators (not ``comm``)."""
        for sub in self._subs.values():
            if sub is not None and sub is not self.comm:
                sub.Free()
        self._subs.clear()


@dataclass
class OnSubComms:
    """Prices a candidate at ``procs`` processes by ``timer_for(sub)``'s timing on the
    communicator of the job's first ``procs`` ranks (:class:`SubComms`); rank 0's result, a time or
    why it cannot be timed (:class:`Unavailable`), reaches every rank of the job through ``share``,
    a communicator of its own (:func:`quiet_bcast`: the other ranks sleep meanwhile).  At the job's
    own size the timer runs on every rank and nothing is shared.  ``settle_call`` and ``mean_call``,
    which the tuners read, are the job-size timer's: they do not depend on the size."""

    subs: SubComms
    timer_for: Callable[[MPI.Comm], Pricer]
    share: MPI.Comm
    poll: float = SUB_POLL
    _timers: dict[int, Pricer] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._timers[self.subs.comm.Get_size()] = self.timer_for(self.subs.comm)

    @property
    def settle_call(self) -> float:
        """The job-size timer's ``settle_call`` (seconds; inf if it has none)."""
        return float(getattr(self._timers[self.subs.comm.Get_size()], "settle_call", math.inf))

    @property
    def mean_call(self) -> float:
        """The job-size timer's ``mean_call`` (seconds; 0 if it has none)."""
        return float(getattr(self._timers[self.subs.comm.Get_size()], "mean_call", 0.0))

    def timer_at(self, procs: int) -> Pricer | None:
        """The timer of the first ``procs`` ranks (made on first use; None on the other ranks)."""
        sub = self.subs.of(procs)
        if sub is None:
            return None
        if procs not in self._timers:
            self._timers[procs] = self.timer_for(sub)
        return self._timers[procs]

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        timer = self.timer_at(procs)
        if procs == self.subs.comm.Get_size():
            assert timer is not None
            return timer.price(collective, algorithm, procs, size, params)
        outcome: Any = None
        if timer is not None:
            try:
                outcome = timer.price(collective, algorithm, procs, size, params)
            except Unavailable as exc:
                outcome = str(exc)
        outcome = quiet_bcast(self.share, outcome, poll=self.poll)
        if isinstance(outcome, str):
            raise Unavailable(outcome)
        return outcome


__all__ = ["EVERY_COUNT_UP_TO", "SUB_POLL", "OnSubComms", "SubComms", "default_procs", "job_procs"]
