"""What each collective operation means: its buffers, its inputs and its postcondition.

A collective is defined once, here, by three functions of a :class:`Problem`:

* ``buffers``: the size in bytes of each rank's SEND and RECV buffer;
* ``inputs``: the regions that hold data when the collective starts;
* ``outputs``: where every input byte must be when it ends.

The verifier checks schedules against these definitions; the runtime checks the
user's buffers against ``buffers``.

Buffer conventions
------------------
``bcast``: one buffer of ``size`` bytes, addressed as RECV on every rank (as with
``MPI_IN_PLACE``); on the root it holds the message at the start, on every rank
it holds the message at the end.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

from colltune.errors import ParameterError
from colltune.schedule.ir import Buf


@dataclass(frozen=True)
class Problem:
    """One instance of a collective: ``procs`` ranks, a ``root`` rank, ``size`` bytes.

    ``size`` is the message size in bytes (for bcast, the whole message).
    """

    collective: str
    procs: int
    root: int = 0
    size: int = 0

    def __post_init__(self) -> None:
        for name in ("procs", "root", "size"):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, operator.index(value))
            except TypeError:
                raise ParameterError(f"{name} must be an integer, got {value!r}") from None
        if self.procs < 1:
            raise ParameterError(f"procs must be an integer >= 1, got {self.procs!r}")
        if not 0 <= self.root < self.procs:
            raise ParameterError(f"root must be a rank in 0..{self.procs - 1}, got {self.root!r}")
        if self.size < 0:
            raise ParameterError(f"size must be a whole number of bytes >= 0, got {self.size!r}")


@dataclass(frozen=True)
class Placement:
    """``length`` bytes at ``(rank, buf, offset)`` that must equal the input bytes at
    ``(origin_rank, origin_buf, origin_offset)``."""

    rank: int
    buf: Buf
    offset: int
    length: int
    origin_rank: int
    origin_buf: Buf
    origin_offset: int


@dataclass(frozen=True)
class Input:
    """A region that holds input data at the start of the collective."""

    rank: int
    buf: Buf
    offset: int
    length: int


@dataclass(frozen=True)
class CollectiveDef:
    """The definition of one collective operation."""

    name: str
    summary: str
    rooted: bool
    buffers: Callable[[Problem], tuple[list[int], list[int]]]
    inputs: Callable[[Problem], list[Input]]
    outputs: Callable[[Problem], list[Placement]]


def _bcast_buffers(p: Problem) -> tuple[list[int], list[int]]:
    return [0] * p.procs, [p.size] * p.procs


def _bcast_inputs(p: Problem) -> list[Input]:
    return [Input(p.root, Buf.RECV, 0, p.size)]


def _bcast_outputs(p: Problem) -> list[Placement]:
    return [Placement(r, Buf.RECV, 0, p.size, p.root, Buf.RECV, 0) for r in range(p.procs)]


COLLECTIVES: dict[str, CollectiveDef] = {
    d.name: d
    for d in (
        CollectiveDef(
            name="bcast",
            summary="the root's message of `size` bytes ends up on every rank",
            rooted=True,
            buffers=_bcast_buffers,
            inputs=_bcast_inputs,
            outputs=_bcast_outputs,
        ),
    )
}


def get_collective(name: str) -> CollectiveDef:
    """The definition of collective ``name``; an error lists the known ones."""
    try:
        return COLLECTIVES[name]
    except KeyError:
        raise ParameterError(
            f"unknown collective {name!r}; known: {', '.join(sorted(COLLECTIVES))}") from None
