"""The probe's check by choices: the network models that predict the check about equally well
are told apart by the algorithms they would choose.

The check's errors (:func:`colltune.probe.run.choose_network`) rank the network models by how
close their times come to a few measured collectives; but the tuner uses a model to choose, and
on the 8-host testbed the first :data:`FINALISTS` models of the check were within 2 points of
each other in every run of 2026-12-01 (``hockney``, ``plogp``, ``logp`` and ``latency``: 16.9-18.8 %
on the star and 12.6-13.2 % on tree:2 in the last, the fifth 4.4 points behind or more), so that
the choice among them changed from run to run, while over the fidelity benchmark's 22 cells their
choices differed: ``hockney`` chose within 5 % of the measured best in 21 of 22 cells on the star,
``latency`` in 19 and ``plogp`` in 18.  So the probe asks each finalist which algorithm it would
choose in each cell (a collective at a check size, every registered algorithm with its default
parameters, near-ties broken as the tuner breaks them: :func:`colltune.tune.ties.fewest_peers_first`),
times the algorithms chosen in the cells where the finalists disagree (3-4 cells, 8-10 cases
there), and keeps the finalist whose choices were measured fastest (:func:`choose_by_choices`).
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
from colltune.tune.ties import fewest_peers_first, peers

#: How many network models, the best of the check's first cases, the check by choices compares
#: (see the module docstring).
FINALISTS = 4

Case = tuple[str, str, int]  # (collective, algorithm, block size in bytes)
Cell = tuple[str, int]  # (collective, block size in bytes)


def model_choices(models: Models, procs: int, networks: Sequence[str], sizes: Sequence[int],
                  topology: Topology | None = None) -> dict[str, dict[Cell, str]]:
    """Which registered algorithm (default parameters, root 0) each network model of ``networks``
    chooses in each cell (collective, block size in bytes; a barrier's at size 0 only) at
    ``procs`` ranks: its fastest, priced as :func:`colltune.probe.run.choose_network` prices the
    check (the third of back-to-back calls over ``topology`` where it carries the model), with
    near-ties broken as the tuner breaks them.  An algorithm that cannot run on ``procs`` ranks
    with its defaults, or that a model cannot price, is not that model's candidate."""
    times: dict[str, dict[Cell, dict[str, float]]] = {net: {} for net in networks}
    for alg in REGISTRY:
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
                times[net].setdefault((alg.collective, size), {})[alg.name] = t
    choices: dict[str, dict[Cell, str]] = {}
    for net, cells in times.items():
        choices[net] = {}
        for (coll, size), priced in cells.items():
            ranked = fewest_peers_first(sorted(priced), priced.__getitem__,
                                        lambda name, c=coll, s=size: peers(c, name, procs, s, {}),
                                        lambda name: (priced[name], name))
            choices[net][(coll, size)] = ranked[0]
    return choices


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
    """The model with the smallest choice score (:func:`choice_scores`); among equal scores, the
    smallest check error (``errors``), then the first name."""
    return min(scores, key=lambda net: (round(scores[net], 9), errors.get(net, math.inf), net))


__all__ = ["FINALISTS", "choice_scores", "choose_by_choices", "disputed", "model_choices"]
