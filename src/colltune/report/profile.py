"""A profile's size-dependent parameters as a figure: g(m), os(m), or(m) and b(h)."""

from __future__ import annotations

import os

from colltune.models.params import Tabulated
from colltune.profiles.format import Profile, Series
from colltune.report.figure import pyplot, write_png


def _tabulated(ax, label: str, fn: Tabulated | None, measured: Series | None) -> bool:  # type: ignore[no-untyped-def]
    """Plot one tabulated function (s against bytes), with the measured quartiles if the profile
    has them; False if there is nothing to draw."""
    if fn is None:
        return False
    x = [max(s, 1) for s in fn.sizes]
    ax.plot(x, [v * 1e6 for v in fn.values], marker="o", label=label)
    if measured is not None and len(measured.x) == len(fn.sizes):
        ax.fill_between(x, [p.q1 * 1e6 for p in measured.points], [p.q3 * 1e6 for p in measured.points], alpha=0.25)
    return True


def plot_profile(profile: Profile, path: str | os.PathLike[str]) -> None:
    """Draw g(m), os(m), or(m) (pLogP, uni- and bidirectional) and PlogPT's b(h) of ``profile``
    into the PNG file ``path`` (written atomically); a panel the profile has no data for says so."""
    fig, axes = pyplot().subplots(2, 2, figsize=(11, 8))
    plogp, tree = profile.models.plogp, profile.models.plogpt
    ms = profile.measurements
    unit = "us" if profile.time_unit == "s" else "units / 1e6"
    panels = [
        ("g(m)", [("unidirectional", plogp.unidirectional.g if plogp else None, ms.get("g")),
                  ("bidirectional", plogp.bidirectional.g if plogp and plogp.bidirectional else None, ms.get("g_bi"))]),
        ("os(m)", [("send call", plogp.unidirectional.os if plogp else None, ms.get("send_call"))]),
        ("or(m)", [("receive call", plogp.unidirectional.or_ if plogp else None, ms.get("recv_call"))]),
    ]
    for ax, (title, curves) in zip(axes.flat, panels, strict=False):
        drawn = [_tabulated(ax, label, fn, series) for label, fn, series in curves]
        ax.set_title(f"pLogP {title}")
        if any(drawn):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel(f"time ({unit})")
            ax.legend()
        else:
            ax.text(0.5, 0.5, "not in this profile", ha="center", va="center", transform=ax.transAxes)
    ax = axes.flat[3]
    ax.set_title("PlogPT b(h)")
    if tree is not None:
        for label, levels in (("bidirectional", tree.bidirectional), ("unidirectional", tree.unidirectional)):
            if levels is not None:
                ax.plot(range(1, levels.depth + 1), [b * 8 / 1e6 for b in levels.b], marker="o", label=label)
        ax.set_xlabel("height h")
        ax.set_ylabel("bandwidth (Mbit/s)")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "not in this profile", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"{profile.name}: {profile.description}")
    fig.tight_layout()
    write_png(fig, path)
