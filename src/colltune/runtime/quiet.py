"""Waiting in an MPI job without spinning on the cores other ranks need.

A rank blocked in MPI (MPICH, and Open MPI in most of its progress) polls the network without
pause.  Where the job has more ranks than cores (the 8-host testbed runs 8 ranks on 2 cores), ranks
that wait in MPI while rank 0 computes take the processor from it: in a hybrid tune of MPICH on
localhost, rank 0's simulations took 14.0 s of
the 40 s while the other ranks waited for its verdicts in a broadcast, and 3.6 s with them asleep.
The functions here wait by testing between short sleeps instead.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from mpi4py import MPI

#: Seconds of the longest sleep between two tests of a request.
POLL = 0.01
#: Seconds of the first sleep; each next one is twice as long, up to the ``poll`` given.  A wait
#: that ends at once (a verdict rank 0 had cached) costs about this much.
FIRST_POLL = 1e-4


def _naps(poll: float) -> Iterator[float]:
    """Seconds to sleep between tests: :data:`FIRST_POLL`, then twice as long each time, up to ``poll``."""
    nap = min(FIRST_POLL, poll)
    while True:
        yield nap
        nap = min(2 * nap, poll)


def sleep_until(request: MPI.Request, poll: float = POLL) -> Any:
    """Wait for ``request`` by testing it between sleeps (:data:`FIRST_POLL` seconds doubling up to
    ``poll``); its message, if any."""
    naps = _naps(poll)
    while True:
        done, value = request.test()
        if done:
            return value
        time.sleep(next(naps))


def quiet_bcast(comm: MPI.Comm, value: Any, root: int = 0, poll: float = POLL) -> Any:
    """``root``'s ``value`` on every rank of ``comm`` (collective): ``root`` sends it to each other
    rank, which looks for it between sleeps (as :func:`sleep_until`) rather than waiting in MPI.
    ``comm`` must carry no other point-to-point traffic from ``root`` meanwhile (give it a
    communicator of its own)."""
    if comm.Get_rank() != root:
        naps = _naps(poll)
        while (message := comm.improbe(source=root)) is None:
            time.sleep(next(naps))
        return message.recv()
    MPI.Request.waitall([comm.isend(value, dest=rank) for rank in range(comm.Get_size()) if rank != root])
    return value
