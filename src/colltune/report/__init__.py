"""Figures (matplotlib): a profile's measured functions, and benchmark results."""

from colltune.report.bench import bench_figure, plot_bench
from colltune.report.profile import plot_profile

__all__ = ["bench_figure", "plot_bench", "plot_profile"]
