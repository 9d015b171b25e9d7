"""Tree shapes over *relative* ranks (the root is relative rank 0).

Every shape gives each relative rank its parent (``-1`` for the root) and its
children in send order.  Absolute rank = ``(relative + root) % procs``.
The shapes are those of paper 003 Table 1: flat tree, chain, binary tree,
binomial tree, and the k-nomial tree that generalises the binomial one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from colltune.errors import ParameterError


@dataclass(frozen=True)
class Tree:
    """A rooted spanning tree over relative ranks ``0..procs-1``."""

    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]

    @property
    def procs(self) -> int:
        return len(self.parent)

    @cached_property
    def subtree_size(self) -> tuple[int, ...]:
        """Number of ranks in each rank's subtree (itself included)."""
        size = [1] * self.procs
        for rel in reversed(self.preorder):
            for c in self.children[rel]:
                size[rel] += size[c]
        return tuple(size)

    @cached_property
    def position(self) -> tuple[int, ...]:
        """Each relative rank's index in :attr:`preorder`."""
        pos = [0] * self.procs
        for i, rel in enumerate(self.preorder):
            pos[rel] = i
        return tuple(pos)

    def layout(self, rel: int) -> tuple[int, ...]:
        """The ranks of ``rel``'s subtree in the order a rooted personalised collective stages their
        blocks at ``rel``: ``rel`` first, then the others by relative rank (for a tree whose
        subtrees are ranges of relative ranks, simply ``rel .. rel + size - 1``)."""
        start = self.position[rel]
        return (rel, *sorted(self.preorder[start + 1:start + self.subtree_size[rel]]))

    def hop_runs(self, child: int, root: int) -> list[tuple[int, int, int]]:
        """The blocks of ``child``'s subtree on the hop between it and its parent, as
        ``(parent offset, child offset, count)`` runs contiguous at both ends (one message each),
        offsets in blocks: the child's :meth:`layout`, the parent's layout too, except at the top
        (relative rank 0), which holds the blocks in absolute rank order ``(rel + root) % procs``."""
        parent = self.parent[child]
        theirs = {d: i for i, d in enumerate(self.layout(parent))} if parent else None
        runs: list[list[int]] = []
        for i, d in enumerate(self.layout(child)):
            a = (d + root) % self.procs if theirs is None else theirs[d]
            if runs and runs[-1][0] + runs[-1][2] == a and runs[-1][1] + runs[-1][2] == i:
                runs[-1][2] += 1
            else:
                runs.append([a, i, 1])
        return [(a, i, n) for a, i, n in runs]

    @cached_property
    def preorder(self) -> tuple[int, ...]:
        """Relative ranks, each parent before its children, children in send order."""
        out, stack = [], [0]
        while stack:
            rel = stack.pop()
            out.append(rel)
            stack.extend(reversed(self.children[rel]))
        return tuple(out)


def from_edges(procs: int, root: int, edges: Sequence[Sequence[int]]) -> Tree:
    """The tree whose (parent, child) ``edges`` are in absolute ranks, as relative ranks from
    ``root``; each parent sends to its children in the order their edges are listed.  Empty
    ``edges`` give the flat tree.  Raises :class:`ParameterError` unless the edges form a spanning
    tree of ranks 0..procs-1 rooted at ``root``."""
    if not edges:
        return flat_tree(procs)
    if len(edges) != procs - 1:
        raise ParameterError(f"a tree over {procs} ranks has {procs - 1} edges, not {len(edges)}")
    children: list[list[int]] = [[] for _ in range(procs)]
    seen_parent = [False] * procs
    for edge in edges:
        if len(edge) != 2 or not all(0 <= x < procs for x in edge):
            raise ParameterError(f"edge {list(edge)} is not a pair of ranks 0..{procs - 1}")
        parent, child = ((x - root) % procs for x in edge)
        if child == 0 or seen_parent[child]:
            raise ParameterError(f"edge {list(edge)}: rank {edge[1]} is the root or already has a parent")
        seen_parent[child] = True
        children[parent].append(child)
    tree = _from_children(procs, children)
    if len(tree.preorder) != procs:
        raise ParameterError(f"the edges do not connect every rank to the root {root} (they contain a cycle)")
    return tree


def _from_children(procs: int, children: list[list[int]]) -> Tree:
    parent = [-1] * procs
    for p, kids in enumerate(children):
        for c in kids:
            parent[c] = p
    return Tree(tuple(parent), tuple(tuple(k) for k in children))


def flat_tree(procs: int) -> Tree:
    """The root sends to every other rank, in rank order."""
    return _from_children(procs, [list(range(1, procs))] + [[] for _ in range(procs - 1)])


def chain(procs: int) -> Tree:
    """Relative rank ``r`` sends to ``r + 1``."""
    return _from_children(procs, [[r + 1] if r + 1 < procs else [] for r in range(procs)])


def binary_tree(procs: int) -> Tree:
    """Heap-ordered binary tree: ``r`` sends to ``2r + 1`` then ``2r + 2``."""
    return _from_children(procs, [[c for c in (2 * r + 1, 2 * r + 2) if c < procs] for r in range(procs)])


def knomial_tree(procs: int, radix: int) -> Tree:
    """k-nomial tree of the given radix (``radix = 2`` is the binomial tree).

    Write relative rank ``r`` in base ``radix``; its parent clears the lowest
    non-zero digit, its children set one digit below that one.  Children are in
    send order: largest subtrees (highest digit) first, as MPICH does.
    """
    if radix < 2:
        raise ValueError(f"radix must be >= 2, got {radix}")
    children: list[list[int]] = [[] for _ in range(procs)]
    for r in range(procs):
        span = 1  # radix ** (position of r's lowest non-zero digit); for the root, beyond the top
        if r == 0:
            while span < procs:
                span *= radix
        else:
            while (r // span) % radix == 0:
                span *= radix
        level = span // radix
        while level >= 1:
            for d in range(1, radix):
                c = r + d * level
                if c < procs:
                    children[r].append(c)
            level //= radix
    return _from_children(procs, children)


def binomial_tree(procs: int) -> Tree:
    """Binomial tree: the k-nomial tree with radix 2."""
    return knomial_tree(procs, 2)
