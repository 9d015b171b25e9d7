"""Grids (paper 004): Fig. 2's tree times, HLOT never slower than flat, serialisation-aware trees,
levels and their composition, latency files, `colltune grid`, and the given-tree schedules
verified symbolically (under MPI: tests/mpi/grid_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from colltune.algorithms import REGISTRY
from colltune.algorithms.trees import from_edges
from colltune.cli import grid_markdown, main
from colltune.errors import ParameterError
from colltune.grid import (
    BUILDERS,
    LatencyFileError,
    auto_partitions,
    compose,
    group_levels,
    read_latency,
    simulated_time,
    tree_time,
)
from colltune.models.params import LatencyMatrix
from colltune.schedule import verify

SEED_CSV = Path(__file__).parent / "data" / "seed004_latency_matrix.csv"  # ../shared/data's copy of Fig. 1
FIG2 = {"binomial": 1420, "mst": 1150, "flat": 800, "hlot": 600}


def random_matrix(rng: np.random.Generator, procs: int, overheads: tuple[float, float, float] = (0, 0, 0)):
    lat = rng.uniform(1.0, 100.0, (procs, procs))
    np.fill_diagonal(lat, 0)
    o_s, gap, o_r = overheads
    return LatencyMatrix(names=tuple(f"n{i}" for i in range(procs)), latency=tuple(map(tuple, lat.tolist())),
                         o_s=o_s, gap=gap, o_r=o_r)


@pytest.mark.parametrize("spec", ["builtin:paper004-grid", str(SEED_CSV)])
@pytest.mark.parametrize("name", sorted(FIG2))
def test_figure_2_times_from_root_A(spec, name):
    model = read_latency(spec)
    edges = BUILDERS[name].build(model, 0)
    assert tree_time(model, edges, 0, overheads=False) == FIG2[name]
    assert simulated_time(model, edges, 0) == FIG2[name]


def test_mst_and_binomial_take_the_papers_long_paths():
    model = read_latency("builtin:paper004-grid")
    names = model.names
    mst = {names[b]: names[a] for a, b in BUILDERS["mst"].build(model, 0)}
    path, node = [], "E"
    while node != "A":
        path.append(node)
        node = mst[node]
    assert path[::-1] == ["H", "G", "F", "E"]  # A, H, G, F, E
    assert ("E", "G") in {(names[a], names[b]) for a, b in BUILDERS["binomial"].build(model, 0)}


@settings(max_examples=60, deadline=None)
@given(procs=st.integers(1, 12), seed=st.integers(0, 2 ** 32 - 1), data=st.data())
def test_hlot_is_never_slower_than_flat_and_ecef_is_the_fastest_without_overheads(procs, seed, data):
    model = random_matrix(np.random.default_rng(seed), procs)
    root = data.draw(st.integers(0, procs - 1))
    times = {}
    for name, builder in BUILDERS.items():
        edges = builder.build(model, root)
        from_edges(procs, root, edges)  # a spanning tree from the root, or ParameterError
        times[name] = tree_time(model, edges, root, overheads=False)
    assert times["hlot"] <= times["flat"]
    assert times["ecef"] <= min(times.values()) + 1e-9  # the shortest-path tree is optimal under eq. 4


def test_ecef_accounts_for_the_senders_serialisation():
    """With per-send overheads, HLOT (like flat) leaves the root sending to most ranks one after
    another; earliest-completing-edge-first spreads the sends, and the simulator agrees with
    eq. 1-2 for every tree."""
    model = random_matrix(np.random.default_rng(1), 9, overheads=(20.0, 10.0, 5.0))
    times = {}
    for name, builder in BUILDERS.items():
        edges = builder.build(model, 2)
        times[name] = tree_time(model, edges, 2)
        assert simulated_time(model, edges, 2) == pytest.approx(times[name])
    assert times["ecef"] < times["hlot"] and times["ecef"] < times["flat"]


@pytest.mark.parametrize("collective", ["bcast", "scatter", "gather", "reduce"])
@pytest.mark.parametrize("procs", [1, 2, 3, 5, 8, 13])
def test_every_builders_tree_verifies_for_every_root(collective, procs):
    model = random_matrix(np.random.default_rng(procs), procs)
    alg = REGISTRY.get(collective, "given_tree")
    for root in range(procs):
        trees = {name: b.build(model, root) for name, b in BUILDERS.items()}
        trees["multilevel"] = compose(model, root, [[list(range(0, procs, 2)), list(range(1, procs, 2))]],
                                      ["hlot", "ecef"]) if procs > 1 else []
        for edges in trees.values():
            for size in (0, 1, 24):
                extra = {"op": "sum", "dtype": "int32"} if collective == "reduce" else {}
                # raises VerificationError naming the rank, op and region if anything is wrong
                verify(alg.schedule(procs, root, size * (4 if extra else 1), edges=tuple(edges), **extra))


def test_given_tree_rejects_edges_that_are_not_a_spanning_tree():
    alg = REGISTRY.get("bcast", "given_tree")
    with pytest.raises(ParameterError, match="3 edges"):
        alg.schedule(4, 0, 8, edges=((0, 1),))
    with pytest.raises(ParameterError, match="already has a parent"):
        alg.schedule(4, 0, 8, edges=((0, 1), (0, 2), (1, 2)))
    with pytest.raises(ParameterError, match="cycle"):
        alg.schedule(4, 0, 8, edges=((0, 1), (3, 2), (2, 3)))
    with pytest.raises(ParameterError, match="not a pair of ranks"):
        alg.schedule(3, 0, 8, edges=((0, 1), (0, 5)))
    with pytest.raises(ParameterError, match="commutative"):
        REGISTRY.get("reduce", "given_tree").schedule(3, 0, 8, op="sum", dtype="int32", commutative=False)


def test_levels_split_sites_by_a_latency_jump():
    lat = np.full((6, 6), 2e-2)
    for group in ([0, 1, 2], [3, 4, 5]):
        for i in group:
            for j in group:
                lat[i, j] = 1e-5 * (1 + 0.01 * (i + j))
    np.fill_diagonal(lat, 0)
    levels = group_levels(lat)
    assert [groups for _, groups in levels] == [[[0, 1, 2], [3, 4, 5]], [[0, 1, 2, 3, 4, 5]]]
    assert levels[-1][0] == 2e-2
    model = LatencyMatrix(names=tuple("abcdef"), latency=tuple(map(tuple, lat.tolist())))
    assert auto_partitions(model) == [[[0, 1, 2], [3, 4, 5]]]
    edges = compose(model, 4, auto_partitions(model), ["hlot", "flat"])
    # one WAN link, from the root's site to the other site's leader; flat inside each site
    wan = [(a, b) for a, b in edges if (a < 3) != (b < 3)]
    assert len(wan) == 1 and wan[0][0] == 4
    assert sorted(b for a, b in edges if a == 4) == sorted([3, 5, wan[0][1]])


def test_compose_checks_its_levels():
    model = random_matrix(np.random.default_rng(0), 4)
    with pytest.raises(ParameterError, match="need 2 builders"):
        compose(model, 0, [[[0, 1], [2, 3]]], ["hlot"])
    with pytest.raises(ParameterError, match="exactly once"):
        compose(model, 0, [[[0, 1], [2]]], ["hlot", "flat"])
    with pytest.raises(ParameterError, match="unknown tree builder"):
        compose(model, 0, [[[0, 1], [2, 3]]], ["hlot", "fastest"])


def test_latency_files(tmp_path):
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps({"names": ["x", "y"], "latency": [[0, 2e-3], [3e-3, 0]], "o_s": 1e-6}))
    model = read_latency(str(as_json), scale=1e3)
    assert model.latency[1][0] == pytest.approx(3.0) and model.o_s == pytest.approx(1e-3)
    bad = tmp_path / "bad.csv"
    bad.write_text(",a,b\na,0,1\nc,1,0\n")
    with pytest.raises(LatencyFileError, match="row 'c': expected the row of 'b'"):
        read_latency(str(bad))
    bad.write_text(",a,b\na,0,x\nb,1,0\n")
    with pytest.raises(LatencyFileError, match="row 'a'"):
        read_latency(str(bad))
    with pytest.raises(LatencyFileError, match="no latency matrix"):
        read_latency("builtin:paper000-cluster")
    square = tmp_path / "square.json"
    square.write_text(json.dumps({"names": ["x", "y"], "latency": [[0, 1]]}))
    with pytest.raises(LatencyFileError, match="square.json"):
        read_latency(str(square))


def test_cli_grid_compares_the_builders_and_composes_levels():
    runner = CliRunner()
    out = runner.invoke(main, ["grid", "--latency", "builtin:paper004-grid", "--root", "A", "--json",
                               "--groups", "A,B,C,D;E,F,G,H"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    times = {t["builder"]: t["time"] for t in data["trees"]}
    assert {k: times[k] for k in FIG2} == FIG2 and times["ecef"] == 600
    assert "multilevel:hlot/binomial" in times and data["time_unit"] == "abstract"
    text = runner.invoke(main, ["grid", "--latency", "builtin:paper004-grid", "--root", "A", "--builder", "hlot"])
    assert text.exit_code == 0 and "A->H" in text.output and "given_tree" in text.output
    bad = runner.invoke(main, ["grid", "--latency", "builtin:paper004-grid", "--root", "Z"])
    assert bad.exit_code == 2 and "'Z' is not one of" in bad.output


def test_cli_runs_a_given_tree_from_json_edges():
    out = CliRunner().invoke(main, ["verify", "-c", "scatter", "-a", "given_tree", "-p", "5", "-s", "8", "-r", "2",
                                    "--param", "edges=[[2,0],[0,4],[2,1],[1,3]]"])
    assert out.exit_code == 0, out.output


def test_grid_doc_is_current():
    doc = Path(__file__).parent.parent / "docs" / "grid.md"
    assert doc.read_text() == grid_markdown(), "regenerate with: colltune grid-doc > docs/grid.md"
