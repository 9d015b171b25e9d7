"""Simulated messages per second: all-to-all (direct) and broadcast (binomial, 8 KiB segments) at
P = 64, 256 and 1024, in LogGOPS mode and in shared-link mode (PlogPT's binary tree, equal split).

Run: ``python benchmarks/simulate_speed.py [--procs 64,256,1024] [--repeat 3] [--results DIR]``.  Prints one row per
case: messages, schedule build time, simulation time (median of the repeats) and messages per
second of simulation; the "total" column (build + simulate) is what the issue's targets bound:
the direct all-to-all on 1024 ranks in LogGOPS mode within 2 s, on 256 ranks in shared-link mode
within 10 s.  Writes the rows to ``benchmarks/results/simulate_speed.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from colltune.algorithms import REGISTRY
from colltune.models.params import LogGP, PlogPT, Tabulated, TreeLevels
from colltune.report.results import Headline, Table, save
from colltune.sim import simulate

LOGGOPS = LogGP(L=5e-6, o=1.5e-6, g=1e-6, G=1e-9, S=65536)


def shared_link(procs: int) -> PlogPT:
    """A full-bisection binary tree of 1 Gbit/s links (b(h) = 2^(h-1) b(1)), g(m) = 1 us + m G."""
    depth = max(1, (procs - 1).bit_length())
    b1 = 1.25e8
    return PlogPT(L=5e-6, g=Tabulated(sizes=(0, 1 << 20), values=(1e-6, 1e-6 + (1 << 20) / b1)),
                  bidirectional=TreeLevels(b=tuple(b1 * 2 ** h for h in range(depth))))


CASES = [("alltoall", "direct", 1024, {}), ("bcast", "binomial_tree_segmented", 1 << 20, {"segment_size": 8192})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="64,256,1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = parser.parse_args()
    rows = []
    print(f"{'case':46} {'messages':>9} {'build s':>8} {'sim s':>8} {'total s':>8} {'msg/s':>11}")
    for procs in (int(p) for p in args.procs.split(",")):
        for coll, alg, size, params in CASES:
            for mode in ("loggops", "shared-link"):
                builds, sims = [], []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    schedule = REGISTRY.get(coll, alg).schedule(procs, 0, size, **params)
                    t1 = time.perf_counter()
                    if mode == "loggops":
                        result = simulate(schedule, "loggops", LOGGOPS)
                    else:
                        result = simulate(schedule, "plogpt", shared_link(procs))
                    t2 = time.perf_counter()
                    builds.append(t1 - t0)
                    sims.append(t2 - t1)
                build, sim = statistics.median(builds), statistics.median(sims)
                name = f"{coll}/{alg} P={procs} {mode}"
                print(f"{name:46} {result.messages:9d} {build:8.3f} {sim:8.3f} {build + sim:8.3f} "
                      f"{result.messages / sim:11.3g}", flush=True)
                rows.append((name, result.messages, round(build, 4), round(sim, 4), round(build + sim, 4),
                             float(f"{result.messages / sim:.3g}")))
    by_name = {r[0]: r for r in rows}
    headline = [Headline(figure=f"{name} (build + simulate)", value=f"{by_name[name][4]:.2f} s", target=target)
                for name, target in (("alltoall/direct P=1024 loggops", "2 s"),
                                     ("alltoall/direct P=256 shared-link", "10 s"),
                                     ("alltoall/direct P=1024 shared-link", ""))
                if name in by_name]
    headline.append(Headline(figure="simulated messages per second (range)",
                             value=f"{min(r[5] for r in rows):.3g} to {max(r[5] for r in rows):.3g}"))
    path = save(__file__, args.results, title="Simulator speed",
                what="Direct all-to-all (1 KiB blocks) and segmented binomial broadcast (1 MiB, 8 KiB segments) "
                     "built and simulated in LogGOPS mode and in shared-link mode (PlogPT flows on a "
                     f"full-bisection binary tree of 1 Gbit/s links); medians of {args.repeat} runs.",
                headline=headline,
                tables=[Table(columns=("case", "messages", "build (s)", "simulate (s)", "total (s)", "msg/s"),
                              rows=tuple(rows))])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
