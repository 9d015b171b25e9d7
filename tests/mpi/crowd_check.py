"""colltune.probe.hosts.Crowd in an MPI job: rank 0 measures (here: sleeps PHASE seconds), pauses
(sleeps PHASE seconds, as while it fits), resumes (PHASE seconds) and ends; the other ranks
follow.  A following rank polls in MPI while rank 0 measures and sleeps while it fits: its
processor time over the three phases lies near two of them (a rank asleep throughout uses almost
none, one polling throughout about three), as far as the cores it shares allow.
Usage: python -m mpi4py crowd_check.py
"""

import os
import time

from mpi4py import MPI

from colltune.probe.hosts import Crowd

PHASE = 0.5

comm = MPI.COMM_WORLD
procs, me = comm.Get_size(), comm.Get_rank()
crowd = Crowd(comm)
comm.Barrier()
cpu, wall = time.process_time(), time.perf_counter()
if me == 0:
    time.sleep(PHASE)
    crowd.pause()
    time.sleep(PHASE)
    crowd.resume()
    time.sleep(PHASE)
    crowd.end()
else:
    crowd.follow()
used, took = time.process_time() - cpu, time.perf_counter() - wall
# the followers share the cores with each other (rank 0 sleeps): each polls for its share of them
share = min(1.0, len(os.sched_getaffinity(0)) / max(procs - 1, 1))
if me != 0 and not (took >= 3 * PHASE and 2 * PHASE * share * 0.5 <= used <= 2 * PHASE + 0.5 * PHASE):
    raise AssertionError(f"rank {me} used {used:.3f} s of processor time in {took:.3f} s: polling for two phases of "
                         f"{PHASE} s at a share {share:.2f} of a core and asleep for one gives about "
                         f"{2 * PHASE * share:.2f} s")
low = comm.allreduce(used if me != 0 else float("inf"), op=MPI.MIN)
if me == 0:
    print(f"crowd check passed: P={procs}, a following rank used at least {low:.3f} s of processor time in "
          f"{3 * PHASE} s")
