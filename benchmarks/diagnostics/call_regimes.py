"""Call-by-call times of an MPI library's own algorithms, forced in one job, on the testbed (root).

Run: ``python benchmarks/diagnostics/call_regimes.py [--library mpich|openmpi] [--collective alltoall] [--size 256KiB]
[--algorithms native,scattered|linear_sync@max_requests=4,...] [--calls 40] [--rounds 3] [--idle 0]
[--prelude coll:alg:size[:calls],...]
[--network-warmup 0] [--jobs 1] [--hosts 8] [--link 100Mbit]``.

Brings up a testbed (``colltune testbed up``, hosts on the testbed's TCP), runs itself ``--jobs``
times under ``colltune testbed run`` (one rank per host; Open MPI from the venv of
``library_testbed.py --library openmpi``) and tears the testbed down.  In each job, every rank
first exchanges 256 KiB with every other, one peer at a time, for ``--network-warmup`` seconds
(:func:`colltune.tune.timing.warm_network`, what the C client of ``bench --library`` and the
tuner do on a testbed), then each round takes the algorithms in turn; each is forced through MPI_T
(:func:`colltune.tune.forcing.forcer_for`; ``native`` is the library's own choice; Open MPI's on a
communicator duplicated after forcing), every rank rests
50 ms (:data:`colltune.tune.measure.REST`) or ``--idle`` seconds if longer, makes 2 warm-up calls, then ``--calls`` calls, each
after a barrier and timed alone, as the C client of ``bench --library`` does.  It prints per round
and algorithm the slowest rank's mean call (the client's figure), the fastest and slowest call and
every call (the slowest rank's time), in ms.  ``--prelude`` steps (each ``collective:algorithm:size``
with ``calls`` calls, 10 by default) run once before the rounds, timed and printed the same way.
An algorithm may carry parameter values, each after an ``@`` (``linear_sync@max_requests=4``,
``pipeline@segsize=8192``), forced as the tuner forces them; without any the library's defaults run.

What it showed (docs/tune.md, "What an export gains a C program"): MPICH's own all-to-all of
256 KiB runs in two regimes on the 100 Mbit/s testbed, about 165 ms and 205-260 ms a call, for
seconds at a time, where the scattered one stays near 180 ms; and Open MPI's binomial scatter of
8 KiB takes 6.4-6.5 ms a call (mean of 100) in the first seconds of most fresh jobs against 4.7-4.8
for the linear one, and 4.8 ms from the first call after 3 s of network warm-up (``--library openmpi --collective scatter --size 8KiB
--algorithms binomial,basic_linear --calls 100 --rounds 2 --jobs 5 [--network-warmup 3]``).  And Open MPI's linear gather of 32 KiB, as fast as the others in its
median call (19 ms), loses a packet at the root's switch port in about one call of ten (35-40 ms,
or 230 ms on a timeout), which the tuner prices by the mean since (``--library openmpi
--collective gather --size 32KiB --algorithms native,basic_linear,linear_sync --prelude
gather:basic_linear:16KiB:20 --jobs 3 --network-warmup 3``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from library_testbed import openmpi_setup  # this directory's, on the path when run as a script

from colltune.collectives import COLLECTIVES
from colltune.units import parse_bytes


def inner(args: argparse.Namespace) -> None:
    import numpy as np
    from mpi4py import MPI

    from colltune.tune.forcing import forcer_for
    from colltune.tune.measure import REST
    from colltune.tune.timing import buffers, warm_network

    world = MPI.COMM_WORLD
    me, procs = world.Get_rank(), world.Get_size()
    forcer = forcer_for(args.library, MPI.Get_library_version())
    start = MPI.Wtime()
    rounds = warm_network(world, args.network_warmup)
    if me == 0 and rounds:
        print(f"network warm-up: {rounds} rounds of 256 KiB between every pair in {MPI.Wtime() - start:.1f} s",
              flush=True)

    def run(label: str, collective: str, alg: str, size: int, calls: int) -> None:
        bufs = buffers(collective, procs, me, size)  # the tuners' buffers, root 0
        name, params = algorithm(alg)
        forcer.force(collective, name, params)
        comm = world.Dup() if forcer.fresh_communicator else world
        call = getattr(comm, collective.capitalize())
        try:
            comm.Barrier()
            time.sleep(max(REST, args.idle))
            comm.Barrier()
            for _ in range(2):
                call(*bufs)
            mine = np.empty(calls)
            for i in range(calls):
                comm.Barrier()
                t0 = MPI.Wtime()
                call(*bufs)
                mine[i] = MPI.Wtime() - t0
        finally:
            if comm is not world:
                comm.Free()
            forcer.restore()
        slowest = np.empty(calls)
        world.Allreduce(mine, slowest, op=MPI.MAX)
        mean = world.allreduce(float(mine.mean()), op=MPI.MAX)
        if me == 0:
            print(f"{label} {collective} {size} B {alg:<12} mean {mean * 1e3:7.1f} ms  "
                  f"calls {slowest.min() * 1e3:.0f}-{slowest.max() * 1e3:.0f}: "
                  + " ".join(f"{t * 1e3:.0f}" for t in slowest), flush=True)

    for collective, alg, size, calls in args.prelude:
        run("prelude", collective, alg, size, calls)
    for rnd in range(args.rounds):
        for alg in args.algorithms.split(","):
            run(f"round {rnd}", args.collective, alg, args.size, args.calls)


def algorithm(text: str) -> tuple[str, dict[str, int]]:
    """``name@key=value@...`` as the algorithm's name and its parameter values (integers)."""
    name, *settings = text.split("@")
    params = {}
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise argparse.ArgumentTypeError(f"algorithm {text!r}: expected name@key=integer, got {item!r}")
        params[key] = int(value)
    return name, params


def prelude(text: str) -> list[tuple[str, str, int, int]]:
    """Parse ``--prelude``: ``collective:algorithm:size[:calls]`` steps separated by commas."""
    steps = []
    for item in filter(None, text.split(",")):
        fields = item.split(":")
        if len(fields) not in (3, 4) or fields[0] not in COLLECTIVES:
            raise argparse.ArgumentTypeError(f"--prelude step {item!r}: expected collective:algorithm:size[:calls]")
        algorithm(fields[1])
        steps.append((fields[0], fields[1], parse_bytes(fields[2]), int(fields[3]) if len(fields) == 4 else 10))
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--library", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--openmpi-venv", type=Path, default=Path.home() / ".cache" / "colltune-tests" / "openmpi")
    parser.add_argument("--collective", choices=sorted(COLLECTIVES), default="alltoall")
    parser.add_argument("--size", default="256KiB", help="block size (bytes, or with a unit)")
    parser.add_argument("--algorithms", default="native,scattered",
                        help="the library's algorithm names, comma-separated, each with @key=value parameters if any")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=float, default=0.0, help="seconds of rest before each algorithm's calls, if more than 0.05")
    parser.add_argument("--prelude", type=prelude, default=[],
                        help="steps run once before the rounds, collective:algorithm:size[:calls] separated by commas")
    parser.add_argument("--network-warmup", type=float, default=0.0,
                        help="seconds of pairwise 256 KiB exchanges between every pair of ranks at the start of each job")
    parser.add_argument("--jobs", type=int, default=1, help="fresh jobs, one after another")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    args.size = parse_bytes(str(args.size))
    for alg in args.algorithms.split(","):
        try:
            algorithm(alg)
        except argparse.ArgumentTypeError as exc:
            parser.error(str(exc))
    if args.inner:
        inner(args)
        return
    run = [sys.executable, "-m", "colltune", "testbed"]
    subprocess.run([*run, "up", "--hosts", str(args.hosts), "--link", args.link], check=True)
    try:
        launch, python = ([], sys.executable) if args.library == "mpich" else openmpi_setup(args.openmpi_venv)
        for job in range(args.jobs):
            if args.jobs > 1:
                print(f"job {job + 1}/{args.jobs}", flush=True)
            subprocess.run([*run, "run", *launch, "--", python, __file__, "--inner", "--library", args.library,
                            "--collective", args.collective, "--size", str(args.size), "--algorithms",
                            args.algorithms, "--calls", str(args.calls), "--rounds", str(args.rounds),
                            "--idle", str(args.idle), "--network-warmup", str(args.network_warmup),
                            "--prelude", ",".join(":".join(map(str, step)) for step in args.prelude)],
                           check=True, timeout=3600)
    finally:
        subprocess.run([*run, "down"], check=False)


if __name__ == "__main__":
    main()
