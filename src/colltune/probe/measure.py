"""Measurement kernels under MPI (mpi4py): each is collective over the communicator, returns its
raw samples (seconds, or bytes per second) on rank 0 and None elsewhere.

Ranks that take no part in a measurement wait in a non-blocking barrier, polled with short
sleeps (:meth:`Meter.rest`), so that on an oversubscribed machine the ranks measuring get the
cores instead of sharing them with ranks spinning in MPI.  Every kernel ends with that barrier,
so kernels never overlap.  Each kernel runs ``warmup`` unrecorded repetitions before its
``reps`` recorded ones.  With a ``budget`` (seconds per measured point), the repetitions of a
point are cut to what fits in it, by the round trip that :meth:`Meter.pace` estimated for its
size (the same on every rank), but not below :data:`MIN_REPS`: a megabyte at 100 Mbit/s takes
84 ms, and trains of them at full repetitions would take minutes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

#: Seconds an idle rank sleeps between polls of the barrier.
SLEEP = 2e-4
#: With a budget, at least this many recorded repetitions: the median of five still discards two
#: outliers.
MIN_REPS = 5
TAG_DATA, TAG_PING, TAG_LOAD = 71, 72, 73


def spin(seconds: float) -> None:
    """Busy-wait ``seconds`` (the d of Netgauge's PRTT(n, d, s)): the CPU stays busy."""
    end = MPI.Wtime() + seconds
    while MPI.Wtime() < end:
        pass


@dataclass
class Meter:
    """The communicator, repetitions and scratch buffers the kernels share."""

    comm: MPI.Comm
    reps: int
    warmup: int
    budget: float | None = None

    def __post_init__(self) -> None:
        self.me, self.procs = self.comm.Get_rank(), self.comm.Get_size()
        self._send = np.zeros(0, dtype=np.uint8)
        self._recv = np.zeros(0, dtype=np.uint8)
        self._rtt0, self._rtt_per_byte = 0.0, 0.0

    def pace(self, size: int) -> None:
        """Estimate the round trip between ranks 0 and 1 as a line through RTT(0) and RTT(size)
        (a few ping-pongs each, which also warm the path up), the same on every rank; the budget
        divides by it."""
        sbuf, rbuf = self.buffers(size)
        line = None
        if self.me < 2:
            median = {s: float(np.median([self._round_trip(1 - self.me, sbuf[:s], rbuf[:s], self.me == 0)
                                          for _ in range(4)][1:])) for s in (0, size)}
            line = (median[0], max(median[size] - median[0], 0.0) / max(size, 1))
        self.rest()
        self._rtt0, self._rtt_per_byte = self.comm.bcast(line, root=0)

    def round_trip(self, size: int) -> float:
        """The estimated round trip of ``size`` bytes between ranks 0 and 1, s (0 before :meth:`pace`)."""
        return self._rtt0 + self._rtt_per_byte * size

    def _counts(self, seconds: float = 0.0) -> tuple[int, int]:
        """``(warm-up, recorded)`` repetitions of a kernel whose one repetition takes about
        ``seconds`` (0: too little to count): all of them without a budget, else what fits in it
        (at least MIN_REPS recorded and one warm-up)."""
        if self.budget is None or seconds <= 0:
            return self.warmup, self.reps
        fit = int(self.budget / seconds)
        return min(self.warmup, max(1, fit // 5)), min(self.reps, max(MIN_REPS, fit))

    def buffers(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """A send and a receive buffer of at least ``size`` bytes."""
        if self._send.size < size:
            self._send = np.arange(size, dtype=np.uint64).astype(np.uint8)
            self._recv = np.zeros(size, dtype=np.uint8)
        return self._send[:size], self._recv[:size]

    def rest(self) -> None:
        """Wait for every rank, sleeping between polls."""
        req = self.comm.Ibarrier()
        while not req.Test():
            time.sleep(SLEEP)

    def _round_trip(self, peer: int, sbuf: np.ndarray, rbuf: np.ndarray, lead: bool) -> float:
        """One ping-pong with ``peer`` (the leader sends first); its duration in s."""
        t = MPI.Wtime()
        if lead:
            self.comm.Send([sbuf, MPI.BYTE], peer, TAG_PING)
            self.comm.Recv([rbuf, MPI.BYTE], peer, TAG_PING)
        else:
            self.comm.Recv([rbuf, MPI.BYTE], peer, TAG_PING)
            self.comm.Send([sbuf, MPI.BYTE], peer, TAG_PING)
        return MPI.Wtime() - t

    def _to_root(self, samples: np.ndarray | None, owner: int) -> np.ndarray | None:
        """Move ``samples`` held by rank ``owner`` to rank 0 (after the kernel's barrier)."""
        if owner == 0:
            return samples if self.me == 0 else None
        if self.me == owner:
            self.comm.send(samples, dest=0, tag=TAG_DATA)
        elif self.me == 0:
            return self.comm.recv(source=owner, tag=TAG_DATA)
        return None

    def prtt(self, n: int, delay: float, size: int, peer: int = 1, both: bool = False) -> np.ndarray | None:
        """Netgauge's PRTT(n, d, s) between rank 0 and ``peer`` (see :mod:`colltune.probe.fit`):
        rank 0 sends n messages of ``size`` bytes, busy-waiting ``delay`` s after each but the
        last, and waits for one reply of ``size`` bytes.  With ``both``, each of the n steps and
        the reply are simultaneous exchanges (MPI_Sendrecv) in both directions, which gives the
        bidirectional parameters (paper 001 section III-B-1)."""
        sbuf, rbuf = self.buffers(size)
        warm, reps = self._counts((n + 1) / 2 * self.round_trip(size) * (2 if both else 1) + (n - 1) * delay)
        out = np.empty(reps)
        if self.me == 0:
            for k in range(warm + reps):
                t = MPI.Wtime()
                for i in range(n):
                    if both:
                        self.comm.Sendrecv([sbuf, MPI.BYTE], peer, TAG_DATA, [rbuf, MPI.BYTE], peer, TAG_DATA)
                    else:
                        self.comm.Send([sbuf, MPI.BYTE], peer, TAG_DATA)
                    if delay and i < n - 1:
                        spin(delay)
                if both:
                    self.comm.Sendrecv([sbuf, MPI.BYTE], peer, TAG_DATA, [rbuf, MPI.BYTE], peer, TAG_DATA)
                else:
                    self.comm.Recv([rbuf, MPI.BYTE], peer, TAG_DATA)
                if k >= warm:
                    out[k - warm] = MPI.Wtime() - t
        elif self.me == peer:
            for _ in range(warm + reps):
                if both:
                    for _ in range(n + 1):
                        self.comm.Sendrecv([sbuf, MPI.BYTE], 0, TAG_DATA, [rbuf, MPI.BYTE], 0, TAG_DATA)
                    continue
                for _ in range(n):
                    self.comm.Recv([rbuf, MPI.BYTE], 0, TAG_DATA)
                self.comm.Send([sbuf, MPI.BYTE], 0, TAG_DATA)
        self.rest()
        return out if self.me == 0 else None

    def overheads(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Per repetition: os, the time of rank 0's send call of ``size`` bytes; or, the time of
        rank 1's receive call once the message has arrived; and the time of the probe
        (MPI_Iprobe) that found it arrived.  Rank 1 acknowledges with an empty message."""
        sbuf, rbuf = self.buffers(size)
        warm, reps = self._counts(self.round_trip(size))
        send_t, recv_t, poll_t = np.empty(reps), np.empty(reps), np.empty(reps)
        if self.me == 0:
            for k in range(warm + reps):
                t = MPI.Wtime()
                self.comm.Send([sbuf, MPI.BYTE], 1, TAG_DATA)
                if k >= warm:
                    send_t[k - warm] = MPI.Wtime() - t
                self.comm.Recv([rbuf[:0], MPI.BYTE], 1, TAG_DATA)
        elif self.me == 1:
            for k in range(warm + reps):
                while True:
                    t = MPI.Wtime()
                    found = self.comm.Iprobe(0, TAG_DATA)
                    poll = MPI.Wtime() - t
                    if found:
                        break
                t = MPI.Wtime()
                self.comm.Recv([rbuf, MPI.BYTE], 0, TAG_DATA)
                if k >= warm:
                    recv_t[k - warm] = MPI.Wtime() - t
                    poll_t[k - warm] = poll
                self.comm.Send([sbuf[:0], MPI.BYTE], 0, TAG_DATA)
        self.rest()
        theirs = self._to_root((recv_t, poll_t) if self.me == 1 else None, 1)
        self.rest()
        if self.me != 0:
            return None
        assert theirs is not None
        return send_t, theirs[0], theirs[1]

    def held_sends(self, size: int, hold: float, reps: int = 3) -> np.ndarray | None:
        """Per repetition, the time of rank 0's MPI_Send of ``size`` bytes while rank 1 busy-waits
        ``hold`` seconds, making no MPI call, before it receives the message (then it acknowledges
        with an empty message).  A send that the library completes without its receiver (eager)
        returns once its bytes are handed over; one that needs the receiver (rendezvous, or a
        transport that waits for the receiver's progress) returns only after the hold."""
        sbuf, rbuf = self.buffers(size)
        out = np.empty(reps)
        for k in range(1 + reps):  # one warm-up
            if self.me == 0:
                t = MPI.Wtime()
                self.comm.Send([sbuf, MPI.BYTE], 1, TAG_DATA)
                if k:
                    out[k - 1] = MPI.Wtime() - t
                self.comm.Recv([rbuf[:0], MPI.BYTE], 1, TAG_DATA)
            elif self.me == 1:
                spin(hold)
                self.comm.Recv([rbuf, MPI.BYTE], 0, TAG_DATA)
                self.comm.Send([sbuf[:0], MPI.BYTE], 0, TAG_DATA)
        self.rest()
        return out if self.me == 0 else None

    def converge(self, size: int, n: int) -> np.ndarray | None:
        """Paper 000's receive gap gr: every other rank sends ``n`` messages of ``size`` bytes to
        rank 0 at once; per repetition, the mean time between consecutive arrivals at rank 0
        (first to last receive over the number of gaps)."""
        sbuf, rbuf = self.buffers(size)
        count = (self.procs - 1) * n
        warm, reps = self._counts()
        out = np.empty(reps)
        for k in range(warm + reps):
            self.comm.Barrier()
            if self.me == 0:
                stamps = np.empty(count)
                for i in range(count):
                    self.comm.Recv([rbuf, MPI.BYTE], MPI.ANY_SOURCE, TAG_DATA)
                    stamps[i] = MPI.Wtime()
                if k >= warm:
                    out[k - warm] = (stamps[-1] - stamps[0]) / max(count - 1, 1)
            else:
                for _ in range(n):
                    self.comm.Send([sbuf, MPI.BYTE], 0, TAG_DATA)
        self.rest()
        return out if self.me == 0 else None

    def incast(self, size: int, reps: int, warmup: int = 1) -> np.ndarray | None:
        """A controlled incast (paper 000's many-to-one stage, paper 001's incast): every other rank
        sends one message of ``size`` bytes to rank 0 at once, right after a barrier, as a flat
        gather does; per repetition, the time on rank 0 from the barrier to the last arrival, s.
        Repetitions follow each other after a barrier only, as the calls of a timed collective do,
        so the senders' TCP windows are those of a busy connection, not of a fresh one."""
        sbuf, _ = self.buffers(size)
        senders = self.procs - 1
        rbuf = np.empty(senders * size, dtype=np.uint8) if self.me == 0 else None
        out = np.empty(reps)
        for k in range(warmup + reps):
            self.comm.Barrier()
            if self.me == 0:
                t = MPI.Wtime()
                MPI.Request.Waitall([self.comm.Irecv([rbuf[i * size:(i + 1) * size], MPI.BYTE], i + 1, TAG_DATA)
                                     for i in range(senders)])
                if k >= warmup:
                    out[k - warmup] = MPI.Wtime() - t
            else:
                self.comm.Send([sbuf, MPI.BYTE], 0, TAG_DATA)
        self.rest()
        return out if self.me == 0 else None

    def shift(self, size: int, reps: int, both: bool, warmup: int = 1, among: int | None = None,
              distance: int = 1) -> np.ndarray | None:
        """Every rank r sends ``size`` bytes to rank r+distance and receives them from rank
        r-distance at once (``both``: each host sends and receives, as in a ring step), or only the
        even ranks send, each to the odd rank after it (each host sends or receives; with P odd the
        last rank has no partner; ``distance`` must be 1); per repetition, after a barrier, the
        slowest rank's time, s.  ``among``: only ranks 0 .. among-1 take part (at least 2; default
        all), the others wait at the barriers.  With a budget, ``reps`` is cut to what fits in it
        by half the paced round trip of ``size`` (one message's way), but not below
        :data:`MIN_REPS`: at 4 MiB and 100 Mbit/s a repetition takes a third of a second."""
        if self.budget is not None and self.round_trip(size) > 0:
            reps = min(reps, max(MIN_REPS, int(self.budget / (self.round_trip(size) / 2))))
        sbuf, rbuf = self.buffers(size)
        me, P = self.me, self.procs if among is None else among
        if not 2 <= P <= self.procs:
            raise ValueError(f"a shift needs 2 to {self.procs} ranks, not {P}")
        if not (1 <= distance < P and (both or distance == 1)):
            raise ValueError(f"a shift {'both ways ' if both else ''}among {P} ranks cannot move by {distance}")
        part = me < P
        to = (me + distance) % P if part and (both or (me % 2 == 0 and me + 1 < P)) else None
        frm = (me - distance) % P if part and (both or me % 2 == 1) else None
        out = np.empty(reps)
        for k in range(warmup + reps):
            self.comm.Barrier()
            t = MPI.Wtime()
            reqs = [] if frm is None else [self.comm.Irecv([rbuf[:size], MPI.BYTE], frm, TAG_LOAD)]
            if to is not None:
                reqs.append(self.comm.Isend([sbuf[:size], MPI.BYTE], to, TAG_LOAD))
            MPI.Request.Waitall(reqs)
            took = self.comm.allreduce(MPI.Wtime() - t, op=MPI.MAX)
            if k >= warmup:
                out[k - warmup] = took
        self.rest()
        return out if me == 0 else None

    def pair_pingpongs(self, pairs: int, size: int) -> np.ndarray | None:
        """Round trips of ``size`` bytes in ``pairs`` concurrent ping-pong pairs (0-1, 2-3, ...);
        the samples of every pair, on rank 0."""
        sbuf, rbuf = self.buffers(size)
        warm, reps = self._counts()
        mine = np.empty(reps)
        me = self.me
        if me < 2 * pairs:
            for k in range(warm + reps):
                took = self._round_trip(me ^ 1, sbuf, rbuf, me % 2 == 0)
                if k >= warm:
                    mine[k - warm] = took
        self.rest()
        every = self.comm.gather(mine if me < 2 * pairs and me % 2 == 0 else None, root=0)
        return np.concatenate([s for s in every if s is not None]) if me == 0 else None

    def tree_load(self, height: int, depth: int, size: int, bursts: int, pings: int,
                  both: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """Paper 001 section III-C at height h: ranks k < 2^depth send ``bursts`` messages of
        ``size`` bytes to k xor 2^(h-1) (only those with that bit clear, unless ``both``), while
        rank 0 and rank 2^h - 1 exchange ``pings`` one-byte ping-pongs.  Per repetition: the total
        bandwidth (B/s) of the bursts (summed over the receivers, halved when ``both`` so that it
        counts one direction), and the median one-way latency (half a round trip, s) under load."""
        me, bit = self.me, 1 << (height - 1)
        far = (1 << height) - 1
        taking_part = me < (1 << depth)
        sbuf, _ = self.buffers(size)
        rbuf = np.empty(size * bursts, dtype=np.uint8) if taking_part else np.zeros(0, dtype=np.uint8)
        pong = np.zeros(1, dtype=np.uint8)
        warm, reps = self._counts(bursts * self.round_trip(size) * (2 if both else 1))
        totals, latency = np.empty(reps), np.empty(reps)
        for k in range(warm + reps):
            self.rest()
            rate, lat = 0.0, 0.0
            if taking_part:
                partner = me ^ bit
                sends = both or not me & bit
                receives = both or bool(me & bit)
                t = MPI.Wtime()
                reqs = [self.comm.Isend([sbuf, MPI.BYTE], partner, TAG_LOAD) for _ in range(bursts)] if sends else []
                recvs = [self.comm.Irecv([rbuf[i * size:(i + 1) * size], MPI.BYTE], partner, TAG_LOAD)
                         for i in range(bursts)] if receives else []
                if me in (0, far):
                    rtts = [self._round_trip(far if me == 0 else 0, pong, pong, me == 0) for _ in range(pings)]
                    lat = float(np.median(rtts)) / 2
                MPI.Request.Waitall(recvs)
                if receives:
                    rate = size * bursts / (MPI.Wtime() - t)
                MPI.Request.Waitall(reqs)
            self.rest()
            rates = self.comm.gather(rate, root=0)
            if me == 0 and k >= warm:
                totals[k - warm] = sum(rates) / (2 if both else 1)
                latency[k - warm] = lat
        self.rest()
        return (totals, latency) if me == 0 else None

    def all_pairs(self, size: int = 1) -> dict[tuple[int, int], np.ndarray] | None:
        """Round trips of ``size`` bytes between every pair of ranks, in P-1 (or P) rounds of
        disjoint pairs that measure concurrently (the circle method of round-robin tournaments);
        on rank 0, the samples of each pair (i, j), i < j."""
        P, me = self.procs, self.me
        slots = P + P % 2  # an odd P gets a bye each round
        sbuf, rbuf = self.buffers(size)
        found: dict[tuple[int, int], np.ndarray] = {}
        for rnd in range(slots - 1):
            ring = [0] + [1 + (i + rnd) % (slots - 1) for i in range(slots - 1)]
            partner = {}
            for i in range(slots // 2):
                a, b = ring[i], ring[slots - 1 - i]
                partner[a], partner[b] = b, a
            peer = partner[me]
            if peer < P:
                warm, reps = self._counts()
                samples = np.empty(reps)
                for k in range(warm + reps):
                    took = self._round_trip(peer, sbuf, rbuf, me < peer)
                    if k >= warm:
                        samples[k - warm] = took
                if me < peer:
                    found[(me, peer)] = samples
            self.rest()
        every = self.comm.gather(found, root=0)
        if me != 0:
            return None
        return {pair: s for part in every for pair, s in part.items()}
