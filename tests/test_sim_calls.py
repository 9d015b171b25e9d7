"""Back-to-back calls (colltune.sim.calls): hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from colltune.algorithms import REGISTRY
from colltune.errors import ScheduleError
from colltune.models.params import Postal
from colltune.profiles import load_profile
from colltune.report.fidelity import predictors
from colltune.schedule import Buf, Kind, Region, ScheduleBuilder
from colltune.sim import simulate, star
from colltune.sim.calls import STEADY_CALLS, TAG_STRIDE, last_call, repeated, steady_call

FREE = Postal(lam=0.0, step=0.0)
#: Links of 1 unit/s; a flow into a host that sends keeps 0.5 of it at a run of 2 units, all of it at 8.
TOPOLOGY = star(2, 1.0).model_copy(update={"duplex": ((2.0, 0.5), (8.0, 1.0))})


def exchange():
    """Ranks 0 and 1 send each other 2 units at once."""
    b = ScheduleBuilder(2, send_bytes=2, recv_bytes=2)
    for src in (0, 1):
        b.send(src, 1 - src, Region(Buf.SEND, 0, 2), tag=3)
        b.recv(1 - src, src, Region(Buf.RECV, 0, 2), tag=3)
    return b.build()


def barrier(procs: int):
    return REGISTRY.get("barrier", "dissemination").schedule(procs, 0, 0)


def test_a_stream_runs_on_from_one_call_into_the_next():
    """The first call's flows keep 0.5 (a run of 2 units) and take 4; the barrier's empty messages
    take no time, so the second call's flows continue the run (4 units: 0.75) and the third's (6
    units: the share interpolated in log size)."""
    call = exchange()
    assert last_call(call, barrier(2), "postal", FREE, calls=1, topology=TOPOLOGY) == pytest.approx(4.0)
    assert simulate(call, "postal", FREE, topology=TOPOLOGY).total == pytest.approx(4.0)
    assert last_call(call, barrier(2), "postal", FREE, calls=2, topology=TOPOLOGY) == pytest.approx(2 / 0.75)
    share = float(TOPOLOGY.duplex_factor(np.array([6]))[0])
    assert 0.75 < share < 1.0
    assert last_call(call, barrier(2), "postal", FREE, calls=3, topology=TOPOLOGY) == pytest.approx(2 / share)


def test_without_state_that_outlives_a_call_every_call_takes_the_same():
    """Without a topology nothing carries over: the exchange is symmetric, so both ranks leave
    each barrier at once, and the third call takes what one call does."""
    call, params = exchange(), Postal(lam=2.0, step=0.5)
    alone = simulate(call, "postal", params).total
    assert alone > 0
    assert last_call(call, barrier(2), "postal", params, calls=1) == pytest.approx(alone)
    assert last_call(call, barrier(2), "postal", params, calls=3) == pytest.approx(alone)


def test_a_rank_that_leaves_the_barrier_first_waits_inside_the_next_call():
    """A binomial broadcast on 5 ranks under the postal model: ranks leave the dissemination
    barrier at different times, and each is timed from its own exit, as a benchmark's ranks time
    themselves, so the slowest rank's call is longer than a call started by every rank at once."""
    call, params = REGISTRY.get("bcast", "binomial_tree").schedule(5, 0, 1000), Postal(lam=2.0, step=0.5)
    assert last_call(call, barrier(5), "postal", params, calls=3) > simulate(call, "postal", params).total


def test_the_repeated_schedule_keeps_every_call_apart():
    """Each piece's ops are copied with their tags moved by TAG_STRIDE per piece, each rank's
    pieces in order, and every op of a piece requires the ops of the piece before on its rank."""
    call, bar = exchange(), barrier(2)
    schedule, maps = repeated(call, bar, 3)
    assert len(schedule) == 3 * len(call) + 2 * len(bar) and len(maps) == 5
    messages = np.isin(schedule.columns["kind"], (Kind.SEND, Kind.RECV))
    for k, (piece, where) in enumerate(zip([call, bar, call, bar, call], maps)):
        assert (schedule.columns["kind"][where] == piece.columns["kind"]).all()
        kinds = np.isin(piece.columns["kind"], (Kind.SEND, Kind.RECV))
        assert (schedule.columns["tag"][where[kinds]] == piece.columns["tag"][kinds] + k * TAG_STRIDE).all()
        assert (schedule.columns["rank"][where] == piece.columns["rank"]).all()
        if k:
            first = int(where[piece.rank_ptr[0]])
            assert set(maps[k - 1][maps[k - 1] < schedule.rank_ptr[1]]) <= set(schedule.requires(first))
    assert messages.sum() == 3 * 4 + 2 * int(np.isin(bar.columns["kind"], (Kind.SEND, Kind.RECV)).sum())


def test_bad_repetitions_are_refused():
    with pytest.raises(ScheduleError, match="calls must be >= 1"):
        repeated(exchange(), barrier(2), 0)
    with pytest.raises(ScheduleError, match="the barrier has 3 ranks, the call 2"):
        repeated(exchange(), barrier(3), 2)
    b = ScheduleBuilder(2, send_bytes=1, recv_bytes=1)
    b.send(0, 1, Region(Buf.SEND, 0, 1), tag=TAG_STRIDE)
    b.recv(1, 0, Region(Buf.RECV, 0, 1), tag=TAG_STRIDE)
    with pytest.raises(ScheduleError, match="the call's tags must lie in"):
        repeated(b.build(), barrier(2), 2)


def test_the_fidelity_benchmark_prices_the_third_call_over_the_topology():
    fns = predictors(load_profile("builtin:ethernet-10g-tcp"), star(4, 1.25e9))
    assert "simulate:plogp@topology-third" in fns and "simulate:plogp-third" not in fns
    third = fns["simulate:plogp@topology-third"]("bcast", "binomial_tree", 4, 65536, {})
    first = fns["simulate:plogp@topology"]("bcast", "binomial_tree", 4, 65536, {})
    assert third > 0 and third == pytest.approx(first, rel=0.5)


def test_the_steady_call_is_the_third_over_a_topology_and_the_only_one_without():
    call = exchange()
    assert steady_call(call, "postal", FREE, topology=TOPOLOGY) == pytest.approx(
        last_call(call, barrier(2), "postal", FREE, calls=STEADY_CALLS, topology=TOPOLOGY))
    assert STEADY_CALLS == 3 and steady_call(call, "postal", FREE, topology=TOPOLOGY) < 4.0  # the run went on
    params = Postal(lam=2.0, step=0.5)
    assert steady_call(call, "postal", params) == pytest.approx(simulate(call, "postal", params).total)


def test_the_tuner_and_the_probes_check_price_the_steady_call():
    """The simulate pricer and the check that chooses the profile's network model price a case
    over a topology as the third of back-to-back calls, as the benchmarks time it."""
    from colltune.probe.run import choose_network
    from colltune.tune.select import SimPricer

    profile = load_profile("builtin:ethernet-10g-tcp")
    topology = star(4, 1.25e7).model_copy(update={"duplex": ((65536.0, 0.5), (1048576.0, 1.0))})
    schedule = REGISTRY.get("allgather", "ring").schedule(4, 0, 65536)
    steady = steady_call(schedule, "hockney", profile.models.hockney, topology=topology)
    cold = simulate(schedule, "hockney", profile.models.hockney, topology=topology).total
    assert steady < cold  # the ring's streams run on from the calls before
    priced, _ = SimPricer(profile.models.hockney, "hockney", topology).price("allgather", "ring", 4, 65536, {})
    assert priced == pytest.approx(steady)
    _, errors = choose_network(profile.models, 4, [("allgather", "ring", 65536)], [steady], topology)
    assert errors["hockney"] == pytest.approx(0.0, abs=1e-12)
