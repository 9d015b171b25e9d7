"""What one collective call asks, checked on this rank: its buffers, its signature, its decision.

:func:`examine` checks a call's arguments locally and gives its :class:`Call`, whose ``key`` is the
*signature* every rank must pass alike (see :mod:`colltune.runtime.state`); :func:`decide` turns
it into what runs (for ``"auto"``, from the decision table); :func:`agree` makes the ranks compare
their errors and signatures, so that bad input raises the same
:class:`~colltune.errors.ParameterError` on every rank instead of failing on one while the others
hang.
"""

from __future__ import annotations

import operator
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES, Problem, get_collective
from colltune.errors import ParameterError, UnknownAlgorithmError
from colltune.runtime.state import file_version
from colltune.schedule import REDUCTION_DTYPES
from colltune.tune.table import NATIVE, TABLE_ENV, DecisionTable, read_table

AUTO = "auto"


@lru_cache(maxsize=8)
def _cached_table(path: str, mtime_ns: int, size: int) -> DecisionTable:
    return read_table(path)


def active_table(table: DecisionTable | str | os.PathLike[str] | None = None) -> DecisionTable:
    """The decision table ``algorithm="auto"`` uses: ``table`` (a table or a file), else the file
    named by ``COLLTUNE_TABLE``.  Files are read once and again only when they change."""
    if isinstance(table, DecisionTable):
        return table
    spec = table if table is not None else os.environ.get(TABLE_ENV)
    if not spec:
        raise ParameterError(f"algorithm 'auto' needs a decision table: pass table=FILE or set {TABLE_ENV} "
                             f"(colltune tune writes one)")
    path = Path(spec)
    try:
        st = path.stat()
    except OSError as exc:
        raise ParameterError(f"{spec}: cannot read the decision table: {exc.strerror or exc}") from None
    return _cached_table(str(path), st.st_mtime_ns, st.st_size)


def as_bytes(buf: Any, name: str = "buf", writable: bool = True) -> np.ndarray:
    """A ``uint8`` numpy view of ``buf`` (numpy array or any contiguous buffer-protocol object)."""
    if isinstance(buf, np.ndarray):
        if buf.dtype.hasobject:
            raise ParameterError(f"{name}: an array of Python objects ({buf.dtype}) holds references, not data "
                                 f"that MPI can send")
        if buf.flags.c_contiguous:
            arr = buf
        elif buf.flags.f_contiguous:
            arr = buf.T
        else:
            raise ParameterError(f"{name}: the array is not contiguous; pass a contiguous copy")
        if writable and not arr.flags.writeable:
            raise ParameterError(f"{name}: the array is read-only")
        return arr.reshape(-1).view(np.uint8)
    try:
        mv = memoryview(buf)
    except TypeError:
        raise ParameterError(f"{name}: a {type(buf).__name__} does not support the buffer protocol") from None
    if not mv.c_contiguous:
        raise ParameterError(f"{name}: the buffer is not C-contiguous")
    if writable and mv.readonly:
        raise ParameterError(f"{name}: the buffer is read-only")
    return np.frombuffer(mv.cast("B"), dtype=np.uint8)


def agree(comm: MPI.Comm, error: str | None, signature: dict[str, Any] | None) -> None:
    """Raise the same :class:`ParameterError` on every rank if any rank has an error or
    the ranks' signatures differ; return quietly on every rank otherwise."""
    infos = comm.allgather((error, signature))
    errors = [(r, e) for r, (e, _) in enumerate(infos) if e]
    if errors:
        r, e = errors[0]
        if len(errors) == len(infos) and all(x == e for _, x in errors):
            raise ParameterError(e)
        more = f" (and {len(errors) - 1} other ranks)" if len(errors) > 1 else ""
        raise ParameterError(f"rank {r}: {e}{more}")
    first = infos[0][1] or {}
    for r, (_, sig) in enumerate(infos):
        for key, value in first.items():
            if (sig or {}).get(key) != value:
                raise ParameterError(
                    f"ranks disagree on {key}: rank 0 has {value!r}, rank {r} has {(sig or {}).get(key)!r}")


#: The MPI operation of each reduction name.
MPI_OPS: dict[str, MPI.Op] = {
    "sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN, "band": MPI.BAND, "bor": MPI.BOR,
    "bxor": MPI.BXOR, "land": MPI.LAND, "lor": MPI.LOR,
}

#: The positional buffers of each collective, as in MPI.
BUFFERS: dict[str, tuple[str, ...]] = {
    name: ("buf",) if name == "bcast" else () if coll.synchronizes else ("sendbuf", "recvbuf")
    for name, coll in COLLECTIVES.items()
}

_EMPTY = np.zeros(0, dtype=np.uint8)


@dataclass
class Bound:
    """The user's buffers of one rank as byte views, and what they imply."""

    send: np.ndarray
    recv: np.ndarray
    size: int
    dtype: str | None = None
    typed: tuple[Any, Any] = (None, None)


def bind_buffers(collective: str, buffers: tuple[Any, ...], procs: int, me: int, root: int) -> Bound:
    """Check and view the user's buffers; raise :class:`ParameterError` naming the buffer."""
    names = BUFFERS[collective]
    if len(buffers) != len(names):
        raise ParameterError(f"{collective} takes {len(names)} buffer(s) ({', '.join(names) or 'none'}), "
                             f"got {len(buffers)}")
    if collective == "bcast":
        data = as_bytes(buffers[0])
        return Bound(_EMPTY, data, len(data))
    if not names:
        return Bound(_EMPTY, _EMPTY, 0)
    sendbuf, recvbuf = buffers
    send_used = collective != "scatter" or me == root
    recv_used = collective not in ("gather", "reduce") or me == root
    send = as_bytes(sendbuf, "sendbuf", writable=False) if send_used else _EMPTY
    recv = as_bytes(recvbuf, "recvbuf") if recv_used else _EMPTY
    if len(send) and len(recv) and np.may_share_memory(send, recv):
        raise ParameterError("sendbuf and recvbuf overlap (MPI_IN_PLACE is not supported)")
    bound = Bound(send, recv, len(send))
    if collective == "scatter":
        bound.size = len(recv)
    elif collective == "alltoall":
        if len(send) % procs:
            raise ParameterError(f"sendbuf has {len(send)} bytes, not {procs} equal blocks")
        bound.size = len(send) // procs
    if get_collective(collective).reduces:
        for name, buf, used in (("sendbuf", sendbuf, True), ("recvbuf", recvbuf, recv_used)):
            if used and not isinstance(buf, np.ndarray):
                raise ParameterError(f"{name}: {collective} needs numpy arrays (their dtype says what to combine)")
        dtype = sendbuf.dtype
        if recv_used and recvbuf.dtype != dtype:
            raise ParameterError(f"recvbuf has dtype {recvbuf.dtype}, sendbuf {dtype}")
        if dtype.name not in REDUCTION_DTYPES or not dtype.isnative:
            raise ParameterError(f"sendbuf: dtype {dtype} cannot be reduced; valid: {', '.join(REDUCTION_DTYPES)} "
                                 f"in native byte order")
        bound.dtype = dtype.name
        bound.typed = (sendbuf, recvbuf if recv_used else None)
    return bound




def table_source(table: DecisionTable | str | os.PathLike[str] | None) -> tuple[str, Any]:
    """What names the table of an ``"auto"`` call: ``("object", id)`` for a table object, else
    ``("file", absolute path)`` of ``table`` or of ``COLLTUNE_TABLE``."""
    if isinstance(table, DecisionTable):
        return ("object", id(table))
    spec = table if table is not None else os.environ.get(TABLE_ENV)
    if not spec:
        raise ParameterError(f"algorithm 'auto' needs a decision table: pass table=FILE or set {TABLE_ENV} "
                             f"(colltune tune writes one)")
    return ("file", os.path.abspath(os.fspath(spec)))


def _frozen(value: Any) -> Any:
    """``value`` as a part of a signature: itself when hashable, else its repr."""
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


@dataclass
class Call:
    """A collective call's arguments, checked on this rank (:func:`examine`).

    ``key`` is its signature: collective, algorithm as asked, root, block size in bytes, op, dtype,
    parameters and, for ``"auto"``, the table's :func:`table_source`; equal on every rank of a
    correct program.
    """

    collective: str
    procs: int
    me: int
    algorithm: str
    params: dict[str, Any]
    table: Any
    bound: Bound
    problem: Problem
    key: tuple[Any, ...] = field(default=())


def examine(collective: str, buffers: tuple[Any, ...], root: Any, comm: MPI.Comm, algorithm: Any, op: str | None,
            table: Any, params: dict[str, Any]) -> Call:
    """Check a call's arguments on this rank; raise :class:`ParameterError` naming what is wrong."""
    coll = get_collective(collective)
    if not coll.rooted and root != 0:
        raise ParameterError(f"{collective} has no root; got root={root!r}")
    if op is not None and not coll.reduces:
        raise ParameterError(f"{collective} does not reduce; it takes no op")
    procs, me = comm.Get_size(), comm.Get_rank()
    try:
        root = operator.index(root)
    except TypeError:
        raise ParameterError(f"root must be an integer, got {root!r}") from None
    if not 0 <= root < procs:
        raise ParameterError(f"root must be a rank in 0..{procs - 1}, got {root!r}")
    if not isinstance(algorithm, str):
        raise ParameterError(f"algorithm must be a name, got {algorithm!r}")
    if algorithm != AUTO and table is not None:
        raise ParameterError("table= is only used with algorithm='auto'")
    bound = bind_buffers(collective, buffers, procs, me, root)
    problem = Problem(collective, procs, root, bound.size, op=op if coll.reduces else None, dtype=bound.dtype)
    want_send, want_recv = coll.buffers(problem)
    for name, view, want in (("sendbuf", bound.send, want_send[me]), ("recvbuf", bound.recv, want_recv[me])):
        if len(view) != want:
            raise ParameterError(f"{name} has {len(view)} bytes; {collective} of {problem.size}-byte "
                                 f"blocks on {procs} ranks needs {want}")
    key = (collective, algorithm, root, problem.size, problem.op, problem.dtype,
           tuple(sorted((k, _frozen(v)) for k, v in params.items())),
           table_source(table) if algorithm == AUTO else None)
    return Call(collective, procs, me, algorithm, params, table, bound, problem, key)


@dataclass(frozen=True)
class Decision:
    """What a call runs: a registered algorithm with checked parameters, or ``native``; for
    ``"auto"`` from a file, the file and its version (:func:`~colltune.runtime.state.file_version`)."""

    algorithm: str
    params: dict[str, Any]
    signature: dict[str, Any]
    table_file: str | None = None
    table_version: tuple[int, int, int] | None = None


def decide(call: Call) -> Decision:
    """Decide what ``call`` runs (``"auto"`` reads its table); raise :class:`ParameterError` on a
    bad algorithm or parameter."""
    algorithm, params, problem = call.algorithm, call.params, call.problem
    table_file = version = None
    if algorithm == AUTO:
        if params:
            raise ParameterError(f"algorithm 'auto' takes its parameters from the table, got {sorted(params)}")
        kind, where = call.key[7]
        if kind == "file":
            table_file, version = where, file_version(where)
            table = active_table(where)
        else:
            table = call.table
        if table.library != "colltune":
            raise ParameterError(f"{where if kind == 'file' else 'the table'}: it decides among {table.library}'s own "
                                 f"algorithms (colltune tune --library {table.library}), which colltune does not run; "
                                 f"export it for {table.library} instead (colltune tune --mpich-json)")
        algorithm, params = table.lookup(call.collective, call.procs, problem.size)
        if algorithm != NATIVE and REGISTRY.get(call.collective, algorithm).needs_commutative \
                and not problem.commutative:
            algorithm, params = NATIVE, {}
    if algorithm == NATIVE:
        if params:
            raise ParameterError(f"algorithm 'native' takes no parameters, got {sorted(params)}")
        name, values = NATIVE, {}
    else:
        try:
            alg = REGISTRY.get(call.collective, algorithm)
        except UnknownAlgorithmError as exc:
            raise ParameterError(f"{exc}, or {NATIVE}") from None
        name, values = alg.name, alg.validate_params(params)
    signature = {"collective": call.collective, "algorithm": name, "root": problem.root,
                 "size in bytes": problem.size, "op": problem.op, "dtype": problem.dtype, "parameters": values}
    return Decision(name, values, signature, table_file, version)
