"""Allgather algorithms: ring, recursive doubling, Bruck, direct, and gather + broadcast.

Buffer convention (see :mod:`colltune.collectives`): every rank's SEND buffer holds its
block of ``m`` bytes; every rank's RECV buffer ends with block ``r`` at ``r*m``.  Each
rank first copies its own block into place; the exchange then runs on the RECV
buffers, tracked by :class:`~colltune.algorithms.chunks.ChunkTracker` so that every
send requires exactly the receives that brought its data.
"""

from __future__ import annotations

from collections.abc import Callable

from colltune.algorithms.bcast import allgather_recursive_doubling, allgather_ring, tree_bcast
from colltune.algorithms.chunks import ChunkTracker
from colltune.algorithms.gather import tree_gather
from colltune.algorithms.registry import register
from colltune.algorithms.trees import binomial_tree
from colltune.collectives import Problem
from colltune.schedule import Buf, Region, ScheduleBuilder


def _own_blocks(b: ScheduleBuilder, problem: Problem, exchange: Callable[[ChunkTracker], None]) -> None:
    """Copy every rank's block into its RECV buffer, then run ``exchange`` on the blocks."""
    P, m = problem.procs, problem.size
    if m == 0:
        return
    t = ChunkTracker(b, 0, [c * m for c in range(P + 1)])
    for r in range(P):
        b.copy(r, Region(Buf.SEND, 0, m), Region(Buf.RECV, r * m, m))
        t.give(r, [r])
    exchange(t)


@register("allgather", "ring", source="Thakur, Rabenseifner, Gropp 2005 (ring allgather)")
def _allgather_ring(b: ScheduleBuilder, problem: Problem) -> None:
    """Ring: in step s, rank r passes block (r - s) mod P to rank r+1.

    P-1 steps of one block each; Hockney cost (P-1) alpha + (P-1) m beta.
    """
    _own_blocks(b, problem, allgather_ring)


@register("allgather", "recursive_doubling", source="Thakur, Rabenseifner, Gropp 2005 (recursive doubling)")
def _allgather_recursive_doubling(b: ScheduleBuilder, problem: Problem) -> None:
    """Recursive doubling for any P: ranks exchange everything they hold with partner r XOR 2^j.

    With p2 the largest power of two <= P, ranks p2..P-1 first hand their block to ranks
    0..P-p2-1 and get everything back at the end.  ceil(log2 P) steps (two more if P is not a
    power of two); Hockney cost log2(P) alpha + (P-1) m beta for powers of two.
    """
    _own_blocks(b, problem, allgather_recursive_doubling)


def _bruck(t: ChunkTracker) -> None:
    """Bruck: in the step of distance k, rank r receives from r+k the min(k, P-k) blocks r+k, r+k+1, ...
    it lacks (everything r+k holds), and sends its own to r-k."""
    P = t.procs
    k = 1
    while k < P:
        count = min(k, P - k)
        for r in range(P):
            t.transfer((r + k) % P, r, [(r + k + i) % P for i in range(count)])
        k *= 2


@register("allgather", "bruck", source="Bruck et al. 1997; Thakur, Rabenseifner, Gropp 2005 (Bruck allgather)")
def _allgather_bruck(b: ScheduleBuilder, problem: Problem) -> None:
    """Bruck: in step j, rank r sends every block it holds (at most 2^j) to rank r - 2^j.

    ceil(log2 P) steps for any P, blocks kept in place (a run that wraps past the last rank
    travels as two messages); Hockney cost ceil(log2 P) alpha + (P-1) m beta.  Made for small
    blocks.
    """
    _own_blocks(b, problem, _bruck)


def _direct(t: ChunkTracker) -> None:
    P = t.procs
    for s in range(1, P):
        for r in range(P):
            t.transfer(r, (r + s) % P, [r])


@register("allgather", "direct", source="MPI libraries' linear allgather (every rank to every rank)",
          aliases=("linear",))
def _allgather_direct(b: ScheduleBuilder, problem: Problem) -> None:
    """Direct: every rank sends its block to every other rank at once (rank r to r+1, r+2, ...).

    One round of P-1 sends and P-1 receives per rank; cost about (P-1) g(m) + L without contention.
    """
    _own_blocks(b, problem, _direct)


@register("allgather", "gather_bcast", source="MPICH/Open MPI basic allgather (gather, then broadcast)")
def _allgather_gather_bcast(b: ScheduleBuilder, problem: Problem) -> None:
    """Gather + broadcast: a binomial gather of every block to rank 0, then a binomial broadcast
    of all P m bytes.

    2 ceil(log2 P) rounds; Hockney cost 2 log2(P) alpha + (P-1) m beta + log2(P) P m beta.
    """
    P, m = problem.procs, problem.size
    if m == 0:
        return
    tree = binomial_tree(P)
    tree_gather(b, P, 0, m, tree)
    for r in range(P):
        b.fence(r)
    tree_bcast(b, P, 0, P * m, tree, turn=True)
