"""Benchmark: build and verify every registered broadcast at one (P, size).

    python benchmarks/verify_bcast.py [--procs 33] [--size 4194304]

Prints, per algorithm, the number of messages and the build and verify times
(seconds, one run each).
"""

from __future__ import annotations

import argparse
import time

from colltune.algorithms import REGISTRY
from colltune.schedule import verify


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=33)
    ap.add_argument("--size", type=int, default=4 * 2**20, help="bytes")
    args = ap.parse_args()
    for alg in REGISTRY.select("bcast"):
        t0 = time.perf_counter()
        s = alg.schedule(args.procs, 0, args.size)
        t1 = time.perf_counter()
        verify(s)
        t2 = time.perf_counter()
        print(f"{alg.name:38s} messages {s.num_messages:7d}  build {t1 - t0:6.3f} s  verify {t2 - t1:6.3f} s")


if __name__ == "__main__":
    main()
