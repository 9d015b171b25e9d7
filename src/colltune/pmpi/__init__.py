"""Interposition: colltune's decisions and algorithms inside unmodified C, C++ and Fortran MPI programs.

``LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=t.json mpiexec -n 8 ./app`` runs the program's
MPI_Bcast, MPI_Scatter, MPI_Gather, MPI_Allgather, MPI_Alltoall, MPI_Reduce, MPI_Allreduce and
MPI_Barrier as the decision table says, through the MPI profiling interface: the library
(``cpp/interpose.cpp``) defines those functions and reaches the MPI library's own as ``PMPI_*``.
It decides and builds schedules with this package (:mod:`colltune.pmpi.signatures`), in a Python
interpreter it starts in each process at the first call that could run one of colltune's
algorithms; see docs/pmpi.md for what goes to the library unchanged and what it costs.
"""

from __future__ import annotations

from pathlib import Path

from colltune.errors import ColltuneError

#: The interposition library's file name, installed beside this module.
LIBRARY_NAME = "libcolltune_pmpi.so"


def library_path() -> Path:
    """The interposition library (for ``LD_PRELOAD``); raise :class:`ColltuneError` where it was not built."""
    # The package's directories: the installed one, and in an editable install also the source
    # tree (where the library is not).
    for where in __path__:
        path = Path(where).resolve() / LIBRARY_NAME
        if path.is_file():
            return path
    raise ColltuneError(f"{LIBRARY_NAME} was not built beside {__name__}: the interposition library needs a "
                        f"Python with a shared libpython (see CMakeLists.txt); reinstall colltune with such a Python")


__all__ = ["LIBRARY_NAME", "library_path"]
