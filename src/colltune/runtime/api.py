"""The public collective API: plans built once and run many times, and one-shot calls.

Every call that can fail on bad input first agrees on the input across the
communicator (one ``allgather`` of each rank's arguments and local error), so
that bad input raises the same :class:`~colltune.errors.ParameterError` on
every rank instead of failing on one rank while the others hang.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES, Problem, get_collective
from colltune.errors import ColltuneError, ParameterError, UnknownAlgorithmError
from colltune.runtime.executor import ScheduleExecutor
from colltune.schedule import REDUCTION_DTYPES, Buf
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


class Plan:
    """A collective bound to buffers, algorithm and communicator; :meth:`run` it many times.

    Built by :func:`plan`.  Holds a private duplicate of the communicator and, for
    schedule algorithms, persistent requests; :meth:`free` (or leaving a ``with``
    block) releases them.
    """

    def __init__(self, collective: str, algorithm: str, comm: MPI.Comm, run: Any, executor: ScheduleExecutor | None,
                 params: dict[str, Any]):
        self.collective = collective
        self.algorithm = algorithm
        self.params = params
        self.comm = comm
        self._run = run
        self._executor = executor

    def run(self) -> None:
        """Execute the collective once (every rank of the communicator must call it)."""
        if self._run is None:
            raise ColltuneError("this plan has been freed")
        self._run()

    def free(self) -> None:
        """Release the persistent requests and the private communicator."""
        if self._executor is not None:
            self._executor.free()
            self._executor = None
        if self._run is not None:
            self.comm.Free()
            self._run = None

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


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
class _Bound:
    """The user's buffers of one rank as byte views, and what they imply."""

    send: np.ndarray
    recv: np.ndarray
    size: int
    dtype: str | None = None
    typed: tuple[Any, Any] = (None, None)


def _bind(collective: str, buffers: tuple[Any, ...], procs: int, me: int, root: int) -> _Bound:
    """Check and view the user's buffers; raise :class:`ParameterError` naming the buffer."""
    names = BUFFERS[collective]
    if len(buffers) != len(names):
        raise ParameterError(f"{collective} takes {len(names)} buffer(s) ({', '.join(names) or 'none'}), "
                             f"got {len(buffers)}")
    if collective == "bcast":
        data = as_bytes(buffers[0])
        return _Bound(_EMPTY, data, len(data))
    if not names:
        return _Bound(_EMPTY, _EMPTY, 0)
    sendbuf, recvbuf = buffers
    send_used = collective != "scatter" or me == root
    recv_used = collective not in ("gather", "reduce") or me == root
    send = as_bytes(sendbuf, "sendbuf", writable=False) if send_used else _EMPTY
    recv = as_bytes(recvbuf, "recvbuf") if recv_used else _EMPTY
    if len(send) and len(recv) and np.may_share_memory(send, recv):
        raise ParameterError("sendbuf and recvbuf overlap (MPI_IN_PLACE is not supported)")
    bound = _Bound(send, recv, len(send))
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


def plan(collective: str, *buffers: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
         op: str | None = None, table: DecisionTable | str | os.PathLike[str] | None = None, **params: Any) -> Plan:
    """Build a plan for ``collective`` on the given buffers (collective: call on every rank of ``comm``).

    Parameters
    ----------
    collective: one of :data:`~colltune.collectives.COLLECTIVES`.
    buffers: the collective's buffers in MPI order (:data:`BUFFERS`): ``buf`` for bcast (in place),
        none for barrier, else ``sendbuf, recvbuf``; numpy arrays or contiguous buffer-protocol
        objects, numpy arrays for the reductions.  Sizes follow :mod:`colltune.collectives`: blocks
        of the same number of bytes on every rank.  Buffers MPI ignores on a rank (the scatter's
        sendbuf, the gather's and reduce's recvbuf away from the root) may be ``None`` there.
    root: the root rank of a rooted collective.
    comm: the communicator (default ``MPI.COMM_WORLD``).
    algorithm: a registered algorithm name or alias (``colltune algorithms``), ``"native"``
        for the MPI library's own collective, or ``"auto"``: what the decision table says for this
        collective, process count and block size (``native`` where it has no entry, and where it
        names an algorithm that needs a commutative operation the call does not have).
    table: for ``"auto"``, a :class:`~colltune.tune.DecisionTable` or its file; default: the file
        named by the ``COLLTUNE_TABLE`` environment variable.
    op: for reduce and allreduce, the operation's name (default ``"sum"``; see
        :data:`~colltune.schedule.ir.REDUCTION_OPS`), applied elementwise over the sendbuf's dtype.
    params: the algorithm's parameters, e.g. ``segment_size=8192`` (bytes).
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    error, signature = None, None
    try:
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
        bound = _bind(collective, buffers, procs, me, root)
        problem = Problem(collective, procs, root, bound.size, op=op if coll.reduces else None, dtype=bound.dtype)
        want_send, want_recv = coll.buffers(problem)
        for name, view, want in (("sendbuf", bound.send, want_send[me]), ("recvbuf", bound.recv, want_recv[me])):
            if len(view) != want:
                raise ParameterError(f"{name} has {len(view)} bytes; {collective} of {problem.size}-byte "
                                     f"blocks on {procs} ranks needs {want}")
        if algorithm == AUTO:
            if params:
                raise ParameterError(f"algorithm 'auto' takes its parameters from the table, got {sorted(params)}")
            algorithm, params = active_table(table).lookup(collective, procs, problem.size)
            if algorithm != NATIVE and REGISTRY.get(collective, algorithm).needs_commutative \
                    and not problem.commutative:
                algorithm, params = NATIVE, {}
        elif table is not None:
            raise ParameterError("table= is only used with algorithm='auto'")
        if algorithm == NATIVE:
            if params:
                raise ParameterError(f"algorithm 'native' takes no parameters, got {sorted(params)}")
            name, values = NATIVE, {}
        else:
            try:
                alg = REGISTRY.get(collective, algorithm)
            except UnknownAlgorithmError as exc:
                raise ParameterError(f"{exc}, or {NATIVE}") from None
            name, values = alg.name, alg.validate_params(params)
        signature = {"collective": collective, "algorithm": name, "root": root, "size in bytes": problem.size,
                     "op": problem.op, "dtype": problem.dtype, "parameters": values}
    except ColltuneError as exc:
        error = str(exc)
    agree(comm, error, signature)
    private = comm.Dup()
    if name == NATIVE:
        return Plan(collective, name, private, _native(collective, private, bound, problem), None, values)
    schedule = alg.schedule_for(problem, **values)
    executor = ScheduleExecutor(schedule, private, {Buf.SEND: bound.send, Buf.RECV: bound.recv})
    return Plan(collective, name, private, executor.run, executor, values)


def _native(collective: str, comm: MPI.Comm, bound: _Bound, problem: Problem) -> Callable[[], None]:
    """The MPI library's own collective on the bound buffers."""
    send, recv, root = [bound.send, MPI.BYTE], [bound.recv, MPI.BYTE], problem.root
    me = comm.Get_rank()
    if collective == "bcast":
        return lambda: comm.Bcast(recv, root)
    if collective == "scatter":
        return lambda: comm.Scatter(send if me == root else None, recv, root)
    if collective == "gather":
        return lambda: comm.Gather(send, recv if me == root else None, root)
    if collective == "allgather":
        return lambda: comm.Allgather(send, recv)
    if collective == "alltoall":
        return lambda: comm.Alltoall(send, recv)
    if collective == "barrier":
        return comm.Barrier
    typed_send, typed_recv = bound.typed
    mpi_op = MPI_OPS[str(problem.op)]
    if collective == "reduce":
        return lambda: comm.Reduce(typed_send, typed_recv, op=mpi_op, root=root)
    return lambda: comm.Allreduce(typed_send, typed_recv, op=mpi_op)


def bcast(buf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place.

    One-shot form of ``plan("bcast", buf, root=root, comm=comm, algorithm=algorithm, **params).run()``;
    see :func:`plan`.  Build a plan instead when broadcasting repeatedly.
    """
    _once("bcast", (buf,), root, comm, algorithm, None, params)


def scatter(sendbuf: Any, recvbuf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
            **params: Any) -> None:
    """Send block ``r`` of the root's ``sendbuf`` (P blocks) to rank ``r``'s ``recvbuf`` (one block)."""
    _once("scatter", (sendbuf, recvbuf), root, comm, algorithm, None, params)


def gather(sendbuf: Any, recvbuf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
           **params: Any) -> None:
    """Put rank ``r``'s ``sendbuf`` (one block) at block ``r`` of the root's ``recvbuf`` (P blocks)."""
    _once("gather", (sendbuf, recvbuf), root, comm, algorithm, None, params)


def allgather(sendbuf: Any, recvbuf: Any, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
              **params: Any) -> None:
    """Put rank ``r``'s ``sendbuf`` (one block) at block ``r`` of every rank's ``recvbuf`` (P blocks)."""
    _once("allgather", (sendbuf, recvbuf), 0, comm, algorithm, None, params)


def alltoall(sendbuf: Any, recvbuf: Any, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
             **params: Any) -> None:
    """Send block ``d`` of rank ``s``'s ``sendbuf`` to block ``s`` of rank ``d``'s ``recvbuf`` (P blocks each)."""
    _once("alltoall", (sendbuf, recvbuf), 0, comm, algorithm, None, params)


def reduce(sendbuf: np.ndarray, recvbuf: np.ndarray | None, op: str = "sum", root: int = 0,
           comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Combine every rank's ``sendbuf`` elementwise with ``op`` into the root's ``recvbuf`` (numpy arrays
    of one dtype)."""
    _once("reduce", (sendbuf, recvbuf), root, comm, algorithm, op, params)


def allreduce(sendbuf: np.ndarray, recvbuf: np.ndarray, op: str = "sum", comm: MPI.Comm | None = None,
              algorithm: str = NATIVE, **params: Any) -> None:
    """Combine every rank's ``sendbuf`` elementwise with ``op`` into every rank's ``recvbuf``."""
    _once("allreduce", (sendbuf, recvbuf), 0, comm, algorithm, op, params)


def barrier(comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Return on each rank only once every rank of ``comm`` has called it."""
    _once("barrier", (), 0, comm, algorithm, None, params)


def _once(collective: str, buffers: tuple[Any, ...], root: int, comm: MPI.Comm | None, algorithm: str,
          op: str | None, params: dict[str, Any]) -> None:
    with plan(collective, *buffers, root=root, comm=comm, algorithm=algorithm, op=op, **params) as p:
        p.run()
