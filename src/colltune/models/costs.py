"""Cost formulas by (collective, algorithm, model), and prediction from them.

A formula registers once with :func:`formula`, naming the registry algorithm(s) it prices, the
model whose parameters it reads, and the paper and equation it comes from.  A formula is a pure
function ``(params, case) -> seconds``; it raises :class:`Unavailable` where its source does not
cover the case (a process count the derivation excludes, a missing parameter).  A pair with no
formula is unavailable too: colltune never prices an algorithm with another algorithm's or
another model's formula.

Segmented algorithms (a ``segment_size`` parameter) get their segment size from the model when
the caller does not give one: :func:`best_segment` tries s = m/2^i, then climbs locally
(paper 003 section 3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from colltune.algorithms.registry import REGISTRY
from colltune.collectives import Problem
from colltune.errors import ColltuneError, Unavailable
from colltune.models.params import MODELS, ParamSet


@dataclass(frozen=True)
class Case:
    """What a formula prices: ``procs`` ranks, ``size`` bytes per block, the algorithm's
    parameters (defaults filled in) and, for reductions, the problem's op and dtype."""

    procs: int
    size: int
    root: int = 0
    params: dict[str, Any] = field(default_factory=dict)

    def segments(self) -> tuple[int, int]:
        """``(s, k)``: the segment size in bytes (at most ``size``) and the number of segments;
        ``(size, 1)`` for an algorithm without a ``segment_size`` parameter."""
        if "segment_size" not in self.params:
            return self.size, 1
        s = min(int(self.params["segment_size"]), self.size)
        return s, -(-self.size // s)


Fn = Callable[[Any, Case], float]


@dataclass(frozen=True)
class Formula:
    """A cost formula: which algorithm, which model, where it comes from."""

    collective: str
    algorithm: str
    model: str
    source: str
    fn: Fn = field(repr=False)
    segmented: bool = False

    def __call__(self, params: ParamSet, case: Case) -> float:
        return float(self.fn(params, case))


_FORMULAS: dict[tuple[str, str, str], Formula] = {}


def formula(collective: str, algorithms: str | tuple[str, ...], model: str, source: str,
            segmented: bool = False) -> Callable[[Fn], Fn]:
    """Decorator: register ``fn`` as the cost of ``collective``/each of ``algorithms`` under ``model``.

    ``segmented`` marks a formula that depends on the algorithm's ``segment_size`` (read with
    :meth:`Case.segments`); :func:`predict` then searches the best one.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}")
    names = (algorithms,) if isinstance(algorithms, str) else algorithms

    def deco(fn: Fn) -> Fn:
        for name in names:
            key = (collective, name, model)
            if key in _FORMULAS:
                raise ValueError(f"two formulas for {collective}/{name} under {model}")
            _FORMULAS[key] = Formula(collective, name, model, source, fn, segmented)
        return fn

    return deco


def formulas(collective: str | None = None, model: str | None = None) -> list[Formula]:
    """Registered formulas, optionally of one collective and/or one model, in registration order."""
    return [f for f in _FORMULAS.values() if collective in (None, f.collective) and model in (None, f.model)]


def get_formula(collective: str, algorithm: str, model: str) -> Formula:
    """The formula of ``collective``/``algorithm`` (aliases allowed) under ``model``, or :class:`Unavailable`."""
    name = REGISTRY.get(collective, algorithm).name
    try:
        f = _FORMULAS[(collective, name, model)]
    except KeyError:
        have = sorted(m for (c, a, m) in _FORMULAS if (c, a) == (collective, name))
        raise Unavailable(f"no {model} formula for {collective}/{name}"
                          + (f"; models with one: {', '.join(have)}" if have else "; no model has one")) from None
    segmented = f.segmented and any(p.name == "segment_size" for p in REGISTRY.get(collective, name).params)
    return Formula(f.collective, f.algorithm, f.model, f.source, f.fn, segmented)


@dataclass(frozen=True)
class Prediction:
    """A predicted time (seconds, or the profile's abstract units) and how it was obtained."""

    collective: str
    algorithm: str
    model: str
    procs: int
    size: int
    time: float
    params: dict[str, Any]
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "algorithm": self.algorithm, "model": self.model,
                "procs": self.procs, "size": self.size, "time": self.time, "params": self.params,
                "source": self.source}


def _evaluate(f: Formula, params: ParamSet, case: Case) -> float:
    if case.procs == 1 or (case.size == 0 and f.collective != "barrier"):
        return 0.0  # nothing moves: every schedule is empty then (tests/test_models.py checks)
    try:
        t = f(params, case)
    except OverflowError:
        t = math.inf
    if not math.isfinite(t):
        raise ColltuneError(f"{f.collective}/{f.algorithm} on {f.model}: the predicted time of {case.size} B over "
                            f"{case.procs} ranks overflows ({t}); the model's parameters are too large")
    return t


def predict(params: ParamSet, model: str, collective: str, algorithm: str, procs: int, size: int, root: int = 0,
            **algparams: Any) -> Prediction:
    """Predict the time of one collective call from ``model``'s formula for the algorithm.

    ``algparams`` are the algorithm's parameters (checked against the registry); a segmented
    algorithm whose ``segment_size`` is not given gets the model's best one (:func:`best_segment`).
    Raises :class:`Unavailable` where no formula applies.
    """
    if not isinstance(params, MODELS[model]):
        raise ColltuneError(f"model {model} needs {MODELS[model].__name__} parameters, got {type(params).__name__}")
    Problem(collective, procs, root, size)  # validates P, root and size
    alg = REGISTRY.get(collective, algorithm)
    f = get_formula(collective, alg.name, model)
    values = alg.validate_params(algparams)
    case = Case(procs, size, root, values)
    if f.segmented and "segment_size" not in algparams and size > 0:
        s, t = best_segment(lambda c: _evaluate(f, params, c), case)
        values = {**values, "segment_size": s}
    else:
        t = _evaluate(f, params, case)
    return Prediction(collective, alg.name, model, procs, size, t, values, f.source)


def predict_all(params: ParamSet, model: str, collective: str, procs: int, size: int, root: int = 0,
                ) -> tuple[list[Prediction], dict[str, str]]:
    """Every algorithm of ``collective`` that ``model`` prices, fastest first, and why each other
    algorithm is unavailable (name -> reason)."""
    done: list[Prediction] = []
    missing: dict[str, str] = {}
    for alg in REGISTRY.select(collective):
        try:
            done.append(predict(params, model, collective, alg.name, procs, size, root))
        except Unavailable as exc:
            missing[alg.name] = str(exc)
    done.sort(key=lambda p: (p.time, p.algorithm))
    return done, missing


def best_segment(cost: Callable[[Case], float], case: Case) -> tuple[int, float]:
    """The segment size (bytes) that minimises ``cost``, and that cost (paper 003 section 3).

    Tries s = m / 2^i for i = 0 .. floor(log2 m), then climbs from the best in steps of a quarter
    of it, halving the step whenever neither direction improves, down to one byte.
    Candidates for which the formula is unavailable are skipped; if all are, :class:`Unavailable`.
    """
    m = case.size

    def at(s: int) -> float:
        try:
            return cost(Case(case.procs, m, case.root, {**case.params, "segment_size": s}))
        except Unavailable:
            return math.inf

    tried: dict[int, float] = {}
    for i in range(m.bit_length()):
        s = max(1, m >> i)
        tried.setdefault(s, at(s))
    best = min(tried, key=lambda s: (tried[s], -s))
    if math.isinf(tried[best]):
        raise Unavailable(f"no segment size of 1..{m} bytes has a formula here")
    step = max(1, best // 4)
    while step >= 1:
        moved = False
        for s in (best - step, best + step):
            if 1 <= s <= m:
                if s not in tried:
                    tried[s] = at(s)
                if tried[s] < tried[best]:
                    best, moved = s, True
        if not moved:
            step //= 2
    return best, tried[best]
