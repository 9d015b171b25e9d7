"""The verifier catches every class of error it claims to, and names rank, op and region.

Hand-made faulty schedules cover each check; mutation tests then show that for
every registered broadcast, removing an operation, a dependency or changing a tag
is caught, so that passing verification is not vacuous.
"""

import pytest
from helpers import random_tree, rebuild

from colltune.algorithms import REGISTRY
from colltune.collectives import Problem
from colltune.errors import VerificationError
from colltune.schedule import Buf, Kind, Region, ScheduleBuilder, verify

N = 8
WHOLE = Region(Buf.RECV, 0, N)


def bcast_problem(procs: int, root: int = 0) -> Problem:
    return Problem("bcast", procs, root, N)


def builder(procs: int) -> ScheduleBuilder:
    return ScheduleBuilder(procs, recv_bytes=N)


def test_correct_hand_made_schedule_passes() -> None:
    b = builder(3)
    got = b.recv(1, 0, WHOLE)
    b.recv(2, 1, WHOLE)
    b.send(0, 1, WHOLE)
    b.send(1, 2, WHOLE, requires=[got])
    report = verify(b.build(), bcast_problem(3))
    assert (report.messages, report.bytes_sent) == (2, 2 * N)


def test_length_mismatch() -> None:
    b = builder(2)
    b.send(0, 1, WHOLE)
    b.recv(1, 0, Region(Buf.RECV, 0, N - 1))
    with pytest.raises(VerificationError, match=r"rank 1 op 0 \(recv from rank 0, tag 0, RECV\[0:7\]\).*8 bytes") as e:
        verify(b.build(), bcast_problem(2))
    assert (e.value.rank, e.value.op) == (1, 0)


def test_unmatched_send() -> None:
    b = builder(2)
    b.send(0, 1, WHOLE, tag=3)
    b.recv(1, 0, WHOLE, tag=4)
    with pytest.raises(VerificationError, match=r"rank 0 op 0 \(send to rank 1, tag 3.*never matched"):
        verify(b.build(), bcast_problem(2))


def test_deadlock_circular_wait() -> None:
    # The root waits for a go-ahead from rank 1 before sending; rank 1 sends the
    # go-ahead only after the data has arrived.
    b = builder(2)
    go = b.recv(0, 1, Region(Buf.RECV, 0, 0), tag=1)
    b.send(0, 1, WHOLE, requires=[go])
    got = b.recv(1, 0, WHOLE)
    b.send(1, 0, Region(Buf.RECV, 0, 0), tag=1, requires=[got])
    with pytest.raises(VerificationError, match=r"deadlock: rank 0 op 1 .* waits for op 0 \(recv from rank 1"):
        verify(b.build(), bcast_problem(2))


def test_deadlock_without_buffering() -> None:
    # Both ranks send first and wait for their send before posting the receive:
    # fine if messages were buffered, a deadlock when they are not.
    b = ScheduleBuilder(2, recv_bytes=N)
    b.need_scratch(0, 4)
    b.need_scratch(1, 4)
    s0 = b.send(0, 1, Region(Buf.SCRATCH, 0, 0))
    b.recv(0, 1, Region(Buf.SCRATCH, 0, 0), requires=[s0])
    s1 = b.send(1, 0, Region(Buf.SCRATCH, 0, 0))
    b.recv(1, 0, Region(Buf.SCRATCH, 0, 0), requires=[s1])
    with pytest.raises(VerificationError, match=r"deadlock: rank 0 op 1 .* waits for op 0 \(send to rank 1"):
        verify(b.build(), bcast_problem(2))


def test_read_before_written() -> None:
    b = builder(3)
    b.send(0, 1, WHOLE)
    b.recv(1, 0, WHOLE)
    b.need_scratch(1, N)
    b.send(2, 1, WHOLE)  # rank 2 never received anything
    b.recv(1, 2, Region(Buf.SCRATCH, 0, N))
    with pytest.raises(VerificationError, match=r"rank 2 op 0 .*reads RECV\[0:8\] before it is written"):
        verify(b.build(), bcast_problem(3))


def test_forwarding_without_requiring_the_receive_is_a_race() -> None:
    b = builder(3)
    b.send(0, 1, WHOLE)
    b.recv(1, 0, WHOLE)
    b.send(1, 2, WHOLE)  # no requires: the data may not have arrived
    b.recv(2, 1, WHOLE)
    with pytest.raises(VerificationError, match=r"rank 1 op 1 .*written by rank 1 op 0 .*does not require"):
        verify(b.build(), bcast_problem(3))


def test_receiving_into_a_region_still_being_sent_is_a_race() -> None:
    b = builder(3)
    b.send(0, 1, WHOLE)
    b.recv(0, 2, Region(Buf.RECV, 0, 2))  # overwrites the root's data while the send may be in flight
    b.recv(1, 0, WHOLE)
    b.send(2, 0, Region(Buf.RECV, 0, 2))
    with pytest.raises(VerificationError, match=r"rank 0 op 1 .*writes RECV\[0:2\] while rank 0 op 0"):
        verify(b.build(), bcast_problem(3))


def test_postcondition_names_the_rank_that_lacks_data() -> None:
    b = builder(3)
    b.send(0, 1, WHOLE)
    b.recv(1, 0, WHOLE)
    with pytest.raises(VerificationError, match=r"postcondition of bcast: rank 2 ends with RECV\[0:8\] holding "
                                                r"undefined bytes, but it must hold rank 0's input RECV\[0:8\]"):
        verify(b.build(), bcast_problem(3))


def test_postcondition_catches_misplaced_bytes() -> None:
    b = builder(2)
    b.send(0, 1, Region(Buf.RECV, 0, 4))
    b.recv(1, 0, Region(Buf.RECV, 4, 4))
    b.send(0, 1, Region(Buf.RECV, 4, 4))
    b.recv(1, 0, Region(Buf.RECV, 0, 4))
    with pytest.raises(VerificationError, match=r"rank 1 ends with RECV\[0:4\] holding rank 0's input RECV\[4:8\]"):
        verify(b.build(), bcast_problem(2))


def test_buffer_sizes_must_fit_the_collective() -> None:
    b = ScheduleBuilder(2, recv_bytes=N + 1)
    with pytest.raises(VerificationError, match="RECV buffer is 9 bytes"):
        verify(b.build(), bcast_problem(2))


def test_copy_moves_symbolic_data() -> None:
    b = ScheduleBuilder(2, recv_bytes=N)
    b.need_scratch(1, N)
    got = b.recv(1, 0, Region(Buf.SCRATCH, 0, N))
    b.copy(1, Region(Buf.SCRATCH, 0, N), WHOLE, requires=[got])
    b.send(0, 1, WHOLE)
    verify(b.build(), bcast_problem(2))
    b2 = ScheduleBuilder(2, recv_bytes=N)
    b2.need_scratch(1, N)
    b2.recv(1, 0, Region(Buf.SCRATCH, 0, N))
    b2.copy(1, Region(Buf.SCRATCH, 0, N), WHOLE)  # copies before the receive is known complete
    b2.send(0, 1, WHOLE)
    with pytest.raises(VerificationError, match=r"rank 1 op 1 \(copy SCRATCH\[0:8\] -> RECV\[0:8\]\)"):
        verify(b2.build(), bcast_problem(2))


BCASTS = REGISTRY.select("bcast")


MUTATION_PARAMS = {"segment_size": 3, "min_split_size": 0, "radix": 3, "edges": lambda root: random_tree(6, root, 3),
                   "leaders": 2}
#: Hosts of the hierarchical algorithms' mutated schedules: uneven, interleaved.
MUTATION_HOSTS = (0, 1, 0, 1, 2, 0)


def _mutable_schedule(alg, root: int = 1):
    """A small schedule on which every op matters: short segments, split messages; the levels
    of a hierarchical one run their defaults on uneven, interleaved hosts."""
    params = {}
    for p in alg.params:
        if p.type is str:
            continue
        value = MUTATION_PARAMS[p.name]
        params[p.name] = value(root) if callable(value) else value
    return alg.schedule(6, root, 10, hosts=MUTATION_HOSTS if alg.hierarchical else None, **params)




@pytest.mark.parametrize("alg", BCASTS, ids=lambda a: a.name)
def test_every_dropped_operation_is_caught(alg) -> None:
    s = _mutable_schedule(alg, root=4)
    for i in range(len(s)):
        with pytest.raises(VerificationError):
            verify(rebuild(s, drop_op=i))


def _data_receives_waited_for(s) -> list[int]:
    """Receives of data that some data-carrying op (send or copy) requires."""
    return sorted({d for i in range(len(s)) if s.length[i] > 0 and s.kind[i] in (Kind.SEND, Kind.COPY)
                   for d in s.requires(i).tolist() if s.kind[d] == Kind.RECV and s.length[d] > 0})


WITH_DEPS = [a for a in BCASTS if _data_receives_waited_for(_mutable_schedule(a))]


def test_only_flat_trees_forward_nothing() -> None:
    assert {a.name for a in BCASTS} - {a.name for a in WITH_DEPS} == {
        "flat_tree", "flat_tree_segmented", "flat_tree_rendezvous"}


@pytest.mark.parametrize("alg", WITH_DEPS, ids=lambda a: a.name)
def test_forgetting_to_wait_for_any_receive_is_caught(alg) -> None:
    s = _mutable_schedule(alg)
    for d in _data_receives_waited_for(s):
        with pytest.raises(VerificationError, match="does not require|before it is written"):
            verify(rebuild(s, forget=d))


@pytest.mark.parametrize("alg", BCASTS, ids=lambda a: a.name)
def test_every_changed_tag_is_caught(alg) -> None:
    s = alg.schedule(5, 2, 7)
    for i in range(len(s)):
        if s.kind[i] in (Kind.SEND, Kind.RECV):
            with pytest.raises(VerificationError):
                verify(rebuild(s, retag=i))
