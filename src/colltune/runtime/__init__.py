"""Running schedules over MPI (mpi4py): plans, one-shot collectives, the native fallback."""

from colltune.runtime.api import NATIVE, Plan, as_bytes, bcast, plan
from colltune.runtime.executor import ScheduleExecutor

__all__ = ["NATIVE", "Plan", "ScheduleExecutor", "as_bytes", "bcast", "plan"]
