"""colltune's simulator against LogGOPSim (Hoefler, Schneider, Lumsdaine 2010) on the same GOAL
files: both totals, both times and both peak memories.

Run: ``python benchmarks/loggopsim_compare.py --loggopsim DIR [--results DIR]``, where DIR holds
the ``LogGOPSim`` and ``txt2bin`` binaries of spcl/LogGOPSim's ``src/LogGOPSim`` built with its
Makefile (it needs re2c, gengetopt and Graphviz's cgraph; the flags ``-O0 -g`` replaced by
``-O3`` for a fair race).  Each schedule comes from colltune's registry through ``colltune
export-goal``; LogGOPSim reads it after ``txt2bin`` converts it (that conversion is timed apart),
colltune reads the GOAL text itself.  LogGOPS parameters: L = 5 us, o = 1.5 us, g = 1 us,
G = 1 ns/B, S = 64 KiB (LogGOPSim takes them in nanoseconds).  Times and memories are each
program's whole run, in a process of its own (peak resident set).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from colltune.algorithms import REGISTRY
from colltune.models.params import LogGP
from colltune.report.results import Headline, Table, save
from colltune.sim import simulate
from colltune.sim.goal import read_goal, write_goal

NS = dict(L=5000, o=1500, g=1000, G=1, S=65536)  # LogGOPSim's units: ns and ns per byte
PARAMS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, S=65536)
CASES = [("alltoall", "direct", 64, 1024, {}), ("alltoall", "direct", 256, 1024, {}),
         ("alltoall", "direct", 512, 1024, {}), ("alltoall", "direct", 1024, 1024, {}),
         ("bcast", "binomial_tree", 1024, 1 << 20, {}),
         ("bcast", "binomial_tree_segmented", 256, 1 << 20, {"segment_size": 8192}),
         ("allreduce", "ring", 64, 1 << 16, {}), ("gather", "binomial_tree", 256, 4096, {}),
         ("barrier", "dissemination", 64, 0, {})]


def colltune_run(goal: str) -> None:
    """Read and simulate ``goal`` in this process; print the total (ns), the time and the peak."""
    t0 = time.perf_counter()
    result = simulate(read_goal(goal), "loggops", PARAMS)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"total_ns": result.total * 1e9, "seconds": seconds, "peak": peak}))


def timed(args: list[str]) -> tuple[str, float, int]:
    """Run ``args``: its standard output, its wall time (s) and its peak resident memory (bytes)."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss %M", *args], capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    peak = int(re.findall(r"maxrss (\d+)", proc.stderr)[-1]) * 1024
    return proc.stdout, seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loggopsim", required=True, help="directory of LogGOPSim and txt2bin")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    parser.add_argument("--colltune-run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.colltune_run:
        colltune_run(args.colltune_run)
        return
    tools = Path(args.loggopsim)
    for tool in ("LogGOPSim", "txt2bin"):
        if not (tools / tool).is_file():
            parser.error(f"--loggopsim {tools}: no {tool} there (build spcl/LogGOPSim's src/LogGOPSim with make)")
    rows = []
    print(f"{'case':48} {'messages':>9} {'LogGOPSim ns':>14} {'colltune ns':>14} {'LGS s':>7} {'ct s':>7} "
          f"{'LGS MB':>7} {'ct MB':>7}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for collective, algorithm, procs, size, params in CASES:
            schedule = REGISTRY.get(collective, algorithm).schedule(procs, 0, size, **params)
            goal, binary = str(Path(tmp) / "s.goal"), str(Path(tmp) / "s.bin")
            write_goal(goal, schedule)
            _, convert, _ = timed([str(tools / "txt2bin"), "-i", goal, "-o", binary])
            out, lgs_s, lgs_peak = timed([str(tools / "LogGOPSim"), "-f", binary, "-b",
                                          *[f"-{k}{v}" for k, v in NS.items()]])
            lgs_ns = int(re.search(r"Maximum finishing time at host \d+: (\d+)", out).group(1))
            ct_out, _, _ = timed([sys.executable, __file__, "--loggopsim", str(tools), "--colltune-run", goal])
            ct = json.loads(ct_out.strip().splitlines()[-1])
            name = f"{collective}/{algorithm} P={procs} {size} B"
            print(f"{name:48} {schedule.num_messages:9d} {lgs_ns:14d} {ct['total_ns']:14.0f} {lgs_s:7.2f} "
                  f"{ct['seconds']:7.2f} {lgs_peak / 2**20:7.0f} {ct['peak'] / 2**20:7.0f}", flush=True)
            rows.append((name, schedule.num_messages, lgs_ns, round(ct["total_ns"], 3), ct["total_ns"] == lgs_ns,
                         round(convert, 2), round(lgs_s, 2), round(ct["seconds"], 2), round(lgs_peak / 2**20),
                         round(ct["peak"] / 2**20)))
    sized = [r for r, case in zip(rows, CASES) if case[3] > 0]  # LogGOPSim wraps 0-byte messages' size - 1
    equal = sum(r[4] for r in sized)
    big = max(rows, key=lambda r: r[1])
    headline = [Headline(figure=f"totals equal (schedules without 0-byte messages); {big[0]}: LogGOPSim / colltune "
                                "time, peak memory",
                         value=f"{equal} of {len(sized)}; {big[6]:.1f} / {big[7]:.1f} s, {big[8]} / {big[9]} MiB",
                         target=f"{len(sized)} of {len(sized)}")]
    argv = [a if a != args.loggopsim else "DIR" for a in sys.argv[1:]]
    path = save(__file__, args.results, argv=argv, title="The simulator against LogGOPSim",
                what="Registry schedules written as GOAL, simulated by LogGOPSim (spcl/LogGOPSim, built with -O3, "
                     "its input converted by txt2bin) and by colltune (reading the GOAL text), LogGOPS L = 5 us, "
                     "o = 1.5 us, g = 1 us, G = 1 ns/B, S = 64 KiB: both totals, wall times and peak memories, "
                     "each program in a process of its own.  LogGOPSim prices a 0-byte message with (size - 1) "
                     "in unsigned arithmetic, which wraps; colltune takes size - 1 as 0 there.",
                headline=headline,
                tables=[Table(columns=("case", "messages", "LogGOPSim total (ns)", "colltune total (ns)", "equal",
                                       "txt2bin (s)", "LogGOPSim (s)", "colltune (s)", "LogGOPSim peak (MiB)",
                                       "colltune peak (MiB)"), rows=tuple(rows))])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
