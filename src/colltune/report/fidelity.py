"""Fidelity: how well each predictor (a network model of the simulator, with or without the
measured network's topology, or an analytic model) predicts measured collective times.

The fidelity benchmark's figures, per predictor:

- **relative error** of each case (one algorithm at one size): ``|predicted - measured| / measured``,
  summarised by its median and 90th percentile;
- **best within 5 %**: in each cell (a collective at a size), the algorithm the predictor chooses
  (:func:`predicted_best`: its fastest, a near-tie broken as the tuner breaks it, by the lighter
  network load)
  is measured within 5 % of the measured fastest;
- **regret**: the geometric mean over the cells of measured(predicted best) / measured best, what
  following the predictor costs.

A predictor is judged only on the cases it can price; a cell counts for it when it prices at
least two of the cell's algorithms, and its regret is against the fastest of every algorithm
measured in the cell (also those it cannot price).

The results file (format ``colltune-fidelity``, version 1) keeps the measured times and every
prediction in seconds, with its provenance; :func:`read_fidelity` and :func:`write_fidelity` read
and write it (atomically).
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from colltune.algorithms import REGISTRY
from colltune.errors import ColltuneError
from colltune.files import parse_record, read_json, write_atomic
from colltune.models import Unavailable, predict
from colltune.models.params import MODELS, ParamSet
from colltune.profiles.format import Profile, Provenance
from colltune.report.figure import pyplot
from colltune.sim import NETWORKS, Topology, profile_network, simulate, topology_for
from colltune.sim.calls import steady_call
from colltune.tune.native import native_placed
from colltune.tune.table import NATIVE
from colltune.tune.ties import load, predicted_choice

FORMAT = "colltune-fidelity"
VERSION = 1
#: "Within 5 % of the measured best" (the fidelity benchmark's target).
BEST_TOLERANCE = 0.05


class FidelityError(ColltuneError, ValueError):
    """A fidelity results file that cannot be used; the message names the file and the field."""


class FidelityCase(ParamSet):
    """One algorithm at one block size: its measured time (the slowest rank per run; seconds) and
    what each predictor predicts for it (seconds)."""

    collective: str
    algorithm: str
    size: int = Field(ge=0, description="block size in bytes")
    params: dict[str, Any] = Field(default_factory=dict, description="the parameters it ran with")
    median: float = Field(gt=0, allow_inf_nan=False, description="measured median, s")
    q1: float = Field(ge=0, allow_inf_nan=False)
    q3: float = Field(ge=0, allow_inf_nan=False)
    reps: int = Field(ge=1)
    predicted: dict[str, float] = Field(default_factory=dict, description="predictor name -> seconds")


class FidelityResults(ParamSet):
    """A fidelity run on one network (format version 1)."""

    format: Literal["colltune-fidelity"] = FORMAT
    version: Literal[1] = Field(VERSION, description="format version; this colltune reads version 1")
    network: str = Field(description="the measured network, e.g. the testbed's topology name and link rate")
    procs: int = Field(ge=1)
    profile: str = Field(description="the profile the predictions come from")
    default_predictor: str = Field(description="the predictor of the profile's default network model")
    probe_seconds: float | None = Field(None, ge=0, description="how long the probe took, s")
    hosts: tuple[int, ...] | None = Field(None, description="the host of each rank, a label per rank (None: one rank "
                                                              "per host), on which near-ties are broken")
    provenance: Provenance
    cases: tuple[FidelityCase, ...]

    def to_json(self) -> str:
        return self.model_dump_json(indent=1) + "\n"


def read_fidelity(path: str | os.PathLike[str]) -> FidelityResults:
    """Read and validate a fidelity results file."""
    data = read_json(path, "fidelity results", FidelityError)
    return parse_record(FidelityResults, data, str(path), FORMAT, VERSION, FidelityError)


def write_fidelity(results: FidelityResults, path: str | os.PathLike[str]) -> None:
    """Write ``results`` to ``path`` atomically."""
    write_atomic(path, results.to_json())


#: ``(collective, algorithm, procs, size, params) -> seconds``; raises Unavailable where it cannot.
PredictFn = Callable[[str, str, int, int, dict[str, Any]], float]


def simulated_name(network: str, on_topology: bool, drops: bool = True, third: bool = False) -> str:
    """``simulate:NAME``, with ``@topology`` (``-nodrop`` without the drop rule; ``-third``: the third
    of back-to-back calls, :func:`colltune.sim.calls.steady_call`)."""
    suffix = "" if not on_topology else "@topology" if drops else "@topology-nodrop"
    return f"simulate:{network}{suffix}" + ("-third" if third else "")


def default_predictor(profile: Profile, procs: int) -> str:
    """The predictor of ``profile``'s default network model at ``procs`` ranks, as the tuner
    prices it: over the profile's topology where it carries that model
    (:func:`colltune.sim.topology_for`), and there the third of calls made back to back
    (:func:`colltune.sim.calls.steady_call`)."""
    network = profile_network(profile)
    carried = topology_for(profile.topology, network, procs) is not None
    return simulated_name(network, carried, third=carried)


def predictors(profile: Profile, topology: Topology | None = None) -> dict[str, PredictFn]:
    """Every predictor ``profile`` supports: each network model of the simulator whose parameters
    it has (``simulate:NAME``), each endpoint model again carried over ``topology``
    (``simulate:NAME@topology``) and, if its switch ports have finite queues, over the same
    topology with unlimited ones (``simulate:NAME@topology-nodrop``: no drop rule), and each
    analytic model (``model:NAME``); and each endpoint model over ``topology`` again, priced as the
    third of three calls made back to back after a barrier each (``simulate:NAME@topology-third``,
    :func:`colltune.sim.calls.steady_call`: how the benchmark times a case and the tuner prices
    it; the profile's default network model priced so is the :func:`default_predictor`).  A
    hierarchical algorithm is priced on the hosts of ``topology``, and without it as its network
    level alone."""
    out: dict[str, PredictFn] = {}
    unlimited = None if topology is None else topology.model_copy(
        update={"nodes": tuple(n.model_copy(update={"buffer": None}) for n in topology.nodes)})

    def simulated(network: str, params: ParamSet, topo: Topology | None, steady: bool = False) -> PredictFn:
        def fn(collective: str, algorithm: str, procs: int, size: int, algparams: dict[str, Any]) -> float:
            alg = REGISTRY.get(collective, algorithm)
            hosts = topo.host_labels(procs) if alg.hierarchical and topo is not None else None
            schedule = alg.schedule(procs, 0, size, hosts=hosts, **algparams)
            try:
                if steady:
                    return steady_call(schedule, network, params, topology=topo)
                return simulate(schedule, network, params, topology=topo).total
            except ColltuneError as exc:
                raise Unavailable(str(exc)) from None
        return fn

    def analytic(model: str, params: ParamSet) -> PredictFn:
        def fn(collective: str, algorithm: str, procs: int, size: int, algparams: dict[str, Any]) -> float:
            return predict(params, model, collective, algorithm, procs, size, **algparams).time
        return fn

    for net in NETWORKS.values():
        params = getattr(profile.models, net.params, None)
        if params is None:
            continue
        out[simulated_name(net.name, False)] = simulated(net.name, params, None)
        if topology is not None and not net.own_topology:
            out[simulated_name(net.name, True)] = simulated(net.name, params, topology)
            out[simulated_name(net.name, True, third=True)] = simulated(net.name, params, topology, steady=True)
            if unlimited != topology:
                out[simulated_name(net.name, True, drops=False)] = simulated(net.name, params, unlimited)
    for model in MODELS:
        params = getattr(profile.models, model, None)
        if params is not None:
            out[f"model:{model}"] = analytic(model, params)
    return out


def predict_cases(cases: Iterable[FidelityCase], procs: int, fns: dict[str, PredictFn],
                  hosts: tuple[int, ...] | None = None) -> list[FidelityCase]:
    """``cases`` with every predictor of ``fns`` that can price them filled in; ``native`` is
    priced as the registry algorithm MPICH runs by default on ranks on ``hosts`` (a host label per
    rank; None: one rank per host), as the tuner prices it
    (:func:`colltune.tune.native.native_placed`)."""
    out = []
    for case in cases:
        predicted = dict(case.predicted)
        algorithm, params = case.algorithm, dict(case.params)
        if algorithm == NATIVE:
            algorithm, params = native_placed(case.collective, procs, case.size, hosts)
        for name, fn in fns.items():
            try:
                t = fn(case.collective, algorithm, procs, case.size, params)
            except Unavailable:
                continue
            if math.isfinite(t) and t >= 0:
                predicted[name] = t
        out.append(case.model_copy(update={"predicted": predicted}))
    return out


def with_measured(cases: Iterable[FidelityCase], other: Iterable[FidelityCase], name: str) -> list[FidelityCase]:
    """``cases`` with the measured medians of ``other`` (another run of the same cases: the same
    collective, algorithm, size and parameters) as the predictor ``name``; a case ``other`` lacks
    keeps its predictions.

    Such a predictor is as good as any model of the other run can be: its figures are the
    benchmark's repeatability, the floor under every model's error and the share of cells in which
    two runs agree on the fastest algorithm."""
    def key(c: FidelityCase) -> tuple[str, str, int, str]:
        return c.collective, c.algorithm, c.size, json.dumps(c.params, sort_keys=True)

    medians = {key(c): c.median for c in other}
    return [c.model_copy(update={"predicted": {**c.predicted, name: medians[key(c)]}}) if key(c) in medians else c
            for c in cases]


@dataclass(frozen=True)
class Fidelity:
    """One predictor's figures over a run (see the module docstring); errors are fractions."""

    predictor: str
    cases: int
    median_error: float
    p90_error: float
    cells: int
    best_within: int
    regret: float

    @property
    def best_share(self) -> float:
        """The fraction of cells whose predicted best is within 5 % of the measured best."""
        return self.best_within / self.cells if self.cells else math.nan


def relative_errors(cases: Sequence[FidelityCase], predictor: str) -> list[float]:
    return [abs(c.predicted[predictor] - c.median) / c.median for c in cases if predictor in c.predicted]


def _cells(cases: Sequence[FidelityCase]) -> dict[tuple[str, int], list[FidelityCase]]:
    cells: dict[tuple[str, int], list[FidelityCase]] = {}
    for c in cases:
        cells.setdefault((c.collective, c.size), []).append(c)
    return cells


def predicted_best(cell: Sequence[FidelityCase], predictor: str, procs: int,
                   hosts: tuple[int, ...] | None = None) -> FidelityCase:
    """The case of one (collective, size) cell that ``predictor`` chooses, as the tuner would: the
    fastest predicted, except that among those within :data:`colltune.tune.ties.PREDICTED_TIE` of
    it ``native`` where it is one, else the one whose busiest rank moves the fewest bytes to and
    from other hosts, then has the fewest peers there (``hosts`` labels each rank's host; None: one
    rank per host; :func:`colltune.tune.ties.load`, :func:`colltune.tune.ties.predicted_choice`),
    then the first in alphabetical order."""
    priced = [c for c in cell if predictor in c.predicted]
    return predicted_choice(priced, lambda c: c.predicted[predictor],
                            lambda c: load(c.collective, c.algorithm, procs, c.size, dict(c.params), hosts),
                            lambda c: c.algorithm)


def _choices(cases: Sequence[FidelityCase], predictor: str, procs: int,
             hosts: tuple[int, ...] | None) -> Iterable[tuple[tuple[str, int], FidelityCase, FidelityCase]]:
    """Per cell that counts for ``predictor`` (it prices at least two of its algorithms): the cell,
    the case ``predictor`` chooses (:func:`predicted_best`) and the case measured fastest."""
    for key, cell in _cells(cases).items():
        priced = [c for c in cell if predictor in c.predicted]
        if len(priced) >= 2:
            yield key, predicted_best(priced, predictor, procs, hosts), min(cell, key=lambda c: c.median)


def fidelity(cases: Sequence[FidelityCase], predictor: str, procs: int,
             hosts: tuple[int, ...] | None = None) -> Fidelity:
    """``predictor``'s figures over ``cases`` (timed at ``procs`` ranks on ``hosts``, a host label
    per rank; None: one rank per host)."""
    errors = relative_errors(cases, predictor)
    within = 0
    ratios = []
    for _, chosen, fastest in _choices(cases, predictor, procs, hosts):
        best = fastest.median
        ratios.append(chosen.median / best)
        within += chosen.median <= (1 + BEST_TOLERANCE) * best
    return Fidelity(predictor=predictor, cases=len(errors),
                    median_error=float(np.median(errors)) if errors else math.nan,
                    p90_error=float(np.percentile(errors, 90)) if errors else math.nan,
                    cells=len(ratios), best_within=within,
                    regret=statistics.geometric_mean(ratios) if ratios else math.nan)


#: A playoff's figures: per cell (collective, size), per algorithm, its time (s) in each playoff round.
Playoff = dict[tuple[str, int], dict[str, Sequence[float]]]


def playoff_pairs(cases: Sequence[FidelityCase], predictor: str, procs: int,
                  hosts: tuple[int, ...] | None = None) -> dict[tuple[str, int], tuple[str, str]]:
    """Per cell that counts for ``predictor`` and whose choice is not the measured fastest: the
    algorithms ``(chosen, fastest)``, which a playoff times again (:func:`checked_best_within`)."""
    return {key: (chosen.algorithm, fastest.algorithm)
            for key, chosen, fastest in _choices(cases, predictor, procs, hosts)
            if chosen.algorithm != fastest.algorithm}


def checked_best_within(cases: Sequence[FidelityCase], predictor: str, procs: int, playoff: Playoff,
                        hosts: tuple[int, ...] | None = None) -> int:
    """The cells whose predicted choice is within 5 % of the measured fastest, as :func:`fidelity`
    counts them, except that a cell whose choice and fastest both ran in ``playoff`` rounds is
    judged by the medians of those rounds alone.

    Why: the fastest of a cell is the least of some ten medians of a few noisy rounds each, biased
    low; a choice that ran as fast is found behind it by chance, and one that ran behind ahead of
    it.  Fresh rounds of the two, which the choice of the fastest did not see, compare them without
    that bias (the same reason as :data:`colltune.tune.library_bench.PLAYOFF_OVER`'s playoff)."""
    within = 0
    for key, chosen, fastest in _choices(cases, predictor, procs, hosts):
        rounds = playoff.get(key, {})
        if chosen.algorithm != fastest.algorithm and rounds.get(chosen.algorithm) and rounds.get(fastest.algorithm):
            mine, best = (statistics.median(rounds[a]) for a in (chosen.algorithm, fastest.algorithm))
        else:
            mine, best = chosen.median, fastest.median
        within += mine <= (1 + BEST_TOLERANCE) * best
    return within


def fidelities(results: FidelityResults) -> list[Fidelity]:
    """Every predictor's figures, best median error first."""
    names = sorted({name for c in results.cases for name in c.predicted})
    out = [fidelity(results.cases, name, results.procs, results.hosts) for name in names]
    return sorted(out, key=lambda f: (f.median_error, f.predictor))


def fidelity_figure(results: FidelityResults, names: Sequence[str]) -> Any:
    """Predicted against measured (log-log, milliseconds), one panel per predictor of ``names``,
    one colour per collective, with the diagonal and its +-25 % band."""
    plt = pyplot()
    colls = list(dict.fromkeys(c.collective for c in results.cases))
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 5.2), squeeze=False)
    times = [c.median for c in results.cases] + [t for c in results.cases for t in c.predicted.values() if t > 0]
    lo, hi = min(times) * 1e3 / 1.5, max(times) * 1e3 * 1.5
    for ax, name in zip(axes.flat, names, strict=True):
        f = fidelity(results.cases, name, results.procs, results.hosts)
        for i, coll in enumerate(colls):
            pts = [(c.median * 1e3, c.predicted[name] * 1e3) for c in results.cases
                   if c.collective == coll and c.predicted.get(name, 0) > 0]
            if pts:
                x, y = zip(*pts, strict=True)
                ax.scatter(x, y, s=14, color=f"C{i}", label=coll, alpha=0.8)
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
        for k in (0.75, 1.25):
            ax.plot([lo, hi], [lo * k, hi * k], color="grey", linewidth=0.5, linestyle="--")
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured (ms)",
               ylabel="predicted (ms)",
               title=f"{name}\nmedian {f.median_error:.0%}, p90 {f.p90_error:.0%}, regret {f.regret:.2f}")
        ax.title.set_fontsize(9)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{results.network}, P = {results.procs}", fontsize=10)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class Claim:
    """A paper's claim that algorithm ``first`` of ``collective`` is faster than ``second`` (or
    slower, as ``statement`` says) on a network; :func:`claim_outcomes` checks it on a run."""

    paper: str
    collective: str
    first: str
    second: str
    statement: str


#: The seed papers' comparisons that the fidelity benchmark asks to reproduce or refute.
CLAIMS = (
    Claim("002", "bcast", "symmetric_async", "binomial_tree",
          "the symmetric broadcast beats the binomial tree above 2 kB, by 2x for large messages "
          "and more than 9 destinations (section 5)"),
    Claim("000", "gather", "coordinated", "flat_tree",
          "the coordinated gather beats the uncoordinated one under incast, more so for more "
          "nodes and longer messages (section 5.5, Fig. 5)"),
    Claim("001", "alltoall", "pairwise_exchange", "recv_all_xor_sends",
          "PlogP ranks Alltoall_B (receives first) always faster than Alltoall_A (pairwise, "
          "eq. 18-19); behind a bottleneck link PlogPT lets Alltoall_A win when B's last packet "
          "is lost and waits for a retransmission timeout (eq. 26-27)"),
)

#: Two times within this fraction of each other are a tie when a claim is checked.
TIE = 0.05


def _verdict(ratio: float) -> str:
    """``first``, ``second`` or ``tie`` for a time ratio first / second."""
    if ratio < 1 / (1 + TIE):
        return "first"
    if ratio > 1 + TIE:
        return "second"
    return "tie"


@dataclass(frozen=True)
class ClaimOutcome:
    """A claim at one size: the measured time ratio first / second, each predictor's, and whether
    the predictor names the same winner (or a tie, within :data:`TIE`)."""

    claim: Claim
    size: int
    measured: float
    predicted: dict[str, float]

    @property
    def winner(self) -> str:
        """The measured faster algorithm, or ``tie``."""
        return {"first": self.claim.first, "second": self.claim.second, "tie": "tie"}[_verdict(self.measured)]

    def agrees(self, predictor: str) -> bool | None:
        """Whether ``predictor`` names the measured winner (None where it prices neither case)."""
        r = self.predicted.get(predictor)
        return None if r is None else _verdict(r) == _verdict(self.measured)


def claim_outcomes(cases: Sequence[FidelityCase], claims: Sequence[Claim] = CLAIMS) -> list[ClaimOutcome]:
    """Every claim of ``claims`` at every size where both its algorithms were measured."""
    found = {(c.collective, c.algorithm, c.size): c for c in cases}
    out = []
    for claim in claims:
        for size in sorted({c.size for c in cases if c.collective == claim.collective}):
            a, b = found.get((claim.collective, claim.first, size)), found.get((claim.collective, claim.second, size))
            if a is None or b is None:
                continue
            predicted = {name: a.predicted[name] / b.predicted[name] for name in a.predicted
                         if b.predicted.get(name, 0) > 0}
            out.append(ClaimOutcome(claim, size, a.median / b.median, predicted))
    return out
