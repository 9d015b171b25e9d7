"""Symbolic execution of a schedule: matching, deadlock, data races, postcondition.

Every input byte of the collective gets a symbolic label (its origin rank,
buffer and offset).  The verifier executes the schedule under the semantics of
:mod:`colltune.schedule.ir` (in-order posting, *requires* waits for completion,
MPI matching by source, tag and posting order, sends unbuffered so that a send
completes only once its receive is posted), moving labels instead of bytes.
Buffers are kept as interval maps, so verifying a multi-megabyte broadcast
costs time proportional to the number of messages, not bytes.

It checks, and raises :class:`~colltune.errors.VerificationError` naming the
rank, the operation and the region on the first violation:

1. every send meets a receive with the same (source, destination, tag) in
   posting order, and both have the same length;
2. no deadlock: every operation of every rank starts and completes;
3. no region is read before it is written: a send or copy reads only defined
   bytes, and only bytes whose writer is *guaranteed* to have completed, i.e.
   the reader (or an op before it in its rank's list) requires that writer;
4. no race: a region is not written while an earlier, not yet guaranteed
   complete, send reads it or receive writes it;
5. no op writes a SEND buffer (the user's input, read-only);
6. reductions: a ``REDUCE`` uses the problem's operation and dtype, combines
   whole elements at the same offset of the ranks' vectors, never combines a
   contribution twice and, for a non-commutative operation, combines only
   adjacent runs of ranks in order (``x_a..x_b op x_{b+1}..x_c``);
7. the postcondition of the collective (:mod:`colltune.collectives`): every
   rank ends with exactly the bytes the definition demands; for reductions,
   every contribution exactly once;
8. for a barrier, that every rank, before it can finish, has received a chain of
   messages from every other rank that started after that rank entered.  Only
   receives carry this knowledge: MPI may complete a send before its receive is
   posted (eager protocol), so a completed send proves nothing about the peer.

Reduction results are labelled symbolically too: a byte holding the
combination of several ranks' byte ``o`` carries a label that names the tuple of
contributing ranks (in combination order) and ``o``.

Because matching has no wildcards (the verifier rejects schedules with them)
and posting is in list order, the matching is the same in every execution, and greedy execution reaches every state any
execution can; so a schedule that passes is correct for every timing.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from colltune import collectives  # a module, not names: colltune.collectives imports the schedule IR
from colltune.errors import VerificationError
from colltune.schedule.ir import REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Schedule, region_str

_UNDEFINED = -1
_INITIAL = -2  # writer id of input data present at the start
#: Labels from here on name a reduction term: ``_TERM_BASE + term_id * _TERM_STRIDE + vector offset``.
_TERM_BASE = 1 << 62
_TERM_STRIDE = 1 << 40


class _Content:
    """Symbolic content of one buffer: disjoint pieces ``[start, end)`` with a label
    (``-1`` for undefined bytes) that increases by one per byte, and a writer op."""

    __slots__ = ("ends", "starts", "vals", "writers")

    def __init__(self, size: int):
        self.starts: list[int] = [0] if size else []
        self.ends: list[int] = [size] if size else []
        self.vals: list[int] = [_UNDEFINED] if size else []
        self.writers: list[int] = [_UNDEFINED] if size else []

    def _split(self, x: int) -> int:
        """Make a piece start at ``x``; return its index (``len`` if ``x`` is the end)."""
        starts = self.starts
        k = bisect_right(starts, x) - 1
        if k < 0 or x >= self.ends[-1]:
            return len(starts)
        if starts[k] == x:
            return k
        s, v = starts[k], self.vals[k]
        starts.insert(k + 1, x)
        self.ends.insert(k + 1, self.ends[k])
        self.vals.insert(k + 1, v + (x - s) if v >= 0 else _UNDEFINED)
        self.writers.insert(k + 1, self.writers[k])
        self.ends[k] = x
        return k + 1

    def read(self, off: int, length: int) -> list[tuple[int, int, int, int]]:
        """Pieces of ``[off, off+length)`` as ``(rel_start, rel_end, label, writer)``."""
        out = []
        end = off + length
        k = max(bisect_right(self.starts, off) - 1, 0)
        starts, ends, vals, writers = self.starts, self.ends, self.vals, self.writers
        while k < len(starts) and starts[k] < end:
            s, e = max(starts[k], off), min(ends[k], end)
            if s < e:
                v = vals[k]
                out.append((s - off, e - off, v + (s - starts[k]) if v >= 0 else _UNDEFINED, writers[k]))
            k += 1
        return out

    def write(self, off: int, pieces: list[tuple[int, int, int, int]], writer: int) -> None:
        """Replace ``[off, off + total)`` with ``pieces`` (as returned by :meth:`read`)."""
        if not pieces:
            return
        i = self._split(off)
        j = self._split(off + pieces[-1][1])
        self.starts[i:j] = [off + p[0] for p in pieces]
        self.ends[i:j] = [off + p[1] for p in pieces]
        self.vals[i:j] = [p[2] for p in pieces]
        self.writers[i:j] = [writer] * len(pieces)

    def fill(self, off: int, length: int, label: int) -> None:
        """Place input data: ``length`` bytes labelled from ``label``, written at the start."""
        self.write(off, [(0, length, label, _INITIAL)], _INITIAL)


class _Accesses:
    """Send reads and receive writes of one buffer that may still be in flight."""

    __slots__ = ("items", "maxlen", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.items: list[tuple[int, int, int, bool]] = []  # (start, end, op, is_write)
        self.maxlen = 0

    def add(self, start: int, end: int, op: int, is_write: bool) -> None:
        k = bisect_right(self.starts, start)
        self.starts.insert(k, start)
        self.items.insert(k, (start, end, op, is_write))
        self.maxlen = max(self.maxlen, end - start)

    def conflicts(self, start: int, end: int, writes: bool, done_before: Any) -> int | None:
        """An overlapping in-flight access that conflicts with a new one, else None.

        ``done_before(op)`` says whether ``op`` is guaranteed complete; such
        entries are dropped as they are met.
        """
        k = bisect_left(self.starts, end) - 1
        while k >= 0 and self.starts[k] + self.maxlen > start:
            _, e, op, is_write = self.items[k]
            if done_before(op):
                del self.starts[k]
                del self.items[k]
            elif e > start and (writes or is_write):
                return op
            k -= 1
        return None


@dataclass(frozen=True)
class VerifyReport:
    """What a successful verification established."""

    problem: collectives.Problem
    ops: int
    messages: int
    bytes_sent: int

    def as_dict(self) -> dict[str, Any]:
        return {"collective": self.problem.collective, "procs": self.problem.procs, "root": self.problem.root,
                "size": self.problem.size, "ops": self.ops, "messages": self.messages,
                "bytes_sent": self.bytes_sent}


def problem_of(schedule: Schedule) -> collectives.Problem:
    """The :class:`Problem` recorded in a schedule's metadata."""
    m = schedule.meta
    try:
        return collectives.Problem(m["collective"], schedule.procs, int(m.get("root", 0)), int(m["size"]), op=m.get("op"),
                       dtype=m.get("dtype"), commutative=bool(m.get("commutative", True)))
    except KeyError as exc:
        raise VerificationError(f"schedule metadata lacks {exc.args[0]!r}; pass the problem explicitly") from None


def verify(schedule: Schedule, problem: collectives.Problem | None = None) -> VerifyReport:
    """Prove ``schedule`` correct for ``problem`` (default: from its metadata), or raise.

    Raises :class:`~colltune.errors.VerificationError` whose message names the
    rank, the operation (its index in that rank's list) and the region.
    """
    problem = problem or problem_of(schedule)
    return _Verifier(schedule, problem).run()


class _Verifier:
    def __init__(self, schedule: Schedule, problem: collectives.Problem):
        self.s = schedule
        self.p = problem
        self.coll = collectives.get_collective(problem.collective)
        if schedule.procs != problem.procs:
            raise VerificationError(f"schedule has {schedule.procs} ranks, the problem {problem.procs}")
        if schedule.wildcards:
            raise VerificationError("the schedule has wildcard receives (ANY_SOURCE or ANY_TAG): their matching "
                                    "depends on timing, and the verifier proves only exactly matched schedules")
        send_sizes, recv_sizes = self.coll.buffers(problem)
        for r in range(problem.procs):
            for buf, want in ((Buf.SEND, send_sizes[r]), (Buf.RECV, recv_sizes[r])):
                have = int(schedule.buffer_sizes[r, buf])
                if have != want:
                    raise VerificationError(
                        f"rank {r}: schedule's {buf.name} buffer is {have} bytes, {problem.collective} "
                        f"of size {problem.size} needs {want}", rank=r)
        n = len(schedule)
        c = schedule.columns
        self.kind = c["kind"].tolist()
        self.rank = c["rank"].tolist()
        self.peer = c["peer"].tolist()
        self.tag = c["tag"].tolist()
        self.buf = c["buf"].tolist()
        self.off = c["offset"].tolist()
        self.len = c["length"].tolist()
        self.src_buf = c["src_buf"].tolist()
        self.src_off = c["src_offset"].tolist()
        self.redop = c["redop"].tolist()
        self.dtype = c["dtype"].tolist()
        counts = np.diff(schedule.dep_ptr)
        dep_owner = np.repeat(np.arange(n, dtype=np.int64), counts)
        req_mask = ~schedule.dep_start
        # first_required[w]: the first op that requires w; w is guaranteed complete before any op >= it starts
        first_required = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_required, schedule.dep_idx[req_mask], dep_owner[req_mask])
        self.first_required = first_required.tolist()
        req_owner = dep_owner[req_mask]
        req_idx = schedule.dep_idx[req_mask]
        self.requires: list[list[int]] = [[] for _ in range(n)]
        for o, d in zip(req_owner.tolist(), req_idx.tolist()):
            self.requires[o].append(d)
        self.completed = bytearray(n)
        # symbolic input labels
        self.inputs = self.coll.inputs(problem)
        self.bases: list[int] = []
        total = 0
        for inp in self.inputs:
            self.bases.append(total)
            total += inp.length
        self.content = [[_Content(int(schedule.buffer_sizes[r, b])) for b in range(3)]
                        for r in range(problem.procs)]
        for inp, base in zip(self.inputs, self.bases):
            self.content[inp.rank][inp.buf].fill(inp.offset, inp.length, base)
        self.access = [[_Accesses() for _ in range(3)] for _ in range(problem.procs)]
        # reduction terms: tuples of contributing ranks, in combination order
        self.terms: list[tuple[int, ...]] = []
        self.term_ids: dict[tuple[int, ...], int] = {}
        self.input_of_rank = {inp.rank: k for k, inp in enumerate(self.inputs)}
        # barrier knowledge: bit q of know[r] says rank r has heard (via receives it waited for) that q entered
        self.know = [1 << r for r in range(problem.procs)]
        self.recv_know: dict[int, int] = {}

    # -- helpers ----------------------------------------------------------------
    def fail(self, i: int, problem: str) -> VerificationError:
        return VerificationError(f"{self.s.describe(i)}: {problem}", rank=self.rank[i], op=self.s.local_index(i))

    def label_of(self, rank: int, buf: int, off: int) -> int | None:
        for inp, base in zip(self.inputs, self.bases):
            if inp.rank == rank and inp.buf == buf and inp.offset <= off < inp.offset + inp.length:
                return base + off - inp.offset
        return None

    def term_label(self, ranks: tuple[int, ...], o: int) -> int:
        """The label of vector offset ``o`` combined over ``ranks`` (a plain input label for one rank)."""
        if len(ranks) == 1:
            k = self.input_of_rank[ranks[0]]
            return self.bases[k] + o - self.inputs[k].offset
        if self.p.commutative:
            ranks = tuple(sorted(ranks))
        t = self.term_ids.get(ranks)
        if t is None:
            t = self.term_ids[ranks] = len(self.terms)
            self.terms.append(ranks)
        return _TERM_BASE + t * _TERM_STRIDE + o

    def decode(self, v: int) -> tuple[tuple[int, ...], int]:
        """``(contributing ranks, vector offset)`` of a defined label."""
        if v >= _TERM_BASE:
            t, o = divmod(v - _TERM_BASE, _TERM_STRIDE)
            return self.terms[t], o
        k = bisect_right(self.bases, v) - 1
        inp = self.inputs[k]
        return (inp.rank,), inp.offset + v - self.bases[k]

    def describe_label(self, v: int, length: int) -> str:
        if v < 0:
            return "undefined bytes"
        if v >= _TERM_BASE:
            ranks, o = self.decode(v)
            return f"the reduction over ranks {list(ranks)} of {region_str(self.inputs[0].buf, o, length)}"
        k = bisect_right(self.bases, v) - 1
        inp = self.inputs[k]
        off = inp.offset + v - self.bases[k]
        return f"rank {inp.rank}'s input {region_str(inp.buf, off, length)}"

    def guaranteed(self, w: int, s: int) -> bool:
        """Is op ``w`` (of the same rank) complete whenever op ``s`` starts?"""
        if w < 0:
            return True
        if self.kind[w] not in (Kind.SEND, Kind.RECV):
            return w < s
        return self.first_required[w] <= s

    def check_read(self, i: int, buf: int, off: int, length: int) -> list[tuple[int, int, int, int]]:
        r = self.rank[i]
        pieces = self.content[r][buf].read(off, length)
        for s, e, v, w in pieces:
            if v == _UNDEFINED:
                raise self.fail(i, f"reads {region_str(buf, off + s, e - s)} before it is written")
            if not self.guaranteed(w, i):
                raise self.fail(i, f"reads {region_str(buf, off + s, e - s)}, written by {self.s.describe(w)}, "
                                   f"which it does not require, so the data may not have arrived")
        self.check_race(i, buf, off, length, writes=False)
        return pieces

    def check_race(self, i: int, buf: int, off: int, length: int, writes: bool) -> None:
        if writes and buf == Buf.SEND:
            raise self.fail(i, f"writes {region_str(buf, off, length)}: the SEND buffer is the user's input "
                               f"and read-only")
        if length == 0:
            return
        r = self.rank[i]
        other = self.access[r][buf].conflicts(off, off + length, writes, lambda w: self.guaranteed(w, i))
        if other is not None:
            verb = "writes" if writes else "reads"
            raise self.fail(i, f"{verb} {region_str(buf, off, length)} while {self.s.describe(other)} may still be "
                               f"in flight on an overlapping region (add a dependency)")

    # -- execution ------------------------------------------------------------
    def run(self) -> VerifyReport:
        s = self.s
        P = s.procs
        nxt = s.rank_ptr[:-1].tolist()
        end = s.rank_ptr[1:].tolist()
        pend_send: dict[tuple[int, int, int], deque] = {}
        pend_recv: dict[tuple[int, int, int], deque] = {}
        work = deque(range(P))
        queued = [True] * P
        kind, rank, peer, tag, buf, off, length = self.kind, self.rank, self.peer, self.tag, self.buf, self.off, self.len
        completed, requires = self.completed, self.requires

        sync = self.coll.synchronizes
        know, recv_know = self.know, self.recv_know

        def transfer(snd: int, pieces: list, known: int, rcv: int) -> None:
            if length[snd] != length[rcv]:
                raise self.fail(rcv, f"matches {s.describe(snd)} of {length[snd]} bytes but expects {length[rcv]}")
            self.content[rank[rcv]][buf[rcv]].write(off[rcv], pieces, rcv)
            recv_know[rcv] = known
            completed[snd] = completed[rcv] = 1
            for rr in (rank[snd], rank[rcv]):
                if not queued[rr]:
                    queued[rr] = True
                    work.append(rr)

        while work:
            r = work.popleft()
            queued[r] = False
            i = nxt[r]
            while i < end[r]:
                if any(not completed[d] for d in requires[i]):
                    break
                if sync:
                    for d in requires[i]:
                        know[r] |= recv_know.get(d, 0)
                k = kind[i]
                if k == Kind.SEND:
                    pieces = self.check_read(i, buf[i], off[i], length[i])
                    if length[i]:
                        self.access[r][buf[i]].add(off[i], off[i] + length[i], i, False)
                    key = (r, peer[i], tag[i])
                    q = pend_recv.get(key)
                    if q:
                        transfer(i, pieces, know[r], q.popleft())
                    else:
                        pend_send.setdefault(key, deque()).append((i, pieces, know[r]))
                elif k == Kind.RECV:
                    self.check_race(i, buf[i], off[i], length[i], writes=True)
                    if length[i]:
                        self.access[r][buf[i]].add(off[i], off[i] + length[i], i, True)
                    key = (peer[i], r, tag[i])
                    q = pend_send.get(key)
                    if q:
                        snd, pieces, known = q.popleft()
                        transfer(snd, pieces, known, i)
                    else:
                        pend_recv.setdefault(key, deque()).append(i)
                elif k == Kind.COPY:
                    pieces = self.check_read(i, self.src_buf[i], self.src_off[i], length[i])
                    self.check_race(i, buf[i], off[i], length[i], writes=True)
                    self.content[r][buf[i]].write(off[i], pieces, i)
                    completed[i] = 1
                elif k == Kind.REDUCE:
                    self.reduce(i)
                    completed[i] = 1
                else:
                    completed[i] = 1
                i += 1
            nxt[r] = i
        self.check_finished(nxt, end, pend_send, pend_recv)
        self.check_postcondition()
        if sync:
            self.check_synchronized()
        summary = s.summary()
        return VerifyReport(self.p, summary["ops"], summary["messages"], summary["bytes_sent"])

    def check_finished(self, nxt: list[int], end: list[int], pend_send: dict, pend_recv: dict) -> None:
        s = self.s
        stuck = [r for r in range(s.procs) if nxt[r] < end[r]]
        if stuck:
            lines = []
            for r in stuck[:4]:
                i = nxt[r]
                waits = [d for d in self.requires[i] if not self.completed[d]]
                lines.append(f"{s.describe(i)} waits for " + ", ".join(s.describe_local(d) for d in waits[:3])
                             + " which never completes")
            more = f" (and {len(stuck) - 4} more ranks)" if len(stuck) > 4 else ""
            raise VerificationError("deadlock: " + "; ".join(lines) + more, rank=stuck[0],
                                    op=s.local_index(nxt[stuck[0]]))
        for q in pend_send.values():
            if q:
                i = q[0][0]
                raise self.fail(i, "is never matched by a receive")
        for q in pend_recv.values():
            if q:
                raise self.fail(q[0], "is never matched by a send")

    def reduce(self, i: int) -> None:
        """Execute ``dst = src op dst`` on labels, checking operation, alignment, duplicates and order."""
        p = self.p
        if not self.coll.reduces:
            raise self.fail(i, f"{p.collective} does not reduce")
        op, dt = REDUCTION_OPS[self.redop[i]], REDUCTION_DTYPES[self.dtype[i]]
        if (op, dt) != (p.op, p.dtype):
            raise self.fail(i, f"reduces {op}<{dt}> but the problem is {p.op}<{p.dtype}>")
        n = self.len[i]
        src = self.check_read(i, self.src_buf[i], self.src_off[i], n)
        dst = self.check_read(i, self.buf[i], self.off[i], n)
        self.check_race(i, self.buf[i], self.off[i], n, writes=True)
        item = p.itemsize
        if n % item:
            raise self.fail(i, f"reduces {n} bytes, not a whole number of {dt} elements")
        out: list[tuple[int, int, int, int]] = []
        cuts = sorted({x for piece in src + dst for x in piece[:2]})
        si = di = 0
        prev: tuple | None = None
        for a, b in pairwise(cuts):
            while src[si][1] <= a:
                si += 1
            while dst[di][1] <= a:
                di += 1
            s_ranks, s_o = self.decode(src[si][2] + a - src[si][0])
            d_ranks, d_o = self.decode(dst[di][2] + a - dst[di][0])
            if s_o != d_o:
                raise self.fail(i, f"combines vector offset {s_o} with offset {d_o}")
            if s_o % item and prev != (s_ranks, d_ranks, s_o):
                raise self.fail(i, f"element at vector offset {s_o - s_o % item} mixes bytes of different "
                                   f"partial results")
            twice = set(s_ranks) & set(d_ranks)
            if twice:
                raise self.fail(i, f"combines the contribution of rank {min(twice)} twice (ranks {list(s_ranks)} "
                                   f"with ranks {list(d_ranks)})")
            if not p.commutative and s_ranks[-1] + 1 != d_ranks[0]:
                raise self.fail(i, f"combines ranks {list(s_ranks)} op ranks {list(d_ranks)}: out of order for a "
                                   f"non-commutative operation")
            out.append((a, b, self.term_label(s_ranks + d_ranks, s_o), i))
            prev = (s_ranks, d_ranks, s_o + b - a)
        self.content[self.rank[i]][self.buf[i]].write(self.off[i], out, i)

    def check_synchronized(self) -> None:
        P = self.p.procs
        full = (1 << P) - 1
        final = list(self.know)
        for op, known in self.recv_know.items():
            final[self.rank[op]] |= known
        for r in range(P):
            if final[r] != full:
                q = next(q for q in range(P) if not final[r] >> q & 1)
                raise VerificationError(
                    f"barrier: rank {r} can finish before rank {q} has entered: no chain of receives it waits "
                    f"for starts at rank {q}", rank=r)

    def check_postcondition(self) -> None:
        for pl in self.coll.outputs(self.p):
            if not isinstance(pl, collectives.Placement):
                self.check_reduction(pl)
                continue
            want = self.label_of(pl.origin_rank, pl.origin_buf, pl.origin_offset)
            for s, e, v, _ in self.content[pl.rank][pl.buf].read(pl.offset, pl.length):
                if want is None or v != want + s:
                    where = region_str(pl.buf, pl.offset + s, e - s)
                    expected = self.describe_label(want + s, e - s) if want is not None else "input data"
                    raise VerificationError(
                        f"postcondition of {self.p.collective}: rank {pl.rank} ends with {where} holding "
                        f"{self.describe_label(v, e - s)}, but it must hold {expected}", rank=pl.rank)

    def check_reduction(self, out: Any) -> None:
        everyone = tuple(range(self.p.procs))
        for s, e, v, _ in self.content[out.rank][out.buf].read(out.offset, out.length):
            want = self.term_label(everyone, out.origin_offset + s)
            if v != want:
                where = region_str(out.buf, out.offset + s, e - s)
                raise VerificationError(
                    f"postcondition of {self.p.collective}: rank {out.rank} ends with {where} holding "
                    f"{self.describe_label(v, e - s)}, but it must hold the reduction over all ranks "
                    f"{'in rank order ' if not self.p.commutative else ''}of "
                    f"{region_str(out.origin_buf, out.origin_offset + s, e - s)}", rank=out.rank)
