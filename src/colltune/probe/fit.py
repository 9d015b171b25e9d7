"""From measurements to model parameters: pure functions, no MPI, testable on synthetic data.

Every function takes the medians of measured series (seconds, bytes, bytes per second) and
returns the parameter set with a :class:`~colltune.profiles.Fit` recording its residuals.  The
measurements themselves are described in :mod:`colltune.probe.measure`; the names below follow
them:

- ``PRTT(n, d, s)`` (Netgauge's parametrised round trip, Hoefler, Lichei and Rehm 2007): rank 0
  sends n messages of s bytes with d seconds of busy waiting after each but the last; rank 1
  receives them and replies with one of s bytes; the time on rank 0 from the first send to the
  reply.  ``RTT(s) = PRTT(1, 0, s)``.
- Under LogGOPS (one message costs 2o + L + (s-1)G, a sender starts one every max(o + (s-1)O,
  g + (s-1)G)): ``PRTT(n, 0, s) - PRTT(1, 0, s) = (n-1)(g + (s-1)G)`` when the gap dominates, and
  ``PRTT(n, d, s) - PRTT(1, 0, s) = (n-1)(o + (s-1)O + d)`` when d exceeds the gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from colltune.models.params import (
    ClusterLatency,
    Hockney,
    Linear,
    LogGP,
    Piecewise,
    PLogPTable,
    Tabulated,
    TreeLevels,
)
from colltune.profiles.format import Fit, Models
from colltune.sim.topology import TCP_RTO_MIN

Array = Sequence[float] | np.ndarray


def record(data: tuple[str, ...], method: str, residuals: Array) -> Fit:
    """The :class:`Fit` of ``data`` by ``method``: its residuals and their root mean square."""
    r = np.asarray(residuals, dtype=np.float64)
    return Fit(data=data, method=method, residuals=tuple(float(v) for v in r),
               rms=float(np.sqrt(np.mean(r ** 2))) if r.size else 0.0)


def nonnegative_lstsq(columns: Sequence[Array], y: Array, sigma: Array | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares ``y ~ sum_k c_k columns[k]`` with every c_k >= 0; returns (c,
    residuals y - fitted, in y's unit).  Row i is weighted by 1/sigma[i], the standard error of
    y[i], when given; otherwise by 1/|y[i]| (relative errors: timings over decades of sizes have
    errors roughly proportional to themselves)."""
    A = np.column_stack([np.asarray(c, dtype=np.float64) for c in columns])
    yy = np.asarray(y, dtype=np.float64)
    scale = np.abs(yy) if sigma is None else np.asarray(sigma, dtype=np.float64)
    w = 1.0 / np.where(scale > 0, scale, max(float(scale.max(initial=0.0)), 1e-300))
    coef = scipy.optimize.lsq_linear(A * w[:, None], yy * w, bounds=(0, np.inf), method="bvls").x
    coef = np.maximum(coef, 0.0)  # BVLS can end a hair below its bound (-6.6e-24 seen on the testbed)
    return coef, yy - A @ coef


def fit_hockney(sizes: Array, one_way: Array, wire: Array | None = None) -> tuple[Hockney, Fit]:
    """Hockney's alpha + beta m by relative least squares over one-way times ``RTT(m)/2`` (s) at
    ``sizes`` (B); with ``wire`` (s, per size: the ping-pong's bytes on its path alone,
    :meth:`colltune.sim.topology.Topology.wire_times`), of max(alpha + beta m, wire) instead.

    The second is Hockney as the simulator carries it over a topology (:func:`colltune.sim.network.on_topology`):
    a message alone takes the larger of its endpoint time and its wire time, so the line only has
    to hold where the endpoint's time exceeds the wire.  Fitted by the first alone, one line through
    a link whose token bucket passes the first bytes at once (the testbed's 3100 B) and long
    messages at the link's rate bends towards both, and overprices every hop of a chain of
    mid-sized messages."""
    m = np.asarray(sizes, dtype=np.float64)
    t = np.asarray(one_way, dtype=np.float64)
    (alpha, beta), res = nonnegative_lstsq([np.ones_like(m), m], t)
    if wire is None:
        return Hockney(alpha=alpha, beta=beta), record(("rtt",), "relative least squares of RTT(m)/2 on alpha + beta m",
                                                       res)
    w = np.asarray(wire, dtype=np.float64)
    scale = np.array([max(alpha, 1e-9), max(beta, 1e-12)])

    def relative(x: np.ndarray) -> np.ndarray:
        return (np.maximum(scale[0] * x[0] + scale[1] * x[1] * m, w) - t) / np.where(t > 0, t, 1.0)

    x = scipy.optimize.least_squares(relative, [1.0, 1.0], bounds=(0.0, np.inf)).x
    alpha, beta = float(scale[0] * x[0]), float(scale[1] * x[1])
    return Hockney(alpha=alpha, beta=beta), record(
        ("rtt",), "relative least squares of RTT(m)/2 on max(alpha + beta m, the wire time of the ping-pong's path)",
        t - np.maximum(alpha + beta * m, w))


def fit_loggp(sizes: Array, rtt: Array, gap: Array, overhead: Array, sigma_gap: Array | None = None,
              sigma_overhead: Array | None = None) -> tuple[LogGP, Fit]:
    """LogGP(S) from Netgauge's method at ``sizes`` (B): ``rtt`` = PRTT(1, 0, s), ``gap`` =
    (PRTT(n, 0, s) - PRTT(1, 0, s)) / (n-1) and ``overhead`` = (PRTT(n, d, s) - PRTT(1, 0, s)) /
    (n-1) - d, all in s, with their standard errors ``sigma_*`` if known (the overhead's error
    comes from d, not from itself).  g and G by weighted least squares of gap on g + (s-1)G, o
    and O of overhead on o + (s-1)O, and L = RTT(s0)/2 - 2o - (s0-1)G at the smallest size s0."""
    s = np.asarray(sizes, dtype=np.float64)
    extra = np.maximum(s - 1, 0)
    (g, G), res_gap = nonnegative_lstsq([np.ones_like(s), extra], gap, sigma_gap)
    (o, O), res_o = nonnegative_lstsq([np.ones_like(s), extra], overhead, sigma_overhead)
    k = int(np.argmin(s))
    L = max(float(np.asarray(rtt)[k]) / 2 - 2 * o - extra[k] * max(G, O), 0.0)
    params = LogGP(L=L, o=o, g=g, G=G, O=O)
    rtt_res = np.asarray(rtt) - np.array([2 * params.message(int(v)) for v in s])
    return params, record(("prtt_gap", "prtt_overhead", "rtt"),
                        "least squares of the PRTT gap on g + (s-1)G and overhead on o + (s-1)O; "
                        "residuals: gap, then overhead, then RTT against 2(2o + L + (s-1)max(O,G))",
                        np.concatenate([res_gap, res_o, rtt_res]))


def fit_plogp(sizes: Array, rtt: Array, g0: float, gap: Array | None = None) -> tuple[float, Tabulated, Fit]:
    """The fast method of Kielmann et al. (paper 001 eq. 1): ``L = RTT(0)/2 - g(0)`` and
    ``g(m) = RTT(m)/2 - L``, with ``g0`` from the rate of zero-byte sends; ``sizes`` must start
    at 0.  Noise can make a difference negative: g and L are clamped at 0.  Returns (L, g, fit); the residuals compare g(m) with the directly measured send
    ``gap`` (PRTT gap) where given, else they are RTT(m) - 2(L + g(m)) (zero by construction)."""
    m = np.asarray(sizes, dtype=np.float64)
    r = np.asarray(rtt, dtype=np.float64)
    if m.size == 0 or m[0] != 0:
        raise ValueError("the fast pLogP method needs RTT(0): sizes must start at 0")
    g0 = max(g0, 0.0)
    L = max(r[0] / 2 - g0, 0.0)
    values = np.maximum(r / 2 - L, 0.0)
    values[0] = g0
    g = Tabulated(sizes=tuple(int(v) for v in m), values=tuple(float(v) for v in values))
    if gap is not None:
        return L, g, record(("rtt", "prtt_gap"), "L = RTT(0)/2 - g(0), g(m) = RTT(m)/2 - L; "
                          "residuals: measured send gap minus g(m)", np.asarray(gap) - values)
    return L, g, record(("rtt",), "L = RTT(0)/2 - g(0), g(m) = RTT(m)/2 - L", r - 2 * (L + values))


def send_waited(send_time: Array, hold: Array) -> np.ndarray:
    """Whether a send timed while its receiver held off ``hold`` s (:meth:`colltune.probe.measure.
    Meter.held_sends`) waited for that receiver: it took at least half the hold (an eager send of m
    bytes takes at most its time on the wire, and the hold is at least two round trips of m bytes)."""
    return np.asarray(send_time, dtype=np.float64) >= np.asarray(hold, dtype=np.float64) / 2


def eager_threshold(sizes: Sequence[int], send_times: Array, holds: Array) -> tuple[int, bool]:
    """LogGOPS's rendezvous threshold S from sends timed while their receiver held off:
    ``sizes`` ascending (B), the median send time at each (s) and the receiver's hold there (s),
    judged by :func:`send_waited`.  Returns (S, found): S is the largest size such that it and
    every smaller size did not wait (-1 when the smallest waited; then every message waits), and
    found whether a larger size waited (else S is only the largest size measured, a lower bound)."""
    waited = send_waited(send_times, holds)
    if not waited.any():
        return int(sizes[-1]), False
    first = int(np.argmax(waited))
    return (int(sizes[first - 1]) if first > 0 else -1), True


#: An incast repetition later than the lossless line by half of Linux's TCP_RTO_MIN
#: (:data:`colltune.sim.topology.TCP_RTO_MIN`) counts as one that timed out.


@dataclass(frozen=True)
class Incast:
    """What a controlled incast (``senders`` ranks each sending ``sizes[i]`` bytes to one at once)
    shows: ``late[i]``, the fraction of repetitions that timed out; the lossless line ``intercept
    + per_byte * size`` (s, s per byte of one sender); ``t_rto``, the median delay of a repetition
    that timed out over that line (s; None if none did); ``passes``, the largest size below the
    first one at which most repetitions timed out, and ``lossy``, that first size (bytes per
    sender; ``passes`` None if even the smallest timed out, ``lossy`` None if none did)."""

    senders: int
    sizes: tuple[int, ...]
    late: tuple[float, ...]
    intercept: float
    per_byte: float
    t_rto: float | None
    passes: int | None
    lossy: int | None
    residuals: tuple[float, ...]

    def timeout_share(self) -> float | None:
        """The mean fraction of repetitions that timed out, over the sizes from the first one at
        which any did (None if none did).  Pooled, because one size's seven repetitions are too
        few: a size's share of timeouts moves by a factor of two from probe to probe."""
        first = next((i for i, f in enumerate(self.late) if f > 0), None)
        return None if first is None else float(np.mean(self.late[first:]))

    def charged_rto(self) -> float:
        """The retransmission timeout a model should charge a flow that overflows a port, s: the
        measured ``t_rto`` when the incast timed out in most of its repetitions (:meth:`timeout_share`
        at least a half), else 0, since a timeout then does not move a median time.  PlogPT's T_RTO
        and a topology's ``rto`` both take it."""
        share = self.timeout_share()
        return self.t_rto if self.t_rto is not None and share is not None and share >= 0.5 else 0.0

    def buffer(self) -> float | None:
        """Paper 000's switch buffer BL, bytes, that the incast shows: eq. 4's transfer ratio
        D/A + BL/k is 1 for k = ``senders`` * size bytes offered at A = ``senders`` times the
        port's rate D, so the largest incast that passed needs BL >= k (1 - 1/senders).  A lower
        bound (the first lossy size bounds it from above); None if even the smallest size lost."""
        if self.passes is None:
            return None
        return self.senders * self.passes * (1 - 1 / self.senders)


def fit_incast(sizes: Sequence[int], samples: Sequence[Array], senders: int,
               rto_floor: float = TCP_RTO_MIN) -> tuple[Incast, Fit]:
    """Separate the timed-out repetitions of a controlled incast from the others and measure what
    a timeout costs.  ``samples[i]`` are the repetitions at ``sizes[i]`` (ascending, bytes per
    sender; seconds).  The lossless line is fitted (least squares, non-negative) to the fastest
    repetition of every size that has one within ``rto_floor / 2`` of the line, refitted until
    the set of sizes stops changing; a repetition later than the line by more than that timed
    out."""
    if len(sizes) != len(samples) or len(sizes) < 2:
        raise ValueError("an incast fit needs at least two sizes, each with its repetitions")
    if senders < 1:
        raise ValueError(f"an incast needs at least one sender, got {senders}")
    x = np.asarray(sizes, dtype=np.float64)
    reps = [np.asarray(r, dtype=np.float64) for r in samples]
    fastest = np.array([r.min() for r in reps])
    use = np.ones(len(x), dtype=bool)
    for _ in range(len(x)):
        if use.sum() >= 2:
            coef, _ = nonnegative_lstsq([np.ones(int(use.sum())), x[use]], fastest[use])
        else:  # only the smallest size is on time: a flat line through it
            coef = np.array([fastest[np.argmax(use)] if use.any() else fastest[0], 0.0])
        line = coef[0] + coef[1] * x
        again = fastest <= line + rto_floor / 2
        if (again == use).all():
            break
        use = again
    late_at = [r > line[i] + rto_floor / 2 for i, r in enumerate(reps)]
    late = tuple(float(m.mean()) for m in late_at)
    delays = np.concatenate([r[m] - line[i] for i, (r, m) in enumerate(zip(reps, late_at, strict=True))])
    most = [i for i, f in enumerate(late) if f > 0.5]
    first = most[0] if most else None
    result = Incast(senders=senders, sizes=tuple(int(v) for v in sizes), late=late, intercept=float(coef[0]),
                    per_byte=float(coef[1]), t_rto=float(np.median(delays)) if delays.size else None,
                    passes=None if first == 0 else int(sizes[-1] if first is None else sizes[first - 1]),
                    lossy=None if first is None else int(sizes[first]),
                    residuals=tuple(float(v) for v in (fastest - line)[use]))
    method = (f"least squares line through the fastest repetition of each size within {rto_floor / 2:g} s of it; "
              "repetitions later than that timed out")
    return result, record(("incast",), method, result.residuals)


def fit_duplex(sizes: Sequence[int], one_way: Array, both_ways: Array) -> tuple[tuple[tuple[float, float], ...], Fit]:
    """The share of the link into its receiver's host a flow can use while that host sends (a
    topology's ``duplex``): at each of ``sizes`` (bytes), the median time of the shift in which each host
    either sends or receives (``one_way``, s) over that of the shift in which every host does both
    at once (``both_ways``), at most 1.  A closed form: its residuals are 0."""
    if len(sizes) != len(one_way) or len(sizes) != len(both_ways) or not sizes:
        raise ValueError("a duplex fit needs both shifts' median times at every size")
    pairs = []
    for size, a, b in zip(sizes, one_way, both_ways, strict=True):
        if not (a > 0 and b > 0):
            raise ValueError(f"a duplex fit needs positive times; got {a} and {b} s at {size} B")
        pairs.append((float(size), min(1.0, float(a) / float(b))))
    return tuple(pairs), record(("duplex_one_way", "duplex_both_ways"),
                                "median time one way over both ways at each size, at most 1", np.zeros(len(pairs)))


#: The smallest share of a link :func:`fit_trunk_duplex` looks for.
MIN_TRUNK_DUPLEX = 0.05


def fit_trunk_duplex(sizes: Sequence[int], measured: Array,
                     simulated: Callable[[int, float], float]) -> tuple[tuple[tuple[float, float], ...], Fit]:
    """The share of a link between two switches that a flow can use while data crosses it the
    other way (a topology's ``trunk_duplex``) at each of ``sizes`` (bytes): the e at which the
    simulated time of the probe's shift across those links, ``simulated(size, e)`` (s,
    nonincreasing in e), matches its ``measured`` median (s).  Where even e = 1 simulates as long
    as was measured, e is 1; the search ends at :data:`MIN_TRUNK_DUPLEX`.  The residuals are the
    simulated minus the measured times."""
    if len(sizes) != len(measured) or not sizes:
        raise ValueError("a trunk duplex fit needs the shift's median time at every size")
    pairs, residuals = [], []
    for size, target in zip(sizes, measured, strict=True):
        if not target > 0:
            raise ValueError(f"a trunk duplex fit needs positive times; got {target} s at {size} B")
        if simulated(size, 1.0) >= target:
            e = 1.0
        elif simulated(size, MIN_TRUNK_DUPLEX) <= target:
            e = MIN_TRUNK_DUPLEX
        else:
            e = float(scipy.optimize.brentq(lambda v, s=size, t=float(target): simulated(s, v) - t,
                                            MIN_TRUNK_DUPLEX, 1.0, xtol=1e-6))
        pairs.append((float(max(size, 1)), e))
        residuals.append(simulated(size, e) - float(target))
    return tuple(pairs), record(("trunk_shift",), "per size, the share whose simulated shift across the links "
                                "between switches matches the measured one (Brent's method)", np.asarray(residuals))


def deepened(duplex: Sequence[tuple[float, float]], depth: float) -> tuple[tuple[float, float], ...] | None:
    """The duplex table ``duplex`` ([bytes, share] pairs) with each shortfall 1 - d cut to
    ``depth`` (in [0, 1]) of itself: shares 1 - depth (1 - d); None (the whole link) at depth 0."""
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"a duplex depth lies in [0, 1], not {depth}")
    if depth == 0.0:
        return None
    return tuple((float(size), 1.0 - depth * (1.0 - float(share))) for size, share in duplex)


def fit_duplex_depth(measured: float, simulated: Callable[[float], float]) -> tuple[float, Fit]:
    """How deep the duplex table's shortfall reaches in a collective's steps: the depth k in [0, 1]
    at which ``simulated(k)`` (s: the simulated time of the probe's pairwise exchange over the
    table :func:`deepened` to k, nondecreasing in k) matches ``measured`` (s: its median over the
    rounds); 0 where even the whole link simulates no faster, 1 where the table as measured
    simulates faster.  The residual is the simulated minus the measured time.

    The shifts that measure the table each start after a barrier, every host at once; the
    pairwise exchange is the same both-ways shift at each distance in turn, its steps back to back
    as a collective's are, so its time says how much of the shifts' shortfall a collective's steps
    meet (:func:`colltune.probe.run._measure_collective_duplex`)."""
    if not measured > 0:
        raise ValueError(f"a duplex depth fit needs a positive time; got {measured} s")
    depth = _invert_rising(simulated, measured, 1.0)
    return depth, record(("duplex_streams_alltoall",), "the depth whose simulated pairwise exchange matches the "
                         "measured one (Brent's method)", np.asarray([simulated(depth) - measured]))


def fit_duplex_streams(measured: float, simulated: Callable[[float], float]) -> tuple[float, Fit]:
    """The part of the duplex table's shortfall that many streams into one host recover together
    (a topology's ``duplex_streams``): the part r in [0, 1] at which ``simulated(r)`` (s, the
    simulated time of the probe's direct all-to-all, nonincreasing in r) matches ``measured`` (s:
    the time the probe's measurements give it; :func:`colltune.probe.run._measure_collective_duplex`
    takes it from its ratio to the pairwise exchange); 0 where even r = 0 simulates no slower, 1
    where r = 1 simulates slower.  The residual is the simulated minus the measured time."""
    if not measured > 0:
        raise ValueError(f"a duplex streams fit needs a positive time; got {measured} s")
    if simulated(0.0) <= measured:
        r = 0.0
    elif simulated(1.0) >= measured:
        r = 1.0
    else:
        r = float(scipy.optimize.brentq(lambda v: simulated(v) - measured, 0.0, 1.0, xtol=1e-6))
    return r, record(("duplex_streams_alltoall",), "the part whose simulated all-to-all matches the measured one "
                     "(Brent's method)", np.asarray([simulated(r) - measured]))


#: The most processor time per message :func:`fit_message_cpu` looks for, s.
MAX_MESSAGE_CPU = 0.01


def fit_message_cpu(sizes: Sequence[int], crowded: Array, pair: Array,
                    excess: Callable[[int, float], float]) -> tuple[tuple[tuple[float, float], ...], Fit]:
    """The processor time a message takes of the cores its hosts share (a topology's
    ``message_cpu``, s) at each of ``sizes`` (bytes): the c at which the simulated shift of every
    rank exceeds that of two ranks by as much as measured.

    ``crowded`` and ``pair`` are the median times (s) of the shift in which every rank sends to the
    next and receives from the one before, with all ranks and with two; ``excess(size, c)`` is
    the simulated difference of the two with c seconds per message (nondecreasing in c).  Where
    even c = 0 simulates as much as was measured, c is 0; the search ends at
    :data:`MAX_MESSAGE_CPU`.  The residuals are the simulated minus the measured differences."""
    if len(sizes) != len(crowded) or len(sizes) != len(pair) or not sizes:
        raise ValueError("a message CPU fit needs both shifts' median times at every size")
    pairs, residuals = [], []
    for size, many, two in zip(sizes, crowded, pair, strict=True):
        if not (many > 0 and two > 0):
            raise ValueError(f"a message CPU fit needs positive times; got {many} and {two} s at {size} B")
        target = float(many) - float(two)
        c = _invert_rising(lambda v, s=size: excess(s, v), target, MAX_MESSAGE_CPU)
        pairs.append((float(max(size, 1)), c))
        residuals.append(excess(size, c) - target)
    return tuple(pairs), record(("cpu_shift_all", "cpu_shift_pair"),
                                "per size, the c whose simulated excess of the shift of every rank over that of "
                                "two matches the measured one (Brent's method)", np.asarray(residuals))


def fit_send_hold(crowded: float, pair: float, excess: Callable[[float], float]) -> tuple[float, Fit]:
    """The mean of a random hold at every send (a topology's ``send_hold``, s) at which the
    simulated shift of every rank exceeds that of two ranks by as much as measured.

    ``crowded`` and ``pair`` are the median times (s) of the shift in which every rank sends one
    message to the next and receives one from the one before, with all ranks and with two;
    ``excess(h)`` is the simulated difference of the two with a hold of mean h (nondecreasing in
    h: the step of every rank waits for the latest of its senders, the step of two for the later
    of two).  Where even h = 0 simulates as much as was measured, h is 0; the search ends at
    ``crowded``, as no send of a step holds longer than the step.  The residual is the simulated
    minus the measured difference."""
    if not (crowded > 0 and pair > 0):
        raise ValueError(f"a send hold fit needs positive times; got {crowded} and {pair} s")
    target = float(crowded) - float(pair)
    hold = _invert_rising(excess, target, float(crowded))
    return hold, record(("cpu_shift_all", "cpu_shift_pair"), "the mean hold whose simulated excess of the shift "
                        "of every rank over that of two matches the measured one (Brent's method)",
                        np.asarray([excess(hold) - target]))


def _invert_rising(f: Callable[[float], float], target: float, upper: float) -> float:
    """The x in [0, ``upper``] at which the nondecreasing ``f`` reaches ``target`` (Brent's method):
    0 where f(0) already does, ``upper`` where f(upper) does not."""
    if f(0.0) >= target:
        return 0.0
    if f(upper) <= target:
        return upper
    return float(scipy.optimize.brentq(lambda v: f(v) - target, 0.0, upper, xtol=1e-8))


def table(sizes: Array, g: Tabulated, os_: Array | None, or_: Array | None) -> PLogPTable:
    """A :class:`PLogPTable` with g and the measured overheads at ``sizes``."""
    def tab(v: Array | None) -> Tabulated | None:
        return None if v is None else Tabulated(sizes=tuple(int(s) for s in sizes),
                                                values=tuple(max(float(x), 0.0) for x in v))
    return PLogPTable.model_validate({"g": g, "os": tab(os_), "or": tab(or_)})


def fit_tree(bandwidth: Array, loaded: Array, idle: Array, depth: int, bidirectional: bool,
             floor: float) -> tuple[TreeLevels, Fit]:
    """PlogPT's b(h) and d(h) for h = 1 .. ``depth`` (paper 001 section III-C).

    ``bandwidth[h-1]`` is the total rate (B/s) of the 2^depth / 2 pairs k <-> k xor 2^(h-1),
    measured concurrently; one height-h edge carries the pairs of one height-h subtree, so
    b(h) = total 2^h / 2^depth, and a measured b(h+1) above 2 b(h) is taken as 2 b(h) (the paper:
    the flow of a height-(h+1) edge never exceeds twice that at h).  ``loaded`` and ``idle`` are
    the one-way latencies (s) between the leftmost and rightmost leaf of a height-h subtree with
    and without that load: d(h) is their difference, halved when ``bidirectional``.  A d(h)
    below ``floor`` (the timer's resolution) is recorded as ``floor``, so that eq. 5's log stays
    defined."""
    total = np.asarray(bandwidth, dtype=np.float64)
    b = total * 2.0 ** np.arange(1, depth + 1) / 2 ** depth
    for h in range(1, depth):
        b[h] = min(b[h], 2 * b[h - 1])
    d = (np.asarray(loaded) - np.asarray(idle)) / (2 if bidirectional else 1)
    levels = TreeLevels(b=tuple(float(v) for v in b), d=tuple(max(float(v), floor) for v in d))
    return levels, record(("tree_bandwidth",), "b(h) = total 2^h / 2^D; residuals: measured total minus "
                        "b(h) 2^D / 2^h (nonzero where b(h+1) was capped at 2 b(h))",
                        total - b * 2 ** depth / 2.0 ** np.arange(1, depth + 1))


def epsilon_s(b_quartiles: Sequence[tuple[float, float]], d_quartiles: Sequence[tuple[float, float]]) -> float:
    """epsilon_S of eq. 5 from the measurement noise: the largest, over heights, of
    ``log(b_q3 / b_q1)^2 + log(d_q3 / d_q1)^2``, so that two heights whose parameters differ by no
    more than the spread of one of them count as the same switch.  Quartiles that are not both
    positive contribute nothing."""
    def term(q: tuple[float, float]) -> float:
        lo, hi = q
        return float(np.log(hi / lo) ** 2) if lo > 0 and hi > 0 else 0.0
    worst = max((term(bq) + term(dq) for bq, dq in zip(b_quartiles, d_quartiles, strict=True)), default=0.0)
    return max(worst, 1e-6)


def epsilon_t(latency_quartiles: Sequence[tuple[float, float]], packet_time: float) -> float:
    """epsilon_T of eq. 14, s: paper 001 sets it to absorb the jitter of packet arrival times,
    "ordinarily larger than the time consumed to process one packet".  The jitter is read as the
    widest interquartile range of the one-way latency under the tree load (``latency_quartiles``,
    (q1, q3) per height, s), and never below ``packet_time`` (s), the time to take in one packet."""
    if not packet_time >= 0:
        raise ValueError(f"the time to process one packet must be >= 0 s, got {packet_time}")
    jitter = max((hi - lo for lo, hi in latency_quartiles if hi >= lo), default=0.0)
    return max(jitter, packet_time)


def fit_piecewise(sizes: Array, values: Array, threshold: int = 40) -> tuple[Piecewise, np.ndarray]:
    """Paper 000's cost ``slope m + intercept`` fitted (non-negative least squares) separately to
    the sizes at most ``threshold`` bytes and above it; a side with fewer than two sizes takes
    the other side's line.  Returns the cost and the residuals (s) in the order of ``sizes``."""
    m = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(values, dtype=np.float64)
    lines: dict[bool, Linear] = {}
    for small in (True, False):
        sel = (m <= threshold) if small else (m > threshold)
        if np.count_nonzero(sel) >= 2:
            (c0, c1), _ = nonnegative_lstsq([np.ones(sel.sum()), m[sel]], y[sel])
            lines[small] = Linear(slope=c1, intercept=c0)
    if not lines:
        lines[True] = Linear(intercept=max(float(np.median(y)), 0.0))
    cost = Piecewise(small=lines.get(True, lines.get(False)), large=lines.get(False, lines.get(True)),
                     threshold=threshold)
    return cost, y - np.array([cost(v) for v in m])


def cluster_latency(a: float, b: float, c: float, R: float, gs: Callable[[float], float],
                    procs: Array, sizes: Array) -> np.ndarray:
    """Paper 000's L(m, p) = a p + b + c m max(1, p m / (R gs(m))), s, at each (p, m)."""
    p = np.asarray(procs, dtype=np.float64)
    m = np.asarray(sizes, dtype=np.float64)
    gsm = np.array([gs(v) for v in m])
    load = np.where((m > 0) & (gsm > 0), p * m / (R * np.where(gsm > 0, gsm, 1.0)), 0.0)
    return a * p + b + c * m * np.maximum(1.0, load)


def loaded_latency(round_trips: dict[int, Array], procs: int) -> tuple[float, dict[int, float]]:
    """How much longer a message takes when every rank of a job of ``procs`` ranks communicates at
    once than when two do, s: paper 000's L(m, p) = a p + b + ..., whose a p grows with the
    processes communicating (section 3), carried to models measured by one ping-pong.

    ``round_trips[p]``: round trips (s) in p/2 concurrent ping-pong pairs, one per packet size, the
    same sizes for every p (p = 2 among them).  The increment at p is the median over the sizes of
    half the difference between p's round trip and 2's (one way), at least 0; a = the increment at
    the largest p measured / (that p - 2), and the result a (procs - 2), 0 if no p above 2 was
    measured or procs <= 2.  Returns (that result, the increment at each p above 2)."""
    if 2 not in round_trips:
        raise ValueError("the concurrent round trips must include p = 2, the ping-pong the models are fitted on")
    base = np.asarray(round_trips[2], dtype=np.float64)
    increments = {p: max(float(np.median((np.asarray(t, dtype=np.float64) - base) / 2)), 0.0)
                  for p, t in sorted(round_trips.items()) if p > 2}
    if not increments or procs <= 2:
        return 0.0, increments
    top = max(increments)
    return increments[top] / (top - 2) * (procs - 2), increments


def with_loaded_latency(models: Models, delta: float) -> Models:
    """``models`` with ``delta`` seconds (:func:`loaded_latency`) added to the latency of every model
    fitted on an idle ping-pong: Hockney's alpha, LogP's and LogGP's L, pLogP's L and every pair of
    the latency matrix.  The cluster model has its own L(m, p); PlogPT's latencies d(h) are measured
    under load."""
    if delta < 0:
        raise ValueError(f"a latency increment must be >= 0 s, got {delta}")
    update: dict[str, object] = {}
    if models.hockney is not None:
        update["hockney"] = models.hockney.model_copy(update={"alpha": models.hockney.alpha + delta})
    for name in ("logp", "loggp", "plogp"):
        params = getattr(models, name)
        if params is not None:
            update[name] = params.model_copy(update={"L": params.L + delta})
    if models.latency is not None:
        grid = models.latency.latency
        update["latency"] = models.latency.model_copy(update={"latency": tuple(
            tuple(v + delta if i != j else v for j, v in enumerate(row)) for i, row in enumerate(grid))})
    return models.model_copy(update=update)


def fit_cluster_latency(procs: Array, sizes: Array, latency: Array, gs: Callable[[float], float],
                        scale: Array | None = None) -> tuple[ClusterLatency, np.ndarray]:
    """L(m, p) fitted to transfer times ``latency`` (s) of packets of ``sizes`` bytes among
    ``procs`` processes (concurrent ping-pong pairs), by least squares on errors relative to
    ``scale`` (s; default ``latency`` itself).  The probe's transfer time is a one-way time less
    the endpoint costs, which can leave about nothing for one pair (the 8-host testbed: -1 to 0 us
    against 27 us for four pairs); relative to that, the one pair's points outweighed every other,
    and a = b = c = 0 fitted them, so the probe passes the one-way times as ``scale``.

    Given R the model is linear in a, b, c >= 0 (:func:`nonnegative_lstsq`); R is chosen by a
    grid over log R, from a tenth of the largest measured load p m / gs(m) to 10^6 times it,
    refined by a bounded scalar search (scipy) around the best grid point.  When no load reaches
    R, the data cannot tell R apart from anything larger, and the upper end is kept.  With a
    single process count, a is 0."""
    p = np.asarray(procs, dtype=np.float64)
    m = np.asarray(sizes, dtype=np.float64)
    y = np.asarray(latency, dtype=np.float64)
    sigma = np.abs(y) if scale is None else np.abs(np.asarray(scale, dtype=np.float64))
    sigma = np.where(sigma > 0, sigma, max(float(sigma.max(initial=0.0)), 1e-300))
    gsm = np.array([gs(v) for v in m])
    load = np.where((m > 0) & (gsm > 0), p * m / np.where(gsm > 0, gsm, 1.0), 0.0)
    peak = float(load.max(initial=0.0)) or 1.0
    vary_p = np.unique(p).size > 1

    def solve(log_r: float) -> tuple[np.ndarray, np.ndarray]:
        columns = [p] if vary_p else []
        coef, res = nonnegative_lstsq([*columns, np.ones_like(m), m * np.maximum(1.0, load / 10.0 ** log_r)], y,
                                      sigma)
        return (coef if vary_p else np.concatenate([[0.0], coef])), res

    def cost(log_r: float) -> float:
        return float(np.sum((solve(log_r)[1] / sigma) ** 2))

    grid = np.linspace(np.log10(peak / 10), np.log10(peak * 1e6), 71)
    costs = np.array([cost(v) for v in grid])
    k = len(grid) - 1 - int(np.argmin(costs[::-1]))  # on a tie (no load reached R) keep the largest R
    best = grid[k]
    found = scipy.optimize.minimize_scalar(cost, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]),
                                           method="bounded", options={"xatol": 1e-6})
    if found.fun < costs[k]:
        best = found.x
    (a, b, c), res = solve(best)
    return ClusterLatency(per_proc=a, base=b, per_byte=c, saturation=10.0 ** best), res
