"""The probe's check by choices: the network models that predict the check about equally well
are told apart by the algorithms they would choose.

The check's errors (:func:`colltune.probe.run.choose_network`) rank the network models by how close
their times come to a few measured collectives; but the tuner uses a model to choose, and the
best few models are often within a few points of check error of each other, so which of them the
check chooses can change from run to run while their choices differ. So the probe asks each finalist which algorithm
it would choose in each cell (a collective at a check size, every registered algorithm with its
default parameters, near-ties broken as the tuner breaks them:
:func:`colltune.tune.ties.predicted_choice`), times the algorithms chosen in the cells where the
finalists disagree (3-6 cells, 6-9 cases beyond those the check timed already; those priced below
10 ms in up to :data:`SHORT_ROUNDS` rounds), and keeps, of the finalists whose choices were
measured about as fast as the fastest (within :data:`CHOICE_TIE`), the one with the smallest
check error (:func:`choose_by_choices`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from colltune.algorithms import REGISTRY
from colltune.collectives import get_collective
from colltune.errors import ColltuneError
from colltune.profiles.format import Models
from colltune.report.fidelity import BEST_TOLERANCE
from colltune.sim import NETWORKS, Topology, topology_for
from colltune.sim.calls import steady_call
from colltune.tune.ties import load, predicted_choice

#: How many network models, the best of the check's first cases, the check by choices compares
#: (see the module docstring).
FINALISTS = 4
#: Rounds in which the check times a disputed case that every finalist prices below
#: :data:`colltune.tune.timing.MEAN_CALL` (10 ms), the median of the rounds' medians counting, as
#: ``benchmarks/fidelity_testbed.py`` times such cases (``--short-rounds 9``): one round of a short
#: case is far noisier than the differences between the models' choices it must judge.
SHORT_ROUNDS = 9
#: Seconds the rounds after the first may take, as priced (:func:`round_count`): a few seconds of
#: the probe's time, enough for the short disputed cases of an 8-host network.
ROUNDS_BUDGET = 4.0
#: Choice scores (:func:`choice_scores`) within this fraction of the smallest are a tie, which the
#: check error decides: a point or two is what timing alone gives (two runs of the fidelity
#: benchmark, each run's measured times choosing for the other's, differ by that much), so a
#: smaller difference says nothing of which model chooses better.
CHOICE_TIE = 0.02

Case = tuple[str, str, int]  # (collective, algorithm, block size in bytes)
Cell = tuple[str, int]  # (collective, block size in bytes)
Prices = dict[str, dict[Cell, dict[str, float]]]  # network -> cell -> algorithm -> seconds


def price_cells(models: Models, procs: int, networks: Sequence[str], sizes: Sequence[int],
                topology: Topology | None = None) -> Prices:
    """Every registered algorithm (default parameters, root 0) in each cell (collective, block
    size in bytes; a barrier's at size 0 only) at ``procs`` ranks, priced by each network model of
    ``networks`` as :func:`colltune.probe.run.choose_network` prices the check (the third of
    back-to-back calls over ``topology`` where it carries the model), in seconds.  An algorithm
    that cannot run on ``procs`` ranks with its defaults, or that a model cannot price, is left out
    of that model's cells."""
    prices: Prices = {net: {} for net in networks}
    for alg in REGISTRY:
        if alg.hierarchical:
            continue  # as the flat algorithm of its network level on one rank per host
        for size in (0,) if get_collective(alg.collective).synchronizes else sizes:
            try:
                schedule = alg.schedule(procs, 0, size)
            except ColltuneError:
                continue  # needs parameters, or not on this many ranks
            for net in networks:
                try:
                    t = steady_call(schedule, net, getattr(models, NETWORKS[net].params),
                                    topology=topology_for(topology, net, procs))
                except ColltuneError:
                    continue
                prices[net].setdefault((alg.collective, size), {})[alg.name] = t
    return prices


def model_choices(prices: Prices, procs: int, hosts: tuple[int, ...] | None = None) -> dict[str, dict[Cell, str]]:
    """Which algorithm each network model of ``prices`` (:func:`price_cells`) chooses in each of
    its cells at ``procs`` ranks on ``hosts`` (a host label per rank; None: one rank per host): its
    fastest, with near-ties broken as the tuner breaks them."""
    choices: dict[str, dict[Cell, str]] = {}
    for net, cells in prices.items():
        choices[net] = {}
        for (coll, size), priced in cells.items():
            choices[net][(coll, size)] = predicted_choice(
                sorted(priced), priced.__getitem__,
                lambda name, c=coll, s=size: load(c, name, procs, s, {}, hosts), str)
    return choices


def short_cases(cases: Sequence[Case], prices: Prices, below: float) -> list[Case]:
    """Those of ``cases`` that every model of ``prices`` priced, and priced below ``below``
    seconds (the probe's: :data:`colltune.tune.timing.MEAN_CALL`): the ones the check times in
    up to :data:`SHORT_ROUNDS` rounds."""
    out = []
    for coll, alg, size in cases:
        times = [cells.get((coll, size), {}).get(alg) for cells in prices.values()]
        if times and all(t is not None and t < below for t in times):
            out.append((coll, alg, size))
    return out


def round_count(cost: float) -> int:
    """How many rounds the short cases are timed in, when one round of them costs ``cost``
    seconds: :data:`SHORT_ROUNDS`, or as many as fit in :data:`ROUNDS_BUDGET` after the first."""
    return SHORT_ROUNDS if cost <= 0 else max(1, min(SHORT_ROUNDS, 1 + int(ROUNDS_BUDGET // cost)))


def in_rounds(cases: Sequence[Case], short: Sequence[Case], rounds: int) -> list[Case]:
    """``cases``, then ``rounds`` - 1 more rounds of ``short``, each turned by one more place, so
    that no case always follows the same one."""
    more = [short[(i + k) % len(short)] for k in range(1, rounds) for i in range(len(short))] if short else []
    return [*cases, *more]


def _disputed_cells(choices: Mapping[str, Mapping[Cell, str]]) -> dict[Cell, dict[str, str]]:
    """Each cell where the models of ``choices`` choose different algorithms: model -> its choice."""
    cells = sorted({cell for chosen in choices.values() for cell in chosen})
    out = {}
    for cell in cells:
        chosen = {net: c[cell] for net, c in choices.items() if cell in c}
        if len(set(chosen.values())) > 1:
            out[cell] = chosen
    return out


def disputed(choices: Mapping[str, Mapping[Cell, str]]) -> list[Case]:
    """The cases to time: in each cell where the models of ``choices`` choose different
    algorithms, each algorithm one of them chooses (cells and algorithms in sorted order)."""
    return [(coll, alg, size) for (coll, size), chosen in _disputed_cells(choices).items()
            for alg in sorted(set(chosen.values()))]


def choice_scores(choices: Mapping[str, Mapping[Cell, str]], measured: Mapping[Case, float]) -> dict[str, float]:
    """How much slower each model's choices ran than the fastest chosen, over the cells where the
    models disagree and every chosen algorithm was ``measured`` (seconds): the geometric mean of
    measured(its choice) / the fastest measured choice in the cell, a choice within
    :data:`colltune.report.fidelity.BEST_TOLERANCE` of that fastest counting as 1 (as the
    fidelity benchmark counts a choice as good as the best); 1 where no cell is disputed."""
    ratios: dict[str, list[float]] = {net: [] for net in choices}
    for (coll, size), chosen in _disputed_cells(choices).items():
        if not all((coll, alg, size) in measured for alg in chosen.values()):
            continue
        times = {net: measured[(coll, alg, size)] for net, alg in chosen.items()}
        fastest = min(times.values())
        for net, t in times.items():
            ratios[net].append(1.0 if t <= (1 + BEST_TOLERANCE) * fastest else t / fastest)
    return {net: statistics.geometric_mean(r) if r else 1.0 for net, r in ratios.items()}


def choose_by_choices(scores: Mapping[str, float], errors: Mapping[str, float]) -> str:
    """Of the models of ``scores`` whose choice score (:func:`choice_scores`) is within
    :data:`CHOICE_TIE` of the smallest, the one with the smallest check error (``errors``; a model
    without one last), then the smallest score, then the first name."""
    least = min(scores.values())
    close = [net for net in scores if scores[net] <= (1 + CHOICE_TIE) * least]
    return min(close, key=lambda net: (errors.get(net, math.inf), round(scores[net], 9), net))


__all__ = ["CHOICE_TIE", "FINALISTS", "ROUNDS_BUDGET", "SHORT_ROUNDS", "Prices", "choice_scores", "choose_by_choices",
           "disputed", "in_rounds", "model_choices", "price_cells", "round_count", "short_cases"]
