"""Running schedules over MPI (mpi4py): plans, one-shot collectives, the native fallback.

Schedules run on the compiled executor (:mod:`colltune.runtime.compiled`) where it loads, else on
the Python one (:mod:`colltune.runtime.executor`); one-shot calls are cached per communicator
(:mod:`colltune.runtime.state`).  Every name here is imported on first use (:mod:`colltune.lazy`):
:mod:`colltune.runtime.quiet` alone imports only mpi4py.
"""

from __future__ import annotations

from colltune.lazy import exports

__getattr__, __all__ = exports(__name__, {
    "colltune.runtime.api": ("AUTO", "BUFFERS", "EXECUTORS", "NATIVE", "Plan", "allgather", "allreduce", "alltoall",
                             "barrier", "bcast", "call_cache", "gather", "plan", "reduce", "scatter"),
    "colltune.runtime.calls": ("as_bytes",),
    "colltune.runtime.executor": ("ScheduleExecutor",),
})
