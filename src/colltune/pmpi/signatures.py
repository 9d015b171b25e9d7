"""What the interposition library (``cpp/interpose.cpp``) asks Python: the decision for a call's
signature, and a runner of it bound to one rank's buffers.

The library sees C arguments (addresses, counts, handles); it hands Python only the signature that
every rank passes alike: the collective, the communicator, the root, the block size in bytes and,
for reductions, the datatype and operation.  :func:`resolve` is called on the first call of a
signature on a communicator, at the same call on every rank (collective: the ranks agree on it
with one ``allgather``, :func:`~colltune.runtime.calls.agree`); :func:`bind` when a rank passes
buffers it has not passed before (local).  Everything after that runs from C++.

The decision is the runtime's ``algorithm="auto"`` (:func:`~colltune.runtime.calls.decide`): the
table named by ``COLLTUNE_TABLE``, ``native`` where it has no entry, for a process count it does
not cover, for an operation or datatype colltune's executor does not reduce, and wherever any rank
finds the call unfit (the ranks agree, so either every rank runs colltune's algorithm or every rank
calls the library).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI
from mpi4py.util.dtlib import to_numpy_dtype

from colltune.collectives import COLLECTIVES, Problem, get_collective
from colltune.errors import ColltuneError
from colltune.runtime import compiled
from colltune.runtime.calls import AUTO, Bound, Call, agree, decide, table_source
from colltune.runtime.runners import COLLECTIVE_IDS, MPI_OPS, Recipe, make_runner, recipe
from colltune.runtime.state import CommState, state_of
from colltune.schedule import REDUCTION_DTYPES
from colltune.tune.table import NATIVE

#: The collectives by the numbers the library uses (the order of COLLECTIVES).
COLLECTIVE_NAMES: dict[int, str] = {i: name for name, i in COLLECTIVE_IDS.items()}

_OP_NAMES: dict[int, str] = {op.handle: name for name, op in MPI_OPS.items()}


@dataclass
class Signature:
    """An agreed signature on one communicator that runs one of colltune's algorithms."""

    state: CommState
    recipe: Recipe

    @property
    def algorithm(self) -> str:
        return self.recipe.algorithm

    @property
    def params_json(self) -> str:
        """The algorithm's parameters as JSON (for record mode)."""
        return json.dumps(self.recipe.params, sort_keys=True)


def _reduction(datatype: int, op: int) -> tuple[str, str]:
    """(op name, dtype name) of a reduction, or raise ColltuneError where colltune cannot reduce it."""
    name = _OP_NAMES.get(op)
    if name is None:
        raise ColltuneError("the operation is not one colltune's executor applies (a user operation, "
                            "MINLOC, MAXLOC or REPLACE)")
    try:
        dtype = to_numpy_dtype(MPI.Datatype.fromhandle(datatype))
    except (ValueError, KeyError, TypeError):
        raise ColltuneError("the datatype has no numpy equivalent") from None
    if dtype.name not in REDUCTION_DTYPES or not dtype.isnative:
        raise ColltuneError(f"colltune's executor does not reduce {dtype}")
    return name, dtype.name


def resolve(collective: int, comm_handle: int, size: int, root: int, datatype: int, op: int,
            unfit: str | None = None) -> Signature | None:
    """Decide a signature (collective: every rank of the communicator calls it at the same call).

    ``size`` is the block size in bytes (:mod:`colltune.collectives`); ``datatype`` and ``op`` are
    handles, significant for reductions only; ``unfit`` says why this rank cannot run colltune's
    algorithm for this call (the root's own datatype or size), if it cannot.  Returns None where
    the library's own collective runs (the table says ``native``, or some rank found the call
    unfit), else the :class:`Signature` to :func:`bind`.
    """
    name = COLLECTIVE_NAMES[collective]
    comm = MPI.Comm.fromhandle(comm_handle)
    state = state_of(comm)
    error, decision, made = None, None, None
    try:
        if unfit:
            raise ColltuneError(unfit)
        if compiled.ENGINE is None:
            raise ColltuneError(f"the compiled executor is not available: {compiled.UNAVAILABLE}")
        op_name = dtype_name = None
        if get_collective(name).reduces:
            op_name, dtype_name = _reduction(datatype, op)
        procs, me = comm.Get_size(), comm.Get_rank()
        problem = Problem(name, procs, root, size, op=op_name, dtype=dtype_name)
        key = (name, AUTO, root, size, op_name, dtype_name, (), table_source(None))
        call = Call(name, procs, me, AUTO, {}, None, None, problem, key)  # type: ignore[arg-type]
        decision = decide(call)
        if decision.algorithm != NATIVE:  # built before the ranks agree: a schedule that cannot be built is unfit
            made = recipe(call, decision, use_compiled=True, hosts=state.hosts)
    except ColltuneError as exc:
        error = str(exc)
    try:
        agree(state.dup, error, decision.signature if decision else None)
    except ColltuneError:
        return None
    return None if made is None else Signature(state, made)


def _view(address: int, nbytes: int) -> np.ndarray:
    if nbytes == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer(MPI.memory.fromaddress(address, nbytes), dtype=np.uint8)


def bind(sig: Signature, send: int, recv: int) -> tuple[int, int, Any]:
    """Bind ``sig`` to this rank's buffers at addresses ``send`` and ``recv`` (local).

    Returns ``(function, runner, keep)``: the runner's C entry (``Runner.entry``) and what must be
    held while it may run."""
    problem = sig.recipe.problem
    me = sig.state.dup.Get_rank()
    want_send, want_recv = COLLECTIVES[problem.collective].buffers(problem)
    bound = Bound(_view(send, int(want_send[me])), _view(recv, int(want_recv[me])), problem.size)
    runner, scratch = make_runner(sig.recipe, sig.state, bound, shared=False)
    function, address = runner.entry
    return function, address, (runner, scratch, bound)
