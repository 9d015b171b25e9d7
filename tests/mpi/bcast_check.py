"""Under mpiexec: every registered broadcast against the native MPI_Bcast, bit for bit.

For every algorithm (from the registry), a spread of roots and sizes, and two
parameter settings where the algorithm has parameters, the plan is run twice
(persistent requests restarted) into buffers pre-filled with garbage, and each
rank compares its bytes with what MPI_Bcast delivers.  Plans run on the executor that
``COLLTUNE_EXECUTOR`` names (default: the compiled one), and each plan must say it did.  Any
mismatch raises; run with ``python -m mpi4py`` so that one failing rank aborts the whole job.
"""

import os
import sys

import numpy as np
from mpi4py import MPI

import colltune
from colltune.algorithms import REGISTRY

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
sizes = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0, 1, 7, 1000, 65537]
roots = sorted({0, P // 2, P - 1})
# parameter settings that exercise uneven segments and a non-default radix
VARIANTS = {"segment_size": [1000, 65536], "radix": [3, 5], "min_split_size": [0, 4096]}
EXECUTOR = os.environ.get("COLLTUNE_EXECUTOR", "compiled")

cases = 0
for alg in REGISTRY.select("bcast"):
    settings = [{}] + [{p.name: v} for p in alg.params for v in VARIANTS.get(p.name, [])]
    for params in settings:
        for root in roots:
            for n in sizes:
                rng = np.random.default_rng([n, root, P])
                message = rng.integers(0, 256, n, dtype=np.uint8)
                reference = message.copy() if me == root else np.full(n, 0x55, dtype=np.uint8)
                comm.Bcast(reference, root)
                buf = message.copy() if me == root else np.full(n, 0xAA, dtype=np.uint8)
                with colltune.plan("bcast", buf, root=root, comm=comm, algorithm=alg.name, **params) as plan:
                    assert plan.executor == EXECUTOR, (plan.executor, EXECUTOR)
                    for attempt in range(2):
                        if me != root:
                            buf[:] = 0xAA
                        plan.run()
                        if not np.array_equal(buf, reference):
                            bad = int(np.flatnonzero(buf != reference)[0])
                            raise AssertionError(
                                f"rank {me}: bcast/{alg.name} {params} P={P} root={root} size={n} run {attempt}: "
                                f"byte {bad} is {buf[bad]}, MPI_Bcast gives {reference[bad]}")
                cases += 1

# other buffer types: a float64 array and a bytearray, through the one-shot call
floats = np.arange(1001, dtype=np.float64) if me == 0 else np.zeros(1001)
colltune.bcast(floats, root=0, comm=comm, algorithm="scatter_ring_allgather")
assert np.array_equal(floats, np.arange(1001, dtype=np.float64)), f"rank {me}: float64 broadcast wrong"
raw = bytearray(b"colltune" * 50) if me == P - 1 else bytearray(400)
colltune.bcast(raw, root=P - 1, comm=comm, algorithm="symmetric_async", min_split_size=0)
assert raw == bytearray(b"colltune" * 50), f"rank {me}: bytearray broadcast wrong"

total = comm.allreduce(cases, op=MPI.SUM)
if me == 0:
    print(f"bcast_check: P={P}: {cases} cases per rank, {total} in all, {EXECUTOR} executor, identical to MPI_Bcast")
