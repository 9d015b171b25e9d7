"""Running schedules over MPI (mpi4py): plans, one-shot collectives, the native fallback.

Schedules run on the compiled executor (:mod:`colltune.runtime.compiled`) where it loads, else on
the Python one (:mod:`colltune.runtime.executor`); one-shot calls are cached per communicator
(:mod:`colltune.runtime.state`).
"""

from colltune.runtime.api import (
    AUTO,
    BUFFERS,
    EXECUTORS,
    NATIVE,
    Plan,
    allgather,
    allreduce,
    alltoall,
    barrier,
    bcast,
    call_cache,
    gather,
    plan,
    reduce,
    scatter,
)
from colltune.runtime.calls import as_bytes
from colltune.runtime.executor import ScheduleExecutor

__all__ = ["AUTO", "BUFFERS", "EXECUTORS", "NATIVE", "Plan", "ScheduleExecutor", "allgather", "allreduce",
           "alltoall", "as_bytes", "barrier", "bcast", "call_cache", "gather", "plan", "reduce", "scatter"]
