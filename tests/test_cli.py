"""The command line: exit codes, JSON output, errors that name the problem."""

import json

from click.testing import CliRunner

from colltune import cli
from colltune.algorithms import REGISTRY, Registry
from colltune.schedule import Buf, Region


def run(*args: str):
    return CliRunner().invoke(cli.main, list(args))


def test_algorithms_json_lists_the_registry() -> None:
    res = run("algorithms", "--collective", "bcast", "--json")
    assert res.exit_code == 0
    assert [a["name"] for a in json.loads(res.output)] == REGISTRY.names("bcast")


def test_algorithms_table() -> None:
    res = run("algorithms")
    assert res.exit_code == 0
    assert "symmetric_async" in res.output and "native" in res.output


def test_verify_success_json() -> None:
    res = run("verify", "--collective", "bcast", "--algorithm", "binomial", "--procs", "1-9", "--size", "0,1KiB",
              "--root", "0", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["ok"] and len(out["results"]) == 18
    assert all(r["algorithm"] == "binomial_tree" for r in out["results"])


def test_verify_all_roots_and_params() -> None:
    res = run("verify", "-c", "bcast", "-a", "chain_segmented", "-p", "5", "-s", "1000", "-r", "all",
              "--param", "segment_size=99")
    assert res.exit_code == 0, res.output
    assert "5 verified, 0 failed" in res.output


def test_verify_failure_exits_1_with_the_message(monkeypatch) -> None:
    reg = Registry()  # a substitute registry whose "chain" is wrong on purpose

    @reg.register("bcast", "chain", source="test")
    def forgetful(b, problem):
        """Sends to rank 1 only.

        Wrong on purpose."""
        if problem.procs > 1 and problem.size:
            whole = Region(Buf.RECV, 0, problem.size)
            b.recv(1, 0, whole)
            b.send(0, 1, whole)

    monkeypatch.setattr(cli, "REGISTRY", reg)
    res = run("verify", "-c", "bcast", "-a", "chain", "-p", "3", "-s", "10", "--json")
    assert res.exit_code == 1
    (row,) = json.loads(res.output)["results"]
    assert not row["ok"] and row["rank"] == 2 and "postcondition" in row["error"]


def test_unknown_algorithm_is_a_usage_error_listing_valid_names() -> None:
    res = run("verify", "-c", "bcast", "-a", "quick", "-p", "4", "-s", "10")
    assert res.exit_code == 2
    assert "'quick' is not one of" in res.output
    for name in REGISTRY.names("bcast", aliases=True):
        assert f"'{name}'" in res.output


def test_bad_values_are_usage_errors() -> None:
    assert "not a whole number of bytes" in run("verify", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10XB").output
    res = run("verify", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10", "-r", "4")
    assert res.exit_code == 2 and "--root 4 is not a rank of 4 processes" in res.output
    res = run("verify", "-c", "bcast", "-a", "chain", "-p", "4", "-s", "10", "--param", "segment_size=5")
    assert res.exit_code == 2 and "no selected algorithm takes segment_size" in res.output
    res = run("verify", "-c", "bcast", "-a", "chain_segmented", "-p", "4", "-s", "10", "--param", "segment_size=0")
    assert res.exit_code == 2 and "segment_size=0" in res.output
