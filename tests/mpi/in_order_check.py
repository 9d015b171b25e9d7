"""The in-order check (colltune.tune.sequence) in an MPI job, with the job's own timer: every rank
must time the same sequences and give back the same rules.  A wrapper makes ``native`` four times
slower at the sizes after the binomial tree ran (a network with memory, the same on every rank),
so the tree must be given back on every rank; without it, what is kept is up to the timings, but
every rank must keep the same.
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


class Memory:
    """``timer``'s times, ``native``'s four times longer for three calls after ``binomial_tree``
    ran (if ``slow``)."""

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
            t *= 4
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
        raise AssertionError(f"the tree was not given back though native after it was 4x slower: {algorithms}")
    if timer.calls < 2 * 5:  # 256, 512, then 1024, 2048, 4096; native then the table
        raise AssertionError(f"only {timer.calls} timings")
print(f"in-order check passed: P={comm.Get_size()}", flush=True)
