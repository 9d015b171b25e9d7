"""Under mpiexec (MPICH or Open MPI): force each of the library's catalogued algorithms in turn
through MPI_T (:mod:`colltune.tune.forcing`), call the collective (on a communicator duplicated
after forcing where the library needs one), and check its result against the closed form; then
check that everything is put back.

MPICH also shows that forcing switches what it runs on the next call: with
``MPIR_CVAR_COLLECTIVE_FALLBACK=error`` (set by the test), an algorithm whose precondition fails
(recursive-doubling allgather on a count of processes that is not a power of two) makes MPICH
return an error instead of running its own choice; with ``auto`` the same call succeeds.
Usage: python -m mpi4py forcing_check.py mpich|openmpi BYTES
"""

import sys

import numpy as np
from mpi4py import MPI

from colltune.tune.forcing import ForcingError, MpichForcer, forcer_for
from colltune.tune.targets import TARGETS

world = MPI.COMM_WORLD
P, me = world.Get_size(), world.Get_rank()
library, size = sys.argv[1], int(sys.argv[2])
forcer = forcer_for(library, MPI.Get_library_version())
watched = "MPIR_CVAR_BCAST_INTRA_ALGORITHM" if library == "mpich" else "coll_tuned_bcast_algorithm"
original = forcer.mpit.read_int(watched)
comm = world


def val(rank, n):
    return ((np.arange(n, dtype=np.int64) * 7 + rank * 1000) % 100003).astype(np.int64)


def check(what, got, want):
    if not np.array_equal(got, want):
        raise AssertionError(f"rank {me} of {P}: {what}: wrong result")


def run(coll, n):
    """One call of ``coll`` on n int64 elements per block (root 0), checked."""
    if coll == "bcast":
        buf = val(0, n) if me == 0 else np.full(n, -1, np.int64)
        comm.Bcast(buf, root=0)
        check(coll, buf, val(0, n))
    elif coll == "scatter":
        send = np.concatenate([val(r, n) for r in range(P)]) if me == 0 else None
        recv = np.empty(n, np.int64)
        comm.Scatter(send, recv, root=0)
        check(coll, recv, val(me, n))
    elif coll == "gather":
        recv = np.empty(n * P, np.int64) if me == 0 else None
        comm.Gather(val(me, n), recv, root=0)
        if me == 0:
            check(coll, recv, np.concatenate([val(r, n) for r in range(P)]))
    elif coll == "allgather":
        recv = np.empty(n * P, np.int64)
        comm.Allgather(val(me, n), recv)
        check(coll, recv, np.concatenate([val(r, n) for r in range(P)]))
    elif coll == "alltoall":
        send = np.concatenate([val(me * P + d, n) for d in range(P)])
        recv = np.empty(n * P, np.int64)
        comm.Alltoall(send, recv)
        check(coll, recv, np.concatenate([val(s * P + me, n) for s in range(P)]))
    elif coll in ("reduce", "allreduce"):
        total = sum(val(r, n) for r in range(P))
        recv = np.empty(n, np.int64)
        if coll == "reduce":
            comm.Reduce(val(me, n), recv, op=MPI.SUM, root=0)
            if me == 0:
                check(coll, recv, total)
        else:
            comm.Allreduce(val(me, n), recv, op=MPI.SUM)
            check(coll, recv, total)
    else:
        comm.Barrier()


n = max(1, size // 8)
forced = skipped = 0
for (coll, name), entry in TARGETS[library].items():
    if entry.pow2_only and P & (P - 1):
        continue  # MPICH's guard: the fallback check below is about exactly this
    for params in entry.variants(P, size):
        if forcer.forceable(coll, name, params):
            skipped += 1
            continue
        forcer.force(coll, name, params)
        comm = world.Dup() if forcer.fresh_communicator else world
        run(coll, n)
        if comm is not world:
            comm.Free()
        forcer.restore()
        forced += 1
comm = world
assert forcer.mpit.read_int(watched) == original, "not restored"

signature = "none"
if library == "mpich":
    assert forcer.forceable("bcast", "tree", {"tree_type": "knomial_1", "k": 2}) is not None
    # A forced algorithm whose precondition fails is an error under FALLBACK=error.
    signature = "skipped (power of two)"
    if P & (P - 1):
        forcer.force("allgather", "recursive_doubling", {})
        try:
            run("allgather", n)
        except MPI.Exception:
            signature = "error as forced"
        else:
            raise AssertionError(f"rank {me}: forced recursive doubling ran on {P} processes")
        forcer.restore()
        run("allgather", n)  # auto again: no error
    try:
        MpichForcer("Open MPI v5.0.0")
    except ForcingError as exc:
        assert "needs MPICH" in str(exc)
    else:
        raise AssertionError("forcing accepted a non-MPICH library")
else:
    try:
        forcer_for("mpich", MPI.Get_library_version())
    except ForcingError as exc:
        assert "needs MPICH" in str(exc)
    else:
        raise AssertionError("the MPICH forcer accepted Open MPI")
forcer.close()
world.Barrier()
if me == 0:
    print(f"forcing check passed: {library} P={P} forced={forced} not forceable={skipped} signature={signature}")
