"""Fresh jobs: a sequence of a library's algorithms timed in a job spawned from the tuning job.

:class:`FreshJobs` is the ``run`` of :func:`colltune.tune.fresh.check_fresh`: every rank of the
tuning job calls it with the same arguments; rank 0 alone spawns as many processes as the job has
(``MPI_Comm_spawn`` of ``python -m mpi4py -m colltune.tune.spawn`` on ``MPI_COMM_SELF``, placed
by the launcher as it placed the job: one per host on the testbed).  The first ``procs`` of them,
as many as the rules are for (:mod:`colltune.tune.subcomms`), warm their network as the tuning
job did (``network_warmup`` seconds, :func:`colltune.tune.timing.warm_network`), then force each
algorithm of the sequence in turn and time it as the tuning job's
:class:`colltune.tune.measure.LibraryTimer` does (:func:`colltune.tune.timing.time_forced`), then
send the times back to rank 0, which shares them; the other spawned processes wait asleep.  Every
job has the tuning job's size because hydra (MPICH's launcher) places a spawned job's processes
round-robin over the hosts, continuing where the last job stopped, and repeated spawns of fewer
processes than the job have crashed it (a corrupted heap, under its ssh launcher).  The tuning job's
forcer decides which control variables force each algorithm; the spawned job only writes them
(:class:`colltune.tune.mpit.ControlVariables`), so that it imports mpi4py, numpy and little of
colltune (the whole package takes about twice as long to import).  While the spawned job starts and
runs, the tuning job's ranks sleep in short steps rather than wait in MPI, which would spin on the
cores the spawned job needs where ranks share cores.
An exception in a spawned process ends the whole run (``python -m mpi4py`` aborts), so a failure
cannot leave the tuning job waiting.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mpi4py import MPI

from colltune.errors import ColltuneError, Unavailable
from colltune.runtime.quiet import sleep_until
from colltune.tune.mpit import ControlVariables
from colltune.tune.timing import TIMING_BUDGET, TIMING_FILL, TUNE_REST, time_forced, warm_network

if TYPE_CHECKING:
    from colltune.tune.select import Choice


class Forcer(Protocol):
    """What :class:`FreshJobs` needs of the tuning job's forcer (:mod:`colltune.tune.forcing`)."""

    fresh_communicator: bool

    def forceable(self, collective: str, name: str, params: dict[str, Any]) -> str | None: ...

    def settings(self, collective: str, name: str, params: dict[str, Any]) -> dict[str, int | bool]: ...


@dataclass
class FreshJobs:
    """Times sequences of the library's algorithms, forced as ``forcer`` forces them in the tuning
    job, in jobs spawned from ``comm`` (rank 0 spawns them); the timing parameters are
    :class:`colltune.tune.measure.LibraryTimer`'s."""

    comm: MPI.Comm
    forcer: Forcer
    reps: int = 10
    warmup: int = 2
    budget: float | None = TIMING_BUDGET
    fill: float = TIMING_FILL
    rest: float = TUNE_REST
    #: Seconds each spawned job exchanges blocks between every pair of ranks before its first timing.
    network_warmup: float = 0.0
    #: How many jobs were spawned.
    jobs: int = 0
    #: The rounds of the network warm-up each spawned job made, in order.
    warmed: list[int] = field(default_factory=list)
    #: How many hosts (processor names) the processes of each spawned job ran on, in order.
    hosts: list[int] = field(default_factory=list)
    #: How many processes each spawned job had, in order.
    sizes: list[int] = field(default_factory=list)

    def __call__(self, collective: str, procs: int, sequence: Sequence[tuple[int, Choice]]) -> dict[int, float]:
        """Seconds per call of each ``(size, choice)`` of ``sequence``, timed in that order on the
        first ``procs`` processes of one fresh job, by size (inf where the job could not force the
        choice)."""
        me = self.comm.Get_rank()
        result: dict[str, Any] | None = None
        if me == 0:
            try:
                runs, unforced = self._runs(collective, sequence)
            except ColltuneError as exc:
                result = {"error": f"cannot force {collective} in a fresh job: {exc}"}
            else:
                work = {"collective": collective, "fresh_communicator": self.forcer.fresh_communicator,
                        "reps": self.reps, "warmup": self.warmup, "budget": self.budget, "fill": self.fill,
                        "rest": self.rest, "network_warmup": self.network_warmup, "runs": runs, "procs": procs}
                result = _run_job(work, self.comm.Get_size())
                result.get("times", {}).update(dict.fromkeys(unforced, float("inf")))
        sleep_until(self.comm.Ibarrier())
        result = self.comm.bcast(result, root=0)
        if "error" in result:
            raise Unavailable(result["error"])
        self.jobs += 1
        self.warmed.append(int(result["warmed"]))
        self.hosts.append(int(result["hosts"]))
        self.sizes.append(int(result["procs"]))
        return {int(size): float(t) for size, t in result["times"].items()}

    def _runs(self, collective: str, sequence: Sequence[tuple[int, Choice]]
              ) -> tuple[list[tuple[int, dict[str, int | bool]]], list[int]]:
        """The spawned job's runs, in order: each size with the control variables that force its
        choice there; and the sizes whose choice this job cannot force."""
        runs, unforced = [], []
        for size, (name, params) in sequence:
            if self.forcer.forceable(collective, name, dict(params)):
                unforced.append(size)
            else:
                runs.append((size, self.forcer.settings(collective, name, dict(params))))
        return runs, unforced


def _run_job(work: dict[str, Any], procs: int) -> dict[str, Any]:
    """Spawn a job of ``procs`` processes from this rank alone, send it ``work`` and wait asleep
    for its answer: ``{"times", "warmed", "hosts", "procs"}``, or ``{"error"}`` if it cannot be spawned."""
    try:
        inter = MPI.COMM_SELF.Spawn(sys.executable, ["-m", "mpi4py", "-m", __name__], maxprocs=procs)
    except MPI.Exception as exc:
        return {"error": f"cannot spawn a fresh job: {exc}"}
    try:
        inter.bcast(work, root=MPI.ROOT)
        answer: dict[str, Any] = sleep_until(inter.irecv(source=0))
    finally:
        inter.Disconnect()
    return answer


def _child(parent: MPI.Intercomm) -> None:
    """The spawned job: on its first ``procs`` processes (the work's), warm the network, time the
    parent's runs (each a size and the control variables that force the choice there), send the
    times, the warm-up's rounds, their hosts and their number from rank 0; the other processes
    wait asleep."""
    comm = MPI.COMM_WORLD
    work = parent.bcast(None, root=0)
    me = comm.Get_rank()
    on = comm.Split(0 if me < work["procs"] else MPI.UNDEFINED, me)
    if on != MPI.COMM_NULL:
        variables = ControlVariables(work["fresh_communicator"])
        out: dict[int, float] = {}
        warmed = warm_network(on, work["network_warmup"])
        try:
            for size, settings in work["runs"]:
                out[size] = time_forced(on, variables, settings, work["collective"], size, work["reps"],
                                        work["warmup"], work["budget"], work["fill"], work["rest"]).price
        finally:
            variables.close()
        hosts = len(set(on.allgather(MPI.Get_processor_name())))
        if me == 0:
            parent.send({"times": out, "warmed": warmed, "hosts": hosts, "procs": on.Get_size()}, dest=0)
        on.Free()
    sleep_until(comm.Ibarrier())
    parent.Disconnect()


if __name__ == "__main__":
    _parent = MPI.Comm.Get_parent()
    if _parent == MPI.COMM_NULL:
        raise SystemExit("colltune.tune.spawn runs only in a job spawned by colltune tune (colltune.tune.spawn.FreshJobs)")
    _child(_parent)
