"""Parsing and formatting of sizes and lists at the edges (CLI, reports).

Inside colltune every size is an int number of bytes; these helpers turn what
a user types (``64KiB``, ``1-33``, ``0,1,1000``) into that.
"""

from __future__ import annotations

import re

from colltune.errors import ParameterError
from colltune.limits import MAX_BYTES, MAX_PROCS

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}
_SIZE = re.compile(r"^\s*([0-9]+)\s*([a-zA-Z]*)\s*$")  # ASCII digits only


def parse_bytes(text: str) -> int:
    """``"64KiB"`` -> 65536; units B, kB, MB, GB (powers of 10) and KiB, MiB, GiB (powers of 2)."""
    m = _SIZE.match(text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ParameterError(f"size {text!r} is not a whole number of bytes with an optional unit "
                             f"(B, kB, MB, GB, KiB, MiB, GiB)")
    size = int(m.group(1)[:20]) * _UNITS[unit]  # 20 digits exceed MAX_BYTES already
    if len(m.group(1)) > 20 or size > MAX_BYTES:
        raise ParameterError(f"size {text!r} is larger than {MAX_BYTES} B (2^63 - 1, MPI's largest count)")
    return size


def parse_int_list(text: str, what: str, smallest: int = 0, largest: int = MAX_PROCS) -> list[int]:
    """``"1-4,8"`` -> [1, 2, 3, 4, 8] (ranges inclusive), none below ``smallest`` or above
    ``largest`` (default :data:`colltune.limits.MAX_PROCS`: these are process counts and ranks)."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*([0-9]{1,18})\s*(?:-\s*([0-9]{1,18})\s*)?", part)  # ASCII digits, below 10^18
        if not m:
            raise ParameterError(f"{what} {text!r}: {part!r} is not an integer or a range like 1-33")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ParameterError(f"{what} {text!r}: range {part!r} is empty")
        if lo < smallest:
            raise ParameterError(f"{what} {text!r}: {lo} is below {smallest}")
        if hi > largest:
            raise ParameterError(f"{what} {text!r}: {hi} is above {largest}, the largest colltune takes")
        out.extend(range(lo, hi + 1))
    return out


def parse_size_list(text: str) -> list[int]:
    """``"0,1,64KiB"`` -> [0, 1, 65536]."""
    return [parse_bytes(part) for part in text.split(",")]


_RATE_UNITS = {"kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30,
               "kb": 1e3, "mb": 1e6, "gb": 1e9, "b": 1.0}


def parse_rate(text: str, what: str = "rate") -> float:
    """``"100Mbit"`` -> 12.5e6: a rate in bytes per second, from a number of bytes per second or a
    number with a unit: kbit, Mbit, Gbit (bits, powers of 10), B, kB, MB, GB (bytes, powers of 10),
    KiB, MiB, GiB (bytes, powers of 2), each optionally followed by ``/s`` or ``ps``; case is
    ignored.  ``what`` names the option in the error."""
    t = text.strip().lower().removesuffix("/s").removesuffix("ps")
    number, scale = t, 1.0
    for unit, factor in _RATE_UNITS.items():
        if t.endswith(unit):
            number, scale = t[:-len(unit)], factor
            break
    try:
        value = float(number) * scale
    except ValueError:
        raise ParameterError(f"{what} {text!r} is not a rate: give bytes per second or a number with a unit "
                             f"(100Mbit, 1Gbit, 12.5MB)") from None
    if not 0 < value < float("inf"):
        raise ParameterError(f"{what} {text!r}: a rate must be positive and finite")
    return value


def format_seconds(t: float) -> str:
    """``0.0000153`` -> ``"15.3 us"``: a time in seconds with a readable unit (for display only)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"
