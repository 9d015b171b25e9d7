"""Hierarchical compositions: every collective as levels within hosts and between them.

The ranks of a host (a node of a cluster) talk through shared memory and share one network
interface.  A hierarchical algorithm crosses the network once per host and level, among one
*leader* per host, and does the rest among each host's ranks (MPICH's compositions,
``MPIR_CVAR_<COLL>_COMPOSITION``; Open MPI's coll/han; the two-level trees of paper 004 and
MagPIe).  Each level runs any registered algorithm, named by a parameter (:mod:`.levels`), on
the problem's :attr:`~colltune.collectives.Problem.hosts`; without hosts every rank is a host
of its own and the composition is its network level alone.

Leaders: the root leads its host; elsewhere a host's lowest rank.  With ``leaders`` k > 1
(bcast, reduce, allreduce), the message is cut into k parts and part i crosses the network
among the i-th leaders of the hosts, so that k ranks of a host work on the network level at
once (MPICH's multi-leader allreduce); ``segment_size`` cuts every part into segments that
flow through the levels one after another, so that a host's level works on one segment while
the network carries the next (coll/han's pipelining).

Gather, scatter, allgather and all-to-all carry each host's blocks as one block of the widest
host's size at the network level; a host with fewer ranks fills the rest of its block with a
copy of a block it holds (the verifier admits no undefined byte on the wire), so hosts of
uneven size send that padding too.
"""

from __future__ import annotations

from collections.abc import Callable

from colltune.algorithms.levels import Embedded, Layout, Levels, check_level
from colltune.algorithms.registry import Param, register
from colltune.collectives import Problem
from colltune.schedule import Buf, Region, ScheduleBuilder

_SOURCE = ("MPICH's compositions (MPIR_CVAR_<COLL>_COMPOSITION); Open MPI coll/han; "
           "Kielmann et al. 1999 (MagPIe); paper 004 (two-level collectives)")
_HOSTS = "any P >= 1, any root, any size >= 0, any hosts (Problem.hosts) and placement"

SEGMENT = Param("segment_size", int, 0, "bytes per segment flowing through the levels; 0: each part at once",
                minimum=0, unit="bytes")
LEADERS = Param("leaders", int, 1, "leaders per host; part i of the message crosses the network among the "
                                   "i-th leaders", minimum=1)


def _level(name: str, collective: str, default: str, what: str) -> Param:
    return Param(name, str, default, f"the {collective} algorithm {what}", level=collective)


def _parts(problem: Problem, leaders: int, segment_size: int) -> list[list[tuple[int, int]]]:
    """The message cut into ``leaders`` parts of whole elements, each into segments of at most
    ``segment_size`` bytes (whole elements; 0: one segment): ``(offset, length)`` in bytes."""
    item, n = problem.itemsize, problem.size
    count = n // item
    bounds = [i * count // leaders * item for i in range(leaders + 1)]
    step = max(item, segment_size // item * item) if segment_size else 0
    out = []
    for lo, hi in zip(bounds, bounds[1:]):
        if hi == lo:
            out.append([])
            continue
        width = step or hi - lo
        out.append([(o, min(width, hi - o)) for o in range(lo, hi, width)])
    return out


def _at(buf: Buf, offset: int) -> Callable[[int, Buf], tuple[Buf, int]]:
    """A placer that puts a level's SEND and RECV of every rank at ``offset`` of ``buf``."""
    return lambda s, b: (buf, offset)


def _start(b: ScheduleBuilder, problem: Problem, **levels: str) -> tuple[Layout, Levels]:
    """Check that each level (a parameter of the collective's hierarchical algorithm) names an
    algorithm a level can run; the problem's hosts and the levels to build into ``b``."""
    from colltune.algorithms.registry import REGISTRY

    for p in REGISTRY.get(problem.collective, "hierarchical").params:
        if p.level is not None:
            check_level(p.level, levels[p.name], p.name)
    return Layout.of(problem), Levels(b, problem)


def _one_per_host(lv: Levels, lay: Layout, collective: str, inter: str, m: int) -> None:
    """Where every host has one rank: the network level alone, on the ranks' own buffers (the
    hosts, numbered by their lowest rank, are the ranks in order)."""
    lv.run(collective, inter, lay.leaders(None, 1)[0], 0, m, lambda s, buf: (buf, 0), {}, 2)


def _written(e: Embedded, rank: int) -> list[int]:
    return e.written.get(rank, [])


@register("bcast", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("inter", "bcast", "binomial_tree", "among the hosts' leaders"),
                  _level("intra", "bcast", "flat_tree", "within each host"), SEGMENT, LEADERS))
def _bcast(b: ScheduleBuilder, problem: Problem, inter: str, intra: str, segment_size: int, leaders: int) -> None:
    """Two-level broadcast: the root's message crosses the network among one leader per host
    (``inter``), then each leader broadcasts it within its host (``intra``).

    Per segment; with k leaders, part i of the message crosses among the i-th leaders of the
    hosts.  Network cost of ``inter`` on H hosts, plus the host level in shared memory."""
    lay, lv = _start(b, problem, inter=inter, intra=intra)
    top = lay.host_of[problem.root]
    for part, lead in zip(_parts(problem, leaders, segment_size), lay.leaders(problem.root, leaders)):
        for o, n in part:
            crossed = (lv.run("bcast", inter, lead, top, n, _at(Buf.RECV, o), {}, 1)
                       if len(lay.groups) > 1 else Embedded())
            for g, ranks in enumerate(lay.groups):
                if len(ranks) > 1:
                    lv.run("bcast", intra, ranks, ranks.index(lead[g]), n, _at(Buf.RECV, o),
                           {lead[g]: _written(crossed, lead[g])}, 2)


def _reduce_within(lv: Levels, lay: Layout, lead: list[int], intra: str, o: int, n: int,
                   direct: bool) -> tuple[list[tuple[Buf, int]], dict[int, list[int]]]:
    """Each host's ranks reduce their SEND[o:o+n] to the host's leader (``intra``): into the
    leader's RECV[o:] when ``direct``, else into new scratch.  Returns, per host, where its
    leader's partial result lies, and the ops that wrote it."""
    sources, wrote = [], {}
    for g, ranks in enumerate(lay.groups):
        if len(ranks) == 1 and not direct:
            sources.append((Buf.SEND, o))
            continue
        to = (Buf.RECV, o) if direct else (Buf.SCRATCH, lv.scratch.take(lead[g], n).offset)
        e = lv.run("reduce", intra, ranks, ranks.index(lead[g]), n,
                   lambda s, buf, to=to: (Buf.SEND, o) if buf == Buf.SEND else to, {}, 1)
        sources.append(to)
        wrote[lead[g]] = _written(e, lead[g])
    return sources, wrote


@register("reduce", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          needs_commutative=True,
          params=(_level("inter", "reduce", "binomial_tree", "among the hosts' leaders"),
                  _level("intra", "reduce", "binomial_tree", "within each host"), SEGMENT, LEADERS))
def _reduce(b: ScheduleBuilder, problem: Problem, inter: str, intra: str, segment_size: int, leaders: int) -> None:
    """Two-level reduce: each host's ranks reduce to the host's leader (``intra``), then the
    leaders reduce to the root (``inter``).

    Per segment; with k leaders, part i of the vector is reduced among the i-th leaders.  Combines
    by host, so the operation must be commutative."""
    lay, lv = _start(b, problem, inter=inter, intra=intra)
    top, alone = lay.host_of[problem.root], len(lay.groups) == 1
    for part, lead in zip(_parts(problem, leaders, segment_size), lay.leaders(problem.root, leaders)):
        for o, n in part:
            sources, wrote = _reduce_within(lv, lay, lead, intra, o, n, alone)
            if not alone:
                lv.run("reduce", inter, lead, top, n,
                       lambda s, buf, sources=sources: sources[s] if buf == Buf.SEND else (Buf.RECV, o), wrote, 2)


@register("allreduce", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          needs_commutative=True,
          params=(_level("inter", "allreduce", "recursive_doubling", "among the hosts' leaders"),
                  _level("intra_reduce", "reduce", "binomial_tree", "that reduces to each host's leader"),
                  _level("intra_bcast", "bcast", "flat_tree", "that spreads the result within each host"),
                  SEGMENT, LEADERS))
def _allreduce(b: ScheduleBuilder, problem: Problem, inter: str, intra_reduce: str, intra_bcast: str,
               segment_size: int, leaders: int) -> None:
    """Three levels: each host reduces to its leader (``intra_reduce``), the leaders allreduce
    (``inter``), each leader broadcasts the result within its host (``intra_bcast``).

    Per segment; with k leaders (MPICH's multi-leader allreduce), part i of the vector goes
    through the three levels among the i-th leaders, so k ranks of a host use the network at
    once.  Combines by host, so the operation must be commutative."""
    lay, lv = _start(b, problem, inter=inter, intra_reduce=intra_reduce, intra_bcast=intra_bcast)
    alone = len(lay.groups) == 1
    for part, lead in zip(_parts(problem, leaders, segment_size), lay.leaders(None, leaders)):
        for o, n in part:
            sources, wrote = _reduce_within(lv, lay, lead, intra_reduce, o, n, alone)
            if not alone:
                e = lv.run("allreduce", inter, lead, 0, n,
                           lambda s, buf, sources=sources: sources[s] if buf == Buf.SEND else (Buf.RECV, o),
                           wrote, 2)
                wrote = {r: _written(e, r) for r in lead}
            for g, ranks in enumerate(lay.groups):
                if len(ranks) > 1:
                    lv.run("bcast", intra_bcast, ranks, ranks.index(lead[g]), n, _at(Buf.RECV, o),
                           {lead[g]: wrote.get(lead[g], [])}, 3)


def _fill(b: ScheduleBuilder, rank: int, block: Region, m: int, count: int, requires: list[int]) -> list[int]:
    """Copy the first ``m`` bytes of ``block`` (blocks of ``m`` bytes, the first ``count`` of them
    written by ``requires``) over its other blocks: the padding of a host of fewer ranks."""
    return [b.copy(rank, Region(block.buf, block.offset, m), Region(block.buf, block.offset + k * m, m), requires)
            for k in range(count, block.length // m)] if m else []


def _gather_hosts(b: ScheduleBuilder, lv: Levels, lay: Layout, lead: list[int], intra: str, width: int,
                  ) -> tuple[list[Region], dict[int, list[int]]]:
    """Each host's leader gathers its ranks' SEND[0:width] (``intra``) into new scratch of the
    widest host's size, padded; returns those regions and the ops that wrote them."""
    blocks, wrote = [], {}
    K = lay.widest
    for g, ranks in enumerate(lay.groups):
        mine = lv.scratch.take(lead[g], K * width)
        if len(ranks) == 1:
            ops = [b.copy(ranks[0], Region(Buf.SEND, 0, width), Region(Buf.SCRATCH, mine.offset, width))] \
                if width else []
        else:
            e = lv.run("gather", intra, ranks, ranks.index(lead[g]), width,
                       lambda s, buf, mine=mine: (Buf.SEND, 0) if buf == Buf.SEND else (Buf.SCRATCH, mine.offset),
                       {}, 1)
            ops = _written(e, lead[g])
        wrote[lead[g]] = ops + _fill(b, lead[g], mine, width, len(ranks), ops)
        blocks.append(mine)
    return blocks, wrote


@register("gather", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("inter", "gather", "binomial_tree", "among the hosts' leaders"),
                  _level("intra", "gather", "flat_tree", "within each host")))
def _gather(b: ScheduleBuilder, problem: Problem, inter: str, intra: str) -> None:
    """Two-level gather: each host's leader gathers its ranks' blocks (``intra``), then the root
    gathers the leaders' (``inter``) and puts every block in place.

    Each host's blocks cross the network once, as one block of K m bytes (K the widest host's
    ranks): ``inter``'s cost on H ranks and blocks of K m, plus ``intra``'s in each host and P
    copies of m bytes at the root."""
    lay, lv = _start(b, problem, inter=inter, intra=intra)
    m, root, H, K = problem.size, problem.root, len(lay.groups), lay.widest
    lead = lay.leaders(root, 1)[0]
    top = lay.host_of[root]
    if H == 1 or K == 1:  # one level; the hosts' order is the ranks' own
        ranks = lay.groups[0] if H == 1 else tuple(g[0] for g in lay.groups)
        level, rooted = (intra, ranks.index(root)) if H == 1 else (inter, top)
        lv.run("gather", level, ranks, rooted, m, lambda s, buf: (buf, 0), {}, 1)
        return
    blocks, wrote = _gather_hosts(b, lv, lay, lead, intra, m)
    every = lv.scratch.take(root, H * K * m)
    e = lv.run("gather", inter, lead, top, K * m,
               lambda s, buf: (Buf.SCRATCH, blocks[s].offset if buf == Buf.SEND else every.offset), wrote, 2)
    for g, ranks in enumerate(lay.groups):
        for i, r in enumerate(ranks):
            b.copy(root, Region(Buf.SCRATCH, every.offset + (g * K + i) * m, m), Region(Buf.RECV, r * m, m),
                   _written(e, root))


@register("scatter", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("inter", "scatter", "binomial_tree", "among the hosts' leaders"),
                  _level("intra", "scatter", "flat_tree", "within each host")))
def _scatter(b: ScheduleBuilder, problem: Problem, inter: str, intra: str) -> None:
    """Two-level scatter: the root orders its blocks by host and scatters them among the leaders
    (``inter``), each as one block of the widest host's size; each leader scatters its host's
    blocks within the host (``intra``).

    P copies of m bytes at the root, ``inter``'s cost on H ranks and blocks of K m bytes (K the
    widest host's ranks), then ``intra``'s in each host."""
    lay, lv = _start(b, problem, inter=inter, intra=intra)
    m, root, H, K = problem.size, problem.root, len(lay.groups), lay.widest
    lead = lay.leaders(root, 1)[0]
    top = lay.host_of[root]
    if H == 1 or K == 1:
        ranks = lay.groups[0] if H == 1 else tuple(g[0] for g in lay.groups)
        level, rooted = (intra, ranks.index(root)) if H == 1 else (inter, top)
        lv.run("scatter", level, ranks, rooted, m, lambda s, buf: (buf, 0), {}, 1)
        return
    ordered = lv.scratch.take(root, H * K * m)
    arranged = []
    for g, ranks in enumerate(lay.groups):
        at = Region(Buf.SCRATCH, ordered.offset + g * K * m, K * m)
        ops = [b.copy(root, Region(Buf.SEND, r * m, m), Region(Buf.SCRATCH, at.offset + i * m, m))
               for i, r in enumerate(ranks)]
        arranged += ops + _fill(b, root, at, m, len(ranks), ops)
    mine = [lv.scratch.take(lead[g], K * m) for g in range(H)]
    e = lv.run("scatter", inter, lead, top, K * m,
               lambda s, buf: (Buf.SCRATCH, ordered.offset if buf == Buf.SEND else mine[s].offset),
               {root: arranged}, 2)
    for g, ranks in enumerate(lay.groups):
        if len(ranks) == 1:
            b.copy(ranks[0], Region(Buf.SCRATCH, mine[g].offset, m), Region(Buf.RECV, 0, m), _written(e, ranks[0]))
            continue
        lv.run("scatter", intra, ranks, ranks.index(lead[g]), m,
               lambda s, buf, g=g: (Buf.SCRATCH, mine[g].offset) if buf == Buf.SEND else (Buf.RECV, 0),
               {lead[g]: _written(e, lead[g])}, 3)


@register("allgather", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("intra_gather", "gather", "flat_tree", "that gathers each host's blocks to its leader"),
                  _level("inter", "allgather", "ring", "among the hosts' leaders"),
                  _level("intra_bcast", "bcast", "flat_tree", "that spreads all blocks within each host")))
def _allgather(b: ScheduleBuilder, problem: Problem, intra_gather: str, inter: str, intra_bcast: str) -> None:
    """Three levels: each host gathers its blocks to its leader (``intra_gather``), the leaders
    allgather them (``inter``), each leader puts every block in place and broadcasts them within
    its host (``intra_bcast``).

    The network carries ``inter``'s allgather of H blocks of K m bytes (K the widest host's
    ranks); each host adds a gather of m-byte blocks and a broadcast of P m bytes."""
    lay, lv = _start(b, problem, intra_gather=intra_gather, inter=inter, intra_bcast=intra_bcast)
    P, m, H, K = problem.procs, problem.size, len(lay.groups), lay.widest
    lead = lay.leaders(None, 1)[0]
    if K == 1:
        _one_per_host(lv, lay, "allgather", inter, m)
        return
    blocks, wrote = _gather_hosts(b, lv, lay, lead, intra_gather, m)
    if H > 1:
        every = [lv.scratch.take(r, H * K * m) for r in lead]
        e = lv.run("allgather", inter, lead, 0, K * m,
                   lambda s, buf: (Buf.SCRATCH, blocks[s].offset if buf == Buf.SEND else every[s].offset), wrote, 2)
        wrote = {r: _written(e, r) for r in lead}
    else:
        every = blocks
    for g, ranks in enumerate(lay.groups):
        ld = lead[g]
        placed = [b.copy(ld, Region(Buf.SCRATCH, every[g].offset + (h * K + i) * m, m), Region(Buf.RECV, r * m, m),
                         wrote.get(ld, []))
                  for h, others in enumerate(lay.groups) for i, r in enumerate(others)]
        if len(ranks) > 1:
            lv.run("bcast", intra_bcast, ranks, ranks.index(ld), P * m, _at(Buf.RECV, 0), {ld: placed}, 3)


@register("alltoall", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("intra_gather", "gather", "flat_tree", "that gathers each host's data to its leader"),
                  _level("inter", "alltoall", "pairwise_exchange", "among the hosts' leaders"),
                  _level("intra_scatter", "scatter", "flat_tree", "that hands each rank its blocks")))
def _alltoall(b: ScheduleBuilder, problem: Problem, intra_gather: str, inter: str, intra_scatter: str) -> None:
    """Three levels: each host gathers its ranks' whole send buffers to its leader
    (``intra_gather``); the leaders exchange, per pair of hosts, every block between their ranks
    as one message (``inter``); each leader scatters to its ranks what they receive
    (``intra_scatter``).

    Between two hosts of K ranks, one message of K^2 m bytes instead of K^2 messages of m: the
    network carries ``inter``'s all-to-all of H ranks and blocks of K^2 m bytes; each host adds a
    gather and a scatter of P m bytes per rank and 2 H K^2 copies of m bytes at its leader."""
    lay, lv = _start(b, problem, intra_gather=intra_gather, inter=inter, intra_scatter=intra_scatter)
    P, m, H, K = problem.procs, problem.size, len(lay.groups), lay.widest
    lead = lay.leaders(None, 1)[0]
    if K == 1:
        _one_per_host(lv, lay, "alltoall", inter, m)
        return
    gathered, wrote = _gather_hosts(b, lv, lay, lead, intra_gather, P * m)
    B = K * K * m  # between two hosts: source i of one to destination j of the other at (i K + j) m
    outgoing = []
    for g, ranks in enumerate(lay.groups):
        ld, at = lead[g], lv.scratch.take(lead[g], H * B)
        # a host of fewer ranks than K repeats a block it holds where it has no source or destination
        wrote[ld] = [b.copy(ld, Region(Buf.SCRATCH, gathered[g].offset + (i % len(ranks)) * P * m
                                       + dests[j % len(dests)] * m, m),
                            Region(Buf.SCRATCH, at.offset + h * B + (i * K + j) * m, m), wrote[ld])
                     for h, dests in enumerate(lay.groups) for i in range(K) for j in range(K)]
        outgoing.append(at)
    incoming = outgoing
    if H > 1:
        incoming = [lv.scratch.take(r, H * B) for r in lead]
        e = lv.run("alltoall", inter, lead, 0, B,
                   lambda s, buf: (Buf.SCRATCH, outgoing[s].offset if buf == Buf.SEND else incoming[s].offset),
                   wrote, 2)
        wrote = {r: _written(e, r) for r in lead}
    for g, ranks in enumerate(lay.groups):
        ld = lead[g]
        out = (Buf.RECV, 0) if len(ranks) == 1 else (Buf.SCRATCH, lv.scratch.take(ld, len(ranks) * P * m).offset)
        placed = [b.copy(ld, Region(Buf.SCRATCH, incoming[g].offset + h * B + (i * K + j) * m, m),
                         Region(out[0], out[1] + j * P * m + source * m, m), wrote[ld])
                  for h, sources in enumerate(lay.groups) for i, source in enumerate(sources)
                  for j in range(len(ranks))]
        if len(ranks) > 1:
            lv.run("scatter", intra_scatter, ranks, ranks.index(ld), P * m,
                   lambda s, buf, out=out: out if buf == Buf.SEND else (Buf.RECV, 0), {ld: placed}, 3)


@register("barrier", "hierarchical", source=_SOURCE, constraints=_HOSTS, hierarchical=True, aliases=("hier",),
          params=(_level("inter", "barrier", "dissemination", "among the hosts' leaders"),
                  _level("intra", "barrier", "tree", "within each host, before and after")))
def _barrier(b: ScheduleBuilder, problem: Problem, inter: str, intra: str) -> None:
    """Three levels: a barrier within each host (``intra``), one among the hosts' leaders
    (``inter``), and one within each host again, which no rank leaves before its leader has
    left the leaders' barrier.

    ``inter``'s rounds on H ranks over the network, ``intra``'s twice in shared memory."""
    lay, lv = _start(b, problem, inter=inter, intra=intra)
    lead = lay.leaders(None, 1)[0]
    done: dict[int, list[int]] = {}
    for g, ranks in enumerate(lay.groups):
        if len(ranks) > 1:
            e = lv.run("barrier", intra, ranks, 0, 0, _at(Buf.RECV, 0), {}, 1)
            done[lead[g]] = e.every.get(lead[g], [])
    if len(lay.groups) > 1:
        e = lv.run("barrier", inter, lead, 0, 0, _at(Buf.RECV, 0), done, 2)
        done = {r: e.every.get(r, []) for r in lead}
    for g, ranks in enumerate(lay.groups):
        if len(ranks) > 1 and len(lay.groups) > 1:
            lv.run("barrier", intra, ranks, 0, 0, _at(Buf.RECV, 0), {lead[g]: done.get(lead[g], [])}, 3)
