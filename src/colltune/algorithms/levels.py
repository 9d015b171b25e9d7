"""Hosts and levels: which ranks share a host, and a schedule of a few ranks run inside a larger one.

A hierarchical algorithm (:mod:`colltune.algorithms.hierarchical`) is a sequence of *levels*:
a collective among the ranks of each host (through shared memory), one among a leader of each
host (over the network), then again within each host.  Each level is an ordinary schedule of a
registered algorithm, built for its own few ranks and then *embedded* (:func:`embed`) into the
whole communicator's schedule: its ranks renamed, its buffers placed in regions of the larger
schedule's buffers, its scratch given space of its own, its tags moved to a band of their own,
and its first operation on each rank made to wait for what the level before wrote there.  So
every level keeps the correctness the verifier proved for it, and the composition is verified
as a whole again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from colltune.collectives import Problem, get_collective
from colltune.errors import ParameterError
from colltune.schedule import Buf, Kind, Region, Schedule, ScheduleBuilder
from colltune.schedule.ir import REDUCTION_DTYPES, REDUCTION_OPS

#: Tags of an embedded level are its own tags plus its band times this: wider than the tags any
#: algorithm uses (:mod:`colltune.algorithms.tags`), so levels never match each other's messages.
TAG_BAND = 16


@dataclass(frozen=True)
class Layout:
    """The hosts of a communicator: ``groups[g]`` are the ranks of host g, ascending; hosts are
    numbered by their lowest rank.  ``host_of[r]`` is rank r's host."""

    groups: tuple[tuple[int, ...], ...]
    host_of: tuple[int, ...]

    @classmethod
    def of(cls, problem: Problem) -> Layout:
        """The layout of ``problem.hosts``; one rank per host where it is ``None``."""
        labels = problem.hosts if problem.hosts is not None else tuple(range(problem.procs))
        index: dict[int, int] = {}
        groups: list[list[int]] = []
        for r, label in enumerate(labels):
            if label not in index:
                index[label] = len(groups)
                groups.append([])
            groups[index[label]].append(r)
        return cls(tuple(tuple(g) for g in groups), tuple(index[label] for label in labels))

    @property
    def widest(self) -> int:
        """The most ranks any host has."""
        return max(len(g) for g in self.groups)

    def leaders(self, root: int | None, count: int) -> list[list[int]]:
        """``count`` leaders of every host: ``leaders(...)[k][g]`` is host g's k-th leader.  The
        root (if any) leads its host at every k; elsewhere the k-th leader is the host's k-th lowest rank,
        and a host of fewer ranks than ``count`` has its ranks lead again in turn."""
        out = []
        for k in range(count):
            row = []
            for g in self.groups:
                row.append(root if root in g else g[k % len(g)])
            out.append(row)
        return out


class Scratch:
    """Scratch space handed out per rank, bytes: each region is new, so levels never overwrite
    what another level still reads."""

    def __init__(self, b: ScheduleBuilder):
        self.b = b
        self.top: dict[int, int] = {}

    def take(self, rank: int, nbytes: int) -> Region:
        """A new SCRATCH region of ``nbytes`` on ``rank``."""
        at = self.top.get(rank, 0)
        self.top[rank] = at + nbytes
        self.b.need_scratch(rank, at + nbytes)
        return Region(Buf.SCRATCH, at, nbytes)


@dataclass
class Embedded:
    """What :func:`embed` added, per rank of the larger schedule: the op ids that write a buffer
    (receives, copies, reductions), and every op id."""

    written: dict[int, list[int]] = field(default_factory=dict)
    every: dict[int, list[int]] = field(default_factory=dict)


#: Where a level's buffer of one of its ranks lies in the larger schedule: ``(rank in the level,
#: buffer in the level) -> region start (buffer, offset)``.
Placer = Callable[[int, Buf], tuple[Buf, int]]


def embed(b: ScheduleBuilder, sub: Schedule, ranks: Sequence[int], place: Placer, scratch: Scratch,
          after: Mapping[int, Sequence[int]], band: int) -> Embedded:
    """Add ``sub``, a schedule of ``len(ranks)`` ranks, to ``b``: its rank i is ``ranks[i]``; its
    SEND and RECV regions lie where ``place`` says; its SCRATCH gets a new region of ``scratch``;
    its tags move up by ``band`` x :data:`TAG_BAND`; and the first of its operations on each rank
    requires the ops ``after[rank]`` (the ranks post in order, so every later op waits too)."""
    cols = sub.columns
    ids = np.empty(len(sub), dtype=np.int64)
    out = Embedded()
    for s, rank in enumerate(ranks):
        lo, hi = int(sub.rank_ptr[s]), int(sub.rank_ptr[s + 1])
        if lo == hi:
            continue
        base = {Buf.SEND: place(s, Buf.SEND), Buf.RECV: place(s, Buf.RECV)}
        need = int(sub.buffer_sizes[s, Buf.SCRATCH])
        if need:
            region = scratch.take(rank, need)
            base[Buf.SCRATCH] = (Buf.SCRATCH, region.offset)
        written, every = out.written.setdefault(rank, []), out.every.setdefault(rank, [])
        for i in range(lo, hi):
            deps = range(int(sub.dep_ptr[i]), int(sub.dep_ptr[i + 1]))
            requires = [int(ids[sub.dep_idx[d]]) for d in deps if not sub.dep_start[d]]
            irequires = [int(ids[sub.dep_idx[d]]) for d in deps if sub.dep_start[d]]
            if i == lo:
                requires += list(after.get(rank, ()))
            kind = Kind(int(cols["kind"][i]))
            buf, off = base[Buf(int(cols["buf"][i]))]
            dst = Region(buf, off + int(cols["offset"][i]), int(cols["length"][i]))
            if kind in (Kind.SEND, Kind.RECV):
                add = b.send if kind == Kind.SEND else b.recv
                op = add(rank, ranks[int(cols["peer"][i])], dst, int(cols["tag"][i]) + band * TAG_BAND,
                         requires, irequires)
            elif kind in (Kind.COPY, Kind.REDUCE):
                sbuf, soff = base[Buf(int(cols["src_buf"][i]))]
                src = Region(sbuf, soff + int(cols["src_offset"][i]), dst.length)
                if kind == Kind.COPY:
                    op = b.copy(rank, src, dst, requires, irequires)
                else:
                    op = b.reduce(rank, src, dst, REDUCTION_OPS[int(cols["redop"][i])],
                                  REDUCTION_DTYPES[int(cols["dtype"][i])], requires, irequires)
            else:
                op = b.delay(rank, float(cols["delay"][i]), requires, irequires)
            ids[i] = op
            every.append(op)
            if kind != Kind.SEND and kind != Kind.DELAY:
                written.append(op)
    return out


class Levels:
    """Builds the levels of one hierarchical schedule into ``b``: sub-schedules of registered
    algorithms (cached, as hosts of one size repeat them), embedded one after another."""

    def __init__(self, b: ScheduleBuilder, problem: Problem):
        self.b, self.problem = b, problem
        self.scratch = Scratch(b)
        self._cache: dict[tuple, Schedule] = {}

    def schedule(self, collective: str, algorithm: str, procs: int, root: int, size: int) -> Schedule:
        """The schedule of registered ``collective``/``algorithm`` with its default parameters on
        ``procs`` ranks (the problem's reduction, if the collective reduces)."""
        from colltune.algorithms.registry import REGISTRY

        key = (collective, algorithm, procs, root, size)
        if key not in self._cache:
            alg = REGISTRY.get(collective, algorithm)
            p = self.problem
            reduces = get_collective(collective).reduces
            sub = Problem(collective, procs, root, size, op=p.op if reduces else None,
                          dtype=p.dtype if reduces else None, commutative=p.commutative if reduces else True)
            self._cache[key] = alg.schedule_for(sub)
        return self._cache[key]

    def run(self, collective: str, algorithm: str, ranks: Sequence[int], root: int, size: int, place: Placer,
            after: Mapping[int, Sequence[int]], band: int) -> Embedded:
        """Embed ``collective``/``algorithm`` among ``ranks`` (``root`` an index into them) of
        ``size`` bytes, its buffers where ``place`` puts them."""
        sub = self.schedule(collective, algorithm, len(ranks), root, size)
        return embed(self.b, sub, ranks, place, self.scratch, after, band)


def level_algorithms(collective: str) -> list[str]:
    """The registered ``collective`` algorithms a level can run (with their default parameters,
    on any number of ranks: not hierarchical themselves, not built for a given tree)."""
    from colltune.algorithms.registry import REGISTRY

    return [a.name for a in REGISTRY.select(collective) if a.hierarchical is False and
            not any(p.name == "edges" for p in a.params)]


def check_level(collective: str, algorithm: str, role: str) -> None:
    """One clear error unless ``algorithm`` is one of :func:`level_algorithms`."""
    from colltune.algorithms.registry import REGISTRY

    names = level_algorithms(collective)
    name = REGISTRY.get(collective, algorithm).name if algorithm in REGISTRY.names(collective, aliases=True) else None
    if name not in names:
        raise ParameterError(f"{role}={algorithm!r} is not a {collective} algorithm a level can run; "
                             f"valid: {', '.join(names)}")
