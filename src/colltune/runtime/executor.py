"""Execute a schedule over MPI point-to-point with mpi4py persistent requests.

The executor follows the semantics of :mod:`colltune.schedule.ir`, the same
ones the verifier proves correct: each rank starts its operations in list
order, waiting first for the completion of everything an operation requires;
sends and receives are persistent requests created once per plan and started
on every run; copies and reductions happen when they start; at the end the
rank waits for all its requests.  A verified schedule therefore cannot deadlock or race here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from mpi4py import MPI

from colltune.errors import ColltuneError
from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Schedule

#: The numpy function of each reduction operation, called as ``f(src, dst)`` (``src`` the left operand,
#: as in ``MPI_Reduce_local``); logical results are cast back to the buffer's dtype (1 or 0), as MPI does.
NUMPY_OPS: dict[str, Any] = {
    "sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "band": np.bitwise_and,
    "bor": np.bitwise_or, "bxor": np.bitwise_xor, "land": np.logical_and, "lor": np.logical_or,
}


class ScheduleExecutor:
    """One rank's part of a schedule, bound to buffers and a communicator.

    Parameters
    ----------
    schedule: the whole schedule (every rank builds the same one).
    comm: the communicator to run on; use a private duplicate so that tags cannot
        meet the application's messages.
    buffers: byte views (``uint8`` numpy arrays) of this rank's SEND and RECV buffers.
    """

    def __init__(self, schedule: Schedule, comm: MPI.Comm, buffers: dict[Buf, np.ndarray]):
        if schedule.wildcards:
            raise ColltuneError("the schedule has wildcard receives (ANY_SOURCE or ANY_TAG); only the simulator "
                                "runs such schedules")
        rank = comm.Get_rank()
        views = dict(buffers)
        views[Buf.SCRATCH] = np.zeros(int(schedule.buffer_sizes[rank, Buf.SCRATCH]), dtype=np.uint8)
        for b in (Buf.SEND, Buf.RECV):
            views.setdefault(b, np.zeros(0, dtype=np.uint8))
            want = int(schedule.buffer_sizes[rank, b])
            if len(views[b]) != want:
                raise ColltuneError(f"rank {rank}: {b.name} buffer has {len(views[b])} bytes, the schedule needs {want}")
        ops = schedule.ops_of(rank)
        first = ops.start
        c = schedule.columns
        self._program: list[tuple[int, list[int], Any]] = []
        self._requests: list[MPI.Prequest | None] = []
        for i in ops:
            kind = int(c["kind"][i])
            off, length = int(c["offset"][i]), int(c["length"][i])
            region = views[Buf(int(c["buf"][i]))][off:off + length]
            requires = [int(d) - first for d in schedule.requires(i)]
            req = None
            payload: Any = None
            if kind == Kind.SEND:
                req = comm.Send_init([region, MPI.BYTE], int(c["peer"][i]), int(c["tag"][i]))
            elif kind == Kind.RECV:
                req = comm.Recv_init([region, MPI.BYTE], int(c["peer"][i]), int(c["tag"][i]))
            elif kind == Kind.COPY:
                src_off = int(c["src_offset"][i])
                payload = (region, views[Buf(int(c["src_buf"][i]))][src_off:src_off + length])
            elif kind == Kind.REDUCE:
                src_off = int(c["src_offset"][i])
                dtype = np.dtype(REDUCTION_DTYPES[int(c["dtype"][i])])
                src = views[Buf(int(c["src_buf"][i]))][src_off:src_off + length]
                payload = (region.view(dtype), src.view(dtype), NUMPY_OPS[REDUCTION_OPS[int(c["redop"][i])]])
            else:
                payload = float(c["delay"][i])
            self._program.append((kind, requires, payload))
            self._requests.append(req)

    def run(self) -> None:
        """Execute this rank's operations once and wait for all of them."""
        reqs = self._requests
        done = [False] * len(reqs)
        for j, (kind, requires, payload) in enumerate(self._program):
            for d in requires:
                if not done[d]:
                    req = reqs[d]
                    if req is not None:
                        req.Wait()
                    done[d] = True
            if kind == Kind.SEND or kind == Kind.RECV:
                reqs[j].Start()  # type: ignore[union-attr]
            elif kind == Kind.COPY:
                dst, src = payload
                dst[...] = src
                done[j] = True
            elif kind == Kind.REDUCE:
                dst, src, ufunc = payload
                ufunc(src, dst, out=dst)
                done[j] = True
            else:
                _sleep(payload)
                done[j] = True
        pending = [r for r, d in zip(reqs, done) if r is not None and not d]
        if pending:
            MPI.Request.Waitall(pending)

    def free(self) -> None:
        """Release the persistent requests."""
        for req in self._requests:
            if req is not None:
                req.Free()
        self._requests = []
        self._program = []


def _sleep(seconds: float) -> None:
    """Busy-wait ``seconds`` (a DELAY op stands for computation, so it keeps the CPU busy)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
