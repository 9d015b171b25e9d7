"""Exceptions raised by colltune.

Every error names what is wrong (the rank, the operation, the region, the
parameter or the value), so that a user can act on the message alone.
"""

from __future__ import annotations


class ColltuneError(Exception):
    """Base class of every error colltune raises on purpose."""


class ScheduleError(ColltuneError):
    """A schedule is malformed (bad dependency, bad region, bad peer)."""


class VerificationError(ColltuneError):
    """Symbolic execution found a schedule incorrect.

    Attributes
    ----------
    rank, op:
        The rank and the index of the operation within that rank's list,
        where known (``None`` otherwise).
    """

    def __init__(self, message: str, rank: int | None = None, op: int | None = None):
        super().__init__(message)
        self.rank = rank
        self.op = op


class UnknownAlgorithmError(ColltuneError, KeyError):
    """A (collective, algorithm) pair that the registry does not hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class ParameterError(ColltuneError, ValueError):
    """An algorithm parameter, process count, root or size that is not valid."""


class ExecutionError(ColltuneError):
    """The MPI library reported an error while colltune ran a collective (the message is the
    library's), or a schedule could not be made into a runnable program."""


class Unavailable(ColltuneError):
    """No formula, simulation or timing can price this case (a collective, an algorithm, a model,
    a process count); the message says why.  Pricers raise it and the tuners skip the candidate."""
