"""Figures (matplotlib): a profile's measured functions."""

from colltune.report.profile import plot_profile

__all__ = ["plot_profile"]
