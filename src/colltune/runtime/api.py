"""The public collective API: plans built once and run many times, and one-shot calls.

Every call that can fail on bad input first agrees on the input across the
communicator (one ``allgather`` of each rank's arguments and local error), so
that bad input raises the same :class:`~colltune.errors.ParameterError` on
every rank instead of failing on one rank while the others hang.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.algorithms import REGISTRY
from colltune.collectives import Problem, get_collective
from colltune.errors import ColltuneError, ParameterError, UnknownAlgorithmError
from colltune.runtime.executor import ScheduleExecutor
from colltune.schedule import Buf

NATIVE = "native"


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


def plan(collective: str, buf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
         **params: Any) -> Plan:
    """Build a plan for ``collective`` on ``buf`` (collective: call on every rank of ``comm``).

    Parameters
    ----------
    collective: ``"bcast"``.
    buf: the message buffer, numpy array or any contiguous writable buffer; its size in bytes
        must be the same on every rank.
    root: the root rank.
    comm: the communicator (default ``MPI.COMM_WORLD``).
    algorithm: a registered algorithm name or alias (``colltune algorithms``), or ``"native"``
        for the MPI library's own collective.
    params: the algorithm's parameters, e.g. ``segment_size=8192`` (bytes).
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    error, signature = None, None
    try:
        get_collective(collective)
        if collective != "bcast":
            raise ParameterError(f"the runtime does not run {collective!r} yet; it runs: bcast")
        data = as_bytes(buf)
        problem = Problem(collective, comm.Get_size(), root, len(data))
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
        signature = {"collective": collective, "algorithm": name, "root": root, "size in bytes": len(data),
                     "parameters": values}
    except ColltuneError as exc:
        error = str(exc)
    agree(comm, error, signature)
    private = comm.Dup()
    if name == NATIVE:
        return Plan(collective, name, private, lambda: private.Bcast([data, MPI.BYTE], root), None, values)
    schedule = alg.schedule(problem.procs, root, problem.size, **values)
    executor = ScheduleExecutor(schedule, private, {Buf.RECV: data})
    return Plan(collective, name, private, executor.run, executor, values)


def bcast(buf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place.

    One-shot form of ``plan("bcast", buf, root, comm, algorithm, **params).run()``;
    see :func:`plan`.  Build a plan instead when broadcasting repeatedly.
    """
    with plan("bcast", buf, root=root, comm=comm, algorithm=algorithm, **params) as p:
        p.run()
