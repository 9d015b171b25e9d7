"""colltune bench: what it times, its results file, its figure, and real runs under mpiexec."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
from pathlib import Path

import pytest
from helpers import run_bounded

from colltune.models import Unavailable
from colltune.profiles import load_profile
from colltune.profiles.format import Provenance
from colltune.report import bench_figure, plot_bench
from colltune.tune import (
    NATIVE,
    TABLE_ENV,
    BenchError,
    BenchResults,
    Block,
    DecisionTable,
    ModelPricer,
    Rule,
    bench_runs,
    read_bench,
    read_table,
    write_bench,
)
from colltune.tune.bench import BenchPoint, BenchSeries, Predictor, Run, predicted

MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')")
PROFILE = load_profile("builtin:ethernet-10g-tcp")
PRICER = ModelPricer(PROFILE.models.hockney, "hockney")


def _table() -> DecisionTable:
    """bcast on 2..8 processes: native, then chain_segmented (64 B segments), binomial_tree_segmented,
    then chain_segmented again with 4 KiB segments; barrier: dissemination; nothing else."""
    rules = (Rule(size_min=0, size_max=99, algorithm=NATIVE),
             Rule(size_min=100, size_max=999, algorithm="chain_segmented", params={"segment_size": 64}),
             Rule(size_min=1000, size_max=9999, algorithm="binomial_tree_segmented", params={"segment_size": 512}),
             Rule(size_min=10000, algorithm="chain_segmented", params={"segment_size": 4096}))
    barrier = (Rule(size_min=0, algorithm="dissemination"),)
    return DecisionTable(method="model", model="hockney", profile="synthetic", provenance=Provenance(source="tests"),
                         collectives={"bcast": (Block(procs_min=2, procs_max=8, tuned_at=(2,), rules=rules),),
                                      "barrier": (Block(procs_min=2, procs_max=8, tuned_at=(2,), rules=barrier),)})


SIZES = [0, 50, 100, 500, 2000, 20000]


def test_every_size_times_native_and_every_chosen_algorithm_with_one_choice():
    t = _table()
    runs = bench_runs(t, "bcast", 4, SIZES)
    assert [r.size for r in runs] == sorted(r.size for r in runs)
    assert {r.algorithm for r in runs} == {NATIVE, "chain_segmented", "binomial_tree_segmented"}
    for size in SIZES:
        here = [r for r in runs if r.size == size]
        assert len(here) == 3
        chosen = [r for r in here if r.chosen]
        assert len(chosen) == 1 and (chosen[0].algorithm, chosen[0].params) == t.lookup("bcast", 4, size)


def test_an_algorithm_runs_with_its_nearest_rules_parameters():
    runs = {(r.algorithm, r.size): r.params for r in bench_runs(_table(), "bcast", 4, SIZES)}
    assert runs[("chain_segmented", 50)] == {"segment_size": 64}      # 50 B below 100..999
    assert runs[("chain_segmented", 2000)] == {"segment_size": 64}    # 1001 B from 999, 8000 B from 10000
    near_top = {(r.algorithm, r.size): r.params for r in bench_runs(_table(), "bcast", 4, [9000])}
    assert near_top[("chain_segmented", 9000)] == {"segment_size": 4096}  # 1000 B from 10000, 8001 B from 999
    assert runs[("binomial_tree_segmented", 20000)] == {"segment_size": 512}
    assert runs[(NATIVE, 500)] == {}


def test_without_an_entry_only_native_runs_and_a_barrier_has_one_size():
    runs = bench_runs(_table(), "bcast", 9, SIZES)
    assert [(r.algorithm, r.size, r.chosen) for r in runs] == [(NATIVE, s, True) for s in SIZES]
    assert [(r.algorithm, r.chosen) for r in bench_runs(_table(), "gather", 4, [1, 2])] == [(NATIVE, True)] * 2
    barrier = bench_runs(_table(), "barrier", 4, SIZES)
    assert [(r.algorithm, r.size, r.chosen) for r in barrier] == [(NATIVE, 0, False), ("dissemination", 0, True)]


def test_predictions_come_from_the_pricer_or_are_absent():
    run = Run("chain_segmented", 5000, {"segment_size": 1024}, True)
    assert predicted(PRICER, "bcast", 4, run) == PRICER.price("bcast", "chain_segmented", 4, 5000,
                                                              {"segment_size": 1024})[0]
    assert predicted(None, "bcast", 4, run) is None
    with pytest.raises(Unavailable):  # TRG's formula for MPICH's allreduce holds for P a power of two
        PRICER.price("allreduce", NATIVE, 3, 5000, {})
    assert predicted(PRICER, "allreduce", 3, Run(NATIVE, 5000, {}, True)) is None


def _point(size: int, median: float, chosen: bool, pred: float | None = None, **params: int) -> BenchPoint:
    return BenchPoint(size=size, params=params, chosen=chosen, median=median, q1=median * 0.9, q3=median * 1.2,
                      reps=5, predicted=pred)


def _results(native: list[float], chain: list[float], chosen_chain: list[bool],
             preds: list[float | None] | None = None) -> BenchResults:
    sizes = [0, 64, 4096][:len(native)]
    preds = preds or [None] * len(sizes)
    series = (BenchSeries(algorithm=NATIVE, points=tuple(_point(s, m, not c, p)
                                                          for s, m, c, p in zip(sizes, native, chosen_chain, preds))),
              BenchSeries(algorithm="chain_segmented", points=tuple(_point(s, m, c, segment_size=64)
                                                                     for s, m, c in zip(sizes, chain, chosen_chain))))
    return BenchResults(procs=4, reps=5, warmup=1, table="t.json", table_source="tests",
                        predictor=Predictor(method="model", model="hockney", profile="builtin:ethernet-10g-tcp"),
                        provenance=Provenance(source="tests"), collectives={"bcast": series})


def test_summary_compares_the_choices_with_native_and_the_predictions():
    r = _results([1e-6, 4e-6, 9e-6], [2e-6, 2e-6, 3e-6], [False, True, True], preds=[3e-6, 8e-6, None])
    s = r.summary("bcast")
    assert s.sizes == 3
    assert s.speedup == pytest.approx(statistics.geometric_mean([1.0, 2.0, 3.0]))
    assert s.worst == (1.0, 0, NATIVE)
    assert s.prediction == pytest.approx(statistics.median([3.0, 2.0]))
    assert [(a, p.size) for a, p in r.chosen("bcast")] == [(NATIVE, 0), ("chain_segmented", 64),
                                                           ("chain_segmented", 4096)]


def test_results_round_trip_and_bad_files_name_the_field(tmp_path):
    r = _results([1e-6, 4e-6], [2e-6, 2e-6], [False, True])
    write_bench(r, tmp_path / "b.json")
    assert read_bench(tmp_path / "b.json") == r
    data = json.loads(r.to_json())
    data["collectives"]["bcast"][1]["points"][1]["chosen"] = False
    (tmp_path / "two.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"two\.json: collectives: .*bcast: size 64 has 0 chosen points"):
        read_bench(tmp_path / "two.json")
    data = json.loads(r.to_json())
    data["collectives"]["bcast"][1]["algorithm"] = "nonesuch"
    (tmp_path / "alg.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"alg\.json: .*unknown bcast algorithm 'nonesuch'"):
        read_bench(tmp_path / "alg.json")
    data = json.loads(r.to_json())
    data["collectives"]["bcast"][0]["points"][0]["median"] = -1
    (tmp_path / "neg.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"neg\.json: collectives\.bcast\.0\.points\.0\.median"):
        read_bench(tmp_path / "neg.json")
    data = json.loads(r.to_json())
    data["collectives"]["bcast"][0]["points"][1]["q3"] = 1e-9
    (tmp_path / "q.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"q\.json: collectives\.bcast\.0\.points\.1: .*quartiles out of order"):
        read_bench(tmp_path / "q.json")
    data = json.loads(r.to_json())
    del data["collectives"]["bcast"][0]["points"][0]
    (tmp_path / "nat.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"nat\.json: collectives: .*native must be timed at every size"):
        read_bench(tmp_path / "nat.json")
    data = json.loads(r.to_json()) | {"version": 2}
    (tmp_path / "v2.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"v2\.json: version: 2 is not supported"):
        read_bench(tmp_path / "v2.json")


def test_the_figure_draws_measured_and_predicted_for_every_algorithm(tmp_path):
    import matplotlib.pyplot as plt

    r = _results([1e-6, 4e-6, 9e-6], [2e-6, 2e-6, 3e-6], [False, True, True], preds=[0.0, 8e-6, 1e-5])
    fig = bench_figure(r)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert ax.get_title() == "bcast (P = 4)"
    native = [ln for ln in ax.lines if ln.get_label() == NATIVE]
    assert len(native) == 1 and list(native[0].get_ydata()) == pytest.approx([1.0, 4.0, 9.0])
    dashed = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    # predicted times of 0 cannot be drawn on a logarithmic axis; the others are
    assert [list(ln.get_ydata()) for ln in dashed] == [pytest.approx([8.0, 10.0]), []]
    circled = [ln for ln in ax.lines if ln.get_linestyle() == "None" and len(ln.get_xdata())]
    assert sorted(x for ln in circled for x in ln.get_xdata()) == [0, 64, 4096]
    plt.close(fig)
    plot_bench(r, tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- under MPI --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    res = run_bounded([sys.executable, "-m", "colltune", "tune", "--profile", "builtin:ethernet-10g-tcp",
                       "--procs", "1-8", "-c", "bcast", "-c", "gather", "-c", "allreduce", "-c", "barrier",
                       "--max-size", "16KiB", "-o", str(folder / "t.json")], 300, "tune")
    assert res.returncode == 0, res.stderr
    return folder / "t.json"


BENCH_SIZES = [0, 1, 100, 3000, 16384]


@needs_mpi
@pytest.mark.parametrize("procs", (1, 2, 3, 5, 8))
def test_bench_times_the_tables_choices_and_native_in_the_job(tuned, tmp_path, procs):
    out, png = tmp_path / "b.json", tmp_path / "b.png"
    env = {**os.environ, TABLE_ENV: str(tuned)} if procs == 2 else None
    table_args = [] if env else ["--table", str(tuned)]
    res = run_bounded([MPIEXEC, "-n", str(procs), sys.executable, "-m", "colltune", "bench", *table_args,
                       "--sizes", ",".join(map(str, BENCH_SIZES)), "--reps", "3", "--warmup", "1",
                       "--profile", "builtin:ethernet-10g-tcp", "-o", str(out), "--plot", str(png)],
                      300, f"bench on {procs}", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.count("results written to") == 1
    table, r = read_table(tuned), read_bench(out)
    assert r.procs == procs and r.provenance.procs == procs and r.reps == 3 and r.warmup == 1
    assert r.table == str(tuned) and r.predictor is not None and r.predictor.model == "hockney"
    assert list(r.collectives) == ["bcast", "gather", "allreduce", "barrier"]
    for coll in r.collectives:
        sizes = [0] if coll == "barrier" else BENCH_SIZES
        assert sorted(r.native(coll)) == sizes
        assert [(a, p.size, p.params) for a, p in r.chosen(coll)] == \
            [(*table.lookup(coll, procs, s)[:1], s, table.lookup(coll, procs, s)[1]) for s in sizes]
        block = table.block(coll, procs)
        assert {s.algorithm for s in r.collectives[coll]} == {NATIVE, *(x.algorithm for x in block.rules)}
        for s in r.collectives[coll]:
            assert [p.size for p in s.points] == sizes
            assert all(0 <= p.q1 <= p.median <= p.q3 and p.reps == 3 for p in s.points)
    for coll, series in r.collectives.items():
        for s in series:
            assert [p.predicted for p in s.points] == \
                [predicted(PRICER, coll, procs, Run(s.algorithm, p.size, p.params, p.chosen)) for p in s.points]
    if procs > 1:  # one process sends nothing, and is predicted to take no time
        assert all(p.median > 0 and p.predicted for p in r.native("bcast").values() if p.size > 0)
        # the table chooses something other than native here (bcast from P = 3, allreduce at 2 and 8)
        assert any(a != NATIVE for coll in r.collectives for a, _ in r.chosen(coll))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD = {
    "no table": ([], "needs a decision table"),
    "missing table": (["--table", "missing.json"], "missing.json: cannot read the decision table"),
    "abstract profile": (["--profile", "builtin:paper001-example"], "abstract units"),
    "bad model": (["--profile", "builtin:ethernet-10g-tcp", "--model", "nope"], "'nope': not an analytic model"),
    "model without a profile": (["--model", "plogp"], "add --profile"),
    "bad sizes": (["--sizes", "1,x"], "--sizes: size 'x'"),
    "unwritable": (["-o", "/nonexistent/b.json"], "/nonexistent does not exist"),
}


@needs_mpi
@pytest.mark.parametrize("case", list(BAD))
def test_bench_errors_are_one_message_and_exit_2_on_every_rank(tuned, tmp_path, case):
    args, message = BAD[case]
    table = [] if case in ("no table", "missing table") else ["--table", str(tuned)]
    output = [] if case == "unwritable" else ["-o", str(tmp_path / "b.json")]
    env = {k: v for k, v in os.environ.items() if k != TABLE_ENV}
    res = run_bounded([MPIEXEC, "-n", "2", sys.executable, "-m", "colltune", "bench", *table, *output, *args],
                      120, f"bench with {case}", env=env)
    assert res.returncode == 2 and res.stderr.count(message) == 1, res.stderr[-2000:]
    assert not (tmp_path / "b.json").exists()
