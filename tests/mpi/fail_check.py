"""Under mpiexec: one rank fails in the middle of a broadcast; the job must end, not hang."""

import numpy as np
from mpi4py import MPI

import colltune

comm = MPI.COMM_WORLD
buf = np.zeros(1 << 16, dtype=np.uint8)
if comm.Get_rank() == comm.Get_size() - 1:
    raise RuntimeError("rank fails on purpose")
colltune.bcast(buf, root=0, comm=comm, algorithm="chain")
