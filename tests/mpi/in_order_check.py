"""The in-order check (colltune.tune.sequence) in an MPI job, with the job's own timer: every rank
must time the same sequences and give back the same rules.  A wrapper adds 50 ms to ``native``'s
time at the three sizes after the binomial tree ran (a network with memory, the same on every rank),
so the tree must be given back on every rank; without it, what is kept is up to the timings, but
every rank must keep the same.  The penalty is added, not a factor: 3 or 5 ranks on 2 cores can make one
timing of a few microseconds take milliseconds, which a factor of the real time need not outweigh
(a run at P = 3 kept the tree though native was made 4x slower).
Usage: python -m mpi4py in_order_check.py
"""

import json
from typing import Any

from mpi4py import MPI

from colltune.tune.measure import MeasurePricer
from colltune.tune.select import grid_sizes
from colltune.tune.sequence import check_in_order
from colltune.tune.table import NATIVE, Rule

comm = MPI.COMM_WORLD
#: Seconds added to a slowed call: far above any scheduling hiccup of a timing on 2 cores.
PENALTY = 0.05


class Memory:
    """``timer``'s times (seconds), ``native``'s :data:`PENALTY` longer for three calls after
    ``binomial_tree`` ran (if ``slow``)."""

    def __init__(self, timer: MeasurePricer, slow: bool) -> None:
        self.timer, self.slow, self.since, self.calls = timer, slow, 99, 0

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        t, used = self.timer.price(collective, algorithm, procs, size, params)
        self.calls += 1
        if algorithm == "binomial_tree":
            self.since = 0
            return t, used
        if self.slow and self.since < 3:
            t += PENALTY
        self.since += 1
        return t, used


rules = (Rule(size_min=0, size_max=255, algorithm=NATIVE),
         Rule(size_min=256, size_max=1023, algorithm="binomial_tree"),
         Rule(size_min=1024, size_max=None, algorithm=NATIVE))
for slow in (False, True):
    timer = Memory(MeasurePricer(comm, reps=3, warmup=1), slow)
    out = check_in_order(timer, "bcast", comm.Get_size(), rules, grid_sizes(8192), 0.05)
    mine = json.dumps([r.model_dump() for r in out])
    if comm.allgather(mine) != [mine] * comm.Get_size():
        raise AssertionError(f"ranks disagree on the rules: {mine}")
    algorithms = [r.algorithm for r in out]
    if slow and algorithms != [NATIVE]:
        raise AssertionError(f"the tree was not given back though native after it was {PENALTY * 1e3:.0f} ms "
                             f"slower: {algorithms}")
    if timer.calls < 2 * 5:  # 256, 512, then 1024, 2048, 4096; native then the table
        raise AssertionError(f"only {timer.calls} timings")
print(f"in-order check passed: P={comm.Get_size()}", flush=True)
