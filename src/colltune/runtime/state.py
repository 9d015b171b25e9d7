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

Which signature was least recently used is counted on a clock of the communicator's calls, ticked
by every call whether it runs from the call cache (in C++) or in Python, so it is the same on every
rank.

Memory: the compiled program of at most 64 signatures (this rank's operations only: a few dozen
bytes per operation), the persistent requests of at most 64 bound calls, and one scratch buffer.

After a signature's first call the ranks no longer compare their arguments: a rank whose
arguments differ from the others' (another root, size or algorithm) is not told so, and the job
fails or hangs as an MPI program with mismatched collective calls does.  ``COLLTUNE_CHECK=full``,
set before the first colltune call on a communicator, agrees on every call (and still reuses the
bound calls).

A decision table read from a file (``table=FILE`` or ``COLLTUNE_TABLE``) is checked for changes
after every :data:`TABLE_RECHECK_UNITS` of ``"auto"`` work on a communicator (every 10,000 calls
of small messages, every 154 of 4 MiB): every rank looks at the file's time stamp, size and inode,
and the ranks combine what they saw with a non-blocking ``allreduce`` that the next check reads; if
some rank saw a change, every ``"auto"`` signature is then decided again from the file as it is
(so a change takes effect within two check periods, on every rank at the same call).
"""

from __future__ import annotations

import os
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.runtime import compiled
from colltune.runtime.hosts import host_labels

#: Signatures kept per communicator (see the module docstring).
MAX_SIGNATURES = 64
#: Bound calls kept per communicator.
MAX_BINDINGS = 64
#: Work of ``"auto"`` calls between two checks of the table files: a call counts
#: :func:`auto_units` (1, plus 1 per 64 KiB of its block).  A check (a file status and a
#: non-blocking ``allreduce``, called from the compiled front) takes about 70 us here, so small
#: calls, checked every 10,000, pay about 7 ns each, under 1 % of the cheapest collective on this
#: project's machine (about 1.2 us); a 4 MiB call counts 65 and is checked every 154.
TABLE_RECHECK_UNITS = 10_000
#: Bytes of a call's block per unit of work beyond the first.
UNIT_BYTES = 65536
#: Environment variable: ``full`` agrees on the arguments of every call, not only the first.
CHECK_ENV = "COLLTUNE_CHECK"


def auto_units(size: int) -> int:
    """The work an ``"auto"`` call with blocks of ``size`` bytes counts towards the next table check."""
    return 1 + size // UNIT_BYTES


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
    #: Recency where there is no call cache (see :meth:`CommState.touch`).
    last_use: int = 0

    @property
    def auto(self) -> bool:
        return self.key[1] == "auto"


class CommState:
    """colltune's state for one communicator (collective to create: it duplicates ``comm``)."""

    def __init__(self, comm: MPI.Comm):
        self.dup = comm.Dup()
        #: Each rank's host label (:func:`colltune.runtime.hosts.host_labels`), for the
        #: hierarchical algorithms.
        self.hosts = host_labels(self.dup)
        self.full_check = os.environ.get(CHECK_ENV, "").strip().lower() == "full"
        engine = compiled.ENGINE
        self.cache = (engine.cache(comm.handle, self.dup.handle, self.full_check, MAX_BINDINGS, TABLE_RECHECK_UNITS)
                      if engine is not None else None)
        if self.cache is not None:  # a cached "auto" call that reaches a check makes it from C++
            self.cache.on_check = self.recheck_tables
        self.entries: OrderedDict[tuple[Any, ...], Entry] = OrderedDict()
        self.plans: weakref.WeakSet[Any] = weakref.WeakSet()
        self.closed = False
        _open_states().add(self)
        self._groups = 0
        self._auto_units = 0
        self._clock = 0
        #: The scratch buffer the bound calls share (one-shot calls run one at a time), from numpy
        #: like a plan's: large ones get transparent huge pages where the system gives them on request.
        self.scratch = np.zeros(0, dtype=np.uint8)
        self._seen = np.zeros(1, dtype=np.int32)  # the table check in flight: its buffer and request
        self._check: MPI.Request | None = None

    # -- signatures ---------------------------------------------------------------------------
    def find(self, key: tuple[Any, ...]) -> Entry | None:
        """The entry of a signature, marked as just called; None if it is not kept."""
        entry = self.entries.get(key)
        if entry is not None:
            self.touch(entry)
        return entry

    def touch(self, entry: Entry) -> None:
        """Mark ``entry`` as just called (calls served by the call cache mark themselves there)."""
        if self.cache is not None:
            self.cache.touch(entry.group)
        else:
            self._clock += 1
            entry.last_use = self._clock

    def last_use(self, entry: Entry) -> int:
        return self.cache.last_use(entry.group) if self.cache is not None else entry.last_use

    def add(self, entry_of: Callable[[int], Entry]) -> Entry:
        """Keep the entry ``entry_of(group)`` makes, dropping the least recently called ones beyond
        the bound (the same on every rank: recency counts calls, which every rank makes alike)."""
        self._groups += 1
        entry = entry_of(self._groups)
        self.drop(entry.key)
        self.entries[entry.key] = entry
        self.touch(entry)
        while len(self.entries) > MAX_SIGNATURES:
            self.drop(min(self.entries.values(), key=self.last_use).key)
        return entry

    def drop(self, key: tuple[Any, ...]) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None and self.cache is not None:
            self.cache.drop_group(entry.group)

    def scratch_for(self, nbytes: int) -> int:
        """The address of the shared scratch buffer, grown to ``nbytes`` (which drops every bound call,
        since they use the old one)."""
        if nbytes > len(self.scratch):
            if self.cache is not None:
                self.cache.clear()
            self.scratch = compiled.scratch_buffer(nbytes)
        return compiled.address(self.scratch)

    # -- the periodic check of table files --------------------------------------------------------
    def tick_auto(self, units: int) -> bool:
        """Count an ``"auto"`` call of ``units`` (:func:`auto_units`); once TABLE_RECHECK_UNITS are
        reached, check the table files (collective: every rank counts the same calls) and return
        whether they changed."""
        n = (self.cache.auto_units if self.cache is not None else self._auto_units) + units
        changed = False
        if n >= TABLE_RECHECK_UNITS:
            changed = self.recheck_tables()
            n = 0
        if self.cache is not None:
            self.cache.auto_units = n
        else:
            self._auto_units = n
        return changed

    def recheck_tables(self) -> bool:
        """The periodic check of the table files (collective): every rank looks whether its table
        files changed since their signatures were decided, and the ranks combine what they saw with
        a non-blocking ``allreduce`` whose outcome the *next* check reads, so that no rank waits for
        the others here.  If that outcome says some rank saw a change, every ``"auto"`` signature
        decided from a file is forgotten (and decided again at its next call).  Returns whether."""
        changed = False
        if self._check is not None:
            self._check.Wait()
            changed = bool(self._seen[0])
        if changed:
            for key in [k for k, e in self.entries.items() if e.table_file is not None]:
                self.drop(key)
        self._seen[0] = any(e.table_file is not None and file_version(e.table_file) != e.table_version
                            for e in self.entries.values())
        self._check = self.dup.Iallreduce(MPI.IN_PLACE, self._seen, op=MPI.LOR)
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
        self.scratch = np.zeros(0, dtype=np.uint8)
        if not MPI.Is_finalized():
            if self._check is not None:
                self._check.Wait()
            self.dup.Free()

    def describe(self) -> list[dict[str, Any]]:
        """The kept signatures, least recently called first: what each call asked and what runs."""
        return [{"signature": dict(zip(("collective", "algorithm", "root", "size", "op", "dtype", "params"),
                                       e.key[:7])),
                 "runs": e.recipe.algorithm, "params": dict(e.recipe.params), "executor": e.recipe.executor,
                 **({"table": e.table_file} if e.table_file else {})}
                for e in sorted(self.entries.values(), key=self.last_use)]


@cache
def _keyval() -> int:
    return MPI.Comm.Create_keyval(delete_fn=lambda comm, keyval, state: state.close())


@cache
def _open_states() -> weakref.WeakSet[CommState]:
    """Every open state, closed before MPI is finalized.  MPI_Finalize first frees the attributes
    of MPI_COMM_SELF, while MPI still works (MPI-4.0, section 11.2.2); this set is one, whose
    delete callback closes them, so that no persistent request or duplicate is left for MPI to
    find (MPICH reports each one it frees itself)."""
    states: weakref.WeakSet[CommState] = weakref.WeakSet()
    keyval = MPI.Comm.Create_keyval(delete_fn=lambda comm, keyval, value: [st.close() for st in list(value)])
    MPI.COMM_SELF.Set_attr(keyval, states)
    return states


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
