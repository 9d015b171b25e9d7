"""Fresh jobs: sequences of a library's algorithms, each timed in a job spawned from the tuning job.

:class:`FreshJobs` is the ``run`` of :func:`colltune.tune.fresh.check_fresh`: every rank of the
tuning job calls it with the same arguments; rank 0 alone spawns, at once, as many processes as the
job has for every sequence (``MPI_Comm_spawn`` of ``python -m mpi4py -m colltune.tune.spawn`` on
``MPI_COMM_SELF``, placed by the launcher as it placed the job), which split into jobs of the
tuning job's size that spread over the hosts as it does (one process a host on the testbed).  The
jobs then run one after another: each, in its turn, warms its network as the tuning job did
(``network_warmup`` seconds, :func:`colltune.tune.measure.warm_network`), forces each algorithm of
its sequence in turn and times it as the tuners do (:class:`colltune.tune.measure.LibraryTimer`),
and sends the times back to rank 0, which shares them.  A job's connections are its own (MPI
connects two processes when they first talk), so a job that waited for its turn is as fresh as one
spawned for it.  The processes waiting for their turn, and the tuning job's ranks while the jobs
run, sleep in short steps rather than wait in MPI, which would spin on the cores the running job
needs (the testbed runs 8 ranks on 2 cores).  Spawning costs: spawned from the whole tuning job,
whose ranks all wait inside ``MPI_Comm_spawn``, a job took 2.9 s to spawn on the testbed (MPICH, 12
jobs of a tune, 2026-11-27); from rank 0 alone, one job at a time, a pass of two jobs took 15.8-16.5
s (2026-11-28, 00:17), which spawning the four jobs of a check at once shortens.
An exception in a spawned process ends the whole run (``python -m mpi4py`` aborts), so a failure
cannot leave the tuning job waiting.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mpi4py import MPI

from colltune.models import Unavailable
from colltune.runtime.quiet import sleep_until
from colltune.tune.forcing import forcer_for
from colltune.tune.measure import TIMING_BUDGET, TIMING_FILL, TUNE_REST, LibraryTimer, warm_network
from colltune.tune.select import Choice


#: Tag of the parent's last message to every spawned process: all jobs are done, disconnect.
_DONE = 1
#: Seconds of the longest sleep of a spawned process waiting for its job's turn or for the end:
#: the processes of the other jobs wait while one job times, on the same cores.
TURN_POLL = 0.05


@dataclass
class FreshJobs:
    """Times sequences of ``target``'s algorithms (``mpich`` or ``openmpi``) in jobs spawned from
    ``comm``, as many processes a job as ``comm`` has; the timing parameters are :class:`LibraryTimer`'s."""

    comm: MPI.Comm
    target: str
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    rest: float = TUNE_REST
    #: Seconds each spawned job exchanges blocks between every pair of ranks before its first timing.
    network_warmup: float = 0.0
    #: How many jobs were run.
    jobs: int = 0
    #: The rounds of the network warm-up each job made, in order.
    warmed: list[int] = field(default_factory=list)
    #: How many hosts (processor names) the processes of each job ran on, in order.
    hosts: list[int] = field(default_factory=list)

    def __call__(self, collective: str, sequences: Sequence[Sequence[tuple[int, Choice]]]) -> list[dict[int, float]]:
        """For each of ``sequences``, seconds per call of each ``(size, choice)``, timed in that order
        in a fresh job of its own, by size (inf where the job could not force the choice); the jobs
        run one after another in the given order, all spawned at once."""
        me = self.comm.Get_rank()
        result: dict[str, Any] | None = None
        if me == 0:
            work = [{"target": self.target, "collective": collective, "reps": self.reps, "warmup": self.warmup,
                     "budget": self.budget, "fill": self.fill, "rest": self.rest,
                     "network_warmup": self.network_warmup,
                     "sequence": [(size, name, dict(params)) for size, (name, params) in sequence]}
                    for sequence in sequences]
            result = _run_jobs(work, self.comm.Get_size())
        sleep_until(self.comm.Ibarrier())
        result = self.comm.bcast(result, root=0)
        if "error" in result:
            raise Unavailable(result["error"])
        self.jobs += len(result["jobs"])
        self.warmed.extend(int(job["warmed"]) for job in result["jobs"])
        self.hosts.extend(int(job["hosts"]) for job in result["jobs"])
        return [{int(size): float(t) for size, t in job["times"].items()} for job in result["jobs"]]


def _run_jobs(work: list[dict[str, Any]], procs: int) -> dict[str, Any]:
    """Spawn ``len(work)`` jobs of ``procs`` processes at once from this rank alone, then give each
    job its ``work`` in turn and wait asleep for its answer: ``{"jobs": [{"times", "warmed", "hosts"},
    ...]}``, or ``{"error"}`` if they cannot be spawned."""
    try:
        inter = MPI.COMM_SELF.Spawn(sys.executable, ["-m", "mpi4py", "-m", __name__, str(procs)],
                                    maxprocs=procs * len(work))
    except MPI.Exception as exc:
        return {"error": f"cannot spawn fresh jobs: {exc}"}
    try:
        groups: list[list[int]] = sleep_until(inter.irecv(source=0))
        answers = []
        for job, members in zip(work, groups, strict=True):
            MPI.Request.waitall([inter.isend(job, dest=rank) for rank in members])
            answers.append(sleep_until(inter.irecv(source=members[0])))
        MPI.Request.waitall([inter.isend(None, dest=rank, tag=_DONE) for rank in range(inter.Get_remote_size())])
    finally:
        inter.Disconnect()
    return {"jobs": answers}


def _groups(names: Sequence[str], procs: int) -> list[list[int]]:
    """The spawned processes (their processor names, by rank) in jobs of ``procs``: each job takes
    the next process of every host in turn, so that the jobs spread over the hosts as one job does
    (one process a host on the testbed, where the launcher gives each host its share of the ranks)."""
    seen: dict[str, int] = {}
    turn = []
    for rank, name in enumerate(names):
        turn.append((seen.get(name, 0), rank))
        seen[name] = seen.get(name, 0) + 1
    order = [rank for _, rank in sorted(turn)]
    return [sorted(order[i:i + procs]) for i in range(0, len(order), procs)]


def _child(parent: MPI.Intercomm) -> None:
    """A spawned process: find its job, wait asleep for the job's turn, then warm the network, time
    the parent's sequence, send the times, the warm-up's rounds and the hosts from the job's first
    rank, and wait asleep until every job is done."""
    world = MPI.COMM_WORLD
    names = world.allgather(MPI.Get_processor_name())
    groups = _groups(names, int(sys.argv[1]))
    if world.Get_rank() == 0:
        parent.send(groups, dest=0)
    job = next(i for i, members in enumerate(groups) if world.Get_rank() in members)
    comm = world.Split(job, world.Get_rank())
    work = sleep_until(parent.irecv(source=0, tag=0), TURN_POLL)
    forcer = forcer_for(work["target"], MPI.Get_library_version())
    timer = LibraryTimer(comm, forcer, work["reps"], work["warmup"], work["budget"], work["fill"],
                         rest=work["rest"])
    out: dict[int, float] = {}
    warmed = warm_network(comm, work["network_warmup"])
    try:
        for size, name, params in work["sequence"]:
            try:
                out[size] = timer.price(work["collective"], name, comm.Get_size(), size, params)[0]
            except Unavailable:
                out[size] = float("inf")
    finally:
        forcer.close()
    hosts = len(set(comm.allgather(MPI.Get_processor_name())))
    if comm.Get_rank() == 0:
        parent.send({"times": out, "warmed": warmed, "hosts": hosts}, dest=0)
    sleep_until(parent.irecv(source=0, tag=_DONE), TURN_POLL)
    comm.Free()
    parent.Disconnect()


if __name__ == "__main__":
    _parent = MPI.Comm.Get_parent()
    if _parent == MPI.COMM_NULL:
        raise SystemExit("colltune.tune.spawn runs only in a job spawned by colltune tune (colltune.tune.spawn.FreshJobs)")
    _child(_parent)
