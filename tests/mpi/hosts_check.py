"""Under mpiexec, with COLLTUNE_HOSTS set (made-up hosts on one machine) or on the testbed's
hosts: every hierarchical algorithm against the MPI library's own collective, on the world and on
a sub-communicator.

Each rank first checks the host labels colltune found against the made-up layout (or the host
names the ranks run on); then every
collective's hierarchical algorithm runs, with its default levels and with other level algorithms,
several leaders and segments where it takes them, at several roots and sizes, into buffers
pre-filled with garbage, and must deliver what mpi4py's native call does, bit for bit (integer
reductions).  Barriers must hold back every rank until the last, delayed by 20 ms, has entered.
Run with ``python -m mpi4py`` so that one failing rank aborts the job.
"""

import os
import socket
import time

import numpy as np
from mpi4py import MPI

import colltune
from colltune.algorithms import REGISTRY
from colltune.runtime.hosts import HOSTS_ENV, made_up_host
from colltune.runtime.state import state_of

world = MPI.COMM_WORLD
spec = os.environ.get(HOSTS_ENV)
EXECUTOR = os.environ.get("COLLTUNE_EXECUTOR", "compiled")
SETTINGS = {
    "bcast": [{}, {"inter": "flat_tree", "intra": "binomial_tree", "segment_size": 5}, {"leaders": 2}],
    "reduce": [{}, {"inter": "flat_tree", "intra": "chain", "leaders": 2, "segment_size": 8}],
    "allreduce": [{}, {"inter": "ring", "intra_reduce": "flat_tree", "intra_bcast": "binomial_tree"},
                  {"leaders": 3, "segment_size": 8}],
    "gather": [{}, {"inter": "flat_tree", "intra": "binomial_tree"}],
    "scatter": [{}, {"inter": "flat_tree", "intra": "binomial_tree"}],
    "allgather": [{}, {"inter": "recursive_doubling", "intra_gather": "binomial_tree", "intra_bcast": "chain"}],
    "alltoall": [{}, {"inter": "bruck", "intra_gather": "binomial_tree", "intra_scatter": "binomial_tree"}],
    "barrier": [{}, {"inter": "tree", "intra": "dissemination"}],
}


def check(comm, what):
    P, me = comm.Get_size(), comm.Get_rank()
    labels = state_of(comm).hosts
    names = comm.allgather(made_up_host(spec, world.Get_rank()) if spec else socket.gethostname())
    assert all((labels[i] == labels[j]) == (names[i] == names[j]) for i in range(P) for j in range(P)), \
        f"rank {me}: hosts {labels}, running on {names}"
    cases = 0
    for coll, settings in SETTINGS.items():
        alg = REGISTRY.get(coll, "hierarchical").name
        for params in settings:
            cases += 1
            if coll == "barrier":
                with colltune.plan("barrier", comm=comm, algorithm=alg, **params) as plan:
                    comm.Barrier()
                    if me == P - 1:
                        time.sleep(0.02)
                    entered = time.monotonic()
                    plan.run()
                    left = time.monotonic()
                assert min(comm.allgather(left)) >= max(comm.allgather(entered)), f"{what} barrier {params}"
                continue
            for root in sorted({0, P - 1, P // 2}) if coll in ("bcast", "reduce", "gather", "scatter") else [0]:
                for n in (0, 1, 7, 300):
                    rng = np.random.default_rng([n, root, P, me])
                    send, recv, want, op = None, None, None, None
                    if coll == "bcast":
                        data = rng.integers(0, 256, n, dtype=np.uint8) if me == root else None
                        recv = data if me == root else np.full(n, 0xAA, np.uint8)
                        want = comm.bcast(data, root)
                        with colltune.plan(coll, recv, root=root, comm=comm, algorithm=alg, **params) as plan:
                            assert plan.executor == EXECUTOR
                            plan.run()
                        assert np.array_equal(recv, want), f"{what} bcast {params} root={root} n={n}"
                        continue
                    if coll in ("reduce", "allreduce"):
                        send = rng.integers(-1000, 1000, n, dtype=np.int32)
                        at = coll == "allreduce" or me == root
                        recv = np.full(n, -7, np.int32) if at else None
                        want = np.empty(n, np.int32) if at else None
                        op = "sum"
                        if coll == "reduce":
                            comm.Reduce(send, want, MPI.SUM, root)
                        else:
                            comm.Allreduce(send, want, MPI.SUM)
                    else:
                        big = P * n
                        send = rng.integers(0, 256, big if coll in ("alltoall",) or (coll == "scatter" and me == root)
                                            else n, dtype=np.uint8)
                        if coll == "scatter" and me != root:
                            send = None
                        rbytes = n if coll == "scatter" else big
                        at = coll != "gather" or me == root
                        recv = np.full(rbytes, 0xAA, np.uint8) if at else None
                        want = np.empty(rbytes, np.uint8) if at else None
                        {"scatter": lambda: comm.Scatter(send, want, root), "gather": lambda: comm.Gather(send, want, root),
                         "allgather": lambda: comm.Allgather(send, want),
                         "alltoall": lambda: comm.Alltoall(send, want)}[coll]()
                    rooted = coll in ("reduce", "gather", "scatter")
                    with colltune.plan(coll, send, recv, root=root if rooted else 0, comm=comm, algorithm=alg,
                                       op=op, **params) as plan:
                        assert plan.executor == EXECUTOR
                        plan.run()
                    if recv is not None:
                        assert np.array_equal(recv, want), f"{what} {coll} {params} root={root} n={n}: {recv} {want}"
    return cases


cases = check(world, "world")
half = world.Split(world.Get_rank() % 2, world.Get_rank())
cases += check(half, "half")
half.Free()
# one-shot calls decide from the same hosts
block = np.full(3, world.Get_rank(), dtype=np.int64)
total = np.empty(3, dtype=np.int64)
colltune.allreduce(block, total, op="sum", comm=world, algorithm="hierarchical", leaders=2)
assert np.all(total == world.Get_size() * (world.Get_size() - 1) // 2)
running = len(set(world.allgather(socket.gethostname())))
if world.Get_rank() == 0:
    where = f"{HOSTS_ENV}={spec}" if spec else f"{running} hosts"
    print(f"hosts_check: P={world.Get_size()} {where}: {cases} cases, {EXECUTOR} executor, identical to MPI")
