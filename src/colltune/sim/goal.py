"""GOAL, the schedule language of LogGOPSim (Hoefler, Schneider, Lumsdaine 2010): write and read.

:func:`to_goal` writes a schedule in the form LogGOPSim's ``txt2bin`` parser accepts: a
``num_ranks`` line, then one ``rank R { ... }`` block per rank with one statement per line, no
indentation and no comments (that parser rejects both).  Each op is labelled ``l<index>`` and
followed by its dependency lines::

    num_ranks 2
    rank 0 {
    l0: send 8b to 1 tag 0
    l1: calc 0
    l1 irequires l0
    }

Registry schedules post each rank's ops in list order, so the writer adds the implicit
``l<k> irequires l<k-1>`` edge (unless the op already has it); sends and receives become ``send``
and ``recv`` of their length in bytes; local ops become ``calc`` of their CPU time in GOAL time
units (``time_unit`` seconds each, nanoseconds by default, as LogGOPSim's own parameters are
usually given): DELAY ops their delay, copies and reductions ``costs`` (default 0).

:func:`from_goal` reads what LogGOPSim reads (``//`` and ``/* */`` comments, ``cpu``/``nic`` on
statements, labels defined before use) and more: indentation and comments after a statement.
It makes a schedule whose only dependencies are the file's (``meta["posting_order"]`` is False),
with each send reading SEND[0:size] and each receive writing RECV[0:size]; ``calc N`` becomes a
DELAY of N time units.  A receive ``from -1`` or with ``tag -1`` is a wildcard
(:data:`~colltune.schedule.ANY_SOURCE`, :data:`~colltune.schedule.ANY_TAG`): the simulator matches
it as MPI matches ``MPI_ANY_SOURCE`` and ``MPI_ANY_TAG``, with the first message to arrive that
fits, in posting order; such a schedule can be simulated but not verified or executed.  Ops on a
CPU or NIC other than 0 are rejected with the line that uses them: colltune simulates one CPU and
one NIC per rank.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from colltune.errors import ColltuneError
from colltune.files import decode_text, read_bytes, write_atomic
from colltune.limits import MAX_BYTES, MAX_PROCS, MAX_TAG
from colltune.schedule import Buf, Kind, Region, Schedule
from colltune.schedule.builder import ScheduleBuilder
from colltune.sim import _goal

#: Seconds per GOAL time unit by default: LogGOPSim's parameters are usually nanoseconds.
NANOSECOND = 1e-9


class GoalError(ColltuneError):
    """A GOAL file that cannot be read: names the file, the line and the problem."""


def goal_lines(schedule: Schedule, time_unit: float = NANOSECOND, costs: np.ndarray | None = None) -> Iterator[str]:
    """The lines of ``schedule`` in GOAL (see the module docstring); ``costs`` gives the CPU time
    of each op in seconds (used for local ops; DELAY ops default to their delay)."""
    c = schedule.columns
    kind, peer, tag, length, delay = c["kind"], c["peer"], c["tag"], c["length"], c["delay"]
    in_order = bool(schedule.meta.get("posting_order", True))
    yield f"num_ranks {schedule.procs}"
    for r in range(schedule.procs):
        yield f"rank {r} {{"
        lo = int(schedule.rank_ptr[r])
        for i in schedule.ops_of(r):
            k = i - lo
            kd = int(kind[i])
            if kd == Kind.SEND:
                yield f"l{k}: send {int(length[i])}b to {int(peer[i])} tag {int(tag[i])}"
            elif kd == Kind.RECV:
                yield f"l{k}: recv {int(length[i])}b from {int(peer[i])} tag {int(tag[i])}"
            else:
                seconds = float(costs[i]) if costs is not None else (float(delay[i]) if kd == Kind.DELAY else 0.0)
                yield f"l{k}: calc {round(seconds / time_unit)}"
            idx, start = schedule.deps(i)
            edges = {(int(j) - lo, bool(s)) for j, s in zip(idx, start)}
            if in_order and k > 0:
                edges.add((k - 1, True))
            for j, s in sorted(edges):
                yield f"l{k} {'irequires' if s else 'requires'} l{j}"
        yield "}"


def to_goal(schedule: Schedule, time_unit: float = NANOSECOND, costs: np.ndarray | None = None) -> str:
    """``schedule`` as GOAL text (see :func:`goal_lines`)."""
    return "\n".join(goal_lines(schedule, time_unit, costs)) + "\n"


def write_goal(path: str | Path, schedule: Schedule, time_unit: float = NANOSECOND,
               costs: np.ndarray | None = None) -> None:
    """Write ``schedule`` as GOAL to ``path`` atomically (a temporary file, then a rename)."""
    write_atomic(path, (line + "\n" for line in goal_lines(schedule, time_unit, costs)))


_OP = re.compile(r"(?:([A-Za-z][A-Za-z0-9_]*)\s*:\s*)?(send|recv|calc)\s+(.*)$")
_MSG = re.compile(r"([0-9]+)\s*b\s+(to|from)\s+(-?[0-9]+)(?:\s+tag\s+(-?[0-9]+))?((?:\s+(?:cpu|nic)\s+[0-9]+)*)$")
_CALC = re.compile(r"([0-9]+)((?:\s+cpu\s+[0-9]+)?)$")
_DEP = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s+(requires|irequires)\s+([A-Za-z][A-Za-z0-9_]*)$")
_PLACEMENT = re.compile(r"(cpu|nic)\s+([0-9]+)")


def _strip_comments(text: str) -> Iterator[tuple[int, str]]:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL)
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.split("//", 1)[0].strip()
        if line:
            yield number, line


def from_goal(text: str, time_unit: float = NANOSECOND, name: str = "<goal>") -> Schedule:
    """Parse GOAL text into a schedule (see the module docstring); errors name ``name`` and the
    line.

    A file without comments goes through the compiled reader (``colltune.sim._goal``), which takes
    a subset of this grammar; whatever it does not take (a comment, an error, a rare form) is read
    here, line by line, and any error named."""
    parsed = _compiled(text.encode())
    schedule = None if parsed is None else _from_columns(parsed, time_unit)
    return schedule if schedule is not None else _parse(text, time_unit, name)


def _compiled(raw: bytes) -> dict | None:
    """The compiled reader's columns of GOAL bytes without comments that it takes, else None."""
    if b"//" in raw or b"/*" in raw:
        return None
    parsed = _goal.parse(raw, MAX_PROCS, MAX_BYTES, MAX_TAG)
    return parsed if isinstance(parsed, dict) else None


def _from_columns(parsed: dict, time_unit: float) -> Schedule | None:
    """The schedule of the compiled reader's columns (ops in file order, dependencies by their
    index), or None where a receive is shorter than every send it can match (which :func:`_parse`
    then names)."""
    procs = int(parsed["procs"])
    kind, rank, peer, tag, value = (parsed[k] for k in ("kind", "rank", "peer", "tag", "value"))
    if _truncated(procs, kind, rank, peer, tag, value) is not None:
        return None
    sends, recvs = kind == Kind.SEND, kind == Kind.RECV
    send_bytes, recv_bytes = np.zeros(procs, dtype=np.int64), np.zeros(procs, dtype=np.int64)
    np.maximum.at(send_bytes, rank[sends], value[sends])
    np.maximum.at(recv_bytes, rank[recvs], value[recvs])
    b = ScheduleBuilder(procs, send_bytes=send_bytes, recv_bytes=recv_bytes)
    delay = kind == Kind.DELAY
    b.bulk(kind, rank, peer=peer, tag=tag, buf=np.where(recvs, np.int8(Buf.RECV), np.int8(Buf.SEND)),
           length=np.where(delay, 0, value), delay=np.where(delay, value * time_unit, 0.0))
    b.depend(parsed["dep_op"], parsed["dep_on"], parsed["dep_start"].astype(bool))
    return b.build(meta={"source": "goal", "posting_order": False})


def _truncated(procs: int, kind: np.ndarray, rank: np.ndarray, peer: np.ndarray, tag: np.ndarray,
               value: np.ndarray) -> int | None:
    """The first receive (of a given source and tag) shorter than every message that source sends
    it with that tag, or None: whichever it matches, MPI would truncate it (``MPI_ERR_TRUNCATE``).
    Which send a receive matches depends on timing, so no more is checked."""
    sends = np.flatnonzero(kind == Kind.SEND)
    recvs = np.flatnonzero((kind == Kind.RECV) & (peer >= 0) & (tag >= 0))
    if not len(sends) or not len(recvs):
        return None
    # (from, to, tag) as one sortable key: ranks below 2^16, tags below 2^31
    key_s = (rank[sends].astype(np.int64) * procs + peer[sends]) * (1 << 31) + tag[sends]
    key_r = (peer[recvs].astype(np.int64) * procs + rank[recvs]) * (1 << 31) + tag[recvs]
    order = np.argsort(key_s, kind="stable")
    keys, sizes = key_s[order], value[sends][order]
    first = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    unique, shortest = keys[first], np.minimum.reduceat(sizes, first)
    at = np.minimum(np.searchsorted(unique, key_r), len(unique) - 1)
    short = (unique[at] == key_r) & (value[recvs] < shortest[at])
    return int(recvs[np.argmax(short)]) if short.any() else None


def _parse(text: str, time_unit: float, name: str) -> Schedule:
    """:func:`from_goal`, line by line."""
    ops: list[list[tuple]] = []  # per rank: (kind, peer, tag, size or delay, line)
    deps: list[list[tuple[int, int, bool]]] = []
    procs: int | None = None
    rank: int | None = None
    labels: dict[str, int] = {}

    seen: set[int] = set()

    def fail(line: int, problem: str) -> GoalError:
        return GoalError(f"{name}: line {line}: {problem}")

    def bounded(line: int, digits: str, largest: int, what: str) -> int:
        """The integer ``digits`` (an optional minus sign, then digits), at most ``largest``
        (:mod:`colltune.limits`), checked before it is converted."""
        if len(digits.lstrip("-")) > len(str(largest)) or int(digits) > largest:
            shown = digits if len(digits) <= 24 else f"{digits[:20]}... ({len(digits)} digits)"
            raise fail(line, f"{what} {shown} is above {largest}, the largest colltune takes")
        return int(digits)

    for number, line in _strip_comments(text):
        if rank is None:
            if m := re.fullmatch(r"num_ranks\s+([0-9]+)", line):
                if procs is not None:
                    raise fail(number, "a second num_ranks line")
                procs = bounded(number, m.group(1), MAX_PROCS, "num_ranks")
                if procs < 1:
                    raise fail(number, "num_ranks must be at least 1")
                ops = [[] for _ in range(procs)]
                deps = [[] for _ in range(procs)]
            elif m := re.fullmatch(r"rank\s+([0-9]+)\s*\{", line):
                if procs is None:
                    raise fail(number, "a rank block before num_ranks")
                rank = bounded(number, m.group(1), MAX_PROCS, "rank")
                if rank >= procs:
                    raise fail(number, f"rank {rank} is not below num_ranks {procs}")
                if rank in seen:
                    raise fail(number, f"rank {rank}'s block is given twice")
                seen.add(rank)
                labels = {}
            else:
                raise fail(number, f"expected 'num_ranks N' or 'rank R {{', got {line!r}")
            continue
        if line == "}":
            rank = None
            continue
        if m := _DEP.fullmatch(line):
            a, how, b = m.groups()
            for label in (a, b):
                if label not in labels:
                    raise fail(number, f"label {label!r} is not defined (yet) in rank {rank}")
            if labels[a] == labels[b]:
                raise fail(number, f"{a} cannot depend on itself")
            deps[rank].append((labels[a], labels[b], how == "irequires"))
            continue
        m = _OP.fullmatch(line)
        if not m:
            raise fail(number, f"expected an op (send, recv, calc) or a dependency, got {line!r}")
        label, op, rest = m.groups()
        if op == "calc":
            mc = _CALC.fullmatch(rest)
            if not mc:
                raise fail(number, f"expected 'calc N [cpu C]', got {line!r}")
            placement = mc.group(2)
            entry = (Kind.DELAY, -1, 0, bounded(number, mc.group(1), MAX_BYTES, "calc") * time_unit, number)
        else:
            mm = _MSG.fullmatch(rest)
            if not mm or (op == "send") != (mm.group(2) == "to"):
                word = "to" if op == "send" else "from"
                raise fail(number, f"expected '{op} Nb {word} R [tag T] [cpu C] [nic N]', got {line!r}")
            size_text, _, other_text, tag_text, placement = mm.groups()
            size = bounded(number, size_text, MAX_BYTES, "size")
            other = bounded(number, other_text, MAX_PROCS, "rank")
            tag_value = bounded(number, tag_text, MAX_TAG, "tag") if tag_text is not None else 0
            if op == "send" and (other < 0 or tag_value < 0):
                raise fail(number, "a send needs a destination rank and a tag of 0 or more (-1 is a wildcard, "
                                   "for receives only)")
            if other < -1 or tag_value < -1:
                raise fail(number, "a receive's source and tag are 0 or more, or -1 for any")
            if other >= (procs or 0):
                raise fail(number, f"rank {other} is not below num_ranks {procs}")
            if other == rank:
                raise fail(number, f"rank {rank} sends to itself; GOAL schedules for colltune use calc for local work")
            entry = (Kind.SEND if op == "send" else Kind.RECV, other, tag_value, size, number)
        if any(v.lstrip("0") for _, v in _PLACEMENT.findall(placement)):  # no int(): any number of digits
            raise fail(number, "only cpu 0 and nic 0 are simulated (one CPU and one NIC per rank)")
        if label is not None:
            if label in labels:
                raise fail(number, f"label {label!r} defined twice in rank {rank}")
            labels[label] = len(ops[rank])
        ops[rank].append(entry)
    if procs is None:
        raise GoalError(f"{name}: no num_ranks line")
    if rank is not None:
        raise GoalError(f"{name}: rank {rank}'s block is not closed with '}}'")
    _check_lengths(ops, name)
    return _build(procs, ops, deps)


def _check_lengths(ops: list[list[tuple]], name: str) -> None:
    """Raise :class:`GoalError` naming the line of the first receive :func:`_truncated` finds."""
    flat = [(r, *op) for r, rank_ops in enumerate(ops) for op in rank_ops]
    if not flat:
        return
    rank, kind, peer, tag, value, _ = (np.array(column) for column in zip(*flat))
    bad = _truncated(len(ops), kind, rank, peer, tag, value.astype(np.int64))
    if bad is not None:
        r, _, peer_, tag_, size, line = flat[bad]
        shortest = min(v for q, k, p, t, v, _ in flat if k == Kind.SEND and q == peer_ and p == r and t == tag_)
        raise GoalError(f"{name}: line {line}: rank {r} receives {size} B from rank {peer_} with tag {tag_}, "
                        f"but every message rank {peer_} sends it with that tag is longer (the shortest: "
                        f"{shortest} B); MPI would truncate it")


def _build(procs: int, ops: list[list[tuple]], deps: list[list[tuple[int, int, bool]]]) -> Schedule:
    send_bytes = [max((o[3] for o in rank_ops if o[0] == Kind.SEND), default=0) for rank_ops in ops]
    recv_bytes = [max((o[3] for o in rank_ops if o[0] == Kind.RECV), default=0) for rank_ops in ops]
    b = ScheduleBuilder(procs, send_bytes=send_bytes, recv_bytes=recv_bytes)
    for r in range(procs):
        by_op: dict[int, tuple[list[int], list[int]]] = {}
        for a, on, start in deps[r]:
            by_op.setdefault(a, ([], []))[1 if start else 0].append(on)
        ids: list[int] = []
        for k, (kind, peer, tag, value, _) in enumerate(ops[r]):
            req, ireq = by_op.get(k, ([], []))
            later = [j for j in req + ireq if j >= k]
            if later:
                raise GoalError(f"rank {r}: op l{k} depends on op {later[0]}, which comes after it; "
                                "colltune schedules list dependencies in posting order")
            reqs, ireqs = [ids[j] for j in req], [ids[j] for j in ireq]
            if kind == Kind.SEND:
                ids.append(b.send(r, peer, Region(Buf.SEND, 0, value), tag=tag, requires=reqs, irequires=ireqs))
            elif kind == Kind.RECV:
                ids.append(b.recv(r, peer, Region(Buf.RECV, 0, value), tag=tag, requires=reqs, irequires=ireqs))
            else:
                ids.append(b.delay(r, value, requires=reqs, irequires=ireqs))
    return b.build(meta={"source": "goal", "posting_order": False})


def read_goal(path: str | Path, time_unit: float = NANOSECOND) -> Schedule:
    """Read a GOAL file (see :func:`from_goal`; the compiled reader reads its bytes as they are)."""
    raw = read_bytes(path, "GOAL file", GoalError)
    parsed = _compiled(raw)
    if parsed is not None:
        del raw  # the columns hold all of it: the schedule is built without the text beside it
        schedule = _from_columns(parsed, time_unit)
        if schedule is not None:
            return schedule
        raw = read_bytes(path, "GOAL file", GoalError)  # a receive it cannot match: read again, to say where
    return _parse(decode_text(raw, path, "GOAL file", GoalError), time_unit, str(path))
