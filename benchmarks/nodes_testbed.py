"""Clusters of multi-core nodes on the emulated cluster (needs root): what colltune's own table,
run through the interposition library, and its MPICH export gain a C program when hosts run
several ranks, placed by block or round-robin.

Run: ``python benchmarks/nodes_testbed.py [--shapes 4x2,2x4] [--placements block,round-robin]
[--steps preload,mpich] [--link 100Mbit] [--max-size 512KiB] [--rounds 3] [--keep DIR]
[--results DIR]``.

For each shape HOSTSxRANKS and placement, it brings up a testbed (``colltune testbed up --hosts
HOSTS --ranks-per-host RANKS``, one switch, ``--link`` links), then as a user would:

1. ``colltune testbed run --placement P -- python -m colltune probe -o profile.json``: the default
   probe, given no topology (it finds the hosts, measures shared memory between two ranks of one
   host and the network among one rank per host, and infers a star of the hosts);
2. ``preload``: ``colltune tune --method simulate --profile profile.json`` (colltune's own flat and
   hierarchical algorithms, priced on the hosts the probe found), then ``colltune bench --library
   mpich --preload --testbed --placement P``: the OSU-like C client with MPICH's defaults against
   the same client under ``LD_PRELOAD=$(colltune lib)`` with the table, alternating over
   ``--rounds`` rounds (medians), for bcast, reduce, allreduce, allgather and gather at 64 KiB to
   ``--max-size`` (the issue's target: at least 1.3x over round-robin placement, geometric mean,
   no size below 0.95x);
3. ``mpich``: ``colltune testbed run --placement P -- python -m colltune tune --library mpich``
   (in the job: MPICH's own algorithms, simulated and the contenders timed), then ``colltune
   bench --library mpich`` with the exported selection file, for bcast, scatter, gather,
   allgather, alltoall, reduce and allreduce at 4 KiB to ``--max-size`` (target: 1.10x with block
   placement, no size below 0.95x).

It prints per configuration and step the geometric mean of default / with colltune over the sizes
and the worst size, writes ``benchmarks/results/nodes_testbed.json`` and tears each testbed down.
8 ranks on 2 cores: each job's ranks share this machine's cores, as on the one-rank-per-host
testbed; the client alternates the defaults and colltune's runs so that both meet the same load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRELOAD_COLLECTIVES = ("bcast", "reduce", "allreduce", "allgather", "gather")
EXPORT_COLLECTIVES = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce")
#: The issue's targets: (geometric mean, worst size) per step, where it sets one.
TARGETS = {("preload", "round-robin"): (1.3, 0.95), ("mpich", "block"): (1.10, 0.95)}
KiB = 1024


def colltune(*args: str, timeout: float = 3600) -> str:
    """``python -m colltune ARGS``; its output, or the end of its errors and exit."""
    res = subprocess.run([sys.executable, "-m", "colltune", *args], capture_output=True, text=True, timeout=timeout,
                         check=False)
    if res.returncode != 0:
        sys.exit(f"colltune {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    return res.stdout


def sizes_from(low: int, high: int) -> list[int]:
    """Powers of two from ``low`` to ``high`` bytes."""
    return [1 << k for k in range(low.bit_length() - 1, high.bit_length()) if low <= 1 << k <= high]


def gains(path: Path) -> tuple[float, float, int, dict[str, float]]:
    """(geometric mean, worst speedup, its size, per-collective geometric means) of a ``bench
    --library`` results file."""
    from colltune.tune.library_bench import geomean, read_library_bench

    results = read_library_bench(path)
    cells = results.cells
    worst = min(cells, key=lambda c: c.speedup)
    per = {coll: geomean([c.speedup for c in cells if c.collective == coll]) for coll in results.collectives()}
    return geomean([c.speedup for c in cells]), worst.speedup, worst.size, per


def run_config(shape: str, placement: str, args: argparse.Namespace, d: Path) -> list[dict]:
    """Probe, tune and bench one shape and placement; a row per step."""
    hosts, per_host = (int(x) for x in shape.split("x"))
    tag = f"{shape}-{placement}"
    colltune("testbed", "up", "--hosts", str(hosts), "--ranks-per-host", str(per_host), "--link", args.link)
    run = ["testbed", "run", "--placement", placement, "--"]
    bench = ["bench", "--library", "mpich", "--testbed", "colltune", "--placement", placement,
             "--rounds", str(args.rounds)]
    rows = []
    try:
        print(f"[{tag}] probe ...", flush=True)
        start = time.perf_counter()
        profile = d / f"profile-{tag}.json"
        colltune(*run, sys.executable, "-m", "colltune", "probe", "-o", str(profile))
        probe_s = time.perf_counter() - start
        if "preload" in args.steps:
            print(f"[{tag}] tune (simulate) and bench through LD_PRELOAD ...", flush=True)
            table = d / f"table-{tag}.json"
            colltune("tune", "--method", "simulate", "--profile", str(profile), "--procs", str(hosts * per_host),
                     "--max-size", args.max_size, *(f"-c{c}" for c in PRELOAD_COLLECTIVES), "-o", str(table))
            out = d / f"preload-{tag}.json"
            colltune(*bench, "--preload", "--table", str(table), "--sizes",
                     ",".join(map(str, sizes_from(64 * KiB, args.largest))), "-o", str(out))
            rows.append(row(shape, placement, "preload", out, probe_s))
        if "mpich" in args.steps:
            print(f"[{tag}] tune --library mpich in the job and bench the export ...", flush=True)
            table = d / f"mpich-table-{tag}.json"
            colltune(*run, sys.executable, "-m", "colltune", "tune", "--library", "mpich", "--max-size", args.max_size,
                     *(f"-c{c}" for c in EXPORT_COLLECTIVES), "-o", str(table))
            out = d / f"mpich-{tag}.json"
            colltune(*bench, "--table", str(table), "--sizes", ",".join(map(str, sizes_from(4 * KiB, args.largest))),
                     "-o", str(out))
            rows.append(row(shape, placement, "mpich", out, probe_s))
    finally:
        subprocess.run([sys.executable, "-m", "colltune", "testbed", "down"], check=False, capture_output=True)
    return rows


def row(shape: str, placement: str, step: str, path: Path, probe_s: float) -> dict:
    mean, worst, size, per = gains(path)
    line = {"shape": shape, "placement": placement, "step": step, "geomean": mean, "worst": worst,
            "worst_size": size, "per": per, "probe_s": probe_s, "file": path.name}
    target = TARGETS.get((step, placement))
    print(f"[{shape} {placement}] {step}: {mean:.2f}x (worst {worst:.2f}x at {size} B)"
          + (f"; target {target[0]}x, none below {target[1]}x" if target else "")
          + " | " + ", ".join(f"{c} {g:.2f}" for c, g in per.items()), flush=True)
    return line


def write_results(args: argparse.Namespace, rows: list[dict]) -> None:
    from colltune.report.results import Headline, Table, save

    headline, table = [], []
    for r in rows:
        target = TARGETS.get((r["step"], r["placement"]))
        what = "colltune's table through LD_PRELOAD" if r["step"] == "preload" else "MPICH export"
        if target:
            headline.append(Headline(figure=f"{r['shape']} {r['placement']}: {what} / MPICH defaults (worst size)",
                                     value=f"{r['geomean']:.2f}x ({r['worst']:.2f}x)",
                                     target=f"{target[0]}x ({target[1]}x)"))
        table.append((r["shape"], r["placement"], what, round(r["geomean"], 3), round(r["worst"], 3), r["worst_size"],
                      ", ".join(f"{c} {g:.2f}" for c, g in r["per"].items()), round(r["probe_s"])))
    path = save(__file__, args.results, title="Hosts of several ranks: what colltune gains a C program",
                what=f"On the testbed ({args.link} star) with several ranks per host, block or round-robin: the "
                     "default probe without a topology, then the OSU-like C client with MPICH's defaults against "
                     "colltune's table (flat and hierarchical algorithms, tuned by simulation on the probed "
                     "profile) through LD_PRELOAD, and against the MPICH export of a tune --library mpich; "
                     f"speedup = default / with colltune, medians of {args.rounds} alternating rounds.",
                headline=headline[:4],
                tables=[Table(columns=("shape", "placement", "colltune", "geomean", "worst", "worst size (B)",
                                       "per collective", "probe (s)"), rows=tuple(table))],
                root=True, mpi="MPICH")
    print(f"results written to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="4x2,2x4", help="HOSTSxRANKS, comma-separated [default: 4x2,2x4]")
    parser.add_argument("--placements", default="block,round-robin")
    parser.add_argument("--steps", default="preload,mpich", help="preload, mpich or both [default: both]")
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--max-size", default="512KiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", help="keep the profiles, tables and bench results in this directory")
    parser.add_argument("--results", help="write the results file here [default: benchmarks/results]")
    args = parser.parse_args()
    from colltune.units import parse_bytes

    args.largest = parse_bytes(args.max_size)
    args.steps = set(args.steps.split(","))
    if not args.steps <= {"preload", "mpich"}:
        sys.exit("--steps: preload, mpich or both")
    with tempfile.TemporaryDirectory(prefix="colltune-nodes-") as tmp:
        d = Path(args.keep) if args.keep else Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        rows = [r for shape in args.shapes.split(",") for placement in args.placements.split(",")
                for r in run_config(shape, placement, args, d)]
    write_results(args, rows)


if __name__ == "__main__":
    main()
