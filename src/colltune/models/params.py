"""Model parameter sets: validated, immutable, with units stated.

Inside colltune every time is in seconds, every size in bytes and every bandwidth in bytes per
second (profiles of the papers' abstract examples use abstract time units instead; see
:attr:`colltune.profiles.Profile.time_unit`).  Each class is a frozen pydantic model, so a
parameter set read from a profile file is checked field by field and cannot change afterwards.

- :class:`Hockney` (Hockney 1994; paper 002 eq. 1): a message of m bytes takes alpha + beta m.
- :class:`Postal` (Bar-Noy and Kipnis): a message occupies its sender for ``step`` and arrives
  ``lam`` after it was started.
- :class:`LogP` (Culler et al.) and :class:`LogGP` (Alexandrov et al.), the latter with the
  rendezvous threshold S of LogGOPS.
- :class:`PLogP` (Kielmann et al.; paper 003 section 2): L and tabulated g(m), os(m), or(m),
  measured uni- and bidirectionally (paper 001 section III-B-1).
- :class:`ClusterModel` (paper 000 section 3.2, Table 1): Os, Ts, gs, gr, Or, Ur, L(m, p), the
  memory-copy costs and BL, each piecewise linear in the packet size m.
- :class:`PlogPT` (paper 001 section III): the network as a perfect binary tree with per-height
  bandwidth b(h) and buffer delay d(h), T_RTO, epsilon_S, epsilon_T.
- :class:`LatencyMatrix` (paper 004 Fig. 1): one-way latency between every pair of ranks.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from colltune.limits import MAX_PER_BYTE, MAX_TIME

#: A non-negative, finite time in seconds (or abstract time units), at most
#: :data:`~colltune.limits.MAX_TIME`.
Time = Annotated[float, Field(ge=0, le=MAX_TIME, allow_inf_nan=False)]
#: A non-negative, finite cost per byte, in seconds per byte, at most
#: :data:`~colltune.limits.MAX_PER_BYTE`.
PerByte = Annotated[float, Field(ge=0, le=MAX_PER_BYTE, allow_inf_nan=False)]
#: A finite bandwidth in bytes per second, at least 1 / :data:`~colltune.limits.MAX_PER_BYTE`.
Bandwidth = Annotated[float, Field(ge=1 / MAX_PER_BYTE, allow_inf_nan=False)]


class ParamSet(BaseModel):
    """Base of every parameter set: frozen, and unknown fields are an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Hockney(ParamSet):
    """The linear model: a message of m bytes takes ``alpha + beta * m`` seconds (paper 002 eq. 1).

    ``gamma`` is the computation cost of a reduction per byte (Thakur, Rabenseifner and Gropp
    2005); reduction formulas are unavailable without it.
    """

    alpha: Time = Field(description="start-up time per message, s (paper 002: t0)")
    beta: PerByte = Field(description="transfer time per byte, s/B (paper 002: td, the inverse bandwidth)")
    gamma: PerByte | None = Field(None, description="reduction compute time per byte, s/B")

    def message(self, m: float) -> float:
        """Time of one message of ``m`` bytes, in seconds."""
        return self.alpha + self.beta * m


class Postal(ParamSet):
    """The Postal model: a send occupies the sender for ``step``; the message arrives ``lam`` after
    the send started.  It is LogP with o = 0, g = step and L = lam (paper 000, footnote 2)."""

    lam: Time = Field(description="latency lambda, s (or abstract units)")
    step: Time = Field(1.0, description="time the sender needs per message, s (1 in the normalised model)")


class LogP(ParamSet):
    """LogP: latency L, overhead o per send and per receive, gap g between consecutive messages.

    One small message costs ``o + L + o`` end to end; a sender starts a message at most every
    ``max(g, o)``."""

    L: Time = Field(description="network latency, s")
    o: Time = Field(description="CPU overhead of a send or a receive, s")
    g: Time = Field(description="minimum gap between consecutive messages, s")


class LogGP(ParamSet):
    """LogGP with LogGOPS's overhead per byte O and rendezvous threshold S.

    A message of s bytes occupies the sender's CPU for ``o + (s-1) O`` and its NIC for
    ``g + (s-1) G``, arrives ``o + L`` after it started and occupies the receiver's CPU for
    ``o + max((s-1) O, (s-1) G)`` from then: ``2o + L + (s-1) max(O, G)`` end to end (the rules of
    LogGOPSim, Hoefler, Schneider, Lumsdaine 2010).  Messages above ``S`` bytes use rendezvous:
    the send completes only once its receive is matched.
    """

    L: Time = Field(description="network latency, s")
    o: Time = Field(description="CPU overhead of a send or a receive, s")
    g: Time = Field(description="minimum gap between consecutive messages, s")
    G: PerByte = Field(description="gap per byte of a long message, s/B")
    O: PerByte = Field(0.0, description="CPU overhead per byte, s/B (LogGOPS; 0 in plain LogGP)")
    S: int = Field(65536, ge=0, description="rendezvous threshold, bytes: larger messages wait for their receiver")

    def gap(self, s: int) -> float:
        """Time between the starts of two consecutive sends of ``s`` bytes, in seconds."""
        extra = max(s - 1, 0)
        return max(self.o + extra * self.O, self.g + extra * self.G)

    def message(self, s: int) -> float:
        """End-to-end time of one eager message of ``s`` bytes, in seconds."""
        return 2 * self.o + self.L + max(s - 1, 0) * max(self.O, self.G)


class Tabulated(ParamSet):
    """A function of the message size, tabulated at ``sizes`` (bytes, strictly increasing).

    Between two points it is interpolated linearly; below the first point it keeps the first
    value; beyond the last it continues the line through the last two points (gaps grow linearly
    with the size once messages are large, Kielmann et al.).  A single point is a constant.
    """

    sizes: tuple[Annotated[int, Field(ge=0)], ...] = Field(min_length=1, description="message sizes, bytes")
    values: tuple[Time, ...] = Field(min_length=1, description="the function at each size, s")

    @model_validator(mode="after")
    def _check(self) -> Tabulated:
        if len(self.sizes) != len(self.values):
            raise ValueError(f"sizes has {len(self.sizes)} points but values has {len(self.values)}")
        if any(b <= a for a, b in zip(self.sizes, self.sizes[1:])):
            raise ValueError("sizes must be strictly increasing")
        return self

    @classmethod
    def constant(cls, value: float) -> Tabulated:
        """The constant function ``value``."""
        return cls(sizes=(0,), values=(value,))

    def __call__(self, m: float) -> float:
        """The value at ``m`` bytes, in seconds."""
        xs, ys = self.sizes, self.values
        if len(xs) == 1 or m <= xs[-1]:
            return float(np.interp(m, xs, ys))
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return ys[-1] + slope * (m - xs[-1])


class PLogPTable(ParamSet):
    """pLogP's size-dependent parameters, measured in one direction (uni or bi)."""

    g: Tabulated = Field(description="gap g(m): time between consecutive sends of m bytes, s")
    os: Tabulated | None = Field(None, description="send overhead os(m), s")
    or_: Tabulated | None = Field(None, alias="or", description="receive overhead or(m), s")


class PLogP(ParamSet):
    """Parameterised LogP (paper 003 section 2; paper 001 section II-C).

    One message of m bytes costs ``g(m) + L`` end to end (the fast measurement of Kielmann et
    al. gives RTT = 2 (L + g(0)), paper 001 eq. 1); a sender starts a message every ``g(m)``.
    ``contention_gamma`` is paper 003's all-to-all contention ratio (section 5), fitted by
    :func:`colltune.models.fit_contention_ratio`.
    """

    L: Time = Field(description="end-to-end latency, s")
    unidirectional: PLogPTable = Field(description="parameters measured with one sender and one receiver")
    bidirectional: PLogPTable | None = Field(None, description="parameters measured with both ends sending "
                                                               "(paper 001 section III-B-1)")
    contention_gamma: float | None = Field(None, ge=0, le=1, allow_inf_nan=False,
                                           description="all-to-all contention ratio gamma (paper 003 section 5)")


class Linear(ParamSet):
    """``slope * m + intercept`` seconds for m bytes."""

    slope: PerByte = Field(0.0, description="s/B")
    intercept: Time = Field(description="s")

    def __call__(self, m: float) -> float:
        return self.slope * m + self.intercept


class Piecewise(ParamSet):
    """Paper 000's piecewise linear cost: ``small`` for m <= ``threshold`` bytes, ``large`` above."""

    small: Linear
    large: Linear
    threshold: int = Field(40, ge=0, description="the small/large break, bytes (paper 000 Table 1: 40)")

    @classmethod
    def same(cls, line: Linear, threshold: int = 40) -> Piecewise:
        """One line on both sides of the break."""
        return cls(small=line, large=line, threshold=threshold)

    def __call__(self, m: float) -> float:
        """The cost of ``m`` bytes, in seconds."""
        return (self.small if m <= self.threshold else self.large)(m)


class ClusterLatency(ParamSet):
    """Paper 000's transfer time ``L(m, p) = a p + b + c m max(1, p m / (R gs(m)))`` (Table 1).

    The last factor grows once p concurrent packets of m bytes exceed what the switch moves in
    one send gap; ``saturation`` is R in bytes per second (Table 1: 90 bytes per microsecond).
    """

    per_proc: PerByte = Field(description="a: seconds per process in the job, s")
    base: Time = Field(description="b, s")
    per_byte: PerByte = Field(description="c, s/B")
    saturation: Bandwidth = Field(description="R, B/s")


class ClusterModel(ParamSet):
    """The cluster model of paper 000 (section 3.2, Table 1), for one packet of m <= ``mtu`` bytes."""

    Os: Piecewise = Field(description="send time: CPU cost of handing a packet to the interface, s")
    Ts: Piecewise | None = Field(None, description="Table 1's Ts, s")
    gs: Piecewise = Field(description="send gap: minimum time between two packets leaving a node, s")
    gr: Piecewise = Field(description="receive gap: minimum time between two packets arriving at a node, s")
    Or: Piecewise = Field(description="asynchronous receive overhead (kernel), s")
    Ur: Piecewise = Field(description="user receive cost (polling, copying out), s")
    L: ClusterLatency = Field(description="transfer time L(m, p)")
    Mctc: Piecewise | None = Field(None, description="cache-to-cache copy cost, s")
    Mctm: Piecewise | None = Field(None, description="cache-to-memory copy cost, s")
    Mmtm: Piecewise | None = Field(None, description="memory-to-memory copy cost, s")
    BL: int = Field(ge=0, description="switch buffer, packets")
    mtu: int = Field(1500, ge=1, description="largest packet, bytes: the model holds for m <= mtu")

    def latency(self, m: float, p: int) -> float:
        """L(m, p) in seconds for packets of ``m`` bytes among ``p`` processes.  A send gap
        gs(m) of 0 (none measurable, as on shared memory) offers no load, as the fit
        (:func:`colltune.probe.fit.fit_cluster_latency`) takes it."""
        c = self.L
        gap = self.gs(m)
        load = p * m / (c.saturation * gap) if m > 0 and gap > 0 else 0.0
        return c.per_proc * p + c.base + c.per_byte * m * max(1.0, load)


class TreeLevels(ParamSet):
    """Per-height parameters of PlogPT's binary tree, h = 1 .. D (index 0 is height 1)."""

    b: tuple[Bandwidth, ...] = Field(min_length=1, description="b(h): bandwidth of one height-h edge, B/s")
    d: tuple[Time, ...] | None = Field(None, description="d(h): buffer delay at height h, s")

    @model_validator(mode="after")
    def _check(self) -> TreeLevels:
        if self.d is not None and len(self.d) != len(self.b):
            raise ValueError(f"b has {len(self.b)} heights but d has {len(self.d)}")
        return self

    @property
    def depth(self) -> int:
        """D: the tree's height (it has 2^D leaves)."""
        return len(self.b)


class PlogPT(ParamSet):
    """PlogPT (paper 001 section III): pLogP's L and g(m) plus a binary tree of switches.

    ``bidirectional`` holds b(h), d(h) measured with both ends sending, which is what the model
    predicts with (section III-B-1); ``unidirectional`` keeps the one-way measurement.
    """

    L: Time | None = Field(None, description="end-to-end latency, s")
    g: Tabulated | None = Field(None, description="g(m): the gap at height 1, s")
    bidirectional: TreeLevels = Field(description="b(h), d(h) measured bidirectionally")
    unidirectional: TreeLevels | None = Field(None, description="b(h), d(h) measured unidirectionally")
    t_rto: Time = Field(0.2, description="T_RTO: TCP's retransmission timeout, s (Linux: 200 ms)")
    eps_s: float = Field(0.01, gt=0, allow_inf_nan=False,
                         description="epsilon_S: tolerance of the switch predicate P_S (eq. 5)")
    eps_t: Time | None = Field(None, description="epsilon_T: timing tolerance of the RTO rule (eq. 14), s")

    @field_validator("unidirectional")
    @classmethod
    def _same_depth(cls, v: TreeLevels | None, info) -> TreeLevels | None:  # type: ignore[no-untyped-def]
        bi = info.data.get("bidirectional")
        if v is not None and bi is not None and v.depth != bi.depth:
            raise ValueError(f"depth {v.depth} differs from the bidirectional tree's {bi.depth}")
        return v


class LatencyMatrix(ParamSet):
    """One-way latencies between ranks (paper 004 Fig. 1): ``latency[i][j]`` from i to j, s.

    The matrix may be asymmetric.  ``o_s``, ``gap`` and ``o_r`` are the sending overhead, gap and
    receiving overhead of paper 004 eq. 2 (T_SO, T_G, T_RO); the paper drops them on a WAN.
    """

    names: tuple[str, ...] = Field(min_length=1, description="a name per rank, in rank order")
    latency: tuple[tuple[Time, ...], ...] = Field(description="latency[i][j]: from rank i to rank j, s")
    o_s: Time = Field(0.0, description="T_SO: sending overhead, s")
    gap: Time = Field(0.0, description="T_G: gap between consecutive sends, s")
    o_r: Time = Field(0.0, description="T_RO: receiving overhead, s")

    @model_validator(mode="after")
    def _square(self) -> LatencyMatrix:
        n = len(self.names)
        if len(set(self.names)) != n:
            raise ValueError("names must be distinct")
        if len(self.latency) != n or any(len(row) != n for row in self.latency):
            raise ValueError(f"latency must be a {n} x {n} matrix, one row and column per name")
        return self


#: Every parameter set by the model name used in profiles and on the command line.
MODELS: dict[str, type[ParamSet]] = {
    "hockney": Hockney, "postal": Postal, "logp": LogP, "loggp": LogGP, "plogp": PLogP,
    "cluster": ClusterModel, "plogpt": PlogPT, "latency": LatencyMatrix,
}
ModelName = Literal["hockney", "postal", "logp", "loggp", "plogp", "cluster", "plogpt", "latency"]


def ceil_log2(p: int) -> int:
    """ceil(log2 p) for p >= 1: the rounds of a binomial tree over p ranks."""
    return (p - 1).bit_length()


def floor_log2(p: int) -> int:
    """floor(log2 p) for p >= 1."""
    return p.bit_length() - 1


def is_power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


__all__ = ["MODELS", "Bandwidth", "ClusterLatency", "ClusterModel", "Hockney", "LatencyMatrix", "Linear", "LogGP",
           "LogP", "ModelName", "PLogP", "PLogPTable", "ParamSet", "PerByte", "Piecewise", "PlogPT", "Postal",
           "Tabulated", "Time", "TreeLevels", "ceil_log2", "floor_log2", "is_power_of_two"]
