"""colltune: measure a network, model and verify collective algorithms, run the fastest over MPI.

Schedules, the registry and the verifier import no MPI; the runtime (``plan``,
``Plan`` and the collectives ``bcast``, ``scatter``, ``gather``, ``allgather``,
``alltoall``, ``reduce``, ``allreduce``, ``barrier``) loads mpi4py on first use, so that ``colltune verify`` and
``colltune algorithms`` work without initialising MPI.  Every name here is imported on first use
(:mod:`colltune.lazy`): importing one module of colltune imports only what that module needs.
"""

from __future__ import annotations

from colltune.lazy import exports

__getattr__, __all__ = exports(__name__, {
    "colltune.algorithms": ("REGISTRY", "Algorithm", "Param", "register"),
    "colltune.collectives": ("COLLECTIVES", "Problem"),
    "colltune.errors": ("ColltuneError", "ParameterError", "ScheduleError", "UnknownAlgorithmError",
                        "VerificationError"),
    "colltune.schedule": ("Buf", "Kind", "Region", "Schedule", "ScheduleBuilder", "VerifyReport", "verify"),
    "colltune.runtime": ("Plan", "allgather", "allreduce", "alltoall", "barrier", "bcast", "call_cache", "gather",
                         "plan", "reduce", "scatter"),
    "colltune.version": ("__version__",),
})
