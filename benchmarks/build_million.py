"""Benchmark: build a schedule of a million messages with the bulk builder.

A direct all-to-all on P ranks (every rank posts P-1 receives, then P-1 sends of
`block` bytes each, rotated so that rank r starts with r+1) is P (P-1) messages:
1,047,552 for P = 1024.  Prints the build time (median of a few repeats) and the
schedule's memory, and writes them to ``benchmarks/results/build_million.json`` (``--results DIR``).

    python benchmarks/build_million.py [--procs 1024] [--block 64] [--repeat 3] [--results DIR]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from colltune.report.results import Headline, save
from colltune.schedule import Buf, Kind, ScheduleBuilder


def build(procs: int, block: int):
    b = ScheduleBuilder(procs, send_bytes=procs * block, recv_bytes=procs * block)
    me = np.repeat(np.arange(procs), procs - 1)
    shift = np.tile(np.arange(1, procs), procs)
    peer_to = (me + shift) % procs
    peer_from = (me - shift) % procs
    b.bulk(Kind.RECV, me, peer=peer_from, buf=Buf.RECV, offset=peer_from * block, length=block)
    b.bulk(Kind.SEND, me, peer=peer_to, buf=Buf.SEND, offset=peer_to * block, length=block)
    return b.build({"collective": "alltoall", "algorithm": "direct_rotated", "procs": procs})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=1024)
    ap.add_argument("--block", type=int, default=64, help="bytes per message")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = ap.parse_args()
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        s = build(args.procs, args.block)
        times.append(time.perf_counter() - t0)
    nbytes = sum(a.nbytes for a in s.columns.values()) + s.dep_ptr.nbytes + s.dep_idx.nbytes
    print(f"procs={args.procs} messages={s.num_messages} ops={len(s)} "
          f"build median {statistics.median(times):.2f} s (min {min(times):.2f} s over {args.repeat}) "
          f"columns {nbytes / 2**20:.0f} MiB")
    path = save(__file__, args.results, title="Building a million-message schedule",
                what=f"A direct all-to-all on {args.procs} ranks ({s.num_messages:,} messages of {args.block} B, "
                     f"{len(s):,} operations) built with the bulk builder; median of {args.repeat} builds.",
                headline=[Headline(figure=f"build time, P = {args.procs}: median (fastest)",
                                   value=f"{statistics.median(times):.2f} s ({min(times):.2f} s)"),
                          Headline(figure="memory of the columns", value=f"{nbytes / 2**20:.0f} MiB")])
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
