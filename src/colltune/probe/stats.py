"""Summaries of repeated measurements: median and quartiles after outlier rejection.

**Outlier rule** (Tukey's fences): a sample below ``q1 - 1.5 IQR`` or above ``q3 + 1.5 IQR`` of
all the samples at that point is rejected; the median and quartiles are then those of the
samples kept.  Timings on a shared machine have a long upper tail (a descheduled rank, a page
fault), which this rule trims without assuming a distribution.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from colltune.profiles.format import Series, Spread

#: Tukey's fence factor.
FENCE = 1.5


def summarise(samples: Sequence[float] | np.ndarray) -> Spread:
    """The :class:`Spread` of ``samples`` (at least one) after Tukey's outlier rule."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no samples to summarise")
    q1, q3 = np.percentile(x, [25, 75])
    keep = x[(x >= q1 - FENCE * (q3 - q1)) & (x <= q3 + FENCE * (q3 - q1))]
    k1, med, k3 = np.percentile(keep, [25, 50, 75])
    return Spread(median=float(med), q1=float(k1), q3=float(k3), reps=int(keep.size),
                  rejected=int(x.size - keep.size))


def series(unit: str, x_name: str, x: Sequence[float], samples: Sequence[Sequence[float] | np.ndarray],
           method: str) -> Series:
    """A :class:`Series` with one :func:`summarise` per point."""
    return Series(unit=unit, x_name=x_name, x=tuple(float(v) for v in x),
                  points=tuple(summarise(s) for s in samples), method=method)


def derived(unit: str, x_name: str, x: Sequence[float], median: Sequence[float], half_spread: Sequence[float],
            reps: Sequence[int], method: str) -> Series:
    """A :class:`Series` computed from others: ``median`` with quartiles ``median -/+ half_spread``."""
    points = tuple(Spread(median=float(m), q1=float(m - h), q3=float(m + h), reps=int(r))
                   for m, h, r in zip(median, half_spread, reps, strict=True))
    return Series(unit=unit, x_name=x_name, x=tuple(float(v) for v in x), points=points, method=method)


def summarised(unit: str, x_name: str, x: Sequence[float], points: Sequence[Spread], method: str) -> Series:
    """A :class:`Series` of spreads already summarised elsewhere (a collective's timings: their own
    median and quartiles, which a time's spread keeps without making it symmetric)."""
    return Series(unit=unit, x_name=x_name, x=tuple(float(v) for v in x), points=tuple(points), method=method)
