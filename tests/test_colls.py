"""Every registered scatter, gather, allgather, alltoall, reduce, allreduce and barrier, proved
correct symbolically for P = 1..33, several roots, sizes and parameters; reductions also with a
non-commutative operation wherever the registry says the algorithm keeps rank order.

The algorithm lists come from the registry, so a newly registered algorithm is tested here
without editing this file.
"""

from __future__ import annotations

import pytest
from helpers import random_tree, rebuild
from hypothesis import given
from hypothesis import strategies as st

from colltune.algorithms import REGISTRY, Algorithm
from colltune.algorithms.alltoall import pairing, pairing_steps
from colltune.collectives import COLLECTIVES, Problem
from colltune.errors import ColltuneError, ParameterError, VerificationError
from colltune.schedule import Buf, Kind, Region, ScheduleBuilder, verify

OTHERS = [a for a in REGISTRY if a.collective != "bcast"]
BLOCKS = (0, 1, 7, 1000)  # bytes per block
VECTORS = (0, 4, 12, 1004)  # bytes of int32 vectors: none, one element, three, 251


def roots(alg: Algorithm, procs: int) -> list[int]:
    return sorted({0, 1 % procs, procs // 2, procs - 1}) if COLLECTIVES[alg.collective].rooted else [0]


def sizes(alg: Algorithm) -> tuple[int, ...]:
    coll = COLLECTIVES[alg.collective]
    return (0,) if coll.synchronizes else VECTORS if coll.reduces else BLOCKS


def variants(alg: Algorithm, procs: int, root: int) -> list[dict]:
    """Default parameters, plus settings that stress the algorithm: uneven segments, small windows,
    trees whose subtrees are not ranges of ranks."""
    choice = {"segment_size": [5, 12], "window": [1, 3], "switch_buffer": [0], "max_outstanding": [1, 3],
              "edges": [random_tree(procs, root, 1), random_tree(procs, root, 2)], "leaders": [2, 3]}
    # the levels of hierarchical algorithms: tests/test_hierarchical.py
    return [{}] + [{p.name: v} for p in alg.params if p.type is not str for v in choice[p.name]]


def orders(alg: Algorithm) -> list[dict]:
    if not COLLECTIVES[alg.collective].reduces:
        return [{}]
    both = [{"commutative": True}] + ([] if alg.needs_commutative else [{"commutative": False}])
    return [{"op": "sum", "dtype": "int32", **o} for o in both]


@pytest.mark.parametrize("alg", OTHERS, ids=lambda a: f"{a.collective}-{a.name}")
@pytest.mark.parametrize("procs", range(1, 34))
def test_verifies_for_every_p(alg: Algorithm, procs: int) -> None:
    for root in roots(alg, procs):
        for size in sizes(alg):
            for order in orders(alg):
                for params in variants(alg, procs, root):
                    if procs > 20 and params and size:
                        continue  # parameter variants are covered at smaller P
                    verify(alg.schedule(procs, root, size, **order, **params))


@pytest.mark.parametrize("alg", OTHERS, ids=lambda a: f"{a.collective}-{a.name}")
@given(data=st.data())
def test_verifies_random_instances(alg: Algorithm, data: st.DataObject) -> None:
    coll = COLLECTIVES[alg.collective]
    procs = data.draw(st.integers(1, 24), label="procs")
    root = data.draw(st.integers(0, procs - 1), label="root") if coll.rooted else 0
    kw: dict = {}
    if coll.reduces:
        dtype = data.draw(st.sampled_from(["uint8", "int16", "float64", "complex128"]), label="dtype")
        itemsize = {"uint8": 1, "int16": 2, "float64": 8, "complex128": 16}[dtype]
        size = itemsize * data.draw(st.integers(0, 300), label="elements")
        commutative = alg.needs_commutative or data.draw(st.booleans(), label="commutative")
        kw = {"op": "prod", "dtype": dtype, "commutative": commutative}
    else:
        size = 0 if coll.synchronizes else data.draw(st.integers(0, 3000), label="size")
    for p in alg.params:
        if p.name == "segment_size":
            kw[p.name] = data.draw(st.integers(1, max(1, size + 10)), label=p.name)
        elif p.name in ("window", "max_outstanding"):
            kw[p.name] = data.draw(st.integers(1, procs + 1), label=p.name)
        elif p.name == "switch_buffer":
            kw[p.name] = data.draw(st.integers(0, 2 * procs * size + 1), label=p.name)
        elif p.name == "edges":
            kw[p.name] = random_tree(procs, root, data.draw(st.integers(0, 2**32 - 1), label="tree seed"))
        elif p.name == "leaders":
            kw[p.name] = data.draw(st.integers(1, 4), label=p.name)
        elif p.type is str:
            continue  # a level's algorithm: tests/test_hierarchical.py
        else:
            raise AssertionError(f"no strategy for parameter {p.name}; add one here")
    if alg.hierarchical:
        kw["hosts"] = tuple(data.draw(st.lists(st.integers(0, 4), min_size=procs, max_size=procs), label="hosts"))
    verify(alg.schedule(procs, root, size, **kw))


def reads(s, i: int) -> list[tuple[int, int, int]]:
    """``(buf, start, end)`` regions op ``i`` reads."""
    c = s.columns
    k, n = int(c["kind"][i]), int(c["length"][i])
    out = []
    if k == Kind.SEND or k == Kind.REDUCE:
        out.append((int(c["buf"][i]), int(c["offset"][i]), int(c["offset"][i]) + n))
    if k in (Kind.COPY, Kind.REDUCE):
        out.append((int(c["src_buf"][i]), int(c["src_offset"][i]), int(c["src_offset"][i]) + n))
    return out


@pytest.mark.parametrize("alg", OTHERS, ids=lambda a: f"{a.collective}-{a.name}")
def test_verifier_catches_every_mutation(alg: Algorithm) -> None:
    """Dropping any op or changing any tag breaks the schedule; so does forgetting to wait for a
    receive whose data a later op reads."""
    coll = COLLECTIVES[alg.collective]
    kw = {"op": "sum", "dtype": "int32"} if coll.reduces else {}
    s = alg.schedule(5, 2, 0 if coll.synchronizes else 8, **kw)
    verify(s)
    c = s.columns
    for i in range(len(s)):
        with pytest.raises(ColltuneError):
            verify(rebuild(s, drop_op=i))
        if c["kind"][i] in (Kind.SEND, Kind.RECV):
            with pytest.raises(VerificationError):
                verify(rebuild(s, retag=i))
        if c["kind"][i] != Kind.RECV or not c["length"][i]:
            continue
        written = (int(c["buf"][i]), int(c["offset"][i]), int(c["offset"][i]) + int(c["length"][i]))
        readers = [j for j in range(i + 1, s.rank_ptr[c["rank"][i] + 1]) if i in s.requires(j).tolist()
                   and any(b == written[0] and lo < written[2] and written[1] < hi for b, lo, hi in reads(s, j))]
        if readers:
            with pytest.raises(VerificationError):
                verify(rebuild(s, forget=i))


@pytest.mark.parametrize("procs", range(1, 34))
def test_pairing_is_a_perfect_schedule(procs: int) -> None:
    met = set()
    for step in pairing_steps(procs):
        partner = [pairing(procs, step, r) for r in range(procs)]
        assert all(partner[partner[r]] == r for r in range(procs)), f"step {step} is not a pairing"
        assert sum(p == r for r, p in enumerate(partner)) <= procs % 2
        met |= {(r, p) for r, p in enumerate(partner) if p != r}
    assert len(met) == procs * (procs - 1)


@pytest.mark.parametrize("procs", range(1, 34))
def test_bruck_alltoall_copies_a_block_once_per_hop_and_once_to_its_place(procs: int) -> None:
    """Slot j of a rank travels once per set bit of j; the schedule packs it before each hop (not
    before a single-block message) and copies it to the receive buffer once at the end (not when
    the last step receives it there), and never moves it between steps."""
    m = 8
    s = REGISTRY.get("alltoall", "bruck").schedule(procs, 0, m)
    kind, length, rank = s.columns["kind"], s.columns["length"], s.columns["rank"]
    hops = sum(j.bit_count() for j in range(procs))
    for r in range(procs):
        assert length[(kind == Kind.COPY) & (rank == r)].sum() <= (hops + procs) * m
    received_in_place = (kind == Kind.RECV) & (s.columns["buf"] == Buf.RECV)
    assert received_in_place.any() == (procs > 1)


# -- the verifier on reductions and barriers, with hand-made faults ---------------------------------

def _reduce_builder(procs: int, n: int = 8) -> ScheduleBuilder:
    return ScheduleBuilder(procs, n, [n] + [0] * (procs - 1))


def test_reduction_of_everyone_passes_and_names_the_order() -> None:
    b = _reduce_builder(2)
    got = b.recv(0, 1, Region(Buf.RECV, 0, 8))
    b.send(1, 0, Region(Buf.SEND, 0, 8))
    b.reduce(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8), "sum", "int32", requires=[got])
    s = b.build()
    verify(s, Problem("reduce", 2, 0, 8, op="sum", dtype="int32", commutative=False))
    with pytest.raises(VerificationError, match="reduces sum<int32> but the problem is max<int32>"):
        verify(s, Problem("reduce", 2, 0, 8, op="max", dtype="int32"))


def test_reduction_faults() -> None:
    def check(build, match, **problem) -> None:
        b = _reduce_builder(3)
        build(b)
        with pytest.raises(VerificationError, match=match):
            verify(b.build(), Problem("reduce", 3, 0, 8, op="sum", dtype="int32", **problem))

    def twice(b):
        b.copy(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8))
        b.reduce(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8), "sum", "int32")

    def shifted(b):
        b.copy(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8))
        got = b.recv(0, 1, Region(Buf.SCRATCH, 0, 8))
        b.need_scratch(0, 8)
        b.send(1, 0, Region(Buf.SEND, 0, 8))
        b.reduce(0, Region(Buf.SCRATCH, 4, 4), Region(Buf.RECV, 0, 4), "sum", "int32", requires=[got])

    def out_of_order(b):
        b.need_scratch(0, 16)
        b.copy(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8))
        got = b.recv(0, 2, Region(Buf.SCRATCH, 0, 8))
        b.send(2, 0, Region(Buf.SEND, 0, 8))
        b.reduce(0, Region(Buf.RECV, 0, 8), Region(Buf.SCRATCH, 0, 8), "sum", "int32", requires=[got])

    def missing(b):
        b.copy(0, Region(Buf.SEND, 0, 8), Region(Buf.RECV, 0, 8))

    def writes_send(b):
        b.copy(0, Region(Buf.SEND, 0, 4), Region(Buf.SEND, 4, 4))

    check(twice, "rank 0's contribution|contribution of rank 0 twice")
    check(shifted, "combines vector offset 4 with offset 0")
    check(out_of_order, r"combines ranks \[0\] op ranks \[2\]: out of order", commutative=False)
    check(missing, r"must hold the reduction over all ranks")
    check(writes_send, "SEND buffer is the user's input")


def test_barrier_fault_is_named() -> None:
    e = Region(Buf.RECV, 0, 0)
    b = ScheduleBuilder(3)
    b.send(1, 0, e)
    b.send(2, 0, e)
    b.recv(0, 1, e)
    b.recv(0, 2, e)
    with pytest.raises(VerificationError, match="rank 1 can finish before rank 0 has entered"):
        verify(b.build(), Problem("barrier", 3))


def test_problem_validation() -> None:
    assert Problem("reduce", 4, 1, 8).dtype == "uint8"
    assert Problem("alltoall", 4, 3, 8).root == 0
    for kwargs, match in (({"collective": "reduce", "size": 6, "dtype": "int32"}, "whole number of int32"),
                          ({"collective": "allreduce", "op": "band", "dtype": "float32"}, "not defined"),
                          ({"collective": "allreduce", "op": "mean"}, "unknown reduction operation"),
                          ({"collective": "allreduce", "dtype": "float16"}, "cannot be reduced"),
                          ({"collective": "gather", "op": "sum"}, "does not reduce"),
                          ({"collective": "barrier", "size": 1}, "moves no data"),
                          ({"collective": "scan"}, "unknown collective")):
        args = {"procs": 4, "size": 8, **kwargs}
        with pytest.raises(ParameterError, match=match):
            Problem(**args)


def test_commutative_only_algorithms_refuse_order() -> None:
    ring = REGISTRY.get("allreduce", "ring")
    assert ring.needs_commutative
    with pytest.raises(ParameterError, match="needs a commutative operation"):
        ring.schedule(4, 0, 16, op="sum", dtype="int32", commutative=False)
    assert sorted((a.collective, a.name) for a in REGISTRY if a.needs_commutative) == [
        ("allreduce", "hierarchical"), ("allreduce", "ring"), ("reduce", "given_tree"), ("reduce", "hierarchical")]
