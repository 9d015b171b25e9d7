"""Tuning for a target library (``colltune tune --library mpich``): MPICH's own algorithms as the
candidates, priced by their registry equivalents, exported exactly as decided, read by MPICH."""

from __future__ import annotations

import json
import os
import re
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
from colltune.tune import NATIVE, Block, DecisionTable, Rule, build_table, read_table, write_table
from colltune.tune.export import environment, export_files, mpich_json, openmpi_rules
from colltune.tune.libraries import OPENMPI_ROOT_SIZED
from colltune.tune.library_bench import read_library_bench
from colltune.tune.promises import Promises
from colltune.tune.select import SimPricer
from colltune.tune.table import TableError, parse_table
from colltune.tune.targets import (
    MPICH_ALGORITHMS,
    TARGETS,
    LibraryPricer,
    LibrarySpace,
    catalogue_markdown,
    library_algorithm,
)

MPI_DIR = Path(__file__).parent / "mpi"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
LOGGOPS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, O=0.0, S=65536)


def every_mpich_table(procs: int = 8, procs_max: int = 64, library: str = "mpich",
                      promises: Promises | None = None) -> DecisionTable:
    """Every MPICH (or ``library``) algorithm colltune prices, each variant at ``procs`` ranks and
    64 KiB, and native, each owning RULE_STEP bytes, for 1..procs_max ranks; for a program that
    ``promises`` (none by default)."""
    promises = promises or Promises()
    colls: dict[str, tuple[Block, ...]] = {}
    for coll in ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier"):
        choices = [(NATIVE, {})] + [(name, v) for name in LibrarySpace(library, promises).names(coll)
                                    for v in TARGETS[library][(coll, name)].variants(procs, 65536)]
        if coll == "barrier":
            choices = choices[1:]
        rules = tuple(Rule(size_min=i * RULE_STEP, size_max=None if i + 1 == len(choices) else (i + 1) * RULE_STEP - 1,
                           algorithm=name, params=params) for i, (name, params) in enumerate(choices))
        colls[coll] = (Block(procs_min=1, procs_max=procs_max, tuned_at=(procs,), rules=rules),)
    return DecisionTable(method="model", provenance=Provenance(source="tests"), collectives=colls,
                         library=library, promises=promises)  # type: ignore[arg-type]


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
                if rule.algorithm == NATIVE or MPICH_ALGORITHMS[(coll, rule.algorithm)].composition:
                    continue  # MPICH's own tree; a composition goes in the device's file
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
    for extra, problem in ((["--openmpi-rules", str(tmp_path / "o.rules")], "exports to mpich only"),):
        res = runner.invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "mpich",
                                   "-o", str(tmp_path / "u.json"), *extra])
        assert res.exit_code == 2 and problem in res.output
        assert not (tmp_path / "u.json").exists()


def test_cli_open_mpi_target(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "t.json"
    res = runner.invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "openmpi", "--procs", "4",
                               "-c", "bcast", "-c", "alltoall", "--max-size", "64KiB", "-o", str(out),
                               "--openmpi-rules", str(tmp_path / "o.rules"), "--openmpi-json", str(tmp_path / "o.json")])
    assert res.exit_code == 0, res.output
    table = read_table(out)
    assert table.library == "openmpi"
    names = {r.algorithm for blocks in table.collectives.values() for r in blocks[0].rules}
    assert names <= {NATIVE, *(n for _, n in TARGETS["openmpi"])}
    assert json.loads((tmp_path / "o.json").read_text())["collectives"]["bcast"]
    res = runner.invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "openmpi",
                               "-o", str(tmp_path / "u.json"), "--mpich-json", str(tmp_path / "m.json")])
    assert res.exit_code == 2 and "exports to openmpi only" in res.output


def test_docs_list_the_catalogue() -> None:
    text = (Path(__file__).parent.parent / "docs" / "tune.md").read_text()
    assert catalogue_markdown("mpich") in text
    assert catalogue_markdown("openmpi") in text


@pytest.fixture(scope="module")
def every_mpich(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("every-mpich")
    table = every_mpich_table()
    write_table(table, folder / "table.json")
    for name, text in export_files("mpich_json", table, folder / "mpich.json")[0].items():
        Path(name).write_text(text)
    return folder


@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_mpich_runs_every_algorithm_of_the_catalogue_correctly(every_mpich: Path, procs: int) -> None:
    """Every container and composition, MPICH's nodes made up by its cliques (2 ranks each, so
    that a composition spans nodes), none falling back to another (``COLLECTIVE_FALLBACK=error``)."""
    env = {**os.environ, **environment("mpich_json", every_mpich / "mpich.json"),
           "MPIR_CVAR_NUM_CLIQUES": str(max(1, procs // 2)), "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    rules = max(len(blocks[0].rules) for blocks in every_mpich_table().collectives.values())
    counts = ",".join(str(c) for c in [0] + [i * (RULE_STEP // 8) + 50 for i in range(rules)])  # int64: one per rule
    res = run_bounded([str(MPIEXEC), "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "library_check.py"),
                       counts], 300, f"library_check on {procs}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"library check passed: P={procs}" in res.stdout


@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_forcing_runs_each_mpich_algorithm_and_switches_what_mpich_runs(procs: int) -> None:
    """MPICH's nodes made up by its cliques (2 ranks each): the compositions span nodes."""
    env = {**os.environ, "MPIR_CVAR_COLLECTIVE_FALLBACK": "error", "MPIR_CVAR_NUM_CLIQUES": str(max(1, procs // 2))}
    res = run_bounded([str(MPIEXEC), "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "forcing_check.py"),
                       "mpich", "4096"], 300, f"forcing_check on {procs}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"forcing check passed: mpich P={procs}" in res.stdout
    if procs & (procs - 1):
        assert "signature=error as forced" in res.stdout
    assert "not forceable=0" not in res.stdout or procs == 1  # the knomial tree variants cannot be forced


def hybrid_run(tmp_path: Path, procs: int, *extra: str, library: str = "mpich") -> tuple[object, DecisionTable | None]:
    out = tmp_path / "hybrid.json"
    export = ["--mpich-json", str(tmp_path / "m.json")] if library == "mpich" else ["--openmpi-rules",
                                                                                    str(tmp_path / "o.rules")]
    res = run_bounded([str(MPIEXEC), "-n", str(procs), sys.executable, "-m", "colltune", "tune", "--library", library,
                       "--profile", "builtin:ethernet-10g-tcp", "-c", "bcast", "-c", "allreduce", "--max-size", "2KiB",
                       "--reps", "2", "--warmup", "0", "-o", str(out), *export, *extra], 300,
                      f"tune --method hybrid on {procs}")
    return res, (read_table(out) if out.exists() else None)


def test_measure_times_every_forceable_mpich_algorithm(tmp_path: Path) -> None:
    res, table = hybrid_run(tmp_path, 2, "--method", "measure", "--max-size", "64")
    assert res.returncode == 0, res.stderr[-3000:]  # type: ignore[attr-defined]
    assert table is not None and table.method == "measure" and table.library == "mpich"
    sample = table.collectives["bcast"][0].samples[-1]
    assert {c.algorithm for c in sample.candidates} >= {NATIVE, "binomial", "tree", "pipelined_tree"}


@pytest.mark.parametrize("procs", (1, 3))
def test_hybrid_is_the_default_under_mpiexec_and_times_only_contenders(tmp_path: Path, procs: int) -> None:
    res, table = hybrid_run(tmp_path, procs)
    assert res.returncode == 0, res.stderr[-3000:]  # type: ignore[attr-defined]
    assert table is not None and table.method == "hybrid" and table.library == "mpich"
    # every count from 2 to the job's (1 in a job of one rank)
    assert [p for b in table.collectives["bcast"] for p in b.tuned_at] == (list(range(2, procs + 1)) or [1])
    note = table.provenance.notes[0]
    timed, pruned = (int(x) for x in re.search(r"(\d+) timings; (\d+) candidates not timed", note).groups())  # type: ignore[union-attr]
    assert timed > 0 and (pruned > 0 or procs == 1)  # the profile puts some algorithms far behind; at P = 1 all cost ~0
    for blocks in table.collectives.values():
        for rule in (r for b in blocks for r in b.rules):
            assert rule.algorithm == NATIVE or library_algorithm("mpich", "bcast" if rule.algorithm in {
                n for c, n in MPICH_ALGORITHMS if c == "bcast"} else "allreduce", rule.algorithm)
    assert json.loads((tmp_path / "m.json").read_text())
    assert "timed" in res.stderr  # type: ignore[attr-defined]  # progress as plain lines


def test_hybrid_refuses_process_counts_beyond_the_job_on_every_rank(tmp_path: Path) -> None:
    res, table = hybrid_run(tmp_path, 2, "--procs", "2,8")
    assert res.returncode == 2 and table is None  # type: ignore[attr-defined]
    assert res.stderr.count("--procs 8: the job has 2 processes") == 1  # type: ignore[attr-defined]


def test_forcing_runs_each_open_mpi_algorithm(openmpi_venv: Path) -> None:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", "3",
                       str(openmpi_venv / "bin" / "python"), "-m", "mpi4py", str(MPI_DIR / "forcing_check.py"),
                       "openmpi", "4096"], 300, "forcing_check under Open MPI", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "forcing check passed: openmpi P=3" in res.stdout


def test_open_mpi_reads_the_forcing_environment(openmpi_venv: Path) -> None:
    """``colltune bench --forced`` forces Open MPI through its coll/tuned variables (a rules file
    cannot carry a scatter or a binomial reduce): Open MPI reads each of them from the environment."""
    from colltune.tune.forcing import openmpi_forcing_environment

    choices = {"scatter": ("binomial", {}), "reduce": ("binomial", {"segsize": 0}), "allreduce": ("ring", {}),
               "bcast": ("pipeline", {"segsize": 8192}), "alltoall": ("linear_sync", {"max_requests": 4}),
               "barrier": ("bruck", {}), "gather": (NATIVE, {})}
    forced = openmpi_forcing_environment(choices)
    assert forced["OMPI_MCA_coll_tuned_scatter_algorithm"] == "2"
    assert forced["OMPI_MCA_coll_tuned_gather_algorithm"] == "0"
    assert forced["OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize"] == "8192"
    # coll/han, which takes these collectives where the communicator spans nodes, hands the whole
    # communicator to coll/tuned (3) for a forced algorithm, keeps its own (6) for native; it has no alltoall
    assert forced["OMPI_MCA_coll_han_bcast_dynamic_global_communicator_module"] == "3"
    assert forced["OMPI_MCA_coll_han_gather_dynamic_global_communicator_module"] == "6"
    assert not any(k.startswith("OMPI_MCA_coll_han_alltoall") for k in forced)
    env = {**os.environ, **forced, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", "2",
                       str(openmpi_venv / "bin" / "python"), "-m", "mpi4py", str(MPI_DIR / "forcing_env_check.py"),
                       json.dumps(choices)], 120, "forcing_env_check under Open MPI", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "forcing environment check passed: 7 collectives" in res.stdout


def han_table() -> DecisionTable:
    """A table for Open MPI's own algorithms with comm-size blocks that leave gaps and size rules
    that switch between coll/tuned algorithms and native."""
    binomial, chain = ("binomial", {"segsize": 0}), ("pipeline", {"segsize": 8192})

    def block(lo: int, hi: int, *rules: tuple[int, tuple[str, dict]]) -> Block:
        return Block(procs_min=lo, procs_max=hi, tuned_at=(hi,), rules=tuple(
            Rule(size_min=start, size_max=None if i + 1 == len(rules) else rules[i + 1][0] - 1, algorithm=a, params=pr)
            for i, (start, (a, pr)) in enumerate(rules)))

    colls = {"bcast": (block(2, 3, (0, (NATIVE, {})), (4096, binomial)),
                       block(4, 8, (0, binomial), (2048, chain), (65536, (NATIVE, {})))),
             "allgather": (block(5, 8, (0, ("ring", {}))),),
             "barrier": (block(2, 8, (0, ("bruck", {}))),),
             "alltoall": (block(2, 8, (0, ("pairwise", {}))),)}
    return DecisionTable(method="model", provenance=Provenance(source="tests"), collectives=colls,
                         library="openmpi")


#: What coll/han must read from :func:`han_table`'s export: (collective, comm size from, message
#: size from, component) for the whole communicator; no alltoall (HAN has none), every comm size
#: the table does not cover back to HAN.
HAN_EXPECTED = [("bcast", 1, 0, "han"), ("bcast", 2, 0, "han"), ("bcast", 2, 4096, "tuned"), ("bcast", 4, 0, "tuned"),
                ("bcast", 4, 65536, "han"), ("bcast", 9, 0, "han"),
                ("allgather", 1, 0, "han"), ("allgather", 5, 0, "tuned"), ("allgather", 9, 0, "han"),
                ("barrier", 1, 0, "han"), ("barrier", 2, 0, "tuned"), ("barrier", 9, 0, "han")]


def test_open_mpi_reads_the_han_rules_of_the_export(tmp_path: Path, openmpi_venv: Path) -> None:
    """Where a communicator spans nodes coll/han takes bcast, allgather, barrier, ... before
    coll/tuned: the export's ``FILE.han`` sends the whole communicator to coll/tuned (and so to
    the rules file) where the table names a tuned algorithm, and to HAN where it leaves the choice
    to Open MPI; Open MPI reads it as meant (its own dump of the rules it read)."""
    files, _ = export_files("openmpi_rules", han_table(), tmp_path / "ompi.rules")
    assert set(files) == {str(tmp_path / n) for n in ("ompi.rules", "ompi.rules.han", "ompi.rules.env")}
    for name, text in files.items():
        Path(name).write_text(text)
    env_file = dict(line.split("=", 1) for line in files[str(tmp_path / "ompi.rules.env")].splitlines())
    assert env_file["OMPI_MCA_coll_han_dynamic_rules_filename"] == str(tmp_path / "ompi.rules.han")
    env = {**os.environ, **env_file, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_coll_han_dump_dynamic_rules": "1", "OMPI_MCA_coll_han_verbose": "1"}
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", "1",
                       str(openmpi_venv / "bin" / "python"), "-c", "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"],
                      120, "Open MPI reading the export's coll/han rules", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    read = [(coll, int(conf), int(size), comp) for coll, level, conf, size, comp in re.findall(
        r"dump_dynamic_rules \d+ collective \d+ \((\w+)\) topology level \d+ \((\w+)\) configuration size (\d+) "
        r"message size (\d+) -> collective component \d+ \((\w+)\)", out) if level == "global_communicator"]
    assert read == HAN_EXPECTED


def test_an_open_mpi_export_without_han_collectives_writes_no_han_file(tmp_path: Path) -> None:
    table = han_table()
    only = table.model_copy(update={"collectives": {"alltoall": table.collectives["alltoall"]}})
    files, _ = export_files("openmpi_json", only, tmp_path / "ompi.json")
    assert set(files) == {str(tmp_path / "ompi.json"), str(tmp_path / "ompi.json.env")}
    assert "coll_han" not in files[str(tmp_path / "ompi.json.env")]


def test_open_mpi_runs_every_algorithm_of_its_catalogue_from_the_export(tmp_path: Path, openmpi_venv: Path) -> None:
    table = every_mpich_table(library="openmpi")
    rules, notes = openmpi_rules(table)
    assert notes == ["Open MPI: scatter is left to Open MPI's fixed rules: " + OPENMPI_ROOT_SIZED["scatter"][1]
                     + " (unless tuned with --uniform-scatter)"]
    # written as decided: the candidates are what a rules file can carry (a scatter has only native);
    # reduce and allreduce, checked below with a non-commutative operation, keep rank order
    (tmp_path / "ompi.rules").write_text(rules)
    lines = {tuple(line.split()) for line in rules.splitlines()}
    for coll in ("bcast",):  # sizes not scaled by P: every boundary reads back as decided
        for rule in table.collectives[coll][0].rules[1:]:
            number = TARGETS["openmpi"][(coll, rule.algorithm)].number
            row = (rule.size_min, number, 0, rule.params.get("segsize", 0), rule.params.get("max_requests", 0))
            assert tuple(str(v) for v in row) in lines, (coll, rule)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_dynamic_rules_filename": str(tmp_path / "ompi.rules")}
    rules_count = max(len(blocks[0].rules) for blocks in table.collectives.values())
    counts = ",".join(str(c) for c in [0] + [i * (RULE_STEP // 8) + 50 for i in range(rules_count)])
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", "3",
                       str(openmpi_venv / "bin" / "python"), "-m", "mpi4py", str(MPI_DIR / "library_check.py"),
                       counts], 400, "library_check under Open MPI", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "library check passed: P=3" in res.stdout


def test_hybrid_for_open_mpi_refuses_an_mpich_job(tmp_path: Path) -> None:
    res, table = hybrid_run(tmp_path, 2, library="openmpi")
    assert res.returncode == 2 and table is None  # type: ignore[attr-defined]
    assert res.stderr.count("needs Open MPI; this job runs MPICH") == 1  # type: ignore[attr-defined]


def test_mpich_export_never_writes_comm_size_less_than() -> None:
    """MPICH 5.0's selection search reads ``comm_size<N`` as ``<=`` below a message-size test
    (export.mpich_default), so the export writes ``comm_size<=N-1`` everywhere."""
    for library in ("mpich", "colltune"):
        table = every_mpich_table() if library == "mpich" else build_table(
            SimPricer(load_profile("builtin:ethernet-10g-tcp").params("loggp"), "loggops"), "simulate",
            ["bcast", "alltoall", "allgather"], [4, 8], 1 << 16, Provenance(source="tests"))
        text = json.dumps(mpich_json(table)[0])
        assert re.search(r"comm_size<\d", text) is None
        assert "comm_size<=7" in text


def test_library_defaults_name_the_librarys_own_parameter_values() -> None:
    mpich, ompi = LibrarySpace("mpich"), LibrarySpace("openmpi")
    assert mpich.library_default("bcast", "pipelined_tree", {"tree_type": "kary", "k": 1, "chunk_size": 8192})
    assert not mpich.library_default("bcast", "pipelined_tree", {"tree_type": "kary", "k": 1, "chunk_size": 4096})
    assert not mpich.library_default("bcast", "binomial", {}) and not mpich.library_default("bcast", NATIVE, {})
    assert ompi.library_default("bcast", "binomial", {"segsize": 0})
    assert {"chunk_size": 8192} in [{"chunk_size": v["chunk_size"]} for v in
                                    mpich.combos("bcast", "pipelined_tree", 8, 16384)]


def test_open_mpi_candidates_are_what_a_rules_file_can_carry() -> None:
    """A rules file cannot tell a non-commutative operation nor the root's scatter count from the
    others', so the tuner for Open MPI never decides what the export could not write; the catalogue
    keeps those algorithms (benchmarks force them) and a table naming one is refused."""
    ompi = LibrarySpace("openmpi")
    assert ompi.names("scatter") == []
    assert ompi.names("reduce") == ["linear", "rabenseifner"]
    assert ompi.names("allreduce") == ["nonoverlapping", "recursive_doubling", "rabenseifner"]
    assert ompi.names("bcast") == [n for c, n in TARGETS["openmpi"] if c == "bcast"]
    assert {("reduce", "binomial"), ("allreduce", "ring"), ("scatter", "binomial")} <= set(TARGETS["openmpi"])
    assert LibrarySpace("mpich").names("scatter") == [n for c, n in TARGETS["mpich"] if c == "scatter"]
    for coll, name, params in (("reduce", "binomial", {"segsize": 0}), ("allreduce", "ring", {}),
                               ("scatter", "binomial", {})):
        rule = Rule(size_min=0, size_max=None, algorithm=name, params=params)
        table = DecisionTable(method="model", provenance=Provenance(source="tests"), library="openmpi",  # type: ignore[arg-type]
                              collectives={coll: (Block(procs_min=2, procs_max=8, tuned_at=(8,), rules=(rule,)),)})
        with pytest.raises(TableError, match=f"Open MPI {coll}/{name} cannot go in a rules file"):
            openmpi_rules(table)


def test_a_commutative_program_lets_open_mpi_files_carry_out_of_order_reductions(tmp_path: Path) -> None:
    """``tune --commutative``: the table says so, the tuner for Open MPI chooses among the reductions
    that combine out of rank order too, and the export writes them (scatter stays with Open MPI)."""
    ompi = LibrarySpace("openmpi", Promises(commutative=True))
    assert ompi.names("reduce") == [n for c, n in TARGETS["openmpi"] if c == "reduce"]
    assert ompi.names("allreduce") == [n for c, n in TARGETS["openmpi"] if c == "allreduce"]
    assert ompi.names("scatter") == []
    block = (Block(procs_min=2, procs_max=8, tuned_at=(8,), rules=(
        Rule(size_min=0, size_max=None, algorithm="binomial", params={"segsize": 0}),)),)
    own = DecisionTable(method="model", provenance=Provenance(source="tests"), library="openmpi",  # type: ignore[arg-type]
                        collectives={"reduce": block}, promises=Promises(commutative=True))
    assert "\n0 5 0 0 0\n" in openmpi_rules(own)[0]
    ring = (Block(procs_min=2, procs_max=8, tuned_at=(8,), rules=(
        Rule(size_min=0, size_max=None, algorithm="ring", params={"segment_size": 8192}),)),)
    for commutative, row in ((True, "\n0 5 0 8192 0\n"), (False, "\n0 0 0 0 0\n")):
        ours = DecisionTable(method="model", provenance=Provenance(source="tests"),  # type: ignore[arg-type]
                             collectives={"allreduce": ring}, promises=Promises(commutative=commutative))
        text, notes = openmpi_rules(ours)
        assert row in text and any("fixed rules" in n for n in notes) is not commutative
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "openmpi",
                                    "--commutative", "--procs", "8", "-c", "reduce", "-c", "allreduce", "--max-size",
                                    "1MiB", "-o", str(out), "--openmpi-rules", str(tmp_path / "o.rules")])
    assert res.exit_code == 0, res.output
    table = read_table(out)
    assert table.promises == Promises(commutative=True)
    assert table.provenance.source.endswith("--library openmpi --commutative")
    chosen = {(c, r.algorithm) for c, blocks in table.collectives.items() for r in blocks[0].rules}
    assert chosen - {("reduce", "linear"), ("reduce", "rabenseifner"), ("allreduce", "nonoverlapping"),
                     ("allreduce", "recursive_doubling"), ("allreduce", "rabenseifner"), ("reduce", NATIVE),
                     ("allreduce", NATIVE)}, chosen  # something only a commutative program may run
    assert openmpi_rules(table)[0] == (tmp_path / "o.rules").read_text()


def scatter_table(library: str, promises: Promises, first: str, then: str) -> DecisionTable:
    """A scatter table for 2-8 ranks: ``first`` below 1024 bytes a block, ``then`` from there."""
    rules = (Rule(size_min=0, size_max=1023, algorithm=first), Rule(size_min=1024, size_max=None, algorithm=then))
    return DecisionTable(method="model", provenance=Provenance(source="tests"), library=library,  # type: ignore[arg-type]
                         collectives={"scatter": (Block(procs_min=2, procs_max=8, tuned_at=(8,), rules=rules),)},
                         promises=promises)


def test_a_uniform_scatter_lets_open_mpi_files_carry_scatter_rules(tmp_path: Path) -> None:
    """``tune --uniform-scatter``: the program passes MPI_Scatter the root's send count on every
    rank, so Open MPI (which sizes a scatter from each rank's own) finds the same rule everywhere;
    the tuner for Open MPI then chooses among its scatter algorithms, the table says so, and the
    export writes them, sized as Open MPI sizes a scatter (the whole buffer, P times the block)."""
    uniform = Promises(uniform_scatter=True)
    assert LibrarySpace("openmpi", uniform).names("scatter") == [n for c, n in TARGETS["openmpi"] if c == "scatter"]
    assert LibrarySpace("openmpi", uniform).names("reduce") == ["linear", "rabenseifner"]  # one promise, not both
    text, notes = openmpi_rules(scatter_table("openmpi", uniform, "binomial", "basic_linear"))
    for procs in range(2, 9):  # a communicator block per P: its size, 2 rules, the rules
        assert f"\n{procs}\n2\n0 2 0 0 0\n{1024 * procs} 1 0 0 0\n" in text, procs
    assert notes == []
    with pytest.raises(TableError, match="Open MPI scatter/binomial cannot go in a rules file"):
        openmpi_rules(scatter_table("openmpi", Promises(), "binomial", "basic_linear"))
    # colltune's own scatter algorithms, exported as Open MPI's nearest: written only where promised
    ours, notes = openmpi_rules(scatter_table("colltune", uniform, "binomial_tree", "flat_tree"))
    assert "\n0 2 0 0 0\n8192 1 0 0 0\n" in ours and not any("fixed rules" in n for n in notes)
    ours, notes = openmpi_rules(scatter_table("colltune", Promises(), "binomial_tree", "flat_tree"))
    assert "# scatter" not in ours and notes[0].startswith("Open MPI: scatter is left to Open MPI's fixed rules")
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--library", "openmpi",
                                    "--uniform-scatter", "--procs", "8", "-c", "scatter", "--max-size", "64KiB",
                                    "-o", str(out), "--openmpi-rules", str(tmp_path / "o.rules")])
    assert res.exit_code == 0, res.output
    table = read_table(out)
    assert table.promises == uniform and table.provenance.source.endswith("--library openmpi --uniform-scatter")
    assert openmpi_rules(table)[0] == (tmp_path / "o.rules").read_text()
    assert "# scatter" in (tmp_path / "o.rules").read_text()


def test_a_table_written_before_the_promises_were_grouped_keeps_its_commutative_promise(tmp_path: Path) -> None:
    table = scatter_table("colltune", Promises(commutative=True), "binomial_tree", "flat_tree")
    old = json.loads(table.to_json())
    old["commutative"] = old.pop("promises")["commutative"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert read_table(tmp_path / "old.json") == table
    old["promises"] = {"commutative": True}
    (tmp_path / "both.json").write_text(json.dumps(old))
    with pytest.raises(TableError, match="commutative"):
        read_table(tmp_path / "both.json")


def test_open_mpi_runs_each_scatter_rule_of_a_uniform_scatter_file_on_every_rank(tmp_path: Path,
                                                                                  openmpi_venv: Path) -> None:
    """The C client passes the root's count to MPI_Scatter on every rank (as ``--uniform-scatter``
    promises): under a rules file that gives each of Open MPI's scatter algorithms a range of
    sizes, every size on either side of each boundary runs to the end on 3 ranks."""
    table = every_mpich_table(library="openmpi", promises=Promises(uniform_scatter=True))
    scatter = table.collectives["scatter"][0].rules
    assert [r.algorithm for r in scatter] == [NATIVE, "basic_linear", "binomial", "linear_nb"]
    write_table(table.model_copy(update={"collectives": {"scatter": table.collectives["scatter"]}}), tmp_path / "t.json")
    sizes = sorted({s for r in scatter[1:] for s in (r.size_min - 1, r.size_min)})
    out = tmp_path / "lib.json"
    res = run_bounded([sys.executable, "-m", "colltune", "bench", "--library", "openmpi", "--table",
                       str(tmp_path / "t.json"), "-n", "3", "--sizes", ",".join(map(str, sizes)), "--reps", "3",
                       "--rounds", "1", "--min-time", "0", "-c", "scatter", "--mpicc",
                       str(openmpi_venv / "bin" / "mpicc"), "--mpiexec", str(openmpi_venv / "bin" / "mpirun"),
                       "-o", str(out)], 240, "colltune bench --library openmpi (scatter rules)")
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(c.size for c in read_library_bench(out).cells) == sizes


@pytest.mark.parametrize("algorithm", ["flat_tree", "binary_tree", "knomial_tree", "flat_tree_segmented",
                                       "binomial_tree_segmented", "chain_segmented"])
def test_mpich_trees_are_exported_as_colltune_runs_them(algorithm: str) -> None:
    """colltune's tree broadcasts start every send of a rank at once (a send waits only for the
    data it forwards) and post all receives first, so MPICH's tree containers must be told to do
    the same (is_non_blocking 1, recv_pre_posted 1): with 0 MPICH sends to one child after another."""
    from colltune.schedule import Kind
    from colltune.tune.libraries import MPICH

    procs = 6
    sched = REGISTRY.get("bcast", algorithm).schedule(procs, 0, 64 << 10)
    root_sends = [i for i in sched.ops_of(0) if sched.kind[i] == Kind.SEND]
    assert len(root_sends) > 1 and all(len(sched.requires(i)) == 0 for i in root_sends)
    container = MPICH[("bcast", algorithm)]
    assert container.exact and container.params["is_non_blocking"] == 1
    if container.name == "pipelined_tree":
        assert container.params["recv_pre_posted"] == 1
    from colltune.tune.targets import MPICH_ALGORITHMS
    for name in ("tree", "pipelined_tree"):
        assert MPICH_ALGORITHMS[("bcast", name)].fixed["is_non_blocking"] == 1


def test_a_composition_goes_in_the_device_file_and_a_container_in_the_network_only_composition() -> None:
    """bcast: MPICH's own choice up to 1 KiB, the node-aware composition up to 64 KiB, the
    binomial container above; reduce: the composition, guarded for non-commutative operations."""
    from colltune.tune.export import mpich_ch4_default, mpich_ch4_json, mpich_default

    rules = (Rule(size_min=0, size_max=1023, algorithm=NATIVE), Rule(size_min=1024, size_max=65535,
             algorithm="composition_alpha"), Rule(size_min=65536, size_max=None, algorithm="binomial"))
    table = DecisionTable(method="model", provenance=Provenance(source="tests"), library="mpich", collectives={
        "bcast": (Block(procs_min=8, procs_max=8, tuned_at=(8,), rules=rules),),
        "reduce": (Block(procs_min=8, procs_max=8, tuned_at=(8,), rules=(
            Rule(size_min=0, size_max=None, algorithm="composition_alpha"),)),)})
    ch4 = mpich_ch4_json(table)
    bcast = ch4["collective=bcast"]["comm_type=intra"]
    assert bcast["comm_size<=7"] == bcast["comm_size=any"] == mpich_ch4_default("bcast")  # other sizes: MPICH's
    assert bcast["comm_size<=8"] == {
        "avg_msg_size<=1023": mpich_ch4_default("bcast"),
        "avg_msg_size<=65535": {"comm_hierarchy=parent": {"composition=MPIDI_Bcast_intra_composition_alpha": {}},
                                "comm_hierarchy=any": {"composition=MPIDI_Bcast_intra_composition_gamma": {}}},
        "avg_msg_size=any": {"composition=MPIDI_Bcast_intra_composition_gamma": {}}}
    reduce = ch4["collective=reduce"]["comm_type=intra"]["comm_size<=8"]["avg_msg_size=any"]
    assert reduce == {"comm_hierarchy=parent": {
        "is_commutative=yes": {"composition=MPIDI_Reduce_intra_composition_alpha": {}},
        "is_commutative=no": {"composition=MPIDI_Reduce_intra_composition_gamma": {}}},
        "comm_hierarchy=any": {"composition=MPIDI_Reduce_intra_composition_gamma": {}}}
    # the collectives colltune does not decide keep MPICH's default compositions
    assert ch4["collective=alltoall"]["comm_type=intra"]["comm_size=any"] == {
        "composition=MPIDI_Alltoall_intra_composition_beta": {}}
    assert ch4["collective=allgatherv"] == {"comm_type=intra": {"composition=MPIDI_Allgatherv_intra_composition_alpha": {}}}
    # the MPIR file: MPICH's own algorithms inside the composition, the container where it was chosen
    mpir = mpich_json(table)[0]["collective=bcast"]["comm_type=intra"]["comm_size<=8"]
    assert mpir["avg_msg_size<=65535"] == mpich_default("bcast")
    assert mpir["avg_msg_size=any"] == {"algorithm=MPIR_Bcast_intra_binomial": {}}


def test_native_is_mpichs_node_aware_composition_where_ranks_share_hosts() -> None:
    from colltune.tune.native import native_equivalent, native_on_hosts

    shared, apart = (0, 0, 1, 1, 2, 2, 3, 3), tuple(range(8))
    assert native_on_hosts("bcast", shared, 65536) == ("hierarchical", {"inter": "binomial_tree",
                                                                        "intra": "binomial_tree"})
    assert native_on_hosts("allreduce", shared, 65536)[1]["inter"] == native_equivalent("allreduce", 4, 65536)[0]
    assert native_on_hosts("barrier", shared, 0)[0] == "hierarchical"
    for coll in ("gather", "scatter", "allgather", "alltoall"):  # network-only compositions
        assert native_on_hosts(coll, shared, 4096) == native_equivalent(coll, 8, 4096)
    for hosts in (apart, (0,) * 8):  # one rank a host, or one host: no composition to speak of
        assert native_on_hosts("bcast", hosts, 65536) == native_equivalent("bcast", 8, 65536)
    sixteen = tuple(r // 2 for r in range(16))  # 2^k ranks: the flat broadcast from 512 KiB
    assert native_on_hosts("bcast", sixteen, 1 << 20) == native_equivalent("bcast", 16, 1 << 20)
    assert native_on_hosts("bcast", sixteen, 1 << 16)[0] == "hierarchical"
    # the simulator prices native so where its topology's ranks share hosts
    profile = load_profile("builtin:ethernet-10g-tcp")
    from colltune.sim import star

    topology = star(4, 1.25e9, 5e-6).placed(2)
    on_hosts = SimPricer(profile.params("loggp"), "loggops", topology)
    assert on_hosts.price("bcast", NATIVE, 8, 65536, {}) == on_hosts.price(
        "bcast", "hierarchical", 8, 65536, {"inter": "binomial_tree", "intra": "binomial_tree"})
