"""Under mpiexec: every registered scatter, gather, allgather, alltoall, reduce, allreduce and
barrier against the MPI library's own collective.

For every algorithm (from the registry), a spread of roots and block sizes, and parameter
settings where the algorithm has parameters, the plan is run twice (persistent requests
restarted) into buffers pre-filled with garbage, and each rank compares its bytes with what
mpi4py's native call delivers: bit for bit, for integer reductions too (every operation is
tried); a float64 sum must agree within 4 P eps sum_k |x_k| per element, since the order of the
additions differs.  Barriers are checked for timing: no rank leaves before the last one, held back
20 ms, has entered (by the machine's monotonic clock, which every rank shares; Open MPI's
MPI_Wtime counts from each process's own start).  Plans run on the executor that ``COLLTUNE_EXECUTOR`` names (default: the compiled one), and each
plan must say it did.  Run with ``python -m mpi4py`` so that one failing rank aborts the job.
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

import colltune
from colltune.algorithms import REGISTRY
from colltune.schedule import REDUCTION_OPS

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
roots = sorted({0, P // 2, P - 1})
BLOCKS = [0, 1, 7, 1000]
ELEMENTS = [0, 1, 5, 1001]
# parameter settings that give uneven segments, small windows and throttles
VARIANTS = {"segment_size": [4, 1000], "window": [1, 3], "switch_buffer": [0], "max_outstanding": [1, 2]}
NATIVE_OPS = {name: getattr(MPI, name.upper()) for name in REDUCTION_OPS}
EXECUTOR = os.environ.get("COLLTUNE_EXECUTOR", "compiled")


def settings(alg):
    return [{}] + [{p.name: v} for p in alg.params for v in VARIANTS.get(p.name, [])]


def fail(what, got, want):
    bad = int(np.flatnonzero(got.ravel() != want.ravel())[0])
    raise AssertionError(f"rank {me}: {what}: element {bad} is {got.ravel()[bad]}, MPI gives {want.ravel()[bad]}")


def run_twice(what, collective, buffers, out, want, root, alg, params, op=None, close=None):
    with colltune.plan(collective, *buffers, root=root, comm=comm, algorithm=alg, op=op, **params) as plan:
        assert plan.executor == EXECUTOR, (plan.executor, EXECUTOR)
        for attempt in range(2):
            if out is not None:
                out.view(np.uint8)[:] = 0xAA
            plan.run()
            if out is None:
                continue
            ok = close(out, want) if close else np.array_equal(out.view(np.uint8), want.view(np.uint8))
            if not ok:
                fail(f"{what} run {attempt}", out, want)


def data_case(coll, alg, params, root, m):
    """Buffers for a data-moving collective with blocks of m bytes, and the native reference."""
    rng = np.random.default_rng([m, root, P, me])
    rooted = coll in ("scatter", "gather")
    big, small = P * m, m
    if coll == "scatter":
        send = rng.integers(0, 256, big, dtype=np.uint8) if me == root else None
        recv, want = np.empty(small, np.uint8), np.empty(small, np.uint8)
        comm.Scatter(send, want, root)
    elif coll == "gather":
        send = rng.integers(0, 256, small, dtype=np.uint8)
        recv = np.empty(big, np.uint8) if me == root else None
        want = np.empty(big, np.uint8) if me == root else None
        comm.Gather(send, want, root)
    elif coll == "allgather":
        send = rng.integers(0, 256, small, dtype=np.uint8)
        recv, want = np.empty(big, np.uint8), np.empty(big, np.uint8)
        comm.Allgather(send, want)
    else:
        send = rng.integers(0, 256, big, dtype=np.uint8)
        recv, want = np.empty(big, np.uint8), np.empty(big, np.uint8)
        comm.Alltoall(send, want)
    what = f"{coll}/{alg.name} {params} P={P} root={root} m={m}"
    run_twice(what, coll, (send, recv), recv, want, root if rooted else 0, alg.name, params)


def reduce_case(coll, alg, params, root, count, op="sum", dtype="int32"):
    rng = np.random.default_rng([count, root, P, me, REDUCTION_OPS.index(op)])
    if dtype == "float64":
        send = rng.uniform(-1, 1, count)
    elif op == "prod":
        send = rng.integers(-3, 4, count).astype(dtype)
    elif op in ("land", "lor"):
        send = rng.integers(0, 2, count).astype(dtype)
    else:
        send = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, count, dtype=dtype, endpoint=True)
    at_root = coll == "allreduce" or me == root
    recv = np.empty(count, dtype) if at_root else None
    want = np.empty(count, dtype) if at_root else None
    if coll == "reduce":
        comm.Reduce(send, want, op=NATIVE_OPS[op], root=root)
    else:
        comm.Allreduce(send, want, op=NATIVE_OPS[op])
    close = None
    if dtype == "float64":
        scale = np.empty(count) if at_root else None
        magnitude = np.abs(send)
        if coll == "reduce":
            comm.Reduce(magnitude, scale, op=MPI.SUM, root=root)
        else:
            comm.Allreduce(magnitude, scale, op=MPI.SUM)
        tol = 4 * P * np.finfo(np.float64).eps * (scale if at_root else 0)

        def close(got, ref):
            return bool(np.all(np.abs(got - ref) <= tol))
    what = f"{coll}/{alg.name} {params} P={P} root={root} {count} x {dtype} {op}"
    run_twice(what, coll, (send, recv), recv, want, root if coll == "reduce" else 0, alg.name, params, op, close)


def barrier_case(alg, params):
    for late in sorted({0, P - 1}):
        with colltune.plan("barrier", comm=comm, algorithm=alg.name, **params) as plan:
            assert plan.executor == EXECUTOR, (plan.executor, EXECUTOR)
            comm.Barrier()
            if me == late:
                time.sleep(0.02)
            entered = time.monotonic()  # one clock for every rank of this machine (MPI_Wtime need not be)
            plan.run()
            left = time.monotonic()
        enters, leaves = comm.allgather(entered), comm.allgather(left)
        if min(leaves) < max(enters):
            raise AssertionError(f"barrier/{alg.name} P={P}: rank {leaves.index(min(leaves))} left at "
                                 f"{min(leaves):.6f} before rank {late} entered at {max(enters):.6f}")


cases = 0
for alg in REGISTRY:
    coll = alg.collective
    if coll == "bcast" or (only and coll not in only):
        continue
    for params in settings(alg):
        if coll == "barrier":
            barrier_case(alg, params)
            cases += 1
            continue
        for root in (roots if coll in ("scatter", "gather", "reduce") else [0]):
            for size in (ELEMENTS if coll in ("reduce", "allreduce") else BLOCKS):
                if coll in ("reduce", "allreduce"):
                    reduce_case(coll, alg, params, root, size)
                else:
                    data_case(coll, alg, params, root, size)
                cases += 1
    if coll in ("reduce", "allreduce"):
        root = P - 1 if coll == "reduce" else 0
        for op in REDUCTION_OPS:
            reduce_case(coll, alg, {}, root, 6, op)
        reduce_case(coll, alg, {}, root, 7, "max", "uint8")
        reduce_case(coll, alg, {}, root, 999, "sum", "float64")
        cases += len(REDUCTION_OPS) + 2

# the one-shot calls, once each, with the default (native) and a scheduled algorithm
for algorithm in ("native", None):
    def pick(coll):
        return algorithm or REGISTRY.select(coll)[-1].name
    block = np.full(3, me, dtype=np.int64)
    everyone = np.empty(3 * P, dtype=np.int64)
    colltune.allgather(block, everyone, comm=comm, algorithm=pick("allgather"))
    assert np.array_equal(everyone, np.repeat(np.arange(P), 3)), f"rank {me}: allgather one-shot wrong"
    mine = np.empty(3, dtype=np.int64)
    colltune.scatter(everyone if me == 0 else None, mine, root=0, comm=comm, algorithm=pick("scatter"))
    assert np.array_equal(mine, block), f"rank {me}: scatter one-shot wrong"
    gathered = np.empty(3 * P, dtype=np.int64) if me == P - 1 else None
    colltune.gather(block, gathered, root=P - 1, comm=comm, algorithm=pick("gather"))
    assert me != P - 1 or np.array_equal(gathered, everyone), "gather one-shot wrong"
    swapped = np.empty(3 * P, dtype=np.int64)
    colltune.alltoall(np.arange(3 * P, dtype=np.int64) + 1000 * me, swapped, comm=comm, algorithm=pick("alltoall"))
    expect = np.array([1000 * s + 3 * me + i for s in range(P) for i in range(3)])
    assert np.array_equal(swapped, expect), f"rank {me}: alltoall one-shot wrong"
    total = np.empty(3, dtype=np.int64)
    colltune.allreduce(block, total, op="max", comm=comm, algorithm=pick("allreduce"))
    assert np.all(total == P - 1), f"rank {me}: allreduce one-shot wrong"
    summed = np.empty(3, dtype=np.int64) if me == 0 else None
    colltune.reduce(block, summed, root=0, comm=comm, algorithm=pick("reduce"))
    assert me != 0 or np.all(summed == P * (P - 1) // 2), "reduce one-shot wrong"
    colltune.barrier(comm=comm, algorithm=pick("barrier"))

total = comm.allreduce(cases, op=MPI.SUM)
if me == 0:
    print(f"colls_check: P={P}: {cases} cases per rank, {total} in all, {EXECUTOR} executor, identical to MPI")
