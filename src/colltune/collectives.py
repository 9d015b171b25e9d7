"""What each collective operation means: its buffers, its inputs and its postcondition.

A collective is defined once, here, by three functions of a :class:`Problem`:

* ``buffers``: the size in bytes of each rank's SEND and RECV buffer;
* ``inputs``: the regions that hold data when the collective starts;
* ``outputs``: where every input byte must be when it ends, either as a copy
  (:class:`Placement`) or as the reduction of every rank's input (:class:`Reduction`).

The verifier checks schedules against these definitions; the runtime checks the
user's buffers against ``buffers``.  A schedule never writes a SEND buffer: it is
the user's input (``const`` in MPI).

Buffer conventions (``m`` is ``Problem.size``, in bytes)
---------------------------------------------------------
=============  ==========================  ===========================  ==============================
collective     SEND buffer                 RECV buffer                  at the end
=============  ==========================  ===========================  ==============================
``bcast``      none                        ``m`` on every rank          every RECV = the root's RECV
``scatter``    ``P*m`` on the root         ``m`` on every rank          rank r's RECV = root's block r
``gather``     ``m`` on every rank         ``P*m`` on the root          root's block r = rank r's SEND
``allgather``  ``m`` on every rank         ``P*m`` on every rank        block r = rank r's SEND
``alltoall``   ``P*m`` on every rank       ``P*m`` on every rank        rank r's block s = rank s's block r
``reduce``     ``m`` on every rank         ``m`` on the root            root's RECV = op over all SENDs
``allreduce``  ``m`` on every rank         ``m`` on every rank          every RECV = op over all SENDs
``barrier``    none                        none                         no rank leaves before all entered
=============  ==========================  ===========================  ==============================

``bcast`` works in place (as with ``MPI_IN_PLACE``): the root's RECV holds the
message at the start.  A "block" is ``m`` bytes at offset ``r*m``.  The
reduction of the ranks' inputs is ``x_0 op x_1 op ... op x_{P-1}`` elementwise
over ``dtype``, in that order when the operation is not commutative.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from colltune.errors import ParameterError
from colltune.schedule.ir import REDUCTION_DTYPES, REDUCTION_OPS, Buf

#: Operations that are not defined for a kind of numpy dtype ("f": float, "c": complex, "b": bool),
#: as in the MPI standard (4.0, section 6.9.2): the bitwise and logical operations take integers
#: and booleans only, max and min no complex numbers.
_UNDEFINED_OPS = {"f": {"band", "bor", "bxor", "land", "lor"},
                  "c": {"band", "bor", "bxor", "land", "lor", "max", "min"}, "b": set()}


@dataclass(frozen=True)
class Problem:
    """One instance of a collective: ``procs`` ranks, a ``root`` rank, ``size`` bytes.

    ``size`` is the block size ``m`` in bytes of the buffer conventions above (for bcast the
    whole message, for the reductions each rank's vector).  For ``reduce`` and ``allreduce``,
    ``op`` (a name of :data:`~colltune.schedule.ir.REDUCTION_OPS`, default ``"sum"``) and
    ``dtype`` (a numpy dtype name of :data:`~colltune.schedule.ir.REDUCTION_DTYPES`, default
    ``"uint8"``) say what is combined, and ``size`` must be a multiple of the dtype's size;
    ``commutative=False`` asks for the order ``x_0 op x_1 op ... op x_{P-1}`` to be kept (the
    named operations are all commutative; a user's MPI operation need not be).  Other
    collectives take no op or dtype; unrooted ones have root 0.

    ``hosts``, where known, says which ranks share a host (a node of a cluster): ``hosts[r]`` is a
    label of rank r's host, equal for ranks that share it (any integers; two ranks of one label
    talk through shared memory).  ``None`` knows nothing of hosts, which algorithms read as one
    rank per host.  Only the hierarchical algorithms (:mod:`colltune.algorithms.hierarchical`)
    read it.
    """

    collective: str
    procs: int
    root: int = 0
    size: int = 0
    op: str | None = None
    dtype: str | None = None
    commutative: bool = True
    hosts: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        coll = get_collective(self.collective)
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
        if self.hosts is not None:
            try:
                hosts = tuple(operator.index(h) for h in self.hosts)
            except TypeError:
                raise ParameterError(f"hosts must be integer labels, one per rank, got {self.hosts!r}") from None
            if len(hosts) != self.procs:
                raise ParameterError(f"hosts must give one host label per rank: {len(hosts)} labels "
                                     f"for {self.procs} ranks")
            object.__setattr__(self, "hosts", hosts)
        if self.size < 0:
            raise ParameterError(f"size must be a whole number of bytes >= 0, got {self.size!r}")
        if not coll.rooted:
            object.__setattr__(self, "root", 0)
        if coll.name == "barrier" and self.size:
            raise ParameterError(f"a barrier moves no data; size must be 0, got {self.size}")
        if not coll.reduces:
            if self.op is not None or self.dtype is not None or not self.commutative:
                raise ParameterError(f"{self.collective} does not reduce; it takes no op, dtype or commutative")
            return
        op = "sum" if self.op is None else self.op
        dtype = "uint8" if self.dtype is None else str(self.dtype)
        if op not in REDUCTION_OPS:
            raise ParameterError(f"unknown reduction operation {op!r}; valid: {', '.join(REDUCTION_OPS)}")
        if dtype not in REDUCTION_DTYPES:
            raise ParameterError(f"dtype {dtype!r} cannot be reduced; valid: {', '.join(REDUCTION_DTYPES)}")
        if op in _UNDEFINED_OPS.get(np.dtype(dtype).kind, set()):
            raise ParameterError(f"operation {op!r} is not defined for dtype {dtype}")
        if self.size % self.itemsize:
            raise ParameterError(f"size {self.size} bytes is not a whole number of {dtype} elements "
                                 f"({self.itemsize} bytes each)")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "dtype", dtype)

    @property
    def itemsize(self) -> int:
        """Bytes per element: the dtype's size for reductions, 1 otherwise."""
        return np.dtype(self.dtype).itemsize if self.dtype else 1


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
class Reduction:
    """``length`` bytes at ``(rank, buf, offset)`` that must hold, elementwise, the reduction
    over every rank ``k`` of the input bytes at ``(k, origin_buf, origin_offset)``: each
    contribution exactly once, in rank order unless the operation is commutative."""

    rank: int
    buf: Buf
    offset: int
    length: int
    origin_buf: Buf
    origin_offset: int


Output = Placement | Reduction


@dataclass(frozen=True)
class Input:
    """A region that holds input data at the start of the collective."""

    rank: int
    buf: Buf
    offset: int
    length: int


@dataclass(frozen=True)
class CollectiveDef:
    """The definition of one collective operation.

    ``reduces``: the outputs are reductions (the problem has an op and a dtype).
    ``synchronizes``: no rank may finish before every rank has started (barrier).
    """

    name: str
    summary: str
    rooted: bool
    buffers: Callable[[Problem], tuple[list[int], list[int]]]
    inputs: Callable[[Problem], list[Input]]
    outputs: Callable[[Problem], list[Output]]
    reduces: bool = False
    synchronizes: bool = False


def _only_root(p: Problem, nbytes: int) -> list[int]:
    return [nbytes if r == p.root else 0 for r in range(p.procs)]


def _bcast_outputs(p: Problem) -> list[Output]:
    return [Placement(r, Buf.RECV, 0, p.size, p.root, Buf.RECV, 0) for r in range(p.procs)]


def _scatter_outputs(p: Problem) -> list[Output]:
    return [Placement(r, Buf.RECV, 0, p.size, p.root, Buf.SEND, r * p.size) for r in range(p.procs)]


def _gather_outputs(p: Problem) -> list[Output]:
    return [Placement(p.root, Buf.RECV, r * p.size, p.size, r, Buf.SEND, 0) for r in range(p.procs)]


def _allgather_outputs(p: Problem) -> list[Output]:
    m = p.size
    return [Placement(d, Buf.RECV, r * m, m, r, Buf.SEND, 0) for d in range(p.procs) for r in range(p.procs)]


def _alltoall_outputs(p: Problem) -> list[Output]:
    m = p.size
    return [Placement(d, Buf.RECV, s * m, m, s, Buf.SEND, d * m) for d in range(p.procs) for s in range(p.procs)]


def _send_inputs(p: Problem) -> list[Input]:
    return [Input(r, Buf.SEND, 0, p.size) for r in range(p.procs)]


COLLECTIVES: dict[str, CollectiveDef] = {
    d.name: d
    for d in (
        CollectiveDef(
            name="bcast", summary="the root's message of `size` bytes ends up on every rank", rooted=True,
            buffers=lambda p: ([0] * p.procs, [p.size] * p.procs),
            inputs=lambda p: [Input(p.root, Buf.RECV, 0, p.size)],
            outputs=_bcast_outputs),
        CollectiveDef(
            name="scatter", summary="the root's block r of `size` bytes goes to rank r", rooted=True,
            buffers=lambda p: (_only_root(p, p.procs * p.size), [p.size] * p.procs),
            inputs=lambda p: [Input(p.root, Buf.SEND, 0, p.procs * p.size)],
            outputs=_scatter_outputs),
        CollectiveDef(
            name="gather", summary="rank r's `size` bytes become block r on the root", rooted=True,
            buffers=lambda p: ([p.size] * p.procs, _only_root(p, p.procs * p.size)),
            inputs=_send_inputs, outputs=_gather_outputs),
        CollectiveDef(
            name="allgather", summary="rank r's `size` bytes become block r on every rank", rooted=False,
            buffers=lambda p: ([p.size] * p.procs, [p.procs * p.size] * p.procs),
            inputs=_send_inputs, outputs=_allgather_outputs),
        CollectiveDef(
            name="alltoall", summary="rank s's block d of `size` bytes becomes rank d's block s", rooted=False,
            buffers=lambda p: ([p.procs * p.size] * p.procs, [p.procs * p.size] * p.procs),
            inputs=lambda p: [Input(r, Buf.SEND, 0, p.procs * p.size) for r in range(p.procs)],
            outputs=_alltoall_outputs),
        CollectiveDef(
            name="reduce", summary="the root gets the elementwise reduction of every rank's `size` bytes",
            rooted=True, reduces=True,
            buffers=lambda p: ([p.size] * p.procs, _only_root(p, p.size)),
            inputs=_send_inputs,
            outputs=lambda p: [Reduction(p.root, Buf.RECV, 0, p.size, Buf.SEND, 0)]),
        CollectiveDef(
            name="allreduce", summary="every rank gets the elementwise reduction of every rank's `size` bytes",
            rooted=False, reduces=True,
            buffers=lambda p: ([p.size] * p.procs, [p.size] * p.procs),
            inputs=_send_inputs,
            outputs=lambda p: [Reduction(r, Buf.RECV, 0, p.size, Buf.SEND, 0) for r in range(p.procs)]),
        CollectiveDef(
            name="barrier", summary="no rank leaves before every rank has entered (size 0)", rooted=False,
            synchronizes=True,
            buffers=lambda p: ([0] * p.procs, [0] * p.procs),
            inputs=lambda p: [], outputs=lambda p: []),
    )
}


def get_collective(name: str) -> CollectiveDef:
    """The definition of collective ``name``; an error lists the known ones."""
    try:
        return COLLECTIVES[name]
    except (KeyError, TypeError):
        raise ParameterError(
            f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}") from None
