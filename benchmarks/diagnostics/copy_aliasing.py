"""The compiled executor's COPY operation where source and destination alias within a page.

Run: ``python benchmarks/diagnostics/copy_aliasing.py``.  For copies of 4 KiB to 1 MiB whose destination lies
``delta`` bytes past the source modulo 4096 (numpy's small arrays, 16-byte aligned and allocated
one after the other, are often 16 bytes apart so), it prints the time of the executor's COPY and
of numpy's ``dst[:] = src`` (a plain forward copy): the median of 9 runs of 200 copies.  See
``copy_bytes`` in ``colltune/runtime/cpp/program.hpp`` for why copies with 0 < delta < 32 go
backwards where memmove aliases, which the executor measures at import (printed first).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from mpi4py import MPI

from colltune.runtime import _exec, compiled
from colltune.schedule import Buf, Region, ScheduleBuilder


def timed(f) -> float:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(200):
            f()
        runs.append((time.perf_counter() - t0) / 200)
    return statistics.median(runs)


def main() -> None:
    if compiled.ENGINE is None:
        raise SystemExit(f"the compiled executor is not available: {compiled.UNAVAILABLE}")
    dup = MPI.COMM_WORLD.Dup()
    print(f"memmove aliases here, so copies 16 bytes past their source go backwards: {_exec.memmove_aliases()}")
    print(f"{'bytes':>8} {'delta':>6} {'colltune COPY us':>17} {'numpy us':>9}")
    for n in (4096, 65536, 262144, 1 << 20):
        arena = np.zeros(2 * n + 3 * 4096, dtype=np.uint8)
        base = (-arena.ctypes.data) % 4096
        for delta in (0, 16, 64, 2048):
            src = arena[base:base + n]
            start = base + n + 4096 - n % 4096 + delta
            dst = arena[start:start + n]
            b = ScheduleBuilder(1, send_bytes=n, recv_bytes=n)
            b.copy(0, Region(Buf.SEND, 0, n), Region(Buf.RECV, 0, n))
            runner = compiled.ENGINE.bind(compiled.program(b.build({}), 0), dup.handle, compiled.address(src),
                                          compiled.address(dst), 0)

            def copy(d=dst, s=src):  # type: ignore[no-untyped-def]
                d[:] = s

            print(f"{n:8d} {delta:6d} {timed(runner.run) * 1e6:17.1f} {timed(copy) * 1e6:9.1f}", flush=True)
            runner.release()
    dup.Free()


if __name__ == "__main__":
    main()
