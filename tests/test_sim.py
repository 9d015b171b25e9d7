"""The simulator: paper 001's worked example, agreement with the cost formulas where their
assumptions hold, shared links, rendezvous, retransmissions, GOAL in and out, determinism."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from colltune.algorithms import REGISTRY
from colltune.cli import main, networks_markdown
from colltune.models import predict
from colltune.models.cluster import TABLE1, transfer_ratio
from colltune.models.params import (
    Hockney,
    LatencyMatrix,
    LogGP,
    LogP,
    PLogP,
    PlogPT,
    PLogPTable,
    Postal,
    Tabulated,
    TreeLevels,
)
from colltune.profiles import load_profile
from colltune.schedule import Buf, Kind, Region, Schedule, ScheduleBuilder
from colltune.sim import NETWORKS, SimulationError, Topology, binary_tree, simulate, star
from colltune.sim.engine import TICKS
from colltune.sim.goal import GoalError, from_goal, read_goal, to_goal
from colltune.sim.network import NetworkError
from colltune.sim.topology import TCP_RTO_MIN, two_level

DATA = Path(__file__).parent / "data"
EXAMPLE = load_profile("builtin:paper001-example")
LOGGOPS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, O=0.0, S=65536)
PLOGP = PLogP(L=3e-6, unidirectional=PLogPTable(g=Tabulated(sizes=(0, 1000, 100000), values=(1e-6, 3e-6, 1e-4))))


def close(a: float, b: float) -> bool:
    """Equal up to the engine's clock: without a topology each op's costs are rounded to a whole
    tick (colltune.sim.engine.TICKS), half a tick at most, and these schedules hold fewer than 200
    ops."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=100 / TICKS)


# -- paper 001's worked example --------------------------------------------------------------------

def test_paper001_worked_example_gives_12_15_and_26():
    """Fig. 9-12: the first Isends end at 12 (eq. 16-17), their Irecvs at 15, and the last Wait
    of rank 3 leaves at 26."""
    schedule = read_goal(DATA / "paper001_example.goal", time_unit=1.0)
    result = simulate(schedule, "plogpt", EXAMPLE.params("plogpt"))
    c = schedule.columns
    first_sends = (c["kind"] == Kind.SEND) & (c["tag"] == 0)
    first_recvs = (c["kind"] == Kind.RECV) & (c["tag"] == 0)
    assert result.flow_end[first_sends].tolist() == [12.0] * 4
    assert result.end[first_sends].tolist() == [12.0] * 4
    assert result.end[first_recvs].tolist() == [15.0] * 4
    assert result.flow_rate[first_sends].tolist() == [2.0] * 4  # b(2)/2, eq. 7
    assert result.total == 26.0
    assert result.completion.tolist() == [23.0, 15.0, 15.0, 26.0]


def test_times_are_exact_sums_without_a_topology():
    """0.1 s then 0.2 s of work end when 0.3 s of work does: the engine counts whole ticks (as
    LogGOPSim counts whole nanoseconds), where doubles would end the first at 0.30000000000000004 s
    and order the two sends that follow by how the sums round."""
    text = ("num_ranks 3\nrank 0 {\nrecv 1b from 1 tag 0\nrecv 1b from 2 tag 0\n}\n"
            "rank 1 {\na: calc 300\nb: send 1b to 0 tag 0\nb requires a\n}\n"
            "rank 2 {\na: calc 100\nb: calc 200\nb requires a\nc: send 1b to 0 tag 0\nc requires b\n}\n")
    schedule = from_goal(text, time_unit=1e-3)
    result = simulate(schedule, "loggops", LOGGOPS)
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
    assert result.start[sends[0]] == result.start[sends[1]] == 0.3
    assert result.total * TICKS == round(result.total * TICKS)


# -- agreement with the cost formulas -------------------------------------------------------------

AGREE = [
    # (network, params, profile model, collective, algorithm, procs, size, algorithm parameters)
    *[("loggops", LOGGOPS, "loggp", "bcast", a, P, m, {}) for a in ("flat_tree", "chain")
      for P in (1, 2, 3, 5, 8) for m in (0, 1, 1000, 65536)],
    *[("plogp", PLOGP, "plogp", "bcast", a, P, 50000, {}) for a in ("flat_tree", "chain")
      for P in (1, 2, 3, 5, 8)],
    *[("plogp", PLOGP, "plogp", "bcast", "binomial_tree", P, 50000, {}) for P in (1, 2, 4, 8, 16)],
    *[("plogp", PLOGP, "plogp", "bcast", a, P, 8192 * 6, {"segment_size": 8192})
      for a in ("chain_segmented", "flat_tree_segmented") for P in (2, 3, 5, 8)],
    *[("plogp", PLOGP, "plogp", "scatter", a, P, 3000, {}) for a in ("flat_tree", "chain_pipelined")
      for P in (2, 3, 5, 8)],
    *[("postal", Postal(lam=3.0, step=1.0), "postal", "bcast", "binomial_tree", P, 100, {}) for P in (2, 4, 8, 16)],
    *[("logp", LogP(L=4e-6, o=1e-6, g=2e-6), "logp", "bcast", "binomial_tree", P, 100, {}) for P in (2, 4, 8, 16)],
    *[("cluster", TABLE1, "cluster", "bcast", "binomial_tree", P, 1000, {}) for P in (2, 4, 8, 16)],
    *[("hockney", Hockney(alpha=1e-5, beta=1e-9), "hockney", "bcast", a, P, 4096, {})
      for a in ("flat_tree", "binomial_tree") for P in (2, 4, 8, 16)],
]


@pytest.mark.parametrize("network,params,model,collective,algorithm,procs,size,algparams", AGREE,
                         ids=[f"{a[0]}-{a[3]}-{a[4]}-P{a[5]}-m{a[6]}" for a in AGREE])
def test_simulation_equals_formula(network, params, model, collective, algorithm, procs, size, algparams):
    """Where the formula's assumptions hold (no contention, eager messages, P a power of two for
    the binomial tree, whole segments), the simulated time is the formula's."""
    schedule = REGISTRY.get(collective, algorithm).schedule(procs, 0, size, **algparams)
    simulated = simulate(schedule, network, params).total
    formula = predict(params, model, collective, algorithm, procs, size, 0, **algparams).time
    assert close(simulated, formula), (simulated, formula)


@pytest.mark.parametrize("variant", ["flat_tree", "binomial_tree", "binary_tree", "chain", "knomial_tree"])
def test_latency_matrix_simulation_equals_paper004_eq2(variant):
    profile = load_profile("builtin:paper004-grid")
    params = profile.params("latency")
    for root in range(8):
        schedule = REGISTRY.get("bcast", variant).schedule(8, root, 10)
        simulated = simulate(schedule, "latency", params).total
        assert close(simulated, predict(params, "latency", "bcast", variant, 8, 10, root).time)


def test_a_latency_matrix_prices_fewer_ranks_on_its_first_ones_and_refuses_more():
    """A tune times its smaller communicators on the job's first ranks: a schedule of P ranks on
    a bigger matrix costs what it costs on the matrix of the first P, in the simulator and in eq. 1-2."""
    params = load_profile("builtin:paper004-grid").params("latency")
    for procs in (2, 5):
        first = params.model_copy(update={"names": params.names[:procs],
                                          "latency": tuple(row[:procs] for row in params.latency[:procs])})
        for root in (0, procs - 1):
            schedule = REGISTRY.get("bcast", "binomial_tree").schedule(procs, root, 10)
            simulated = simulate(schedule, "latency", params).total
            assert simulated == simulate(schedule, "latency", first).total
            assert close(simulated, predict(params, "latency", "bcast", "binomial_tree", procs, 10, root).time)
    with pytest.raises(NetworkError, match="has 8 ranks; the schedule has P = 9"):
        simulate(REGISTRY.get("bcast", "binomial_tree").schedule(9, 0, 10), "latency", params)


def test_binary_tree_stays_within_its_upper_bound():
    for P in (3, 5, 8, 13):
        schedule = REGISTRY.get("bcast", "binary_tree").schedule(P, 0, 50000)
        bound = predict(PLOGP, "plogp", "bcast", "binary_tree", P, 50000, 0).time
        assert simulate(schedule, "plogp", PLOGP).total <= bound


# -- LogGOPS rules ---------------------------------------------------------------------------------

def op_index(schedule, rank: int, kind: Kind, peer: int = -1) -> int:
    """The global index of ``rank``'s first op of ``kind`` (with ``peer``, for messages)."""
    c = schedule.columns
    hit = (c["rank"] == rank) & (c["kind"] == kind) & ((c["peer"] == peer) | (peer < 0))
    return int(np.flatnonzero(hit)[0])


def _two_ranks(receiver_delay: float, size: int) -> tuple:
    b = ScheduleBuilder(2, send_bytes=size, recv_bytes=size)
    b.send(0, 1, Region(Buf.SEND, 0, size))
    wait = b.delay(1, receiver_delay)
    b.recv(1, 0, Region(Buf.RECV, 0, size), requires=[wait])
    schedule = b.build()
    return schedule, op_index(schedule, 0, Kind.SEND), op_index(schedule, 1, Kind.RECV)


def test_one_message_costs_2o_plus_L_plus_s_minus_1_G():
    schedule, send, recv = _two_ranks(0.0, 1000)
    result = simulate(schedule, "loggops", LOGGOPS)
    assert close(result.end[recv], 2 * LOGGOPS.o + LOGGOPS.L + 999 * LOGGOPS.G)
    assert close(result.end[send], LOGGOPS.o)


def test_rendezvous_send_completes_when_its_receive_is_posted():
    late = 40e-6
    for threshold, expected in ((65536, LOGGOPS.o), (0, late)):
        schedule, send, recv = _two_ranks(late, 1000)
        result = simulate(schedule, "loggops", LOGGOPS.model_copy(update={"S": threshold}))
        assert close(result.end[send], expected)
        # the receiver's CPU is busy with the delay until then, so the message is processed after it
        assert close(result.end[recv], late + LOGGOPS.o + 999 * LOGGOPS.G)


def test_receiving_delays_the_receivers_own_sends_in_the_cluster_model():
    """Paper 000 eq. 2: Or + Ur occupy the CPU, so a forward waits for them."""
    schedule = REGISTRY.get("bcast", "chain").schedule(3, 0, 100)
    result = simulate(schedule, "cluster", TABLE1)
    hop = TABLE1.Os(100) + TABLE1.latency(100, 3) + TABLE1.Or(100) + TABLE1.Ur(100)
    assert close(result.total, 2 * hop)


# -- shared links ----------------------------------------------------------------------------------

def _five_flows() -> tuple:
    """A->C, and B->C, B->D, B->E: B's uplink is shared three ways, C's downlink two ways."""
    b = ScheduleBuilder(5, send_bytes=1, recv_bytes=1)
    pairs = ((0, 2), (1, 2), (1, 3), (1, 4))
    for src, dst in pairs:
        b.send(src, dst, Region(Buf.SEND, 0, 1), tag=src)
        b.recv(dst, src, Region(Buf.RECV, 0, 1), tag=src)
    schedule = b.build()
    return schedule, {(s, d): op_index(schedule, s, Kind.SEND, d) for s, d in pairs}


@pytest.mark.parametrize("sharing,a_to_c", [("equal", 2.0), ("maxmin", 1.5)])
def test_link_sharing_equal_split_and_maxmin(sharing, a_to_c):
    """Equal split (paper 001 eq. 7): A->C gets half of C's downlink until it ends at 2.  Max-min:
    B's flows are held to 1/3 by B's uplink, so A->C gets the remaining 2/3 and ends at 1.5."""
    schedule, ids = _five_flows()
    free = Postal(lam=0.0, step=0.0)
    result = simulate(schedule, "postal", free, topology=star(5, 1.0), sharing=sharing)
    assert result.flow_end[ids[0, 2]] == pytest.approx(a_to_c, rel=1e-12)
    for dst in (2, 3, 4):
        assert result.flow_end[ids[1, dst]] == pytest.approx(3.0, rel=1e-12)


def test_messages_between_two_ranks_form_one_stream_carried_in_order():
    """Rank 0 sends two messages of 1 unit to rank 1 at once, and rank 2 one to rank 1, on a star of
    1 unit/s links: the streams 0->1 and 2->1 share rank 1's link, half each; the stream 0->1
    carries its first message by 2 and its second by 3 (after 2->1 is through at 2), instead of
    three flows of a third each ending together at 3."""
    b = ScheduleBuilder(3, send_bytes=2, recv_bytes=3)
    b.send(0, 1, Region(Buf.SEND, 0, 1), tag=1)
    b.send(0, 1, Region(Buf.SEND, 1, 1), tag=2)
    b.send(2, 1, Region(Buf.SEND, 0, 1), tag=3)
    for k, (src, tag) in enumerate([(0, 1), (0, 2), (2, 3)]):
        b.recv(1, src, Region(Buf.RECV, k, 1), tag=tag)
    schedule = b.build()
    c = schedule.columns
    first, second = np.flatnonzero((c["kind"] == Kind.SEND) & (c["rank"] == 0))
    other = op_index(schedule, 2, Kind.SEND, 1)
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=star(3, 1.0))
    assert result.flow_end[first] == pytest.approx(2.0)
    assert result.flow_end[other] == pytest.approx(2.0)
    assert result.flow_end[second] == pytest.approx(3.0)


def _fan_out(sizes: list[int]) -> tuple[Schedule, list[int]]:
    """Rank 0 posts one message of each of ``sizes`` bytes at once, to ranks 1, 2, ...; the send ops."""
    b = ScheduleBuilder(len(sizes) + 1, send_bytes=sum(sizes), recv_bytes=max(sizes))
    at = 0
    for dst, m in enumerate(sizes, start=1):
        b.send(0, dst, Region(Buf.SEND, at, m), tag=dst)
        b.recv(dst, 0, Region(Buf.RECV, 0, m), tag=dst)
        at += m
    schedule = b.build()
    return schedule, [op_index(schedule, 0, Kind.SEND, dst) for dst in range(1, len(sizes) + 1)]


@pytest.mark.parametrize("window, ends", [(None, [3.0, 3.0, 3.0]), (1.0, [1.0, 2.0, 3.0]),
                                          (0.5, [3.0, 3.0, 3.0])])
def test_messages_within_the_window_leave_their_sender_in_posting_order(window, ends):
    """Rank 0 posts three messages of 1 unit at once to ranks 1-3 over 1 unit/s links: TCP writes a
    message within its window to the NIC's queue whole, so they leave one after the other and end
    at 1, 2 and 3; without a window (or beyond it) they share rank 0's link and all end at 3."""
    schedule, sends = _fan_out([1, 1, 1])
    topo = star(4, 1.0).model_copy(update={"window": window})
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo)
    assert [result.flow_end[i] for i in sends] == pytest.approx(ends, rel=1e-12)


def _bucketed(topology: Topology, burst: float) -> Topology:
    return topology.model_copy(update={"nodes": tuple(n.model_copy(update={"burst": burst}) if n.parent else n
                                                      for n in topology.nodes)})


def test_a_links_bucket_passes_its_bytes_at_once_after_an_idle_spell():
    """Links of 1 unit/s with buckets of 2 units: a lone message of 3 units crosses in 1 s (2 pass at
    once); two of 3 posted at once in one stream end at 1 and 4 (the buckets are empty once the
    first has crossed); one sent at 6, after 2 s of idle links, finds them full again and ends at 7;
    one of 2 sent at 9 crosses at once."""
    free = Postal(lam=0.0, step=0.0)
    schedule, sends = _fan_out([3])
    assert simulate(schedule, "postal", free, topology=_bucketed(star(2, 1.0), 2.0)).flow_end[sends[0]] == \
        pytest.approx(1.0)
    b = ScheduleBuilder(3, send_bytes=3, recv_bytes=3)
    b.send(0, 1, Region(Buf.SEND, 0, 3), tag=1)
    b.send(0, 1, Region(Buf.SEND, 0, 3), tag=2)
    b.recv(1, 0, Region(Buf.RECV, 0, 3), tag=1)
    b.recv(1, 0, Region(Buf.RECV, 0, 3), tag=2)
    wait = b.delay(2, 6.0)
    late = b.send(2, 1, Region(Buf.SEND, 0, 3), tag=3, requires=[wait])
    b.recv(1, 2, Region(Buf.RECV, 0, 3), tag=3)
    wait = b.delay(2, 2.0, requires=[late])
    b.send(2, 1, Region(Buf.SEND, 0, 2), tag=4, requires=[wait])
    b.recv(1, 2, Region(Buf.RECV, 0, 2), tag=4)
    schedule = b.build()
    result = simulate(schedule, "postal", free, topology=_bucketed(star(3, 1.0), 2.0))
    ends = sorted(result.flow_end[i] for i in np.flatnonzero(schedule.columns["kind"] == Kind.SEND))
    assert ends == pytest.approx([1.0, 4.0, 7.0, 9.0])


def _duplexed(procs: int, duplex: tuple[tuple[float, float], ...] | None) -> Topology:
    return star(procs, 1.0).model_copy(update={"duplex": duplex})


def _exchange(size: int, both: bool) -> tuple[Schedule, list[int]]:
    """Ranks 0 and 1 post a message of ``size`` units to each other at once (``both``), or rank 0
    to rank 1 only; the send ops."""
    b = ScheduleBuilder(2, send_bytes=size, recv_bytes=size)
    for src in (0, 1) if both else (0,):
        b.send(src, 1 - src, Region(Buf.SEND, 0, size))
        b.recv(1 - src, src, Region(Buf.RECV, 0, size))
    schedule = b.build()
    return schedule, [int(i) for i in np.flatnonzero(schedule.columns["kind"] == Kind.SEND)]


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_a_flow_into_a_host_that_sends_moves_at_the_duplex_share(sharing):
    """Links of 1 unit/s, duplex 0.5 at every size: two hosts exchanging 4 units each carry them at
    0.5 units/s and end at 8; one way, the receiver sends nothing and the flow ends at 4; without
    a duplex table the exchange ends at 4 too."""
    free = Postal(lam=0.0, step=0.0)
    for both, duplex, end in ((True, ((1.0, 0.5),), 8.0), (False, ((1.0, 0.5),), 4.0), (True, None, 4.0)):
        schedule, sends = _exchange(4, both)
        result = simulate(schedule, "postal", free, topology=_duplexed(2, duplex), sharing=sharing)
        assert [result.flow_end[i] for i in sends] == pytest.approx([end] * len(sends), rel=1e-12)
        assert result.flow_rate[sends[0]] == pytest.approx(4.0 / end, rel=1e-12)


def test_a_flow_slows_while_its_receiver_sends_and_speeds_up_after():
    """Rank 0 sends 4 units to rank 1 over 1 unit/s links (duplex 0.5); rank 1 sends 2 units to
    rank 2 from t = 1, whose receiver sends nothing: 0 -> 1 carries 1 unit by t = 1, 1 more at
    0.5/s until 1 -> 2 ends at t = 3, and its last 2 at 1/s, ending at 5."""
    b = ScheduleBuilder(3, send_bytes=4, recv_bytes=4)
    b.send(0, 1, Region(Buf.SEND, 0, 4), tag=1)
    b.recv(1, 0, Region(Buf.RECV, 0, 4), tag=1)
    wait = b.delay(1, 1.0)
    b.send(1, 2, Region(Buf.SEND, 0, 2), tag=2, requires=[wait])
    b.recv(2, 1, Region(Buf.RECV, 0, 2), tag=2)
    schedule = b.build()
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=_duplexed(3, ((1.0, 0.5),)))
    assert result.flow_end[op_index(schedule, 0, Kind.SEND)] == pytest.approx(5.0, rel=1e-12)
    assert result.flow_end[op_index(schedule, 1, Kind.SEND)] == pytest.approx(3.0, rel=1e-12)


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_the_duplex_share_is_of_the_link_into_the_receivers_host_only(sharing):
    """Two leaf switches of 2 hosts (1 unit/s links) under a core over uplinks of 0.25 units/s,
    duplex 0.5: rank 0 sends 1 unit to rank 2 across the uplinks while rank 2 sends 8 to rank 3 on
    its own leaf.  The uplink holds 0 -> 2 to 0.25/s, below half of rank 2's link, so it ends at 4
    as it would without the duplex table; 2 -> 3 (its receiver sends nothing) ends at 8."""
    topo = two_level(4, 2, 1.0, 0.25).model_copy(update={"duplex": ((1.0, 0.5),)})
    b = ScheduleBuilder(4, send_bytes=8, recv_bytes=8)
    b.send(0, 2, Region(Buf.SEND, 0, 1), tag=1)
    b.recv(2, 0, Region(Buf.RECV, 0, 1), tag=1)
    b.send(2, 3, Region(Buf.SEND, 0, 8), tag=2)
    b.recv(3, 2, Region(Buf.RECV, 0, 8), tag=2)
    schedule = b.build()
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo, sharing=sharing)
    assert result.flow_end[op_index(schedule, 0, Kind.SEND)] == pytest.approx(4.0, rel=1e-12)
    assert result.flow_end[op_index(schedule, 2, Kind.SEND)] == pytest.approx(8.0, rel=1e-12)


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_an_uplink_carrying_data_both_ways_gives_its_flows_the_trunk_share(sharing):
    """Two leaf switches of 2 hosts, every link 1 unit/s, trunk_duplex 0.5: rank 0 sends 4 units to
    rank 2 across the uplinks and ends at 4 alone; while rank 3 sends 4 to rank 1 (over the same
    uplinks the other way) both move at 0.5/s and end at 8.  A host's link is no trunk: ranks 0 and
    1 exchanging 4 units on their leaf end at 4."""
    topo = two_level(4, 2, 1.0, 1.0).model_copy(update={"trunk_duplex": ((1.0, 0.5),)})
    for pairs, end in (([(0, 2)], 4.0), ([(0, 2), (3, 1)], 8.0), ([(0, 1), (1, 0)], 4.0)):
        b = ScheduleBuilder(4, send_bytes=4, recv_bytes=4)
        for src, dst in pairs:
            b.send(src, dst, Region(Buf.SEND, 0, 4))
            b.recv(dst, src, Region(Buf.RECV, 0, 4))
        schedule = b.build()
        result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo, sharing=sharing)
        sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
        assert result.flow_end[sends] == pytest.approx([end] * len(pairs), rel=1e-12), pairs
    assert topo.trunk_duplex_factor(np.array([4])) == pytest.approx([0.5])
    assert two_level(4, 2, 1.0, 1.0).trunk_duplex_factor(np.array([4])) == pytest.approx([1.0])
    with pytest.raises(ValueError, match=r"trunk_duplex: efficiencies must lie in"):
        Topology.model_validate({**topo.model_dump(), "trunk_duplex": ((2.0, 1.5),)})


def test_the_duplex_share_is_interpolated_in_log_size_and_clamped():
    """Duplex 0.5 at 2 units and 1 at 8: a message of 4 (halfway in log size) keeps 0.75 and the
    exchange ends at 4 / 0.75; 1 unit keeps 0.5 (below the table), 16 keep all (above it)."""
    topo = _duplexed(2, ((2.0, 0.5), (8.0, 1.0)))
    assert topo.duplex_factor(np.array([1, 2, 4, 8, 16])) == pytest.approx([0.5, 0.5, 0.75, 1.0, 1.0])
    schedule, sends = _exchange(4, True)
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo)
    assert result.flow_end[sends[0]] == pytest.approx(4 / 0.75, rel=1e-12)
    assert star(2, 1.0).duplex_factor(np.array([4])) == pytest.approx([1.0])


@pytest.mark.parametrize("pause, second_end", [
    (None, 4 + 2 / 0.75),            # back to back: the run is 4 units when the second flow moves
    (0.1, 4.1 + 2 / 0.75),           # idle for less than TCP_RTO_MIN: the run goes on
    (1.0, 5.0 + 4),                  # idle for longer: its window starts again, a run of 2 units
])
@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
def test_the_duplex_share_follows_a_streams_run_of_messages(pause, second_end, sharing):
    """Links of 1 unit/s, duplex 0.5 at 2 units and 1 at 8: ranks 0 and 1 each send the other two
    messages of 2 units.  The first flows keep 0.5 (a run of 2 units) and end at 4; the second
    ones, with the stream's window grown by the first, keep the share at a run of 4 units (0.75)
    unless the stream was idle for more than TCP_RTO_MIN (0.2 s) before them."""
    assert TCP_RTO_MIN == pytest.approx(0.2)
    b = ScheduleBuilder(2, send_bytes=2, recv_bytes=4)
    for src in (0, 1):
        first = b.send(src, 1 - src, Region(Buf.SEND, 0, 2))
        after = [] if pause is None else [b.delay(src, pause, requires=[first])]
        b.send(src, 1 - src, Region(Buf.SEND, 0, 2), requires=after)
        for k in range(2):
            b.recv(1 - src, src, Region(Buf.RECV, 2 * k, 2))
    schedule = b.build()
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0),
                      topology=_duplexed(2, ((2.0, 0.5), (8.0, 1.0))), sharing=sharing)
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)  # in rank order, then posting order
    assert result.flow_end[sends[0::2]] == pytest.approx([4.0, 4.0], rel=1e-12)
    assert result.flow_end[sends[1::2]] == pytest.approx([second_end] * 2, rel=1e-12)


@pytest.mark.parametrize("sharing", ["equal", "maxmin"])
@pytest.mark.parametrize("streams, end", [(None, 12.0), ((2.0, 0.5), 10.0), ((4.0, 0.5), 11.0)])
def test_streams_into_one_host_recover_part_of_the_duplex_shortfall(streams, end, sharing):
    """Links of 1 unit/s, duplex 0.5: ranks 1 and 2 send 4 units each to rank 0 while rank 0 sends
    4 to rank 1.  0 -> 1 (one stream into a host that sends) moves at 0.5 and ends at 8.  The two
    streams into host 0 share 0.5 of its link without duplex_streams (0.25 each: 2 units by t = 8,
    the last 2 at 0.5 once host 0 stops sending, ending at 12); with [2, 0.5] they recover half of
    the shortfall, 0.75 of the link (0.375 each, 3 units by t = 8, ending at 10); with [4, 0.5] two
    streams recover 0.5 ln 2 / ln 4 = 0.25 of it, 0.625 (0.3125 each, ending at 11)."""
    b = ScheduleBuilder(3, send_bytes=4, recv_bytes=8)
    for src in (1, 2):
        b.send(src, 0, Region(Buf.SEND, 0, 4), tag=1)
        b.recv(0, src, Region(Buf.RECV, 4 * (src - 1), 4), tag=1)
    b.send(0, 1, Region(Buf.SEND, 0, 4), tag=2)
    b.recv(1, 0, Region(Buf.RECV, 0, 4), tag=2)
    schedule = b.build()
    topo = _duplexed(3, ((1.0, 0.5),)).model_copy(update={"duplex_streams": streams})
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo, sharing=sharing)
    assert result.flow_end[op_index(schedule, 0, Kind.SEND)] == pytest.approx(8.0, rel=1e-12)
    assert [result.flow_end[op_index(schedule, r, Kind.SEND)] for r in (1, 2)] == pytest.approx([end] * 2, rel=1e-12)


@pytest.mark.parametrize("streams, problem", [
    ((1.0, 0.5), "streams must be more than 1"),
    ((7.0, 0.0), "streams must be more than 1 and the part in"),
    ((7.0, 1.5), "streams must be more than 1 and the part in"),
])
def test_bad_duplex_streams_are_refused_naming_the_field(streams, problem):
    with pytest.raises(ValueError, match=f"duplex_streams: {problem}"):
        Topology.model_validate({**_duplexed(2, ((1.0, 0.5),)).model_dump(), "duplex_streams": streams})
    with pytest.raises(ValueError, match="duplex_streams needs duplex"):
        Topology.model_validate({**star(2, 1.0).model_dump(), "duplex_streams": (7.0, 0.5)})


@pytest.mark.parametrize("framing, first_end, second_end", [(None, 10.0, 14.0), ((4, 1), 13.0, 18.0),
                                                             ((1448, 66), 10.0 + 66, 14.0 + 2 * 66)])
def test_each_frame_adds_its_header_to_what_a_link_carries(framing, first_end, second_end):
    """A link of 1 unit/s, free endpoints: rank 0 sends 10 units, then 4, to rank 1.  With frames of
    4 units of data and 1 of header the first carries ceil(10 / 4) = 3 headers (13 units, ending at
    13) and the second one (5 more, ending at 18); frames larger than the message add one header
    each.  The wire time of a message alone counts the headers too."""
    b = ScheduleBuilder(2, send_bytes=14, recv_bytes=14)
    first = b.send(0, 1, Region(Buf.SEND, 0, 10))
    b.send(0, 1, Region(Buf.SEND, 10, 4), requires=[first])
    b.recv(1, 0, Region(Buf.RECV, 0, 10))
    b.recv(1, 0, Region(Buf.RECV, 10, 4))
    schedule = b.build()
    topo = star(2, 1.0).model_copy(update={"framing": framing})
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo)
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
    assert result.flow_end[sends] == pytest.approx([first_end, second_end], rel=1e-12)
    assert topo.wire_times(np.array([0]), np.array([1]), np.array([10])) == pytest.approx([first_end], rel=1e-12)
    assert topo.on_wire(np.array([0.0]))[0] == 0.0  # an empty message carries no frame of data


@pytest.mark.parametrize("framing", [(0, 66), (1448, -1)])
def test_bad_framing_is_refused_naming_the_field(framing):
    with pytest.raises(ValueError, match="framing: a frame's payload must be at least 1 B"):
        Topology.model_validate({**star(2, 1.0).model_dump(), "framing": framing})


@pytest.mark.parametrize("duplex, problem", [
    ((), "sizes must be positive and ascending"),
    (((8.0, 0.5), (2.0, 0.7)), "sizes must be positive and ascending"),
    (((0.0, 0.5),), "sizes must be positive and ascending"),
    (((2.0, 0.0),), "efficiencies must lie in"),
    (((2.0, 1.5),), "efficiencies must lie in"),
])
def test_a_bad_duplex_table_is_refused_naming_the_field(duplex, problem):
    with pytest.raises(ValueError, match=f"duplex: {problem}"):
        Topology.model_validate({**star(2, 1.0).model_dump(), "duplex": duplex})


def _shift(procs: int) -> Schedule:
    """Every rank sends 1 unit to the next and receives 1 from the one before, at once."""
    b = ScheduleBuilder(procs, send_bytes=1, recv_bytes=1)
    for r in range(procs):
        b.recv(r, (r - 1) % procs, Region(Buf.RECV, 0, 1))
        b.send(r, (r + 1) % procs, Region(Buf.SEND, 0, 1))
    return b.build()


@pytest.mark.parametrize("cores, wait", [(None, 0.0), (4, 0.0), (2, 1.0), (1, 3.0)])
def test_messages_wait_only_for_cores_the_hosts_share(cores, wait):
    """4 ranks each send 1 unit to the next at once over fast links, latency 10, 1 s of a shared core
    per message at each end.  On 1 core the sends leave at 0, 1, 2, 3 and arrive at 10 .. 13, by
    when the core is free again: the last receive completes at 13, 3 s after it would on cores of
    their own; on 2 cores the sends leave at 0, 0, 1, 1: 1 s later; on 4, no message waits."""
    topo = star(4, 1e12).model_copy(update={"cores": cores, "message_cpu": None if cores is None else ((1.0, 1.0),)})
    result = simulate(_shift(4), "postal", Postal(lam=10.0, step=0.0), topology=topo)
    alone = simulate(_shift(4), "postal", Postal(lam=10.0, step=0.0), topology=star(4, 1e12))
    assert alone.total == pytest.approx(10.0, abs=1e-6)
    assert result.total - alone.total == pytest.approx(wait, abs=1e-6)


def test_reductions_take_the_shared_cores_for_their_cost_and_delays_none():
    """4 ranks each reduce 2 bytes at 1 s per byte at once: on 2 shared cores the second pair starts
    at 2 and ends at 4; on cores of their own all end at 2.  4 ranks each delayed 2 s (a recorded
    run's time outside MPI, which already holds the sharing of that run) all end at 2 either way."""
    b = ScheduleBuilder(4, send_bytes=2, recv_bytes=2)
    for r in range(4):
        b.reduce(r, Region(Buf.SEND, 0, 2), Region(Buf.RECV, 0, 2), "sum", "uint8")
    reductions = b.build()
    b = ScheduleBuilder(4)
    for r in range(4):
        b.delay(r, 2.0)
    delays = b.build()
    gamma = Hockney(alpha=0.0, beta=0.0, gamma=1.0)
    shared = star(4, 1.0).model_copy(update={"cores": 2})
    assert simulate(reductions, "hockney", gamma, topology=star(4, 1.0)).total == pytest.approx(2.0)
    assert sorted(simulate(reductions, "hockney", gamma, topology=shared).completion) == pytest.approx([2, 2, 4, 4])
    assert sorted(simulate(delays, "hockney", gamma, topology=shared).completion) == pytest.approx([2, 2, 2, 2])


def test_the_message_cpu_table_is_interpolated_in_log_size_and_clamped():
    topo = star(2, 1.0).model_copy(update={"cores": 1, "message_cpu": ((2.0, 1e-5), (8.0, 3e-5))})
    assert topo.message_cpu_of(np.array([1, 2, 4, 8, 16])) == pytest.approx([1e-5, 1e-5, 2e-5, 3e-5, 3e-5])
    assert star(2, 1.0).message_cpu_of(np.array([4])) == pytest.approx([0.0])


@pytest.mark.parametrize("update, problem", [
    ({"cores": 2, "message_cpu": ()}, "message_cpu: sizes must be positive and ascending"),
    ({"cores": 2, "message_cpu": ((8.0, 1e-5), (2.0, 1e-5))}, "message_cpu: sizes must be positive and ascending"),
    ({"cores": 2, "message_cpu": ((2.0, -1e-5),)}, "message_cpu: times must be finite and >= 0 s"),
    ({"message_cpu": ((2.0, 1e-5),)}, "message_cpu needs cores"),
    ({"cores": 0}, "cores"),
])
def test_a_bad_shared_cores_setting_is_refused_naming_the_field(update, problem):
    with pytest.raises(ValueError, match=problem):
        Topology.model_validate({**star(2, 1.0).model_dump(), **update})


def test_path_latency_and_topology_validation():
    topo = star(2, 1e9, latency=1e-6)
    schedule, _, recv = _two_ranks(0.0, 1000)
    result = simulate(schedule, "postal", Postal(lam=0.0, step=0.0), topology=topo)
    assert close(result.end[recv], 1000 / 1e9 + 2e-6)
    with pytest.raises(ValueError, match="not a node"):
        Topology(nodes=({"name": "s"},), hosts=("h0",))


@pytest.mark.parametrize("network,params", [
    ("hockney", Hockney(alpha=50e-6, beta=1 / 12.5e6)),
    ("loggops", LOGGOPS),
    ("plogp", load_profile("builtin:ethernet-10g-tcp").models.plogp),
])
@pytest.mark.parametrize("size", [0, 1000, 65536, 1 << 20])
@pytest.mark.parametrize("burst", [0.0, 3100.0])
def test_a_message_alone_on_its_path_takes_the_endpoint_time(network, params, size, burst):
    """Over a topology whose links are as fast as the endpoint model's wire, one message takes what
    the endpoint model alone says: the wire time is counted once, by the flow (less what the
    links' buckets pass at once)."""
    schedule, _, recv = _two_ranks(0.0, size)
    alone = simulate(schedule, network, params)
    rate = 12.5e6 if network == "hockney" else 1.25e9 if network == "plogp" else 1 / LOGGOPS.G
    over = simulate(schedule, network, params, topology=_bucketed(star(2, rate), burst))
    assert over.end[recv] == pytest.approx(alone.end[recv], rel=1e-9)


@pytest.mark.parametrize("delay", [0.0, 1e-3])
def test_a_send_above_ack_above_completes_when_its_acknowledgement_is_back(delay):
    """Hockney (alpha 50 us, beta the link's 80 ns/B) over a 2-host star with 1 us links: 1000 B
    arrive at 80 + 50 + 2 us; with ``ack_above`` below 1000 B the send completes when the
    receiver has processed the message (at once, or when its receive-side delay of 1 ms ends)
    and an empty message is back (50 + 2 us); at or below ``ack_above`` it completes when its
    flow ends, as without one."""
    params = Hockney(alpha=50e-6, beta=1 / 12.5e6)
    schedule, send, recv = _two_ranks(0.0, 1000)
    topo = star(2, 12.5e6, latency=1e-6)
    plain = simulate(schedule, "hockney", params, topology=topo)
    assert plain.end[send] == pytest.approx(80e-6) and plain.end[recv] == pytest.approx(132e-6)
    acked = simulate(schedule, "hockney", params, topology=topo.model_copy(update={"ack_above": 999}))
    assert acked.end[recv] == pytest.approx(132e-6) and acked.end[send] == pytest.approx(132e-6 + 52e-6)
    same = simulate(schedule, "hockney", params, topology=topo.model_copy(update={"ack_above": 1000}))
    assert same.end[send] == plain.end[send] and same.total == plain.total
    b = ScheduleBuilder(2, send_bytes=1000, recv_bytes=1000)
    first = b.send(0, 1, Region(Buf.SEND, 0, 1000))
    b.send(0, 1, Region(Buf.SEND, 0, 1000), requires=[first])  # the second waits for the first's end
    b.delay(1, delay)
    b.recv(1, 0, Region(Buf.RECV, 0, 1000))
    b.recv(1, 0, Region(Buf.RECV, 0, 1000))
    pair = b.build()
    two = simulate(pair, "hockney", params, topology=topo.model_copy(update={"ack_above": 0}))
    # a message is processed once it is there and its receiver's processor is free (after the
    # delay), matched or not
    second = np.flatnonzero((pair.columns["rank"] == 0) & (pair.columns["kind"] == Kind.SEND))[1]
    assert two.start[second] == pytest.approx(max(132e-6, delay) + 52e-6)


def test_an_acknowledgement_takes_the_latency_of_an_empty_message_the_other_way():
    """A latency matrix of 10 us from rank 0 to 1 and 30 us back, over a 2-host star of 12.5 MB/s
    without link latency: 1000 B from 0 to 1 arrive when their flow ends, at 80 us (the endpoint
    latency holds the wire time, which the flow now carries), and with ``ack_above`` 0 the send
    completes 30 us later (an empty message the other way); from 1 to 0, 10 us later."""
    params = LatencyMatrix(names=("a", "b"), latency=((0.0, 10e-6), (30e-6, 0.0)))
    topo = star(2, 12.5e6).model_copy(update={"ack_above": 0})
    b = ScheduleBuilder(2, send_bytes=1000, recv_bytes=1000)
    b.send(0, 1, Region(Buf.SEND, 0, 1000))
    b.recv(1, 0, Region(Buf.RECV, 0, 1000))
    schedule = b.build()
    result = simulate(schedule, "latency", params, topology=topo)
    send, recv = op_index(schedule, 0, Kind.SEND), op_index(schedule, 1, Kind.RECV)
    assert result.end[recv] == pytest.approx(80e-6) and result.end[send] == pytest.approx(110e-6)
    back = REGISTRY.get("bcast", "flat_tree").schedule(2, 1, 1000)  # from rank 1 to rank 0
    result = simulate(back, "latency", params, topology=topo)
    assert result.end[op_index(back, 1, Kind.SEND)] == pytest.approx(90e-6)


def test_wire_times_are_a_path_s_bytes_past_its_bucket_over_its_narrowest_link():
    """Rank 0 to 1 on one leaf switch crosses two host links, rank 0 to 2 also the 2:1 uplinks; the
    least bucket of the path passes first; two ranks on one host use no link."""
    tree = two_level(4, 2, 12.5e6, 6.25e6)
    src, dst = np.array([0, 0, 0]), np.array([1, 2, 1])
    assert tree.wire_times(src, dst, np.array([4096, 4096, 0])) == pytest.approx([4096 / 12.5e6, 4096 / 6.25e6, 0])
    bucketed = _bucketed(star(2, 12.5e6), 3100.0)
    assert bucketed.wire_times(np.array([0, 0]), np.array([1, 1]), np.array([4096, 1000])) == pytest.approx(
        [996 / 12.5e6, 0.0])
    shared = Topology(nodes=({"name": "s"}, {"name": "h", "parent": "s", "up": 1e6, "down": 1e6}), hosts=("h", "h"))
    assert shared.wire_times(np.array([0]), np.array([1]), np.array([1 << 20])) == pytest.approx([0.0])


def test_messages_sharing_a_link_are_slower_by_the_sharing_alone():
    """Two senders into one receiver of a 12.5 MB/s star: Hockney's beta equals the link, so the
    two 1 MB flows share the receiver's link and both end at 2 MB / 12.5 MB/s; the endpoint's
    alpha follows.  Without the topology, the endpoint model alone lets them overlap fully."""
    params = Hockney(alpha=50e-6, beta=1 / 12.5e6)
    schedule = REGISTRY.get("gather", "flat_tree").schedule(3, 0, 1_000_000)
    alone = simulate(schedule, "hockney", params).total
    shared = simulate(schedule, "hockney", params, topology=star(3, 12.5e6)).total
    assert alone == pytest.approx(50e-6 + 0.08)
    assert shared == pytest.approx(50e-6 + 0.16)


@pytest.mark.timeout(30)
def test_a_flow_ending_within_rounding_of_now_does_not_stall_the_clock():
    """A probed PlogPT profile of the 8-host tree:2 testbed: a flow's last bytes would take less
    than an ulp of the clock, and the engine once re-scheduled that event at the same time forever."""
    params = PlogPT(L=3.0032156571126425e-07,
                    g=Tabulated(sizes=(0, 1, 256, 4096, 65536),
                                values=(1.28e-05, 1.0075e-05, 1.9489e-05, 0.00035820917828134825,
                                        0.005608578428401805)),
                    bidirectional=TreeLevels(b=(11951636.466437208, 12150583.318793088, 24301166.637586176)))
    schedule = REGISTRY.get("bcast", "chain_rendezvous").schedule(8, 0, 524288)
    result = simulate(schedule, "plogpt", params)
    assert 0.3 < result.total < 1.0


def test_binary_tree_has_b_of_h_on_its_edges():
    topo = binary_tree(5, TreeLevels(b=(1.0, 2.0, 4.0)))
    _, up, _, _, _ = topo.arrays()
    names = [n.name for n in topo.nodes]
    assert up[names.index("h4")] == 1.0 and up[names.index("s1_2")] == 2.0 and up[names.index("s2_1")] == 4.0
    _, height = topo.pair_properties(np.array([0, 0, 0, 3]), np.array([1, 2, 4, 2]))
    assert height.tolist() == [1, 2, 3, 1]


# -- retransmissions (paper 001 eq. 8, 9, 14) ------------------------------------------------------

def test_rto_hits_a_send_ending_as_another_to_its_destination_starts_across_a_switch():
    """Rank 1 sends to rank 0 (height 1) and its flow ends at 8; rank 3 starts a send to rank 0
    (height 2) at 8.  b(2) < 2 b(1), so a switch lies between (P_S), and d(1) b_c = 3 < 100 bytes
    (P_B): the first send is charged T_RTO, the second is not."""
    params = PlogPT(L=3, g=Tabulated.constant(8), bidirectional=TreeLevels(b=(3, 4), d=(1, 1)), t_rto=200,
                    eps_t=0.5)
    b = ScheduleBuilder(4, send_bytes=100, recv_bytes=200)
    b.send(1, 0, Region(Buf.SEND, 0, 100))
    wait = b.delay(3, 8.0)
    b.send(3, 0, Region(Buf.SEND, 0, 100), requires=[wait])
    b.recv(0, 1, Region(Buf.RECV, 0, 100))
    b.recv(0, 3, Region(Buf.RECV, 100, 100))
    schedule = b.build()
    first, second = op_index(schedule, 1, Kind.SEND), op_index(schedule, 3, Kind.SEND)
    r1, r3 = op_index(schedule, 0, Kind.RECV, 1), op_index(schedule, 0, Kind.RECV, 3)
    result = simulate(schedule, "plogpt", params)
    assert result.rto[first] and not result.rto[second]
    assert result.end[first] == 8 + 200 and result.end[r1] == 8 + 200 + 3
    assert result.end[r3] == 8 + 8 + 3
    without = simulate(schedule, "plogpt", params.model_copy(update={"eps_t": None}))
    assert not without.rto.any() and without.total == 19
    free = simulate(schedule, "plogpt", params.model_copy(update={"t_rto": 0.0}))  # the probe's "no timeouts"
    assert not free.rto.any() and free.total == 19


# -- finite switch buffers (paper 000 eq. 3-4) -----------------------------------------------------

GATHER_BW, GATHER_M = 1e8, 1_000_000


def _flat_gather(senders: int, buffer: float | None):
    topo = star(senders + 1, GATHER_BW)
    if buffer is not None:
        topo = topo.with_buffer(buffer)
    schedule = REGISTRY.get("gather", "flat_tree").schedule(senders + 1, 0, GATHER_M)
    return schedule, topo, simulate(schedule, "hockney", Hockney(alpha=1e-6, beta=0.0), topology=topo)


def test_flat_gather_overflowing_the_root_port_is_charged_rto_and_resending():
    """8 senders offer 8e8 B/s for 10 ms to the root's 1e8 B/s port with 1 MB of buffer: it fills
    after B/(A-D) = 1/700 s (eq. 3), the transfer ratio is D/A + B/k = 1/4 (eq. 4), each flow loses
    (1 - 1/8) 1e8 (0.01 - 1/700) = 750 kB and resends it at its rate 1.25e7 B/s after T_RTO."""
    _, _, clean = _flat_gather(8, None)
    schedule, topo, lossy = _flat_gather(8, 1e6)
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
    assert lossy.rto[sends].all() and lossy.rto.sum() == 8
    assert np.allclose(lossy.penalty[sends], 0.2 + 750_000 / 1.25e7)
    assert close(lossy.total, clean.total + 0.26)
    assert not clean.rto.any() and topo.rto == 0.2


def test_a_topology_without_timeouts_charges_the_resend_only():
    """rto 0 (the probe's choice when its incast did not time out in most repetitions): the same
    flows are hit, and each pays only the resend of its 750 kB at 1.25e7 B/s."""
    _, _, clean = _flat_gather(8, None)
    schedule, topo, _ = _flat_gather(8, 1e6)
    resend = simulate(schedule, "hockney", Hockney(alpha=1e-6, beta=0.0), topology=topo.model_copy(update={"rto": 0.0}))
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
    assert resend.rto[sends].all() and np.allclose(resend.penalty[sends], 750_000 / 1.25e7)
    assert close(resend.total, clean.total + 0.06)


@pytest.mark.parametrize("senders", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("buffer", [1e5, 1e6, 2.5e6, 8e6])
def test_drops_follow_the_transfer_ratio(senders, buffer):
    """x senders at once: a flow is hit exactly when eq. 4's ratio is below 1, and the bytes lost
    over all flows are (1 - ratio) k."""
    k = senders * GATHER_M
    ratio = transfer_ratio(senders * GATHER_BW, GATHER_BW, buffer, k)
    _, _, result = _flat_gather(senders, buffer)
    assert result.rto.any() == (ratio < 1)
    hit = result.rto
    resent = ((result.penalty[hit] - 0.2) * result.flow_rate[hit]).sum()
    assert close(resent, (1 - ratio) * k) if ratio < 1 else resent == 0


@pytest.mark.parametrize("window, lost", [(None, 750_000), (100_000.0, 0), (200_000.0, 75_000), (1e9, 750_000)])
def test_senders_windows_lose_what_overflows_the_buffer_once(window, lost):
    """8 senders of 1 MB each into a 1 MB port: without a window each loses paper 000's 750 kB
    (eq. 3-4); windows of 100 kB (800 kB in all) fit it and nothing is lost; 200 kB windows
    (1.6 MB) overflow it by 600 kB, 75 kB a flow; windows larger than a message overflow it by
    more than senders at line rate lose, so they lose those 750 kB.  Each hit flow resends at its
    rate 1.25e7 B/s after T_RTO."""
    schedule, topo, _ = _flat_gather(8, 1e6)
    result = simulate(schedule, "hockney", Hockney(alpha=1e-6, beta=0.0), topology=topo.model_copy(
        update={"window": window}))
    sends = np.flatnonzero(schedule.columns["kind"] == Kind.SEND)
    assert result.rto.any() == (lost > 0)
    if lost:
        assert result.rto[sends].all() and np.allclose(result.penalty[sends], 0.2 + lost / 1.25e7)


def test_a_window_within_the_bounds_avoids_the_drops_a_flat_gather_suffers():
    """The coordinated gather with two senders at a time keeps D/A + B/k = 1 and loses nothing."""
    topo = star(9, GATHER_BW).with_buffer(1e6)
    params = Hockney(alpha=1e-6, beta=0.0)
    for window, drops in [(2, False), (3, True)]:
        schedule = REGISTRY.get("gather", "coordinated").schedule(9, 0, GATHER_M, window=window)
        assert simulate(schedule, "hockney", params, topology=topo).rto.any() == drops


def test_a_sender_nic_never_drops():
    """One rank sends to 8 at once: its NIC splits its rate, no switch port is offered more than
    it carries, so nothing is lost however small the buffers."""
    topo = star(9, GATHER_BW).with_buffer(1)
    schedule = REGISTRY.get("scatter", "flat_tree").schedule(9, 0, GATHER_M)
    assert not simulate(schedule, "hockney", Hockney(alpha=1e-6, beta=0.0), topology=topo).rto.any()


def test_buffers_are_validated_and_kept_in_the_topology_file():
    topo = star(3, 1e9).with_buffer(65536)
    again = Topology.model_validate_json(topo.to_json())
    assert again == topo and all(n.buffer == 65536 for n in again.nodes)
    with pytest.raises(ValueError, match="buffer"):
        star(3, 1e9).with_buffer(0)


# -- GOAL ------------------------------------------------------------------------------------------

ROUND_TRIP = [("bcast", "binomial_tree", 7, 3, 1000), ("bcast", "chain_segmented", 5, 1, 40000),
              ("alltoall", "pairwise_exchange", 6, 0, 64), ("allreduce", "ring", 5, 0, 4000),
              ("gather", "coordinated", 9, 4, 100), ("barrier", "dissemination", 5, 0, 0)]


@pytest.mark.parametrize("collective,algorithm,procs,root,size", ROUND_TRIP)
def test_goal_export_then_import_is_the_identity(collective, algorithm, procs, root, size):
    schedule = REGISTRY.get(collective, algorithm).schedule(procs, root, size)
    text = to_goal(schedule)
    back = from_goal(text)
    c, d = schedule.columns, back.columns
    local = ~np.isin(c["kind"], (Kind.SEND, Kind.RECV))
    assert np.array_equal(np.where(local, Kind.DELAY, c["kind"]), d["kind"])
    assert np.array_equal(c["rank"], d["rank"])
    msg = ~local
    for name in ("peer", "tag", "length"):
        assert np.array_equal(c[name][msg], d[name][msg])
    for r in range(procs):  # the same dependencies, plus the in-order edges made explicit
        for i in schedule.ops_of(r):
            want = {(int(j), bool(st)) for j, st in zip(*schedule.deps(i))}
            if i > schedule.rank_ptr[r]:
                want.add((i - 1, True))
            assert {(int(j), bool(st)) for j, st in zip(*back.deps(i))} == want
    assert to_goal(back) == text  # the in-order edges are now explicit, and nothing else changed
    for line in text.splitlines():  # LogGOPSim's parser: no indentation, no trailing comments
        assert line == line.strip() and "//" not in line and "/*" not in line
    # the explicit in-order edges time the GOAL schedule like the registry one
    assert simulate(back, "loggops", LOGGOPS).total == simulate(schedule, "loggops", LOGGOPS).total


def test_goal_reader_accepts_loggopsim_syntax_and_more():
    text = ("// a comment\nnum_ranks 2\n\nrank 0 {\nl1: send 10b to 1 tag 4 cpu 0 nic 0\nl2: calc 500 cpu 0\n"
            "l2 requires l1\n}\nrank 1 {\n   l1: recv 10b from 0 tag 4   // indented, trailing comment\n"
            "/* a block\n comment */ send 3b to 0\n}\n")
    schedule = from_goal(text)
    c = schedule.columns
    assert c["kind"].tolist() == [Kind.SEND, Kind.DELAY, Kind.RECV, Kind.SEND]
    assert c["delay"][1] == pytest.approx(500e-9)
    assert schedule.requires(1).tolist() == [0]


@pytest.mark.parametrize("text,problem", [
    ("rank 0 {\n}\n", "line 1: a rank block before num_ranks"),
    ("num_ranks 2\nrank 0 {\nsend 1b to -1 tag 0\n}\n", "line 3: a send needs a destination rank"),
    ("num_ranks 2\nrank 0 {\nsend 1b to 1 tag -1\n}\n", "line 3: a send needs a destination rank and a tag"),
    ("num_ranks 2\nrank 0 {\nrecv 1b from -2 tag 0\n}\n", "line 3: a receive's source and tag are 0 or more"),
    ("num_ranks 2\nrank 0 {\nrecv 1b from 1 tag -3\n}\n", "line 3: a receive's source and tag are 0 or more"),
    ("num_ranks 2\nrank 0 {\nl1: send 1b to 1\nl1 requires l9\n}\n", "line 4: label 'l9' is not defined"),
    ("num_ranks 2\nrank 0 {\nsend 1b to 1 cpu 1\n}\n", "line 3: only cpu 0 and nic 0"),
    ("num_ranks 2\nrank 0 {\nsend 1 to 1\n}\n", "line 3: expected 'send Nb to R"),
    ("num_ranks 2\nrank 0 {\nsend 1b to 1\n", "rank 0's block is not closed"),
    ("num_ranks 2\nrank 0 {\n}\nrank 0 {\n}\n", "line 4: rank 0's block is given twice"),
    ("num_ranks 2\nnum_ranks 3\n", "line 2: a second num_ranks line"),
    ("num_ranks 100000000\n", "line 1: num_ranks 100000000 is above 65535"),
    ("num_ranks 2\nrank 0 {\nsend 1b to 1 tag 2147483648\n}\n", "line 3: tag 2147483648 is above 2147483647"),
    ("num_ranks 2\nrank 0 {\nsend " + "9" * 4301 + "b to 1\n}\n", "line 3: size 99999999999999999999\\.\\.\\. .4301 digits. is above"),
    ("num_ranks 2\nrank 0 {\ncalc 99999999999999999999\n}\n", "line 3: calc 99999999999999999999 is above"),
    ("num_ranks 2\nrank 0 {\nsend 1b to 1 cpu " + "1" * 5000 + "\n}\n", "line 3: only cpu 0 and nic 0"),
])
def test_goal_reader_errors_name_the_line(text, problem):
    with pytest.raises(GoalError, match=problem.replace("(", r"\(")):
        from_goal(text, name="x.goal")


def _same_schedule(a: Schedule, b: Schedule) -> bool:
    return (a.procs == b.procs and a.meta == b.meta and np.array_equal(a.buffer_sizes, b.buffer_sizes)
            and all(np.array_equal(a.columns[k], b.columns[k]) and a.columns[k].dtype == b.columns[k].dtype
                    for k in a.columns)
            and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("rank_ptr", "dep_ptr", "dep_idx",
                                                                           "dep_start")))


def _goal_texts() -> list[str]:
    """Every registered algorithm exported at a few P and roots; LogGOPSim's forms; and, from
    them, files with one random mutation each (tests/fuzz.py's), good or bad."""
    import random

    import fuzz

    texts = [to_goal(alg.schedule(p, p - 1, 0 if alg.collective == "barrier" else size)) for alg in REGISTRY.select()
             for p, size in ((1, 8), (3, 100), (6, 1000))]
    texts += ["num_ranks 3\nrank 2 {\nl0: recv 1b from -1 tag -1\nl1:send 4b to 0 tag 7 cpu 0 nic 0\t\n"
              "l1 irequires l0\n}\n\n  rank 0 {\r\nx_1 : calc 12 cpu 00\nrecv 4b from 2 tag 7\nx_1 requires x_1\n}\n",
              "num_ranks 2\nrank 1 {\nsend 8 b to 0\n}\nrank 0 {\nrecv 4b from 1\n}\n"]
    rng = random.Random(5)
    for text in list(texts):
        for _ in range(3):
            try:
                texts.append(fuzz._mutate_text(rng, text).decode())
            except UnicodeDecodeError:
                pass
    return texts


def test_the_compiled_goal_reader_reads_as_the_line_reader_does():
    """The compiled reader takes a file or leaves it to the line reader: what it takes, it reads
    as the line reader does, and what the line reader refuses, it never takes."""
    from colltune.limits import MAX_BYTES, MAX_PROCS, MAX_TAG
    from colltune.sim import _goal, goal

    taken = 0
    for text in _goal_texts():
        try:
            want: Schedule | None = goal._parse(text, 1e-9, "x.goal")
        except GoalError:
            want = None
        parsed = _goal.parse(text.encode(), MAX_PROCS, MAX_BYTES, MAX_TAG)
        if isinstance(parsed, dict):
            got = goal._from_columns(parsed, 1e-9)
            if got is not None:
                taken += 1
                assert want is not None and _same_schedule(got, want), text[:300]
        if want is not None:
            assert _same_schedule(from_goal(text), want)
    assert taken > 100


# Wildcard receives, timed by hand with LOGGOPS: a 1-byte message sent at t is processed by the
# receiver from t + o + L = t + 6.5 us to t + 8 us (its CPU busy for o = 1.5 us); a sender's CPU is
# busy for o after each send.
WILDCARD_CASES = {
    "the first message to arrive, not the lowest rank": (
        ("num_ranks 3\nrank 0 {\nl0: recv 1b from -1 tag -1\nl1: recv 1b from -1 tag -1\n}\n"
        "rank 1 {\nl0: calc 100000\nl1: send 1b to 0 tag 5\nl1 requires l0\n}\nrank 2 {\nsend 1b to 0 tag 7\n}\n"),
        [8.0, 108.0]),
    "a later wildcard takes what an earlier exact receive does not fit": (
        ("num_ranks 3\nrank 0 {\nl0: recv 1b from 1 tag 3\nl1: recv 1b from -1 tag -1\n}\n"
        "rank 1 {\nl0: calc 100000\nl1: send 1b to 0 tag 3\nl1 requires l0\n}\nrank 2 {\nsend 1b to 0 tag 0\n}\n"),
        [108.0, 8.0]),
    "posting order between a wildcard and an exact receive that both fit": (
        ("num_ranks 3\nrank 0 {\nl0: recv 1b from -1 tag -1\nl1: recv 1b from 2 tag 0\n}\nrank 1 {\n}\n"
        "rank 2 {\nl0: send 1b to 0 tag 0\nl1: send 1b to 0 tag 0\nl1 requires l0\n}\n"),
        [8.0, 9.5]),
    "any source with a tag, a source with any tag": (  # both messages wait for rank 0's CPU until 50 us
        ("num_ranks 3\nrank 0 {\nl0: calc 50000\nl1: recv 1b from -1 tag 4\nl1 requires l0\n"
        "l2: recv 1b from 1 tag -1\nl2 requires l0\n}\nrank 1 {\nsend 1b to 0 tag 2\n}\n"
        "rank 2 {\nsend 1b to 0 tag 4\n}\n"),
        [50.0, 53.0, 51.5]),
}


@pytest.mark.parametrize("case", WILDCARD_CASES)
def test_wildcard_receives_match_as_mpi_does(case):
    text, ends_us = WILDCARD_CASES[case]
    schedule = from_goal(text)
    assert schedule.wildcards
    result = simulate(schedule, "loggops", LOGGOPS)
    ends = result.end[schedule.ops_of(0)] * 1e6
    assert ends.tolist() == pytest.approx(ends_us, rel=1e-9)
    assert to_goal(from_goal(to_goal(schedule))) == to_goal(schedule)  # -1 written back as -1
    assert "from -1" in to_goal(schedule) or "tag -1" in to_goal(schedule)


def test_a_wildcard_takes_the_oldest_waiting_message_that_fits():
    """Rank 1's rendezvous message (tag 2) and rank 2's (tag 4) wait at rank 0; its receive from
    any source with tag 4 skips the older tag-2 message, which only the last receive, posted much
    later, takes: the rendezvous send completes then, not when the first wildcard was posted."""
    text = ("num_ranks 4\nrank 0 {\nl0: recv 1b from 3 tag 0\nl1: recv 1b from -1 tag 4\nl1 requires l0\n"
            "l2: recv 1b from 3 tag 1\nl2 requires l1\nl3: recv 100000b from -1 tag -1\nl3 requires l2\n}\n"
            "rank 1 {\nsend 100000b to 0 tag 2\n}\nrank 2 {\nsend 1b to 0 tag 4\n}\n"
            "rank 3 {\nl0: calc 50000\nl1: send 1b to 0 tag 0\nl1 requires l0\nl2: calc 100000\nl2 requires l1\n"
            "l3: send 1b to 0 tag 1\nl3 requires l2\n}\n")
    schedule = from_goal(text)
    result = simulate(schedule, "loggops", LOGGOPS)
    first, late, rendezvous = 1, 3, int(schedule.rank_ptr[1])
    assert result.end[first] == result.end[0]  # rank 2's message was waiting
    assert result.start[late] > result.end[first] + 40e-6  # rank 3's second message comes 100 us later
    assert result.end[rendezvous] == result.start[late] == result.end[late]


def test_an_unmatched_wildcard_receive_is_reported_not_hung():
    schedule = from_goal("num_ranks 2\nrank 0 {\nrecv 8b from -1 tag 3\n}\nrank 1 {\nsend 8b to 0 tag 2\n}\n")
    with pytest.raises(SimulationError, match="rank 0 op 0 .recv from any rank, tag 3"):
        simulate(schedule, "loggops", LOGGOPS)


def test_a_receive_without_its_send_is_reported_not_hung():
    schedule = from_goal("num_ranks 2\nrank 0 {\nrecv 8b from 1 tag 0\n}\nrank 1 {\n}\n")
    with pytest.raises(SimulationError, match="rank 0 op 0 .recv from rank 1"):
        simulate(schedule, "loggops", LOGGOPS)


# -- determinism and registry ----------------------------------------------------------------------

@pytest.mark.parametrize("network,params,topology", [
    ("loggops", LOGGOPS, None), ("plogp", PLOGP, None),
    ("plogpt", EXAMPLE.params("plogpt").model_copy(update={"bidirectional": TreeLevels(b=(3, 4, 5, 6))}), None),
    ("hockney", Hockney(alpha=1e-5, beta=1e-9), star(13, 1e8)),
])
def test_simulation_is_deterministic_bit_for_bit(network, params, topology):
    schedule = REGISTRY.get("alltoall", "direct_rotated").schedule(13 if topology else 16, 0, 3000)
    a = simulate(schedule, network, params, topology=topology)
    b = simulate(schedule, network, params, topology=topology)
    for name in ("start", "end", "flow_end", "flow_rate", "completion"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
    assert a.total == b.total and a.events == b.events


def test_every_network_model_times_every_collective():
    profiles = {"loggp": LOGGOPS, "logp": LogP(L=4e-6, o=1e-6, g=2e-6), "postal": Postal(lam=3.0),
                "hockney": Hockney(alpha=1e-5, beta=1e-9, gamma=1e-10),
                "plogp": PLOGP.model_copy(update={"bidirectional": PLOGP.unidirectional}), "cluster": TABLE1,
                "plogpt": load_profile("builtin:paper001-gige").params("plogpt"),
                "latency": load_profile("builtin:paper004-grid").params("latency")}
    for net in NETWORKS.values():
        for alg in REGISTRY.select(None):
            root = 3 if alg.collective in ("bcast", "scatter", "gather", "reduce") else 0
            schedule = alg.schedule(8, root, 0 if alg.collective == "barrier" else 1000)
            result = simulate(schedule, net.name, profiles[net.params])
            assert result.total > 0 and np.isfinite(result.end).all(), (net.name, alg.name)
            assert result.total == result.completion.max()


def test_hockney_reductions_cost_gamma_per_byte():
    schedule = REGISTRY.get("reduce", "flat_tree").schedule(2, 0, 8000, op="sum", dtype="float64")
    plain = simulate(schedule, "hockney", Hockney(alpha=1e-5, beta=1e-9)).total
    priced = simulate(schedule, "hockney", Hockney(alpha=1e-5, beta=1e-9, gamma=1e-9)).total
    assert close(priced - plain, 8000 * 1e-9)


# -- command line ----------------------------------------------------------------------------------

def test_cli_simulate_with_set_only_and_json_total(tmp_path):
    args = ["simulate", "--model", "loggops", "--set", "L=5e-6", "--set", "o=1.5e-6", "--set", "g=1e-6",
            "--set", "G=1e-9", "--set", "S=65536", "-c", "bcast", "-a", "chain", "-p", "5", "-s", "1000", "--json",
            "--trace", str(tmp_path / "t.json")]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    total = json.loads(out.output)["total"]
    assert close(total, 4 * LOGGOPS.message(1000))
    trace = json.loads((tmp_path / "t.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(REGISTRY.get("bcast", "chain").schedule(5, 0, 1000))
    assert {e["tid"] for e in slices} == set(range(5))


def test_cli_export_goal_then_simulate_goal(tmp_path):
    goal = tmp_path / "b.goal"
    runner = CliRunner()
    out = runner.invoke(main, ["export-goal", "-c", "bcast", "-a", "binomial", "-p", "6", "-s", "100", "-o", str(goal)])
    assert out.exit_code == 0, out.output
    sets = ["--set", "L=5e-6", "--set", "o=1.5e-6", "--set", "g=1e-6", "--set", "G=1e-9"]
    from_file = runner.invoke(main, ["simulate", "-m", "loggops", *sets, "--goal", str(goal), "--json"])
    direct = runner.invoke(main, ["simulate", "-m", "loggops", *sets, "-c", "bcast", "-a", "binomial", "-p", "6",
                                  "-s", "100", "--json"])
    assert json.loads(from_file.output)["total"] == json.loads(direct.output)["total"]


def test_cli_simulate_with_buffers_reports_retransmissions():
    args = ["simulate", "-m", "hockney", "--set", "alpha=1e-6", "--set", "beta=0", "-c", "gather", "-a", "flat_tree",
            "-p", "9", "-s", "1MB", "--topology", "star:1e8", "--json"]
    runner = CliRunner()
    clean = runner.invoke(main, args)
    lossy = runner.invoke(main, [*args, "--buffer", "1MB"])
    assert clean.exit_code == 0 and lossy.exit_code == 0, lossy.output
    assert json.loads(clean.output)["retransmissions"] == 0 and json.loads(lossy.output)["retransmissions"] == 8
    assert close(json.loads(lossy.output)["total"], json.loads(clean.output)["total"] + 0.26)


def test_cli_simulate_over_a_topology_also_gives_the_call_the_tuner_prices():
    """Over a topology the JSON has the third of back-to-back calls (what ``tune`` prices), the
    text says it; without one it is null."""
    from colltune.algorithms import REGISTRY
    from colltune.models.params import Hockney
    from colltune.sim import star
    from colltune.sim.calls import steady_call

    args = ["simulate", "-m", "hockney", "--set", "alpha=1e-5", "--set", "beta=0", "-c", "allgather", "-a", "ring",
            "-p", "4", "-s", "64KiB"]
    runner = CliRunner()
    over = runner.invoke(main, [*args, "--topology", "star:1.25e7", "--json"])
    alone = runner.invoke(main, [*args, "--json"])
    assert over.exit_code == 0 and alone.exit_code == 0, over.output + alone.output
    want = steady_call(REGISTRY.get("allgather", "ring").schedule(4, 0, 65536), "hockney",
                       Hockney(alpha=1e-5, beta=0.0), topology=star(4, 1.25e7))
    assert json.loads(over.output)["steady_call"] == pytest.approx(want) and json.loads(alone.output)["steady_call"] is None
    text = runner.invoke(main, [*args, "--topology", "star:1.25e7"])
    assert "what tune prices" in text.output


@pytest.mark.parametrize("args,message", [
    (["simulate", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10"], "give --profile, or --model"),
    (["simulate", "-m", "loggops", "--set", "L=1", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10"],
     "loggp parameters"),
    (["simulate", "--profile", "builtin:paper001-example", "-m", "plogpt", "-c", "bcast", "-a", "chain", "-p", "8",
      "-s", "10"], "need a binary tree of depth 3"),
    (["simulate", "-m", "postal", "--set", "lam=1", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10",
      "--topology", "star:-1"], "must be positive"),
    (["simulate", "-m", "postal", "--set", "lam=1", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10",
      "--buffer", "64KiB"], "give --topology too"),
    (["simulate", "-m", "postal", "--set", "lam=1", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10",
      "--topology", "star:1e9", "--buffer", "0"], "at least one byte"),
])
def test_cli_simulate_errors(args, message):
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and message in out.output, out.output


def test_simulator_doc_is_current():
    doc = Path(__file__).parent.parent / "docs" / "simulator.md"
    assert doc.read_text() == networks_markdown(), "regenerate with: colltune sim-doc > docs/simulator.md"


# -- a profile that knows its topology ------------------------------------------------------------

def test_a_topology_restricted_to_its_first_ranks():
    from colltune.sim import TopologyError, two_level

    tree = two_level(8, 2, 1e7, 1e7)
    four = tree.first(4)
    assert four.hosts == tree.hosts[:4] and four.nodes == tree.nodes and tree.first(8) is tree
    with pytest.raises(TopologyError, match="places 8 ranks, not 9"):
        tree.first(9)


def test_simulate_and_tune_carry_the_profiles_topology(tmp_path):
    """A profile with a topology is simulated over it (its first P ranks) unless --topology none,
    by `colltune simulate` and by tune's pricer; PlogPT and larger jobs go without it."""
    from colltune.sim import topology_for, two_level
    from colltune.tune import SimPricer

    base = load_profile("builtin:ethernet-10g-tcp")
    tree = two_level(8, 2, 2e6, 2e6)  # slow uplinks: the topology matters
    profile = base.model_copy(update={"topology": tree})
    path = tmp_path / "p.json"
    path.write_text(profile.to_json())
    runner = CliRunner()

    def total(*extra: str) -> float:
        res = runner.invoke(main, ["simulate", "--profile", str(path), "-m", "plogp", "-c", "alltoall", "-a",
                                   "pairwise", "-p", "4", "-s", "64KiB", "--json", *extra])
        assert res.exit_code == 0, res.output
        return json.loads(res.output)["total"]

    schedule = REGISTRY.get("alltoall", "pairwise").schedule(4, 0, 65536)
    over = simulate(schedule, "plogp", base.models.plogp, topology=tree.first(4)).total
    alone = simulate(schedule, "plogp", base.models.plogp).total
    assert over > 2 * alone
    assert total() == pytest.approx(over) and total("--topology", "none") == pytest.approx(alone)
    pricer = SimPricer(base.models.plogp, "plogp", tree)
    assert pricer.price("alltoall", "pairwise", 4, 65536, {})[0] == pytest.approx(over)
    nine = simulate(REGISTRY.get("alltoall", "pairwise").schedule(9, 0, 65536), "plogp", base.models.plogp).total
    assert pricer.price("alltoall", "pairwise", 9, 65536, {})[0] == pytest.approx(nine)  # no hosts for 9
    assert topology_for(tree, "plogpt", 4) is None and topology_for(None, "plogp", 4) is None
    # the profile file keeps it
    assert load_profile(str(path)).topology == tree


@pytest.mark.parametrize("procs", [2, 3, 5, 6, 8, 13])
def test_tree_sends_leave_in_turn_so_the_largest_subtree_is_not_held_up(procs):
    """On a star of 1 byte/s links with free endpoints, a parent sends to its children one after
    another, largest subtree first: the binomial broadcast of m bytes takes ceil(log2 P) m (all at
    once, the root's first child would wait for every other child's copy), and the binomial scatter
    of m-byte blocks (P - 1) m, the root's own bytes."""
    m = 1000
    free = Postal(lam=0.0, step=0.0)
    scatter = REGISTRY.get("scatter", "binomial_tree").schedule(procs, 0, m)
    for name in ("binomial_tree", "binomial_tree_rendezvous"):
        bcast = REGISTRY.get("bcast", name).schedule(procs, 0, m)
        assert simulate(bcast, "postal", free, topology=star(procs, 1.0)).total == pytest.approx(
            math.ceil(math.log2(procs)) * m)
    assert simulate(scatter, "postal", free, topology=star(procs, 1.0)).total == pytest.approx((procs - 1) * m)
