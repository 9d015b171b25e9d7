"""Under mpiexec: broadcast, scatter, gather and reduce down the trees of every grid builder
(colltune.grid) over a random asymmetric latency matrix, against the native collectives, bit for
bit, for several roots and sizes, plus one multi-level composition.  Run with
``python -m mpi4py`` so that one failing rank aborts the job."""

import numpy as np
from mpi4py import MPI

import colltune
from colltune.grid import BUILDERS, compose
from colltune.models.params import LatencyMatrix

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
rng = np.random.default_rng(P)  # the same matrix on every rank
lat = rng.uniform(1e-5, 1e-2, (P, P))
np.fill_diagonal(lat, 0)
matrix = LatencyMatrix(names=tuple(f"r{r}" for r in range(P)), latency=tuple(map(tuple, lat.tolist())))


def check(what, got, want):
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(got != want)[0])
        raise AssertionError(f"rank {me}: {what}: element {bad} is {got[bad]}, MPI gives {want[bad]}")


def run(edges, root, m, label):
    params = {"algorithm": "given_tree", "edges": tuple(edges)}
    data = np.random.default_rng([m, root, P, me]).integers(0, 2 ** 31, P * m, dtype=np.int64)
    # bcast
    buf = data[:m].copy() if me == root else np.full(m, -1, np.int64)
    want = data[:m].copy()
    comm.Bcast(want, root)
    colltune.bcast(buf, root=root, comm=comm, **params)
    check(f"bcast {label} root={root} m={m}", buf, want)
    # scatter
    got, want = np.full(m, -1, np.int64), np.empty(m, np.int64)
    comm.Scatter(data if me == root else None, want, root)
    colltune.scatter(data if me == root else None, got, root=root, comm=comm, **params)
    check(f"scatter {label} root={root} m={m}", got, want)
    # gather
    got = np.full(P * m, -1, np.int64) if me == root else None
    want = np.empty(P * m, np.int64) if me == root else None
    comm.Gather(data[:m], want, root)
    colltune.gather(data[:m], got, root=root, comm=comm, **params)
    if me == root:
        check(f"gather {label} root={root} m={m}", got, want)
    # reduce (commutative)
    got = np.full(m, -1, np.int64) if me == root else None
    want = np.empty(m, np.int64) if me == root else None
    comm.Reduce(data[:m], want, op=MPI.SUM, root=root)
    colltune.reduce(data[:m], got, op="sum", root=root, comm=comm, **params)
    if me == root:
        check(f"reduce {label} root={root} m={m}", got, want)


cases = 0
for root in sorted({0, P // 2, P - 1}):
    for name, builder in BUILDERS.items():
        for m in (0, 1, 513):
            run(builder.build(matrix, root), root, m, name)
            cases += 1
    halves = [list(range((P + 1) // 2)), list(range((P + 1) // 2, P))]
    run(compose(matrix, root, [[g for g in halves if g]], ["hlot", "binomial"]), root, 7, "multilevel")
    cases += 1
if me == 0:
    print(f"grid_check: P={P}: {cases} cases, every builder's tree identical to MPI")
