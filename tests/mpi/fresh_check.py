"""The fresh-job check (colltune.tune.fresh) in an MPI job, with jobs spawned from it
(colltune.tune.spawn.FreshJobs): every rank must get the same times and the same rules, a choice
the spawned job cannot force must come back infinitely slow, and a size contested in the samples
must be timed in two fresh jobs per pass.  With the calls this short, what wins is up to the
timings; whatever it is, the rules must tile the sizes and every rank must keep the same.  The
network warm-up (colltune.tune.timing.warm_network) runs until its time has passed, in the same
rounds on every rank, in this job and in a spawned one; where the tuner warms it, the table's
provenance says so.
Usage: python -m mpi4py fresh_check.py
"""

import json
import math
import re

from mpi4py import MPI

from colltune.tune import measure
from colltune.tune.cli import _warm
from colltune.tune.forcing import MpichForcer
from colltune.tune.fresh import check_fresh
from colltune.tune.measure import network_warmup
from colltune.tune.select import choice, grid_sizes
from colltune.tune.spawn import FreshJobs
from colltune.tune.table import NATIVE, Candidate, Rule, Sample
from colltune.tune.timing import warm_network

comm = MPI.COMM_WORLD
procs = comm.Get_size()


def same_everywhere(what: str, value: object) -> None:
    mine = json.dumps(value, sort_keys=True, default=str)
    if comm.allgather(mine) != [mine] * procs:
        raise AssertionError(f"ranks disagree on {what}: {mine}")


if network_warmup(comm) != 0:
    raise AssertionError("one host: no network to warm")
start = MPI.Wtime()
rounds = warm_network(comm, 0.2)
same_everywhere("the warm-up's rounds", rounds)
# rank 0 decides when the time is up: a rank that entered later may have seen a little less of it
short = comm.Get_rank() == 0 and MPI.Wtime() - start < 0.2
if warm_network(comm, 0) != 0 or (procs > 1 and (rounds < 1 or short)) or (procs == 1 and rounds):
    raise AssertionError(f"warm_network(0.2): {rounds} rounds in {MPI.Wtime() - start:.3f} s at P = {procs}")

# one host: the tuner does not warm; on hosts of their own (the network_warmup it reads, patched)
# it does, and notes the rounds for the table's provenance
said: list[str] = []
notes: list[str] = []
if _warm(comm, said.append, notes) != 0 or said or notes:
    raise AssertionError(f"one host: the tuner warmed the network ({said}, {notes})")
measure.network_warmup = lambda _: 0.2
seconds = _warm(comm, said.append, notes)
noted = re.search(r"for 0\.2 s \((\d+) rounds\) before the first timing", notes[-1]) if notes else None
if seconds != 0.2 or len(notes) != 1 or noted is None or (int(noted[1]) >= 1) != (procs > 1):
    raise AssertionError(f"hosts of their own at P = {procs}: the tuner's warm-up notes {notes}")
measure.network_warmup = network_warmup

forcer = MpichForcer(MPI.Get_library_version())
other_tree = "knomial_1" if forcer.tree_type == "kary" else "kary"
jobs = FreshJobs(comm, forcer, reps=3, warmup=1, network_warmup=0.2)
spawned = max(1, procs - 1)  # a job for the rules of fewer processes than this one has
times = jobs("bcast", spawned, [(1024, choice(NATIVE, {})), (2048, choice("tree", {"tree_type": other_tree, "k": 2})),
                       (4096, choice("scatter_ring_allgather", {}))])
same_everywhere("the fresh job's times", times)
if sorted(times) != [1024, 2048, 4096] or not math.isinf(times[2048]) or not all(
        0 < times[s] < 1 for s in (1024, 4096)):
    raise AssertionError(f"fresh job times {times}: expected finite times at 1024 and 4096 B, inf at 2048 B "
                         f"(tree_type {other_tree} cannot be forced in a job of tree_type {forcer.tree_type})")
same_everywhere("the spawned job's warm-up", jobs.warmed)
if len(jobs.warmed) != 1 or (jobs.warmed[0] < 1) != (spawned == 1):
    raise AssertionError(f"the spawned job warmed its network in {jobs.warmed} rounds at P = {procs}")
same_everywhere("the spawned job's hosts", jobs.hosts)
if jobs.hosts != [1] or jobs.sizes != [spawned]:
    raise AssertionError(f"the spawned job ran {jobs.sizes} processes on {jobs.hosts} hosts, not {spawned} on this one")

sizes = grid_sizes(8192)
samples = {s: Sample(procs=procs, size=s, candidates=(Candidate(algorithm=NATIVE, time=1.0),
                                                       Candidate(algorithm="pairwise", time=1.1)))
           for s in sizes if s >= 8192}
rules = (Rule(size_min=0, size_max=None, algorithm=NATIVE),)
jobs = FreshJobs(comm, forcer, reps=3, warmup=1)
lines: list[str] = []
out = check_fresh(jobs, "alltoall", procs, rules, sizes, samples, settle_call=0.5, tolerance=-1.0, say=lines.append)
# one contested size, after the rules' own choice at 4096 B: a tolerance of -1 makes any finite
# time a lead there, so both passes run and the size is won whatever the calls took (a second
# contested size would follow a won one and need a real lead: on a loaded machine, a coin toss)
same_everywhere("the rules", [r.model_dump() for r in out])
if [(r.size_min, r.algorithm) for r in out] != [(0, NATIVE), (4097, "pairwise")] or jobs.jobs != 4 or \
        jobs.warmed != [0] * 4:
    raise AssertionError(f"rules {[(r.size_min, r.algorithm) for r in out]} after {jobs.jobs} jobs; lines {lines}")
forcer.close()
print(f"fresh check passed: P={procs}, {jobs.jobs} jobs", flush=True)
