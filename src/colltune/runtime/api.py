"""The public collective API: plans built once and run many times, and one-shot calls.

Bad input raises the same :class:`~colltune.errors.ParameterError` on every rank: the ranks
compare their local errors and arguments (:func:`~colltune.runtime.calls.agree`) when a plan is
built and on the first one-shot call of each signature.  Later one-shot calls of a signature
reuse what the first one agreed, decided, compiled and bound (:mod:`colltune.runtime.state`), so
that a one-shot call costs what a plan's ``run()`` costs: the public one-shot functions are
compiled fronts (:func:`_front`) that find the cached call by the communicator, the arguments and
the buffers' addresses and run it without entering Python; the Python functions below only see
first calls, new buffers and bad input.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from colltune.errors import ColltuneError, ParameterError
from colltune.runtime import compiled
from colltune.runtime.calls import AUTO, BUFFERS, Call, Decision, agree, decide, examine
from colltune.runtime.runners import COLLECTIVE_IDS, PythonRunner, make_runner, recipe
from colltune.runtime.state import CommState, Entry, auto_units, existing_state, state_of
from colltune.tune.table import NATIVE, DecisionTable

#: Executors a plan can ask for (``executor=``); None takes the compiled one where it is available.
EXECUTORS = ("compiled", "python")


class Plan:
    """A collective bound to buffers, algorithm and communicator; :meth:`run` it many times.

    Built by :func:`plan`.  ``algorithm`` and ``params`` say what runs (for ``"auto"``, what the
    table chose), ``executor`` which executor runs it (``"compiled"`` or ``"python"``), ``comm``
    colltune's private duplicate of the communicator.  :meth:`free` (or leaving a ``with`` block)
    releases its persistent requests; freeing the communicator frees its plans too.
    """

    def __init__(self, state: CommState, collective: str, decision: Decision, executor: str, runner: Any,
                 keep: Any):
        self.collective = collective
        self.algorithm = decision.algorithm
        self.params = decision.params
        self.executor = executor
        self.comm = state.dup
        self._runner = runner
        self._keep = keep
        self.run = runner.run  # the runner's own method: no Python between the call and the executor
        state.plans.add(self)

    def run(self) -> None:  # type: ignore[no-redef]  # replaced per instance by the runner's run
        """Execute the collective once (every rank of the communicator must call it)."""
        raise ColltuneError("this plan has been freed")

    def free(self) -> None:
        """Release the persistent requests (idempotent)."""
        if self._runner is not None:
            self._runner.release()
            self._runner = None
            self._keep = None
            self.run = self._freed  # type: ignore[method-assign]

    @staticmethod
    def _freed() -> None:
        raise ColltuneError("this plan has been freed (by free(), by leaving its with block, or by freeing "
                            "its communicator)")

    def __enter__(self) -> Plan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


def plan(collective: str, *buffers: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE,
         op: str | None = None, table: DecisionTable | str | os.PathLike[str] | None = None,
         executor: str | None = None, **params: Any) -> Plan:
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
    executor: ``"compiled"`` (C++, the default where it is available), or ``"python"`` (the
        reference executor, slower).
    params: the algorithm's parameters, e.g. ``segment_size=8192`` (bytes).
    """
    comm = _communicator(comm)
    state = state_of(comm)
    error, call, decision = None, None, None
    try:
        if executor not in (None, *EXECUTORS):
            raise ParameterError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
        if executor == "compiled" and compiled.ENGINE is None:
            raise ParameterError(f"the compiled executor is not available: {compiled.UNAVAILABLE}")
        call = examine(collective, buffers, root, comm, algorithm, op, table, params)
        decision = decide(call)
    except ColltuneError as exc:
        error = str(exc)
    agree(state.dup, error, decision.signature if decision else None)
    assert call is not None and decision is not None
    made = recipe(call, decision, use_compiled=executor != "python", hosts=state.hosts)
    runner, keep = make_runner(made, state, call.bound, shared=False)
    return Plan(state, collective, decision, made.executor, runner, (call.bound, keep))


def _communicator(comm: Any) -> MPI.Comm:
    if comm is None:
        return MPI.COMM_WORLD
    if not isinstance(comm, MPI.Comm):
        raise ParameterError(f"comm must be an mpi4py communicator, got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ParameterError("comm is MPI.COMM_NULL: this rank is not in the communicator, so it takes no part "
                             "in its collectives")
    if comm.Is_inter():
        raise ParameterError("comm is an intercommunicator; colltune's collectives take intracommunicators")
    return comm


def _once(collective: str, buffers: tuple[Any, ...], root: Any, comm: Any, algorithm: Any, op: str | None,
          params: dict[str, Any]) -> None:
    """A one-shot call that its compiled front did not run (or any one-shot call without the compiled
    executor): agree and decide if the signature is new, bind if the buffers are, run, cache."""
    comm = _communicator(comm)
    state = state_of(comm)
    table = params.get("table")
    algorithm_params = {k: v for k, v in params.items() if k != "table"}
    error, call = None, None
    try:
        call = examine(collective, buffers, root, comm, algorithm, op, table, algorithm_params)
    except ColltuneError as exc:
        error = str(exc)
    entry = state.find(call.key) if call is not None else None
    if entry is None or state.full_check:
        decision = None
        if call is not None:
            try:
                decision = decide(call)
            except ColltuneError as exc:
                error = str(exc)
        agree(state.dup, error, decision.signature if decision else None)
        assert call is not None and decision is not None
        if entry is None or (entry.recipe.algorithm, entry.recipe.params) != (decision.algorithm, decision.params):
            entry = state.add(lambda group: _entry(call, decision, group, state.hosts))
    assert call is not None
    if entry.auto and state.tick_auto(auto_units(call.problem.size)):
        _once(collective, buffers, root, comm, algorithm, op, params)  # the table changed: decide again
        return
    coll = COLLECTIVE_IDS[collective]
    b0, b1 = _key_buffers(collective, buffers)
    cache = state.cache
    if cache is not None and cache.run(coll, algorithm, root, op, params, b0, b1):
        return
    runner, _ = make_runner(entry.recipe, state, call.bound, shared=cache is not None)
    runner.run()
    if cache is not None and not isinstance(runner, PythonRunner):
        cache.insert(coll, algorithm, root, op, params, b0, b1, runner, entry.group, entry.auto,
                     auto_units(call.problem.size))
    else:
        runner.release()


def _entry(call: Call, decision: Decision, group: int, hosts: tuple[int, ...]) -> Entry:
    return Entry(call.key, recipe(call, decision, use_compiled=True, hosts=hosts), group, decision.table_file,
                 decision.table_version)


def _key_buffers(collective: str, buffers: tuple[Any, ...]) -> tuple[Any, Any]:
    """The two buffer arguments of a call as the call cache keys them (None where there is none)."""
    if len(buffers) == 2:
        return buffers[0], buffers[1]
    return (buffers[0] if buffers else None), None


def call_cache(comm: MPI.Comm | None = None) -> list[dict[str, Any]]:
    """What colltune keeps for ``comm``'s one-shot calls: each signature (least recently used
    first) with the algorithm it runs and the executor; empty before the first call."""
    state = existing_state(_communicator(comm))
    return state.describe() if state is not None else []


def bcast(buf: Any, root: int = 0, comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Broadcast ``buf`` from ``root`` to every rank of ``comm``, in place.

    The same as ``plan("bcast", buf, root=root, comm=comm, algorithm=algorithm, **params).run()``
    (see :func:`plan`), at the cost of ``run()`` from the second call on with the same arguments.
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


def reduce(sendbuf: Any, recvbuf: Any, op: str = "sum", root: int = 0, comm: MPI.Comm | None = None,
           algorithm: str = NATIVE, **params: Any) -> None:
    """Combine every rank's ``sendbuf`` elementwise with ``op`` into the root's ``recvbuf`` (numpy arrays
    of one dtype)."""
    _once("reduce", (sendbuf, recvbuf), root, comm, algorithm, op, params)


def allreduce(sendbuf: Any, recvbuf: Any, op: str = "sum", comm: MPI.Comm | None = None, algorithm: str = NATIVE,
              **params: Any) -> None:
    """Combine every rank's ``sendbuf`` elementwise with ``op`` into every rank's ``recvbuf``."""
    _once("allreduce", (sendbuf, recvbuf), 0, comm, algorithm, op, params)


def barrier(comm: MPI.Comm | None = None, algorithm: str = NATIVE, **params: Any) -> None:
    """Return on each rank only once every rank of ``comm`` has called it."""
    _once("barrier", (), 0, comm, algorithm, None, params)


def _front(fn: Callable[..., None]) -> Callable[..., None]:
    """``fn``, a one-shot function, or where the compiled executor is available its compiled front:
    a builtin with the same parameters that runs a cached call without entering Python and hands
    every other call to ``fn`` unchanged."""
    engine = compiled.ENGINE
    if engine is None:
        return fn
    sig = inspect.signature(fn)
    named = [p for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    bare = sig.replace(parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                       return_annotation=sig.empty)
    return engine.front(fn, COLLECTIVE_IDS[fn.__name__], [p.name for p in named],
                        [None if p.default is p.empty else p.default for p in named],
                        [p.default is p.empty for p in named], f"{fn.__name__}{bare}")


bcast, scatter, gather, allgather, alltoall, reduce, allreduce, barrier = (
    _front(f) for f in (bcast, scatter, gather, allgather, alltoall, reduce, allreduce, barrier))

__all__ = ["AUTO", "BUFFERS", "EXECUTORS", "NATIVE", "Plan", "allgather", "allreduce", "alltoall", "barrier",
           "bcast", "call_cache", "gather", "plan", "reduce", "scatter"]
