"""Bad input of every kind gets one clean error: the seeded fuzz cases of tests/fuzz.py, and the
cases that once ended in a traceback, a hang or a wrong success, each by name."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from colltune import cli
from colltune.algorithms import REGISTRY
from colltune.collectives import Problem
from colltune.errors import ParameterError, ScheduleError
from colltune.files import write_atomic
from colltune.limits import MAX_OPS
from colltune.runtime.calls import as_bytes
from colltune.schedule import ScheduleBuilder
from colltune.sim.goal import GoalError, from_goal

import fuzz

SIM = fuzz.SIM


def test_generated_bad_inputs_each_end_in_one_error_line(tmp_path):
    failures = [f"{case.kind} {' '.join(case.args)[:200]}: {problem}"
                for case in fuzz.cases(420, seed=0) if (problem := fuzz.run(case, tmp_path)) is not None]
    assert not failures, "\n".join(failures)


def _error(*args: str) -> str:
    result = CliRunner().invoke(cli.main, list(args))
    assert result.exit_code == 2 and result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    return result.output.strip().splitlines()[-1]


@pytest.mark.parametrize("args, says", [
    (("verify", "-c", "bcast", "-a", "knomial_tree", "-p", "4", "-s", "8", "--param", "radix=1000000000"),
     "radix=1000000000: Input should be less than or equal to 65535"),
    (("verify", "-c", "bcast", "-a", "chain_segmented", "-p", "4", "-s", "8", "--param", "segment_size=true"),
     "segment_size=true"),
    (("verify", "-c", "bcast", "-a", "binomial_tree", "-p", "0", "-s", "8"), "--procs '0': 0 is below 1"),
    (("verify", "-c", "bcast", "-a", "binomial_tree", "-p", "1-100000", "-s", "8"), "100000 is above 65535"),
    (("verify", "-c", "bcast", "-a", "binomial_tree", "-p", "4", "-s", "9223372036854775808"), "2^63 - 1"),
    (("verify", "-c", "bcast", "-a", "binomial_tree", "-p", "4", "-s", "\u0664\u0664"), "not a whole number"),
    (("simulate", "-m", "hockney", "--set", "alpha=5e-6", "--set", "beta=1e-300", "--set", "beta=[1,2]", "-c",
      "bcast", "-a", "binomial_tree", "-p", "4", "-s", "8"), "beta: Input should be a valid number"),
    (("simulate", "-m", "hockney", "--set", "alpha=5e-6", "--set", "beta=1e308", "-c", "bcast", "-a",
      "binomial_tree", "-p", "4", "-s", "8"), "beta: Input should be less than or equal to 1"),
    (("export-goal", "-c", "bcast", "-a", "binomial_tree", "-p", "4", "-s", "8", "-o", "/missing/dir/x.goal"),
     "Error: /missing/dir/x.goal: No such file or directory"),
])
def test_bad_command_lines_name_the_problem(args, says):
    assert says in _error(*args)


def test_tune_takes_no_empty_process_list():
    assert "--procs ''" in _error("tune", "--profile", "builtin:ethernet-10g-tcp", "-o", "/tmp/never.json",
                                  "--procs", "")


def test_a_model_whose_times_overflow_says_so():
    """Parameters within the limits cannot overflow; past them (built without validation) the
    simulator and the formulas say so instead of reporting stuck ops or an infinite time."""
    from colltune.errors import ColltuneError
    from colltune.models import predict
    from colltune.models.params import Hockney
    from colltune.sim import SimulationError, simulate
    params = Hockney.model_construct(alpha=5e-6, beta=1e308, gamma=None)
    schedule = REGISTRY.get("bcast", "binomial_tree").schedule(4, 0, 1000)
    with pytest.raises(SimulationError, match="overflow"):
        simulate(schedule, "hockney", params)
    with pytest.raises(ColltuneError, match="overflows"):
        predict(params, "hockney", "bcast", "binomial_tree", 4, 1000)


def test_a_schedule_past_the_op_limit_fails_as_it_grows(monkeypatch):
    monkeypatch.setattr("colltune.schedule.builder.MAX_OPS", 10)
    b = ScheduleBuilder(4, 8, 8)
    with pytest.raises(ScheduleError, match="grows past 10 ops"):
        for r in range(11):
            b.delay(r % 4, 1.0)
    assert MAX_OPS >= 2 * 4096 * 4095  # the direct all-to-all of 4096 ranks fits


def test_goal_receives_shorter_than_every_matching_send_are_rejected():
    with pytest.raises(GoalError, match="line 3: rank 0 receives 8 B from rank 1 with tag 0.*truncate"):
        from_goal("num_ranks 2\nrank 0 {\nrecv 8b from 1 tag 0\n}\nrank 1 {\nsend 100b to 0 tag 0\n}\n")
    from_goal("num_ranks 2\nrank 0 {\nrecv 8b from -1 tag 0\n}\nrank 1 {\nsend 100b to 0 tag 0\n}\n")  # wildcard


def test_logical_and_bitwise_operations_take_no_floats_as_in_mpi():
    for op in ("land", "lor", "band"):
        with pytest.raises(ParameterError, match=f"'{op}' is not defined for dtype float64"):
            Problem("allreduce", 4, 0, 64, op=op, dtype="float64")
    Problem("allreduce", 4, 0, 64, op="land", dtype="int32")


def test_object_arrays_are_refused_as_buffers():
    with pytest.raises(ParameterError, match="array of Python objects"):
        as_bytes(np.array([object(), object()]), "sendbuf")


def test_a_failed_atomic_write_names_the_file_not_its_temporary(tmp_path):
    with pytest.raises(OSError) as info:
        write_atomic(tmp_path / "missing" / "x.json", "{}")
    assert info.value.filename == str(tmp_path / "missing" / "x.json")


def test_the_documented_limits_are_the_code_s():
    from pathlib import Path

    from colltune import limits
    text = (Path(__file__).parent.parent / "docs" / "formats.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in text.splitlines()
            if line.startswith("| ") and line.count("|") == 4}
    assert rows["process count P"] == f"1 to {limits.MAX_PROCS}"
    assert rows["ops in one schedule"] == f"2^{limits.MAX_OPS.bit_length() - 1} ({limits.MAX_OPS:,})"
    assert rows["size in bytes"] == "0 to 2^63 - 1" and limits.MAX_BYTES == 2 ** 63 - 1
    assert rows["message tag"] == "0 to 2^31 - 1" and limits.MAX_TAG == 2 ** 31 - 1
    assert rows["file read"] == "1 GiB" and limits.MAX_FILE_BYTES == 1 << 30
    assert rows["time parameter of a model"] == "0 to 10^9 s" and limits.MAX_TIME == 1e9
    assert rows["cost per byte of a model"].startswith("0 to 1 s/B") and limits.MAX_PER_BYTE == 1.0


def test_schedules_far_past_the_op_limit_are_refused_before_they_are_built():
    with pytest.raises(ScheduleError, match=r"alltoall/pairwise_exchange over 65535 ranks: about 8.\d+e\+09 ops"):
        REGISTRY.get("alltoall", "pairwise_exchange").schedule(65535, 0, 8)
    with pytest.raises(ScheduleError, match="in segments of 1 B over 4 ranks needs more than"):
        REGISTRY.get("bcast", "chain_segmented").schedule(4, 0, 1 << 40, segment_size=1)
    assert len(REGISTRY.get("bcast", "binomial_tree").schedule(65535, 0, 8)) == 2 * 65534
