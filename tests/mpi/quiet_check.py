"""colltune.runtime.quiet in an MPI job: quiet_bcast gives every rank the root's value, for every
root and kinds of value, and a rank waiting for it sleeps: while the root takes WAIT seconds
before it sends, a waiting rank uses less than a fifth of that in processor time (a rank blocked
in MPI's own broadcast spins through most of it).  sleep_until returns a request's message.
Usage: python -m mpi4py quiet_check.py
"""

import time

from mpi4py import MPI

from colltune.runtime.quiet import quiet_bcast, sleep_until

WAIT = 0.5

comm = MPI.COMM_WORLD
procs, me = comm.Get_size(), comm.Get_rank()
values = (None, True, {"size": 4096, "rule": [1, 2.5, "x"]}, list(range(20000)))
checks = 0
for root in range(procs):
    for value in values:
        got = quiet_bcast(comm, value if me == root else "not the root's", root)
        if got != value:
            raise AssertionError(f"quiet_bcast from root {root}: rank {me} got {str(got)[:80]!r}, not {str(value)[:80]!r}")
        checks += 1

root = procs - 1
comm.Barrier()
cpu = time.process_time()
if me == root:
    time.sleep(WAIT)
got = quiet_bcast(comm, "done" if me == root else None, root)
used = time.process_time() - cpu
if got != "done":
    raise AssertionError(f"rank {me} got {got!r} after the wait")
if me != root and used > WAIT / 5:
    raise AssertionError(f"rank {me} used {used:.3f} s of processor time waiting {WAIT} s for the root")
worst = comm.allreduce(used if me != root else 0.0, op=MPI.MAX)

incoming = comm.irecv(source=(me - 1) % procs, tag=7)
outgoing = comm.isend(me, dest=(me + 1) % procs, tag=7)
message = sleep_until(incoming)
outgoing.wait()
if message != (me - 1) % procs:
    raise AssertionError(f"rank {me}: sleep_until gave {message!r}, not rank {(me - 1) % procs}'s number")
if me == 0:
    print(f"quiet check passed: P={procs}, {checks} broadcasts, a waiting rank used at most {worst:.3f} s of "
          f"processor time in {WAIT} s")
