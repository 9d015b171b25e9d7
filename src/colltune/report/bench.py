"""Benchmark results as a figure: time against size for each algorithm, predicted beside measured."""

from __future__ import annotations

import math
import os
from typing import Any

from colltune.report.figure import pyplot, write_png
from colltune.tune.bench import BenchResults


def bench_figure(results: BenchResults) -> Any:
    """A matplotlib figure with one panel per collective of ``results``: for each algorithm its
    measured median (solid, with the interquartile band), its prediction (dashed, same colour)
    and, circled, the points the decision table chooses.  Times in microseconds; the size axis is
    logarithmic above 1 byte and linear below, so size 0 is shown."""
    plt = pyplot()
    from matplotlib.lines import Line2D  # after pyplot(), which chooses the backend

    colls = list(results.collectives)
    cols = 1 if len(colls) == 1 else 2
    rows = max(1, math.ceil(len(colls) / cols))
    height = 3.8 * rows + 1.2  # inches: the panels, the title and the legend of line styles
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, height), squeeze=False)
    for ax, coll in zip(axes.flat, colls, strict=False):
        for i, series in enumerate(results.collectives[coll]):
            colour = f"C{i % 10}"
            x = [p.size for p in series.points]
            ax.plot(x, [p.median * 1e6 for p in series.points], marker="o", markersize=3, color=colour,
                    label=series.algorithm)
            ax.fill_between(x, [p.q1 * 1e6 for p in series.points], [p.q3 * 1e6 for p in series.points],
                            color=colour, alpha=0.2)
            chosen = [p for p in series.points if p.chosen]
            ax.plot([p.size for p in chosen], [p.median * 1e6 for p in chosen], linestyle="none", marker="o",
                    markersize=8, markerfacecolor="none", color=colour)
            # a logarithmic axis cannot show a predicted time of 0 (no communication at size 0)
            guess = [(p.size, p.predicted * 1e6) for p in series.points if p.predicted]
            ax.plot([g[0] for g in guess], [g[1] for g in guess], linestyle="--", marker="x", markersize=4,
                    color=colour)
        ax.set_title(f"{coll} (P = {results.procs})")
        ax.set_yscale("log")
        ax.set_ylabel("time (us)")
        largest = max(p.size for s in results.collectives[coll] for p in s.points)
        if largest == 0:
            ax.set_xlim(-1, 1)
            ax.set_xticks([0])
            ax.set_xlabel("no data (a synchronisation)")
        else:
            ax.set_xscale("symlog", linthresh=1)
            ax.set_xlim(-0.3, largest * 1.5)
            ax.set_xlabel("block size (bytes)")
        ax.legend(fontsize="x-small")
    for ax in list(axes.flat)[len(colls):]:
        ax.set_visible(False)
    styles = [Line2D([], [], color="black", label="measured median, interquartile band"),
              Line2D([], [], color="black", linestyle="--", marker="x", label="predicted"),
              Line2D([], [], color="black", linestyle="none", marker="o", markersize=8, markerfacecolor="none",
                     label="the table's choice")]
    fig.legend(handles=styles, loc="lower center", ncol=3, fontsize="small")
    p = results.predictor
    how = f"predicted by {p.method} ({p.model}) on {p.profile}" if p else "no prediction (no profile given)"
    fig.suptitle(f"colltune bench of {results.table}, {results.reps} repetitions\n{how}", fontsize="medium")
    fig.tight_layout(rect=(0, 0.6 / height, 1, 1 - 0.6 / height))
    return fig


def plot_bench(results: BenchResults, path: str | os.PathLike[str]) -> None:
    """Draw :func:`bench_figure` of ``results`` into the PNG file ``path`` (written atomically)."""
    write_png(bench_figure(results), path)
