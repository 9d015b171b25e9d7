"""Simulator speed and memory: the direct all-to-all (1 KiB blocks) and the segmented binomial
broadcast (1 MiB, 8 KiB segments) built from the registry and simulated in LogGOPS mode (L = 5 us,
o = 1.5 us, g = 1 us, G = 1 ns/B, S = 64 KiB) and in shared-link mode (PlogPT flows on a
full-bisection binary tree of 1 Gbit/s links), and the direct all-to-all read from its GOAL file.

Run: ``python benchmarks/simulate_speed.py [--procs 64,256,1024,4096] [--shared-upto 1024]
[--goal 1024] [--repeat 3] [--results DIR]``.  Every case runs in a process of its own, so that its
peak resident memory (the whole process: Python, numpy, colltune, the schedule and the
simulation) is its own; the table gives per case the messages, build (or GOAL read) and simulation
times and the peak memory per message, medians over the repeats with the range of the total.
Targets (issue [scale]): the all-to-all of 4096 ranks from the registry within 30 s and 256 bytes
per message, that of 1024 ranks within 1.5 s from the registry and 5 s from its GOAL file, the
shared-link mode within twice the LogGOPS time.

``--tune 16,64`` times the tuner instead (results file ``simulate_speed_tune``): ``colltune tune
--method simulate --procs P`` at each P (every collective, sizes to 4 MiB, the built-in 10 Gbit/s
profile), each in a process of its own within ``--limit`` seconds, with the seconds spent building
the candidates' schedules (Python) and simulating them (the C++ engine).  Target: ``--procs
2-4096`` within 5 minutes.  This machine is a 2-core VM whose times vary by
tens of percent from one minute to the next: the repeats' range says how much.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from colltune.algorithms import REGISTRY
from colltune.models.params import LogGP, PlogPT, Tabulated, TreeLevels
from colltune.report.results import Headline, Table, save
from colltune.sim import simulate
from colltune.sim.goal import read_goal, write_goal

LOGGOPS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, S=65536)
#: The profile ``--tune`` tunes on.
TUNE_PROFILE = "builtin:ethernet-10g-tcp"
CASES = {"alltoall": ("direct", 1024, {}), "bcast": ("binomial_tree_segmented", 1 << 20, {"segment_size": 8192})}


def shared_link(procs: int) -> PlogPT:
    """A full-bisection binary tree of 1 Gbit/s links (b(h) = 2^(h-1) b(1)), g(m) = 1 us + m G."""
    depth = max(1, (procs - 1).bit_length())
    b1 = 1.25e8
    return PlogPT(L=5e-6, g=Tabulated(sizes=(0, 1 << 20), values=(1e-6, 1e-6 + (1 << 20) / b1)),
                  bidirectional=TreeLevels(b=tuple(b1 * 2 ** h for h in range(depth))))


def one(collective: str, procs: int, mode: str, goal: str | None) -> dict:
    """Build (or read) and simulate one case in this process: its times (s), messages and peak
    resident memory (bytes)."""
    algorithm, size, params = CASES[collective]
    t0 = time.perf_counter()
    schedule = read_goal(goal) if goal else REGISTRY.get(collective, algorithm).schedule(procs, 0, size, **params)
    t1 = time.perf_counter()
    result = simulate(schedule, "loggops", LOGGOPS) if mode == "loggops" else \
        simulate(schedule, "plogpt", shared_link(procs))
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return {"build": t1 - t0, "simulate": t2 - t1, "messages": result.messages, "peak": peak, "total": result.total}


class Stopwatch:
    """Seconds spent in calls of one function, wrapped in its place."""

    def __init__(self, owner: object, name: str):
        self.seconds = 0.0
        inner = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(owner, name, timed)


def tune_one(procs: int) -> dict:
    """``tune --method simulate`` at ``procs`` in this process: seconds in all, building schedules
    and simulating them, and the peak resident memory (bytes)."""
    from colltune.algorithms.registry import Algorithm
    from colltune.cli import main as cli
    from colltune.sim import calls

    build, sim = Stopwatch(Algorithm, "schedule_for"), Stopwatch(calls, "simulate")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        cli(["tune", "--method", "simulate", "--procs", str(procs), "--profile", TUNE_PROFILE,
             "-o", str(Path(tmp) / "t.json")], standalone_mode=False)
        total = time.perf_counter() - start
    return {"total": total, "build": build.seconds, "simulate": sim.seconds,
            "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def tune_speed(counts: list[int], limit: float, directory: str | None) -> None:
    """Time :func:`tune_one` at each of ``counts`` in a process of its own (at most ``limit``
    seconds each) and save the results."""
    rows = []
    for procs in counts:
        print(f"tune --method simulate --procs {procs} ...", flush=True)
        try:
            out = subprocess.run([sys.executable, __file__, "--tune-one", str(procs)], capture_output=True, text=True,
                                 timeout=limit, check=True).stdout
        except subprocess.TimeoutExpired:
            rows.append((procs, f"> {limit:.0f}", "", "", ""))
            print(f"  not done within {limit:.0f} s", flush=True)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        rows.append((procs, round(r["total"], 1), round(r["build"], 1), round(r["simulate"], 1),
                     round(r["peak"] / 2**20)))
        print(f"  {r['total']:.1f} s (building schedules {r['build']:.1f} s, simulating {r['simulate']:.1f} s), "
              f"{r['peak'] / 2**20:.0f} MiB", flush=True)
    times = " / ".join(f"{t} s" for _, t, *_ in rows)
    save(__file__, directory, name="simulate_speed_tune", title="Tuning by simulation",
         what=f"`colltune tune --method simulate --procs P --profile {TUNE_PROFILE}` (every collective, sizes to "
              "4 MiB), one process per P: seconds in all, in building the candidates' schedules (Python) and in "
              "simulating them (the C++ engine), and peak memory.",
         headline=[Headline(figure="tune --method simulate, P = " + " / ".join(str(p) for p, *_ in rows),
                            value=times, target="P = 2-4096 within 300 s")],
         tables=[Table(columns=("P", "total (s)", "building schedules (s)", "simulating (s)", "peak memory (MiB)"),
                       rows=tuple(rows))])


def run_case(collective: str, procs: int, mode: str, goal: str | None, repeat: int) -> dict:
    """The case in ``repeat`` fresh processes: medians, and the range of build + simulate."""
    runs = []
    for _ in range(repeat):
        args = [sys.executable, __file__, "--one", f"{collective},{procs},{mode}"] + (["--goal-file", goal] if goal else [])
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    totals = [r["build"] + r["simulate"] for r in runs]
    return {"build": statistics.median(r["build"] for r in runs), "simulate": statistics.median(r["simulate"] for r in runs),
            "total": statistics.median(totals), "low": min(totals), "high": max(totals),
            "messages": runs[0]["messages"], "peak": statistics.median(r["peak"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="64,256,1024,4096")
    parser.add_argument("--shared-upto", type=int, default=1024, help="largest P simulated in shared-link mode")
    parser.add_argument("--goal", type=int, default=1024, help="P of the all-to-all read from GOAL (0: none)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    parser.add_argument("--tune", help="time tune --method simulate at these process counts instead")
    parser.add_argument("--limit", type=float, default=900.0, help="--tune: seconds one count may take")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--goal-file", help=argparse.SUPPRESS)
    parser.add_argument("--tune-one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tune_one:
        print(json.dumps(tune_one(args.tune_one)))
        return
    if args.tune:
        tune_speed([int(p) for p in args.tune.split(",")], args.limit, args.results)
        return
    if args.one:
        collective, procs, mode = args.one.split(",")
        print(json.dumps(one(collective, int(procs), mode, args.goal_file)))
        return
    rows, by_name = [], {}
    print(f"{'case':52} {'messages':>9} {'build s':>8} {'sim s':>8} {'total s':>8} {'B/msg':>6}", flush=True)

    def record(name: str, r: dict) -> None:
        per = r["peak"] / r["messages"]
        print(f"{name:52} {r['messages']:9d} {r['build']:8.3f} {r['simulate']:8.3f} {r['total']:8.3f} {per:6.0f}",
              flush=True)
        by_name[name] = r
        rows.append((name, r["messages"], round(r["build"], 3), round(r["simulate"], 3), round(r["total"], 3),
                     f"{r['low']:.2f}-{r['high']:.2f}", round(r["peak"] / 2**20), round(per)))

    for procs in (int(p) for p in args.procs.split(",")):
        for collective in CASES:
            for mode in ("loggops", "shared-link"):
                if mode == "shared-link" and procs > args.shared_upto:
                    continue
                name = f"{collective}/{CASES[collective][0]} P={procs} {mode}"
                record(name, run_case(collective, procs, mode, None, args.repeat))
    if args.goal:
        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "alltoall.goal")
            write_goal(path, REGISTRY.get("alltoall", "direct").schedule(args.goal, 0, CASES["alltoall"][1]))
            record(f"alltoall/direct P={args.goal} loggops, from its GOAL file",
                   run_case("alltoall", args.goal, "loggops", path, args.repeat))

    def figure(name: str) -> str:
        r = by_name[name]
        return f"{r['total']:.2f} s ({r['low']:.2f}-{r['high']:.2f}), {r['peak'] / r['messages']:.0f} B/message"

    headline = [Headline(figure=f"{name}: build + simulate, peak memory", value=figure(name), target=target)
                for name, target in (("alltoall/direct P=4096 loggops", "30 s, 256 B/message"),) if name in by_name]
    registry, goal = (by_name.get(name) for name in ("alltoall/direct P=1024 loggops",
                                                      f"alltoall/direct P={args.goal} loggops, from its GOAL file"))
    if registry and goal and args.goal == 1024:
        headline.append(Headline(figure="alltoall/direct P=1024 loggops: from the registry / from its GOAL file",
                                 value=f"{registry['total']:.2f} s / {goal['total']:.2f} s", target="1.5 s / 5 s"))
    for procs in (args.shared_upto, 1024):
        shared, loggops = (by_name.get(f"alltoall/direct P={procs} {mode}") for mode in ("shared-link", "loggops"))
        if shared and loggops:
            headline.append(Headline(figure=f"alltoall/direct P={procs}: shared-link / LogGOPS time",
                                     value=f"{shared['total'] / loggops['total']:.2f}", target="2"))
            break
    path = save(__file__, args.results, title="Simulator speed and memory",
                what="Direct all-to-all (1 KiB blocks) and segmented binomial broadcast (1 MiB, 8 KiB segments) "
                     "built from the registry (or read from a GOAL file) and simulated in LogGOPS mode and in "
                     "shared-link mode (PlogPT flows on a full-bisection binary tree of 1 Gbit/s links), each in a "
                     f"process of its own; medians of {args.repeat} runs, the range of the total, and the process's "
                     "peak resident memory.",
                headline=headline,
                tables=[Table(columns=("case", "messages", "build (s)", "simulate (s)", "total (s)", "total range (s)",
                                       "peak memory (MiB)", "memory per message (B)"), rows=tuple(rows))])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
