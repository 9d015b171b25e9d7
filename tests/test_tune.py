"""Decision tables: building, boundaries, the file format, the exports, and both MPI libraries
reading the exports in real mpiexec runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import RULE_STEP, every_algorithm_table, run_bounded

from colltune.algorithms import REGISTRY
from colltune.cli import main
from colltune.profiles import load_profile
from colltune.profiles.format import Provenance
from colltune.tune import NATIVE, ModelPricer, TableError, Tuner, build_table, read_table, write_table
from colltune.tune.export import (
    MAX_PER_PROCS,
    MPICH_AVG,
    environment,
    export_files,
    libraries_markdown,
    mpich_json,
    mpich_text,
    openmpi_json,
    openmpi_rules,
)
from colltune.tune.libraries import OPENMPI, OPENMPI_IDS, OPENMPI_ROOT_SIZED, openmpi_rule_problem
from colltune.tune.table import fixed_table
from colltune.tune.ties import PREDICTED_TIE, keeps_native, load

MPI_DIR = Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
PROFILE = load_profile("builtin:ethernet-10g-tcp")
PRICER = ModelPricer(PROFILE.models.hockney, "hockney")
COLLS = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier")


@pytest.fixture(scope="module")
def table():
    return build_table(PRICER, "model", COLLS, [2, 3, 4, 8, 16], 1 << 20, Provenance(source="tests"),
                       model="hockney", profile=PROFILE.name)


def test_table_round_trips_through_its_file(table, tmp_path):
    write_table(table, tmp_path / "t.json")
    back = read_table(tmp_path / "t.json")
    assert back == table
    assert json.loads((tmp_path / "t.json").read_text())["version"] == 1


def near(x: float, y: float) -> bool:
    """Whether two predicted times (s) are a near-tie (colltune.tune.ties)."""
    return max(x, y) <= min(x, y) * (1 + PREDICTED_TIE)


def test_every_boundary_is_the_exact_crossover_of_the_two_candidates(table):
    """At a bisected boundary a fresh tuner's choice is the rule above, and one byte below it the
    rule below; where the two are not a near-tie (colltune.tune.ties) and neither is native, the
    one above is predicted faster at the boundary and the one below one byte below it (or there
    a near-tie that it won by its lighter network load); where one
    is native, it holds its side of the boundary within the near-tie and not the other."""
    crossings = ties = 0
    for coll, blocks in table.collectives.items():
        for block in blocks:
            t = Tuner(PRICER, coll, block.tuned_at[0], load=load)
            for below, above in zip(block.rules, block.rules[1:]):
                edge = above.size_min
                # a size exactly on the boundary belongs to the rule above, one byte less to the one below
                assert table.lookup(coll, block.procs_min, edge) == (above.algorithm, above.params)
                assert table.lookup(coll, block.procs_min, edge - 1) == (below.algorithm, below.params)
                if above.crossover is None:
                    continue
                a = (below.algorithm, tuple(sorted(below.params.items())))
                b = (above.algorithm, tuple(sorted(above.params.items())))
                assert t.winner(edge) == b and t.winner(edge - 1) == a
                crossings += 1
                if NATIVE in (a[0], b[0]):  # native holds a size unless predicted far behind (keeps_native)
                    other = b if a[0] == NATIVE else a
                    holds = [keeps_native(t.time((NATIVE, ()), s), t.time(other, s)) for s in (edge - 1, edge)]
                    assert holds == ([True, False] if a[0] == NATIVE else [False, True])
                elif not near(t.time(a, edge), t.time(b, edge)):
                    assert t.time(b, edge) < t.time(a, edge)
                    # below: faster, or in a near-tie that it won by its lighter load (ties.load)
                    assert t.time(a, edge - 1) <= t.time(b, edge - 1) or near(t.time(a, edge - 1), t.time(b, edge - 1))
                else:
                    ties += 1
    assert crossings >= 10 and ties < crossings


def test_native_is_never_predicted_slower_than_the_choice(table):
    for blocks in table.collectives.values():
        for block in blocks:
            for sample in block.samples:
                best = sample.candidates[0] if sample.candidates else None
                native = [c for c in sample.candidates if c.algorithm == NATIVE]
                chosen = block.rule(sample.size)
                if native and chosen.algorithm != NATIVE:
                    assert best is not None and best.time < native[0].time


def test_lookup_outside_the_table_is_native(table):
    assert table.lookup("bcast", 1, 100) == (NATIVE, {})
    assert table.lookup("bcast", 17, 100) == (NATIVE, {})


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=2), "version: 2 is not supported"),
    (lambda d: d["collectives"]["bcast"][0]["rules"][0].update(algorithm="nope"), "unknown bcast algorithm 'nope'"),
    (lambda d: d["collectives"]["bcast"][0]["rules"][0].update(size_min=5), "must start at size 0"),
    (lambda d: d["collectives"].update(wave=[]), "unknown collective 'wave'"),
])
def test_a_bad_table_file_names_the_problem(table, tmp_path, change, message):
    data = json.loads(table.to_json())
    change(data)
    (tmp_path / "t.json").write_text(json.dumps(data))
    with pytest.raises(TableError, match=re.escape(message)):
        read_table(tmp_path / "t.json")


def parse_openmpi_classic(text: str) -> dict[int, list[tuple[int, list[tuple[int, int, int, int, int]]]]]:
    """An independent reader of the classic coll/tuned grammar: an optional rule-file-version-N
    header, then integers (decimal, no leading zero) with # comments to end of line:
    NCOLL { COLLID NCOMM { COMMSIZE NMSG { MSGSIZE ALG FANINOUT SEGSIZE [MAXREQ] } } }."""
    lines = text.splitlines()
    version = 1
    if lines and lines[0].startswith("rule-file-version-"):
        version = int(lines.pop(0).removeprefix("rule-file-version-"))
    tokens = []
    for line in lines:
        for tok in line.split("#")[0].split():
            assert re.fullmatch(r"0|[1-9][0-9]*", tok), f"not a plain decimal integer: {tok!r}"
            tokens.append(int(tok))
    it = iter(tokens)
    width = 5 if version >= 2 else 4
    out = {}
    for _ in range(next(it)):
        coll = next(it)
        comms = []
        for _ in range(next(it)):
            size = next(it)
            rules = [tuple(next(it) for _ in range(width)) for _ in range(next(it))]
            assert rules[0][0] == 0, "message rules must start at 0"
            assert [r[0] for r in rules] == sorted({r[0] for r in rules}), "message sizes must ascend"
            comms.append((size, rules))
        assert [c[0] for c in comms] == sorted({c[0] for c in comms}), "comm sizes must ascend"
        out[coll] = comms
    assert next(it, None) is None, "trailing numbers"
    return out


def test_openmpi_rules_read_back_give_the_table_decisions(table):
    text, notes = openmpi_rules(table)
    parsed = parse_openmpi_classic(text)
    ids = {v: k for k, v in OPENMPI_IDS.items()}
    assert {ids[c] for c in parsed} == set(COLLS) - set(OPENMPI_ROOT_SIZED)
    for cid, comms in parsed.items():
        coll = ids[cid]
        for procs in range(2, 18):
            comm = [rules for size, rules in comms if size <= procs][-1]
            scale = procs if coll in ("allgather", "alltoall", "gather", "scatter") else 0 if coll == "barrier" else 1
            for m in (0, 1, 100, 5000, 70000, 1 << 20):
                rule = [r for r in comm if r[0] <= m * scale][-1]
                alg, params = table.lookup(coll, procs, m)
                want = 0 if alg == NATIVE else OPENMPI[(coll, alg)].number
                if openmpi_rule_problem(coll, want):
                    assert any(n.startswith(f"Open MPI: {coll}/{alg} would be ") for n in notes)
                    want = 0  # combines out of rank order: left to Open MPI's fixed rules
                assert rule[1] == want, (coll, procs, m, rule, alg)
                if want and OPENMPI[(coll, alg)].segsize_from:
                    assert rule[3] == params["segment_size"]
    assert any("has no exact equivalent" in n for n in notes) or all(
        OPENMPI[(c, r.algorithm)].exact for c, bl in table.collectives.items() for b in bl for r in b.rules
        if r.algorithm != NATIVE and c not in OPENMPI_ROOT_SIZED)


def test_openmpi_json_has_explicit_ranges(table):
    tree, _ = openmpi_json(table)
    for comms in tree["collectives"].values():
        for c in comms:
            assert c["comm_size_min"] <= c["comm_size_max"]
            for r in c["rules"]:
                assert r["msg_size_min"] <= r.get("msg_size_max", r["msg_size_min"])


def _walk(node, path=()):
    for key, sub in node.items():
        yield path + (key,)
        yield from _walk(sub, path + (key,))


def test_mpich_json_covers_every_collective_and_uses_avg_size_only_where_defined(table):
    tree, _ = mpich_json(table)
    for name in ("bcast", "allreduce", "ibcast", "scatterv", "neighbor_alltoallw", "ireduce_scatter_block"):
        assert f"collective={name}" in tree
    for path in _walk(tree):
        coll = path[0].removeprefix("collective=")
        if any(k.startswith("avg_msg_size") for k in path):
            assert coll in MPICH_AVG, path
        leaf = path[-1]
        if leaf.startswith("algorithm="):
            assert leaf.startswith(("algorithm=MPIR_", "algorithm=MPIDI_")), leaf


def test_tune_cli_writes_table_and_exports(tmp_path):
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--procs", "2-5",
                                    "--max-size", "64KiB", "-o", str(out), "--openmpi-rules", str(tmp_path / "r"),
                                    "--mpich-json", str(tmp_path / "m.json"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert read_table(out).collectives.keys() == set(COLLS)
    assert parse_openmpi_classic((tmp_path / "r").read_text())
    assert "collective=bcast" in json.loads((tmp_path / "m.json").read_text())
    assert any("Open MPI: scatter is left" in n for n in summary["notes"])
    # beside each export, the environment that makes its library read it
    assert (tmp_path / "m.json.env").read_text() == (
        f"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE={tmp_path / 'm.json'}\n"
        f"MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE={tmp_path / 'm.json.ch4.json'}\n")
    ch4 = json.loads((tmp_path / "m.json.ch4.json").read_text())  # the device's compositions
    assert "composition=MPIDI_Bcast_intra_composition_gamma" in json.dumps(ch4["collective=bcast"])
    assert (tmp_path / "r.env").read_text() == (
        f"OMPI_MCA_coll_tuned_use_dynamic_rules=1\nOMPI_MCA_coll_tuned_dynamic_rules_filename={tmp_path / 'r'}\n"
        f"OMPI_MCA_coll_han_use_dynamic_file_rules=1\nOMPI_MCA_coll_han_dynamic_rules_filename={tmp_path / 'r.han'}\n")
    assert (tmp_path / "r.han").read_text().splitlines()[2:6] == ["6", "bcast", "1", "global_communicator"]


def test_tune_cli_rejects_bad_input(tmp_path):
    res = CliRunner().invoke(main, ["tune", "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and "needs --profile" in res.output
    res = CliRunner().invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "--procs", "x",
                                    "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and "--procs" in res.output
    res = CliRunner().invoke(main, ["tune", "--profile", "builtin:ethernet-10g-tcp", "-o", str(tmp_path / "no" / "t")])
    assert res.exit_code == 2 and "does not exist" in res.output
    assert not (tmp_path / "t.json").exists()


def test_the_library_map_doc_is_current_and_lists_every_algorithm():
    doc = (Path(__file__).parent.parent / "docs" / "libraries.md").read_text()
    assert doc == libraries_markdown(), "regenerate with: colltune libraries-doc > docs/libraries.md"
    rows = {(section.split()[0], alg, int(number))
            for section in re.split(r"^## ", doc, flags=re.MULTILINE)[1:]
            for alg, number in re.findall(r"^\| `(\w+)` \| (\d+) `", section, re.MULTILINE)}
    assert rows == {(c, a, o.number) for (c, a), o in OPENMPI.items()}
    assert {(c, a) for c, a, _ in rows} == {(a.collective, a.name) for a in REGISTRY}


# ---- under MPI --------------------------------------------------------------------------------

needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')")
LIBRARY_COUNTS = ",".join(str(c) for c in [0] + [i * (RULE_STEP // 8) + 50 for i in range(15)])


@pytest.fixture(scope="module")
def every(tmp_path_factory):
    folder = tmp_path_factory.mktemp("every")
    t = every_algorithm_table()
    write_table(t, folder / "table.json")
    for name, text in export_files("mpich_json", t, folder / "mpich.json")[0].items():
        Path(name).write_text(text)
    (folder / "ompi.rules").write_text(openmpi_rules(t)[0])
    return folder


@needs_mpi
@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_auto_runs_the_tables_algorithm_and_matches_native(every, procs):
    res = run_bounded([MPIEXEC, "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "auto_check.py"),
                       str(every / "table.json")], 300, f"auto_check on {procs}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"auto_check: P={procs}: 148 calls" in res.stdout


@needs_mpi
@pytest.mark.parametrize("procs", (1, 2, 3, 5))
def test_the_in_order_check_gives_back_the_same_rules_on_every_rank(procs):
    res = run_bounded([MPIEXEC, "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "in_order_check.py")],
                      300, f"in_order_check on {procs}")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"in-order check passed: P={procs}" in res.stdout


@needs_mpi
@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_mpich_reads_the_exported_json_for_every_collective(every, procs):
    """Both files of the export, MPICH's nodes made up by its cliques (2 ranks each) so that the
    device's node-aware compositions run too."""
    env = {**os.environ, **environment("mpich_json", every / "mpich.json"), "MPIR_CVAR_NUM_CLIQUES": str(max(1, procs // 2)),
           "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    res = run_bounded([MPIEXEC, "-n", str(procs), sys.executable, "-m", "mpi4py", str(MPI_DIR / "library_check.py"),
                       LIBRARY_COUNTS], 300, f"library_check on {procs}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"library check passed: P={procs}" in res.stdout


@needs_mpi
def test_mpich_really_reads_the_file(every, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"collective=bcast": {"algorithm=MPIR_Bcast_intra_nonexistent": {}}}))
    env = {**os.environ, "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(bad)}
    res = run_bounded([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", str(MPI_DIR / "library_check.py"), "1"],
                      120, "library_check with a bad file", env=env)
    assert res.returncode != 0 and "unrecognized key" in res.stderr + res.stdout
    bad.write_text(json.dumps({"collective=bcast": {"composition=MPIDI_Bcast_intra_composition_nonexistent": {}}}))
    env = {**os.environ, "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE": str(bad)}  # and the device's
    res = run_bounded([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", str(MPI_DIR / "library_check.py"), "1"],
                      120, "library_check with a bad ch4 file", env=env)
    assert res.returncode != 0 and "unrecognized key composition=MPIDI_Bcast" in res.stderr + res.stdout


def _ompi(venv: Path, procs: int, rules: Path, counts: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return run_bounded([str(venv / "bin" / "mpirun"), "--oversubscribe", "-n", str(procs),
                        "--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_dynamic_rules_filename",
                        str(rules), str(venv / "bin" / "python"), "-m", "mpi4py", str(MPI_DIR / "library_check.py"),
                        counts], 300, f"Open MPI library_check on {procs}", env=env)


@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_open_mpi_reads_the_exported_rules(every, openmpi_venv, procs):
    res = _ompi(openmpi_venv, procs, every / "ompi.rules", LIBRARY_COUNTS)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert f"library check passed: P={procs}" in res.stdout


def test_open_mpi_really_reads_the_rules(openmpi_venv, tmp_path):
    bad = tmp_path / "bad.rules"
    bad.write_text("rule-file-version-2\n1\n7\n1\n1\n1\n0 99 0 0 0\n")  # bcast algorithm 99 does not exist
    res = _ompi(openmpi_venv, 2, bad, "1")
    assert res.returncode != 0


@needs_mpi
@pytest.mark.parametrize("procs", (2, 3))
def test_measure_tunes_inside_the_job(tmp_path, procs):
    out = tmp_path / "m.json"
    res = run_bounded([MPIEXEC, "-n", str(procs), sys.executable, "-m", "colltune", "tune", "--method", "measure",
                       "-c", "bcast", "-c", "barrier", "--max-size", "4KiB", "--reps", "3", "-o", str(out),
                       "--mpich-json", str(tmp_path / "m.mpich.json")], 300, "tune --method measure")
    assert res.returncode == 0, res.stderr[-3000:]
    t = read_table(out)
    assert t.method == "measure" and t.provenance.procs == procs
    # every count from 2 to the job's, each timed on that many ranks
    blocks = t.collectives["bcast"]
    assert [p for b in blocks for p in b.tuned_at] == list(range(2, procs + 1))
    assert (blocks[0].procs_min, blocks[-1].procs_max) == (2, procs)
    samples = [s for b in blocks for s in b.samples]
    assert sorted({s.procs for s in samples}) == list(range(2, procs + 1))
    assert all(c.time > 0 for s in samples for c in s.candidates if s.size > 0)
    assert (tmp_path / "m.mpich.json").exists()


@needs_mpi
def test_measure_tunes_the_counts_asked_for_and_refuses_one_beyond_the_job(tmp_path):
    out = tmp_path / "m.json"
    res = run_bounded([MPIEXEC, "-n", "3", sys.executable, "-m", "colltune", "tune", "--method", "measure",
                       "-c", "barrier", "--procs", "1,3", "-o", str(out)], 120, "tune --method measure --procs 1,3")
    assert res.returncode == 0, res.stderr[-3000:]
    assert [p for b in read_table(out).collectives["barrier"] for p in b.tuned_at] == [1, 3]
    res = run_bounded([MPIEXEC, "-n", "2", sys.executable, "-m", "colltune", "tune", "--method", "measure",
                       "--procs", "2-4", "-o", str(tmp_path / "m4.json")], 120, "tune --method measure --procs 2-4")
    assert res.returncode == 2 and res.stderr.count("--procs 3: the job has 2 processes") == 1
    assert not (tmp_path / "m4.json").exists()


def test_a_block_over_many_process_counts_exports_compactly_or_not_at_all():
    """A one-rule block is written once whatever its range (a forced table spans 1..2^20 ranks);
    a block with size rules, whose boundaries move with P for total-size keys, is written per
    process count, and refused over more counts than the files can sensibly list."""
    forced = fixed_table({c: (NATIVE, {}) for c in ("bcast", "scatter", "gather", "allgather", "alltoall")}, "tests")
    assert len(mpich_text(forced)[0]) < 100_000 and len(openmpi_rules(forced)[0]) < 10_000
    wide = every_algorithm_table(procs_max=MAX_PER_PROCS + 1)
    with pytest.raises(TableError, match="writes once per process count"):
        mpich_json(wide)
    with pytest.raises(TableError, match="writes once per process count"):
        openmpi_rules(wide)


def test_the_tuner_prices_hierarchical_algorithms_on_the_profiles_hosts():
    """A profile whose topology puts 2 ranks on each of 4 hosts, round-robin: the simulator
    prices the hierarchical algorithms on those hosts (a broadcast crossing each host's link once
    beats a binomial tree that crosses it twice), and the tuner considers them at P = 8 only,
    where hosts are shared, searching one parameter at a time."""
    from colltune.sim import star
    from colltune.tune import SimPricer
    from colltune.tune.select import RegistrySpace, space_on

    profile = load_profile("builtin:ethernet-10g-tcp")
    topology = star(4, 12.5e6).placed(2, "round-robin").model_copy(update={"shared_memory": (2e-6, 5e9)})
    assert topology.host_labels() == (0, 1, 2, 3, 0, 1, 2, 3) and topology.shares_hosts()
    assert not topology.shares_hosts(4) and not star(3, 1e6).placed(2).first(2).shares_hosts()
    space = space_on(topology, [2, 4, 8])
    assert space == RegistrySpace(frozenset({8}))
    assert "hierarchical" in space.names("bcast") and "hierarchical" not in space_on(None, [8]).names("bcast")
    assert space.combos("bcast", "hierarchical", 4, 1024) == []
    combos = space.combos("bcast", "hierarchical", 8, 1 << 19)
    assert {c.get("inter") for c in combos} >= {None, "chain", "scatter_ring_allgather"}
    assert all(len(c) <= 1 for c in combos)  # one parameter at a time from the defaults
    pricer = SimPricer(profile.params("hockney"), "hockney", topology)
    flat, _ = pricer.price("bcast", "binomial_tree", 8, 1 << 19, {})
    hier, _ = pricer.price("bcast", "hierarchical", 8, 1 << 19, {})
    assert hier < 0.7 * flat
    table = build_table(pricer, "simulate", ["bcast"], [8], 1 << 19,
                        Provenance(source="tests"), space=space)
    assert table.lookup("bcast", 8, 1 << 19)[0] == "hierarchical"


def test_a_tune_in_a_job_decides_for_every_count_to_16_then_at_the_offline_defaults_spacing():
    from colltune.tune.cli import DEFAULT_TUNE_PROCS
    from colltune.tune.subcomms import default_procs
    from colltune.units import parse_int_list

    assert default_procs(1) == [1] and default_procs(2) == [2] and default_procs(8) == list(range(2, 9))
    assert default_procs(64) == parse_int_list(DEFAULT_TUNE_PROCS, "--procs")  # the offline default's counts
    assert default_procs(20) == [*range(2, 17), 20] and default_procs(100)[-4:] == [48, 64, 96, 100]
