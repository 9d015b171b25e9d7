"""Build a decision table: price every candidate, find the crossovers, keep the fastest.

For each collective and each tuned process count the tuner prices every candidate (each
registered algorithm, its tunable parameters searched, plus ``native``) on a geometric grid of
sizes 0, 1, 2, 4, ... up to the largest size.  Between two neighbouring grid sizes whose fastest
choices differ, it bisects on the crossover of those two choices (paper 003 section 3: choose
the best strategy per (P, m) from the models) down to one byte, then prices every candidate on
both sides of the crossover again in case a third one wins there.  A *choice* is an algorithm
with fixed parameters, so a segment size that changes with the message size also gets exact
boundaries.

Pricers say what a candidate costs: :class:`ModelPricer` (the analytic formulas,
:func:`colltune.models.predict`), :class:`SimPricer` (the
simulator), under MPI :class:`colltune.tune.measure.MeasurePricer` and
:class:`colltune.tune.measure.LibraryTimer`, and :class:`colltune.tune.hybrid.HybridPricer`, which
times only the candidates a prediction leaves in the race.  ``native`` wins ties,
and wins where it cannot be priced (no formula for its equivalent, :mod:`colltune.tune.native`),
so a table never picks an algorithm that is not known to be strictly faster than the MPI
library's own, except that with a tolerance (timed prices) a rule's choice goes on where it is
within the tolerance of the fastest (:meth:`Tuner.winner`).  Among parameter values that tie, the
algorithm's default wins.  Among predicted prices (``model``, ``simulate``), candidates predicted
faster than ``native`` and within 5 % of the fastest are a near-tie, which goes to the one whose
busiest rank moves the fewest bytes over the network, then talks to the fewest peers there
(:mod:`colltune.tune.ties`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from colltune.algorithms import REGISTRY, Algorithm
from colltune.algorithms.levels import level_algorithms
from colltune.collectives import get_collective
from colltune.errors import ColltuneError, ParameterError
from colltune.models import Unavailable, predict
from colltune.models.params import ParamSet
from colltune.profiles.format import Provenance
from colltune.sim import Topology, topology_for
from colltune.sim.calls import steady_call
from colltune.tune.native import native_equivalent, native_placed
from colltune.tune.promises import Promises
from colltune.tune.search import SEARCH
from colltune.tune.table import NATIVE, Block, Candidate, DecisionTable, Method, Rule, Sample
from colltune.tune.ties import keeps_native, lightest_first, load, placed_hosts, predicted_choice


Choice = tuple[str, tuple[tuple[str, Any], ...]]

#: Where a call is long (the timer's ``settle_call``), a choice whose sample time is this many times
#: faster than ``native``'s is taken without the confirming timings of :meth:`Tuner._confirmed`: a
#: lead beyond both the spread of repeated timings of one candidate and what ``native`` can owe to
#: following another algorithm (:data:`colltune.tune.measure.SETTLE_CALL`), each about 1.2x.
SURE_LEAD = 1.3

#: Where a call is short (:meth:`Tuner._short`), every candidate timed within this factor of the
#: fastest at a size is timed once more, and the faster of its two timings counts
#: (:meth:`Tuner._second_look`): one timing of a short call can be 15-20 % off, more than the
#: differences the tuner must see.
NEAR_TIE = 1.25


def choice(algorithm: str, params: dict[str, Any]) -> Choice:
    """A hashable (algorithm, sorted parameters) pair."""
    return algorithm, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


class Pricer(Protocol):
    """What one call of a candidate costs (seconds, or the profile's units)."""

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """``(time, params used)``; raises :class:`Unavailable` where the candidate cannot be priced.
        ``algorithm`` may be ``native``."""


#: ``load(collective, algorithm, procs, size, params)``: how much of the network a candidate's
#: busiest rank drives (bytes to and from other hosts, then peers there;
#: :func:`colltune.tune.ties.load`), by which a prediction's near-ties are broken.
NetworkLoad = Callable[[str, str, int, int, dict[str, Any]], tuple[int, int]]


def network_load(pricer: Pricer) -> NetworkLoad:
    """The :data:`NetworkLoad` of ``pricer``'s predictions: :func:`colltune.tune.ties.load` on the
    hosts where it places the ranks (:func:`colltune.tune.ties.placed_hosts`)."""
    def of(collective: str, algorithm: str, procs: int, size: int, params: dict[str, Any]) -> tuple[int, int]:
        return load(collective, algorithm, procs, size, params, placed_hosts(pricer, procs))
    return of


#: The methods whose prices are predictions (:mod:`colltune.tune.ties` breaks their near-ties).
PREDICTED: tuple[Method, ...] = ("model", "simulate")


@dataclass
class ModelPricer:
    """Prices from the analytic cost formulas of ``model`` (:mod:`colltune.models.costs`)."""

    params: ParamSet
    model: str

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        if algorithm == NATIVE:
            algorithm, params = native_equivalent(collective, procs, size)
        p = predict(self.params, self.model, collective, algorithm, procs, size, **params)
        return p.time, p.params


@dataclass
class SimPricer:
    """Prices by simulating the schedule on the network model ``network`` (:mod:`colltune.sim`),
    carried over ``topology`` (its first P ranks) where it places at least P ranks, and there as
    the third of calls made back to back (:func:`colltune.sim.calls.steady_call`); a hierarchical
    algorithm on the topology's hosts, and ``native`` as MPICH runs it there
    (:func:`colltune.tune.native.native_placed`)."""

    params: ParamSet
    network: str
    topology: Topology | None = None

    def hosts(self, procs: int) -> tuple[int, ...] | None:
        """The host label of each of ``procs`` ranks where the topology places them (None: one
        rank per host)."""
        topo = topology_for(self.topology, self.network, procs)
        return topo.host_labels() if topo is not None else None

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        topo = topology_for(self.topology, self.network, procs)
        hosts = topo.host_labels() if topo is not None else None
        if algorithm == NATIVE:
            algorithm, params = native_placed(collective, procs, size, hosts)
        alg = REGISTRY.get(collective, algorithm)
        try:
            schedule = alg.schedule(procs, 0, size, hosts=hosts if alg.hierarchical else None, **params)
        except ParameterError as exc:
            raise Unavailable(str(exc)) from None
        try:
            total = steady_call(schedule, self.network, self.params, topology=topo)
        except ColltuneError as exc:
            raise Unavailable(f"{collective}/{algorithm}: {exc}") from None
        return total, dict(schedule.meta["params"])


class Space(Protocol):
    """What the tuner chooses among: candidate names and the parameter values to try."""

    def names(self, collective: str) -> list[str]:
        """The candidates of ``collective`` (``native`` is always added)."""

    def combos(self, collective: str, name: str, procs: int, size: int) -> list[dict[str, Any]]:
        """Parameter combinations of ``name`` to try at ``(procs, size)``, the default first (it
        wins ties)."""


@dataclass(frozen=True)
class RegistrySpace:
    """colltune's own algorithms (:func:`candidates`), tunable parameters searched by :data:`SEARCH`;
    at the process counts of ``shared`` (where some host has several ranks), the hierarchical ones
    too, their network level (``inter``) searched over every algorithm a level can run and their
    other levels at their defaults, one parameter at a time from the defaults."""

    shared: frozenset[int] = frozenset()

    def names(self, collective: str) -> list[str]:
        return [a.name for a in candidates(collective, bool(self.shared))]

    def combos(self, collective: str, name: str, procs: int, size: int) -> list[dict[str, Any]]:
        alg = REGISTRY.get(collective, name)
        if alg.hierarchical and procs not in self.shared:
            return []
        spaces = [[(p.name, v) for v in dict.fromkeys([p.default, *SEARCH[p.name](procs, size)])]
                  for p in alg.params if p.name in SEARCH]
        if not alg.hierarchical:
            return [dict(c) for c in itertools.product(*spaces)]
        # one parameter at a time from the defaults: the product of a level's algorithms, segment
        # sizes and leaders would price a hundred schedules per size
        spaces += [[(p.name, v) for v in dict.fromkeys([p.default, *level_algorithms(p.level)])]
                   for p in alg.params if p.level is not None and p.name == "inter"]
        out = [{}] + [dict([pair]) for space in spaces for pair in space[1:]]
        return out


REGISTRY_SPACE = RegistrySpace()


def space_on(topology: Topology | None, procs: Iterable[int]) -> RegistrySpace:
    """:class:`RegistrySpace` with the hierarchical algorithms at the process counts of ``procs``
    whose first ranks share a host of ``topology`` (a profile's)."""
    if topology is None:
        return REGISTRY_SPACE
    return RegistrySpace(frozenset(p for p in procs if p <= topology.procs and topology.shares_hosts(p)))


def candidates(collective: str, hierarchical: bool = False) -> list[Algorithm]:
    """The registry algorithms the tuner considers for ``collective``: all but those built for a
    given topology (an ``edges`` parameter; ``colltune grid`` chooses those), and the hierarchical
    ones only if ``hierarchical`` (where some host has several ranks; elsewhere they are their
    network level alone)."""
    return [a for a in REGISTRY.select(collective)
            if (hierarchical or not a.hierarchical) and not any(p.name == "edges" for p in a.params)]


def grid_sizes(max_size: int) -> list[int]:
    """0, 1, 2, 4, ... (powers of two below ``max_size``), then ``max_size`` itself."""
    sizes = [0] + [1 << i for i in range(max(0, max_size.bit_length())) if (1 << i) < max_size]
    return sorted(set(sizes + [max_size]))


def label(ch: Choice) -> str:
    """``name`` or ``name {params}``, for progress lines."""
    return ch[0] + (f" {dict(ch[1])}" if ch[1] else "")


def _order(c: Candidate) -> tuple[float, int, str]:
    return c.time, c.algorithm != NATIVE, c.algorithm


@dataclass
class Tuner:
    """Decides one collective at one process count; remembers every price it asked for."""

    pricer: Pricer
    collective: str
    procs: int
    resolution: float = 0.0
    space: Space = REGISTRY_SPACE
    #: Relative difference below which a timed choice counts as no better than ``native``: native
    #: is kept unless another choice is faster by more than this in two of three timings, or, where
    #: a call is short, in the fastest of each one's timings (:meth:`_confirmed`).
    tolerance: float = 0.0
    samples: dict[int, Sample] = field(default_factory=dict)
    #: With a tolerance: the choice on each side of a bisected crossover, where the two were timed
    #: but no other candidate was (:meth:`_refine`).
    _sides: dict[int, Choice] = field(default_factory=dict)
    _prices: dict[tuple[Choice, int], float] = field(default_factory=dict)
    _checks: dict[tuple[Choice, int], bool] = field(default_factory=dict)
    #: The (choice, size) pairs timed a second time (:meth:`_again`).
    _looked: set[tuple[Choice, int]] = field(default_factory=set)
    #: The winner at each sampled size, once decided (:meth:`winner`).
    _won: dict[int, Choice] = field(default_factory=dict)
    #: ``say(line)`` hears of each size where a rule goes on within the tolerance, or its choice is
    #: timed again (:meth:`winner`).
    say: Callable[[str], None] | None = None
    #: A quick decision (at a count the pricer narrows, :func:`narrowed`): no second look
    #: (:meth:`_second_look`) where a call is short, and crossovers placed by lines through the
    #: timings on both sides (:meth:`_refine`) rather than bisected.
    quick: bool = False
    #: With it, the prices are predictions: a sample's first candidate is, among those predicted
    #: ahead of ``native`` by more than :data:`colltune.tune.ties.PREDICTED_TIE` and within it of
    #: the fastest, the one whose busiest rank drives the least of the network
    #: (:func:`colltune.tune.ties.lightest_first`);
    #: ``native`` keeps every size where no candidate is predicted that far ahead of it
    #: (:func:`colltune.tune.ties.keeps_native`).
    load: NetworkLoad | None = None

    def sample(self, size: int) -> Sample:
        """Every candidate at ``size`` bytes, each with its best parameters, fastest first (with
        :attr:`load`, the near-tie it chooses first)."""
        if size in self.samples:
            return self.samples[size]
        found: list[Candidate] = []
        why: list[str] = []
        for name in [NATIVE] + self.space.names(self.collective):
            combos = [{}] if name == NATIVE else self.space.combos(self.collective, name, self.procs, size)
            best: Candidate | None = None
            for params in combos:
                try:
                    t, used = self.pricer.price(self.collective, name, self.procs, size, params)
                except Unavailable as exc:
                    why.append(str(exc))
                    if name == NATIVE:
                        self._prices[(choice(NATIVE, {}), size)] = -math.inf
                    continue
                if name == NATIVE:
                    used = {}
                self._prices[(choice(name, used), size)] = t
                if best is None or t < best.time:
                    best = Candidate(algorithm=name, params=used, time=t)
            if best is not None:
                found.append(best)
        if not found and why:  # not one candidate, native included: the pricer cannot price this job
            raise ColltuneError(f"{self.collective} on {self.procs} ranks at {size} B: no candidate can be priced "
                                f"({why[0]})")
        found.sort(key=_order)
        if self.load is not None:
            native = next((c.time for c in found if c.algorithm == NATIVE), -math.inf)
            ahead = [c for c in found if c.algorithm != NATIVE and not keeps_native(native, c.time)]
            if ahead:
                first = lightest_first(ahead, lambda c: c.time, lambda c: self._load_of(
                    choice(c.algorithm, c.params), size), _order)[0]
                found = [first, *(c for c in found if c is not first)]
        self.samples[size] = Sample(procs=self.procs, size=size, candidates=tuple(found))
        return self.samples[size]

    def time(self, ch: Choice, size: int) -> float:
        """The time of one fixed choice at ``size``: inf where it cannot be priced, except for
        ``native``, which an unpriced native beats everything (-inf): nothing is known to be faster."""
        key = (ch, size)
        if key not in self._prices:
            name, params = ch
            try:
                self._prices[key] = self.pricer.price(self.collective, name, self.procs, size,
                                                      {} if name == NATIVE else dict(params))[0]
            except Unavailable:
                self._prices[key] = -math.inf if name == NATIVE else math.inf
        return self._prices[key]

    def winner(self, size: int) -> Choice:
        """The fastest choice at ``size``; ``native`` where it is fastest or cannot be priced.

        With a tolerance, the choice that won at the sampled size below (:meth:`_held`; timed again
        where its sample is beyond the tolerance behind, and, where a call is long, within
        :data:`NEAR_TIE` of the fastest, which is then timed again too, :meth:`_again`) goes
        on wherever it is within the tolerance of the fastest, ``native`` included, and leads
        ``native`` in the sample, however little and however much (no confirming timings: it won
        the size below; where a call is short, the sample holds the faster of two timings of each of
        the two, :meth:`_second_look`, as wherever a call is below the ``settle_call``); where a
        call is long (:meth:`_settles`) it goes on also if it is behind ``native`` within the
        tolerance.  Timings that close say nothing of which is faster, but a
        switch at the top of a rule costs the change of traffic pattern, and a rule bisected up to
        a grid size (:meth:`_refine`, where any lead counts) should not end there for a lead that
        the grid size alone would have to confirm beyond the tolerance.

        Long calls: where a call is long, switching algorithms between two neighbouring sizes costs
        the program a change of traffic pattern that can exceed the tolerance, more than two timings
        that close can tell apart.

        Short calls: there the choice must lead ``native``, however little; no timing of a short
        call has shown a switch that costs more than the tolerance.

        A lead beyond the tolerance is not confirmed either: a held choice must not face a harder
        test for leading by more."""
        if size in self._sides:
            return self._sides[size]
        if size not in self._won:
            self._won[size] = self._winner(size)
        return self._won[size]

    def _winner(self, size: int) -> Choice:
        s = self.sample(size)
        if not s.candidates or all(c.algorithm != NATIVE for c in s.candidates):
            return choice(NATIVE, {})
        settles = self._settles(size)
        held = self._held(size) if self.tolerance else None
        if self.tolerance and not self.quick and (self._short(size) or not settles and self._settle_known()):
            s = self._second_look(size, held)
        native = next(c for c in s.candidates if c.algorithm == NATIVE).time
        best, fastest = choice(s.candidates[0].algorithm, s.candidates[0].params), s.candidates[0].time
        held_time = self.time(held, size) if held is not None else math.inf
        if held is not None and fastest * (1 + self.tolerance) < held_time < math.inf and \
                (not settles or held_time <= fastest * NEAR_TIE):
            held_time = self._again(held, size, tell=True)
            if settles:
                fastest = min(fastest, self._again(best, size, tell=True))
        if held is not None and held_time <= fastest * (1 + self.tolerance) and (settles or held_time < native):
            self._tell(f"{self.collective} at P = {self.procs}: {label(held)} goes on at {size} B "
                       f"({held_time * 1e3:.3g} ms against {NATIVE}'s {native * 1e3:.3g} ms there; within "
                       f"{self.tolerance:.0%} of the fastest, {fastest * 1e3:.3g} ms)")
            return held
        if best[0] == NATIVE:
            return best
        if self.load is not None:  # predictions: a near-tie keeps native
            return choice(NATIVE, {}) if keeps_native(native, fastest) else best
        # a lead below the tolerance is looked at again only where a call is short (_confirmed)
        if native <= fastest * (1 + (self.tolerance if settles else 0.0)) or not self._confirmed(best, size):
            return choice(NATIVE, {})
        return best

    def _second_look(self, size: int, held: Choice | None) -> Sample:
        """Where a call is short (:meth:`_short`) or below the pricer's ``settle_call``: time once
        more every candidate within :data:`NEAR_TIE` of the fastest at ``size``, and, where a rule
        comes from the size below, its choice ``held`` and ``native``, unless that leaves a single
        one; the faster of each one's two timings then stands for it (:meth:`_again`), and the
        sample is sorted again.

        Why: the noise of a short call's timing is one-sided (:meth:`_fastest_leads`), and it is
        larger than the differences the tuner must see (:data:`NEAR_TIE`), so a single slow timing
        must not put a candidate out of the race, nor let a rule go on past a ``native`` that read
        slow once.  Below the ``settle_call`` (:data:`colltune.tune.measure.SETTLE_CALL`), where a
        timing prices the mean call, one timing is no surer.  A timing of a short call costs a few
        tens of milliseconds, so the second look costs seconds of a tune."""
        s = self.samples[size]
        fastest = s.candidates[0].time
        looked = [choice(c.algorithm, c.params) for c in s.candidates if c.time <= fastest * NEAR_TIE]
        if held is not None and self.time(held, size) < math.inf:
            looked += [held, choice(NATIVE, {})]
        looked = list(dict.fromkeys(looked))
        if len(looked) < 2:
            return s
        for ch in looked:
            self._again(ch, size)
        self._tell(f"{self.collective} at P = {self.procs}: {len(looked)} choices timed again at {size} B, the "
                   f"faster timing of each counts: {', '.join(f'{label(ch)} {self._prices[(ch, size)] * 1e3:.3g} ms' for ch in looked)}")
        self.samples[size] = s.model_copy(update={"candidates": self._fastest_each(size)})
        return self.samples[size]

    def _fastest_each(self, size: int) -> tuple[Candidate, ...]:
        """Each algorithm's fastest choice priced at ``size`` (of the parameter values its sample
        tried, and any other priced there, such as a rule's choice from the size below), fastest
        first; among equal prices the one priced first, as in :meth:`sample` (the default)."""
        best: dict[str, Candidate] = {}
        for (ch, at), t in self._prices.items():
            if at == size and math.isfinite(t) and (ch[0] not in best or t < best[ch[0]].time):
                best[ch[0]] = Candidate(algorithm=ch[0], params=dict(ch[1]), time=t)
        return tuple(sorted(best.values(), key=_order))

    def _again(self, ch: Choice, size: int, tell: bool = False) -> float:
        """One more timing of ``ch`` at ``size``, once per choice and size; the faster of its two
        timings then stands for ``ch`` at ``size`` in every later comparison (Unavailable: the
        first), and is returned.  With ``tell``, the progress hears of it.

        :meth:`_winner` times the rule's choice ``held`` again where its sample put it beyond the
        tolerance behind the fastest: the noise of a timing is one-sided (:meth:`_confirmed`), so one
        slow timing should not end a rule.  Where a call is not long, such a call costs little to
        time again.

        Where a call is long (:meth:`_settles`), one slow timing can end a rule as well, but there a
        timing costs up to a second, so ``held`` is timed again only within :data:`NEAR_TIE` of the
        fastest, and the fastest with it, since the faster of two timings would otherwise favour
        ``held`` over a choice timed once."""
        key = (ch, size)
        first = self.time(ch, size)
        if key in self._looked or not -math.inf < first < math.inf:
            return first
        self._looked.add(key)
        try:
            again = self._timed(ch[0], dict(ch[1]), size, 1)
        except Unavailable:
            return first
        if tell:
            self._tell(f"{self.collective} at P = {self.procs}: {label(ch)} timed again at {size} B: "
                       f"{again * 1e3:.3g} ms, after {first * 1e3:.3g} ms in the sample")
        self._prices[key] = min(first, again)
        return self._prices[key]

    def _held(self, size: int) -> Choice | None:
        """The winner at the largest sampled size below ``size`` if it is not ``native``, else None."""
        below = [s for s in self.samples if s < size]
        won = self.winner(max(below)) if below else None
        return won if won is not None and won[0] != NATIVE else None

    def _settles(self, size: int) -> bool:
        """True if a call of ``native`` at ``size`` takes at least the pricer's ``settle_call``
        seconds (timers in an MPI job have one, :data:`colltune.tune.measure.SETTLE_CALL`)."""
        return self.time(choice(NATIVE, {}), size) >= getattr(self.pricer, "settle_call", math.inf)

    def _settle_known(self) -> bool:
        """True if the pricer has a ``settle_call`` (timers in an MPI job do)."""
        return math.isfinite(getattr(self.pricer, "settle_call", math.inf))

    def _short(self, size: int) -> bool:
        """True if a call of ``native`` at ``size`` takes less than the pricer's ``mean_call``
        seconds (timers in an MPI job have one, :data:`colltune.tune.timing.MEAN_CALL`): where a
        timing prices the median call, and so a loss is noise, not part of the cost."""
        return self.time(choice(NATIVE, {}), size) < getattr(self.pricer, "mean_call", 0.0)

    def _confirmed(self, ch: Choice, size: int) -> bool:
        """With a tolerance (timed prices, which are noisy): ``ch``, faster than ``native`` at
        ``size`` in the sample, must beat it by more than the tolerance in two of three timings:
        the sample's, and up to two more, each right after ``native``, timed only while two wins
        are still within reach; where a call is short (:meth:`_short`), the fastest of each one's
        timings must (:meth:`_fastest_leads`).  Where a call takes the pricer's ``settle_call`` or
        more, only a sample lead of more than the tolerance gets here (:meth:`winner`).  Without a
        tolerance: always True.

        Why a third timing rather than a veto: the noise of a timing on a TCP network is one-sided
        (a retransmission timeout or a descheduled rank only adds time), so one slow timing of
        ``ch`` says less than one fast one.

        Why a sample lead below the tolerance still earns the two timings: a timing's noise is
        larger than the tolerance, so a sample that reads a small lead must not end the question.
        For longer calls the budget forbids it: there every confirming timing is made twice (below)
        and lasts up to a second.

        Where a call of ``native`` takes at least the pricer's ``settle_call`` seconds (timers in an
        MPI job have one, :data:`colltune.tune.measure.SETTLE_CALL`), each confirming timing is
        made twice in a row and the second counts: the first lets the network settle into the
        choice's traffic pattern after the other's; and a sample lead of :data:`SURE_LEAD` or more
        is taken without them."""
        if not self.tolerance:
            return True
        key = (ch, size)
        if key not in self._checks:
            self._checks[key] = self._fastest_leads(ch, size) if self._short(size) else self._wins_twice(ch, size)
        return self._checks[key]

    def _wins_twice(self, ch: Choice, size: int) -> bool:
        """True if ``ch`` beats ``native`` at ``size`` by more than the tolerance in two of three
        timings: the sample's, and up to two pairs, each ``native`` then ``ch``, timed while two
        wins are in reach; each timing made twice in a row where a call settles, and a sample lead
        of :data:`SURE_LEAD` taken there without them (:meth:`_confirmed`)."""
        first = self.time(choice(NATIVE, {}), size)
        settles = self._settles(size)
        times = 2 if settles else 1
        sure = settles and self.time(ch, size) * SURE_LEAD <= first
        wins = 2 if sure else int(self.time(ch, size) * (1 + self.tolerance) < first)
        for left in (2, 1):
            if wins == 2 or wins + left < 2:
                break
            try:
                native = self._timed(NATIVE, {}, size, times)
                again = self._timed(ch[0], dict(ch[1]), size, times)
            except Unavailable:
                return False
            wins += again * (1 + self.tolerance) < native
        return wins >= 2

    def _fastest_leads(self, ch: Choice, size: int) -> bool:
        """Where a call is short (:meth:`_short`): True if the fastest of ``ch``'s timings at
        ``size`` beats the fastest of ``native``'s by more than the tolerance, over the sample and
        up to two more pairs, each ``native`` then ``ch``; the second pair only where the first
        left ``ch``'s fastest ahead of ``native``'s, by less than twice the tolerance.

        Why the fastest: a short call's timing prices the median call, which leaves losses out, and
        the rest of its noise is one-sided (a switch transient or a descheduled rank only adds
        time), so the fastest timing of each is its best estimate, and counting pair wins lets one
        slow timing of ``native`` decide."""
        slack = 1 + self.tolerance
        native, mine = self.time(choice(NATIVE, {}), size), self.time(ch, size)
        for _ in range(2):
            try:
                native = min(native, self._timed(NATIVE, {}, size, 1))
                mine = min(mine, self._timed(ch[0], dict(ch[1]), size, 1))
            except Unavailable:
                return False
            if native <= mine or mine * slack * slack <= native:
                break
        return mine * slack < native

    def _timed(self, name: str, params: dict[str, Any], size: int, times: int) -> float:
        """The last of ``times`` prices of ``name`` with ``params`` at ``size``, asked in a row."""
        t = math.nan
        for _ in range(times):
            t = self.pricer.price(self.collective, name, self.procs, size, params)[0]
        return t

    def _beats(self, a: Choice, b: Choice, size: int) -> bool:
        """True if ``a`` is at least as good as ``b`` at ``size`` (native wins ties; with
        :attr:`load`, a near-tie goes to ``native``, and of two others to the lighter load,
        as in :meth:`sample` and :meth:`_winner`: :func:`colltune.tune.ties.predicted_choice`)."""
        ta, tb = self.time(a, size), self.time(b, size)
        if self.load is not None:
            return predicted_choice([a, b], lambda ch: self.time(ch, size), lambda ch: self._load_of(ch, size),
                                    lambda ch: ch[0]) == a
        return ta < tb or (ta == tb and (a[0] == NATIVE or b[0] != NATIVE))

    def _load_of(self, ch: Choice, size: int) -> tuple[int, int]:
        """:attr:`load` of ``ch`` at ``size`` (:func:`colltune.tune.ties.load` remembers them)."""
        assert self.load is not None
        return self.load(self.collective, ch[0], self.procs, size, dict(ch[1]))

    def _interchangeable(self, a: Choice, b: Choice, lo: int, hi: int) -> bool:
        """With a tolerance (timed prices): True if ``b`` (the winner at ``hi``) is within the
        tolerance of ``a`` (the winner at ``lo``) at ``lo``, and ``a`` within it of ``b`` at
        ``hi``.  Where times are linear in the size between the two, each is then within the
        tolerance of the other everywhere between, so wherever the boundary falls costs no more
        than the tolerance, and bisecting it would time noise: the boundary stays at ``hi``.
        Without a tolerance: always False."""
        if not self.tolerance:
            return False
        slack = 1 + self.tolerance
        return self.time(b, lo) <= self.time(a, lo) * slack and self.time(a, hi) <= self.time(b, hi) * slack

    def _refine(self, lo: int, hi: int, depth: int = 0) -> None:
        """Find the exact boundaries between ``lo`` and ``hi`` (both sampled), unless the two
        winners are interchangeable there (:meth:`_interchangeable`).  Predicted prices then sample
        every candidate on both sides of the crossover, in case a third one wins there; timed ones
        (with a tolerance) keep the two choices, since timing every contender twice more per
        crossover costs as much as the grid itself and its noise makes crossovers of its own.  Where
        a call is long (timed prices, :meth:`_settles` at ``lo``), and in a quick decision
        (:attr:`quick`) at any size, the boundary is not timed but placed where the two are
        predicted to cross by lines through their timed prices at ``lo`` and ``hi``
        (:meth:`_crossing`): a quick decision samples the sparse grid, whose rules a bisection
        timed call by call (a dozen timings a crossover at the resolution) would refine far below
        the spacing of the grid itself."""
        a, b = self.winner(lo), self.winner(hi)
        if a == b or hi - lo <= max(1, int(self.resolution * lo)) or depth > 8:
            return
        if self._interchangeable(a, b, lo, hi):
            return
        left, right = lo, hi
        crossing = self._crossing(a, b, lo, hi) if self.tolerance and (self._settles(lo) or self.quick) else None
        if crossing is not None:
            left, right = crossing - 1, crossing
            self._tell(f"{self.collective} at P = {self.procs}: {label(b)} from {crossing} B, after {label(a)}, "
                       f"where lines through their timings at {lo} and {hi} B cross (not timed between)")
        while right - left > max(1, int(self.resolution * left)):
            mid = (left + right) // 2
            if self._beats(a, b, mid):
                left = mid
            else:
                right = mid
        if self.tolerance:
            if left != lo:
                self._sides[left] = a
            if right != hi:
                self._sides[right] = b
            return
        if left != lo:
            self.sample(left)
            self._refine(lo, left, depth + 1)
        if right != hi:
            self.sample(right)
            self._refine(right, hi, depth + 1)

    def _crossing(self, a: Choice, b: Choice, lo: int, hi: int) -> int | None:
        """The first size above ``lo`` at which ``b`` (the winner at ``hi``) takes over from ``a``
        (the winner at ``lo``), from lines through their timed prices at the two sizes: where the
        lines cross between them, the first size past the crossing; ``lo + 1`` where ``b`` is the
        faster at both (``a`` held ``lo`` within the tolerance); ``hi`` where ``a`` is the faster at
        ``hi`` (``b`` won it otherwise, as ``native`` does where ``a`` does not lead it enough);
        None where one of the four prices is not finite (then the crossover is bisected).

        Why lines, not timings, where a call is long: there a call is bound by the network's
        bandwidth, and its time grows linearly with the size (Hockney's alpha + beta m); and a
        timing made right after the other algorithm's pays for the change of traffic pattern
        (:data:`colltune.tune.measure.SETTLE_CALL`), which bisection, timing the two by turns,
        always does, and costs seconds of each tune."""
        prices = [self.time(a, lo), self.time(b, lo), self.time(a, hi), self.time(b, hi)]
        if not all(math.isfinite(p) for p in prices):
            return None
        d_lo, d_hi = prices[0] - prices[1], prices[2] - prices[3]
        if d_hi <= 0:
            return hi
        if d_lo > 0:
            return lo + 1
        return min(hi, lo + 1 + math.floor((hi - lo) * -d_lo / (d_hi - d_lo)))

    def _tell(self, line: str) -> None:
        """Pass a progress line to :attr:`say`, if there is one."""
        if self.say is not None:
            self.say(line)

    def rules(self, sizes: Sequence[int]) -> tuple[Rule, ...]:
        """The size rules from the grid ``sizes`` (ascending, starting at 0), boundaries refined."""
        for s in sizes:
            self.sample(s)
        for lo, hi in itertools.pairwise(sizes):
            self._refine(lo, hi)
        points = sorted({*self.samples, *self._sides})
        rules: list[Rule] = []
        prev: Choice | None = None
        for i, s in enumerate(points):
            w = self.winner(s)
            if w != prev:
                start = 0 if not rules else s
                if rules:
                    rules[-1] = rules[-1].model_copy(update={"size_max": start - 1})
                below = prev[0] if prev is not None else None
                rules.append(Rule(size_min=start, size_max=None, algorithm=w[0], params=dict(w[1]),
                                  crossover=(below, w[0]) if below is not None and points[i - 1] == s - 1 else None))
                prev = w
        return tuple(rules)


def _blocks(per_procs: list[tuple[int, tuple[Rule, ...], tuple[Sample, ...]]]) -> tuple[Block, ...]:
    """Blocks from the rules at each tuned process count, neighbours with equal rules merged.
    A count's rules hold from it up to the next tuned count minus one."""
    blocks: list[Block] = []
    for i, (procs, rules, samples) in enumerate(per_procs):
        top = per_procs[i + 1][0] - 1 if i + 1 < len(per_procs) else procs
        if blocks and blocks[-1].rules == rules:
            last = blocks[-1]
            blocks[-1] = last.model_copy(update={"procs_max": top, "tuned_at": last.tuned_at + (procs,),
                                                 "samples": last.samples + samples})
        else:
            blocks.append(Block(procs_min=procs, procs_max=top, tuned_at=(procs,), rules=rules, samples=samples))
    return tuple(blocks)


#: ``check(collective, procs, rules, grid sizes, samples by size) -> rules``: a last look at a
#: collective's rules in the job (:func:`colltune.tune.fresh.fresh_hook`,
#: :func:`colltune.tune.sequence.in_order_hook`).
RulesCheck = Callable[[str, int, tuple[Rule, ...], Sequence[int], Mapping[int, Sample]], tuple[Rule, ...]]


def chain(*checks: RulesCheck) -> RulesCheck:
    """One :data:`RulesCheck` that passes the rules through ``checks`` in turn."""
    def check(collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
              samples: Mapping[int, Sample]) -> tuple[Rule, ...]:
        for each in checks:
            rules = each(collective, procs, rules, sizes, samples)
        return rules
    return check


def narrowed(pricer: Pricer, procs: int) -> bool:
    """True if ``pricer`` narrows the race at ``procs`` processes (the hybrid tuner below the job's
    count: :meth:`colltune.tune.hybrid.HybridPricer.narrowed`): the tuner then samples the sparse
    grid (:func:`sparse_grid`) and makes no second looks, a quick decision at a count whose
    neighbour was decided in full."""
    return bool(getattr(pricer, "narrowed", lambda _: False)(procs))


def sparse_grid(sizes: Sequence[int]) -> list[int]:
    """Of the grid ``sizes``: 0, the powers of four (1, 4, 16, ...) up to a quarter of the largest,
    and the largest.  Between two of them a crossover is still bisected (:meth:`Tuner._refine`), at a
    timing or two more.  Why not the power of four just below the largest (256 KiB below 512 KiB):
    there a timing costs the most (calls of tens of milliseconds, bound by the network's bandwidth,
    where the time grows linearly with the size), and it is within a factor of four of the largest,
    so it adds a sample only where the largest and the size below it disagree, which the bisection
    then finds anyway."""
    top = sizes[-1]
    return [s for s in sizes if s == 0 or s == top or (s & (s - 1) == 0 and s.bit_length() % 2 == 1 and 4 * s <= top)]


def tune_collective(pricer: Pricer, collective: str, procs_list: Iterable[int], max_size: int,
                    resolution: float = 0.0, progress: Callable[[], None] | None = None,
                    space: Space = REGISTRY_SPACE, tolerance: float = 0.0,
                    check: RulesCheck | None = None, say: Callable[[str], None] | None = None,
                    load: NetworkLoad | None = None) -> tuple[Block, ...]:
    """The blocks of one collective: rules at each process count of ``procs_list`` (decided from the
    largest down) for sizes 0 .. ``max_size`` bytes (a barrier has size 0 only), choosing among ``space``, each passed
    through ``check`` if given; ``say`` hears where a rule goes on (:attr:`Tuner.say`); with
    ``load``, the prices are predictions whose near-ties go to the lighter load (:attr:`Tuner.load`)."""
    grid = [0] if get_collective(collective).synchronizes else grid_sizes(max_size)
    per_procs = []
    # the largest count first: the hybrid tuner narrows the race below it by what its timings showed
    for procs in sorted(set(procs_list), reverse=True):
        quick = narrowed(pricer, procs)
        sizes = sparse_grid(grid) if quick else grid
        t = Tuner(pricer, collective, procs, resolution, space, tolerance, say=say, load=load, quick=quick)
        rules = t.rules(sizes)
        if check is not None:
            rules = check(collective, procs, rules, sizes, t.samples)
        per_procs.append((procs, rules, tuple(t.samples[s] for s in sorted(t.samples))))
        if progress is not None:
            progress()
    return _blocks(sorted(per_procs, key=lambda entry: entry[0]))


def build_table(pricer: Pricer, method: Method, collectives: Iterable[str], procs_list: Sequence[int],
                max_size: int, provenance: Provenance, *, model: str | None = None, profile: str | None = None,
                time_unit: str = "s", native: str = "", resolution: float = 0.0,
                progress: Callable[[], None] | None = None, library: str = "colltune",
                space: Space | None = None, tolerance: float = 0.0, promises: Promises | None = None,
                check: RulesCheck | None = None, say: Callable[[str], None] | None = None) -> DecisionTable:
    """A :class:`DecisionTable` for ``collectives`` at the process counts ``procs_list`` (each >= 1)
    and sizes up to ``max_size`` bytes, priced by ``pricer``, choosing among colltune's algorithms
    or, with ``library`` ``"mpich"``, among that library's own (:mod:`colltune.tune.targets`;
    ``pricer`` then prices their registry equivalents).  With ``space`` given, the candidates are
    its own and ``pricer`` prices them as they are (the hybrid and library timers do).
    ``tolerance``: see :attr:`Tuner.tolerance` (0 for predictions, which have no noise);
    ``promises``: what the program promises (:attr:`DecisionTable.promises`; none by default);
    ``check``: a last look at each collective's rules at each process count, in the job
    (:func:`colltune.tune.sequence.in_order_hook`); ``say``: hears of each size where a rule goes on
    within the tolerance or its choice is timed again (:meth:`Tuner.winner`)."""
    if not procs_list or min(procs_list) < 1:
        raise ParameterError(f"process counts must be >= 1, got {list(procs_list)}")
    if max_size < 0:
        raise ParameterError(f"the largest size must be >= 0 bytes, got {max_size}")
    count: NetworkLoad | None = network_load(pricer) if method in PREDICTED else None
    if space is None:
        space = REGISTRY_SPACE
        if library != "colltune":
            from colltune.tune.targets import LibraryPricer, LibrarySpace

            space, pricer = LibrarySpace(library, promises or Promises()), LibraryPricer(pricer, library)
            count = pricer.load if count is not None else None
    table = {c: tune_collective(pricer, c, procs_list, max_size, resolution, progress, space, tolerance, check, say,
                                count) for c in collectives}
    return DecisionTable(method=method, model=model, profile=profile, time_unit=time_unit,  # type: ignore[arg-type]
                         native=native, provenance=provenance, collectives=table, library=library,
                         promises=promises or Promises())
