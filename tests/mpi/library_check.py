"""Under mpiexec: call every MPI collective of the library (blocking, non-blocking, v and w forms,
scans, neighbourhood, in place, a non-commutative user operation) at the element counts given on
the command line, and check each result against its closed form.

Used to prove that an exported decision file (MPICH selection JSON, Open MPI rules) is accepted
and that the algorithms it selects give right answers: MPICH asserts on a collective its
selection tree does not cover.  Works under any MPI that mpi4py is built for.
Usage: python -m mpi4py library_check.py COUNT[,COUNT...]
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
counts = [int(c) for c in sys.argv[1].split(",")]


def val(rank, n, salt=0):
    """What rank ``rank`` contributes: n int64 values."""
    return (np.arange(n, dtype=np.int64) * 7 + rank * 1000 + salt) % 100003


def check(what, got, want):
    if not np.array_equal(got, want):
        bad = int(np.flatnonzero(np.asarray(got).ravel() != np.asarray(want).ravel())[0])
        raise AssertionError(f"rank {me} of {P}: {what}: element {bad} is {np.asarray(got).ravel()[bad]}, "
                             f"expected {np.asarray(want).ravel()[bad]}")


def first_op(inbuf, inoutbuf, datatype):
    """inoutbuf = inbuf op inoutbuf with op(a, b) = a: associative, not commutative; rank 0's value wins."""
    np.frombuffer(inoutbuf, dtype=np.int64)[:] = np.frombuffer(inbuf, dtype=np.int64)


FIRST = MPI.Op.Create(first_op, commute=False)
ring = comm.Create_cart([P], periods=[True])
left, right = ring.Shift(0, 1)
neighbours = [left, right]

for n in counts:
    mine = val(me, n)
    everyone = np.concatenate([val(r, n) for r in range(P)])
    total = sum(val(r, n) for r in range(P)) if n else np.zeros(0, np.int64)
    for blocking in (True, False):
        tag = "" if blocking else "I"

        def go(name, *args, blocking=blocking, **kw):
            fn = getattr(comm, name if blocking else "I" + name.lower())
            out = fn(*args, **kw)
            if not blocking:
                out.Wait()

        for root in sorted({0, P - 1}):
            buf = val(root, n) if me == root else np.full(n, -1, np.int64)
            go("Bcast", buf, root=root)
            check(f"{tag}Bcast n={n} root={root}", buf, val(root, n))

            out = np.full(n, -1, np.int64)
            go("Scatter", everyone if me == root else None, out, root=root)
            check(f"{tag}Scatter n={n}", out, val(me, n))
            go("Scatterv", [everyone, [n] * P] if me == root else None, out, root=root)
            check(f"{tag}Scatterv n={n}", out, val(me, n))

            out = np.full(P * n, -1, np.int64) if me == root else None
            go("Gather", mine, out, root=root)
            if me == root:
                check(f"{tag}Gather n={n}", out, everyone)
            go("Gatherv", mine, [out, [n] * P] if me == root else None, root=root)
            if me == root:
                check(f"{tag}Gatherv n={n}", out, everyone)

            out = np.full(n, -1, np.int64)
            go("Reduce", mine, out if me == root else None, op=MPI.SUM, root=root)
            if me == root:
                check(f"{tag}Reduce n={n}", out, total)
            go("Reduce", mine, out if me == root else None, op=FIRST, root=root)
            if me == root:
                check(f"{tag}Reduce non-commutative n={n}", out, val(0, n))

        out = np.full(P * n, -1, np.int64)
        go("Allgather", mine, out)
        check(f"{tag}Allgather n={n}", out, everyone)
        go("Allgatherv", mine, [out, [n] * P])
        check(f"{tag}Allgatherv n={n}", out, everyone)

        send = np.concatenate([val(me, n, salt=d) for d in range(P)])
        want = np.concatenate([val(s, n, salt=me) for s in range(P)])
        out = np.full(P * n, -1, np.int64)
        go("Alltoall", send, out)
        check(f"{tag}Alltoall n={n}", out, want)
        go("Alltoallv", [send, [n] * P], [out, [n] * P])
        check(f"{tag}Alltoallv n={n}", out, want)
        displs = [d * n * 8 for d in range(P)]
        go("Alltoallw", [send, [n] * P, displs, [MPI.INT64_T] * P], [out, [n] * P, displs, [MPI.INT64_T] * P])
        check(f"{tag}Alltoallw n={n}", out, want)
        if blocking:
            inplace = send.copy()
            comm.Alltoall(MPI.IN_PLACE, inplace)
            check(f"Alltoall in place n={n}", inplace, want)

        out = np.full(n, -1, np.int64)
        go("Allreduce", mine, out, op=MPI.SUM)
        check(f"{tag}Allreduce n={n}", out, total)
        go("Allreduce", mine, out, op=FIRST)
        check(f"{tag}Allreduce non-commutative n={n}", out, val(0, n))

        send = np.concatenate([val(me, n, salt=d) for d in range(P)])
        want = sum(val(r, n, salt=me) for r in range(P)) if n else np.zeros(0, np.int64)
        out = np.full(n, -1, np.int64)
        go("Reduce_scatter_block", send, out, op=MPI.SUM)
        check(f"{tag}Reduce_scatter_block n={n}", out, want)
        go("Reduce_scatter", send, out, [n] * P, op=MPI.SUM)
        check(f"{tag}Reduce_scatter n={n}", out, want)

        out = np.full(n, -1, np.int64)
        go("Scan", mine, out, op=MPI.SUM)
        check(f"{tag}Scan n={n}", out, sum(val(r, n) for r in range(me + 1)))
        go("Exscan", mine, out, op=MPI.SUM)
        if me > 0:
            check(f"{tag}Exscan n={n}", out, sum(val(r, n) for r in range(me)))

        if blocking:
            comm.Barrier()
        else:
            comm.Ibarrier().Wait()

        out = np.full(2 * n, -1, np.int64)
        nfn = getattr(ring, ("Ineighbor_" if not blocking else "Neighbor_") + "allgather")
        req = nfn(mine, out)
        if not blocking:
            req.Wait()
        check(f"{tag}Neighbor_allgather n={n}", out, np.concatenate([val(r, n) for r in neighbours]))
        for name, args in (("allgatherv", (mine, [out, [n, n]])),
                           ("alltoall", (np.concatenate([mine, mine]), out)),
                           ("alltoallv", ([np.concatenate([mine, mine]), [n, n]], [out, [n, n]]))):
            req = getattr(ring, ("Ineighbor_" if not blocking else "Neighbor_") + name)(*args)
            if not blocking:
                req.Wait()
            check(f"{tag}Neighbor_{name} n={n}", out, np.concatenate([val(r, n) for r in neighbours]))
        w = [0, n * 8]
        req = getattr(ring, ("Ineighbor_" if not blocking else "Neighbor_") + "alltoallw")(
            [np.concatenate([mine, mine]), [n, n], w, [MPI.INT64_T] * 2], [out, [n, n], w, [MPI.INT64_T] * 2])
        if not blocking:
            req.Wait()
        check(f"{tag}Neighbor_alltoallw n={n}", out, np.concatenate([val(r, n) for r in neighbours]))

FIRST.Free()
ring.Free()
comm.Barrier()
if me == 0:
    print(f"library check passed: P={P}, counts {counts}")
