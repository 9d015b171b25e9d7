"""Every registered broadcast, proved correct symbolically for P = 1..33, many roots, sizes and parameters.

The algorithm list comes from the registry, so a newly registered broadcast is
tested here without editing this file.
"""

from __future__ import annotations

import pytest
from helpers import random_tree
from hypothesis import given
from hypothesis import strategies as st

from colltune.algorithms import REGISTRY, Algorithm
from colltune.algorithms.chunks import pieces
from colltune.schedule import verify

BCASTS = REGISTRY.select("bcast")
SIZES = (0, 1, 2, 31, 1009, 65521, 100003)  # zero, one, primes, not divisible by P or segments


def small_params(alg: Algorithm, size: int, procs: int, root: int) -> dict[str, object]:
    """Parameters that stress the algorithm at this size: uneven segments, odd radix, forced split,
    a tree whose subtrees are not ranges of ranks."""
    choice = {"segment_size": max(1, size // 7 + 3), "radix": 3, "min_split_size": 0,
              "edges": random_tree(procs, root, size), "leaders": 2}
    return {p.name: choice[p.name] for p in alg.params if p.type is not str}  # levels: test_hierarchical.py


@pytest.mark.parametrize("alg", BCASTS, ids=lambda a: a.name)
@pytest.mark.parametrize("procs", range(1, 34))
def test_verifies_for_every_p(alg: Algorithm, procs: int) -> None:
    for root in sorted({0, 1 % procs, procs // 2, procs - 1}):
        for size in SIZES:
            verify(alg.schedule(procs, root, size))
            if alg.params:
                verify(alg.schedule(procs, root, size, **small_params(alg, size, procs, root)))


@pytest.mark.parametrize("alg", BCASTS, ids=lambda a: a.name)
def test_verifies_several_megabytes(alg: Algorithm) -> None:
    size = 3 * 2**20 + 17
    report = verify(alg.schedule(33, 17, size))
    assert report.bytes_sent >= 32 * size  # every rank but the root receives all of it at least once


@pytest.mark.parametrize("alg", BCASTS, ids=lambda a: a.name)
@given(data=st.data())
def test_verifies_random_instances(alg: Algorithm, data: st.DataObject) -> None:
    procs = data.draw(st.integers(1, 33), label="procs")
    root = data.draw(st.integers(0, procs - 1), label="root")
    size = data.draw(st.integers(0, 2**21), label="size")
    params = {}
    for p in alg.params:
        if p.name == "segment_size":
            params[p.name] = data.draw(st.integers(max(1, size // 64), max(1, size + 10)), label=p.name)
        elif p.name == "radix":
            params[p.name] = data.draw(st.integers(2, 9), label=p.name)
        elif p.name == "min_split_size":
            params[p.name] = data.draw(st.integers(0, 4 * size + 1), label=p.name)
        elif p.name == "edges":
            params[p.name] = random_tree(procs, root, data.draw(st.integers(0, 2**32 - 1), label="tree seed"))
        elif p.name == "leaders":
            params[p.name] = data.draw(st.integers(1, 4), label=p.name)
        elif p.type is str:
            continue  # a level's algorithm: tests/test_hierarchical.py
        else:
            raise AssertionError(f"no strategy for parameter {p.name}; add one here")
    if alg.hierarchical:
        params["hosts"] = tuple(data.draw(st.lists(st.integers(0, 4), min_size=procs, max_size=procs), label="hosts"))
    verify(alg.schedule(procs, root, size, **params))


def test_receivers_get_each_byte_exactly_once_in_scatter_allgather() -> None:
    for name in ("scatter_recursive_doubling_allgather", "scatter_ring_allgather", "symmetric_async"):
        alg = REGISTRY.get("bcast", name)
        for procs in (2, 3, 7, 8, 13):
            report = verify(alg.schedule(procs, procs - 1, 10007, **({"min_split_size": 0}
                                                                    if name == "symmetric_async" else {})))
            assert report.bytes_sent == (procs - 1) * 10007, (name, procs)


def test_symmetric_message_counts_follow_paper_002() -> None:
    alg = REGISTRY.get("bcast", "symmetric_async")
    P, n = 9, 80000
    s = alg.schedule(P, 3, n)
    p = P - 1
    assert s.num_messages == p + p * (p - 1)  # phase 1, then each destination to the p-1 others
    small = alg.schedule(P, 3, 100)  # below min_split_size: one phase, whole message
    assert small.num_messages == p and small.bytes_sent == p * 100


@given(st.integers(0, 10**9), st.integers(1, 1000))
def test_pieces_follow_paper_002_eq_3(n: int, p: int) -> None:
    b = pieces(n, p)
    sizes = [b[i + 1] - b[i] for i in range(p)]
    assert b[0] == 0 and b[-1] == n
    assert max(sizes) - min(sizes) <= 1
    assert all(b[i] == (i * n) // p for i in range(p + 1))


@pytest.mark.parametrize(
    "name, procs, messages",
    [("flat_tree", 8, 7), ("chain", 8, 7), ("binomial_tree", 8, 7), ("binary_tree", 8, 7),
     ("flat_tree_rendezvous", 8, 21), ("chain_segmented", 4, 3 * 4)],
)
def test_message_counts(name: str, procs: int, messages: int) -> None:
    params = {"segment_size": 250} if name == "chain_segmented" else {}
    assert REGISTRY.get("bcast", name).schedule(procs, 0, 1000, **params).num_messages == messages
