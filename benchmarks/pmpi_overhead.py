"""The interposition library's cost on calls it sends back to the MPI library, on localhost.

Run: ``python benchmarks/pmpi_overhead.py [--procs 1,2,4] [--rounds 201] [--sizes 8,1024,65536]
[--json FILE] [--results DIR]``.

Builds ``benchmarks/c/pmpi_overhead.c`` with the MPI wheel's ``mpicc`` and runs it under
``LD_PRELOAD=$(colltune lib)`` twice: with a decision table that says ``native`` for every
collective (each call goes through colltune's wrapper, finds its signature, and is sent to
``PMPI_<Coll>``), and with no table (the wrapper passes every call on at once).  In each job the
program times, interleaved in rounds, loops of ``MPI_<Coll>`` (through the wrapper) and of
``PMPI_<Coll>`` (the library alone) on the same buffers: the slowest rank's time per call.  The
overhead of a (collective, size) is the median over the rounds of the difference; the target is
at most 2 % of the library's time or 0.3 us, whichever is larger.  The first call of a signature
(which starts Python and agrees on the decision) is in the warm-up, not in the rounds.  At P = 1
the collectives cost tens of nanoseconds, so the wrapper's own cost shows there without noise;
at P = 4 the 4 ranks share this machine's 2 cores (the program asks for MPI_THREAD_MULTIPLE, under
which MPICH's waiting ranks yield their core; see the C source).
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Overhead targets: a fraction of the library's time, or an absolute floor (seconds).
TARGET_FRACTION, TARGET_SECONDS = 0.02, 0.3e-6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--rounds", type=int, default=201)
    parser.add_argument("--sizes", default="8,1024,65536", help="block sizes in bytes (multiples of 8)")
    parser.add_argument("--json", help="write every round here")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = parser.parse_args()
    from colltune.collectives import COLLECTIVES
    from colltune.pmpi import library_path
    from colltune.tune import NATIVE, fixed_table, write_table

    bindir = Path(sys.executable).parent
    mpicc, mpiexec = shutil.which("mpicc", path=str(bindir)), shutil.which("mpiexec", path=str(bindir))
    if mpicc is None or mpiexec is None:
        sys.exit("mpicc and mpiexec of the mpich wheel are needed (pip install 'colltune[mpich]')")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        exe, table = Path(tmp) / "pmpi_overhead", Path(tmp) / "native.json"
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(HERE / "c" / "pmpi_overhead.c")], check=True)
        write_table(fixed_table({c: (NATIVE, {}) for c in COLLECTIVES}, "benchmarks/pmpi_overhead.py"), table)
        jobs = [(procs, config, extra) for procs in (int(p) for p in args.procs.split(","))
                for config, extra in (("native table", {"COLLTUNE_TABLE": str(table)}), ("no table", {}))]
        for procs, config, extra in jobs:
            env = {k: v for k, v in os.environ.items() if k != "COLLTUNE_TABLE"}
            env.update(extra, LD_PRELOAD=str(library_path()))
            print(f"P={procs}, {config}: {args.rounds} rounds ...", flush=True)
            out = subprocess.run([mpiexec, "-n", str(procs), str(exe), str(args.rounds), args.sizes],
                                 env=env, check=True, capture_output=True, text=True, timeout=1800).stdout
            cells: dict[tuple[str, int], list[tuple[float, float]]] = {}
            for line in out.splitlines():
                coll, size, _, wrapped, library = line.split()
                cells.setdefault((coll, int(size)), []).append((float(wrapped), float(library)))
            for (coll, size), runs in cells.items():
                extra_s = statistics.median(w - lib for w, lib in runs)
                lib_s = statistics.median(lib for _, lib in runs)
                allowed = max(TARGET_FRACTION * lib_s, TARGET_SECONDS)
                results.append({"config": config, "procs": procs, "collective": coll, "size": size,
                                "library_s": lib_s, "overhead_s": extra_s, "ok": extra_s <= allowed, "rounds": runs})
    print(f"\n{'P':>2} {'config':<13} {'collective':<10} {'size':>7} {'library us':>11} {'overhead us':>12} "
          f"{'overhead %':>11}  target")
    for r in results:
        print(f"{r['procs']:>2} {r['config']:<13} {r['collective']:<10} {r['size']:>7} {r['library_s'] * 1e6:>11.2f} "
              f"{r['overhead_s'] * 1e6:>12.3f} {100 * r['overhead_s'] / r['library_s']:>10.1f}%  "
              f"{'met' if r['ok'] else 'MISSED'}")
    worst = max(results, key=lambda r: r["overhead_s"] - max(TARGET_FRACTION * r["library_s"], TARGET_SECONDS))
    print(f"\nworst against the target: P={worst['procs']} {worst['config']} {worst['collective']} {worst['size']} B: "
          f"{worst['overhead_s'] * 1e6:.3f} us ({100 * worst['overhead_s'] / worst['library_s']:.1f} %); "
          f"{sum(not r['ok'] for r in results)} of {len(results)} cells miss "
          f"max({TARGET_FRACTION:.0%}, {TARGET_SECONDS * 1e6:.1f} us)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    from colltune.report.results import Headline, Table, save

    headline = []
    for procs in sorted({r["procs"] for r in results}):
        mine = [r for r in results if r["procs"] == procs]
        low, high = min(r["overhead_s"] for r in mine), max(r["overhead_s"] for r in mine)
        headline.append(Headline(figure=f"P = {procs}: overhead per call, with and without a table (range)",
                                 value=f"{low * 1e9:.0f} to {high * 1e9:.0f} ns, "
                                       f"{sum(not r['ok'] for r in mine)} of {len(mine)} cells miss",
                                 target=f"max({TARGET_FRACTION:.0%}, {TARGET_SECONDS * 1e6:.1f} us)"))
    rows = tuple((r["procs"], r["config"], r["collective"], r["size"], round(r["library_s"] * 1e6, 3),
                  round(r["overhead_s"] * 1e6, 4), "met" if r["ok"] else "missed") for r in results)
    path = save(__file__, args.results, title="The interposition library's own cost",
                what=f"A C program's MPI_<Coll> through `LD_PRELOAD=$(colltune lib)` against PMPI_<Coll> (the MPI "
                     f"library alone), interleaved in {args.rounds} rounds, for calls the table sends back to the "
                     f"library; median difference per call, on localhost at P = {args.procs}.",
                headline=headline,
                tables=[Table(columns=("P", "config", "collective", "size (B)", "library (us)", "overhead (us)",
                                       "target"), rows=rows)])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
