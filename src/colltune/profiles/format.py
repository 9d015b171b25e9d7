"""The profile file: a versioned JSON record of a network's model parameters and their provenance.

A profile holds one parameter set per model it knows (``models.hockney``, ``models.plogp``, ...;
see :mod:`colltune.models.params`), the model to predict with by default, the unit of its times
(``"s"``, or ``"abstract"`` for the papers' worked examples) and where the numbers come from.
[probe] writes this format; :func:`profile_schema` gives its JSON Schema
(``docs/profile.schema.json``).  Reading a bad file raises one :class:`ProfileError` naming the
file, the field and what is wrong.
"""

from __future__ import annotations

import json
import os
import typing
from typing import Any, Literal

import pydantic
from pydantic import Field, model_validator

from colltune.errors import ColltuneError
from colltune.files import describe, parse_record, read_json, write_atomic
from colltune.models.params import (
    MODELS,
    ClusterModel,
    Hockney,
    LatencyMatrix,
    LogGP,
    LogP,
    ModelName,
    ParamSet,
    PLogP,
    PlogPT,
    Postal,
    Tabulated,
)
from colltune.sim.network import NETWORKS
from colltune.sim.topology import Topology

FORMAT = "colltune-profile"
VERSION = 1


class ProfileError(ColltuneError, ValueError):
    """A profile (file, built-in name or ``--set`` override) that cannot be used; the message
    names the file, the field and what is wrong."""


class Provenance(ParamSet):
    """Where a profile's numbers come from."""

    source: str = Field(description="a paper and table, or the measurement that produced the profile")
    date: str | None = Field(None, description="when it was measured or transcribed (ISO 8601)")
    colltune_version: str | None = None
    mpi_library: str | None = Field(None, description="MPI library and version that measured it")
    hosts: tuple[str, ...] | None = Field(None, description="the hosts, in rank order")
    procs: int | None = Field(None, ge=1, description="P of the measuring job")
    notes: tuple[str, ...] = Field((), description="derivations and assumptions, one per entry")

    @pydantic.field_validator("mpi_library")
    @classmethod
    def _without_nul(cls, value: str | None) -> str | None:
        """``MPI_Get_library_version``'s text without the NUL that Open MPI 5 leaves at its end."""
        return None if value is None else value.replace("\0", "").strip()


class Spread(ParamSet):
    """Repeated measurements of one quantity at one point, after outlier rejection (see
    :func:`colltune.probe.stats.summarise`), in the unit of their :class:`Series`."""

    median: float = Field(allow_inf_nan=False)
    q1: float = Field(allow_inf_nan=False, description="first quartile")
    q3: float = Field(allow_inf_nan=False, description="third quartile")
    reps: int = Field(ge=0, description="samples kept")
    rejected: int = Field(0, ge=0, description="samples rejected as outliers")

    @property
    def iqr(self) -> float:
        """The interquartile range q3 - q1."""
        return self.q3 - self.q1


class Series(ParamSet):
    """One measured quantity at several points ``x`` (sizes in bytes, heights, process counts...)."""

    unit: str = Field(description="unit of the values: s, B/s, ...")
    x_name: str = Field(description="what x is: bytes, height, procs, pair, ...")
    x: tuple[float, ...]
    points: tuple[Spread, ...]
    method: str = Field("", description="how it was measured")

    @model_validator(mode="after")
    def _same_length(self) -> Series:
        if len(self.x) != len(self.points):
            raise ValueError(f"x has {len(self.x)} entries but points has {len(self.points)}")
        return self

    @property
    def medians(self) -> list[float]:
        return [p.median for p in self.points]


class Fit(ParamSet):
    """How well a model's fitted parameters reproduce the measurements they came from."""

    data: tuple[str, ...] = Field(description="the measurement series fitted")
    method: str = Field(description="the fit: least squares, a closed form, ...")
    residuals: tuple[float, ...] = Field(description="measured minus fitted, per point, in the data's unit")
    rms: float = Field(ge=0, allow_inf_nan=False, description="root mean square of the residuals")


class Models(ParamSet):
    """One optional parameter set per model."""

    hockney: Hockney | None = None
    postal: Postal | None = None
    logp: LogP | None = None
    loggp: LogGP | None = None
    plogp: PLogP | None = None
    cluster: ClusterModel | None = None
    plogpt: PlogPT | None = None
    latency: LatencyMatrix | None = None

    def present(self) -> list[str]:
        """The names of the models this profile has parameters for."""
        return [name for name in MODELS if getattr(self, name) is not None]


class Profile(ParamSet):
    """A network profile (format version 1)."""

    format: Literal["colltune-profile"] = FORMAT
    version: Literal[1] = Field(VERSION, description="format version; this colltune reads version 1")
    name: str = Field(min_length=1)
    description: str = ""
    time_unit: Literal["s", "abstract"] = Field("s", description="unit of every time in the profile and of "
                                                                  "the predictions made from it")
    default_model: ModelName = Field(description="the model `colltune predict` uses without --model")
    default_network: str | None = Field(None, description="the simulator's network model `colltune simulate` "
                                                         "and `tune` use without --model, priced from a model of "
                                                         "this profile; `colltune probe` chooses the one that "
                                                         "predicts its own check of collectives best. Without "
                                                         "it: the first one priced from default_model")
    topology: Topology | None = Field(None, description="the network the profile was measured on, if its user "
                                                          "gave it (`colltune probe --topology`): `simulate` and "
                                                          "`tune` carry the endpoint models over it unless told "
                                                          "otherwise, rank r on its host r")
    provenance: Provenance
    models: Models
    measurements: dict[str, Series] = Field(default_factory=dict,
                                            description="what a probe measured, with its spread, by name")
    fits: dict[str, Fit] = Field(default_factory=dict, description="residuals of each fitted model, by model name")

    @model_validator(mode="after")
    def _default_present(self) -> Profile:
        if getattr(self.models, self.default_model) is None:
            raise ValueError(f"default_model {self.default_model!r} has no parameters in models "
                             f"(present: {', '.join(self.models.present()) or 'none'})")
        if self.default_network is not None:
            net = NETWORKS.get(self.default_network)
            if net is None:
                raise ValueError(f"default_network {self.default_network!r} is not a network model; "
                                 f"valid: {', '.join(NETWORKS)}")
            if getattr(self.models, net.params, None) is None:
                raise ValueError(f"default_network {self.default_network!r} needs the profile's {net.params} "
                                 f"parameters, which it has not")
        return self

    def params(self, model: str) -> ParamSet:
        """The parameter set of ``model``, or :class:`ProfileError` if the profile has none."""
        if model not in MODELS:
            raise ProfileError(f"unknown model {model!r}; valid: {', '.join(MODELS)}")
        found = getattr(self.models, model)
        if found is None:
            raise ProfileError(f"profile {self.name!r} has no {model} parameters "
                               f"(it has: {', '.join(self.models.present())}); give them with --set NAME=VALUE")
        return found

    def to_json(self) -> str:
        """The profile as JSON text (fields by their file names, e.g. ``or``)."""
        return self.model_dump_json(by_alias=True, indent=2, exclude_none=True) + "\n"


def parse_profile(data: Any, origin: str) -> Profile:
    """A :class:`Profile` from decoded JSON; ``origin`` (a file name) starts every error message."""
    return parse_record(Profile, data, origin, FORMAT, VERSION, ProfileError)


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate the profile file at ``path``."""
    return parse_profile(read_json(path, "profile", ProfileError), str(path))


def write_profile(profile: Profile, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` to ``path`` atomically: a temporary file in the same directory, then a rename."""
    write_atomic(path, profile.to_json())


def load_profile(spec: str) -> Profile:
    """``builtin:NAME`` (see :data:`colltune.profiles.BUILTINS`) or the path of a profile file."""
    if spec.startswith("builtin:"):
        from colltune.profiles.builtin import builtin

        return builtin(spec.removeprefix("builtin:"))
    return read_profile(spec)


def profile_schema() -> dict[str, Any]:
    """The JSON Schema of the profile format (what ``docs/profile.schema.json`` holds)."""
    schema = Profile.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://colltune.invalid/schemas/profile-v{VERSION}.json"
    return schema


def _field_is_table(model: type[ParamSet], name: str) -> bool:
    info = model.model_fields.get(name)
    return info is not None and Tabulated in (typing.get_args(info.annotation) or (info.annotation,))


def _parse_value(text: Any) -> Any:
    """A ``--set`` value: JSON text decoded (a number, a list, a table), else the text itself; a value
    the command line decoded already stays as it is."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # bad JSON (JSONDecodeError), too many digits, too deep
        return text


def with_overrides(params: ParamSet | None, model: str, sets: dict[str, str]) -> ParamSet:
    """``params`` (or nothing) of ``model`` with ``NAME=VALUE`` overrides applied and validated.

    Values are numbers in seconds and bytes (or JSON for lists and tables); a number given for a
    tabulated function (``g``, ``os``, ``or``) sets it to that constant.  Names may be dotted
    (``unidirectional.g``).  Without ``params`` the overrides must give every required field.
    """
    cls = MODELS.get(model)
    if cls is None:
        raise ProfileError(f"unknown model {model!r}; valid: {', '.join(MODELS)}")
    data: dict[str, Any] = params.model_dump(by_alias=True) if params is not None else {}
    for name, text in sets.items():
        path = name.split(".")
        target, owner = data, cls
        for part in path[:-1]:
            sub = target.get(part)
            field = owner.model_fields.get(part)
            if not isinstance(sub, dict) or field is None:
                raise ProfileError(f"--set {name}: {model} has no parameter group {part!r}")
            target = sub
            owner = next(a for a in typing.get_args(field.annotation) or (field.annotation,) if a is not type(None))
        last = path[-1]
        names = {(f.alias or n): n for n, f in owner.model_fields.items()}
        if last not in names:
            raise ProfileError(f"--set {name}: {model} has no parameter {last!r}; valid: {', '.join(sorted(names))}")
        value = _parse_value(text)
        if isinstance(value, (int, float)) and _field_is_table(owner, names[last]):
            value = {"sizes": [0], "values": [value]}
        target[last] = value
    try:
        return cls.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ProfileError(f"{model} parameters: {describe(exc)}") from None
