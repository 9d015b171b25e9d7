"""Latency matrices from files: CSV, JSON, or the ``latency`` model of a profile.

- CSV: a header row of names (its first cell empty) and one row per sender, led by its name;
  ``#`` starts a comment line (the layout of ``seed004_latency_matrix.csv``).
- JSON: ``{"names": [...], "latency": [[...], ...]}`` with optional ``o_s``, ``gap``, ``o_r``.
- A profile (a file with ``"format": "colltune-profile"``, or ``builtin:NAME``): its ``latency``
  model, as ``colltune probe`` measures it.

Values are multiplied by ``scale`` (seconds per unit in the file; 1 keeps them as they are, which
is how the papers' abstract units stay abstract).  Errors name the file and the problem.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pydantic

from colltune.errors import ColltuneError
from colltune.files import loads_json, read_text
from colltune.models.params import LatencyMatrix
from colltune.profiles import load_profile


class LatencyFileError(ColltuneError):
    """A latency matrix that cannot be read."""


def read_latency(spec: str, scale: float = 1.0) -> LatencyMatrix:
    """The latency matrix in ``spec`` (a CSV, JSON or profile file, or ``builtin:NAME``)."""
    if spec.startswith("builtin:"):
        return _from_profile(spec, scale)
    path = Path(spec)
    text = read_text(path, "latency matrix", LatencyFileError)
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        data = loads_json(text, spec, LatencyFileError)
        if isinstance(data, dict) and data.get("format") == "colltune-profile":
            return _from_profile(spec, scale)
        return _validated(spec, data, scale)
    try:
        rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].lstrip().startswith("#")]
    except csv.Error as exc:
        raise LatencyFileError(f"{spec}: not a CSV latency matrix: {exc}") from None
    if len(rows) < 2:
        raise LatencyFileError(f"{spec}: a CSV latency matrix needs a header row of names and one row per name")
    names = [c.strip() for c in rows[0][1:]]
    body = rows[1:]
    if len(body) != len(names):
        raise LatencyFileError(f"{spec}: the header names {len(names)} ranks but {len(body)} rows follow")
    latency = []
    for name, row in zip(names, body, strict=True):
        if row[0].strip() != name or len(row) != len(names) + 1:
            raise LatencyFileError(f"{spec}: row {row[0].strip()!r}: expected the row of {name!r} with "
                                   f"{len(names)} latencies")
        try:
            latency.append([float(v) for v in row[1:]])
        except ValueError as exc:
            raise LatencyFileError(f"{spec}: row {name!r}: {exc}") from None
    return _validated(spec, {"names": names, "latency": latency}, scale)


def _from_profile(spec: str, scale: float) -> LatencyMatrix:
    profile = load_profile(spec)
    if profile.models.latency is None:
        raise LatencyFileError(f"{spec}: the profile has no latency matrix (it has: "
                               f"{', '.join(profile.models.present())})")
    return _scaled(profile.models.latency, scale)


def _validated(spec: str, data: object, scale: float) -> LatencyMatrix:
    try:
        return _scaled(LatencyMatrix.model_validate(data), scale)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise LatencyFileError(f"{spec}: {where}: {err['msg']}") from None


def _scaled(model: LatencyMatrix, scale: float) -> LatencyMatrix:
    if scale == 1.0:
        return model
    return model.model_copy(update={"latency": tuple(tuple(v * scale for v in row) for row in model.latency),
                                    "o_s": model.o_s * scale, "gap": model.gap * scale, "o_r": model.o_r * scale})
