"""Barrier algorithms: linear, dissemination, tree and recursive doubling.

A barrier moves no data: every message is zero bytes.  What the verifier checks
(:mod:`colltune.schedule.verify`) is that before any rank can finish it has
received, through a chain of messages it waits for, word from every other rank
that was sent after that rank entered the barrier.
"""

from __future__ import annotations

from colltune.algorithms.registry import register
from colltune.algorithms.tags import TAG_DATA, TAG_SIGNAL
from colltune.algorithms.trees import binomial_tree
from colltune.collectives import Problem
from colltune.schedule import Buf, Region, ScheduleBuilder

EMPTY = Region(Buf.RECV, 0, 0)


@register("barrier", "linear", source="MPICH/Open MPI linear barrier", aliases=("flat",))
def _barrier_linear(b: ScheduleBuilder, problem: Problem) -> None:
    """Linear: every rank tells rank 0 it has arrived; once all have, rank 0 releases each of them.

    2(P-1) messages through rank 0; cost about 2 (P-1) g(0) + 2L.
    """
    P = problem.procs
    arrived = [b.recv(0, r, EMPTY, TAG_DATA) for r in range(1, P)]
    for r in range(1, P):
        b.send(0, r, EMPTY, TAG_SIGNAL, requires=arrived)
    for r in range(1, P):
        b.send(r, 0, EMPTY, TAG_DATA)
        b.recv(r, 0, EMPTY, TAG_SIGNAL)


@register("barrier", "dissemination", source="Hensgen, Finkel, Manber 1988; MPICH dissemination barrier")
def _barrier_dissemination(b: ScheduleBuilder, problem: Problem) -> None:
    """Dissemination: in round k, rank r signals r + 2^k and waits for r - 2^k (mod P).

    ceil(log2 P) rounds for any P, one message per rank per round; cost ceil(log2 P)(g(0) + L).
    """
    P = problem.procs
    for r in range(P):
        got: list[int] = []
        k = 1
        while k < P:
            b.send(r, (r + k) % P, EMPTY, TAG_DATA, requires=got)
            got = [b.recv(r, (r - k) % P, EMPTY, TAG_DATA)]
            k *= 2


@register("barrier", "tree", source="Open MPI tree barrier (binomial fan-in, then fan-out)", aliases=("binomial",))
def _barrier_tree(b: ScheduleBuilder, problem: Problem) -> None:
    """Tree: a binomial fan-in to rank 0 (each rank reports once its whole subtree has), then a
    binomial fan-out of the release.

    2 ceil(log2 P) rounds; cost about 2 ceil(log2 P)(g(0) + L).
    """
    tree = binomial_tree(problem.procs)
    for r in tree.preorder:
        kids = tree.children[r]
        arrived = [b.recv(r, c, EMPTY, TAG_DATA) for c in kids]
        release = arrived
        if tree.parent[r] >= 0:
            b.send(r, tree.parent[r], EMPTY, TAG_DATA, requires=arrived)
            release = [b.recv(r, tree.parent[r], EMPTY, TAG_SIGNAL)]
        for c in kids:
            b.send(r, c, EMPTY, TAG_SIGNAL, requires=release)


@register("barrier", "recursive_doubling", source="Thakur, Rabenseifner, Gropp 2005; MPICH recursive doubling")
def _barrier_recursive_doubling(b: ScheduleBuilder, problem: Problem) -> None:
    """Recursive doubling: ranks p2..P-1 (p2 the largest power of two <= P) report to rank r - p2;
    then in round j rank r swaps signals with r XOR 2^j; finally ranks r < P - p2 release r + p2.

    log2(p2) rounds (two more if P is not a power of two); cost log2(p2)(g(0) + L).
    """
    P = problem.procs
    p2 = 1 << (P.bit_length() - 1)
    for r in range(p2, P):
        b.send(r, r - p2, EMPTY, TAG_DATA)
        b.recv(r, r - p2, EMPTY, TAG_SIGNAL)
    for r in range(p2):
        got = [b.recv(r, r + p2, EMPTY, TAG_DATA)] if r + p2 < P else []
        d = 1
        while d < p2:
            b.send(r, r ^ d, EMPTY, TAG_DATA, requires=got)
            got = [b.recv(r, r ^ d, EMPTY, TAG_DATA)]
            d *= 2
        if r + p2 < P:
            b.send(r, r + p2, EMPTY, TAG_SIGNAL, requires=got)
