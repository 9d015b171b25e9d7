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


def test_verify_every_collective_at_once() -> None:
    res = run("verify", "-c", "all", "-a", "all", "-p", "6,7", "-s", "24", "-r", "5", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["results"]
    per_p = {(r["collective"], r["algorithm"]) for r in rows}
    assert per_p == {(a.collective, a.name) for a in REGISTRY}
    # unrooted collectives run with root 0, and barriers with size 0
    assert {(r["root"], r["size"]) for r in rows if r["collective"] == "barrier"} == {(0, 0)}
    assert {r["root"] for r in rows if r["collective"] == "alltoall"} == {0}


def test_verify_reductions_with_dtype_and_order() -> None:
    res = run("verify", "-c", "allreduce", "-a", "all", "-p", "1-7", "-s", "0,40", "--op", "prod", "--dtype",
              "float64", "--non-commutative", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["results"]
    assert {r["algorithm"] for r in rows} == {a.name for a in REGISTRY.select("allreduce") if not a.needs_commutative}
    assert all(r["commutative"] is False and r["dtype"] == "float64" for r in rows)


def test_verify_reduction_usage_errors() -> None:
    res = run("verify", "-c", "reduce", "-a", "flat_tree", "-p", "4", "-s", "6", "--dtype", "int32")
    assert res.exit_code == 2 and "not a whole number of int32 elements" in res.output
    res = run("verify", "-c", "gather", "-a", "flat_tree", "-p", "4", "-s", "6", "--op", "sum")
    assert res.exit_code == 2 and "does not reduce" in res.output
    res = run("verify", "-c", "all", "-a", "chain", "-p", "4", "-s", "6")
    assert res.exit_code == 2 and "--algorithm all" in res.output
    res = run("verify", "-c", "allreduce", "-a", "ring", "-p", "4", "-s", "8", "--non-commutative", "--json")
    assert res.exit_code == 1 and "needs a commutative operation" in res.output
