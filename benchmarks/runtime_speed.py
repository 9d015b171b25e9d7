"""colltune's runtime against MPICH's own implementation of the same algorithm, on localhost.

Run: ``OPENBLAS_NUM_THREADS=1 python benchmarks/runtime_speed.py [--procs 2,4] [--max-size 4MiB]
[--only bcast/binomial_tree,...] [--rounds 11] [--json FILE] [--results DIR]``.

Every algorithm MPICH can be made to run that colltune also has (the exact correspondences of
:data:`colltune.tune.libraries.MPICH`) is one MPI job per process count: MPICH is forced to run
its algorithm with a selection file (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``, written by
colltune's own export from a table that chooses that algorithm at every size, with
``MPIR_CVAR_DEVICE_COLLECTIVES=none``), and the same table is ``COLLTUNE_TABLE``.  In the job, at
every size from 8 B to ``--max-size`` (powers of 4, and the maximum), six things are timed,
interleaved in ``--rounds`` rounds (in a shuffled order each round, the same on every rank), each a
loop of back-to-back calls lasting about 10 ms (a round's time per call is the slowest rank's):

* ``mpich``: MPICH's algorithm, called from C (a colltune plan with ``algorithm="native"``, whose
  ``run()`` is one C++ call into ``MPI_<Coll>``);
* ``plan``: colltune's schedule of the algorithm, ``plan(...).run()`` (compiled executor);
* ``once``: the one-shot call ``colltune.<coll>(..., algorithm=NAME)``;
* ``auto``: the one-shot call with ``algorithm="auto"`` (the table resolves to NAME);
* ``once_native`` and ``mpi4py``: ``colltune.<coll>(..., algorithm="native")`` and mpi4py's own
  ``comm.<Coll>``.

Each ratio is the median over the rounds of the round's ratio.  The machine is noisy (a VM with 2
cores, 4 ranks at P = 4), and of hundreds of (algorithm, size, ratio) cells some land above a target
by chance; so every size where a ratio is above its target is measured again, in
``--confirm-jobs`` (3) new jobs of ``--confirm-rounds`` rounds (61) each, and the median of those
jobs' ratios replaces the first measurement.  Several jobs, not one longer job, because part of the
noise is fixed for the life of a job: where the kernel places each rank's pages (huge or not);
the time of a 4 MiB scatter at P = 4 ranges 1.6-2.5 ms between jobs, for MPICH and colltune
alike, but moves little within one (pyperf spawns worker processes for the same reason).  Every
rank is bound to a core (``mpiexec -bind-to core``; two per core at P = 4): unbound, the
scheduler moved ranks between the cores, and on 2026-11-24 the same binary read 19 cells above
1.10 in one run and 3 in another (P = 2 ring allgather at 32 KiB: 1.79 unbound, 0.99-1.01 in four
bound jobs).  Every job's ratios are kept in the ``--json`` file.  It prints, per
job, the worst size of each ratio, and at the end, for each ratio, the worst over every job, how
many cells are above the target, and which, against the targets (plan/mpich, once/plan and
once_native/mpi4py <= 1.10, auto/plan <= 1.05).  Reductions sum
float64 vectors.  Where MPICH runs another algorithm than the one it was told to, the size is not
compared (:func:`mpich_substitutes`).  The machine has 2 cores: at P = 4 the ranks share them
(MPICH busy-polls, and the scheduler's time slices are milliseconds), which the long rounds,
the shuffled interleaving and the medians are there to absorb.  Set OPENBLAS_NUM_THREADS=1 so that
numpy's idle BLAS threads do not take a core now and then.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The ratios and their targets.
TARGETS = {"plan/mpich": 1.10, "once/plan": 1.10, "once_native/mpi4py": 1.10, "auto/plan": 1.05}


def pairs(only: set[str] | None) -> list[tuple[str, str]]:
    """(collective, colltune algorithm) of every exact MPICH correspondence."""
    from colltune.tune.libraries import MPICH

    return [(c, a) for (c, a), m in MPICH.items() if m.exact and (not only or f"{c}/{a}" in only)]


def mpich_substitutes(collective: str, algorithm: str, procs: int, size: int) -> bool:
    """Whether MPICH runs another algorithm than ``algorithm``'s at this size: its reduce-scatter
    algorithms (Rabenseifner's) need at least as many elements as the largest power of two <= P,
    and fall back to binomial / recursive doubling below (``colltune.tune.export._guard_pof2``;
    float64 elements here)."""
    from colltune.tune.libraries import MPICH

    if MPICH[(collective, algorithm)].name not in ("reduce_scatter_gather", "reduce_scatter_allgather"):
        return False
    return size // 8 < 1 << (procs.bit_length() - 1)


def sizes(max_size: int) -> list[int]:
    out, n = [], 8
    while n < max_size:
        out.append(n)
        n *= 4
    return [*out, max_size]


# -- the driver ------------------------------------------------------------------------------------

def write_files(collective: str, algorithm: str, where: Path) -> tuple[Path, Path]:
    """A table choosing ``algorithm`` (with its default parameters) for ``collective`` at every size,
    and its MPICH export."""
    from colltune.algorithms import REGISTRY
    from colltune.files import write_atomic
    from colltune.tune import fixed_table, write_table
    from colltune.tune.export import mpich_text

    params = REGISTRY.get(collective, algorithm).validate_params({})
    table = fixed_table({collective: (algorithm, params)}, "benchmarks/runtime_speed.py", procs=(1, 64))
    table_path, mpich_path = where / f"{collective}-{algorithm}.json", where / f"{collective}-{algorithm}.mpich.json"
    write_table(table, table_path)
    write_atomic(mpich_path, mpich_text(table)[0])
    return table_path, mpich_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="2,4")
    parser.add_argument("--max-size", default="4MiB")
    parser.add_argument("--only", default="", help="comma-separated collective/algorithm pairs")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--confirm-rounds", type=int, default=61)
    parser.add_argument("--confirm-jobs", type=int, default=3)
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    parser.add_argument("--worker", nargs=2, metavar=("COLLECTIVE", "ALGORITHM"), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from colltune.units import parse_bytes

    max_size = parse_bytes(args.max_size)
    if args.worker:
        grid = [int(x) for x in args.sizes.split(",")] if args.sizes else sizes(max_size)
        worker(*args.worker, grid, args.rounds)
        return
    mpiexec = Path(sys.executable).parent / "mpiexec"
    results, worst = [], {name: (0.0, "") for name in TARGETS}
    over: dict[str, list[str]] = {name: [] for name in TARGETS}
    with tempfile.TemporaryDirectory() as tmp:
        for procs in (int(p) for p in args.procs.split(",")):
            for collective, algorithm in pairs(set(filter(None, args.only.split(",")))):
                table, selection = write_files(collective, algorithm, Path(tmp))
                env = {**os.environ, "COLLTUNE_TABLE": str(table), "MPIR_CVAR_DEVICE_COLLECTIVES": "none",
                       "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(selection)}

                def job(grid: str, rounds: int) -> list[dict]:
                    run = subprocess.run([str(mpiexec), "-bind-to", "core", "-n", str(procs), sys.executable, __file__, "--worker",
                                          collective, algorithm, "--max-size", str(max_size), "--rounds", str(rounds),
                                          "--sizes", grid], env=env, capture_output=True, text=True, timeout=3600)
                    if run.returncode != 0:
                        sys.exit(f"{collective}/{algorithm} on {procs} ranks failed:\n{run.stderr[-3000:]}")
                    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]

                t0 = time.monotonic()
                rows = {r["size"]: r for r in job("", args.rounds)}
                doubtful = [size for size, r in rows.items() if any(r["ratios"][n] > t for n, t in TARGETS.items())]
                if doubtful:
                    again = [job(",".join(map(str, doubtful)), args.confirm_rounds) for _ in range(args.confirm_jobs)]
                    for size, *jobs in zip(doubtful, *again, strict=True):
                        assert all(r["size"] == size for r in jobs)
                        rows[size] = {"size": size, "first": rows[size]["ratios"], "jobs": jobs,
                                      "ratios": {n: statistics.median(r["ratios"][n] for r in jobs) for n in TARGETS}}
                line = f"P={procs} {collective}/{algorithm:38}"
                for name, target in TARGETS.items():
                    top = max(rows.values(), key=lambda r: r["ratios"][name])
                    value = top["ratios"][name]
                    line += f" {name} {value:5.2f} @{top['size']:>8}"
                    if value > worst[name][0]:
                        worst[name] = (value, f"P={procs} {collective}/{algorithm} at {top['size']} B")
                    over[name] += [f"P={procs} {collective}/{algorithm} at {r['size']} B: {r['ratios'][name]:.2f}"
                                   + (" (jobs " + ", ".join(f"{j['ratios'][name]:.2f}" for j in r["jobs"]) + ")"
                                      if "jobs" in r else "")
                                   for r in rows.values() if r["ratios"][name] > target]
                print(f"{line}  ({time.monotonic() - t0:.0f} s, {len(doubtful)} sizes measured again"
                      f" in {args.confirm_jobs} jobs)", flush=True)
                results += [{"procs": procs, "collective": collective, "algorithm": algorithm, **r}
                            for r in rows.values()]
    cells = len(results)
    print(f"\nworst over every job, and the cells above the target (of {cells}):")
    for name, (value, where) in worst.items():
        print(f"  {name:20} {value:5.2f} (target {TARGETS[name]:.2f})  {where}; {len(over[name])} above")
        for cell in over[name]:
            print(f"      {cell}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    from mpi4py import MPI

    from colltune.report.results import Headline, Table, save

    labels = {"plan/mpich": "colltune plan / MPICH's same algorithm", "once/plan": "one-shot call / plan",
              "once_native/mpi4py": "`algorithm=\"native\"` one-shot / mpi4py's `comm.<Coll>`",
              "auto/plan": "`algorithm=\"auto\"` one-shot / plan of its choice"}
    rows = tuple((labels.get(name, name), TARGETS[name], round(statistics.median(r["ratios"][name] for r in results), 3),
                  round(worst[name][0], 3), len(over[name])) for name in TARGETS)
    path = save(__file__, args.results, title="The runtime against MPICH's own algorithms",
                what=f"colltune's schedules run by its compiled executor against MPICH's implementation of the same "
                     f"algorithm, {len(pairs(set(filter(None, args.only.split(',')))))} algorithms at P = {args.procs} on "
                     f"localhost (each rank bound to a core), 8 B to {args.max_size}: {cells} cells, each the median of "
                     f"{args.rounds} interleaved rounds; a cell above its target is measured again in "
                     f"{args.confirm_jobs} fresh jobs and keeps their median.",
                headline=[Headline(figure=f"{label}: median (worst)", value=f"{med:.2f} ({w:.2f}), {n} cells above",
                                   target=f"{target:.2f}") for label, target, med, w, n in rows],
                tables=[Table(columns=("ratio", "target", "median", "worst", "cells above the target"), rows=rows)],
                mpi=MPI.Get_library_version().strip().splitlines()[0], env="OPENBLAS_NUM_THREADS=1")
    print(f"results written to {path}")


# -- the worker, under mpiexec ---------------------------------------------------------------------

def worker(collective: str, algorithm: str, grid: list[int], rounds: int) -> None:
    import numpy as np
    from mpi4py import MPI

    import colltune
    from colltune.collectives import Problem, get_collective

    comm = MPI.COMM_WORLD
    procs, me = comm.Get_size(), comm.Get_rank()
    coll = get_collective(collective)
    once = getattr(colltune, collective)
    native = {"bcast": comm.Bcast, "scatter": comm.Scatter, "gather": comm.Gather, "allgather": comm.Allgather,
              "alltoall": comm.Alltoall, "reduce": comm.Reduce, "allreduce": comm.Allreduce,
              "barrier": comm.Barrier}[collective]
    order = random.Random(len(grid))
    for size in ([0] if collective == "barrier" else grid):
        if coll.reduces:
            size -= size % 8
        if mpich_substitutes(collective, algorithm, procs, size):
            continue
        send_n, recv_n = (x[me] for x in coll.buffers(Problem(collective, procs, 0, size)))
        dtype = np.float64 if coll.reduces else np.uint8
        item = np.dtype(dtype).itemsize
        send = np.ones(send_n // item, dtype)
        recv = np.zeros(recv_n // item, dtype)
        rooted = {"root": 0} if coll.rooted and not coll.synchronizes else {}
        buffers = (recv,) if collective == "bcast" else () if coll.synchronizes else (send, recv)
        kw = rooted
        op = {"op": "sum"} if coll.reduces else {}
        mine = colltune.plan(collective, *buffers, algorithm="native", **kw, **op)
        ours = colltune.plan(collective, *buffers, algorithm=algorithm, **kw, **op)
        assert ours.executor == "compiled", ours.executor
        # Each variant is a loop around the call as a user writes it (no wrapper between them).
        args = {"bcast": "buf, root=0, ", "barrier": ""}.get(collective, "send, recv, " + "op='sum', " * coll.reduces +
                                                              "root=0, " * coll.rooted)
        mpi4py_args = {"bcast": "buf, 0", "barrier": "", "reduce": "send, recv, SUM, 0", "allreduce": "send, recv, SUM",
                       "scatter": "send, recv, 0", "gather": "send, recv, 0"}.get(collective, "send, recv")
        calls_of = {"mpich": "mine()", "plan": "ours()", "once": f"once({args}algorithm={algorithm!r})",
                    "auto": f"once({args}algorithm='auto')", "once_native": f"once({args}algorithm='native')",
                    "mpi4py": f"native({mpi4py_args})"}
        names = {"mine": mine.run, "ours": ours.run, "once": once, "native": native, "SUM": MPI.SUM,
                 "buf": recv, "send": send, "recv": recv}
        variants = {}
        for name, call in calls_of.items():
            space: dict[str, object] = {}
            exec(f"def loop(n, {', '.join(f'{k}={k}' for k in names)}):\n    for _ in range(n):\n        {call}\n",
                 dict(names), space)
            variants[name] = space["loop"]
        for loop in variants.values():  # warm up, and first calls
            loop(3)
        comm.Barrier()
        t0 = MPI.Wtime()
        variants["plan"](5)
        per_call = comm.allreduce((MPI.Wtime() - t0) / 5, op=MPI.MAX)
        calls = max(3, min(20000, int(10e-3 / max(per_call, 1e-7))))
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(rounds):
            names = list(variants)
            order.shuffle(names)  # the same order on every rank: the loops are collective
            for name in names:
                loop = variants[name]
                comm.Barrier()
                t0 = MPI.Wtime()
                loop(calls)
                times[name].append(comm.allreduce((MPI.Wtime() - t0) / calls, op=MPI.MAX))
        mine.free()
        ours.free()

        def ratio(a: str, b: str) -> float:
            return statistics.median(x / y for x, y in zip(times[a], times[b]))

        if me == 0:
            ratios = {name: ratio(*name.split("/")) for name in TARGETS}
            print(json.dumps({"size": size, "calls": calls, "ratios": ratios,
                              "seconds": {k: statistics.median(v) for k, v in times.items()}}), flush=True)


if __name__ == "__main__":
    main()
