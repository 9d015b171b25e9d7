"""Under mpiexec: bad input raises the same ParameterError on every rank, and nothing hangs.

Each case is called on every rank; each rank records the error message it got,
and rank 0 checks that all ranks raised, with the same message.
"""

import numpy as np
from mpi4py import MPI
from raised import messages_of

import colltune
from colltune.tune.table import fixed_table

comm = MPI.COMM_WORLD
P, me = comm.Get_size(), comm.Get_rank()


def expect_error(what, call, must_contain):
    messages = messages_of(comm, call)
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
ints = np.zeros(4, dtype=np.int32)
out = np.zeros(4, dtype=np.int32)
expect_error("reduction on bytes", lambda: colltune.allreduce(bytearray(8), bytearray(8)), "numpy arrays")
expect_error("dtypes differ", lambda: colltune.allreduce(ints, out.astype(np.int64)), "dtype")
expect_error("op undefined for dtype", lambda: colltune.allreduce(ints * 1.0, out * 1.0, op="band"), "band")
expect_error("logical op on floats, as MPI", lambda: colltune.allreduce(ints * 1.0, out * 1.0, op="land",
                                                                       algorithm="recursive_doubling"), "land")
expect_error("object arrays", lambda: colltune.bcast(np.array([object()] * 4), algorithm="binomial"),
             "array of Python objects")
expect_error("MPI.COMM_NULL", lambda: colltune.bcast(np.zeros(4), comm=MPI.COMM_NULL), "COMM_NULL")
expect_error("unknown op", lambda: colltune.allreduce(ints, out, op="mean"), "mean")
expect_error("overlapping buffers", lambda: colltune.allreduce(out, out), "overlap")
expect_error("recvbuf too small", lambda: colltune.allgather(ints, np.zeros(4 * P - 1, dtype=np.int32)),
             "recvbuf")
expect_error("alltoall has no root", lambda: colltune.plan("alltoall", ints, out, root=1), "no root")
expect_error("wrong number of buffers", lambda: colltune.plan("gather", ints), "2 buffer")
expect_error("op for a non-reduction", lambda: colltune.plan("allgather", ints, np.zeros(4 * P, np.int32), op="sum"),
             "does not reduce")
if P > 1:
    mine = np.zeros(4 + (me == 1), dtype=np.int32)
    expect_error("block sizes differ", lambda: colltune.allgather(mine, np.zeros(len(mine) * P, np.int32)),
                 "size in bytes")
mpich_table = fixed_table({"bcast": ("binomial", {})}, "tests", library="mpich")
expect_error("a table of MPICH's own algorithms", lambda: colltune.bcast(buf, algorithm="auto", table=mpich_table),
             "mpich's own algorithms")
comm.Barrier()
if me == 0:
    print(f"errors_check: P={P}: every error raised on every rank")
