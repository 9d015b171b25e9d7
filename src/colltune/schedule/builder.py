"""Building schedules: one op at a time, in bulk from numpy arrays, or in rounds.

The builder hands out op ids in insertion order; dependencies name those ids.
:meth:`ScheduleBuilder.build` sorts ops by rank (keeping insertion order within
a rank as the posting order), remaps the dependencies, validates everything and
returns an immutable :class:`~colltune.schedule.ir.Schedule`.

Two conveniences sit on top:

* :meth:`ScheduleBuilder.bulk` appends many ops of one kind from arrays, which is
  how a schedule of a million messages builds in seconds;
* :meth:`ScheduleBuilder.fence` gives libNBC-style rounds: no op a rank adds
  after a fence starts before every op that rank added before it (since the
  previous fence) has completed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from colltune.errors import ScheduleError
from colltune.limits import MAX_OPS
from colltune.schedule.ir import (
    COLUMNS,
    REDUCTION_DTYPES,
    REDUCTION_OPS,
    Buf,
    Kind,
    Region,
    Schedule,
    validate_columns,
)


class ScheduleBuilder:
    """Accumulates operations for ``procs`` ranks and builds a :class:`Schedule`.

    Parameters
    ----------
    procs:
        Number of ranks (>= 1).
    send_bytes, recv_bytes:
        Size in bytes of each rank's SEND and RECV buffer: one int for all ranks,
        or a sequence of ``procs`` ints.
    """

    def __init__(self, procs: int, send_bytes: int | Sequence[int] = 0, recv_bytes: int | Sequence[int] = 0):
        if procs < 1:
            raise ScheduleError(f"a schedule needs at least one rank, got procs={procs}")
        self.procs = int(procs)
        self._sizes = np.zeros((self.procs, 3), dtype=np.int64)
        self._sizes[:, Buf.SEND] = send_bytes
        self._sizes[:, Buf.RECV] = recv_bytes
        self._rows: dict[str, list] = {name: [] for name in COLUMNS}
        self._chunks: list[dict[str, np.ndarray]] = []
        self._dep_op: list[np.ndarray] = []
        self._dep_on: list[np.ndarray] = []
        self._dep_start: list[np.ndarray] = []
        self._s_dep_op: list[int] = []
        self._s_dep_on: list[int] = []
        self._s_dep_start: list[bool] = []
        self._n = 0
        self._since_fence: dict[int, list[int]] = {}
        self._fence_deps: dict[int, list[int]] = {}

    # -- buffers ---------------------------------------------------------------
    def need_scratch(self, rank: int, nbytes: int) -> None:
        """Make sure ``rank`` has at least ``nbytes`` of SCRATCH buffer."""
        self._sizes[rank, Buf.SCRATCH] = max(int(self._sizes[rank, Buf.SCRATCH]), int(nbytes))

    # -- one op at a time ------------------------------------------------------
    def _grow(self, n: int) -> None:
        """Count ``n`` more ops; past :data:`colltune.limits.MAX_OPS` raise :class:`ScheduleError`."""
        if self._n + n > MAX_OPS:
            raise ScheduleError(f"the schedule of {self.procs} ranks grows past {MAX_OPS} ops, the most colltune "
                                f"builds (choose fewer ranks, or an algorithm with fewer messages)")
        self._n += n

    def _add(self, rank: int, requires: Iterable[int], irequires: Iterable[int], **fields: Any) -> int:
        i = self._n
        rows = self._rows
        fields["rank"] = rank
        for name, (_, default) in COLUMNS.items():
            rows[name].append(fields.get(name, default))
        if self._n >= MAX_OPS:
            self._grow(1)  # raises
        self._n += 1
        reqs = list(requires) + self._fence_deps.pop(rank, [])
        for d in reqs:
            self._dep(i, d, False)
        for d in irequires:
            self._dep(i, d, True)
        self._since_fence.setdefault(rank, []).append(i)
        return i

    def _dep(self, op: int, on: int, start: bool) -> None:
        if not 0 <= on < op:
            raise ScheduleError(f"op #{op} depends on op #{on}, which is not an earlier op")
        self._s_dep_op.append(op)
        self._s_dep_on.append(int(on))
        self._s_dep_start.append(start)

    def send(self, rank: int, peer: int, region: Region, tag: int = 0,
             requires: Iterable[int] = (), irequires: Iterable[int] = ()) -> int:
        """Add a non-blocking send of ``region`` from ``rank`` to ``peer``; return its op id."""
        return self._add(rank, requires, irequires, kind=Kind.SEND, peer=peer, tag=tag,
                         buf=region.buf, offset=region.offset, length=region.length)

    def recv(self, rank: int, peer: int, region: Region, tag: int = 0,
             requires: Iterable[int] = (), irequires: Iterable[int] = ()) -> int:
        """Add a non-blocking receive into ``region`` of ``rank`` from ``peer``; return its op id."""
        return self._add(rank, requires, irequires, kind=Kind.RECV, peer=peer, tag=tag,
                         buf=region.buf, offset=region.offset, length=region.length)

    def copy(self, rank: int, src: Region, dst: Region,
             requires: Iterable[int] = (), irequires: Iterable[int] = ()) -> int:
        """Add a local copy of ``src`` to ``dst`` (same length) on ``rank``."""
        if src.length != dst.length:
            raise ScheduleError(f"rank {rank}: copy {src} -> {dst} has different lengths")
        return self._add(rank, requires, irequires, kind=Kind.COPY, buf=dst.buf, offset=dst.offset,
                         length=dst.length, src_buf=src.buf, src_offset=src.offset)

    def reduce(self, rank: int, src: Region, dst: Region, op: str, dtype: str,
               requires: Iterable[int] = (), irequires: Iterable[int] = ()) -> int:
        """Add ``dst = src op dst`` elementwise over ``dtype`` on ``rank`` (``src`` is the left operand)."""
        if src.length != dst.length:
            raise ScheduleError(f"rank {rank}: reduce {src} into {dst} has different lengths")
        if op not in REDUCTION_OPS:
            raise ScheduleError(f"unknown reduction operation {op!r}; valid: {', '.join(REDUCTION_OPS)}")
        if dtype not in REDUCTION_DTYPES:
            raise ScheduleError(f"unknown reduction dtype {dtype!r}; valid: {', '.join(REDUCTION_DTYPES)}")
        return self._add(rank, requires, irequires, kind=Kind.REDUCE, buf=dst.buf, offset=dst.offset,
                         length=dst.length, src_buf=src.buf, src_offset=src.offset,
                         redop=REDUCTION_OPS.index(op), dtype=REDUCTION_DTYPES.index(dtype))

    def delay(self, rank: int, seconds: float,
              requires: Iterable[int] = (), irequires: Iterable[int] = ()) -> int:
        """Add a pure delay of ``seconds`` on ``rank``."""
        return self._add(rank, requires, irequires, kind=Kind.DELAY, delay=float(seconds))

    def fence(self, rank: int) -> None:
        """Start a new round on ``rank``: later ops of ``rank`` start only once all its ops since the last
        fence have completed.

        The next op of ``rank`` requires them; since a rank posts its ops in order, every op after it
        then waits for them too, without a dependency of its own (which would make a schedule of n
        rounds of k ops carry n k^2 dependencies instead of n k).
        """
        done = self._since_fence.pop(rank, [])
        if done:
            self._fence_deps[rank] = done

    # -- many ops at once -----------------------------------------------------
    def bulk(self, kind: Kind | np.ndarray, rank: np.ndarray, requires: np.ndarray | None = None,
             **fields: np.ndarray | float) -> np.ndarray:
        """Append ``len(rank)`` ops of one ``kind`` (or one per op) from arrays; return their op ids.

        ``fields`` are columns of :data:`~colltune.schedule.ir.COLUMNS` (arrays or
        scalars broadcast to all ops). ``requires`` is an ``(n, k)`` int array of op
        ids each op requires, ``-1`` for none.  Fences do not apply to bulk ops.
        """
        self._flush_rows()
        rank = np.array(rank, dtype=np.int32).ravel()  # its own copy: build() may keep it as the column
        n = len(rank)
        unknown = set(fields) - set(COLUMNS)
        if unknown:
            raise ScheduleError(f"bulk: unknown columns {sorted(unknown)}")
        chunk: dict[str, np.ndarray] = {}
        for name, (dtype, default) in COLUMNS.items():
            value = np.asarray(fields.get(name, default), dtype=dtype)
            if value.ndim == 0:
                chunk[name] = value  # one value for all its ops, placed as such by build()
            else:
                chunk[name] = np.broadcast_to(value, (n,)).copy()
        kinds = np.asarray(kind, dtype=COLUMNS["kind"][0])
        chunk["kind"] = kinds if kinds.ndim == 0 else np.broadcast_to(kinds, (n,)).copy()
        chunk["rank"] = rank
        ids = np.arange(self._n, self._n + n, dtype=np.int64)
        if requires is not None:
            req = np.asarray(requires, dtype=np.int64).reshape(n, -1)
            op = np.repeat(ids, req.shape[1])
            on = req.ravel()
            keep = on >= 0
            op, on = op[keep], on[keep]
            if np.any(on >= op):
                raise ScheduleError("bulk: an op requires an op that is not earlier")
            self._dep_op.append(op)
            self._dep_on.append(on)
            self._dep_start.append(np.zeros(len(op), dtype=bool))
        self._grow(n)
        self._chunks.append(chunk)
        return ids

    def depend(self, op: np.ndarray, on: np.ndarray, start: np.ndarray | None = None) -> None:
        """Add dependencies in bulk: op ``op[k]`` requires op ``on[k]`` (op ids as returned),
        *irequires* where ``start[k]`` (it waits for that op's start, not its completion); without
        ``start``, every one waits for completion."""
        op, on = np.asarray(op, dtype=np.int64).ravel(), np.asarray(on, dtype=np.int64).ravel()
        start = np.zeros(len(op), dtype=bool) if start is None else np.asarray(start, dtype=bool).ravel()
        if not len(op) == len(on) == len(start):
            raise ScheduleError("depend: op, on and start must have one entry per dependency")
        bad = (on < 0) | (on >= op) | (op >= self._n)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ScheduleError(f"op #{int(op[k])} depends on op #{int(on[k])}, which is not an earlier op")
        self._dep_op.append(op)
        self._dep_on.append(on)
        self._dep_start.append(start)

    def _flush_rows(self) -> None:
        if self._rows["kind"]:
            self._chunks.append({name: np.asarray(vals, dtype=COLUMNS[name][0])
                                 for name, vals in self._rows.items()})
            self._rows = {name: [] for name in COLUMNS}

    # -- result ----------------------------------------------------------------
    def build(self, meta: Mapping[str, Any] | None = None) -> Schedule:
        """Validate and return the immutable schedule."""
        self._flush_rows()
        n, procs = self._n, self.procs
        counts = np.zeros(procs, dtype=np.int64)
        for ch in self._chunks:
            rank = ch["rank"]
            if len(rank) and (rank.min() < 0 or rank.max() >= procs):
                i = int(np.flatnonzero((rank < 0) | (rank >= procs))[0])
                raise ScheduleError(f"op rank {int(rank[i])} outside 0..{procs - 1}")
            counts += np.bincount(rank, minlength=procs)
        rank_ptr = np.zeros(procs + 1, dtype=np.int64)
        np.cumsum(counts, out=rank_ptr[1:])
        cols, at = self._place(rank_ptr)
        validate_columns(procs, self._sizes, cols)
        dep_op = np.concatenate(self._dep_op + [np.asarray(self._s_dep_op, dtype=np.int64)])
        dep_on = np.concatenate(self._dep_on + [np.asarray(self._s_dep_on, dtype=np.int64)])
        dep_start = np.concatenate(self._dep_start + [np.asarray(self._s_dep_start, dtype=bool)])
        if len(dep_op):
            if at is not None:
                dep_op, dep_on = at[dep_op], at[dep_on]
            rank_before = cols["rank"][dep_op]
            wrong = rank_before != cols["rank"][dep_on]
            if wrong.any():
                k = int(np.flatnonzero(wrong)[0])
                mine = (lambda i: i) if at is None else (lambda i: int(np.flatnonzero(at == i)[0]))  # op ids
                raise ScheduleError(
                    f"op #{mine(dep_op[k])} on rank {int(rank_before[k])} depends on op #{mine(dep_on[k])} "
                    f"of rank {int(cols['rank'][dep_on[k]])}; dependencies stay within a rank")
            order = np.lexsort((dep_start, dep_on, dep_op))  # one order, however they were added
            dep_op, dep_on, dep_start = dep_op[order], dep_on[order], dep_start[order]
        dep_ptr = np.zeros(n + 1, dtype=np.int64)
        if len(dep_op):
            np.cumsum(np.bincount(dep_op, minlength=n), out=dep_ptr[1:])
        return Schedule(procs=procs, buffer_sizes=self._sizes.copy(), columns=cols, rank_ptr=rank_ptr,
                        dep_ptr=dep_ptr, dep_idx=dep_on, dep_start=dep_start, meta=dict(meta or {}))

    def _place(self, rank_ptr: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """The columns with the ops sorted by rank, each rank's in insertion order (``rank_ptr``
        marks where each rank's start), and, where there are dependencies to remap and the ops
        moved, each op id's place in them (None: each op's place is its id).  Each chunk's ops are written straight to their places: no sort of the
        whole schedule, no second copy of its columns."""
        n = self._n
        if len(self._chunks) == 1 and bool(np.all(self._chunks[0]["rank"][:-1] <= self._chunks[0]["rank"][1:])):
            only = self._chunks[0]  # in place already: its arrays are the columns
            cols = {name: only[name] if only[name].ndim else np.full(n, only[name], dtype=dtype)
                    for name, (dtype, _) in COLUMNS.items()}
            return cols, None  # op ids are places
        cols = {name: np.empty(n, dtype=dtype) for name, (dtype, _) in COLUMNS.items()}
        at = np.empty(n, dtype=np.int64) if self._dep_op or self._s_dep_op else None
        free = rank_ptr[:-1].copy()  # each rank's next place
        first = 0
        for ch in self._chunks:
            rank = ch["rank"]
            m = len(rank)
            if m == 0:
                continue
            perm = None if bool(np.all(rank[:-1] <= rank[1:])) else np.argsort(rank, kind="stable")
            ranks = rank if perm is None else rank[perm]
            here = np.bincount(ranks, minlength=self.procs)
            starts = np.cumsum(here) - here
            where = free[ranks] + (np.arange(m) - starts[ranks])
            free += here
            for name, col in cols.items():
                value = ch[name]
                col[where] = value if value.ndim == 0 or perm is None else value[perm]
            if at is not None:
                at[first + (np.arange(m) if perm is None else perm)] = where
            first += m
        return cols, at
