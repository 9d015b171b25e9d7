"""Runners: what performs a decided call on one rank, with the compiled executor or in Python.

A :class:`Recipe` is made once per signature (:mod:`colltune.runtime.state`): the decided
algorithm and this rank's part of its schedule, compiled (:mod:`colltune.runtime.compiled`) or kept
for the Python executor.  :func:`make_runner` binds a recipe to a rank's buffers.  Every runner has
``run()`` and ``release()``.  ``native`` runs the library's collective: from C++ with the compiled
executor, through mpi4py otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES, Problem
from colltune.runtime import compiled
from colltune.runtime.calls import Bound, Call, Decision
from colltune.runtime.executor import ScheduleExecutor
from colltune.schedule import Buf, Schedule
from colltune.tune.table import NATIVE

#: Each collective's number in the compiled executor (the order of COLLECTIVES).
COLLECTIVE_IDS: dict[str, int] = {name: i for i, name in enumerate(COLLECTIVES)}

#: The MPI operation of each reduction name.
MPI_OPS: dict[str, MPI.Op] = {
    "sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN, "band": MPI.BAND, "bor": MPI.BOR,
    "bxor": MPI.BXOR, "land": MPI.LAND, "lor": MPI.LOR,
}

_INT_MAX = 2**31 - 1


class PythonRunner:
    """A runner made of Python callables (the Python executor, or mpi4py's collective)."""

    def __init__(self, run: Callable[[], None], release: Callable[[], None] | None = None):
        self.run = run
        self._release = release

    def release(self) -> None:
        if self._release is not None:
            self._release()
            self._release = None


@dataclass
class Recipe:
    """How one rank performs a decided call: ``native``, or its part of the schedule, compiled
    (``program``) or for the Python executor (``schedule``)."""

    collective: str
    algorithm: str
    params: dict[str, Any]
    problem: Problem
    compiled: bool
    program: Any = None
    schedule: Schedule | None = None

    @property
    def executor(self) -> str:
        """``"compiled"`` or ``"python"``: which executor runs it."""
        return "compiled" if self.compiled else "python"


def recipe(call: Call, decision: Decision, use_compiled: bool, hosts: tuple[int, ...] | None = None) -> Recipe:
    """The recipe of a decided call on this rank (builds the schedule, compiles this rank's part);
    a hierarchical algorithm reads ``hosts``, each rank's host label."""
    use_compiled = use_compiled and compiled.ENGINE is not None
    made = Recipe(call.collective, decision.algorithm, decision.params, call.problem, use_compiled)
    if decision.algorithm == NATIVE:
        return made
    alg = REGISTRY.get(call.collective, decision.algorithm)
    problem = replace(call.problem, hosts=hosts) if alg.hierarchical else call.problem
    schedule = alg.schedule_for(problem, **decision.params)
    if use_compiled:
        made.program = compiled.program(schedule, call.me)
    else:
        made.schedule = schedule
    return made


def _native_args(r: Recipe) -> tuple[int, int, int, int, int, int] | None:
    """(collective, block bytes, root, elements, datatype, op) for the compiled native call, or None
    where it cannot make it (more than INT_MAX elements to reduce)."""
    p = r.problem
    if p.op is None:
        return COLLECTIVE_IDS[r.collective], p.size, p.root, 0, 0, 0
    dtype = np.dtype(str(p.dtype))
    count = p.size // dtype.itemsize
    if count > _INT_MAX:
        return None
    return (COLLECTIVE_IDS[r.collective], p.size, p.root, count, MPI._typedict[dtype.char].handle,
            MPI_OPS[p.op].handle)


def make_runner(r: Recipe, state: Any, bound: Bound, shared: bool) -> tuple[Any, Any]:
    """A runner of ``r`` on these buffers, and what must stay alive while it exists.

    ``shared``: for the communicator's call cache (its runners use the cache's scratch buffer);
    otherwise the runner owns its scratch (a plan)."""
    engine = compiled.ENGINE
    send, recv = compiled.address(bound.send), compiled.address(bound.recv)
    if r.algorithm == NATIVE:
        args = _native_args(r) if r.compiled else None
        if args is None:
            return PythonRunner(_native(r.collective, state.dup, bound, r.problem)), None
        if shared:
            return state.cache.native(*args, send, recv), None
        return engine.native(*args, state.dup.handle, send, recv), None
    if r.compiled:
        if shared:
            return state.cache.bind(r.program, send, recv, state.scratch_for(r.program.scratch_bytes)), None
        scratch = compiled.scratch_buffer(r.program.scratch_bytes)
        return engine.bind(r.program, state.dup.handle, send, recv, compiled.address(scratch)), scratch
    executor = ScheduleExecutor(r.schedule, state.dup, {Buf.SEND: bound.send, Buf.RECV: bound.recv})
    return PythonRunner(executor.run, executor.free), None


def _native(collective: str, comm: MPI.Comm, bound: Bound, problem: Problem) -> Callable[[], None]:
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
