"""Under mpiexec: where the compiled executor cannot load, colltune warns once and runs on the Python one.

The extension's import is made to fail (as a missing or broken build would) before colltune is
imported; then plans and one-shot calls must still deliver native's bytes, on the Python executor,
with one RuntimeWarning naming the reason.  With ``COLLTUNE_EXECUTOR=python`` instead, there is no
warning.
"""

import importlib.abc
import os
import sys
import warnings

BLOCK = os.environ.get("COLLTUNE_EXECUTOR") != "python"


class NoExtension(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "colltune.runtime._exec":
            raise ImportError("simulated: the extension was not built")


if BLOCK:
    sys.meta_path.insert(0, NoExtension())

import numpy as np
from mpi4py import MPI

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import colltune
    from colltune.runtime import compiled

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()
ours = [str(w.message) for w in caught if "compiled executor" in str(w.message)]
if BLOCK:
    assert compiled.ENGINE is None and len(ours) == 1, ours
    assert "simulated: the extension was not built" in ours[0] and "Python executor" in ours[0], ours[0]
else:
    assert compiled.ENGINE is None and not ours, ours

msg = np.arange(100, dtype=np.uint8)
buf = msg.copy() if me == 0 else np.zeros(100, np.uint8)
with colltune.plan("bcast", buf, root=0, algorithm="binomial_tree") as p:
    assert p.executor == "python", p.executor
    p.run()
assert np.array_equal(buf, msg)
total = np.zeros(4, np.int64)
for _ in range(3):
    colltune.allreduce(np.full(4, me, np.int64), total, algorithm="ring")
assert np.all(total == P * (P - 1) // 2), total
assert [e["executor"] for e in colltune.call_cache()] == ["python"]
comm.Barrier()
if me == 0:
    print(f"fallback_check: P={P}: " + (f"warned once ({ours[0]}) and " if BLOCK else "no warning, ") +
          "ran on the Python executor")
