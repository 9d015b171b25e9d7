"""Tree shapes over *relative* ranks (the root is relative rank 0).

Every shape gives each relative rank its parent (``-1`` for the root) and its
children in send order.  Absolute rank = ``(relative + root) % procs``.
The shapes are those of paper 003 Table 1: flat tree, chain, binary tree,
binomial tree, and the k-nomial tree that generalises the binomial one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


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
    def preorder(self) -> tuple[int, ...]:
        """Relative ranks, each parent before its children, children in send order."""
        out, stack = [], [0]
        while stack:
            rel = stack.pop()
            out.append(rel)
            stack.extend(reversed(self.children[rel]))
        return tuple(out)


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
