"""Broadcast algorithms: every strategy of paper 003 Table 1, two scatter-allgather
compositions, and the symmetric asynchronous broadcast of paper 002.

Buffer convention (see :mod:`colltune.collectives`): the message is the RECV
buffer of every rank; the root's holds the data at the start.  Message tags:
see :mod:`colltune.algorithms.tags`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from colltune.algorithms.chunks import ChunkTracker, pieces, segments
from colltune.algorithms.registry import Param, register
from colltune.algorithms.tags import TAG_CTS, TAG_DATA, TAG_RTS
from colltune.algorithms.trees import Tree, binary_tree, binomial_tree, chain, flat_tree, knomial_tree
from colltune.collectives import Problem
from colltune.schedule import Buf, Region, ScheduleBuilder

#: Default segment size in bytes.  A placeholder, not a tuned value: paper 003 section 3
#: searches s = m / 2**i per network, which is [tune]'s job; 8 KiB sits in the middle of the
#: 1-64 KiB range that search covers for Gigabit Ethernet in paper 003 Fig. 2.
DEFAULT_SEGMENT = 8192

SEGMENT_SIZE = Param("segment_size", int, DEFAULT_SEGMENT, "bytes per segment (the last one may be shorter)",
                     minimum=1, unit="bytes")
RADIX = Param("radix", int, 4, "children per level of the k-nomial tree (2 gives the binomial tree)", minimum=2)


def tree_bcast(b: ScheduleBuilder, procs: int, root: int, n: int, tree: Tree, segment_size: int | None = None,
               rendezvous: bool = False, turn: bool = False) -> None:
    """Broadcast ``n`` bytes of RECV down ``tree`` (relative ranks), whole or in segments, eager or rendezvous.

    Each non-root rank first posts the receives of all segments from its parent,
    then sends segment ``k`` to its children as soon as segment ``k`` has arrived, in
    the tree's send order: with ``turn``, one child after another, each send once the
    one before has completed (:func:`send_to_children`), else all at once.  With ``rendezvous``,
    every hop is ready-to-send, clear-to-send, data (paper 003 section 3), and a rank
    forwards only after the whole message has arrived.
    """
    P = procs

    def rank(rel: int) -> int:
        return (rel + root) % P

    segs = segments(n, segment_size or n)
    if not segs:
        return
    empty = Region(Buf.RECV, 0, 0)
    for rel in tree.preorder:
        me, parent = rank(rel), tree.parent[rel]
        kids = [rank(c) for c in tree.children[rel]]
        if rendezvous:
            whole = Region(Buf.RECV, 0, n)
            ready: list[int] = []
            if parent >= 0:
                rts = b.recv(me, rank(parent), empty, TAG_RTS)
                ready = [b.recv(me, rank(parent), whole, TAG_DATA)]
                b.send(me, rank(parent), empty, TAG_CTS, requires=[rts])
            for c in kids:
                b.send(me, c, empty, TAG_RTS, requires=ready)
            cts = [b.recv(me, c, empty, TAG_CTS) for c in kids]
            before: list[int] = []
            for c, clear in zip(kids, cts):
                sent = b.send(me, c, whole, TAG_DATA, requires=[clear, *ready, *before])
                before = [sent] if turn else []
            continue
        got = [b.recv(me, rank(parent), Region(Buf.RECV, o, ln), TAG_DATA) for o, ln in segs] if parent >= 0 else []
        for k, (o, ln) in enumerate(segs):
            send_to_children(b, me, [(c, Region(Buf.RECV, o, ln)) for c in kids], got[k:k + 1], turn)


def send_to_children(b: ScheduleBuilder, rank: int, sends: list[tuple[int, Region]], requires: list[int],
                     turn: bool) -> None:
    """``rank`` sends each ``(peer, region)`` of ``sends`` (tag TAG_DATA) once ``requires`` have
    completed: all at once, or with ``turn`` one after another, each send starting when the one
    before has completed, as MPICH's binomial trees call ``MPI_Send`` in a loop and as paper 003's
    Table 1 and 2 count a node's sends.  The binomial trees send in turn (the largest subtree
    first), the k-ary trees and the pipelined ones post all at once, as MPICH's ``tree`` with
    ``is_non_blocking`` 1 and ``pipelined_tree`` do.

    Why in turn: on a link of bandwidth B the sends of a parent share it, and its first child, the
    root of the largest subtree, has its message only when all of them have theirs: a binomial
    broadcast of m bytes on 8 ranks takes about 6 m / B all at once (3 at the root, 2 at rank 4,
    1 after) and 3 m / B in turn, which is MPICH's time.  Why not always: where the
    receivers copy in parallel (shared memory), all at once is faster.  A send of an eager
    message completes as soon as the library has copied it, so small messages leave at once either
    way."""
    before: list[int] = []
    for peer, region in sends:
        sent = b.send(rank, peer, region, TAG_DATA, requires=[*requires, *before])
        before = [sent] if turn else []


@dataclass(frozen=True)
class TreeVariant:
    """A broadcast down a fixed tree shape: registered as one algorithm; [models] prices the plain ones."""

    name: str
    shape: Callable[..., Tree]
    source: str
    doc: str
    segmented: bool = False
    rendezvous: bool = False
    params: tuple[Param, ...] = ()
    aliases: tuple[str, ...] = ()
    #: A parent sends to its children in turn (:func:`send_to_children`), not all at once.
    turn: bool = False


_SEG = "Splits the message into segments of `segment_size` bytes; "
_RDV = ("Each hop is rendezvous: the sender sends a zero-byte ready-to-send, the receiver posts the data "
        "receive and answers clear-to-send, then the data follows. ")

TREE_VARIANTS = (
    TreeVariant("flat_tree", flat_tree, "paper 003 Table 1 (Flat Tree); paper 002 eq. 2 (linear)",
                 "Linear broadcast: the root sends the whole message to every other rank, all sends at once.\n\n"
                 "One round at the root with P-1 sends; cost (P-1) g(m) + L.", aliases=("linear", "flat")),
    TreeVariant("flat_tree_rendezvous", flat_tree, "paper 003 Table 1 (Flat Tree Rendezvous)",
                 "Flat tree with a rendezvous per receiver.\n\n" + _RDV
                 + "The root sends all ready-to-sends, then the data to each rank that cleared; "
                   "cost (P-1) g(m) + 2 g(1) + 3L.", rendezvous=True),
    TreeVariant("flat_tree_segmented", flat_tree, "paper 003 Table 1 (Segmented Flat Tree)",
                 "Flat tree sending the message in segments.\n\n" + _SEG
                 + "the root sends segment 1 to every rank, then segment 2, ...; cost (P-1) g(s) k + L.",
                 segmented=True, params=(SEGMENT_SIZE,)),
    TreeVariant("chain", chain, "paper 003 Table 1 (Chain)",
                 "Chain: relative rank r receives the whole message from r-1 and forwards it to r+1.\n\n"
                 "P-1 rounds, one message each; cost (P-1)(g(m) + L)."),
    TreeVariant("chain_rendezvous", chain, "paper 003 Table 1 (Chain Rendezvous)",
                 "Chain with a rendezvous on every hop.\n\n" + _RDV
                 + "A rank forwards once the whole message has arrived; cost (P-1)(g(m) + 2 g(1) + 3L).",
                 rendezvous=True),
    TreeVariant("chain_segmented", chain, "paper 003 Table 1 (Seg. Chain (Pipeline))",
                 "Pipelined chain: segments flow down the chain, a rank forwarding segment k while segment "
                 "k+1 arrives.\n\n" + _SEG
                 + "all segment receives are posted at once; cost (P-1)(g(s) + L) + g(s)(k-1).",
                 segmented=True, params=(SEGMENT_SIZE,), aliases=("pipeline",)),
    TreeVariant("binary_tree", binary_tree, "paper 003 Table 1 (Binary Tree)",
                 "Binary tree: relative rank r forwards the whole message to 2r+1 then 2r+2.\n\n"
                 "ceil(log2 P) levels, two sends per inner rank; cost <= ceil(log2 P)(2 g(m) + L).", aliases=("binary",)),
    TreeVariant("binomial_tree", binomial_tree, "paper 003 Table 1 (Binomial Tree); paper 002 section 2",
                 "Binomial tree: in round j, every rank that has the message sends it to the rank 2^j "
                 "further (relative ranks), largest subtree first.\n\n"
                 "ceil(log2 P) rounds; cost floor(log2 P) g(m) + ceil(log2 P) L.", aliases=("binomial",), turn=True),
    TreeVariant("binomial_tree_rendezvous", binomial_tree, "paper 003 Table 1 (Binomial Tree Rendezvous)",
                 "Binomial tree with a rendezvous on every edge.\n\n" + _RDV
                 + "cost floor(log2 P) g(m) + ceil(log2 P)(2 g(1) + 3L).", rendezvous=True, turn=True),
    TreeVariant("binomial_tree_segmented", binomial_tree, "paper 003 Table 1 (Seg. Binomial Tree)",
                 "Binomial tree sending the message in segments.\n\n" + _SEG
                 + "a rank forwards each segment to its children as soon as it arrives; "
                   "cost floor(log2 P) g(s) k + ceil(log2 P) L.", segmented=True, params=(SEGMENT_SIZE,)),
    TreeVariant("knomial_tree", knomial_tree, "generalises paper 003 Table 1 (Binomial Tree); radix-k tree",
                 "k-nomial tree: the binomial tree in base `radix`; a rank sends to radix-1 children per level, "
                 "largest subtrees first.\n\n"
                 "ceil(log_k P) levels of up to k-1 sends; cost about ceil(log_k P)((k-1) g(m) + L).",
                 params=(RADIX,), aliases=("knomial",)),
)


def _register_tree_variant(v: TreeVariant) -> None:
    def build(b: ScheduleBuilder, problem: Problem, segment_size: int | None = None, **shape_params: int) -> None:
        tree_bcast(b, problem.procs, problem.root, problem.size, v.shape(problem.procs, **shape_params), segment_size,
                   v.rendezvous, v.turn)

    register("bcast", v.name, source=v.source, params=v.params, doc=v.doc, aliases=v.aliases)(build)


for _variant in TREE_VARIANTS:
    _register_tree_variant(_variant)


def _binomial_scatter(t: ChunkTracker) -> None:
    """Binomial scatter from relative rank 0: each rank receives its subtree's chunks
    (a contiguous run, since binomial subtrees are ranges of relative ranks), and sends to its
    children in turn, largest subtree first (:func:`send_to_children`)."""
    tree = binomial_tree(t.procs)
    size = tree.subtree_size
    for rel in tree.preorder:
        for c in tree.children[rel]:
            t.transfer(rel, c, range(c, c + size[c]), in_turn=True)


def allgather_recursive_doubling(t: ChunkTracker) -> None:
    """Recursive-doubling allgather of chunk ``r`` of every relative rank ``r``, for any P.

    With p2 the largest power of two <= P, rank p2+i first hands its chunk to rank i;
    ranks 0..p2-1 then exchange, in step j, everything their 2^j-subcube owns with
    partner r XOR 2^j; finally rank i sends rank p2+i what it lacks.  Chunks a rank
    already holds (from an earlier scatter) are never sent to it again.
    """
    P = t.procs
    p2 = 1 << (P.bit_length() - 1)
    extra = P - p2

    def owned(rel: int, mask: int) -> list[int]:
        base = rel & ~(mask - 1)
        own = list(range(base, base + mask))
        if base < extra:
            own += range(p2 + base, p2 + min(base + mask, extra))
        return own

    for i in range(extra):
        t.transfer(p2 + i, i, [p2 + i])
    mask = 1
    while mask < p2:
        for i in range(p2):
            t.transfer(i, i ^ mask, owned(i, mask))
        mask <<= 1
    for i in range(extra):
        t.transfer(i, p2 + i, range(P))


def allgather_ring(t: ChunkTracker) -> None:
    """Ring allgather: in step s, relative rank r passes chunk (r - s) mod P to r + 1."""
    P = t.procs
    for s in range(P - 1):
        for r in range(P):
            t.transfer(r, (r + 1) % P, [(r - s) % P])


def _scatter_allgather(b: ScheduleBuilder, problem: Problem, allgather: Callable[[ChunkTracker], None]) -> None:
    t = ChunkTracker(b, problem.root, pieces(problem.size, problem.procs))
    t.give(0, range(problem.procs))
    _binomial_scatter(t)
    allgather(t)


@register("bcast", "scatter_recursive_doubling_allgather",
          source="Thakur, Rabenseifner, Gropp 2005 (van de Geijn broadcast); pieces by paper 002 eq. 3")
def _bcast_scatter_rd(b: ScheduleBuilder, problem: Problem) -> None:
    """Binomial scatter of P pieces, then a recursive-doubling allgather.

    The message is cut into P pieces (paper 002 eq. 3); a binomial scatter gives relative rank r
    piece r (and its subtree's pieces), then ceil(log2 P) recursive-doubling steps (with a fold-in
    and fold-out step when P is not a power of two) give everyone everything.  Each rank receives
    only pieces it lacks.  Hockney cost about 2 log2(P) alpha + 2 (P-1)/P n beta.
    """
    _scatter_allgather(b, problem, allgather_recursive_doubling)


@register("bcast", "scatter_ring_allgather",
          source="Thakur, Rabenseifner, Gropp 2005 (scatter + ring allgather); pieces by paper 002 eq. 3")
def _bcast_scatter_ring(b: ScheduleBuilder, problem: Problem) -> None:
    """Binomial scatter of P pieces, then a ring allgather.

    After the scatter, P-1 ring steps: relative rank r passes piece (r - s) mod P to r+1 in step s,
    skipping pieces the receiver already holds.  Hockney cost about (log2 P + P - 1) alpha
    + 2 (P-1)/P n beta.
    """
    _scatter_allgather(b, problem, allgather_ring)


#: Below this many bytes the symmetric broadcast sends the whole message in one phase.
#: Paper 002 section 4 measured the binomial tree slightly faster up to 2 kB.
SYMMETRIC_MIN_SPLIT = 2048


@register("bcast", "symmetric_async", source="paper 002 section 3, eq. 3-5", aliases=("symmetric",),
          params=(Param("min_split_size", int, SYMMETRIC_MIN_SPLIT,
                        "messages smaller than this are sent whole, in a single phase (paper 002 section 4)",
                        minimum=0, unit="bytes"),))
def _bcast_symmetric(b: ScheduleBuilder, problem: Problem, min_split_size: int) -> None:
    """Symmetric asynchronous broadcast: the root sends piece i to destination i, and every
    destination forwards its piece to all other destinations as soon as it arrives.

    Phase 1: the message is cut into p = P-1 pieces by paper 002 eq. 3 and the root posts all
    p sends at once.  Phase 2: destination i posts receives for every other piece (from the
    root and from every other destination, in no assumed order) and, once its own piece has
    arrived, sends it to the other p-1 destinations.  Hockney time 2 t0 + n td (2 - 1/p)
    (paper 002 eq. 5).  Messages shorter than `min_split_size`, and any message when P <= 2 (one
    destination), go whole from the root to every rank in one phase.
    """
    P, root, n = problem.procs, problem.root, problem.size
    if n == 0:
        return
    dests = [(root + i) % P for i in range(1, P)]
    if n < min_split_size or P <= 2:
        for d in dests:
            b.recv(d, root, Region(Buf.RECV, 0, n), TAG_DATA)
            b.send(root, d, Region(Buf.RECV, 0, n), TAG_DATA)
        return
    p = len(dests)
    bounds = pieces(n, p)
    piece = [Region(Buf.RECV, bounds[i], bounds[i + 1] - bounds[i]) for i in range(p)]
    for i, d in enumerate(dests):
        if piece[i].length:
            b.send(root, d, piece[i], TAG_DATA)
    for i, d in enumerate(dests):
        mine = b.recv(d, root, piece[i], TAG_DATA) if piece[i].length else None
        others = [(i + k) % p for k in range(1, p)]
        for j in others:
            if piece[j].length:
                b.recv(d, dests[j], piece[j], TAG_DATA)
        if mine is not None:
            for j in others:
                b.send(d, dests[j], piece[i], TAG_DATA, requires=[mine])

