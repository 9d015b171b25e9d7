"""colltune.tune.subcomms in an MPI job: a tune's timer at every process count of the job.  Each
count is timed by a timer made on the communicator of the job's first ranks (a fake timer here,
which answers its communicator's size and the ranks that took part, and cannot time the barrier);
every rank of the job gets rank 0's answer or its refusal, the ranks outside never time, and a
count beyond the job is refused with one error naming it.  The hybrid tuner's timers time the
counts below its full one with QUICK_TIMING of a timing's budget and fill.
Usage: python -m mpi4py subcomms_check.py
"""

from mpi4py import MPI

from colltune.errors import ParameterError, Unavailable
from colltune.tune.cli import _sub_timers
from colltune.tune.timing import QUICK_TIMING, TIMING_BUDGET, TIMING_FILL
from colltune.tune.subcomms import OnSubComms, SubComms, default_procs, job_procs

comm = MPI.COMM_WORLD
procs, me = comm.Get_size(), comm.Get_rank()
calls: list[int] = []


class FakeTimer:
    """Times nothing: the size of its communicator and the job ranks on it, as seconds and params."""

    settle_call = 0.25

    def __init__(self, on: MPI.Comm) -> None:
        self.on = on

    def price(self, collective, algorithm, p, size, params):  # type: ignore[no-untyped-def]
        calls.append(p)
        if collective == "barrier":
            raise Unavailable(f"no barrier on {self.on.Get_size()} ranks")
        return float(self.on.Get_size()), {"ranks": self.on.allgather(me)}


counts = default_procs(procs)
if counts != (list(range(2, procs + 1)) or [1]) or job_procs([procs, 1], procs) != sorted({1, procs}):
    raise AssertionError(f"default counts {counts}")
try:
    job_procs([procs + 1], procs)
except ParameterError as exc:
    if f"--procs {procs + 1}" not in str(exc):
        raise AssertionError(f"the error names no count: {exc}") from None
else:
    raise AssertionError("a count beyond the job was accepted")

wanted = sorted({1, *counts})
subs = SubComms(comm, wanted)
share = comm.Dup()
timer = OnSubComms(subs, FakeTimer, share)
if timer.settle_call != 0.25 or timer.mean_call != 0.0:
    raise AssertionError(f"the job-size timer's settings: {timer.settle_call}, {timer.mean_call}")
for p in wanted:
    t, params = timer.price("bcast", "x", p, 8, {})
    if t != p or params["ranks"] != list(range(p)):
        raise AssertionError(f"rank {me}: P = {p} priced {t} on ranks {params['ranks']}")
    try:
        timer.price("barrier", "x", p, 0, {})
    except Unavailable as exc:
        if str(exc) != f"no barrier on {p} ranks":
            raise AssertionError(f"rank {me}: refusal {exc}") from None
    else:
        raise AssertionError(f"rank {me}: the barrier was priced at P = {p}")
mine = sorted(set(calls))
if mine != [p for p in wanted if me < p]:
    raise AssertionError(f"rank {me} timed at {mine}")
try:
    timer.price("bcast", "x", procs + 1, 8, {})
except Unavailable:
    pass
else:
    raise AssertionError("a count not made was priced")
share.Free()
subs.free()

# the hybrid tuner's timers: at the counts below the one it decides in full, shorter timings
with _sub_timers(comm, wanted, None, 3, 1, quick_below=procs) as timers:
    for p in wanted:
        inner = timers.timer_at(p)
        if (inner is None) != (me >= p):
            raise AssertionError(f"rank {me}: a timer at P = {p}: {inner}")
        scale = QUICK_TIMING if p < procs else 1.0
        if inner is not None and (inner.budget, inner.fill) != (TIMING_BUDGET * scale, TIMING_FILL * scale):
            raise AssertionError(f"rank {me}: P = {p} times with budget {inner.budget} s, fill {inner.fill} s")
print(f"subcomms check passed: P={procs}, counts {wanted}", flush=True)
