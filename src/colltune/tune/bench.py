"""Benchmark results: a decision table's choices and ``native``, timed over a grid of sizes.

``colltune bench`` runs under mpiexec (the timing is :func:`colltune.tune.measure.bench`).  For
each collective it times, at the job's process count P and at every size of a grid, ``native``
and each algorithm the decision table chooses anywhere in its block for P.  Each algorithm is one
curve across the sizes: at a size whose rule chooses it, it runs with that rule's parameters;
elsewhere with the parameters of its nearest rule (the closest size range that chooses it).  The
points the table chooses are marked ``chosen``; they are what ``algorithm="auto"`` runs, so
comparing them with ``native`` at the same size shows what the table gains.  With a profile, a
prediction (analytic model or simulation) sits beside every measured time.

The results file (format ``colltune-bench``, version 1) keeps times in seconds and carries its
provenance; :func:`read_bench` and :func:`write_bench` read and write it (atomically), and bad
files raise one :class:`BenchError` naming the file and the field.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from colltune.algorithms import REGISTRY
from colltune.collectives import get_collective
from colltune.errors import ColltuneError
from colltune.files import parse_record, read_json, write_atomic
from colltune.models import Unavailable
from colltune.models.params import ParamSet
from colltune.profiles.format import Provenance
from colltune.tune.select import Pricer
from colltune.tune.table import NATIVE, DecisionTable, Rule

FORMAT = "colltune-bench"
VERSION = 1


class BenchError(ColltuneError, ValueError):
    """A benchmark results file that cannot be used; the message names the file and the field."""


class BenchPoint(ParamSet):
    """One algorithm timed at one size: the slowest rank's time per repetition, summarised (seconds)."""

    size: int = Field(ge=0, description="block size in bytes")
    params: dict[str, Any] = Field(default_factory=dict, description="the algorithm's parameters at this size")
    chosen: bool = Field(description="the decision table runs this algorithm, with these parameters, at this size")
    median: float = Field(ge=0, allow_inf_nan=False)
    q1: float = Field(ge=0, allow_inf_nan=False, description="first quartile")
    q3: float = Field(ge=0, allow_inf_nan=False, description="third quartile")
    reps: int = Field(ge=1, description="timed repetitions")
    predicted: float | None = Field(None, ge=0, allow_inf_nan=False,
                                    description="the predictor's time (seconds); null where it has none")

    @model_validator(mode="after")
    def _ordered(self) -> BenchPoint:
        if not self.q1 <= self.median <= self.q3:
            raise ValueError(f"quartiles out of order: q1 {self.q1}, median {self.median}, q3 {self.q3}")
        return self


class BenchSeries(ParamSet):
    """One algorithm (a registry name or ``native``) across the sizes, ascending."""

    algorithm: str
    points: tuple[BenchPoint, ...]


class Predictor(ParamSet):
    """Where the predicted times come from: ``colltune tune``'s pricers on a profile."""

    method: Literal["model", "simulate"]
    model: str = Field(description="the analytic model (method model) or network model (simulate)")
    profile: str = Field(description="the profile, as given (a file or builtin:NAME)")


class BenchResults(ParamSet):
    """A benchmark run (format version 1)."""

    format: Literal["colltune-bench"] = FORMAT
    version: Literal[1] = Field(VERSION, description="format version; this colltune reads version 1")
    procs: int = Field(ge=1, description="P of the measuring job")
    reps: int = Field(ge=1)
    warmup: int = Field(ge=0)
    table: str = Field(description="the decision table benchmarked, as given")
    table_source: str = Field(description="the table's own provenance source")
    predictor: Predictor | None = None
    provenance: Provenance
    collectives: dict[str, tuple[BenchSeries, ...]]

    @field_validator("collectives")
    @classmethod
    def _one_choice(cls, collectives: dict[str, tuple[BenchSeries, ...]]) -> dict[str, tuple[BenchSeries, ...]]:
        for coll, series in collectives.items():
            get_collective(coll)
            for s in series:
                if s.algorithm != NATIVE:
                    try:
                        REGISTRY.get(coll, s.algorithm)
                    except ColltuneError as exc:
                        raise ValueError(str(exc)) from None
                if any(b.size <= a.size for a, b in itertools.pairwise(s.points)):
                    raise ValueError(f"{coll}/{s.algorithm}: sizes must ascend")
            sizes = sorted({p.size for s in series for p in s.points})
            if [p.size for s in series if s.algorithm == NATIVE for p in s.points] != sizes:
                raise ValueError(f"{coll}: native must be timed at every size, once")
            chosen = Counter(p.size for s in series for p in s.points if p.chosen)
            for size in sizes:
                if chosen[size] != 1:
                    raise ValueError(f"{coll}: size {size} has {chosen[size]} chosen points; "
                                     f"every size needs exactly one")
        return collectives

    def chosen(self, collective: str) -> list[tuple[str, BenchPoint]]:
        """``(algorithm, point)`` of the table's choice at each size of ``collective``, ascending."""
        found = [(s.algorithm, p) for s in self.collectives[collective] for p in s.points if p.chosen]
        return sorted(found, key=lambda ap: ap[1].size)

    def native(self, collective: str) -> dict[int, BenchPoint]:
        """``native``'s point at each size of ``collective``."""
        return {p.size: p for s in self.collectives[collective] if s.algorithm == NATIVE for p in s.points}

    def summary(self, collective: str) -> Summary:
        """How the table's choices of ``collective`` did against ``native`` and the predictions."""
        native = self.native(collective)
        gains = [(native[p.size].median / p.median, p.size, a) for a, p in self.chosen(collective)
                 if p.median > 0 and native[p.size].median > 0]
        ratios = [p.predicted / p.median for s in self.collectives[collective] for p in s.points
                  if p.predicted is not None and p.median > 0]
        return Summary(sizes=len(native),
                       speedup=statistics.geometric_mean([g for g, _, _ in gains]) if gains else None,
                       worst=min(gains) if gains else None,
                       prediction=statistics.median(ratios) if ratios else None)

    def to_json(self) -> str:
        return self.model_dump_json(indent=1) + "\n"


@dataclass(frozen=True)
class Summary:
    """One collective of a benchmark at a glance.

    ``speedup``: the geometric mean over sizes of native's median time over the table's choice's
    (above 1: the choices are faster); ``worst``: the lowest of those ratios with its size and
    algorithm; ``prediction``: the median of predicted over measured time over every point with a
    prediction.  Each is None where there is nothing to compute it from."""

    sizes: int
    speedup: float | None
    worst: tuple[float, int, str] | None
    prediction: float | None


@dataclass(frozen=True)
class Run:
    """One measurement to make: ``algorithm`` with ``params`` at ``size`` bytes."""

    algorithm: str
    size: int
    params: dict[str, Any]
    chosen: bool


def _distance(rule: Rule, size: int) -> int:
    """Bytes between ``size`` and the sizes ``rule`` covers (0 inside)."""
    if size < rule.size_min:
        return rule.size_min - size
    return 0 if rule.size_max is None or size <= rule.size_max else size - rule.size_max


def bench_runs(table: DecisionTable, collective: str, procs: int, sizes: Sequence[int]) -> list[Run]:
    """What to time for ``collective`` at ``procs`` processes: at each of ``sizes`` (only 0 for a
    barrier), ``native`` and every algorithm the table chooses in its block for ``procs``,
    each with the parameters of its rule there or of its nearest rule.  Ordered by size, so
    that the algorithms at one size are timed close together."""
    block = table.block(collective, procs)
    rules = block.rules if block is not None else (Rule(size_min=0, algorithm=NATIVE),)
    names = list(dict.fromkeys([NATIVE, *(r.algorithm for r in rules)]))
    grid = [0] if get_collective(collective).synchronizes else sorted(set(sizes))
    runs = []
    for size in grid:
        here = next(r for r in rules if r.covers(size))
        for name in names:
            if name == here.algorithm:
                runs.append(Run(name, size, dict(here.params), True))
            elif name == NATIVE:
                runs.append(Run(name, size, {}, False))
            else:
                near = min((r for r in rules if r.algorithm == name), key=lambda r: _distance(r, size))
                runs.append(Run(name, size, dict(near.params), False))
    return runs


def predicted(pricer: Pricer | None, collective: str, procs: int, run: Run) -> float | None:
    """The pricer's time for ``run`` (seconds), or None without a pricer or where it has none."""
    if pricer is None:
        return None
    try:
        t, _ = pricer.price(collective, run.algorithm, procs, run.size, run.params)
    except Unavailable:
        return None
    return t if math.isfinite(t) else None


def parse_bench(data: Any, origin: str) -> BenchResults:
    """:class:`BenchResults` from decoded JSON; ``origin`` (a file name) starts every error."""
    return parse_record(BenchResults, data, origin, FORMAT, VERSION, BenchError)


def read_bench(path: str | os.PathLike[str]) -> BenchResults:
    """Read and validate the benchmark results at ``path``."""
    return parse_bench(read_json(path, "benchmark results", BenchError), str(path))


def write_bench(results: BenchResults, path: str | os.PathLike[str]) -> None:
    """Write ``results`` to ``path`` atomically."""
    write_atomic(path, results.to_json())
