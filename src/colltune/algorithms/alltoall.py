"""All-to-all algorithms: direct and rotated exchange (paper 003 section 5), pairwise exchange and
receives-first with XOR-ordered sends (paper 001 Fig. 13, Alltoall_A and Alltoall_B), Bruck, and
a linear exchange with a bounded number of outstanding requests.

Buffer convention (see :mod:`colltune.collectives`): rank ``s``'s SEND block ``d`` (``m`` bytes
at ``d*m``) ends as rank ``d``'s RECV block ``s``.  Every algorithm first copies a rank's own
block locally.
"""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from colltune.algorithms.registry import Param, register
from colltune.algorithms.tags import TAG_DATA
from colltune.collectives import Problem
from colltune.schedule import Buf, Kind, Region, ScheduleBuilder

#: Default bound on outstanding sends (and receives) of the throttled linear exchange: MPICH's
#: MPIR_CVAR_ALLTOALL_THROTTLE default of 32.
DEFAULT_MAX_OUTSTANDING = 32


def _exchange_all(b: ScheduleBuilder, m: int, send_to: np.ndarray, recv_from: np.ndarray,
                  recvs_first: bool = True) -> np.ndarray:
    """Every rank r copies its own block, then posts receives from ``recv_from[r]`` and sends to
    ``send_to[r]`` (``(P, k)`` arrays of ranks), with no dependencies between them: receives
    first, or interleaved one receive then one send.  Built in bulk, rank after rank, so a million
    messages take a second.  Returns the op ids, one row per rank in posting order, for the caller's
    dependencies (:meth:`ScheduleBuilder.depend`)."""
    P, k = send_to.shape
    ranks = np.arange(P, dtype=np.int32)
    if recvs_first:
        kinds = np.repeat(np.array([Kind.COPY, Kind.RECV, Kind.SEND], dtype=np.int8), [1, k, k])
        peers = np.concatenate([ranks[:, None], recv_from, send_to], axis=1)
    else:
        kinds = np.concatenate([[Kind.COPY], np.tile(np.array([Kind.RECV, Kind.SEND], dtype=np.int8), k)])
        peers = np.concatenate([ranks[:, None], np.stack([recv_from, send_to], axis=2).reshape(P, 2 * k)], axis=1)
    kind = np.broadcast_to(kinds.astype(np.int8), (P, 2 * k + 1)).ravel()
    peer = peers.astype(np.int32).ravel()  # a copy's: its own rank, whose block it copies
    copy = kind == Kind.COPY
    offset = peer.astype(np.int64) * m
    ids = b.bulk(kind, np.repeat(ranks, 2 * k + 1), peer=np.where(copy, np.int32(-1), peer),
                 tag=np.where(copy, 0, TAG_DATA), buf=np.where(kind == Kind.SEND, np.int8(Buf.SEND), np.int8(Buf.RECV)),
                 offset=offset, length=m, src_buf=np.where(copy, np.int8(Buf.SEND), np.int8(-1)),
                 src_offset=np.where(copy, offset, 0))
    return ids.reshape(P, 2 * k + 1)


@register("alltoall", "direct", source="paper 003 section 5 (Direct Exchange, LAM 6.5.2)", aliases=("linear",))
def _alltoall_direct(b: ScheduleBuilder, problem: Problem) -> None:
    """Direct exchange: every rank posts all its receives, then sends to ranks 0, 1, ..., P-1 in
    the same order as every other rank.

    One round; every rank starts by sending to rank 0, so ranks are hit one at a time
    (paper 003 section 5); cost between the bounds of paper 003 Table 3.
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    others = np.broadcast_to(np.arange(P), (P, P))[~np.eye(P, dtype=bool)].reshape(P, P - 1)  # row r: all but r
    _exchange_all(b, m, others, others)


@register("alltoall", "direct_rotated", source="paper 003 section 5 (optimised Direct Exchange, LAM 7, MPICH 1.2.5)",
          aliases=("rotated",))
def _alltoall_rotated(b: ScheduleBuilder, problem: Problem) -> None:
    """Rotated direct exchange: rank r receives from r-1, r-2, ... and sends to r+1, r+2, ...,
    all at once.

    One round; in every position of the send order each rank has a different destination, so no
    rank is flooded; cost between the bounds of paper 003 Table 3.
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    r, i = np.arange(P)[:, None], np.arange(1, P)[None, :]
    _exchange_all(b, m, (r + i) % P, (r - i) % P, recvs_first=False)


def pairing(procs: int, step: int, rank: int) -> int:
    """The partner of ``rank`` in ``step`` of a perfect pairing schedule, or ``rank`` itself if idle.

    Powers of two: ``rank XOR step`` for steps 1..P-1.  Otherwise the round-robin tournament
    (a 1-factorisation of the complete graph): with Q = P if P is odd, else P-1, in step
    ``i = 0..Q-1`` rank ``r < Q`` meets ``(i - r) mod Q``; when that is ``r`` itself, it meets
    rank Q (P even) or sits the step out (P odd).
    """
    if procs & (procs - 1) == 0:
        return rank ^ step
    q = procs if procs % 2 else procs - 1
    if rank == q:
        return next(r for r in range(q) if (2 * r) % q == step % q)
    partner = (step - rank) % q
    if partner == rank:
        return q if procs % 2 == 0 else rank
    return partner


def pairing_steps(procs: int) -> range:
    """The steps of :func:`pairing`: 1..P-1 for powers of two, else 0..Q-1."""
    if procs & (procs - 1) == 0:
        return range(1, procs)
    return range(procs if procs % 2 else procs - 1)


@register("alltoall", "pairwise_exchange", source="paper 001 Fig. 13 (Alltoall_A), eq. 18 and 23",
          aliases=("alltoall_a", "pairwise"))
def _alltoall_pairwise(b: ScheduleBuilder, problem: Problem) -> None:
    """Pairwise exchange: in each step, rank r exchanges one block with a partner and waits for both
    messages before the next step.

    Partners are r XOR i (i = 1..P-1) for powers of two (paper 001 Alltoall_A); otherwise a
    round-robin tournament pairs the ranks (P-1 steps for even P, P steps with one rank idle for
    odd P).  PlogP cost (P-1)(g(m) + L) (paper 001 eq. 18).
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    partners = np.array([[p for p in (pairing(P, step, r) for step in pairing_steps(P)) if p != r] for r in range(P)],
                        dtype=np.int64).reshape(P, P - 1)
    at = _exchange_all(b, m, partners, partners, recvs_first=False)
    # a step's receive waits for both ops of the step before (the first for the copy); its send
    # is posted after it
    b.depend(at[:, 1::2], at[:, 0:-1:2])
    b.depend(at[:, 3::2], at[:, 1:-2:2])


@register("alltoall", "recv_all_xor_sends", source="paper 001 Fig. 13 (Alltoall_B), eq. 19",
          aliases=("alltoall_b",))
def _alltoall_xor(b: ScheduleBuilder, problem: Problem) -> None:
    """Receives first, then sends in XOR order: rank r posts every receive, then sends to r XOR 1,
    r XOR 2, ..., each send waiting for the previous one.

    For P not a power of two, the XOR order runs over the next power of two and skips partners
    >= P.  PlogP cost (P-1) g(m) + L (paper 001 eq. 19).
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    span = 1 << max(P - 1, 0).bit_length()
    r = np.arange(P)[:, None]
    xor = r ^ np.arange(1, span)[None, :]  # row r: r XOR 1, r XOR 2, ...: each rank's P - 1 partners below P
    others = np.broadcast_to(np.arange(P), (P, P))[~np.eye(P, dtype=bool)].reshape(P, P - 1)
    at = _exchange_all(b, m, xor[xor < P].reshape(P, P - 1), others)
    b.depend(at[:, P + 1:], at[:, P:-1])  # each send after the one before


@register("alltoall", "bruck", source="Bruck et al. 1997; Thakur, Rabenseifner, Gropp 2005 (Bruck all-to-all)")
def _alltoall_bruck(b: ScheduleBuilder, problem: Problem) -> None:
    """Bruck: ceil(log2 P) steps; in the step of distance k, rank r sends to r+k every block whose
    (rotated) index has bit k set, packed into one message.

    Slot j of rank r starts as its block for rank r+j; in each step the slots sent are replaced by
    the ones received, and after the last step slot j holds the block from rank r-j.  A slot is not
    moved between steps: the schedule remembers where it is (the send buffer, or the receive area
    of the step that last brought it) and packs from there, a single-block message goes without
    packing, and the last step receives straight into the receive buffer where its blocks land
    contiguously.  That copies each block about (log2 P)/2 + 1 times instead of MPICH's
    (log2 P)/2 + 3.  Each block travels up to log2 P times, so this is for small blocks; Hockney
    cost ceil(log2 P) alpha + (m P / 2) log2(P) beta.
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    steps = []  # (distance k, the slots sent at that distance, highest first)
    k = 1
    while k < P:
        steps.append((k, [j for j in range(P - 1, 0, -1) if j & k]))
        k *= 2
    # SCRATCH: the packing area, then one receive area per step.
    areas = list(accumulate((len(js) * m for _, js in steps), initial=max((len(js) for _, js in steps), default=0) * m))
    for r in range(P):
        b.need_scratch(r, areas[-1])
        where = {j: Region(Buf.SEND, (r + j) % P * m, m) for j in range(P)}
        arrived: dict[int, int] = {}
        b.copy(r, where[0], Region(Buf.RECV, r * m, m))
        for (k, js), area in zip(steps, areas):
            b.fence(r)
            if len(js) == 1:
                message = where[js[0]]
            else:
                for i, j in enumerate(js):
                    b.copy(r, where[j], Region(Buf.SCRATCH, i * m, m))
                message = Region(Buf.SCRATCH, 0, len(js) * m)
            final = [(r - j) % P for j in js]
            last = all(j < 2 * k for j in js) and final == list(range(final[0], final[0] + len(js)))
            into = Region(Buf.RECV, final[0] * m, len(js) * m) if last else Region(Buf.SCRATCH, area, len(js) * m)
            got = b.recv(r, (r - k) % P, into, TAG_DATA)
            b.send(r, (r + k) % P, message, TAG_DATA)
            for i, j in enumerate(js):
                where[j] = Region(into.buf, into.offset + i * m, m)
                arrived[j] = got
        for j in range(1, P):
            if where[j].buf != Buf.RECV:
                b.copy(r, where[j], Region(Buf.RECV, (r - j) % P * m, m), requires=[arrived[j]])


@register("alltoall", "linear_throttled", source="MPICH alltoall with MPIR_CVAR_ALLTOALL_THROTTLE; Open MPI linear_sync",
          params=(Param("max_outstanding", int, DEFAULT_MAX_OUTSTANDING,
                        "at most this many sends and this many receives in flight per rank", minimum=1),))
def _alltoall_throttled(b: ScheduleBuilder, problem: Problem, max_outstanding: int) -> None:
    """Linear exchange with at most k outstanding requests: rank r receives from r-1, r-2, ... and
    sends to r+1, r+2, ..., the i-th receive (send) waiting for the (i-k)-th to complete.

    A sliding window of k = `max_outstanding` receives and k sends; k >= P-1 is the rotated direct
    exchange, k = 1 is a ring of one-at-a-time exchanges.
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    k = max_outstanding
    r, i = np.arange(P)[:, None], np.arange(1, P)[None, :]
    at = _exchange_all(b, m, (r + i) % P, (r - i) % P, recvs_first=False)
    # the i-th receive (send) waits for the (i-k)-th: 2 k places back in the interleaved row
    b.depend(at[:, 1 + 2 * k:], at[:, 1:max(1, at.shape[1] - 2 * k)])
