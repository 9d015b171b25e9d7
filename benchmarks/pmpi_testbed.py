"""A C program through the interposition library against the mpi4py plan of the same algorithm,
on the emulated cluster (needs root).

Run: ``python benchmarks/pmpi_testbed.py [--hosts 8] [--link 100Mbit] [--sizes 65536,524288]
[--rounds 11] [--repeat 3] [--json FILE] [--results DIR]``.

Brings up a testbed (``colltune testbed up``: one switch, ``--hosts`` hosts, ``--link`` links),
and for the two algorithms that exist in no MPI library, paper 002's symmetric broadcast
(``bcast/symmetric_async``) and paper 000's coordinated gather (``gather/coordinated``), times at
each size, one rank per host:

* ``c``: ``benchmarks/c/pmpi_overhead.c``, built with the wheel's ``mpicc`` and run under
  ``LD_PRELOAD=$(colltune lib)`` with a table that picks the algorithm at every size: its
  ``MPI_Bcast``/``MPI_Gather`` run colltune's algorithm, and its ``PMPI_`` calls, interleaved in
  the same rounds, MPICH's own default (reported for context);
* ``plan``: ``colltune.plan(...).run()`` of the same algorithm from Python (mpi4py), timed the
  same way (loops of at least ``--min-calls`` back-to-back calls, the slowest rank's time per call,
  ``--rounds`` rounds per job), each round also with a loop of mpi4py's ``comm.Bcast`` or
  ``comm.Gather`` (MPICH's default) in the C program's order: on TCP a loop inherits the
  congestion the loop before it left, so both jobs must run the same sequence.

The two jobs run ``--repeat`` times each, alternating (C first, then the plans first, ...), so that
a slow spell of the network (TCP's state carries over from job to job) falls on both; each figure
is the median over every round of its jobs.

It prints, per algorithm and size, the three medians, ``c / plan`` against the target (within 5
%) and the means (where TCP's retransmission timeouts, which strike some calls at random under
incast, show), and tears the testbed down.  Where those timeouts strike, a cell's rounds fall into
two modes (no loss, and a loss and its recovery) and its median moves with the share of rounds
that drew a loss, so it also prints what separates the algorithm from that chance: ``C/plan p10``,
the ratio of the 10th percentiles (the rounds without loss), and the p-value of a Mann-Whitney U
test of the C rounds against the plan rounds (small: the two do not run alike).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from scipy.stats import mannwhitneyu

HERE = Path(__file__).resolve().parent
#: The algorithms compared: (collective, algorithm).
CASES = (("bcast", "symmetric_async"), ("gather", "coordinated"))
TARGET = 0.05


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (seconds)."""
    return float(np.quantile(values, q))


def worker(sizes: list[int], rounds: int, min_calls: int) -> None:
    """Under mpiexec: time the plans as the C program times its calls; rank 0 prints
    ``COLL SIZE ROUND PLAN_SECONDS MPICH_SECONDS`` per round.

    Each round times a loop of the plan and one of mpi4py's ``comm.Bcast``/``comm.Gather`` (MPICH's
    default) in the C program's alternating order, after the same warm-up and calibration, so that
    each loop runs after what it runs after in the C job (on TCP, a loop inherits the congestion
    state the one before it left)."""
    from mpi4py import MPI

    import colltune

    comm = MPI.COMM_WORLD
    procs, me = comm.Get_size(), comm.Get_rank()
    for coll, alg in CASES:
        for size in sizes:
            send = np.zeros(size, np.uint8)
            if coll == "bcast":
                plan = colltune.plan("bcast", send, root=0, algorithm=alg)
                native = partial(comm.Bcast, send, root=0)
            else:
                recv = np.zeros(size * procs, np.uint8)
                plan = colltune.plan("gather", send, recv, root=0, algorithm=alg)
                native = partial(comm.Gather, send, recv, root=0)

            def loop(n: int, run) -> float:
                comm.Barrier()
                t = time.perf_counter()
                for _ in range(n):
                    run()
                return comm.allreduce((time.perf_counter() - t) / n, op=MPI.MAX)

            loop(min_calls, native)
            loop(min_calls, plan.run)
            n = max(min_calls, int(5e-3 / max(loop(min_calls, native), 1e-8)))
            n = comm.allreduce(n, op=MPI.MAX)
            for r in range(rounds):
                if r % 2:
                    library = loop(n, native)
                    t = loop(n, plan.run)
                else:
                    t = loop(n, plan.run)
                    library = loop(n, native)
                if me == 0:
                    print(f"{coll} {size} {r} {t:.9e} {library:.9e}", flush=True)
            plan.free()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--sizes", default="65536,524288", help="block sizes in bytes (multiples of 8)")
    parser.add_argument("--rounds", type=int, default=11, help="rounds per job")
    parser.add_argument("--repeat", type=int, default=3, help="pairs of jobs (C program, plans), alternating")
    parser.add_argument("--min-calls", type=int, default=5)
    parser.add_argument("--json", help="write every round here")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.worker:
        worker(sizes, args.rounds, args.min_calls)
        return
    from colltune.pmpi import library_path
    from colltune.tune import fixed_table, write_table

    bindir = Path(sys.executable).parent
    mpicc, colltune_cmd = shutil.which("mpicc", path=str(bindir)), [sys.executable, "-m", "colltune"]
    if mpicc is None:
        sys.exit("mpicc of the mpich wheel is needed (pip install 'colltune[mpich]')")
    colls = ",".join(c for c, _ in CASES)
    times: dict[tuple[str, int], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        exe, table = Path(tmp) / "pmpi_overhead", Path(tmp) / "table.json"
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(HERE / "c" / "pmpi_overhead.c")], check=True)
        write_table(fixed_table({c: (a, {}) for c, a in CASES}, "benchmarks/pmpi_testbed.py"), table)
        subprocess.run([*colltune_cmd, "testbed", "up", "--hosts", str(args.hosts), "--link", args.link], check=True)
        try:
            env = dict(os.environ, LD_PRELOAD=str(library_path()), COLLTUNE_TABLE=str(table))

            def job(key: str, what: str, command: list[str], job_env: dict[str, str] | None) -> None:
                """Run ``command`` on the testbed; file its ``COLL SIZE ROUND MINE LIBRARY`` lines."""
                print(f"{what} ...", flush=True)
                out = subprocess.run([*colltune_cmd, "testbed", "run", "--", *command], env=job_env, check=True,
                                     capture_output=True, text=True, timeout=3600).stdout
                for line in out.splitlines():
                    coll, size, _, mine, library = line.split()
                    cell = times.setdefault((coll, int(size)), {"c": [], "mpich": [], "plan": []})
                    cell[key].append(float(mine))
                    cell["mpich"].append(float(library))

            c_job = partial(job, "c", f"C program under the library, {args.hosts} hosts",
                            [str(exe), str(args.rounds), args.sizes, colls, str(args.min_calls)], env)
            plan_job = partial(job, "plan", "mpi4py plans",
                               [sys.executable, __file__, "--worker", "--sizes", args.sizes, "--rounds",
                                str(args.rounds), "--min-calls", str(args.min_calls)], None)

            for k in range(args.repeat):  # the two jobs alternate, the first of them too
                for job in (c_job, plan_job) if k % 2 == 0 else (plan_job, c_job):
                    job()
        finally:
            subprocess.run([*colltune_cmd, "testbed", "down"], check=False)
    rows = []
    print(f"\n{'algorithm':<24} {'size':>8} {'C (ms)':>9} {'plan (ms)':>10} {'C/plan':>7} {'MPICH (ms)':>11}  target"
          f"  {'means: C':>9} {'plan':>8} {'MPICH':>8}  {'C/plan p10':>10} {'U-test p':>8}")
    for (coll, size), cell in times.items():
        alg = dict(CASES)[coll]
        c, plan, mpich = (statistics.median(cell[k]) for k in ("c", "plan", "mpich"))
        ok = abs(c / plan - 1) <= TARGET
        fast = quantile(cell["c"], 0.1) / quantile(cell["plan"], 0.1)
        same = float(mannwhitneyu(cell["c"], cell["plan"]).pvalue)
        rows.append({"collective": coll, "algorithm": alg, "size": size, "hosts": args.hosts, "link": args.link,
                     "c_s": c, "plan_s": plan, "mpich_s": mpich, "ok": ok, "c_over_plan_p10": fast,
                     "mann_whitney_p": same, "rounds": cell})
        means = [statistics.fmean(cell[k]) * 1e3 for k in ("c", "plan", "mpich")]
        print(f"{coll + '/' + alg:<24} {size:>8} {c * 1e3:>9.2f} {plan * 1e3:>10.2f} {c / plan:>7.3f} "
              f"{mpich * 1e3:>11.2f}  {'met   ' if ok else 'MISSED'}  {means[0]:>9.2f} {means[1]:>8.2f} {means[2]:>8.2f}"
              f"  {fast:>10.3f} {same:>8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    from colltune.report.results import Headline, Table, mpi_library_of, save

    table = tuple((f"{r['collective']}/{r['algorithm']}", r["size"], round(r["c_s"] * 1e3, 3),
                   round(r["plan_s"] * 1e3, 3), round(r["c_s"] / r["plan_s"], 3), round(r["mpich_s"] * 1e3, 3),
                   round(r["c_over_plan_p10"], 3)) for r in rows)
    path = save(__file__, args.results, title="C programs through the interposition library, on the testbed",
                what=f"A C program running paper 002's symmetric broadcast and paper 000's coordinated gather through "
                     f"`LD_PRELOAD=$(colltune lib)` against the mpi4py plan of the same algorithm, on the emulated "
                     f"cluster ({args.hosts} hosts, one switch, {args.link}); medians of every round of "
                     f"{args.repeat} alternating pairs of jobs, {args.rounds} rounds each.",
                headline=[Headline(figure=f"C / plan, {t[0]} {t[1] // 1024} KiB (MPICH's default: {t[5]:.1f} ms)",
                                   value=f"{t[4]:.2f}", target=f"within {TARGET:.0%}") for t in table],
                tables=[Table(columns=("algorithm", "size (B)", "C (ms)", "plan (ms)", "C / plan", "MPICH default (ms)",
                                       "C / plan, 10th percentiles"), rows=table)],
                root=True, mpi=mpi_library_of())
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
