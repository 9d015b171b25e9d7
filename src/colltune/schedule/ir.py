"""The schedule intermediate representation: columnar, immutable, validated.

A schedule says, for every rank of a communicator of ``procs`` ranks, which
operations that rank performs, in *posting order*:

* ``SEND`` / ``RECV``: a non-blocking point-to-point message of a buffer
  region to or from ``peer`` with ``tag``;
* ``COPY``: a local copy from a source region to a destination region;
* ``REDUCE``: a local elementwise reduction ``dst = src op dst`` of a named
  operation over a numpy dtype (the operand order of ``MPI_Reduce_local``: the
  source is the left operand, which matters for non-commutative operations);
* ``DELAY``: a pure delay of ``delay`` seconds (computation stand-in).

Dependencies follow GOAL, the schedule language of the LogGOPSim simulator
(Hoefler, Schneider, Lumsdaine 2010): an operation may *require* the
completion of earlier operations of its own rank, or *irequire* their start.

Execution semantics, shared by the verifier and the MPI runtime: each rank
starts its operations in list order; before starting an operation it waits
until everything that operation requires has completed (an irequired
operation has always started, since it comes earlier in the list).  Sends
and receives complete when matched (MPI matching by source, tag and posting
order); a send of any size is assumed *unbuffered*, so it
completes only once its receive is posted.  Local operations complete as
soon as they start.

A receive may name :data:`ANY_SOURCE` as its peer or :data:`ANY_TAG` as its tag
(both -1, GOAL's wildcards): it then matches, like ``MPI_ANY_SOURCE`` and
``MPI_ANY_TAG``, the first message that arrives and fits.  Such matching depends
on timing, so only the simulator runs schedules with wildcards (read from
GOAL); the verifier and the executors reject them (:attr:`Schedule.wildcards`).

In GOAL terms, in-order posting is an implicit *irequires* of each operation on
the one before it in its rank's list: a GOAL export (and the simulator) must add
that edge to time a schedule the way the runtime executes it.

Storage is columnar (one numpy array per field, ops sorted by rank and, within
a rank, by posting order) so that a schedule of a million messages fits in a
few tens of megabytes and builds in seconds.  Buffer regions are symbolic:
``(buffer, byte offset, byte length)`` with buffer one of ``SEND``, ``RECV``
or ``SCRATCH``.  All sizes and offsets are in bytes, delays in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from colltune.errors import ScheduleError


class Kind(IntEnum):
    """Operation kinds of a schedule."""

    SEND = 0
    RECV = 1
    COPY = 2
    REDUCE = 3
    DELAY = 4


class Buf(IntEnum):
    """The three buffers a region can live in, on each rank."""

    SEND = 0
    RECV = 1
    SCRATCH = 2


#: A receive's peer that matches a message from any rank (GOAL's ``from -1``, ``MPI_ANY_SOURCE``).
ANY_SOURCE = -1
#: A receive's tag that matches a message of any tag (GOAL's ``tag -1``, ``MPI_ANY_TAG``).
ANY_TAG = -1

#: Reduction operations a ``REDUCE`` op may name, by index.
REDUCTION_OPS: tuple[str, ...] = ("sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor")
#: Element types a ``REDUCE`` op may name, by index (numpy dtype names).
REDUCTION_DTYPES: tuple[str, ...] = (
    "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float32", "float64", "complex64", "complex128", "bool",
)

#: Schedule columns, their numpy dtypes and the value used where a column does not apply.
COLUMNS: dict[str, tuple[type, Any]] = {
    "kind": (np.int8, 0),
    "rank": (np.int32, 0),
    "peer": (np.int32, -1),
    "tag": (np.int32, 0),
    "buf": (np.int8, 0),
    "offset": (np.int64, 0),
    "length": (np.int64, 0),
    "src_buf": (np.int8, -1),
    "src_offset": (np.int64, 0),
    "redop": (np.int8, -1),
    "dtype": (np.int8, -1),
    "delay": (np.float64, 0.0),
}


@dataclass(frozen=True)
class Region:
    """A symbolic byte range ``[offset, offset + length)`` of one of a rank's buffers."""

    buf: Buf
    offset: int
    length: int

    def __str__(self) -> str:
        return f"{Buf(self.buf).name}[{self.offset}:{self.offset + self.length}]"


def region_str(buf: int, offset: int, length: int) -> str:
    """Format a region as ``RECV[100:200]`` (bytes, end exclusive)."""
    return str(Region(Buf(int(buf)), int(offset), int(length)))


@dataclass(frozen=True, eq=False)
class Schedule:
    """An immutable, validated, columnar schedule.

    Attributes
    ----------
    procs:
        Number of ranks.
    buffer_sizes:
        ``(procs, 3)`` int64 array: bytes of the SEND, RECV and SCRATCH buffer of each rank.
    columns:
        One read-only numpy array per field of :data:`COLUMNS`, one entry per operation.
        Operations are sorted by rank, then by posting order.
    rank_ptr:
        ``(procs + 1)`` array; the ops of rank ``r`` are ``rank_ptr[r]:rank_ptr[r+1]``.
    dep_ptr, dep_idx, dep_start:
        Dependencies in CSR form: op ``i`` depends on ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``
        (global op indices, always earlier ops of the same rank); ``dep_start`` is True
        for *irequires* (start) and False for *requires* (completion).
    meta:
        Provenance: collective, algorithm, root, size, parameters.
    """

    procs: int
    buffer_sizes: np.ndarray
    columns: Mapping[str, np.ndarray]
    rank_ptr: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    dep_start: np.ndarray
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for arr in (self.buffer_sizes, self.rank_ptr, self.dep_ptr, self.dep_idx, self.dep_start,
                    *self.columns.values()):
            arr.flags.writeable = False

    # -- sizes -----------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.rank_ptr[-1])

    def __getattr__(self, name: str) -> np.ndarray:
        columns = self.__dict__.get("columns")
        if columns is not None and name in columns:
            return columns[name]
        raise AttributeError(name)

    @property
    def num_messages(self) -> int:
        """Number of SEND operations (each one is a message)."""
        return int(np.count_nonzero(self.columns["kind"] == Kind.SEND))

    @property
    def bytes_sent(self) -> int:
        """Total bytes over all messages."""
        sends = self.columns["kind"] == Kind.SEND
        return int(self.columns["length"][sends].sum())

    @property
    def max_peers(self) -> int:
        """The most distinct ranks one rank sends to or receives from (0 without messages;
        wildcard sources are not counted): over TCP with one rank per host, the most connections
        one rank uses."""
        return self.max_remote_peers(None)

    def _network_messages(self, hosts: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rank, peer and length (bytes) of every send and receive between ranks on different
        hosts, ``hosts[r]`` labelling rank r's host (``None``: every rank on a host of its own);
        wildcard sources left out."""
        c = self.columns
        talk = ((c["kind"] == Kind.SEND) | (c["kind"] == Kind.RECV)) & (c["peer"] >= 0)
        rank, peer = c["rank"][talk].astype(np.int64), c["peer"][talk].astype(np.int64)
        length = c["length"][talk].astype(np.int64)
        if hosts is None:
            return rank, peer, length
        if len(hosts) != self.procs:
            raise ScheduleError(f"hosts: {len(hosts)} labels for a schedule of {self.procs} ranks")
        label = np.asarray(hosts)
        apart = label[rank] != label[peer]
        return rank[apart], peer[apart], length[apart]

    def max_remote_peers(self, hosts: Sequence[int] | None) -> int:
        """The most distinct ranks on hosts other than its own that one rank sends to or receives
        from, ``hosts[r]`` labelling rank r's host (``None``: every rank on a host of its own); 0
        without such messages; wildcard sources are not counted.  Over TCP, the most network
        connections one rank uses: ranks of one host talk through shared memory, without one."""
        rank, peer, _ = self._network_messages(hosts)
        pairs = np.unique(rank * self.procs + peer)
        return int(np.bincount(pairs // self.procs).max()) if len(pairs) else 0

    def max_remote_bytes(self, hosts: Sequence[int] | None) -> int:
        """The most bytes one rank sends to and receives from ranks on hosts other than its own, in
        all (``hosts`` as for :meth:`max_remote_peers`); 0 without such messages.  Over TCP, the
        bytes that rank's process moves through its sockets."""
        rank, _, length = self._network_messages(hosts)
        return int(np.bincount(rank, weights=length, minlength=self.procs).max()) if len(rank) else 0

    @property
    def wildcards(self) -> bool:
        """Whether a receive names :data:`ANY_SOURCE` or :data:`ANY_TAG` (only the simulator runs
        such a schedule: its matching depends on timing)."""
        recv = self.columns["kind"] == Kind.RECV
        return bool(np.any(recv & ((self.columns["peer"] < 0) | (self.columns["tag"] < 0))))

    def ops_of(self, rank: int) -> range:
        """Global indices of the ops of ``rank``, in posting order."""
        return range(int(self.rank_ptr[rank]), int(self.rank_ptr[rank + 1]))

    def local_index(self, i: int) -> int:
        """Position of global op ``i`` within its rank's list."""
        return int(i - self.rank_ptr[self.columns["rank"][i]])

    def deps(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, is_start)`` of op ``i``'s dependencies (global indices)."""
        lo, hi = self.dep_ptr[i], self.dep_ptr[i + 1]
        return self.dep_idx[lo:hi], self.dep_start[lo:hi]

    def requires(self, i: int) -> np.ndarray:
        """Global indices of the ops whose completion op ``i`` requires."""
        idx, start = self.deps(i)
        return idx[~start]

    # -- description -----------------------------------------------------------
    def describe(self, i: int) -> str:
        """Human-readable description: ``rank 3 op 5 (recv from rank 2, tag 0, RECV[0:100])``."""
        return f"rank {int(self.columns['rank'][i])} {self.describe_local(i)}"

    def describe_local(self, i: int) -> str:
        """Description within its rank: ``op 5 (recv from rank 2, tag 0, RECV[0:100])``."""
        c = self.columns
        kind = Kind(int(c["kind"][i]))
        region = region_str(c["buf"][i], c["offset"][i], c["length"][i])
        if kind == Kind.SEND:
            what = f"send to rank {int(c['peer'][i])}, tag {int(c['tag'][i])}, {region}"
        elif kind == Kind.RECV:
            source = "any rank" if c["peer"][i] == ANY_SOURCE else f"rank {int(c['peer'][i])}"
            tag = "any tag" if c["tag"][i] == ANY_TAG else f"tag {int(c['tag'][i])}"
            what = f"recv from {source}, {tag}, {region}"
        elif kind == Kind.COPY:
            src = region_str(c["src_buf"][i], c["src_offset"][i], c["length"][i])
            what = f"copy {src} -> {region}"
        elif kind == Kind.REDUCE:
            src = region_str(c["src_buf"][i], c["src_offset"][i], c["length"][i])
            op = REDUCTION_OPS[int(c["redop"][i])]
            dt = REDUCTION_DTYPES[int(c["dtype"][i])]
            what = f"reduce {op}<{dt}> {src} into {region}"
        else:
            what = f"delay {float(c['delay'][i]):g} s"
        return f"op {self.local_index(i)} ({what})"

    def summary(self) -> dict[str, Any]:
        """Counts for reports: ops, messages, bytes, max messages sent by one rank."""
        c = self.columns
        sends = c["kind"] == Kind.SEND
        per_rank = np.bincount(c["rank"][sends], minlength=self.procs) if self.procs else np.zeros(0)
        return {
            "ops": len(self),
            "messages": int(sends.sum()),
            "bytes_sent": self.bytes_sent,
            "max_messages_per_rank": int(per_rank.max()) if len(per_rank) else 0,
        }


def validate_columns(procs: int, buffer_sizes: np.ndarray, c: Mapping[str, np.ndarray]) -> None:
    """Check every op's fields; raise :class:`ScheduleError` naming the first bad op.

    Called by the builder before a :class:`Schedule` is made, so that every
    schedule in existence is well formed.
    """
    n = len(c["kind"])
    if n == 0:
        return
    kind, rank = c["kind"], c["rank"]

    def fail(mask: np.ndarray, problem: str, value: str | None = None) -> None:
        bad = np.flatnonzero(mask)
        if len(bad):
            i = int(bad[0])
            got = f" (got {value} {c[value][i]})" if value else ""
            raise ScheduleError(f"rank {int(rank[i])} op (global #{i}, kind {Kind(int(kind[i])).name}): {problem}{got}")

    fail((kind < 0) | (kind > Kind.DELAY), "unknown operation kind")
    fail((rank < 0) | (rank >= procs), f"rank outside 0..{procs - 1}")
    msg = (kind == Kind.SEND) | (kind == Kind.RECV)
    recv = kind == Kind.RECV
    wild_peer = recv & (c["peer"] == ANY_SOURCE)
    fail(msg & ~wild_peer & ((c["peer"] < 0) | (c["peer"] >= procs)),
         f"peer outside 0..{procs - 1} (a receive may also name ANY_SOURCE, -1)", "peer")
    fail(msg & (c["peer"] == rank), "message to itself; use a COPY")
    fail(msg & (c["tag"] < 0) & ~(recv & (c["tag"] == ANY_TAG)), "negative tag (a receive may also name ANY_TAG, -1)", "tag")
    fail(c["length"] < 0, "negative length")
    fail(c["offset"] < 0, "negative offset")
    fail((c["buf"] < 0) | (c["buf"] > Buf.SCRATCH), "unknown buffer")
    local = (kind == Kind.COPY) | (kind == Kind.REDUCE)
    fail(local & ((c["src_buf"] < 0) | (c["src_buf"] > Buf.SCRATCH)), "unknown source buffer")
    fail(local & (c["src_offset"] < 0), "negative source offset")
    red = kind == Kind.REDUCE
    fail(red & ((c["redop"] < 0) | (c["redop"] >= len(REDUCTION_OPS))), "unknown reduction operation")
    fail(red & ((c["dtype"] < 0) | (c["dtype"] >= len(REDUCTION_DTYPES))), "unknown reduction dtype")
    fail((kind == Kind.DELAY) & ~(c["delay"] >= 0), "delay must be a non-negative number of seconds")
    for what, buf_col, off_col, applies in (("region", "buf", "offset", kind != Kind.DELAY),
                                            ("source region", "src_buf", "src_offset", local)):
        limit = buffer_sizes[rank, np.clip(c[buf_col], 0, 2)]
        over = applies & (c[off_col] + c["length"] > limit)
        if over.any():
            i = int(np.flatnonzero(over)[0])
            raise ScheduleError(
                f"rank {int(rank[i])} op (global #{i}): {what} "
                f"{region_str(c[buf_col][i], c[off_col][i], c['length'][i])} exceeds the buffer's "
                f"{int(limit[i])} bytes")
