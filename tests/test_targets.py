"""Tuning for a target library (``colltune tune --library mpich``): MPICH's own algorithms as the
candidates, priced by their registry equivalents, exported exactly as decided, read by MPICH."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import RULE_STEP, run_bounded

from colltune.algorithms import REGISTRY
from colltune.cli import main
from colltune.models import Unavailable
from colltune.models.params import LogGP
from colltune.profiles import load_profile
from colltune.profiles.format import Provenance
from colltune.sim import simulate
from colltune.tune import NATIVE, Block, DecisionTable, Rule, build_table, write_table
from colltune.tune.export import mpich_json, openmpi_rules
from colltune.tune.select import SimPricer
from colltune.tune.table import TableError, parse_table
from colltune.tune.targets import MPICH_ALGORITHMS, LibraryPricer, catalogue_markdown, library_algorithm

MPI_DIR = Path(__file__).parent / "mpi"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
LOGGOPS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, O=0.0, S=65536)


def every_mpich_table(procs: int = 8, procs_max: int = 64) -> DecisionTable:
    """Every MPICH algorithm colltune prices, each variant at ``procs`` ranks and 64 KiB, and
    native, each owning RULE_STEP bytes, for 1..procs_max ranks."""
    colls: dict[str, tuple[Block, ...]] = {}
    for coll in ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier"):
        choices = [(NATIVE, {})] + [(a.name, v) for (c, _), a in MPICH_ALGORITHMS.items() if c == coll
                                    for v in a.variants(procs, 65536)]
        if coll == "barrier":
            choices = choices[1:]
        rules = tuple(Rule(size_min=i * RULE_STEP, size_max=None if i + 1 == len(choices) else (i + 1) * RULE_STEP - 1,
                           algorithm=name, params=params) for i, (name, params) in enumerate(choices))
        colls[coll] = (Block(procs_min=1, procs_max=procs_max, tuned_at=(procs,), rules=rules),)
    return DecisionTable(method="model", provenance=Provenance(source="tests"), collectives=colls, library="mpich")


@pytest.fixture(scope="module")
def tuned() -> DecisionTable:
    profile = load_profile("builtin:ethernet-10g-tcp")
    return build_table(SimPricer(profile.params("loggp"), "loggops"), "simulate",
                       ["bcast", "allgather", "alltoall", "reduce", "allreduce", "barrier"], [3, 8], 1 << 20,
                       Provenance(source="tests"), library="mpich")


def test_a_library_table_names_only_the_librarys_algorithms(tuned: DecisionTable) -> None:
    assert tuned.library == "mpich"
    seen = set()
    for coll, blocks in tuned.collectives.items():
        for block in blocks:
            for rule in block.rules:
                if rule.algorithm != NATIVE:
                    a = library_algorithm("mpich", coll, rule.algorithm)
                    assert set(rule.params) == set(a.keys)
                    seen.add((coll, rule.algorithm))
                for sample in block.samples:
                    assert all(c.algorithm == NATIVE or (coll, c.algorithm) in MPICH_ALGORITHMS
                               for c in sample.candidates)
    assert len(seen) >= 4  # the tuner did choose MPICH algorithms, not only native
    again = parse_table(json.loads(tuned.to_json()), "round trip")
    assert again == tuned


def test_the_export_writes_exactly_what_was_decided(tuned: DecisionTable) -> None:
    tree, notes = mpich_json(tuned)
    assert notes == []  # nothing substituted, so nothing to say
    for coll, blocks in tuned.collectives.items():
        text = json.dumps(tree[f"collective={coll}"])
        for block in blocks:
            for rule in block.rules:
                if rule.algorithm == NATIVE:
                    continue
                a = MPICH_ALGORITHMS[(coll, rule.algorithm)]
                container = f"algorithm=MPIR_{coll.capitalize()}_intra_{rule.algorithm}"
                assert container in text
                if a.reduce_scatter_fallback is None:
                    leaf = json.dumps({container: {f"{k}={v}": {} for k, v in {**a.fixed, **rule.params}.items()}})
                    assert leaf[1:-1] in text, (coll, rule)
    with pytest.raises(TableError, match="exports to mpich only"):
        openmpi_rules(tuned)


def test_library_pricer_prices_the_equivalent_schedule() -> None:
    """MPICH's k-ary tree as given edges is the registry's own shape where one exists."""
    pricer = LibraryPricer(SimPricer(LOGGOPS, "loggops"), "mpich")
    for k, same in ((1, "chain"), (2, "binary_tree"), (7, "flat_tree")):
        t, params = pricer.price("bcast", "tree", 8, 4096, {"tree_type": "kary", "k": k})
        assert params == {"tree_type": "kary", "k": k}
        assert t == simulate(REGISTRY.get("bcast", same).schedule(8, 0, 4096), "loggops", LOGGOPS).total
    edges = library_algorithm("mpich", "bcast", "tree").equivalent(8, 4096, {"tree_type": "kary", "k": 3})
    assert edges == ("given_tree", {"edges": ((0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (2, 7))})
    with pytest.raises(Unavailable, match="power-of-two"):
        pricer.price("allgather", "recursive_doubling", 6, 4096, {})
    # below a count of the largest power of two <= P MPICH falls back to binomial, and so does the price
    low, _ = pricer.price("reduce", "reduce_scatter_gather", 8, 4, {})
    assert low == simulate(REGISTRY.get("reduce", "binomial_tree").schedule(8, 0, 4), "loggops", LOGGOPS).total


def test_bad_library_rules_name_the_problem() -> None:
    good = every_mpich_table()
    data = json.loads(good.to_json())
    data["collectives"]["bcast"][0]["rules"][1]["algorithm"] = "binomial_tree"
    with pytest.raises(TableError, match="mpich has no bcast algorithm 'binomial_tree'"):
        parse_table(data, "t.json")
    data = json.loads(good.to_json())
    rule = next(r for r in data["collectives"]["bcast"][0]["rules"] if r["algorithm"] == "tree")
    rule["params"] = {"k": 2}
    with pytest.raises(TableError, match=r"parameters \['k'\] given, \['k', 'tree_type'\] expected"):
        parse_table(data, "t.json")


def test_cli_library_target(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "t.json"
    res = runner.invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "mpich", "--procs", "4",
                               "-c", "bcast", "--max-size", "64KiB", "-o", str(out), "--mpich-json",
                               str(tmp_path / "m.json"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["library"] == "mpich"
    assert "MPIR_Bcast_intra_" in (tmp_path / "m.json").read_text()
    for extra, problem in ((["--openmpi-rules", str(tmp_path / "o.rules")], "exports to mpich only"),
                           (["--method", "measure"], "not built yet")):
        res = runner.invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "mpich",
                                   "-o", str(tmp_path / "u.json"), *extra])
        assert res.exit_code == 2 and problem in res.output
        assert not (tmp_path / "u.json").exists()


def test_docs_list_the_catalogue() -> None:
    text = (Path(__file__).parent.parent / "docs" / "tune.md").read_text()
    assert catalogue_markdown("mpich") in text


@pytest.fixture(scope="module")
def every_mpich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("every-mpich")
    table = every_mpich_table()
    write_table(table, folder / "table.json")
    (folder / "mpich.json").write_text(json.dumps(mpich_json(table)[0]))
    return folder


@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_mpich_runs_every_algorithm_of_the_catalogue_correctly(every_mpich: Path, procs: int) -> None:
    env = {**os.environ, "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(every_mpich / "mpich.json"),
           "MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    rules = max(len(blocks[0].rules) for blocks in every_mpich_table().collectives.values())
    counts = ",".join(str(c) for c in [0] + [i * (RULE_STEP // 8) + 50 for i in range(rules)])  # int64: one per rule
    res = run_bounded([str(MPIEXEC), "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "library_check.py"),
                       counts], 300, f"library_check on {procs}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"library check passed: P={procs}" in res.stdout
