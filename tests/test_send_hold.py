"""A topology's ``send_hold``: a random hold before every send, simulated in seeded draws."""

from __future__ import annotations

import numpy as np
import pydantic
import pytest

from colltune.algorithms import REGISTRY
from colltune.models.params import Hockney
from colltune.schedule import Buf, Kind, Region, Schedule, ScheduleBuilder
from colltune.sim import Topology, simulate, star
from colltune.sim.engine import HOLD_DRAWS

IDLE = Hockney(alpha=0.0, beta=0.0)


def stream(sends: int, size: int = 1) -> Schedule:
    """Rank 0 sends ``sends`` messages to rank 1, each after the one before (posting order)."""
    b = ScheduleBuilder(2, send_bytes=size, recv_bytes=size)
    for _ in range(sends):
        b.send(0, 1, Region(Buf.SEND, 0, size))
        b.recv(1, 0, Region(Buf.RECV, 0, size))
    return b.build()


def test_no_hold_is_the_plain_simulation():
    schedule = REGISTRY.get("alltoall", "recv_all_xor_sends").schedule(5, 0, 4096)
    topology = star(5, 12.5e6, 5e-5)
    plain = simulate(schedule, "hockney", IDLE, topology=topology)
    zero = simulate(schedule, "hockney", IDLE, topology=topology.model_copy(update={"send_hold": 0.0}))
    assert zero.total == plain.total
    assert "send_hold" not in zero.meta


def test_a_chain_waits_the_sum_of_its_holds():
    """On a network whose flows take no time, n sends in a row keep their sender busy for the sum of
    their n exponential holds of mean h (n h within three standard deviations, h sqrt(n)): exactly
    the median of the seeded draws' sums."""
    n, hold = 400, 1e-4
    topology = star(2, 1e15).model_copy(update={"send_hold": hold})
    result = simulate(stream(n), "hockney", IDLE, topology=topology)
    assert result.meta == {"sharing": "equal", "send_hold": hold, "draws": HOLD_DRAWS}
    assert abs(result.total - n * hold) < 3 * hold * np.sqrt(n)
    sends = stream(n).columns["kind"] == Kind.SEND
    draws = sorted(float(np.random.default_rng(seed).exponential(hold, len(sends))[sends].sum())
                   for seed in range(HOLD_DRAWS))
    assert result.total == pytest.approx(draws[HOLD_DRAWS // 2], rel=1e-9)


def test_holds_are_the_same_every_time_and_only_slow_a_schedule():
    schedule = REGISTRY.get("allreduce", "ring").schedule(8, 0, 4096)
    topology = star(8, 1e15, 5e-5)  # flows too short for a hold to hide under
    held = topology.model_copy(update={"send_hold": 2e-5})
    first, again = (simulate(schedule, "hockney", IDLE, topology=held) for _ in range(2))
    assert first.total == again.total
    assert np.array_equal(first.end, again.end)
    assert first.total > simulate(schedule, "hockney", IDLE, topology=topology).total


@pytest.mark.parametrize("bad", [-1e-6, float("inf"), float("nan")])
def test_a_bad_hold_is_refused(bad):
    with pytest.raises(pydantic.ValidationError, match="send_hold"):
        Topology.model_validate({**star(2, 1.0).model_dump(), "send_hold": bad})
