"""The files colltune produces (profiles, tables, GOAL, traces, topologies): atomic writes, and
reading its versioned JSON records with one error that names the file and the field."""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import pydantic

from colltune.limits import MAX_FILE_BYTES

Record = TypeVar("Record", bound=pydantic.BaseModel)


def describe(exc: pydantic.ValidationError) -> str:
    """``field.path: what is wrong`` for the first problem of a validation error, and how many more."""
    err = exc.errors()[0]
    where = ".".join(str(x) for x in err["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg']}{more}"


def parse_record(model: type[Record], data: Any, origin: str, fmt: str, version: int,
                 error: type[Exception]) -> Record:
    """``model`` from decoded JSON that must carry ``"format": fmt`` and ``"version": version``;
    any problem raises ``error`` starting with ``origin`` (a file name)."""
    if isinstance(data, dict):
        if data.get("format") != fmt:
            raise error(f"{origin}: format: expected {fmt!r}, got {data.get('format')!r}")
        if data.get("version") != version:
            raise error(f"{origin}: version: {data.get('version')!r} is not supported "
                        f"(this colltune reads version {version})")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise error(f"{origin}: {describe(exc)}") from None


def read_bytes(path: str | os.PathLike[str], what: str, error: type[Exception]) -> bytes:
    """The bytes of the file at ``path`` (``what`` it holds, for messages); a file that cannot be
    read or is larger than :data:`colltune.limits.MAX_FILE_BYTES` raises ``error`` naming the file
    (read no further than that limit: ``/dev/zero`` fails at once)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise error(f"{path}: the {what} is larger than {MAX_FILE_BYTES} B, the most colltune reads")
    return raw


def decode_text(raw: bytes, path: str | os.PathLike[str], what: str, error: type[Exception]) -> str:
    """``raw`` (the bytes of the file at ``path``, holding ``what``) as UTF-8 text, or ``error``
    naming the file and the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") \
            from None


def read_text(path: str | os.PathLike[str], what: str, error: type[Exception]) -> str:
    """The UTF-8 text of the file at ``path`` (:func:`read_bytes`, :func:`decode_text`)."""
    return decode_text(read_bytes(path, what, error), path, what, error)


def loads_json(text: str, origin: str, error: type[Exception]) -> Any:
    """``text`` decoded as JSON; bad JSON, or nesting deeper than the decoder can follow, raises
    ``error`` starting with ``origin`` (a file name)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{origin}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise error(f"{origin}: JSON nested deeper than colltune reads (no colltune file nests more than "
                    f"a few levels)") from None
    except ValueError:  # a number of more digits than Python converts (sys.get_int_max_str_digits)
        raise error(f"{origin}: a number of more than {sys.get_int_max_str_digits()} digits") from None


def read_json(path: str | os.PathLike[str], what: str, error: type[Exception]) -> Any:
    """The decoded JSON of the file at ``path`` (``what`` it holds, for messages): :func:`read_text`,
    then :func:`loads_json`."""
    return loads_json(read_text(path, what, error), str(path), error)


def write_atomic(path: str | os.PathLike[str], chunks: str | bytes | Iterable[str]) -> None:
    """Write ``chunks`` (bytes, one string, or an iterable of strings) to ``path`` so that readers see
    either the old file or the whole new one: a temporary file in the same directory, then a
    rename.  On any error the temporary file is removed and ``path`` is left as it was.  The file
    gets the permissions of the one it replaces, or those ``open`` would give a new file (0666
    less the umask), not the private ones of a temporary file: the MPI library reading an
    exported rules file may run as another user."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(target)) from None  # the file meant, not the temporary one
    try:
        os.fchmod(fd, _mode_for(target))
        if isinstance(chunks, bytes):
            with os.fdopen(fd, "wb") as raw:
                raw.write(chunks)
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for chunk in [chunks] if isinstance(chunks, str) else chunks:
                    fh.write(chunk)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(target: Path) -> int:
    """The permission bits ``target`` should have once written."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask
