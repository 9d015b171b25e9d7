"""Reduce and allreduce algorithms.

Buffer convention (see :mod:`colltune.collectives`): every rank's SEND buffer holds its
vector of ``m`` bytes (whole elements of the problem's dtype); the root's RECV (every
rank's, for allreduce) ends with ``x_0 op x_1 op ... op x_{P-1}``.  SEND is never written:
partial results live in RECV where the rank has one, else in SCRATCH.

A ``REDUCE`` op computes ``dst = src op dst`` (:mod:`colltune.schedule.ir`), so the result
lands in the region of the *right* operand.  The algorithms here keep rank order where the
registry says so (``needs_commutative=False``): every partial result covers a contiguous run
of ranks and is combined as lower run op upper run.  The verifier checks this for every P.
Trees that would reorder ranks (a binomial tree rooted at a root other than 0) are used
only for commutative operations; otherwise the tree is rooted at rank 0 and the result
takes one more hop to the root, as MPICH does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from colltune.algorithms.bcast import DEFAULT_SEGMENT, tree_bcast
from colltune.algorithms.chunks import segments
from colltune.algorithms.registry import Param, register
from colltune.algorithms.tags import TAG_DATA
from colltune.algorithms.trees import Tree, binomial_tree
from colltune.collectives import Problem
from colltune.schedule import Buf, Kind, Region, ScheduleBuilder
from colltune.schedule.ir import REDUCTION_DTYPES, REDUCTION_OPS

SEGMENT_SIZE = Param("segment_size", int, DEFAULT_SEGMENT,
                     "bytes per segment, rounded down to whole elements (at least one)", minimum=1, unit="bytes")


def element_bounds(n: int, itemsize: int, parts: int) -> list[int]:
    """Byte boundaries of ``n`` bytes cut into ``parts`` runs of whole elements whose counts differ by
    at most one (paper 002 eq. 3 applied to elements)."""
    count = n // itemsize
    return [i * count // parts * itemsize for i in range(parts + 1)]


def element_segments(n: int, itemsize: int, segment_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` segments of ``n`` bytes, each a whole number of elements of at most
    ``segment_size`` bytes (but at least one element)."""
    return segments(n, max(itemsize, segment_size - segment_size % itemsize))


class _Reducer:
    """Adds REDUCE ops with the problem's operation and dtype."""

    def __init__(self, b: ScheduleBuilder, problem: Problem):
        self.b = b
        self.p = problem

    def __call__(self, rank: int, lower: Region, upper: Region, requires: list[int] | tuple = ()) -> Region:
        """``upper = lower op upper``; returns where the result is (``upper``)."""
        if lower.length:
            self.b.reduce(rank, lower, upper, str(self.p.op), str(self.p.dtype), requires=requires)
        return upper


def tree_reduce(b: ScheduleBuilder, problem: Problem, target: int, tree: Tree, top: int) -> None:
    """Reduction of every rank's SEND up ``tree`` (relative ranks from ``top``) into ``target``'s RECV.

    A rank receives the partial results of its children (each into its own slot) and combines
    them in relative rank order, then sends the result to its parent.  When the tree's top is
    not ``target``, the top sends the result on to ``target``.  The order keeps rank order
    only for trees whose subtrees are ranges of relative ranks from rank 0 (binomial from 0).
    """
    P, n = problem.procs, problem.size
    if n == 0:
        return
    red = _Reducer(b, problem)
    own = Region(Buf.SEND, 0, n)

    def rank(rel: int) -> int:
        return (rel + top) % P

    for rel in tree.preorder:
        me = rank(rel)
        kids = sorted(tree.children[rel])
        slots = [Region(Buf.SCRATCH, i * n, n) for i in range(len(kids))]
        if rel == 0 and me == target and kids:
            slots[-1] = Region(Buf.RECV, 0, n)
        b.need_scratch(me, sum(s.length for s in slots if s.buf == Buf.SCRATCH))
        got = [b.recv(me, rank(c), slot, TAG_DATA) for c, slot in zip(kids, slots)]
        acc = own
        for slot, g in zip(slots, got):
            acc = red(me, acc, slot, requires=[g])
        if rel:
            b.send(me, rank(tree.parent[rel]), acc, TAG_DATA)
        elif me == target:
            if not kids:
                b.copy(me, own, Region(Buf.RECV, 0, n))
        else:
            b.send(me, target, acc, TAG_DATA)
            b.recv(target, me, Region(Buf.RECV, 0, n), TAG_DATA)


def binomial_reduce(b: ScheduleBuilder, problem: Problem, target: int) -> None:
    """Binomial-tree reduction of every rank's SEND into ``target``'s RECV (:func:`tree_reduce`):
    relative rank r's result covers the run r..r+size-1.  The tree is rooted at ``target`` for
    commutative operations, else at rank 0, which then sends the result to ``target``."""
    tree_reduce(b, problem, target, binomial_tree(problem.procs), target if problem.commutative else 0)


@register("reduce", "flat_tree", source="MPICH/Open MPI linear reduce", aliases=("linear", "flat"))
def _reduce_flat(b: ScheduleBuilder, problem: Problem) -> None:
    """Flat tree: every rank sends its vector to the root, which combines them from the highest rank down.

    The root receives x_{P-1} into RECV and every other vector into its own SCRATCH slot (all at
    once), then computes x_k op acc for k = P-2 .. 0; rank order is kept.  Cost about
    (P-1)(g(m) + gamma m) + L, with gamma the time per byte of the operation.
    """
    P, root, n = problem.procs, problem.root, problem.size
    if n == 0:
        return
    red = _Reducer(b, problem)
    acc = Region(Buf.RECV, 0, n)
    top = P - 1
    first = [b.recv(root, top, acc, TAG_DATA)] if top != root else []
    if top == root:
        b.copy(root, Region(Buf.SEND, 0, n), acc)
    lower = list(range(top - 1, -1, -1))
    slots: dict[int, tuple[Region, list[int]]] = {}
    for i, k in enumerate(x for x in lower if x != root):
        slot = Region(Buf.SCRATCH, i * n, n)
        slots[k] = (slot, [b.recv(root, k, slot, TAG_DATA)])
    b.need_scratch(root, len(slots) * n)
    for k in lower:
        region, got = slots.get(k, (Region(Buf.SEND, 0, n), []))
        red(root, region, acc, requires=got + first)
    for r in range(P):
        if r != root:
            b.send(r, root, Region(Buf.SEND, 0, n), TAG_DATA)


@register("reduce", "binomial_tree", source="MPICH binomial reduce; Thakur, Rabenseifner, Gropp 2005",
          aliases=("binomial",))
def _reduce_binomial(b: ScheduleBuilder, problem: Problem) -> None:
    """Binomial tree: in round j, every rank whose relative rank has bit j set sends its partial result
    to the rank 2^j below it, which combines it with its own.

    ceil(log2 P) rounds; Hockney cost log2(P)(alpha + m beta + m gamma).  Rooted at the root for
    commutative operations; otherwise rooted at rank 0 with one more hop, keeping rank order.
    """
    binomial_reduce(b, problem, problem.root)


def _chain_reduce(b: ScheduleBuilder, problem: Problem, segment_size: int | None) -> None:
    """Chain from the highest (relative) rank down to the root, in segments.

    Each rank posts the receives of every segment from the rank above it, combines its own
    segment into each as it arrives (own op incoming) and passes it down.  For a non-commutative
    operation the chain runs P-1 -> ... -> 0 in absolute ranks and rank 0 sends the result to the root.
    """
    P, root, n = problem.procs, problem.root, problem.size
    if n == 0:
        return
    red = _Reducer(b, problem)
    top = root if problem.commutative else 0
    segs = element_segments(n, problem.itemsize, segment_size or n)

    def rank(rel: int) -> int:
        return (rel + top) % P

    if P == 1:
        b.copy(root, Region(Buf.SEND, 0, n), Region(Buf.RECV, 0, n))
        return
    for rel in range(P - 1, -1, -1):
        me = rank(rel)
        if rel == P - 1:
            for o, ln in segs:
                b.send(me, rank(rel - 1), Region(Buf.SEND, o, ln), TAG_DATA)
            continue
        into = Buf.RECV if me == root and rel == 0 else Buf.SCRATCH
        if into == Buf.SCRATCH:
            b.need_scratch(me, n)
        got = [b.recv(me, rank(rel + 1), Region(into, o, ln), TAG_DATA) for o, ln in segs]
        for (o, ln), g in zip(segs, got):
            acc = red(me, Region(Buf.SEND, o, ln), Region(into, o, ln), requires=[g])
            if rel:
                b.send(me, rank(rel - 1), acc, TAG_DATA)
            elif me != root:
                b.send(me, root, acc, TAG_DATA)
    if rank(0) != root:
        for o, ln in segs:
            b.recv(root, rank(0), Region(Buf.RECV, o, ln), TAG_DATA)


@register("reduce", "chain", source="paper 003 Table 1 (Chain), reversed for reduce")
def _reduce_chain(b: ScheduleBuilder, problem: Problem) -> None:
    """Chain: the highest relative rank sends its vector down; each rank combines its own into it and
    passes it on, until it reaches the root.

    P-1 steps of the whole vector; cost (P-1)(g(m) + gamma m + L).  Keeps rank order (for a
    non-commutative operation the chain ends at rank 0, which forwards to the root).
    """
    _chain_reduce(b, problem, None)


@register("reduce", "chain_segmented", source="paper 003 Table 1 (Seg. Chain (Pipeline)), reversed for reduce",
          params=(SEGMENT_SIZE,), aliases=("pipeline",))
def _reduce_chain_segmented(b: ScheduleBuilder, problem: Problem, segment_size: int) -> None:
    """Pipelined chain: as the chain, in segments of `segment_size` bytes, so that a rank combines and
    forwards segment k while segment k+1 arrives.

    Cost (P-1)(g(s) + gamma s + L) + (k-1)(g(s) + gamma s) for k segments of s bytes.
    """
    _chain_reduce(b, problem, segment_size)


class _Halving:
    """Rabenseifner's reduce-scatter by recursive halving, for any P, keeping rank order.

    With p2 the largest power of two <= P and rem = P - p2, ranks 2i and 2i+1 (i < rem) first
    fold: 2i sends its vector to 2i+1, which keeps x_{2i} op x_{2i+1}.  The p2 remaining ranks
    get new ranks 0..p2-1 in rank order.  The vector is cut into p2 pieces of whole elements;
    in the step of distance d = 1, 2, 4, ..., new rank q and q XOR d split their common window
    of pieces, each keeping one half and combining the partner's partial result of it (lower
    ranks' run first).  Each rank's result then covers the run of ranks of its aligned group.
    """

    def __init__(self, b: ScheduleBuilder, problem: Problem, work: Callable[[int], Buf]):
        self.b, self.p = b, problem
        P, n = problem.procs, problem.size
        self.red = _Reducer(b, problem)
        self.p2 = 1 << (P.bit_length() - 1)
        self.rem = P - self.p2
        self.bounds = element_bounds(n, problem.itemsize, self.p2)
        self.work = {r: Region(work(r), 0, n) for r in range(P)}
        self.temp = {}
        for r in range(P):
            base = n if self.work[r].buf == Buf.SCRATCH else 0
            self.temp[r] = base
            b.need_scratch(r, base + n)
        self.windows: dict[int, list[tuple[int, int]]] = {}

    def old(self, q: int) -> int:
        return 2 * q + 1 if q < self.rem else q + self.rem

    def new(self, r: int) -> int | None:
        if r < 2 * self.rem:
            return r // 2 if r % 2 else None
        return r - self.rem

    def piece(self, r: int, lo: int, hi: int) -> Region:
        w = self.work[r]
        return Region(w.buf, self.bounds[lo], self.bounds[hi] - self.bounds[lo])

    def fold(self) -> None:
        b, n = self.b, self.p.size
        for r in range(self.p.procs):
            if self.new(r) is None:
                b.send(r, r + 1, Region(Buf.SEND, 0, n), TAG_DATA)
                continue
            b.copy(r, Region(Buf.SEND, 0, n), self.work[r])
            if r < 2 * self.rem:
                t = Region(Buf.SCRATCH, self.temp[r], n)
                got = b.recv(r, r - 1, t, TAG_DATA)
                self.red(r, t, self.work[r], requires=[got])
            b.fence(r)

    def combine(self, r: int, partner_is_lower: bool, incoming: Region, mine: Region, requires: list[int]) -> None:
        """``mine = incoming op mine`` if the partner's run is lower, else ``mine op incoming``, into ``mine``."""
        if partner_is_lower or self.p.commutative:
            self.red(r, incoming, mine, requires=requires)
        elif mine.length:
            self.red(r, mine, incoming, requires=requires)
            self.b.copy(r, incoming, mine)

    def reduce_scatter(self) -> None:
        b = self.b
        for q in range(self.p2):
            r = self.old(q)
            lo, hi = 0, self.p2
            steps = []
            d = 1
            while d < self.p2:
                partner = self.old(q ^ d)
                mid = (lo + hi) // 2
                keep, give = ((lo, mid), (mid, hi)) if q & d == 0 else ((mid, hi), (lo, mid))
                mine = self.piece(r, *keep)
                t = Region(Buf.SCRATCH, self.temp[r], mine.length)
                deps = []
                if mine.length:
                    deps.append(b.recv(r, partner, t, TAG_DATA))
                out = self.piece(r, *give)
                if out.length:
                    deps.append(b.send(r, partner, out, TAG_DATA))
                self.combine(r, q & d != 0, t, mine, deps)
                b.fence(r)
                steps.append((lo, hi))
                lo, hi = keep
                d *= 2
            steps.append((lo, hi))
            self.windows[q] = steps

    def unwind(self, q: int) -> Iterator[tuple[int, int, tuple[int, int], tuple[int, int]]]:
        """The halving steps of new rank ``q`` in reverse: ``(distance, partner's old rank, q's window,
        the sibling window the partner holds)``, windows as piece ranges."""
        wins = self.windows[q]
        d = self.p2 // 2
        for step in range(len(wins) - 1, 0, -1):
            (lo, hi), (plo, phi) = wins[step], wins[step - 1]
            yield d, self.old(q ^ d), (lo, hi), ((hi, phi) if lo == plo else (plo, lo))
            d //= 2

    def unfold(self) -> None:
        """Ranks 2i+1 send the result to their folded-out partners 2i."""
        for i in range(self.rem):
            self.b.send(2 * i + 1, 2 * i, self.work[2 * i + 1], TAG_DATA)
            self.b.recv(2 * i, 2 * i + 1, self.work[2 * i], TAG_DATA)

    def allgather(self) -> None:
        """Recursive doubling in reverse order of the halving: partners swap their windows until
        every new rank has the whole result, then the folded-out ranks get it from their partner."""
        b = self.b
        for q in range(self.p2):
            r = self.old(q)
            for _, partner, mine, sibling in self.unwind(q):
                out, into = self.piece(r, *mine), self.piece(r, *sibling)
                if into.length:
                    b.recv(r, partner, into, TAG_DATA)
                if out.length:
                    b.send(r, partner, out, TAG_DATA)
                b.fence(r)
        self.unfold()

    def gather(self, root: int) -> None:
        """Reverse of the halving towards the root's new rank (its fold partner's if it folded out):
        in each step the rank of a pair on the root's side receives the other's window."""
        b = self.b
        # a folded-out root (an even rank below 2 rem) is represented by its partner root + 1
        target = root // 2 if root < 2 * self.rem else root - self.rem
        for q in range(self.p2):
            r = self.old(q)
            for d, partner, mine, sibling in self.unwind(q):
                if (q & d) != (target & d):
                    out = self.piece(r, *mine)
                    if out.length:
                        b.send(r, partner, out, TAG_DATA)
                    break
                into = self.piece(r, *sibling)
                if into.length:
                    b.recv(r, partner, into, TAG_DATA)
                b.fence(r)
        last = self.old(target)
        if last != root:
            b.send(last, root, self.work[last], TAG_DATA)
            b.recv(root, last, Region(Buf.RECV, 0, self.p.size), TAG_DATA)


@register("reduce", "reduce_scatter_gather", source="Rabenseifner 2004; Thakur, Rabenseifner, Gropp 2005",
          aliases=("rabenseifner",))
def _reduce_rabenseifner(b: ScheduleBuilder, problem: Problem) -> None:
    """Reduce-scatter by recursive halving, then a binomial gather of the pieces to the root
    (Rabenseifner's algorithm), for any P.

    Ranks beyond the largest power of two p2 fold into a partner first.  Hockney cost about
    2 log2(p2) alpha + 2 (p2-1)/p2 m beta + (p2-1)/p2 m gamma (plus m beta + m gamma when folding);
    the choice for long vectors.  Keeps rank order.
    """
    if problem.size == 0:
        return
    h = _Halving(b, problem, lambda r: Buf.RECV if r == problem.root else Buf.SCRATCH)
    h.fold()
    h.reduce_scatter()
    h.gather(problem.root)


@register("allreduce", "reduce_bcast", source="MPICH/Open MPI basic allreduce (reduce, then broadcast)")
def _allreduce_reduce_bcast(b: ScheduleBuilder, problem: Problem) -> None:
    """Reduce + broadcast: a binomial reduce to rank 0, then a binomial broadcast of the result.

    2 ceil(log2 P) rounds; Hockney cost 2 log2(P)(alpha + m beta) + log2(P) m gamma.  Keeps rank order.
    """
    P, n = problem.procs, problem.size
    if n == 0:
        return
    binomial_reduce(b, problem, 0)
    for r in range(P):
        b.fence(r)
    tree_bcast(b, P, 0, n, binomial_tree(P), turn=True)


@register("allreduce", "recursive_doubling", source="Thakur, Rabenseifner, Gropp 2005 (recursive doubling)")
def _allreduce_recursive_doubling(b: ScheduleBuilder, problem: Problem) -> None:
    """Recursive doubling: in step j, rank q exchanges its whole partial result with q XOR 2^j and
    combines (lower run first).

    Ranks beyond the largest power of two fold into a partner first and get the result back at the
    end.  log2(p2) steps; Hockney cost log2(p2)(alpha + m beta + m gamma); for short vectors.
    """
    n = problem.size
    if n == 0:
        return
    h = _Halving(b, problem, lambda r: Buf.RECV)
    h.fold()
    for q in range(h.p2):
        r = h.old(q)
        d = 1
        while d < h.p2:
            partner = h.old(q ^ d)
            t = Region(Buf.SCRATCH, h.temp[r], n)
            got = b.recv(r, partner, t, TAG_DATA)
            sent = b.send(r, partner, h.work[r], TAG_DATA)
            h.combine(r, q & d != 0, t, h.work[r], [got, sent])
            b.fence(r)
            d *= 2
    h.unfold()


@register("allreduce", "ring", source="Patarasuk and Yuan 2009; Thakur, Rabenseifner, Gropp 2005 (ring)",
          params=(SEGMENT_SIZE,), needs_commutative=True)
def _allreduce_ring(b: ScheduleBuilder, problem: Problem, segment_size: int) -> None:
    """Ring: a ring reduce-scatter (in step s, rank r sends piece r-s to r+1 and combines piece r-s-1
    from r-1) then a ring allgather, each piece sent in segments of `segment_size` bytes.

    2(P-1) steps; Hockney cost 2(P-1) alpha + 2 (P-1)/P m beta + (P-1)/P m gamma, bandwidth-optimal.
    A rank combines and forwards segment k as soon as it arrives.  Pieces are combined in ring order,
    so the operation must be commutative.

    Each rank posts, in order: the copy of its vector into RECV; the receives of piece r-1 (into
    the first half of SCRATCH) and the sends of piece r; at each reduce-scatter step, segment by
    segment, the combination of the piece that arrived, its forwarding and the receive of the next
    piece (into the other half of SCRATCH); then, once all of that has completed (a fence), at each
    allgather step the receives of one piece into RECV and the sends of the piece that arrived the
    step before, each segment's send once its receive has completed.  Built from arrays
    (:meth:`~colltune.schedule.ScheduleBuilder.bulk`), not one op at a time: with 2 P (P-1) messages
    per segment of a piece it is the largest allreduce schedule.
    """
    P, n, item = problem.procs, problem.size, problem.itemsize
    if n == 0:
        return
    bounds = np.array(element_bounds(n, item, P), dtype=np.int64)
    ring = _Ring(bounds, max(item, segment_size - segment_size % item))
    ops = _OpList()
    ranks = np.arange(P, dtype=np.int64)
    ops.add(ranks, (0, 0, 0, 0), Kind.COPY, -1, Buf.RECV, 0, n, Buf.SEND, 0)
    if P > 1:
        most = int(ring.length.max())
        for r in range(P):
            b.need_scratch(r, 2 * most)
        left, right = (ranks - 1) % P, (ranks + 1) % P
        # the receives of piece r-1 and the sends of piece r
        e, k, inside, ln = ring.segments(left)
        first = ops.add(ranks[e], (1, 0, k, 0), Kind.RECV, left[e], Buf.SCRATCH, inside, ln)
        incoming = ring.slots(P)
        incoming[ranks[e], 0, k] = first
        e, k, inside, ln = ring.segments(ranks)
        ops.add(ranks[e], (2, 0, k, 0), Kind.SEND, right[e], Buf.RECV, ring.bounds[ranks[e]] + inside, ln)
        # reduce-scatter steps, one (rank, step) pair per rank and step: each step's receives first,
        # so that the combinations can name them
        rank, step = np.repeat(ranks, P - 1), np.tile(np.arange(P - 1, dtype=np.int64), P)
        now, nxt = (rank - step - 1) % P, (rank - step - 2) % P
        go = np.flatnonzero(step < P - 2)
        e, k, inside, ln = ring.segments(nxt[go])
        r, s = rank[go][e], step[go][e]
        incoming[r, s + 1, k] = ops.add(r, (3, s, k, 2), Kind.RECV, left[r], Buf.SCRATCH,
                                        ((s + 1) % 2) * most + inside, ln)
        e, k, inside, ln = ring.segments(now)
        r, s, at = rank[e], step[e], ring.bounds[now[e]] + inside
        combined = ops.add(r, (3, s, k, 0), Kind.REDUCE, -1, Buf.RECV, at, ln, Buf.SCRATCH, (s % 2) * most + inside)
        ops.after(combined, incoming[r, s, k])
        on = s < P - 2
        ops.add(r[on], (3, s[on], k[on], 1), Kind.SEND, right[r[on]], Buf.RECV, at[on], ln[on])
        # allgather steps: the receives of piece r-s, then the sends of piece r+1-s
        e, k, inside, ln = ring.segments((rank - step) % P)
        r, s = rank[e], step[e]
        arrived = ring.slots(P)
        arrived[r, s, k] = ops.add(r, (4, s, 0, k), Kind.RECV, left[r], Buf.RECV,
                                   ring.bounds[(r - s) % P] + inside, ln)
        e, k, inside, ln = ring.segments((rank + 1 - step) % P)
        r, s = rank[e], step[e]
        sent = ops.add(r, (4, s, 1, k), Kind.SEND, right[r], Buf.RECV, ring.bounds[(r + 1 - s) % P] + inside, ln)
        later = s > 0
        ops.after(sent[later], arrived[r[later], s[later] - 1, k[later]])
    ops.build(b, problem, fence_before=4)


class _Ring:
    """The pieces of a ring allreduce: ``bounds`` (bytes, one piece per rank) cut into segments of
    ``step`` bytes."""

    def __init__(self, bounds: np.ndarray, step: int):
        self.bounds = bounds
        self.length = np.diff(bounds)
        self.step = step
        self.count = -(-self.length // step)

    def segments(self, pieces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The segments of each entry of ``pieces``: for each segment, the index of its entry, its
        number within the piece, its offset within the piece and its length (bytes)."""
        counts = self.count[pieces]
        entry = np.repeat(np.arange(len(pieces)), counts)
        k = np.arange(len(entry)) - (np.cumsum(counts) - counts)[entry]
        inside = k * self.step
        return entry, k, inside, np.minimum(self.step, self.length[pieces[entry]] - inside)

    def slots(self, procs: int) -> np.ndarray:
        """An op id per (rank, step, segment), -1 for none."""
        return np.full((procs, max(procs - 1, 1), int(self.count.max())), -1, dtype=np.int64)


class _OpList:
    """Ops gathered in any order, each with a key (phase, step, a, b) that gives its place among its
    rank's ops, and dependencies between them; :meth:`build` adds them to a builder in one piece."""

    def __init__(self) -> None:
        self._cols: dict[str, list[np.ndarray]] = {}
        self._n = 0
        self._deps: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, rank: np.ndarray, key: tuple, kind: Kind, peer: Any, buf: Buf, offset: Any, length: Any,
            src_buf: Any = -1, src_offset: Any = 0) -> np.ndarray:
        """Ops of ``kind`` on ``rank`` (one each), the other fields arrays or scalars; return their ids."""
        m = len(rank)
        phase, step, a, b = key
        for name, value in (("rank", rank), ("phase", phase), ("step", step), ("a", a), ("b", b), ("kind", kind),
                            ("peer", peer), ("buf", buf), ("offset", offset), ("length", length),
                            ("src_buf", src_buf), ("src_offset", src_offset)):
            self._cols.setdefault(name, []).append(np.broadcast_to(np.asarray(value, dtype=np.int64), (m,)))
        ids = np.arange(self._n, self._n + m, dtype=np.int64)
        self._n += m
        return ids

    def after(self, ops: np.ndarray, on: np.ndarray) -> None:
        """Each op of ``ops`` requires the op of ``on`` beside it (none where it is -1) to complete."""
        keep = on >= 0
        self._deps.append((ops[keep], on[keep]))

    def build(self, b: ScheduleBuilder, problem: Problem, fence_before: int) -> None:
        """Add the ops to ``b``, each rank's in the order of their keys; the first op of each rank in
        phase ``fence_before`` or later requires every op of that rank before it (a fence)."""
        c = {name: np.concatenate(parts) for name, parts in self._cols.items()}
        order = np.lexsort((c["b"], c["a"], c["step"], c["phase"], c["rank"]))
        place = np.empty(len(order), dtype=np.int64)
        place[order] = np.arange(len(order))
        kind, rank = c["kind"][order], c["rank"][order]
        reduces, messages = kind == Kind.REDUCE, (kind == Kind.SEND) | (kind == Kind.RECV)
        ids = b.bulk(kind, rank, peer=c["peer"][order], tag=np.where(messages, TAG_DATA, 0), buf=c["buf"][order],
                     offset=c["offset"][order], length=c["length"][order], src_buf=c["src_buf"][order],
                     src_offset=c["src_offset"][order],
                     redop=np.where(reduces, REDUCTION_OPS.index(str(problem.op)), -1),
                     dtype=np.where(reduces, REDUCTION_DTYPES.index(str(problem.dtype)), -1))
        ops = [place[o] for o, _ in self._deps]
        on = [place[d] for _, d in self._deps]
        fenced = np.flatnonzero(c["phase"][order] >= fence_before)
        if len(fenced):
            first = fenced[np.r_[True, rank[fenced][1:] != rank[fenced][:-1]]]
            start = np.searchsorted(rank, rank[first])
            count = first - start
            ops.append(np.repeat(first, count))
            on.append(np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + np.repeat(start, count))
        if ops:
            dep_op, dep_on = np.concatenate(ops), np.concatenate(on)
            b.depend(ids[0] + dep_op, ids[0] + dep_on)


@register("allreduce", "reduce_scatter_allgather", source="Rabenseifner 2004; Thakur, Rabenseifner, Gropp 2005",
          aliases=("rabenseifner",))
def _allreduce_rabenseifner(b: ScheduleBuilder, problem: Problem) -> None:
    """Rabenseifner: reduce-scatter by recursive halving, then allgather by recursive doubling, for any P.

    Ranks beyond the largest power of two p2 fold into a partner first and get the result back at
    the end.  Hockney cost 2 log2(p2) alpha + 2 (p2-1)/p2 m beta + (p2-1)/p2 m gamma; the choice for
    long vectors.  Keeps rank order.
    """
    if problem.size == 0:
        return
    h = _Halving(b, problem, lambda r: Buf.RECV)
    h.fold()
    h.reduce_scatter()
    h.allgather()
