"""Gather algorithms: flat, binomial, linear with synchronisation, and the coordinated gather
of paper 000 (Algorithm 1).

Buffer convention (see :mod:`colltune.collectives`): every rank's SEND buffer holds
its block of ``m`` bytes; the root's RECV buffer receives block ``r`` at ``r*m``.
"""

from __future__ import annotations

from colltune.algorithms.registry import Param, register
from colltune.algorithms.tags import TAG_DATA, TAG_SIGNAL
from colltune.algorithms.trees import Tree, binomial_tree
from colltune.collectives import Problem
from colltune.models.cluster import TABLE1, coordinated_window
from colltune.schedule import Buf, Region, ScheduleBuilder

SIGNAL = Region(Buf.RECV, 0, 0)

#: Default switch buffer of the coordinated gather, in bytes: paper 000 Table 1's BL packets of its
#: MTU (1935 packets of 1500 bytes).
DEFAULT_SWITCH_BUFFER = TABLE1.BL * TABLE1.mtu


def tree_gather(b: ScheduleBuilder, procs: int, root: int, m: int, tree: Tree, dest: Buf = Buf.RECV) -> None:
    """Gather blocks of ``m`` bytes up any ``tree`` (relative ranks).

    A leaf sends its SEND buffer to its parent; an inner rank stages its subtree's blocks in
    SCRATCH in :meth:`Tree.layout` order (its own first, copied from SEND), then sends them on:
    one message per run of blocks contiguous at both ends (:meth:`Tree.hop_runs`), so one when
    subtrees are ranges of relative ranks.  The root receives into ``dest`` at the blocks'
    absolute positions, a range that wraps past the last rank in two messages.
    """
    if m == 0:
        return
    size = tree.subtree_size

    def rank(rel: int) -> int:
        return (rel + root) % procs

    for rel in reversed(tree.preorder):
        me = rank(rel)
        kids = tree.children[rel]
        if rel == 0:
            b.copy(me, Region(Buf.SEND, 0, m), Region(dest, me * m, m))
            for c in kids:
                for first, _, count in tree.hop_runs(c, root):
                    b.recv(me, rank(c), Region(dest, first * m, count * m), TAG_DATA)
            continue
        parent = rank(tree.parent[rel])
        if not kids:
            b.send(me, parent, Region(Buf.SEND, 0, m), TAG_DATA)
            continue
        b.need_scratch(me, size[rel] * m)
        b.copy(me, Region(Buf.SEND, 0, m), Region(Buf.SCRATCH, 0, m))
        got = [b.recv(me, rank(c), Region(Buf.SCRATCH, at * m, count * m), TAG_DATA)
               for c in kids for at, _, count in tree.hop_runs(c, root)]
        for _, first, count in tree.hop_runs(rel, root):
            b.send(me, parent, Region(Buf.SCRATCH, first * m, count * m), TAG_DATA, requires=got)


def _to_root(b: ScheduleBuilder, problem: Problem, order: list[int]) -> dict[int, int]:
    """The root copies its own block and posts one receive per other rank, in ``order``; returns
    the receive op of each rank."""
    root, m = problem.root, problem.size
    b.copy(root, Region(Buf.SEND, 0, m), Region(Buf.RECV, root * m, m))
    return {r: b.recv(root, r, Region(Buf.RECV, r * m, m), TAG_DATA) for r in order}


def _others(problem: Problem) -> list[int]:
    """Every rank but the root, in relative order (root+1, root+2, ...)."""
    return [(problem.root + j) % problem.procs for j in range(1, problem.procs)]


@register("gather", "flat_tree", source="paper 000 section 5.1 (the traditional gather); MPICH/LAM linear gather",
          aliases=("linear", "flat"))
def _gather_flat(b: ScheduleBuilder, problem: Problem) -> None:
    """Flat tree: every rank sends its block to the root at once; the root posts all receives.

    The uncoordinated gather of most MPI libraries (paper 000 section 5.1); P-1 senders compete
    for the root's link, cost about (P-1) g(m) + L without contention.
    """
    if problem.size == 0:
        return
    _to_root(b, problem, _others(problem))
    for r in _others(problem):
        b.send(r, problem.root, Region(Buf.SEND, 0, problem.size), TAG_DATA)


@register("gather", "binomial_tree", source="MPICH binomial gather; the reverse of paper 003 Table 2 (Binomial)",
          aliases=("binomial",))
def _gather_binomial(b: ScheduleBuilder, problem: Problem) -> None:
    """Binomial tree: in round j, every rank whose relative rank has bit j set sends everything it
    has gathered (its 2^j-subtree's blocks) to the rank 2^j below it.

    ceil(log2 P) rounds with doubling messages; cost sum_{j=0}^{ceil(log2 P)-1} g(2^j m) + ceil(log2 P) L.
    """
    tree_gather(b, problem.procs, problem.root, problem.size, binomial_tree(problem.procs))


@register("gather", "linear_synchronized", source="paper 000 section 5.2 (senders coordinated by the root)",
          aliases=("linear_sync",))
def _gather_linear_sync(b: ScheduleBuilder, problem: Problem) -> None:
    """Linear with synchronisation: the root grants the senders in turn, one at a time.

    The root posts every receive, then sends a zero-byte grant to rank root+1, waits for its block,
    grants root+2, and so on; a rank sends its block only once granted.  Only one sender is active
    at a time, so the root's link never sees contention; cost (P-1)(g(m) + 2L + g(0)).
    """
    root, m = problem.root, problem.size
    if m == 0:
        return
    got = _to_root(b, problem, _others(problem))
    previous: list[int] = []
    for r in _others(problem):
        b.send(root, r, SIGNAL, TAG_SIGNAL, requires=previous)
        previous = [got[r]]
        grant = b.recv(r, root, SIGNAL, TAG_SIGNAL)
        b.send(r, root, Region(Buf.SEND, 0, m), TAG_DATA, requires=[grant])


@register("gather", "coordinated", source="paper 000 section 5.3, Algorithm 1",
          params=(Param("window", int, 0,
                        "w, the number of ranks sending at a time; 0 chooses it by paper 000 eq. 7 (between Gal "
                        "and Gau) from its Table 1", minimum=0),
                  Param("switch_buffer", int, DEFAULT_SWITCH_BUFFER,
                        "B, the bytes the switch can buffer; if all (P-1) m bytes fit, everyone sends at once",
                        minimum=0, unit="bytes")))
def _gather_coordinated(b: ScheduleBuilder, problem: Problem, window: int, switch_buffer: int) -> None:
    """Coordinated gather: at most `window` ranks send at a time; each passes a start signal on.

    Relative ranks 1..w send their block at once; when rank j's send is done it sends a zero-byte
    start signal to rank j+w, which waits for it before sending.  If the switch buffer B holds all
    (P-1) m bytes, every rank sends at once (Algorithm 1's first branch).  Keeps the root's link
    busy without overflowing the switch; time C1 + (P-1) m D + C2 (paper 000 eq. 8).
    """
    P, root, m = problem.procs, problem.root, problem.size
    if m == 0:
        return
    window = window or coordinated_window(TABLE1, P, m, switch_buffer)
    _to_root(b, problem, _others(problem))
    everyone = switch_buffer >= (P - 1) * m
    for j in range(1, P):
        me = (root + j) % P
        start = [] if everyone or j <= window else [b.recv(me, (root + j - window) % P, SIGNAL, TAG_SIGNAL)]
        sent = b.send(me, root, Region(Buf.SEND, 0, m), TAG_DATA, requires=start)
        if not everyone and j + window < P:
            b.send(me, (root + j + window) % P, SIGNAL, TAG_SIGNAL, requires=[sent])
