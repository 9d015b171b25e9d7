"""The compiled executor (``colltune.runtime._exec``): finding it for the MPI library mpi4py uses,
and compiling a rank's part of a schedule for it.

The extension is built at install time without MPI headers and finds the MPI functions at run time
in the library mpi4py loaded, through that library's binary interface: MPICH's (``libmpi.so.12``;
also Intel MPI and MVAPICH) or Open MPI's (``libmpi.so.40``).  Where it cannot (another ABI, such
as the MPI 5 standard ABI that mpi4py can be asked for with ``MPI4PY_MPIABI=mpiabi``, or an
extension that failed to load), colltune warns once and runs schedules with the Python executor
(:mod:`colltune.runtime.executor`), which has the same semantics.  ``COLLTUNE_EXECUTOR=python``
chooses the Python executor without a warning.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.errors import ExecutionError
from colltune.schedule import Schedule

#: Environment variable: ``python`` makes every plan use the Python executor.
EXECUTOR_ENV = "COLLTUNE_EXECUTOR"

#: The ABI of each of mpi4py's per-ABI extension suffixes (``MPI.<tag>.cpython-...so``).
_ABI_TAGS = {"mpich": "mpich", "impi": "mpich", "openmpi": "openmpi", "mpiabi": None, "msmpi": None}


def mpi_abi() -> str | None:
    """The binary interface of the MPI library mpi4py uses: ``"mpich"``, ``"openmpi"`` or None.

    mpi4py's wheels carry one extension per ABI (``MPI.mpich...so``, ``MPI.openmpi...so``) and load
    the one that matches the library; a build from source has one, and its handle size and the
    library's name tell."""
    tag = Path(MPI.__file__).name.split(".")[1]
    if tag in _ABI_TAGS:
        return _ABI_TAGS[tag]
    if MPI.Get_library_version().startswith("Open MPI"):
        return "openmpi"
    return "mpich" if MPI._sizeof(MPI.Comm) == 4 else None


def _load() -> tuple[Any, str | None]:
    """The engine, or None and why not (None when the Python executor was asked for)."""
    if os.environ.get(EXECUTOR_ENV, "").strip().lower() == "python":
        return None, None
    abi = mpi_abi()
    if abi is None:
        return None, f"MPI library with an unsupported ABI ({MPI.Get_library_version().splitlines()[0]})"
    try:
        from colltune.runtime import _exec
    except ImportError as exc:
        return None, f"the extension colltune.runtime._exec did not load: {exc}"
    try:
        engine = _exec.Engine(abi, MPI.BYTE.handle, MPI.COMM_WORLD.handle, MPI.__pyx_capi__["PyMPIComm_Get"])
    except ExecutionError as exc:
        return None, str(exc)
    return engine, None


ENGINE, UNAVAILABLE = _load()
if UNAVAILABLE is not None:
    warnings.warn(f"colltune: the compiled executor is not available ({UNAVAILABLE}); schedules run on the "
                  f"slower Python executor", RuntimeWarning, stacklevel=2)


def program(schedule: Schedule, rank: int) -> Any:
    """Compile ``rank``'s operations of ``schedule`` for the compiled executor (``ENGINE``)."""
    if ENGINE is None:
        raise ExecutionError("the compiled executor is not available")
    if schedule.wildcards:
        raise ExecutionError("the schedule has wildcard receives (ANY_SOURCE or ANY_TAG); only the simulator runs "
                             "such schedules")
    lo, hi = int(schedule.rank_ptr[rank]), int(schedule.rank_ptr[rank + 1])
    c = schedule.columns
    dlo, dhi = int(schedule.dep_ptr[lo]), int(schedule.dep_ptr[hi])
    owner = np.repeat(np.arange(hi - lo), np.diff(schedule.dep_ptr[lo:hi + 1]))
    keep = ~schedule.dep_start[dlo:dhi]
    counts = np.bincount(owner[keep], minlength=hi - lo)
    req_ptr = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(counts, out=req_ptr[1:])
    req_idx = np.ascontiguousarray(schedule.dep_idx[dlo:dhi][keep] - lo, dtype=np.int64)
    sizes = schedule.buffer_sizes[rank]

    def col(name: str) -> np.ndarray:
        return np.ascontiguousarray(c[name][lo:hi])

    try:
        return ENGINE.program(col("kind"), col("peer"), col("tag"), col("buf"), col("offset"), col("length"),
                              col("src_buf"), col("src_offset"), col("redop"), col("dtype"), col("delay"),
                              req_ptr, req_idx, int(sizes[0]), int(sizes[1]), int(sizes[2]))
    except ExecutionError as exc:
        raise ExecutionError(f"rank {rank}: {exc}") from None


def address(view: np.ndarray) -> int:
    """The address of a numpy array's first byte."""
    return int(view.__array_interface__["data"][0])


#: Bytes of a transparent huge page (x86-64 and AArch64 Linux with 4 KiB base pages).
HUGE_PAGE = 2 << 20


def scratch_buffer(nbytes: int) -> np.ndarray:
    """A zeroed scratch buffer of ``nbytes`` bytes for a compiled runner.

    From :data:`HUGE_PAGE` bytes on, it starts on a huge-page boundary.  numpy asks the kernel for
    transparent huge pages on large arrays, and only the 2 MiB-aligned part of an allocation can
    have them, so an unaligned scratch buffer is backed by more or fewer huge pages from one
    allocation to the next, and a one-shot call ran up to 1.35x slower than a plan of the same
    algorithm by that chance (``benchmarks/runtime_speed.py``: binomial scatter at P = 4 and 4 MiB
    blocks).  Aligned, every runner gets the same backing."""
    if nbytes < HUGE_PAGE:
        return np.zeros(nbytes, dtype=np.uint8)
    raw = np.zeros(nbytes + HUGE_PAGE, dtype=np.uint8)
    skip = -address(raw) % HUGE_PAGE
    return raw[skip:skip + nbytes]
