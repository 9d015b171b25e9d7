"""Schedules: the IR every algorithm builds and every consumer reads."""

from colltune.schedule.builder import ScheduleBuilder
from colltune.schedule.ir import ANY_SOURCE, ANY_TAG, REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Region, Schedule
from colltune.schedule.verify import VerifyReport, verify

__all__ = [
    "ANY_SOURCE",
    "ANY_TAG",
    "REDUCTION_DTYPES",
    "REDUCTION_OPS",
    "Buf",
    "Kind",
    "Region",
    "Schedule",
    "ScheduleBuilder",
    "VerifyReport",
    "verify",
]
