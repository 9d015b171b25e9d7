"""Under mpiexec: the executor runs COPY and DELAY ops and scratch buffers, not only messages.

A hand-built broadcast: each non-root rank receives into SCRATCH, then copies
into RECV (requiring the receive), after a short DELAY that irequires the
receive.  The schedule is verified, then run twice and compared with the root's data.
"""

import numpy as np
from mpi4py import MPI

from colltune.runtime import ScheduleExecutor
from colltune.schedule import Buf, Region, ScheduleBuilder, verify

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
n = 1237
b = ScheduleBuilder(P, recv_bytes=n)
for r in range(1, P):
    b.need_scratch(r, n)
    got = b.recv(r, 0, Region(Buf.SCRATCH, 0, n))
    b.delay(r, 1e-4, irequires=[got])
    b.copy(r, Region(Buf.SCRATCH, 0, n), Region(Buf.RECV, 0, n), requires=[got])
    b.send(0, r, Region(Buf.RECV, 0, n))
schedule = b.build({"collective": "bcast", "root": 0, "size": n})
verify(schedule)
message = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
buf = message.copy() if me == 0 else np.zeros(n, dtype=np.uint8)
private = comm.Dup()
executor = ScheduleExecutor(schedule, private, {Buf.RECV: buf})
for _ in range(2):
    if me:
        buf[:] = 0
    executor.run()
    assert np.array_equal(buf, message), f"rank {me}: copy/delay schedule delivered wrong bytes"
executor.free()
private.Free()
comm.Barrier()
if me == 0:
    print(f"executor_check: P={P}: copy, delay and scratch ran correctly")
