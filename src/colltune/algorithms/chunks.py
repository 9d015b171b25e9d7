"""Partitions of a buffer into pieces, and who holds which piece during a schedule.

:func:`pieces` is paper 002 eq. (3): piece ``i`` of ``n`` bytes split ``p`` ways
starts at ``floor(i n / p)``, so piece sizes differ by at most one byte and no
rounding error accumulates.  :class:`ChunkTracker` records, while a builder adds
operations, which relative rank holds which piece and which op delivered it, so
that composed algorithms (scatter then allgather) send only what a rank lacks
and each send requires exactly the receives that brought its data.
"""

from __future__ import annotations

from colltune.errors import ScheduleError
from colltune.schedule import Buf, Region, ScheduleBuilder

INITIAL = -1  # "op" id of data present from the start


def pieces(n: int, p: int) -> list[int]:
    """The ``p + 1`` piece boundaries of ``n`` bytes split in ``p`` pieces (paper 002 eq. 3)."""
    return [i * n // p for i in range(p + 1)]


def segments(n: int, segment_size: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of consecutive segments of at most ``segment_size`` bytes (none if ``n == 0``)."""
    if n == 0:
        return []
    return [(o, min(segment_size, n - o)) for o in range(0, n, segment_size)]


class ChunkTracker:
    """Holders of the chunks ``bounds[c]:bounds[c+1]`` of a buffer, over relative ranks.

    Parameters
    ----------
    b: the builder ops are added to.
    root: absolute rank of relative rank 0.
    bounds: chunk boundaries in bytes (as from :func:`pieces`).
    buf: the buffer the chunks live in, on every rank.
    """

    def __init__(self, b: ScheduleBuilder, root: int, bounds: list[int], buf: Buf = Buf.RECV):
        self.b = b
        self.procs = b.procs
        self.root = root
        self.bounds = bounds
        self.buf = buf
        self.where: list[dict[int, int]] = [{} for _ in range(self.procs)]
        #: The last send op of each relative rank.
        self._last_send: dict[int, int] = {}

    def rank(self, rel: int) -> int:
        """Absolute rank of relative rank ``rel``."""
        return (rel + self.root) % self.procs

    def give(self, rel: int, chunks: range | list[int]) -> None:
        """``rel`` holds ``chunks`` from the start."""
        for c in chunks:
            self.where[rel][c] = INITIAL

    def _size(self, c: int) -> int:
        return self.bounds[c + 1] - self.bounds[c]

    def transfer(self, src: int, dst: int, chunks: range | list[int], tag: int = 0, in_turn: bool = False) -> list[int]:
        """Send the non-empty ``chunks`` that ``dst`` lacks from ``src`` to ``dst``, one message per
        contiguous run; return the receive op ids.  ``src`` must hold them.  With ``in_turn``, each
        send starts once ``src``'s send before it has completed (see
        :func:`colltune.algorithms.bcast.send_to_children`)."""
        have, need = self.where[src], self.where[dst]
        todo = sorted(c for c in chunks if self._size(c) and c not in need)
        runs: list[list[int]] = []
        for c in todo:
            if runs and runs[-1][-1] == c - 1:
                runs[-1].append(c)
            else:
                runs.append([c])
        recvs = []
        for run in runs:
            missing = [c for c in run if c not in have]
            if missing:
                raise ScheduleError(f"relative rank {src} forwards chunk {missing[0]} it does not hold")
            lo, hi = self.bounds[run[0]], self.bounds[run[-1] + 1]
            region = Region(self.buf, lo, hi - lo)
            r = self.b.recv(self.rank(dst), self.rank(src), region, tag)
            deps = sorted({have[c] for c in run} - {INITIAL})
            if in_turn and src in self._last_send:
                deps.append(self._last_send[src])
            self._last_send[src] = self.b.send(self.rank(src), self.rank(dst), region, tag, requires=deps)
            for c in run:
                need[c] = r
            recvs.append(r)
        return recvs

