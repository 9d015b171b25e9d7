"""What colltune keeps per communicator: its private duplicate, the signatures the ranks agreed on,
and the cache of bound one-shot calls.

Kept as an MPI attribute of the user's communicator, made by the first colltune call on it and
freed with it (``comm.Free()`` frees the duplicate, releases every cached call and frees the
plans built on it).  Two levels, so that the ranks stay in step without talking:

* **signatures** (collective, algorithm as asked, root, block size, op, dtype, parameters, and
  for ``"auto"`` the table): what every rank passes alike.  The first call of a signature is
  agreed across the ranks (one ``allgather``), decided (``auto`` reads its table), and its
  schedule compiled for this rank.  Every rank sees the same sequence of signatures, so every rank
  misses and hits at the same calls, and the least recently used signature (beyond
  :data:`MAX_SIGNATURES`) is dropped on every rank at the same call.
* **bound calls** (a signature on this rank's buffers, by address): the persistent requests of a
  schedule, or the library's collective, on those buffers.  Binding is local, so a rank that
  passes a new buffer binds it without the others; at most :data:`MAX_BINDINGS` per communicator
  are kept, least recently used out.  They share one scratch buffer per communicator, as large as
  the largest needs (one-shot calls run one at a time).

Memory: the compiled program of at most 64 signatures (this rank's operations only: a few dozen
bytes per operation), the persistent requests of at most 64 bound calls, and one scratch buffer.

After a signature's first call the ranks no longer compare their arguments: a rank whose
arguments differ from the others' (another root, size or algorithm) is not told so, and the job
fails or hangs as an MPI program with mismatched collective calls does.  ``COLLTUNE_CHECK=full``,
set before the first colltune call on a communicator, agrees on every call (and still reuses the
bound calls).

A decision table read from a file (``table=FILE`` or ``COLLTUNE_TABLE``) is checked for changes
every :data:`TABLE_RECHECK_CALLS` ``"auto"`` calls on a communicator: every rank looks at the
file's time stamp and size, the ranks agree (one ``allreduce``) whether any saw a change, and if
one did, every ``"auto"`` signature is decided again from the file as it is now.
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from mpi4py import MPI

from colltune.runtime import compiled

#: Signatures kept per communicator (see the module docstring).
MAX_SIGNATURES = 64
#: Bound calls kept per communicator.
MAX_BINDINGS = 64
#: ``"auto"`` calls between two checks of the table files (each check is one small ``allreduce``,
#: so at 100 calls it costs under 1 % of the cheapest collective it is amortised over).
TABLE_RECHECK_CALLS = 100
#: Environment variable: ``full`` agrees on the arguments of every call, not only the first.
CHECK_ENV = "COLLTUNE_CHECK"


def file_version(path: str) -> tuple[int, int, int] | None:
    """(mtime in ns, size, inode) of a table file, None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


@dataclass
class Entry:
    """An agreed signature and, for this rank, how it runs (a :class:`~colltune.runtime.runners.Recipe`)."""

    key: tuple[Any, ...]
    recipe: Any
    group: int
    #: For ``"auto"`` from a file: the file and its version when decided.
    table_file: str | None = None
    table_version: tuple[int, int, int] | None = None

    @property
    def auto(self) -> bool:
        return self.key[1] == "auto"


class CommState:
    """colltune's state for one communicator (collective to create: it duplicates ``comm``)."""

    def __init__(self, comm: MPI.Comm):
        self.dup = comm.Dup()
        self.full_check = os.environ.get(CHECK_ENV, "").strip().lower() == "full"
        engine = compiled.ENGINE
        self.cache = (engine.cache(comm.handle, self.dup.handle, self.full_check, MAX_BINDINGS, TABLE_RECHECK_CALLS)
                      if engine is not None else None)
        self.entries: OrderedDict[tuple[Any, ...], Entry] = OrderedDict()
        self.plans: weakref.WeakSet[Any] = weakref.WeakSet()
        self.closed = False
        self._groups = 0
        self._auto_calls = 0

    # -- signatures ---------------------------------------------------------------------------
    def find(self, key: tuple[Any, ...]) -> Entry | None:
        """The entry of a signature, marked as just used; None if it is not kept."""
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def add(self, entry_of: Callable[[int], Entry]) -> Entry:
        """Keep the entry ``entry_of(group)`` makes, dropping the least recently used beyond the bound."""
        self._groups += 1
        entry = entry_of(self._groups)
        self.drop(entry.key)
        self.entries[entry.key] = entry
        while len(self.entries) > MAX_SIGNATURES:
            self.drop(next(iter(self.entries)))
        return entry

    def drop(self, key: tuple[Any, ...]) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None and self.cache is not None:
            self.cache.drop_group(entry.group)

    # -- the periodic check of table files --------------------------------------------------------
    def tick_auto(self) -> None:
        """Count an ``"auto"`` call; every TABLE_RECHECK_CALLS-th one checks the table files
        (collective: every rank counts the same calls)."""
        n = (self.cache.auto_calls if self.cache is not None else self._auto_calls) + 1
        if n >= TABLE_RECHECK_CALLS:
            self.recheck_tables()
            n = 0
        if self.cache is not None:
            self.cache.auto_calls = n
        else:
            self._auto_calls = n

    def recheck_tables(self) -> bool:
        """Agree whether any rank's table file changed since its signatures were decided; if so,
        forget every ``"auto"`` signature decided from a file (collective).  Returns whether."""
        changed = any(e.table_file is not None and file_version(e.table_file) != e.table_version
                      for e in self.entries.values())
        changed = bool(self.dup.allreduce(changed, op=MPI.LOR))
        if changed:
            for key in [k for k, e in self.entries.items() if e.table_file is not None]:
                self.drop(key)
        return changed

    # -- end of life ----------------------------------------------------------------------------
    def close(self) -> None:
        """Free everything (called when the communicator is freed)."""
        if self.closed:
            return
        self.closed = True
        for p in list(self.plans):
            p.free()
        if self.cache is not None:
            self.cache.close()
        self.entries.clear()
        if not MPI.Is_finalized():
            self.dup.Free()

    def describe(self) -> list[dict[str, Any]]:
        """The kept signatures, least recently used first: what each call asked and what runs."""
        return [{"signature": dict(zip(("collective", "algorithm", "root", "size", "op", "dtype", "params"),
                                       e.key[:7])),
                 "runs": e.recipe.algorithm, "params": dict(e.recipe.params), "executor": e.recipe.executor,
                 **({"table": e.table_file} if e.table_file else {})}
                for e in self.entries.values()]


@cache
def _keyval() -> int:
    return MPI.Comm.Create_keyval(delete_fn=lambda comm, keyval, state: state.close())


def state_of(comm: MPI.Comm) -> CommState:
    """The state of ``comm``, made on first use (collective then: every rank's first colltune call
    on ``comm`` makes it)."""
    keyval = _keyval()
    state = comm.Get_attr(keyval)
    if state is None:
        state = CommState(comm)
        comm.Set_attr(keyval, state)
    return state


def existing_state(comm: MPI.Comm) -> CommState | None:
    """The state of ``comm`` if a colltune call has made one."""
    return comm.Get_attr(_keyval())
