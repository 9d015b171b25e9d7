"""Under mpiexec: the per-communicator call cache reuses, rebinds, invalidates and bounds what it keeps.

* reuse: a one-shot call with the arguments of an earlier one does not enter Python (the Python
  side of the one-shot calls, ``api._once``, is counted) and gives native's bytes;
* a different buffer: bound on the rank that passes it alone (the others reuse theirs), with no
  collective step (else the job would hang);
* the same for ``auto``: the table is read once per signature;
* a freed communicator: its state and cache close, its plans are freed, and a new communicator
  (which may get the same handle) starts afresh;
* a changed table file: every rank switches to the new decision at the same call, within two
  periods of TABLE_RECHECK_UNITS of ``auto`` work (small calls of 1 unit each here);
* bounds: at most MAX_BINDINGS bound calls and MAX_SIGNATURES signatures, least recently used out;
  a call needing more scratch grows the shared scratch and the results stay right;
* mismatched arguments on a first call raise on every rank; with ``COLLTUNE_CHECK=full`` a mismatch
  on a later call does too.
"""

import os
import sys
import tempfile
from pathlib import Path

import numpy as np
from mpi4py import MPI
from raised import messages_of

import colltune
from colltune.errors import ColltuneError
from colltune.profiles.format import Provenance
from colltune.runtime import api, state
from colltune.tune import Block, DecisionTable, Rule, write_table

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
entered = [0]
_once = api._once


def counting(*args):
    entered[0] += 1
    return _once(*args)


api._once = counting
checks = []


def check(what, condition, detail=""):
    if not condition:
        raise AssertionError(f"rank {me}: {what} {detail}")
    checks.append(what)


def entries():
    """Python entries since the last call of this function."""
    n, entered[0] = entered[0], 0
    return n


def same_everywhere(what, value):
    values = comm.allgather(value)
    check(what, len(set(values)) == 1, f"ranks differ: {values}")


FULL = state.existing_state(comm) is None and os.environ.get(state.CHECK_ENV) == "full"
if FULL:  # every call is agreed: only what full checking adds is checked
    mixed = np.zeros(16, np.uint8)
    colltune.bcast(mixed, root=0, algorithm="chain")
    colltune.bcast(mixed, root=1 % P, algorithm="chain")
    check("full checking enters Python on every call", entries() == 2)
    if P > 1:
        messages = messages_of(comm, lambda: colltune.bcast(mixed, root=me % 2, algorithm="chain"))
        check("under full checking a later mismatch raises on every rank",
              None not in messages and len(set(messages)) == 1, str(messages))
    comm.Barrier()
    if me == 0:
        print(f"cache_check: P={P}: {len(checks)} checks passed (full checking)")
    sys.exit(0)

# -- reuse and rebinding ---------------------------------------------------------------------------
msg = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)
buf = msg.copy() if me == 0 else np.zeros(len(msg), np.uint8)
entries()
colltune.bcast(buf, 0, algorithm="binomial_tree")
check("first call enters Python", entries() == 1)
check("first call delivers", np.array_equal(buf, msg))
for _ in range(5):
    if me:
        buf[:] = 0
    colltune.bcast(buf, 0, algorithm="binomial_tree")
check("repeated calls stay in C++", entries() == 0)
check("repeated calls deliver", np.array_equal(buf, msg))
colltune.bcast(buf, root=0, algorithm="binomial_tree", comm=comm)
check("keywords find the same call", entries() == 0)

fresh = msg.copy() if me == 0 else np.zeros(len(msg), np.uint8)
target = fresh if me == P - 1 else buf
if me == P - 1 or me == 0:
    target[:] = msg if me == 0 else 0
colltune.bcast(target, 0, algorithm="binomial_tree")
check("a new buffer on one rank binds there alone", entries() == (1 if me == P - 1 else 0))
check("the new buffer gets the data", np.array_equal(target, msg))

ints = np.arange(6, dtype=np.int64) + me
total = np.zeros(6, np.int64)
for _ in range(3):
    colltune.allreduce(ints, total, op="max", algorithm="recursive_doubling")
check("allreduce enters Python once", entries() == 1)
check("allreduce result", np.array_equal(total, np.arange(6) + P - 1))
colltune.allreduce(ints, total, op="min", algorithm="recursive_doubling")
check("another op is another call", entries() == 1 and np.array_equal(total, np.arange(6)))

# -- auto: the table is read once per signature ----------------------------------------------------
tmp = Path(comm.bcast(tempfile.mkdtemp() if me == 0 else None))


def table(algorithm):
    rules = (Rule(size_min=0, algorithm=algorithm, params={}),)
    return DecisionTable(method="model", model="hockney", profile="cache_check", provenance=Provenance(source="test"),
                         collectives={"bcast": (Block(procs_min=1, procs_max=64, tuned_at=(1,), rules=rules),)})


path = tmp / "table.json"
if me == 0:
    write_table(table("binomial_tree"), path)
comm.Barrier()
os.environ["COLLTUNE_TABLE"] = str(path)
auto_buf = msg.copy() if me == 0 else np.zeros(len(msg), np.uint8)
for _ in range(3):
    colltune.bcast(auto_buf, 0, algorithm="auto")
check("auto enters Python once", entries() == 1)
runs = {e["signature"]["algorithm"]: e["runs"] for e in colltune.call_cache()}
check("auto ran the table's algorithm", runs.get("auto") == "binomial_tree", str(runs))
check("auto delivers", np.array_equal(auto_buf, msg))

# -- a changed table file --------------------------------------------------------------------------
comm.Barrier()
if me == 0:
    write_table(table("chain"), path)
comm.Barrier()
switched = None
for i in range(2 * state.TABLE_RECHECK_UNITS // state.auto_units(len(auto_buf)) + 1):
    if me:
        auto_buf[:] = 0
    colltune.bcast(auto_buf, 0, algorithm="auto")
    check("auto delivers after the change", np.array_equal(auto_buf, msg))
    runs = {e["signature"]["algorithm"]: e["runs"] for e in colltune.call_cache()}
    if switched is None and runs.get("auto") == "chain":
        switched = i
check("the new table is followed", switched is not None)
same_everywhere("every rank switches at the same call", switched)
del os.environ["COLLTUNE_TABLE"]

# -- a freed communicator --------------------------------------------------------------------------
sub = comm.Dup()
handle = sub.handle
sub_buf = msg.copy() if me == 0 else np.zeros(len(msg), np.uint8)
colltune.bcast(sub_buf, 0, comm=sub, algorithm="chain")
colltune.bcast(sub_buf, 0, comm=sub, algorithm="chain")
sub_state = state.existing_state(sub)
sub_cache = sub_state.cache
plan = colltune.plan("bcast", sub_buf, root=0, comm=sub, algorithm="chain")
entries()
sub.Free()
check("freeing the communicator closes its state", sub_state.closed and sub_cache.closed)
try:
    plan.run()
except ColltuneError as exc:
    check("a plan of a freed communicator says so", "freed" in str(exc))
else:
    check("a plan of a freed communicator does not run", False)
again = comm.Dup()
reused = again.handle == handle
if me:
    sub_buf[:] = 0
colltune.bcast(sub_buf, 0, comm=again, algorithm="chain")
check("a new communicator starts afresh", entries() == 1 and np.array_equal(sub_buf, msg))
again.Free()

# -- bounds ----------------------------------------------------------------------------------------
world = state.existing_state(comm)
many = [np.zeros(8, np.uint8) for _ in range(state.MAX_BINDINGS + 10)]
for b in many:
    colltune.bcast(b, 0, algorithm="binomial_tree")
check("bound calls are bounded", world.cache.size <= state.MAX_BINDINGS, str(world.cache.size))
signature_bufs = [np.zeros(n, np.uint8) for n in range(state.MAX_SIGNATURES + 5)]
for b in signature_bufs:
    colltune.bcast(b, 0, algorithm="flat_tree")
check("signatures are bounded", len(world.entries) == state.MAX_SIGNATURES, str(len(world.entries)))
sizes = [e["signature"]["size"] for e in colltune.call_cache()]
check("the least recently used signatures went first", sizes[-1] == state.MAX_SIGNATURES + 4 and 0 not in sizes,
      str(sizes[:3]))
# Call the oldest kept signature again: from C++ on every rank but rank 0, whose new buffer takes
# it through Python.  A new signature must then push out the same one everywhere (the next oldest).
oldest = sizes[0]
colltune.bcast(np.zeros(oldest, np.uint8) if me == 0 else signature_bufs[oldest], 0, algorithm="flat_tree")
colltune.bcast(np.zeros(state.MAX_SIGNATURES + 5, np.uint8), 0, algorithm="flat_tree")
kept = sorted(e["signature"]["size"] for e in colltune.call_cache())
same_everywhere("every rank keeps the same signatures", tuple(kept))
check("the called one stays, the next oldest goes", oldest in kept and oldest + 1 not in kept, str(kept[:3]))

small_in, big_in = np.arange(10, dtype=np.int32) + me, np.arange(100000, dtype=np.int32) + me
small_out, big_out = np.zeros_like(small_in), np.zeros_like(big_in)
for x, y in ((small_in, small_out), (big_in, big_out), (small_in, small_out)):
    colltune.allreduce(x, y, algorithm="reduce_scatter_allgather")
    want = np.arange(len(x), dtype=np.int32) * P + P * (P - 1) // 2
    check("results stay right as the scratch grows", np.array_equal(y, want))
check("the scratch grew", P == 1 or len(world.scratch) >= big_in.nbytes // 2, str(len(world.scratch)))


# -- mismatched arguments --------------------------------------------------------------------------
def raises_everywhere(what, call):
    messages = messages_of(comm, call)
    check(what, all(m is not None for m in messages) and len(set(messages)) == 1, str(messages))


if P > 1:
    mixed = np.zeros(16, np.uint8)
    raises_everywhere("a first call with different roots raises on every rank",
                      lambda: colltune.bcast(mixed, root=me % 2, algorithm="chain"))

comm.Barrier()
if me == 0:
    print(f"cache_check: P={P}: {len(checks)} checks passed (freed handle reused: {reused})")
