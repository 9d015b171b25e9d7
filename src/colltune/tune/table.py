"""The decision table: which algorithm to run for each (collective, P, message size), as data.

A table (format ``colltune-table``, version 1) holds, for each collective, blocks of process
counts; each block holds size rules that cover every message size from 0 up, each naming an
algorithm (a registry name or ``native``; in a table for a target library, ``library``, one of
that library's algorithms, :mod:`colltune.tune.targets`) with its parameters.  Sizes are the collective's block
size ``m`` in bytes (:mod:`colltune.collectives`), the same number the runtime API sees.  Every
block keeps the evidence it was decided from: the time of every candidate at every size the
tuner looked at, and, for each boundary, the two candidates whose crossover it is.

:func:`read_table` and :func:`write_table` read and write it (atomically); :meth:`DecisionTable.lookup`
is what ``algorithm="auto"`` asks.  Bad files raise one :class:`TableError` naming the file and
the field.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Literal

from pydantic import Field, model_validator

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES
from colltune.errors import ColltuneError
from colltune.files import parse_record, read_json, write_atomic
from colltune.models.params import ParamSet
from colltune.profiles.format import Provenance
from colltune.tune.native import NATIVE
from colltune.tune.promises import Promises

FORMAT = "colltune-table"
VERSION = 1
#: The environment variable that names the decision table ``algorithm="auto"`` (and ``colltune bench``) reads.
TABLE_ENV = "COLLTUNE_TABLE"

#: How a table's times were obtained.
Method = Literal["model", "simulate", "measure", "hybrid"]


class TableError(ColltuneError, ValueError):
    """A decision table that cannot be used; the message names the file and the field."""


class Candidate(ParamSet):
    """One candidate's time at one size: seconds (or the profile's abstract units)."""

    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    time: float = Field(ge=0, allow_inf_nan=False)


class Sample(ParamSet):
    """Every priced candidate at one process count and message size, fastest first; of predicted
    prices, the near-tie chosen by the lighter network load first (:mod:`colltune.tune.ties`)."""

    procs: int = Field(ge=1)
    size: int = Field(ge=0, description="block size in bytes")
    candidates: tuple[Candidate, ...]


class Rule(ParamSet):
    """Sizes ``size_min`` .. ``size_max`` bytes (inclusive; ``size_max`` null means no upper
    bound) run ``algorithm`` with ``params``."""

    size_min: int = Field(ge=0)
    size_max: int | None = Field(None, ge=0)
    algorithm: str
    params: dict[str, Any] = Field(default_factory=dict)
    crossover: tuple[str, str] | None = Field(
        None, description="the candidates (below, above) whose crossover, found by bisection, is size_min")

    def covers(self, size: int) -> bool:
        return self.size_min <= size and (self.size_max is None or size <= self.size_max)


class Block(ParamSet):
    """Process counts ``procs_min`` .. ``procs_max`` (inclusive), decided at ``tuned_at`` processes."""

    procs_min: int = Field(ge=1)
    procs_max: int = Field(ge=1)
    tuned_at: tuple[int, ...] = Field(description="the process counts the rules were decided at")
    rules: tuple[Rule, ...] = Field(min_length=1)
    samples: tuple[Sample, ...] = Field((), description="the evidence: candidates' times where the tuner looked")

    @model_validator(mode="after")
    def _ranges(self) -> Block:
        if self.procs_max < self.procs_min:
            raise ValueError(f"procs_max {self.procs_max} < procs_min {self.procs_min}")
        if self.rules[0].size_min != 0:
            raise ValueError(f"the first rule must start at size 0, not {self.rules[0].size_min}")
        for before, after in itertools.pairwise(self.rules):
            if before.size_max is None or after.size_min != before.size_max + 1:
                raise ValueError(f"rules must tile the sizes: one ends at {before.size_max}, "
                                 f"the next starts at {after.size_min}")
        if self.rules[-1].size_max is not None:
            raise ValueError("the last rule must have no upper bound (size_max null)")
        return self

    def rule(self, size: int) -> Rule:
        """The rule covering ``size`` bytes."""
        for r in self.rules:
            if r.covers(size):
                return r
        raise AssertionError("rules tile every size")  # guaranteed by the validator


class DecisionTable(ParamSet):
    """A decision table (format version 1)."""

    format: Literal["colltune-table"] = FORMAT
    version: Literal[1] = Field(VERSION, description="format version; this colltune reads version 1")
    method: Method
    model: str | None = Field(None, description="the analytic model (method model) or network model (simulate)")
    profile: str | None = Field(None, description="name of the profile the times come from")
    time_unit: Literal["s", "abstract"] = "s"
    native: str = Field("", description="what `native` stands for in the candidates' times")
    library: Literal["colltune", "mpich", "openmpi"] = Field(
        "colltune", description="whose algorithms the rules name: colltune's registry, or an MPI library's own "
                                "(colltune tune --library; such a table is for export, not for algorithm='auto')")
    promises: Promises = Field(
        default_factory=Promises,
        description="what the program promises that a rules file cannot see (colltune tune --commutative, "
                    "--uniform-scatter): an Open MPI rules file may then name the algorithms each makes safe")
    provenance: Provenance
    collectives: dict[str, tuple[Block, ...]]

    @model_validator(mode="before")
    @classmethod
    def _promise_of_before(cls, data: Any) -> Any:
        """A table written before the promises were grouped kept ``commutative`` at the top level."""
        if isinstance(data, dict) and "commutative" in data and "promises" not in data:
            data = {**data, "promises": {"commutative": data["commutative"]}}
            del data["commutative"]
        return data

    @model_validator(mode="after")
    def _known(self) -> DecisionTable:
        from colltune.tune.targets import check_params

        for coll, blocks in self.collectives.items():
            if coll not in COLLECTIVES:
                raise ValueError(f"unknown collective {coll!r}; valid: {', '.join(COLLECTIVES)}")
            for block in blocks:
                for rule in block.rules:
                    if rule.algorithm == NATIVE:
                        continue
                    if self.library != "colltune":
                        check_params(self.library, coll, rule.algorithm, rule.params)
                        continue
                    try:
                        REGISTRY.get(coll, rule.algorithm).validate_params(rule.params)
                    except ColltuneError as exc:
                        raise ValueError(str(exc)) from None
            for a, b in itertools.pairwise(blocks):
                if b.procs_min <= a.procs_max:
                    raise ValueError(f"{coll}: process-count blocks overlap or are out of order "
                                     f"({a.procs_min}-{a.procs_max}, then {b.procs_min}-{b.procs_max})")
        return self

    def block(self, collective: str, procs: int) -> Block | None:
        """The block of ``collective`` covering ``procs`` processes, or None."""
        for b in self.collectives.get(collective, ()):
            if b.procs_min <= procs <= b.procs_max:
                return b
        return None

    def lookup(self, collective: str, procs: int, size: int) -> tuple[str, dict[str, Any]]:
        """``(algorithm, params)`` for a call of ``collective`` on ``procs`` processes with ``size``
        bytes per block; ``("native", {})`` where the table has no entry."""
        b = self.block(collective, procs)
        if b is None:
            return NATIVE, {}
        r = b.rule(size)
        return r.algorithm, dict(r.params)

    def to_json(self) -> str:
        return self.model_dump_json(indent=1) + "\n"


def fixed_table(choices: dict[str, tuple[str, dict[str, Any]]], source: str,
                procs: tuple[int, int] = (1, 1 << 20), library: str = "colltune") -> DecisionTable:
    """A table that runs each collective of ``choices`` (collective -> (algorithm, parameters))
    with that algorithm at every size, for ``procs`` (first, last) process counts: what
    benchmarks and tests write to force an algorithm (of colltune, or of ``library``).
    ``source`` is its provenance."""
    first, last = procs
    return DecisionTable(method="model", profile=None, provenance=Provenance(source=source), library=library,
                         collectives={
        coll: (Block(procs_min=first, procs_max=last, tuned_at=(first,),
                     rules=(Rule(size_min=0, algorithm=alg, params=dict(params)),)),)
        for coll, (alg, params) in choices.items()})


def parse_table(data: Any, origin: str) -> DecisionTable:
    """A :class:`DecisionTable` from decoded JSON; ``origin`` (a file name) starts every error."""
    return parse_record(DecisionTable, data, origin, FORMAT, VERSION, TableError)


def read_table(path: str | os.PathLike[str]) -> DecisionTable:
    """Read and validate the decision table at ``path``."""
    return parse_table(read_json(path, "decision table", TableError), str(path))


def write_table(table: DecisionTable, path: str | os.PathLike[str]) -> None:
    """Write ``table`` to ``path`` atomically."""
    write_atomic(path, table.to_json())
