"""Scatter algorithms: the four strategies of paper 003 Table 2.

Buffer convention (see :mod:`colltune.collectives`): the root's SEND buffer holds
``P`` blocks of ``m`` bytes in rank order; every rank's RECV buffer receives its
block.  Trees are over relative ranks (root = 0); a rank receives its whole subtree's blocks
into SCRATCH, keeps its own block and forwards the rest (see :func:`tree_scatter`).
"""

from __future__ import annotations

from colltune.algorithms.bcast import send_to_children
from colltune.algorithms.registry import register
from colltune.algorithms.tags import TAG_DATA
from colltune.algorithms.trees import Tree, binomial_tree, chain, flat_tree
from colltune.collectives import Problem
from colltune.schedule import Buf, Region, ScheduleBuilder


def tree_scatter(b: ScheduleBuilder, problem: Problem, tree: Tree, turn: bool = False) -> None:
    """Scatter down any ``tree``.

    A rank whose subtree is only itself receives its block straight into RECV; an inner rank
    receives its subtree's blocks into SCRATCH in :meth:`Tree.layout` order (its own first),
    copies its own to RECV and forwards each child's blocks as soon as they are in, in the tree's
    send order, with ``turn`` one child after another (:func:`colltune.algorithms.bcast.send_to_children`):
    one message per run of blocks contiguous at both ends (:meth:`Tree.hop_runs`), so one per child
    when subtrees are ranges of relative ranks, two at the root where a range wraps past the last
    rank.
    """
    P, root, m = problem.procs, problem.root, problem.size
    if m == 0:
        return
    size = tree.subtree_size

    def rank(rel: int) -> int:
        return (rel + root) % P

    b.copy(root, Region(Buf.SEND, root * m, m), Region(Buf.RECV, 0, m))
    for rel in tree.preorder:
        me = rank(rel)
        parent = tree.parent[rel]
        got: list[int] = []
        if parent >= 0:
            if size[rel] == 1:
                got = [b.recv(me, rank(parent), Region(Buf.RECV, 0, m), TAG_DATA)]
            else:
                b.need_scratch(me, size[rel] * m)
                got = [b.recv(me, rank(parent), Region(Buf.SCRATCH, dst * m, count * m), TAG_DATA)
                       for _, dst, count in tree.hop_runs(rel, root)]
                b.copy(me, Region(Buf.SCRATCH, 0, m), Region(Buf.RECV, 0, m), requires=got)
        from_buf = Buf.SEND if parent < 0 else Buf.SCRATCH
        send_to_children(b, me, [(rank(c), Region(from_buf, src * m, count * m))
                                 for c in tree.children[rel] for src, _, count in tree.hop_runs(c, root)], got, turn)


@register("scatter", "flat_tree", source="paper 003 Table 2 (Flat Tree)", aliases=("linear", "flat"))
def _scatter_flat(b: ScheduleBuilder, problem: Problem) -> None:
    """Flat tree: the root sends each rank its block directly, in rank order after itself.

    One round of P-1 sends at the root; cost (P-1) g(m) + L.
    """
    tree_scatter(b, problem, flat_tree(problem.procs))


@register("scatter", "chain", source="paper 003 Table 2 (Chain)")
def _scatter_chain(b: ScheduleBuilder, problem: Problem) -> None:
    """Chain: relative rank r receives the blocks of ranks r..P-1 in one message, keeps its own and
    passes the rest to r+1.

    P-1 rounds with shrinking messages; cost sum_{j=1}^{P-1} g(j m) + (P-1) L.
    """
    tree_scatter(b, problem, chain(problem.procs))


@register("scatter", "chain_pipelined", source="paper 003 Table 2 (Pipelined Chain)", aliases=("pipeline",))
def _scatter_chain_pipelined(b: ScheduleBuilder, problem: Problem) -> None:
    """Pipelined chain: the root sends the blocks one by one down the chain, the farthest rank's
    first; each rank forwards every block that is not its own as soon as it arrives.

    Relative rank r receives P-r blocks and forwards P-r-1 of them; cost (P-1)(g(m) + L).
    """
    P, root, m = problem.procs, problem.root, problem.size
    if m == 0:
        return

    def rank(rel: int) -> int:
        return (rel + root) % P

    b.copy(root, Region(Buf.SEND, root * m, m), Region(Buf.RECV, 0, m))
    for dest in range(P - 1, 0, -1):
        b.send(root, rank(1), Region(Buf.SEND, rank(dest) * m, m), TAG_DATA)
    for rel in range(1, P):
        me = rank(rel)
        b.need_scratch(me, (P - 1 - rel) * m)
        for dest in range(P - 1, rel - 1, -1):
            slot = Region(Buf.SCRATCH, (dest - rel - 1) * m, m) if dest > rel else Region(Buf.RECV, 0, m)
            got = b.recv(me, rank(rel - 1), slot, TAG_DATA)
            if dest > rel:
                b.send(me, rank(rel + 1), slot, TAG_DATA, requires=[got])


@register("scatter", "binomial_tree", source="paper 003 Table 2 (Binomial Tree); MPICH binomial scatter",
          aliases=("binomial",))
def _scatter_binomial(b: ScheduleBuilder, problem: Problem) -> None:
    """Binomial tree: in round j, every rank holding blocks passes the upper half of its range
    (the 2^j-subtree of a child) to that child, largest subtree first.

    ceil(log2 P) rounds with halving messages; cost sum_{j=0}^{ceil(log2 P)-1} g(2^j m) + ceil(log2 P) L.
    """
    tree_scatter(b, problem, binomial_tree(problem.procs), turn=True)
