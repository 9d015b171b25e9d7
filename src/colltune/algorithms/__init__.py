"""Collective algorithms as pure schedule builders, registered by (collective, name)."""

from colltune.algorithms import bcast as _bcast  # noqa: F401  (registers the broadcasts)
from colltune.algorithms.registry import REGISTRY, Algorithm, Param, Registry, register

__all__ = ["REGISTRY", "Algorithm", "Param", "Registry", "register"]
