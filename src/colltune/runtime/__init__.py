"""Running schedules over MPI (mpi4py): plans, one-shot collectives, the native fallback."""

from colltune.runtime.api import (
    BUFFERS,
    NATIVE,
    Plan,
    allgather,
    allreduce,
    alltoall,
    as_bytes,
    barrier,
    bcast,
    gather,
    plan,
    reduce,
    scatter,
)
from colltune.runtime.executor import ScheduleExecutor

__all__ = ["BUFFERS", "NATIVE", "Plan", "ScheduleExecutor", "allgather", "allreduce", "alltoall", "as_bytes",
           "barrier", "bcast", "gather", "plan", "reduce", "scatter"]
