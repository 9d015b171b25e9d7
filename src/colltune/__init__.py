"""colltune: measure a network, model and verify collective algorithms, run the fastest over MPI.

Schedules, the registry and the verifier import no MPI; the runtime (``plan``,
``Plan`` and the collectives ``bcast``, ``scatter``, ``gather``, ``allgather``,
``alltoall``, ``reduce``, ``allreduce``, ``barrier``) loads mpi4py on first use, so that ``colltune verify`` and
``colltune algorithms`` work without initialising MPI.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from colltune.algorithms import REGISTRY, Algorithm, Param, register
from colltune.collectives import COLLECTIVES, Problem
from colltune.errors import (
    ColltuneError,
    ParameterError,
    ScheduleError,
    UnknownAlgorithmError,
    VerificationError,
)
from colltune.schedule import Buf, Kind, Region, Schedule, ScheduleBuilder, VerifyReport, verify

try:
    __version__ = version("colltune")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

_RUNTIME = ("Plan", "allgather", "allreduce", "alltoall", "barrier", "bcast", "call_cache", "gather", "plan", "reduce",
            "scatter")


def __getattr__(name: str) -> Any:
    if name in _RUNTIME:
        value = getattr(import_module("colltune.runtime"), name)
        globals()[name] = value  # later lookups find it directly: colltune.bcast costs no import
        return value
    raise AttributeError(f"module 'colltune' has no attribute {name!r}")


__all__ = [
    "COLLECTIVES", "REGISTRY", "Algorithm", "Buf", "ColltuneError", "Kind", "Param", "ParameterError", "Plan",
    "Problem", "Region", "Schedule", "ScheduleBuilder", "ScheduleError", "UnknownAlgorithmError",
    "VerificationError", "VerifyReport", "__version__", "allgather", "allreduce", "alltoall", "barrier", "bcast",
    "call_cache", "gather", "plan", "reduce", "register", "scatter", "verify",
]
