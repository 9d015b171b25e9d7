"""The schedule IR and its builder: ordering, dependencies, validation, bulk building."""

import numpy as np
import pytest

from colltune.collectives import Problem
from colltune.errors import ScheduleError, VerificationError
from colltune.schedule import ANY_SOURCE, ANY_TAG, Buf, Kind, Region, ScheduleBuilder, verify

R = Region(Buf.RECV, 0, 4)


def test_ops_sorted_by_rank_keeping_posting_order_and_deps_follow() -> None:
    b = ScheduleBuilder(3, recv_bytes=4)
    a = b.recv(2, 0, R)
    x = b.send(0, 2, R)
    c = b.send(2, 1, R, requires=[a])
    b.recv(1, 2, R)
    s = b.build()
    assert s.rank.tolist() == [0, 1, 2, 2]
    assert s.kind.tolist() == [Kind.SEND, Kind.RECV, Kind.RECV, Kind.SEND]
    assert s.requires(3).tolist() == [2]
    assert s.requires(0).tolist() == []
    assert (x, c) == (1, 2)
    assert s.describe(3) == "rank 2 op 1 (send to rank 1, tag 0, RECV[0:4])"


def test_irequires_recorded_as_start_dependency() -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    first = b.recv(1, 0, R)
    b.delay(1, 0.5, irequires=[first])
    b.send(0, 1, R)
    s = b.build()
    idx, start = s.deps(2)
    assert idx.tolist() == [1] and start.tolist() == [True]
    assert s.requires(2).tolist() == []


def test_fence_makes_rounds() -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    r1 = b.recv(1, 0, Region(Buf.RECV, 0, 2))
    r2 = b.recv(1, 0, Region(Buf.RECV, 2, 2))
    b.fence(1)
    b.send(1, 0, R)
    b.fence(1)
    b.fence(1)
    b.delay(1, 0.0)
    s = b.build()
    ops = list(s.ops_of(1))
    assert sorted(s.requires(ops[2]).tolist()) == [ops[0], ops[1]]
    assert s.requires(ops[3]).tolist() == [ops[2]]
    assert (r1, r2) == (0, 1)


def test_schedule_is_immutable() -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    b.send(0, 1, R)
    b.recv(1, 0, R)
    s = b.build()
    with pytest.raises(ValueError):
        s.columns["length"][0] = 3


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda b: b.send(0, 0, R), "message to itself"),
        (lambda b: b.send(0, 5, R), "peer"),
        (lambda b: b.send(0, 1, Region(Buf.RECV, 2, 4)), r"region RECV\[2:6\] exceeds the buffer's 4 bytes"),
        (lambda b: b.send(0, 1, Region(Buf.SEND, 0, 1)), "exceeds the buffer's 0 bytes"),
        (lambda b: b.send(0, 1, R, tag=-1), "negative tag"),
        (lambda b: b.send(0, -1, R), r"peer outside 0..1 .* \(got peer -1\)"),
        (lambda b: b.recv(0, -2, R), r"\(got peer -2\)"),
        (lambda b: b.recv(0, 1, R, tag=-2), r"negative tag .*\(got tag -2\)"),
        (lambda b: b.delay(0, -1.0), "delay"),
        (lambda b: b.copy(0, Region(Buf.RECV, 2, 4), Region(Buf.RECV, 0, 4)),
         r"source region RECV\[2:6\] exceeds the buffer's 4 bytes"),
    ],
)
def test_bad_ops_are_rejected_with_a_named_problem(make, match) -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    make(b)
    with pytest.raises(ScheduleError, match=match):
        b.build()


def test_dependencies_must_be_earlier_ops_of_the_same_rank() -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    with pytest.raises(ScheduleError, match="not an earlier op"):
        b.send(0, 1, R, requires=[3])
    first = b.send(0, 1, R)
    b.recv(1, 0, R, requires=[first])
    with pytest.raises(ScheduleError, match="dependencies stay within a rank"):
        b.build()


def test_reduce_names_are_checked() -> None:
    b = ScheduleBuilder(1, recv_bytes=8)
    with pytest.raises(ScheduleError, match="unknown reduction operation 'avg'"):
        b.reduce(0, Region(Buf.RECV, 0, 4), Region(Buf.RECV, 4, 4), "avg", "int32")
    with pytest.raises(ScheduleError, match="different lengths"):
        b.copy(0, Region(Buf.RECV, 0, 4), Region(Buf.RECV, 4, 2))


def test_bulk_all_to_all_with_dependencies() -> None:
    P, blk = 64, 16
    b = ScheduleBuilder(P, send_bytes=P * blk, recv_bytes=P * blk)
    src, dst = np.divmod(np.arange(P * P), P)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    recvs = b.bulk(Kind.RECV, dst, peer=src, buf=Buf.RECV, offset=src * blk, length=blk)
    b.bulk(Kind.SEND, src, peer=dst, buf=Buf.SEND, offset=dst * blk, length=blk)
    b.bulk(Kind.DELAY, dst, requires=recvs[:, None], delay=1e-6)
    s = b.build()
    assert s.num_messages == P * (P - 1)
    assert s.bytes_sent == P * (P - 1) * blk
    last = s.ops_of(5)[-1]
    assert Kind(int(s.kind[last])) == Kind.DELAY
    (req,) = s.requires(last)
    assert s.kind[req] == Kind.RECV and s.rank[req] == 5


def test_bulk_rejects_forward_dependencies() -> None:
    b = ScheduleBuilder(2, recv_bytes=4)
    with pytest.raises(ScheduleError, match="not earlier"):
        b.bulk(Kind.DELAY, np.array([0, 0]), requires=np.array([[1], [-1]]))


def test_wildcard_receives_are_valid_but_only_for_the_simulator() -> None:
    """ANY_SOURCE / ANY_TAG receives build (GOAL's -1), are described as such, and the verifier
    and both executors refuse them: their matching depends on timing."""
    b = ScheduleBuilder(3, recv_bytes=4)
    b.send(0, 2, R, tag=5)
    b.send(1, 2, R)
    b.recv(2, ANY_SOURCE, R, tag=ANY_TAG)
    b.recv(2, 1, R, tag=ANY_TAG)
    s = b.build()
    assert s.wildcards
    assert s.describe(2) == "rank 2 op 0 (recv from any rank, any tag, RECV[0:4])"
    assert s.describe(3) == "rank 2 op 1 (recv from rank 1, any tag, RECV[0:4])"
    with pytest.raises(VerificationError, match="wildcard receives"):
        verify(s, Problem("bcast", 3, 0, 4))
    exact = ScheduleBuilder(2, recv_bytes=4)
    exact.send(0, 1, R)
    exact.recv(1, 0, R)
    assert not exact.build().wildcards


def test_max_peers_counts_the_distinct_ranks_one_rank_talks_to() -> None:
    """A rank that sends twice to one rank and receives from it and from another has 2 peers;
    wildcard sources and local ops count for nothing."""
    b = ScheduleBuilder(4, recv_bytes=4)
    b.send(0, 1, R)
    b.send(0, 1, R, tag=1)
    b.recv(0, 1, R)
    b.recv(0, 2, R)
    b.recv(3, ANY_SOURCE, R)
    assert b.build().max_peers == 2
    assert ScheduleBuilder(1, recv_bytes=4).build().max_peers == 0


def test_max_remote_peers_counts_only_the_ranks_on_other_hosts() -> None:
    """Rank 0 talks to ranks 1, 2 and 3: on hosts (0, 0, 1, 1) two of them are on another host;
    on one host none; without hosts all three; labels for the wrong number of ranks are an error."""
    b = ScheduleBuilder(4, recv_bytes=4)
    for peer in (1, 2, 3):
        b.send(0, peer, R)
    s = b.build()
    assert s.max_remote_peers((0, 0, 1, 1)) == 2
    assert s.max_remote_peers((5, 5, 5, 5)) == 0
    assert s.max_remote_peers(None) == s.max_peers == 3
    assert s.max_remote_peers((0, 1, 2, 3)) == 3
    with pytest.raises(ScheduleError, match="3 labels for a schedule of 4 ranks"):
        s.max_remote_peers((0, 0, 1))


def test_max_remote_bytes_counts_what_one_rank_sends_and_receives_over_the_network() -> None:
    """Rank 0 sends 8 B to ranks 1 and 2 and receives 4 B from rank 3: on hosts (0, 0, 1, 1) it
    moves 8 + 4 B to and from the other host, the most of any rank; without hosts all 20 B; on one
    host none; labels for the wrong number of ranks are an error."""
    b = ScheduleBuilder(4, send_bytes=8, recv_bytes=8)
    for peer in (1, 2):
        b.send(0, peer, Region(Buf.SEND, 0, 8))
    b.recv(0, 3, Region(Buf.RECV, 0, 4))
    b.send(3, 0, Region(Buf.SEND, 0, 4))
    s = b.build()
    assert s.max_remote_bytes((0, 0, 1, 1)) == 12
    assert s.max_remote_bytes(None) == 20
    assert s.max_remote_bytes((5, 5, 5, 5)) == 0
    with pytest.raises(ScheduleError, match="3 labels for a schedule of 4 ranks"):
        s.max_remote_bytes((0, 0, 1))


@pytest.mark.parametrize("procs", [1, 2, 3, 5, 8, 13, 64])
def test_max_peers_of_registered_algorithms_in_closed_form(procs: int) -> None:
    from colltune.algorithms import REGISTRY

    def peers(coll: str, alg: str) -> int:
        return REGISTRY.get(coll, alg).schedule(procs, 0, 0 if coll == "barrier" else 4096).max_peers

    others = procs - 1
    assert peers("allgather", "ring") == min(2, others)
    assert peers("allgather", "direct") == others
    assert peers("alltoall", "pairwise_exchange") == others
    assert peers("gather", "flat_tree") == others
    assert peers("bcast", "chain") == min(2, others)
    # recursive doubling at a power of two: one partner per round, r ^ 2^k
    if procs & (procs - 1) == 0:
        assert peers("barrier", "recursive_doubling") == procs.bit_length() - 1
    # dissemination: to r + 2^k and from r - 2^k, which coincide only where 2^(k+1) = P
    rounds = (procs - 1).bit_length()
    to = {(d % procs) for d in (1 << k for k in range(rounds))}
    assert peers("barrier", "dissemination") == len(to | {(-d) % procs for d in to})
