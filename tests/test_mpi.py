"""MPI tests: programs in tests/mpi run under mpiexec, started here, always under a timeout.

The machine has 2 cores, so P = 5 and 8 oversubscribe; a hang fails the test
after the timeout (the whole process group is killed) instead of blocking CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "mpi"
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
PROCS = (1, 2, 3, 5, 8)

pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (install the mpich wheel)")


def run_mpi(script: str, procs: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``tests/mpi/<script>`` on ``procs`` ranks; kill everything and fail on timeout."""
    cmd = [MPIEXEC, "-n", str(procs), sys.executable, "-m", "mpi4py", str(HERE / script), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{script} on {procs} ranks hung for {timeout} s\nstdout:\n{out}\nstderr:\n{err[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.parametrize("procs", PROCS)
def test_every_bcast_matches_native(procs: int) -> None:
    res = run_mpi("bcast_check.py", procs)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"bcast_check: P={procs}" in res.stdout


def test_large_message_matches_native() -> None:
    res = run_mpi("bcast_check.py", 3, "4194319")
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert "identical to MPI_Bcast" in res.stdout


@pytest.mark.parametrize("procs", (1, 3))
def test_executor_runs_copies_delays_and_scratch(procs: int) -> None:
    res = run_mpi("executor_check.py", procs, timeout=120)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"executor_check: P={procs}: copy, delay and scratch ran correctly" in res.stdout


@pytest.mark.parametrize("procs", (1, 3, 5))
def test_bad_input_raises_on_every_rank(procs: int) -> None:
    res = run_mpi("errors_check.py", procs, timeout=120)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"errors_check: P={procs}: every error raised on every rank" in res.stdout


@pytest.mark.parametrize("procs", (2, 5))
def test_failing_rank_ends_the_job(procs: int) -> None:
    res = run_mpi("fail_check.py", procs, timeout=120)
    assert res.returncode != 0
    assert "rank fails on purpose" in res.stderr


@pytest.mark.parametrize("procs", PROCS)
def test_every_other_collective_matches_native(procs: int) -> None:
    res = run_mpi("colls_check.py", procs, timeout=400)
    assert res.returncode == 0, f"stdout:\n{res.stdout}\nstderr:\n{res.stderr[-4000:]}"
    assert f"colls_check: P={procs}" in res.stdout
