"""Tree shapes: spanning trees over relative ranks, with the documented send orders."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from colltune.algorithms.trees import binary_tree, binomial_tree, chain, flat_tree, knomial_tree

SHAPES = {"flat": flat_tree, "chain": chain, "binary": binary_tree, "binomial": binomial_tree,
          "knomial3": lambda p: knomial_tree(p, 3), "knomial5": lambda p: knomial_tree(p, 5)}


@pytest.mark.parametrize("shape", SHAPES)
@given(procs=st.integers(1, 300))
def test_spanning_tree(shape: str, procs: int) -> None:
    t = SHAPES[shape](procs)
    assert t.parent[0] == -1
    assert sorted(t.preorder) == list(range(procs))
    for rel in range(1, procs):
        assert rel in t.children[t.parent[rel]]
    assert sum(len(k) for k in t.children) == procs - 1
    assert t.subtree_size[0] == procs


def test_binomial_matches_mpich_order() -> None:
    t = binomial_tree(8)
    assert t.children[0] == (4, 2, 1)
    assert t.children[4] == (6, 5)
    assert t.parent[6] == 4 and t.parent[7] == 6


@given(st.integers(1, 500))
def test_binomial_subtrees_are_ranges(procs: int) -> None:
    t = binomial_tree(procs)
    for rel in range(procs):
        below = {rel}
        stack = list(t.children[rel])
        while stack:
            c = stack.pop()
            below.add(c)
            stack.extend(t.children[c])
        assert below == set(range(rel, rel + t.subtree_size[rel]))


def test_knomial_radix_3() -> None:
    t = knomial_tree(10, 3)
    assert t.children[0] == (9, 3, 6, 1, 2)
    assert t.children[3] == (4, 5)
    with pytest.raises(ValueError):
        knomial_tree(4, 1)
