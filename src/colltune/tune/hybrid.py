"""The hybrid tuner's pricer: simulate every candidate, time only those that can win.

``colltune tune --method hybrid`` (the default inside an MPI job) decides by measurement, but
measures only what the prediction leaves in the race: at each size the tuner asks for, every
candidate (each parameter value, and ``native``) is predicted first; a candidate predicted more
than ``1 + margin`` times the best prediction is not timed and cannot be chosen there (but see
below), the others and ``native`` (the library's own decision, the baseline a table must beat)
are timed.  The tuner's bisection of crossovers (:class:`colltune.tune.select.Tuner`) asks for the
two choices on both sides only, so it too times them only where both are predicted within the
margin.

A measurement outranks a prediction where the two disagree near a crossover: a candidate timed at
the previous sampled size (the largest smaller size at which ``native`` was timed) within the
margin of the best time there is timed again if its prediction is within ``(1 + margin)**2`` of the
best prediction: near a crossover the model is least sure, and a candidate timed near the best
at one size is the likeliest to win the next.  So is a candidate predicted within that square whose
calls are cheap to time (:data:`CHEAP_CALL`): there the model's misses cost more than timing them.
Nothing else predicted beyond ``(1 + margin)**2`` times the best is timed, but the fastest
candidate timed at the previous sampled size is timed whatever its prediction.

At a few cheap sizes every candidate is timed whatever its prediction (:data:`CENSUS`), so that a
model that puts an algorithm far behind cannot keep it out of the race at every size.

A short call timed more than :data:`STALL_JUMP` times the same candidate's time at the previous
sampled size (for every doubling of the size between the two) is timed once more, and the faster
timing counts: a stall spoils one timing, and a challenger is otherwise timed once per size.  So
is a long call timed more than :data:`LONG_JUMP` times what its time at the previous sampled size
would be if it grew with the size.

At the process counts below the one tuned in full (``full``: the job's, which the tuner decides
first, :func:`colltune.tune.select.tune_collective`), the race is narrowed to what that count's
timings showed the model needs: a candidate is timed there if predicted within the collective's
*narrow margin* of the best prediction at that size, or if it was the fastest timed at the full
count at the same size or at the previous sampled size of this count; ``native`` always is, and
there is no census and no ``always``; nor is a candidate predicted exactly the time of one before
it (``native`` first, then the space's order: :meth:`HybridPricer.twin_of`).  The narrow margin at
a size is the smallest that would have found, at that size of the full count, a candidate timed
within the tuner's tolerance of the fastest timed there (its prediction over the best prediction,
less one; ``native`` at none), at most the margin.  It is taken size by size because a model's
errors depend on the regime (latency-bound short calls, bandwidth-bound long ones): where the model
ranks the candidates as the timings do, a count below is timed at little more than ``native`` and
the predicted best, and where it did not, as widely as its errors were.  The tuner decides such a
count quickly too (:func:`colltune.tune.select.narrowed`): on the sparse grid (0, 1, 4, 16, ...)
and without second looks.  Timed as fully as the job's, each count below would cost about as much
as the job's own.

The margin is the guard against the model's error: a candidate is pruned only if it would have to
be mispredicted by more than the margin, relative to the best one, to win.  Its default,
:data:`HYBRID_MARGIN`, is about twice the median relative error that the fidelity benchmark
measured for the best network model on the testbed, rounded up; the largest errors measured there (hundreds of
percent, under TCP incast) are what timing the contenders, rather than trusting the model, guards
against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from colltune.models import Unavailable
from colltune.tune.select import Choice, Pricer, Space, choice
from colltune.tune.table import NATIVE

#: Candidates predicted within this fraction above the best prediction are timed (see the module
#: docstring for where 0.5 comes from).
HYBRID_MARGIN = 0.5
#: Seconds: a candidate predicted to take at most this long per call is cheap to time (a timing is
#: about a dozen calls, well under the per-timing cost of barriers and, under Open MPI, a
#: communicator), so it is timed within the square of the margin: at such sizes the predictions
#: are least sure.
CHEAP_CALL = 0.005
#: At the sizes that are powers of this (1, 16, 256, 4096 bytes, ...) and where ``native``'s call
#: was timed at most :data:`CHEAP_CALL`, every candidate is timed whatever its prediction, and the
#: fastest there is then timed at the next size whatever its prediction (the rule of the module
#: docstring): which network model a profile chooses varies from probe to probe, and one can put an
#: algorithm beyond the square of the margin at every size.  Timing every candidate at four or five
#: cheap sizes costs about a hundred short timings, a few seconds.
CENSUS = 16
#: Seconds the other ranks sleep at most between two looks at whether rank 0 has sent its verdict
#: (:func:`colltune.runtime.quiet.quiet_bcast`): rank 0 simulates every candidate once per size,
#: for milliseconds, and about two thousand verdicts are shared in a tune at P = 8, so each
#: millisecond of delay once rank 0 is done costs seconds in all.
SHARE_POLL = 0.0005
#: A timing of a short call (below the timer's ``settle_call``) more than this many times the same
#: candidate's time at the previous sampled size is timed once more, and the faster of the two
#: counts: the noise of a timing on a TCP network is one-sided (a stalled connection or a
#: descheduled rank only adds time), and a challenger is otherwise timed once per size.  Doubling
#: the size at most doubles the bytes a call sends; four times leaves room for a change of protocol
#: between two sizes, which a second timing then confirms.  Between sizes further apart (the sparse
#: grid's factor of four below the job's count) the bytes grow with the ratio of the sizes, and the
#: limit is this times half that ratio: a bandwidth-bound call four times larger takes four times
#: as long, which is no stall.
STALL_JUMP = 4.0
#: A timing of a long call (the timer's ``settle_call`` or more) more than this many times the same
#: candidate's time at the previous sampled size scaled by the ratio of the sizes is timed once
#: more, right after, and the faster of the two counts.  A long call sends mostly bytes, so
#: doubling the size about doubles it, and a timing that more than doubles it again needs a
#: second look; :data:`STALL_JUMP`'s four would let a long call's timing be twice what it should.
LONG_JUMP = 1.25


@dataclass
class HybridPricer:
    """Prices a candidate by ``timer`` if ``predictor`` puts it within ``margin`` of the best
    candidate of ``space`` at that size, and raises :class:`Unavailable` (not timed) otherwise.

    ``predictor`` and ``timer`` price the same candidates (both in ``space``'s terms).  ``native``
    is always timed.  ``timed``, ``pruned`` and ``unforceable`` count the decisions, and
    ``progress(line)`` hears of each timing."""

    predictor: Pricer
    timer: Pricer
    space: Space
    margin: float = HYBRID_MARGIN
    progress: Callable[[str], None] | None = None
    #: In an MPI job: ``share(value)`` returns rank 0's value on every rank (a broadcast), and only
    #: the rank with ``leader`` set predicts; the others wait for its verdict instead of simulating
    #: the same candidates on the same cores (asleep: :data:`SHARE_POLL`).
    share: Callable[[Any], Any] | None = None
    leader: bool = True
    #: ``always(collective, algorithm, params)``: candidates timed whatever their prediction (the
    #: library's own default parameter values, :meth:`colltune.tune.targets.LibrarySpace.library_default`),
    #: until their timings put them far behind (:meth:`timed_far_behind`).
    always: Callable[[str, str, dict[str, Any]], bool] | None = None
    #: Seconds per call below which a candidate is timed within the square of the margin (:data:`CHEAP_CALL`).
    cheap: float = CHEAP_CALL
    #: Every candidate is timed at the sizes that are powers of this where ``native`` is cheap (:data:`CENSUS`).
    census: int = CENSUS
    #: How many times its time at the previous sampled size a short call's timing may be before it
    #: is timed again (:data:`STALL_JUMP`).
    jump: float = STALL_JUMP
    #: How many times its time at the previous sampled size, scaled by the sizes, a long call's
    #: timing may be before it is timed again (:data:`LONG_JUMP`).
    long_jump: float = LONG_JUMP
    #: The process count tuned in full (the job's); the others are narrowed (:meth:`narrow_margin`).
    #: None: every count in full.
    full: int | None = None
    #: The fraction within which a timing is as good as the fastest (the tuner's: the narrow margin
    #: need only find one such candidate at each size).
    tolerance: float = 0.0
    timed: int = 0
    pruned: int = 0
    unforceable: int = 0
    #: Each collective's narrow margins by sampled size of the full count, once asked for (:meth:`narrow_margin`).
    _narrow: dict[str, dict[int, float]] = field(default_factory=dict)
    _best: dict[tuple[str, int, int], float] = field(default_factory=dict)
    #: Every prediction asked for, by (collective, procs, size, choice): seconds, or why there is none.
    _predicted: dict[tuple[str, int, int, Choice], float | str] = field(default_factory=dict)
    #: Every timing so far, by (collective, procs, size), then by (algorithm, sorted params): seconds.
    _measured: dict[tuple[str, int, int], dict[Choice, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.margin >= 0:
            raise ValueError(f"the hybrid margin must be >= 0, got {self.margin}")

    def best_predicted(self, collective: str, procs: int, size: int) -> float:
        """The best prediction among every candidate of the space at ``(procs, size)`` and ``native``
        (inf if none can be predicted)."""
        key = (collective, procs, size)
        if key not in self._best:
            best = math.inf
            for name, params in self._candidates(collective, procs, size):
                try:
                    best = min(best, self.predicted(collective, name, procs, size, params))
                except Unavailable:
                    continue
            self._best[key] = best
        return self._best[key]

    def _candidates(self, collective: str, procs: int, size: int) -> Iterator[tuple[str, dict[str, Any]]]:
        """``native``, then every candidate of the space at ``(procs, size)`` in its order: (name, params)."""
        yield NATIVE, {}
        for name in self.space.names(collective):
            for params in self.space.combos(collective, name, procs, size):
                yield name, params

    def predicted(self, collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any]) -> float:
        """``predictor``'s time of the candidate (seconds), remembered: :meth:`best_predicted` and
        :meth:`contender` ask for each candidate at each size, and a prediction simulates a
        schedule built for the purpose (milliseconds, on rank 0 while the other ranks wait).
        Raises :class:`Unavailable` (again) where the predictor cannot price it."""
        key = (collective, procs, size, choice(algorithm, params))
        if key not in self._predicted:
            try:
                self._predicted[key] = self.predictor.price(collective, algorithm, procs, size, params)[0]
            except Unavailable as exc:
                self._predicted[key] = str(exc)
        found = self._predicted[key]
        if isinstance(found, str):
            raise Unavailable(found)
        return found

    def contender(self, collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any]) -> bool:
        """True if ``algorithm`` with ``params`` is predicted within the margin of the best at
        ``(procs, size)``, or was the fastest timed just before (:meth:`near_before`), or is
        predicted within the margin's square and either cheap to time (:attr:`cheap`) or timed
        within the margin of the best just before, or ``size`` is a census size (:meth:`census_at`);
        ``native`` always is, the ``always`` ones are unless their timings put them far behind
        (:meth:`timed_far_behind`), a candidate already timed at ``size`` or at the next sampled
        size above it (:meth:`_after`) is, and one that cannot be predicted is not.

        Why a candidate timed at ``size`` stays a contender there: the tuner times it again at that
        size (a second look, a confirming pair), and by then the sizes below may have been timed
        again too, so the verdict of "the fastest just before" can change, and a candidate dropped then
        would leave its confirming timing refused.

        Why one timed at the next sampled size above: the tuner bisects the crossover between two
        sampled sizes by timing the choice that won the size above and the one that won the size
        below, and a refusal counts as an infinite time, which puts the crossover at one end.  In
        the same run Open MPI's pipelined broadcast with 2 KiB segments, which won 4 KiB, was
        refused at 3072, 3584 and 3840 bytes, so the scatter-allgather broadcast, which won 2 KiB,
        kept every size below 4 KiB."""
        if algorithm == NATIVE:
            return True
        narrowed = self.narrowed(procs)
        if not narrowed and self.always is not None and self.always(collective, algorithm, params) and \
                not self.timed_far_behind(collective, algorithm, procs, size, params):
            return True
        me = choice(algorithm, params)
        if me in self._measured.get((collective, procs, size), {}) or me in self._after(collective, procs, size):
            return True
        try:
            predicted = self.predicted(collective, algorithm, procs, size, params)
        except Unavailable:
            return False
        if narrowed:
            if self.twin_of(collective, procs, size, me) is not None:
                return False
            return self.near_before(collective, algorithm, procs, size, params, 0.0) or \
                me == self.fastest_in_full(collective, size) or \
                predicted <= (1 + self.narrow_margin(collective, size)) * self.best_predicted(collective, procs, size)
        if self.census_at(collective, procs, size):
            return True
        best = self.best_predicted(collective, procs, size)
        if predicted <= (1 + self.margin) * best or self.near_before(collective, algorithm, procs, size, params, 0.0):
            return True
        return predicted <= (1 + self.margin) ** 2 * best and (
            predicted <= self.cheap or self.near_before(collective, algorithm, procs, size, params, self.margin))

    def narrowed(self, procs: int) -> bool:
        """True at a count below the full one (:attr:`full`): the race is narrowed there, and the
        tuner decides it quickly (:func:`colltune.tune.select.narrowed`)."""
        return self.full is not None and procs != self.full

    def twin_of(self, collective: str, procs: int, size: int, me: Choice) -> Choice | None:
        """The first candidate before ``me`` in the space's order (``native`` first) predicted
        exactly ``me``'s time at ``(procs, size)``, or None.  Equal simulated times mean the same
        messages at the same moments, almost always the same schedule (at P = 2 most broadcasts
        are one message, a tree of any radix the binomial one; MPICH's scatter and gather are its
        binomial tree at every count), and the tuner learns nothing from timing a second of them.
        The candidates before ``me`` are predicted here if they were not yet (``native`` is timed
        before any prediction is asked for)."""
        mine = self._predicted.get((collective, procs, size, me))
        if not isinstance(mine, float):
            return None
        for name, params in self._candidates(collective, procs, size):
            other = choice(name, params)
            if other == me:
                return None
            try:
                if self.predicted(collective, name, procs, size, params) == mine:
                    return other
            except Unavailable:
                continue
        return None

    def fastest_in_full(self, collective: str, size: int) -> Choice | None:
        """The fastest candidate timed at the full count (:attr:`full`) at the largest sampled size
        there at most ``size`` (None before any)."""
        assert self.full is not None
        below = max((s for s in self._sampled(collective, self.full) if s <= size), default=None)
        if below is None:
            return None
        times = self._measured[(collective, self.full, below)]
        return min(times, key=times.__getitem__)

    def narrow_margin(self, collective: str, size: int) -> float:
        """The margin of ``collective`` at ``size`` bytes at the counts below the full one (see the
        module docstring): at the largest sampled size of the full count at most ``size``, the
        smallest margin that would have found a candidate timed within :attr:`tolerance` of the
        fastest timed there (``native``, timed whatever its prediction, at no margin; one that
        cannot be predicted at the whole margin), at most :attr:`margin`; the whole margin below
        the first sampled size and where the best prediction is 0.  Fixed once asked for: the
        tuner decides the full count first."""
        if collective not in self._narrow:
            self._narrow[collective] = self._needed(collective)
            if self.progress is not None:
                self.progress(f"{collective} below P = {self.full}: timing those predicted within the margin the "
                              f"timings at P = {self.full} needed at each size: {self._margins(collective)}")
        needed = self._narrow[collective]
        below = max((s for s in needed if s <= size), default=None)
        return self.margin if below is None else needed[below]

    def _needed(self, collective: str) -> dict[int, float]:
        """At each sampled size of the full count, the narrow margin (:meth:`narrow_margin`)."""
        assert self.full is not None
        out = {}
        for size in sorted(self._sampled(collective, self.full)):
            best = self.best_predicted(collective, self.full, size)
            if best <= 0:  # every candidate predicted 0 is within any margin of it
                out[size] = self.margin
                continue
            needed = []  # (the margin that times it, its time)
            for (name, params), t in self._measured[(collective, self.full, size)].items():
                try:
                    mine = 0.0 if name == NATIVE else \
                        self.predicted(collective, name, self.full, size, dict(params)) / best - 1
                except Unavailable:
                    mine = math.inf
                needed.append((mine, t))
            fastest = min(t for _, t in needed)
            # at least 0: a candidate timed there from the size below may lie outside the space at this
            # size (a segment size) and be predicted below its best
            out[size] = min(self.margin, max(0.0, min(m for m, t in needed if t <= (1 + self.tolerance) * fastest)))
        return out

    def _margins(self, collective: str) -> str:
        """The narrow margins of ``collective`` by size, compactly (``0.00 from 0 B, 0.31 from 4096 B``)."""
        runs: list[tuple[int, float]] = []
        for size, m in sorted(self._narrow[collective].items()):
            if not runs or round(runs[-1][1], 2) != round(m, 2):
                runs.append((size, m))
        return ", ".join(f"{m:.2f} from {s} B" for s, m in runs)

    def census_at(self, collective: str, procs: int, size: int) -> bool:
        """True if ``size`` is a power of :attr:`census` (1, 16, 256, 4096 bytes, ...) at which
        ``native`` has been timed at most :attr:`cheap` seconds a call: every candidate that can be
        predicted is timed there (:data:`CENSUS`)."""
        native = self._measured.get((collective, procs, size), {}).get(choice(NATIVE, {}))
        power = 1
        while power < size:
            power *= self.census
        return power == size and native is not None and native <= self.cheap

    def near_before(self, collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any],
                    margin: float) -> bool:
        """True if ``algorithm`` with ``params`` was timed at the previous sampled size (the largest
        below ``size`` at which ``native`` was timed) within ``margin`` (a fraction) of the best
        time there."""
        times = self._before(collective, procs, size)[1]
        mine = times.get(choice(algorithm, params))
        return mine is not None and mine <= (1 + margin) * min(times.values())

    def timed_far_behind(self, collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any]) -> bool:
        """True if, at the largest size below ``size`` at which ``algorithm`` with ``params`` was
        timed, ``native``'s call took the timer's ``mean_call`` or more and the candidate's time
        was more than the margin's square times the fastest timed there.

        An ``always`` candidate is then timed only as any other is (by its prediction, or near the
        best just before): where a timing prices the mean of calls of ten milliseconds or more, a
        retransmission timeout of about 0.3 s in one of ten calls adds less than half, so a
        candidate that far behind cannot win at the next sizes, and timing it there costs seconds."""
        me = choice(algorithm, params)
        below = max((s for s in self._sampled(collective, procs, me) if s < size), default=None)
        if below is None:
            return False
        times = self._measured[(collective, procs, below)]
        return times[choice(NATIVE, {})] >= self.mean_call and \
            times[me] > (1 + self.margin) ** 2 * min(times.values())

    def _sampled(self, collective: str, procs: int, *also: Choice) -> list[int]:
        """The sampled sizes: those at which ``native`` was timed (and each of ``also``)."""
        wanted = (choice(NATIVE, {}), *also)
        return [s for (c, p, s), times in self._measured.items()
                if c == collective and p == procs and all(ch in times for ch in wanted)]

    def _before(self, collective: str, procs: int, size: int) -> tuple[int, dict[Choice, float]]:
        """The previous sampled size (the largest below ``size`` at which ``native`` was timed; -1
        if none) and every timing there, by choice: seconds."""
        below = max((s for s in self._sampled(collective, procs) if s < size), default=-1)
        return (below, self._measured[(collective, procs, below)]) if below >= 0 else (-1, {})

    def _after(self, collective: str, procs: int, size: int) -> dict[Choice, float]:
        """Every timing at the next sampled size above ``size`` (the smallest above it at which
        ``native`` was timed; none while the tuner samples the sizes in ascending order), by
        choice: seconds."""
        above = min((s for s in self._sampled(collective, procs) if s > size), default=None)
        return self._measured[(collective, procs, above)] if above is not None else {}

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """Time the candidate if it is a contender (:meth:`contender`); a short call (below
        :attr:`settle_call`) timed more than :attr:`jump` times its time at the previous sampled
        size, if that is not 0 bytes (and half the ratio of the sizes times that, where the two
        are more than a factor of two apart), is timed once more, and the faster of the two counts
        (:data:`STALL_JUMP`); so is a longer call timed more than :attr:`long_jump` times that
        time scaled by the ratio of the sizes (:data:`LONG_JUMP`)."""
        verdict = self.contender(collective, algorithm, procs, size, params) if self.leader else None
        if self.share is not None:
            verdict = self.share(verdict)
        if not verdict:
            self.pruned += 1
            raise Unavailable(f"{collective}/{algorithm}: predicted more than {1 + self.margin:g} times the best "
                              f"at {size} bytes; not timed")
        t, used = self._time(collective, algorithm, procs, size, params)
        below, times = self._before(collective, procs, size)
        before = times.get(choice(algorithm, params))
        if below > 0 and before is not None and (  # 0 bytes: no traffic
                self.jump * max(1.0, size / below / 2) * before < t < self.settle_call or
                self.settle_call <= t and self.long_jump * before * size / below < t):
            t = min(t, self._time(collective, algorithm, procs, size, params)[0])
        timed = self._measured.setdefault((collective, procs, size), {})
        timed[choice(algorithm, params)] = min(t, timed.get(choice(algorithm, params), math.inf))
        return t, used

    def _time(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """One timing by the timer, counted and told to ``progress``."""
        try:
            t, used = self.timer.price(collective, algorithm, procs, size, params)
        except Unavailable:
            self.unforceable += 1
            raise
        self.timed += 1
        if self.progress is not None:
            label = algorithm + (f"({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})" if params else "")
            self.progress(f"{collective} {size} B: {label} {t * 1e3:.3f} ms "
                          f"(timed {self.timed}, not timed {self.pruned + self.unforceable})")
        return t, used

    @property
    def settle_call(self) -> float:
        """The timer's :data:`colltune.tune.measure.SETTLE_CALL` (inf if it has none)."""
        return float(getattr(self.timer, "settle_call", math.inf))

    @property
    def mean_call(self) -> float:
        """The timer's :data:`colltune.tune.timing.MEAN_CALL` (0 if it has none)."""
        return float(getattr(self.timer, "mean_call", 0.0))

    def summary(self) -> str:
        """The counts, and the narrow margins, for the table's provenance."""
        margins = "; ".join(f"{c} {self._margins(c)}" for c in self._narrow)
        narrow = f"; below P = {self.full}, margins by size: {margins}" if self._narrow else ""
        return (f"hybrid: {self.timed} timings; {self.pruned} candidates not timed (predicted beyond "
                f"{1 + self.margin:g} x the best, and beyond {(1 + self.margin) ** 2:g} x or neither cheap nor timed "
                f"near the best before), {self.unforceable} that cannot be forced in the job{narrow}")

