"""The values the tuner tries for each tunable parameter of an algorithm, by parameter name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _segment_sizes(procs: int, size: int) -> list[int]:
    """Powers of two from m/64 up to the first one >= m: paper 003's s = m / 2^i (section 3) for
    m a power of two, kept to powers of two for other m so that neighbouring sizes share a segment
    size (and a rule), as the MPI libraries' segment sizes do."""
    top = max(0, (size - 1).bit_length()) if size > 0 else 0
    return [1 << k for k in range(max(0, top - 6), top + 1)]


#: Values tried for each tunable parameter at ``(procs, size)``, by parameter name.
SEARCH: dict[str, Callable[[int, int], list[Any]]] = {
    "segment_size": _segment_sizes,
    "radix": lambda procs, size: [2, 3, 4, 8],
    "max_outstanding": lambda procs, size: [1, 4, 32],
    "leaders": lambda procs, size: [1, 2],
}
