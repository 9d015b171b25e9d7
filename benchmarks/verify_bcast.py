"""Benchmark: build and verify every registered broadcast at one (P, size).

    python benchmarks/verify_bcast.py [--procs 33] [--size 4194304] [--results DIR]

Prints, per algorithm, the number of messages and the build and verify times
(seconds, one run each), and writes them to ``benchmarks/results/verify_bcast.json``.
"""

from __future__ import annotations

import argparse
import time

from colltune.algorithms import REGISTRY
from colltune.report.results import Headline, Table, save
from colltune.schedule import verify


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=33)
    ap.add_argument("--size", type=int, default=4 * 2**20, help="bytes")
    ap.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = ap.parse_args()
    rows = []
    for alg in REGISTRY.select("bcast"):
        t0 = time.perf_counter()
        s = alg.schedule(args.procs, 0, args.size)
        t1 = time.perf_counter()
        verify(s)
        t2 = time.perf_counter()
        print(f"{alg.name:38s} messages {s.num_messages:7d}  build {t1 - t0:6.3f} s  verify {t2 - t1:6.3f} s")
        rows.append((alg.name, s.num_messages, round(t1 - t0, 4), round(t2 - t1, 4)))
    per_message = sum(r[3] for r in rows) / sum(r[1] for r in rows)
    slowest = max(rows, key=lambda r: r[3])
    path = save(__file__, args.results, title="Verifying the broadcasts",
                what=f"Every registered broadcast built and verified symbolically at P = {args.procs} and "
                     f"{args.size} B (default parameters), one run each.",
                headline=[Headline(figure="verifier time per message", value=f"{per_message * 1e6:.1f} us"),
                          Headline(figure=f"slowest to verify ({slowest[0]}, {slowest[1]} messages)",
                                   value=f"{slowest[3]:.3f} s")],
                tables=[Table(columns=("algorithm", "messages", "build (s)", "verify (s)"), rows=tuple(rows))])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
