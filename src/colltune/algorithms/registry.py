"""The algorithm registry: one decorator, one place, everything generated from it.

An algorithm registers once by ``(collective, name)`` with its typed
parameters, constraints, the paper and equation it comes from, and a docstring
that describes its rounds.  The CLI choices, ``colltune algorithms``, the
documentation table (``docs/algorithms.md``) and the test parametrisation all
read this registry; there is no second list.

A builder is a pure function ``(builder, problem, **params) -> None`` that adds
the schedule's operations to a :class:`~colltune.schedule.ScheduleBuilder`; it
imports no MPI and does no I/O.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import pydantic

from colltune.collectives import COLLECTIVES, Problem, get_collective
from colltune.errors import ParameterError, ScheduleError, UnknownAlgorithmError
from colltune.limits import MAX_BYTES, MAX_OPS, MAX_PROCS
from colltune.schedule import Schedule, ScheduleBuilder

Builder = Callable[..., None]

ANY_SHAPE = "any P >= 1, any root, any size >= 0"
#: Above this many ranks a schedule's op count is first extrapolated (:meth:`Algorithm._check_growth`):
#: up to it even the direct all-to-all fits :data:`~colltune.limits.MAX_OPS`.
GROWTH_ABOVE = 4096
#: The process count the extrapolation builds at, and half of it: milliseconds to build.
GROWTH_FROM = 256
#: How far past :data:`~colltune.limits.MAX_OPS` an extrapolation must land before it refuses: the
#: power law is an estimate, and a schedule just past the limit is left to the builder's count.
GROWTH_MARGIN = 4


@dataclass(frozen=True)
class Param:
    """A typed algorithm parameter with a default and, optionally, a minimum.

    A whole-number parameter also has a maximum: :data:`~colltune.limits.MAX_BYTES` when its unit
    is bytes, else :data:`~colltune.limits.MAX_PROCS` (the others count ranks, children or
    requests, none of which can usefully exceed the largest P); and it takes no booleans."""

    name: str
    type: type
    default: Any
    doc: str
    minimum: int | float | None = None
    unit: str = ""
    #: For a level of a hierarchical algorithm: the collective whose registered algorithm it names.
    level: str | None = None

    @property
    def maximum(self) -> int | None:
        """The largest value a whole-number parameter takes (None for other types)."""
        if self.type is not int:
            return None
        return MAX_BYTES if self.unit == "bytes" else MAX_PROCS

    def field(self) -> tuple[Any, Any]:
        """The pydantic field (type, default) that checks this parameter."""
        kind: Any = self.type
        if self.type is int:
            kind = Annotated[int, pydantic.BeforeValidator(_no_bool)]
        return kind, pydantic.Field(self.default, ge=self.minimum, le=self.maximum, description=self.doc)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.__name__, "default": self.default, "minimum": self.minimum,
                "maximum": self.maximum, "unit": self.unit, "doc": self.doc}


def _no_bool(value: Any) -> Any:
    """Reject ``true``/``false`` where a number is meant (pydantic would take them as 1 and 0)."""
    if isinstance(value, bool):
        raise ValueError("a whole number is meant, not a boolean")
    return value


@dataclass(frozen=True)
class Algorithm:
    """A registered algorithm: metadata plus its schedule builder."""

    collective: str
    name: str
    doc: str
    source: str
    params: tuple[Param, ...]
    constraints: str
    aliases: tuple[str, ...]
    builder: Builder = field(repr=False)
    model: type[pydantic.BaseModel] = field(repr=False)
    needs_commutative: bool = False
    #: Reads the problem's hosts (:mod:`colltune.algorithms.hierarchical`): its levels name other
    #: algorithms, and it differs from a flat algorithm only where some host has several ranks.
    hierarchical: bool = False

    @property
    def summary(self) -> str:
        """The first sentence of the docstring."""
        return self.doc.strip().split("\n\n")[0].replace("\n", " ")

    def validate_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Typed, checked parameters with defaults filled in (strings from the CLI are converted).

        Raises :class:`ParameterError` naming the algorithm, the parameter and the value.
        """
        try:
            return self.model(**params).model_dump()
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            pname = ".".join(str(x) for x in err["loc"]) or "?"
            valid = ", ".join(p.name for p in self.params) or "none"
            if err["type"] == "extra_forbidden":
                raise ParameterError(f"{self.collective}/{self.name}: unknown parameter {pname!r}; "
                                     f"valid parameters: {valid}") from None
            raise ParameterError(f"{self.collective}/{self.name}: parameter {pname}={err.get('input')}: "
                                 f"{err['msg']}") from None

    def schedule(self, procs: int, root: int = 0, size: int = 0, *, op: str | None = None, dtype: str | None = None,
                 commutative: bool = True, hosts: tuple[int, ...] | None = None, **params: Any) -> Schedule:
        """Build the schedule for ``procs`` ranks, ``root`` and ``size`` bytes (per block; see
        :mod:`colltune.collectives`); reductions also take ``op``, ``dtype`` and ``commutative``;
        ``hosts`` labels each rank's host (:class:`~colltune.collectives.Problem`)."""
        problem = Problem(self.collective, procs, root, size, op=op, dtype=dtype, commutative=commutative,
                          hosts=hosts)
        return self.schedule_for(problem, **params)

    def schedule_for(self, problem: Problem, **params: Any) -> Schedule:
        """Build the schedule of ``problem`` (whose collective must be this algorithm's)."""
        if problem.collective != self.collective:
            raise ParameterError(f"{self.collective}/{self.name} cannot build a {problem.collective} schedule")
        if self.needs_commutative and not problem.commutative:
            raise ParameterError(f"{self.collective}/{self.name} needs a commutative operation; for a "
                                 f"non-commutative one use an order-preserving algorithm")
        values = self.validate_params(params)
        self._check_growth(problem, values)
        send_bytes, recv_bytes = get_collective(self.collective).buffers(problem)
        b = ScheduleBuilder(problem.procs, send_bytes, recv_bytes)
        self.builder(b, problem, **values)
        meta = {"collective": self.collective, "algorithm": self.name, "procs": problem.procs, "root": problem.root,
                "size": problem.size, "params": values}
        if problem.op is not None:
            meta.update(op=problem.op, dtype=problem.dtype, commutative=problem.commutative)
        if problem.hosts is not None:
            meta["hosts"] = list(problem.hosts)
        return b.build(meta)

    def _check_growth(self, problem: Problem, values: dict[str, Any]) -> None:
        """Refuse at once, instead of after minutes of building, a schedule that would grow past
        :data:`~colltune.limits.MAX_OPS`: where segments of ``segment_size`` bytes each reach the
        P - 1 other ranks (a lower bound for every segmented algorithm), and, above
        :data:`GROWTH_ABOVE` ranks, where the op count at :data:`GROWTH_FROM` / 2 and
        :data:`GROWTH_FROM` ranks, extrapolated as a power of P, exceeds the limit
        :data:`GROWTH_MARGIN` times over (the builder's own count catches the rest)."""
        P = problem.procs
        segment = values.get("segment_size") or 0
        if segment > 0 and problem.size > 0 and -(-problem.size // segment) * (P - 1) > MAX_OPS:
            raise ScheduleError(f"{self.collective}/{self.name}: {problem.size} B in segments of {segment} B "
                                f"over {P} ranks needs more than {MAX_OPS} ops, the most colltune builds "
                                f"(choose a larger segment_size)")
        if P <= GROWTH_ABOVE or problem.hosts is not None:
            return
        small, large = (len(self.schedule_for(replace(problem, procs=n, root=0), **values))
                        for n in (GROWTH_FROM // 2, GROWTH_FROM))
        power = math.log2(max(large, 1) / max(small, 1))
        estimate = large * (P / GROWTH_FROM) ** power
        if estimate > GROWTH_MARGIN * MAX_OPS:
            raise ScheduleError(f"{self.collective}/{self.name} over {P} ranks: about {estimate:.3g} ops "
                                f"(from {small} at {GROWTH_FROM // 2} ranks and {large} at {GROWTH_FROM}), past "
                                f"{MAX_OPS}, the most colltune builds (choose fewer ranks, or an algorithm with "
                                f"fewer messages)")

    def as_dict(self) -> dict[str, Any]:
        return {"collective": self.collective, "name": self.name, "summary": self.summary, "doc": self.doc.strip(),
                "source": self.source, "constraints": self.constraints, "aliases": list(self.aliases),
                "needs_commutative": self.needs_commutative, "params": [p.as_dict() for p in self.params]}


class Registry:
    """Algorithms by ``(collective, name)``."""

    def __init__(self) -> None:
        self._algs: dict[tuple[str, str], Algorithm] = {}
        self._aliases: dict[tuple[str, str], str] = {}

    def register(self, collective: str, name: str, *, source: str, params: tuple[Param, ...] = (),
                 constraints: str = ANY_SHAPE, doc: str | None = None, aliases: tuple[str, ...] = (),
                 needs_commutative: bool = False, hierarchical: bool = False) -> Callable[[Builder], Builder]:
        """Decorator: register ``builder`` as ``collective``/``name``.

        ``doc`` overrides the builder's docstring (for one builder registered
        under several names with different parameters); ``aliases`` are short
        names that :meth:`get` also accepts; ``needs_commutative`` marks a
        reduction that combines contributions out of rank order (the others are
        verified to keep the order, so they serve non-commutative operations); ``hierarchical``
        marks a composition of levels over the problem's hosts.
        """
        get_collective(collective)

        def deco(builder: Builder) -> Builder:
            key = (collective, name)
            for n in (name, *aliases):
                if (collective, n) in self._algs or (collective, n) in self._aliases:
                    raise ValueError(f"algorithm name {collective}/{n} registered twice")
            text = inspect.cleandoc(doc or builder.__doc__ or "")
            if not text:
                raise ValueError(f"algorithm {collective}/{name} has no docstring")
            fields: dict[str, Any] = {p.name: p.field() for p in params}
            model = pydantic.create_model(  # type: ignore[call-overload]
                f"{collective}_{name}_params", __config__=pydantic.ConfigDict(extra="forbid", strict=False),
                **fields)
            if needs_commutative and not get_collective(collective).reduces:
                raise ValueError(f"{collective}/{name}: only reductions can need a commutative operation")
            self._algs[key] = Algorithm(collective, name, text, source, tuple(params), constraints, tuple(aliases),
                                        builder, model, needs_commutative, hierarchical)
            for alias in aliases:
                self._aliases[(collective, alias)] = name
            return builder

        return deco

    def get(self, collective: str, name: str) -> Algorithm:
        """The algorithm ``collective``/``name``; an unknown name lists the valid ones."""
        get_collective(collective)
        try:
            return self._algs[(collective, self._aliases.get((collective, name), name))]
        except KeyError:
            valid = ", ".join(self.names(collective))
            raise UnknownAlgorithmError(
                f"unknown {collective} algorithm {name!r}; valid: {valid}") from None

    def names(self, collective: str | None = None, aliases: bool = False) -> list[str]:
        """Names registered for ``collective`` (default: every collective), in registration order,
        followed by their aliases if ``aliases``."""
        names = [n for (c, n) in self._algs if collective in (None, c)]
        if aliases:
            names += [a for (c, a) in self._aliases if collective in (None, c)]
        return list(dict.fromkeys(names))

    def __iter__(self) -> Iterator[Algorithm]:
        """Algorithms grouped by collective (in the order of :data:`~colltune.collectives.COLLECTIVES`),
        each group in registration order."""
        order = {c: i for i, c in enumerate(COLLECTIVES)}
        return iter(sorted(self._algs.values(), key=lambda a: order[a.collective]))

    def select(self, collective: str | None = None) -> list[Algorithm]:
        """All algorithms, or those of one collective."""
        if collective is not None:
            get_collective(collective)
        return [a for a in self if collective is None or a.collective == collective]


#: The one registry of colltune's algorithms.
REGISTRY = Registry()
register = REGISTRY.register
