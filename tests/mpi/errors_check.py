"""Under mpiexec: bad input raises the same ParameterError on every rank, and nothing hangs.

Each case is called on every rank; each rank records the error message it got,
and rank 0 checks that all ranks raised, with the same message.
"""

import numpy as np
from mpi4py import MPI

import colltune
from colltune.errors import ParameterError

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()


def expect_error(what, call, must_contain):
    try:
        call()
    except ParameterError as exc:
        message = str(exc)
    else:
        message = None
    messages = comm.allgather(message)
    if me == 0:
        assert all(m is not None for m in messages), f"{what}: some ranks did not raise: {messages}"
        assert len(set(messages)) == 1, f"{what}: ranks raised different errors: {messages}"
        assert must_contain in messages[0], f"{what}: {messages[0]!r} lacks {must_contain!r}"
        print(f"errors_check: {what}: {messages[0]}")


buf = np.zeros(64, dtype=np.uint8)
expect_error("unknown algorithm", lambda: colltune.bcast(buf, algorithm="no_such"), "valid: flat_tree")
expect_error("bad parameter", lambda: colltune.bcast(buf, algorithm="chain_segmented", segment_size=0),
             "segment_size")
expect_error("unknown parameter", lambda: colltune.bcast(buf, algorithm="chain", fanout=2), "fanout")
expect_error("root out of range", lambda: colltune.bcast(buf, root=P), "root")
expect_error("read-only buffer", lambda: colltune.bcast(bytes(64), algorithm="chain"), "read-only")
if P > 1:
    sized = np.zeros(64 + (me == P - 1), dtype=np.uint8)
    expect_error("sizes differ", lambda: colltune.bcast(sized, algorithm="binomial_tree"), "size in bytes")
    algo = "chain" if me == 0 else "binomial_tree"
    expect_error("algorithms differ", lambda: colltune.bcast(buf, algorithm=algo), "algorithm")
    local_bad = np.zeros(64, dtype=np.uint8) if me != 1 else np.zeros((8, 8), dtype=np.uint8)[:, ::2]
    expect_error("one rank's buffer not contiguous", lambda: colltune.bcast(local_bad), "rank 1: buf")
comm.Barrier()
if me == 0:
    print(f"errors_check: P={P}: every error raised on every rank")
