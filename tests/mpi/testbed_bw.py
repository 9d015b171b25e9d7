"""Under mpiexec on the testbed: bandwidths through MPI, in Mbit/s, printed as JSON by rank 0.

``links``: each rank i in turn sends to rank i+1 (mod P) alone; one figure per link.
``pairs A-B,C-D,...``: the pairs send at once (A to B, C to D), started by one barrier; their
total rate over the time the last of them took, as ``{"total": rate}``: the flows' shares of a
common link differ from run to run, and one that ends early leaves the link to the others, so the
rate each receiver saw alone can add up to more than the link carries.
Each transfer is 4 messages of 2 MiB after one warm-up message.  A link is measured twice and the
faster run counts (the link's capacity; a slower run is the hosts' noise); concurrent pairs are
measured once.  Ranks not in a transfer wait in a barrier polled with sleeps, so that on a 2-core
machine they leave the cores to the ranks moving data.
"""

import json
import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
buf = np.zeros(2 << 20, np.uint8)
REPS = 4


def rest() -> None:
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(1e-3)


def transfer(src: int, dst: int) -> float | None:
    """The better of two :func:`once`."""
    rates = [once(src, dst) for _ in range(2)]
    return None if rates[0] is None else max(rates)


def once(src: int, dst: int) -> float | None:
    """Send REPS messages src -> dst; the receiver's rate in Mbit/s (None elsewhere)."""
    if me == src:
        comm.Send(buf, dst)
        comm.Recv(buf[:0], dst)
        for _ in range(REPS):
            comm.Send(buf, dst)
    elif me == dst:
        comm.Recv(buf, src)
        comm.Send(buf[:0], src)
        t = MPI.Wtime()
        for _ in range(REPS):
            comm.Recv(buf, src)
        return REPS * buf.size * 8 / (MPI.Wtime() - t) / 1e6
    return None


if sys.argv[1] == "links":
    rates = {}
    for i in range(P):
        rest()
        rate = transfer(i, (i + 1) % P)
        rest()
        got = comm.gather(rate, root=0)
        rates[f"{i}-{(i + 1) % P}"] = next(r for r in got if r is not None) if me == 0 else None
else:
    pairs = [tuple(int(x) for x in p.split("-")) for p in sys.argv[2].split(",")]
    rest()
    src, dst = next(((a, b) for a, b in pairs if me in (a, b)), (None, None))
    if me == src:  # one warm-up message per pair, then all pairs at once
        comm.Send(buf, dst)
    elif me == dst:
        comm.Recv(buf, src)
    comm.Barrier()
    t = MPI.Wtime()
    for _ in range(REPS if me in (src, dst) else 0):
        if me == src:
            comm.Send(buf, dst)
        else:
            comm.Recv(buf, src)
    took = comm.allreduce(MPI.Wtime() - t if me == dst else 0.0, op=MPI.MAX)
    rest()
    rates = {"total": len(pairs) * REPS * buf.size * 8 / took / 1e6} if me == 0 else None
if me == 0:
    print(MPI.Get_library_version().splitlines()[0])
    print(json.dumps(rates))
