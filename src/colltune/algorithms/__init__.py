"""Collective algorithms as pure schedule builders, registered by (collective, name)."""

from colltune.algorithms import allgather as _allgather  # noqa: F401  (each module registers its algorithms)
from colltune.algorithms import alltoall as _alltoall  # noqa: F401
from colltune.algorithms import barrier as _barrier  # noqa: F401
from colltune.algorithms import bcast as _bcast  # noqa: F401
from colltune.algorithms import gather as _gather  # noqa: F401
from colltune.algorithms import given as _given  # noqa: F401
from colltune.algorithms import hierarchical as _hierarchical  # noqa: F401
from colltune.algorithms import reduce as _reduce  # noqa: F401
from colltune.algorithms import scatter as _scatter  # noqa: F401
from colltune.algorithms.registry import REGISTRY, Algorithm, Param, Registry, register

__all__ = ["REGISTRY", "Algorithm", "Param", "Registry", "register"]
