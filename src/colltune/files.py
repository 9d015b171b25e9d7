"""Writing the files colltune produces (profiles, GOAL, traces, topologies) atomically."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], chunks: str | bytes | Iterable[str]) -> None:
    """Write ``chunks`` (bytes, one string, or an iterable of strings) to ``path`` so that readers see
    either the old file or the whole new one: a temporary file in the same directory, then a
    rename.  On any error the temporary file is removed and ``path`` is left as it was."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    try:
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
