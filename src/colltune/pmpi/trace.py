"""Recorded runs (``COLLTUNE_RECORD=DIR``, cpp/record.cpp) as schedules, for ``colltune trace-to-goal``.

Each rank's file ``DIR/rank-<R>.jsonl`` lists what the program called, in order, with start and
end times.  :func:`read_records` reads and validates them; :func:`to_schedule` turns them into one
:class:`~colltune.schedule.Schedule` (written as GOAL by :func:`~colltune.sim.goal.write_goal`):

* the time between two recorded calls is a delay (the program's own work);
* a blocking send, receive or sendrecv starts when the previous call has ended, and the next
  waits for it; a non-blocking one starts likewise but only its wait waits for it;
* every operation starts no earlier than the one recorded before it (MPI's posting order, which
  its message matching follows);
* a collective becomes the registry schedule of the algorithm that ran it (``native``: MPICH's
  default choice, :func:`~colltune.tune.native.native_equivalent`), or with ``table`` the one
  that table chooses, on the communicator's ranks, with tags above :data:`COLLECTIVE_TAGS` so that
  they never match the program's own messages.  Reductions are priced as sums of bytes.

Receives recorded from MPI_ANY_SOURCE or with MPI_ANY_TAG carry the source and tag they matched
(and ``any_source`` / ``any_tag``), and the schedule receives exactly that: the recorded run's
matching.  Writing them as GOAL wildcards instead would let a simulated wildcard take a message
of another communicator or of a collective, since a schedule has one matching space per rank.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from colltune.algorithms import REGISTRY
from colltune.collectives import COLLECTIVES, Problem
from colltune.errors import ColltuneError
from colltune.files import read_text
from colltune.models import Unavailable
from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Region, Schedule, ScheduleBuilder
from colltune.tune.native import native_equivalent
from colltune.tune.table import NATIVE, DecisionTable
from colltune.tune.targets import library_algorithm

FORMAT = "colltune-record"
VERSION = 1
#: Tags of the collectives' messages start here (the program's own tags must be below it).
COLLECTIVE_TAGS = 1 << 30


class RecordError(ColltuneError, ValueError):
    """A recorded run that cannot be read; the message names the file, the line and the field."""


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Header(_Line):
    format: Literal["colltune-record"]
    version: Literal[1]
    rank: int = Field(ge=0)
    procs: int = Field(ge=1)
    abi: str


class CommLine(_Line):
    comm: int = Field(ge=0)
    ranks: tuple[int, ...]


class _Timed(_Line):
    t0: float
    t1: float


class PointToPoint(_Timed):
    op: Literal["send", "recv", "isend", "irecv"]
    comm: int = Field(ge=0)
    peer: int = Field(ge=0)
    tag: int = Field(ge=0)
    bytes: int = Field(ge=0)
    req: int | None = None
    any_source: bool = Field(False, description="a receive posted with MPI_ANY_SOURCE (peer: what it matched)")
    any_tag: bool = Field(False, description="a receive posted with MPI_ANY_TAG (tag: what it matched)")


class SendRecv(_Timed):
    op: Literal["sendrecv"]
    comm: int = Field(ge=0)
    peer: int = Field(ge=-1, description="-1: MPI_PROC_NULL, nothing sent")
    tag: int = Field(ge=0)
    bytes: int = Field(ge=0)
    source: int = Field(ge=-1, alias="from", description="-1: MPI_PROC_NULL, nothing received")
    recv_tag: int = Field(ge=0)
    recv_bytes: int = Field(ge=0)
    any_source: bool = Field(False, description="the receive named MPI_ANY_SOURCE (from: what it matched)")
    any_tag: bool = Field(False, description="the receive named MPI_ANY_TAG (recv_tag: what it matched)")


class Wait(_Timed):
    op: Literal["wait"]
    reqs: tuple[int, ...]


class Collective(_Timed):
    op: Literal["bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier"]
    comm: int = Field(ge=0)
    root: int = Field(ge=0)
    size: int = Field(ge=0, description="block bytes")
    algorithm: str
    params: dict[str, Any]


Event = Annotated[PointToPoint | SendRecv | Wait | Collective, Field(discriminator="op")]
_EVENT = TypeAdapter(Event)


class RankRecord(BaseModel):
    """One rank's recorded run: its header, communicators and events in order."""

    header: Header
    comms: dict[int, tuple[int, ...]]
    events: tuple[Any, ...]


def _parse(path: Path) -> RankRecord:
    header, comms, events = None, {}, []
    text = read_text(path, "record", RecordError)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if header is None:
                header = Header.model_validate(data)
            elif "op" in data:
                events.append(_EVENT.validate_python(data))
            else:
                c = CommLine.model_validate(data)
                comms[c.comm] = c.ranks
        except (json.JSONDecodeError, ValidationError) as exc:
            raise RecordError(f"{path}:{number}: {_first_error(exc)}") from None
        except RecursionError:
            raise RecordError(f"{path}:{number}: JSON nested deeper than colltune reads") from None
    if header is None:
        raise RecordError(f"{path}: empty: no {FORMAT} header")
    return RankRecord(header=header, comms=comms, events=tuple(events))


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"]) or "(line)"
        return f"{where}: {e['msg']}"
    return str(exc)


def read_records(directory: str | Path) -> list[RankRecord]:
    """Every rank's record in ``directory``, by world rank; raise :class:`RecordError` when one is
    missing, doubled or unreadable."""
    d = Path(directory)
    files = sorted(d.glob("rank-*.jsonl"))
    if not files:
        raise RecordError(f"{d}: no rank-*.jsonl files (run the program with COLLTUNE_RECORD={d})")
    records = [_parse(f) for f in files]
    procs = records[0].header.procs
    by_rank = {r.header.rank: r for r in records}
    if len(by_rank) != len(records) or sorted(by_rank) != list(range(procs)) or \
            any(r.header.procs != procs for r in records):
        raise RecordError(f"{d}: expected rank-0 .. rank-{procs - 1}.jsonl of one run of {procs} ranks, found "
                          f"{', '.join(f.name for f in files)}")
    return [by_rank[r] for r in range(procs)]


class _Rank:
    """Builds one rank's operations in program order."""

    def __init__(self, b: ScheduleBuilder, rank: int):
        self.b, self.rank = b, rank
        self.done: list[int] = []     # what the next blocking step waits for
        self.posted: list[int] = []   # the last op posted (posting order)
        self.pending: dict[int, int] = {}

    def region(self, nbytes: int) -> Region:
        self.b.need_scratch(self.rank, nbytes)
        return Region(Buf.SCRATCH, 0, nbytes)

    def add(self, kind: Kind, requires: Iterable[int] = (), **what: Any) -> int:
        req, ireq = [*self.done, *requires], self.posted
        b, r = self.b, self.rank
        if kind == Kind.SEND:
            op = b.send(r, what["peer"], self.region(what["nbytes"]), what["tag"], req, ireq)
        elif kind == Kind.RECV:
            op = b.recv(r, what["peer"], self.region(what["nbytes"]), what["tag"], req, ireq)
        elif kind == Kind.COPY:
            reg = self.region(what["nbytes"])
            op = b.copy(r, reg, reg, req, ireq)
        elif kind == Kind.REDUCE:
            reg = self.region(what["nbytes"])
            op = b.reduce(r, reg, reg, what["op"], what["dtype"], req, ireq)
        else:
            op = b.delay(r, what["seconds"], req, ireq)
        self.posted = [op]
        return op

    def join(self, ops: list[int]) -> None:
        """The next step waits for ``ops`` (and what it waited for already)."""
        if ops:
            self.done = [self.add(Kind.DELAY, ops, seconds=0.0)]


def _collective_schedule(event: Collective, procs: int, table: DecisionTable | None,
                         cache: dict[tuple, Schedule]) -> Schedule:
    coll, size = event.op, event.size
    algorithm, params = event.algorithm, dict(event.params)
    if table is not None:
        algorithm, params = table.lookup(coll, procs, size)
        if table.library != "colltune" and algorithm != NATIVE:  # the library's algorithm, as the tuner priced it
            try:
                algorithm, params = library_algorithm(table.library, coll, algorithm).equivalent(procs, size, params)
            except Unavailable:  # a precondition the library checks: it runs its default
                algorithm, params = NATIVE, {}
    if algorithm == NATIVE:
        algorithm, params = native_equivalent(coll, procs, size)
    key = (coll, algorithm, json.dumps(params, sort_keys=True), procs, event.root, size)
    if key not in cache:
        reduces = COLLECTIVES[coll].reduces
        problem = Problem(coll, procs, event.root if COLLECTIVES[coll].rooted else 0, size,
                          op="sum" if reduces else None, dtype="uint8" if reduces else None)
        cache[key] = REGISTRY.get(coll, algorithm).schedule_for(problem, **params)
    return cache[key]


def to_schedule(records: list[RankRecord], table: DecisionTable | None = None) -> Schedule:
    """One schedule of the recorded run (see the module docstring); ``table`` re-decides every
    collective."""
    procs = len(records)
    b = ScheduleBuilder(procs)
    cache: dict[tuple, Schedule] = {}
    for rank, rec in enumerate(records):
        me = _Rank(b, rank)
        previous_end = None
        for number, e in enumerate(rec.events, 1):
            where = f"rank {rank}, event {number} ({e.op})"
            if previous_end is not None and e.t0 > previous_end:
                me.done = [me.add(Kind.DELAY, seconds=e.t0 - previous_end)]
            previous_end = e.t1
            if isinstance(e, Wait):
                me.join([me.pending.pop(r) for r in e.reqs if r in me.pending])
                continue
            ranks = rec.comms.get(e.comm)
            if ranks is None:
                raise RecordError(f"{where}: communicator {e.comm} was never described")

            def world(peer: int, ranks: tuple[int, ...] = ranks, where: str = where) -> int:
                if not 0 <= peer < len(ranks):
                    raise RecordError(f"{where}: peer {peer} is not a rank of its communicator ({len(ranks)} ranks)")
                return ranks[peer]

            if isinstance(e, PointToPoint):
                if e.tag >= COLLECTIVE_TAGS:
                    raise RecordError(f"{where}: tag {e.tag} is at or above {COLLECTIVE_TAGS}, kept for collectives")
                kind = Kind.SEND if e.op in ("send", "isend") else Kind.RECV
                op = me.add(kind, peer=world(e.peer), nbytes=e.bytes, tag=e.tag)
                if e.op in ("isend", "irecv"):
                    if e.req is not None:
                        me.pending[e.req] = op
                else:
                    me.done = [op]
            elif isinstance(e, SendRecv):
                ops = []
                if e.peer >= 0:
                    ops.append(me.add(Kind.SEND, peer=world(e.peer), nbytes=e.bytes, tag=e.tag))
                if e.source >= 0:
                    ops.append(me.add(Kind.RECV, peer=world(e.source), nbytes=e.recv_bytes, tag=e.recv_tag))
                me.join(ops)
            else:
                me.join(_expand(me, e, ranks, rank, table, cache, where))
        me.join(list(me.pending.values()))
    return b.build({"source": "colltune trace-to-goal", "procs": procs})


def _expand(me: _Rank, e: Collective, ranks: tuple[int, ...], rank: int, table: DecisionTable | None,
            cache: dict[tuple, Schedule], where: str) -> list[int]:
    """Add this rank's part of collective ``e``; return its ops."""
    try:
        local = ranks.index(rank)
    except ValueError:
        raise RecordError(f"{where}: rank {rank} is not in its communicator {list(ranks)}") from None
    try:
        s = _collective_schedule(e, len(ranks), table, cache)
    except ColltuneError as exc:
        raise RecordError(f"{where}: {exc}") from None
    c = s.columns
    lo, hi = int(s.rank_ptr[local]), int(s.rank_ptr[local + 1])
    base = COLLECTIVE_TAGS + (e.comm % (1 << 14)) * (1 << 16)
    ids: dict[int, int] = {}
    for i in range(lo, hi):
        idx, start = s.deps(i)
        requires = [ids[int(d)] for d, st in zip(idx, start) if not st]
        kind = Kind(int(c["kind"][i]))
        length = int(c["length"][i])
        if kind in (Kind.SEND, Kind.RECV):
            what = {"peer": ranks[int(c["peer"][i])], "nbytes": length, "tag": base + int(c["tag"][i]) % (1 << 16)}
        elif kind == Kind.REDUCE:
            what = {"nbytes": length, "op": REDUCTION_OPS[int(c["redop"][i])],
                    "dtype": REDUCTION_DTYPES[int(c["dtype"][i])]}
        elif kind == Kind.COPY:
            what = {"nbytes": length}
        else:
            what = {"seconds": float(c["delay"][i])}
        ids[i] = me.add(kind, requires, **what)
    return list(ids.values())
