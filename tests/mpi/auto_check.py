"""Under mpiexec: ``algorithm="auto"`` runs what the decision table says, and gets native's bytes.

The table (argv[1]) gives every candidate algorithm its own size range.  For each collective,
each rule, and three sizes (its first byte, its last byte, one inside), a plan built with
``algorithm="auto"`` must name the rule's algorithm and deliver exactly what the MPI library's
own collective delivers.  The table is passed as ``table=`` for odd rules and through
``COLLTUNE_TABLE`` for even ones.
"""

import os
import sys

import numpy as np
from mpi4py import MPI

import colltune
from colltune.algorithms import REGISTRY
from colltune.tune import read_table

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
path = sys.argv[1]
table = read_table(path)
os.environ["COLLTUNE_TABLE"] = path


def buffers(coll, m, root, seed):
    rng = np.random.default_rng([seed, me])
    if coll == "bcast":
        return (rng.integers(0, 256, m, dtype=np.uint8) if me == root else np.zeros(m, np.uint8),)
    if coll == "barrier":
        return ()
    send_n = {"scatter": P * m if me == root else 0, "alltoall": P * m}.get(coll, m)
    recv_n = {"gather": P * m if me == root else 0, "allgather": P * m, "alltoall": P * m,
              "reduce": m if me == root else 0}.get(coll, m)
    return rng.integers(0, 256, send_n, dtype=np.uint8), np.zeros(recv_n, np.uint8)


checked = 0
for coll in table.collectives:
    block = table.block(coll, P)
    for i, rule in enumerate(block.rules):
        last = rule.size_min + 700 if rule.size_max is None else rule.size_max
        for m in sorted({rule.size_min, (rule.size_min + last) // 2, last}) if coll != "barrier" else [0]:
            root = (i + m) % P
            kw = {"root": root} if coll in ("bcast", "scatter", "gather", "reduce") else {}
            if coll in ("reduce", "allreduce"):
                kw["op"] = "sum"
            mine, ref = buffers(coll, m, root, m), buffers(coll, m, root, m)
            with colltune.plan(coll, *mine, comm=comm, algorithm="auto", table=table if i % 2 else None,
                               **kw) as p:
                assert p.algorithm == rule.algorithm, (coll, m, p.algorithm, rule.algorithm)
                if rule.algorithm != "native":
                    want = REGISTRY.get(coll, rule.algorithm).validate_params(rule.params)
                    assert p.params == want, (coll, m, p.params, want)
                p.run()
            with colltune.plan(coll, *ref, comm=comm, algorithm="native", **kw) as p:
                p.run()
            for a, b in zip(mine, ref):
                assert np.array_equal(a, b), f"rank {me}: {coll}/{rule.algorithm} at {m} bytes differs from native"
            checked += 1

comm.Barrier()
if me == 0:
    print(f"auto_check: P={P}: {checked} calls ran the table's algorithm and matched native")
