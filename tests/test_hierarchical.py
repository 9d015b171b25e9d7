"""The hierarchical compositions proved correct by the verifier: every collective, many P, ranks
per host, uneven hosts, block, round-robin and random placement, every root kind, sizes that do
not divide, and every algorithm a level can run."""

from __future__ import annotations

import random

import pytest

from colltune.algorithms import REGISTRY, Algorithm
from colltune.algorithms.levels import Layout
from colltune.collectives import COLLECTIVES, Problem
from colltune.errors import ParameterError
from colltune.schedule import Kind, verify

HIERARCHICAL = [a for a in REGISTRY if a.hierarchical]


def layouts(procs: int) -> dict[str, tuple[int, ...]]:
    """Host labels of every rank: block and round-robin placement of 2 and 3 ranks per host
    (the last host short where they do not divide), one host, one rank per host, and a random
    uneven one."""
    rng = random.Random(procs)
    out = {"one host": (7,) * procs, "one per host": tuple(range(procs)),
           "random": tuple(rng.randrange(3) for _ in range(procs))}
    for k in (2, 3):
        hosts = -(-procs // k)
        out[f"block {k}"] = tuple(r // k for r in range(procs))
        out[f"round-robin {k}"] = tuple(r % hosts for r in range(procs))
    return out


def kwargs(alg: Algorithm, size: int) -> dict:
    return {"op": "sum", "dtype": "int32"} if COLLECTIVES[alg.collective].reduces else {}


def sizes(alg: Algorithm) -> tuple[int, ...]:
    coll = COLLECTIVES[alg.collective]
    return (0,) if coll.synchronizes else (0, 4, 12, 1004) if coll.reduces else (0, 1, 7, 1000)


@pytest.mark.parametrize("alg", HIERARCHICAL, ids=lambda a: a.collective)
@pytest.mark.parametrize("procs", [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16])
def test_verifies_on_every_layout(alg: Algorithm, procs: int) -> None:
    rooted = COLLECTIVES[alg.collective].rooted
    for name, hosts in layouts(procs).items():
        for root in sorted({0, procs // 2, procs - 1}) if rooted else [0]:
            for size in sizes(alg):
                verify(alg.schedule(procs, root, size, hosts=hosts, **kwargs(alg, size)))


def level_params(alg: Algorithm) -> list[tuple[str, str]]:
    """Every (parameter, algorithm) a level of ``alg`` can run: one at a time, the others default."""
    out = []
    for p in alg.params:
        if p.type is not str:
            continue
        collective = p.doc.split()[1]  # "the <collective> algorithm ..."
        for other in REGISTRY.select(collective):
            if not other.hierarchical and not any(q.name == "edges" for q in other.params):
                out.append((p.name, other.name))
    return out


@pytest.mark.parametrize("alg", HIERARCHICAL, ids=lambda a: a.collective)
def test_every_level_runs_any_registered_algorithm(alg: Algorithm) -> None:
    pairs = level_params(alg)
    assert pairs
    for name, level in pairs:
        for procs, hosts in ((7, (0, 0, 1, 1, 1, 2, 0)), (6, (0, 1, 2, 0, 1, 2))):
            root = procs - 2 if COLLECTIVES[alg.collective].rooted else 0
            size = 0 if COLLECTIVES[alg.collective].synchronizes else 12
            verify(alg.schedule(procs, root, size, hosts=hosts, **kwargs(alg, size), **{name: level}))


@pytest.mark.parametrize("alg", [a for a in HIERARCHICAL if any(p.name == "leaders" for p in a.params)],
                         ids=lambda a: a.collective)
@pytest.mark.parametrize("leaders", [2, 3])
@pytest.mark.parametrize("segment_size", [0, 8])
def test_several_leaders_and_segments(alg: Algorithm, leaders: int, segment_size: int) -> None:
    for procs in (4, 8, 9):
        for hosts in layouts(procs).values():
            for size in (0, 4, 36, 400):
                verify(alg.schedule(procs, procs - 1 if COLLECTIVES[alg.collective].rooted else 0, size,
                                    hosts=hosts, leaders=leaders, segment_size=segment_size, **kwargs(alg, size)))


def crossings(alg: Algorithm, procs: int, hosts: tuple[int, ...], size: int, **params) -> tuple[int, int]:
    """Messages and bytes that go from one host to another."""
    s = alg.schedule(procs, 0, size, hosts=hosts, **kwargs(alg, size), **params)
    c = s.columns
    cross = [i for i in range(len(s)) if c["kind"][i] == Kind.SEND and hosts[c["rank"][i]] != hosts[c["peer"][i]]]
    return len(cross), int(sum(int(c["length"][i]) for i in cross))


def test_each_host_crosses_the_network_once() -> None:
    """With 4 hosts of 2 ranks, round-robin: a broadcast, reduce, gather and scatter send 3
    messages between hosts (one per host but the root's); a gather and scatter whose network level
    is a flat tree carry each host's two blocks once."""
    hosts = (0, 1, 2, 3, 0, 1, 2, 3)
    for coll in ("bcast", "reduce", "gather", "scatter"):
        alg = REGISTRY.get(coll, "hierarchical")
        count, nbytes = crossings(alg, 8, hosts, 64, inter="flat_tree")
        assert count == 3, coll
        assert nbytes == 3 * 64 * (1 if coll in ("bcast", "reduce") else 2), coll
        flat = REGISTRY.get(coll, "binomial_tree")
        s = flat.schedule(8, 0, 64, **kwargs(flat, 64))
        c = s.columns
        assert sum(1 for i in range(len(s)) if c["kind"][i] == Kind.SEND
                   and hosts[c["rank"][i]] != hosts[c["peer"][i]]) == 6  # binomial: all but 0-4 cross


def test_alltoall_sends_one_message_per_pair_of_hosts() -> None:
    count, nbytes = crossings(REGISTRY.get("alltoall", "hierarchical"), 8, (0, 0, 1, 1, 2, 2, 3, 3), 10)
    assert count == 4 * 3
    assert nbytes == 4 * 3 * 2 * 2 * 10  # every block between two hosts, once


def test_several_leaders_share_the_network_level() -> None:
    """Two leaders per host: the ranks sending between hosts are two per host, each half of it."""
    alg = REGISTRY.get("allreduce", "hierarchical")
    hosts = (0, 0, 1, 1)
    s = alg.schedule(4, 0, 64, hosts=hosts, leaders=2, op="sum", dtype="int32")
    c = s.columns
    senders = {int(c["rank"][i]) for i in range(len(s)) if c["kind"][i] == Kind.SEND
               and hosts[c["rank"][i]] != hosts[c["peer"][i]]}
    assert senders == {0, 1, 2, 3}
    assert crossings(alg, 4, hosts, 64, leaders=2) == (4, 4 * 32)


def test_layout_groups_and_leaders() -> None:
    lay = Layout.of(Problem("bcast", 6, 4, 8, hosts=(5, 9, 5, 9, 2, 2)))
    assert lay.groups == ((0, 2), (1, 3), (4, 5))
    assert lay.host_of == (0, 1, 0, 1, 2, 2)
    assert lay.leaders(4, 2) == [[0, 1, 4], [2, 3, 4]]
    assert Layout.of(Problem("bcast", 3, 0, 8)).groups == ((0,), (1,), (2,))


def test_bad_levels_and_hosts_are_clear_errors() -> None:
    alg = REGISTRY.get("bcast", "hierarchical")
    with pytest.raises(ParameterError, match="inter='binomal' is not a bcast algorithm a level can run"):
        alg.schedule(4, 0, 8, hosts=(0, 0, 1, 1), inter="binomal")
    with pytest.raises(ParameterError, match="intra='hierarchical'"):
        alg.schedule(4, 0, 8, hosts=(0, 0, 1, 1), intra="hierarchical")
    with pytest.raises(ParameterError, match="3 labels for 4 ranks"):
        alg.schedule(4, 0, 8, hosts=(0, 0, 1))
    with pytest.raises(ParameterError, match="hosts must be integer labels"):
        alg.schedule(2, 0, 8, hosts=("a", "b"))
    with pytest.raises(ParameterError, match="commutative"):
        REGISTRY.get("allreduce", "hierarchical").schedule(4, 0, 8, hosts=(0, 0, 1, 1), op="sum", dtype="int32",
                                                           commutative=False)
