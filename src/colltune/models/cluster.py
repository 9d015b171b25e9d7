"""Paper 000's cluster model: its Table 1, the broadcast with send/receive interference (eq. 2),
and the gather as a bottleneck-stage problem (eq. 3-4, the bounds Gal and Gau, eq. 7 and 8).

Everything is per packet of at most ``mtu`` bytes (Table 1 holds within one packet); a message
of m bytes travels as ceil(m / mtu) packets.

**The gather's bottleneck.** x ranks send at once, each a packet every gs; the root takes one
every gr.  In items (packets) per second the arrival rate is A = x / gs and the departure rate
D = 1 / gr.  Once A > D the staging buffer of B items fills at t = B / (A - D) (eq. 3); from then
on an item gets through with probability D / A, so over k items the transfer ratio is
``min(1, D/A + B/k)`` (eq. 4).

- Gal: D/A < 1 keeps the bottleneck busy, i.e. x > gs/gr; the paper takes Gal = ceil(gs/gr)
  (at least 1).
- Gau (the extracted text lost the formula; derived here from eq. 4): no item is lost while
  D/A + B/k >= 1.  With D/A = gs / (x gr) this is ``x <= gs / (gr (1 - B/k))`` when B < k, so
  Gau = floor(gs / (gr (1 - B/k))); when B >= k every item fits in the buffer and Gau = p0 =
  P - 1 (the paper: "the upper bound value would then bound by p0 only").
- The window (eq. 7): w = max{x : Gal <= x <= Gau and the last, partial window still has at least
  Gal senders}.  The extracted inequality reads "rem(p0, x) >= Gal"; colltune reads it as
  rem(p0, x) = 0 or rem(p0, x) >= Gal, since a remainder of 0 means every window is full (the
  literal reading would exclude every x that divides p0, x = 1 included).  If no x qualifies
  (Gau < Gal), w = Gal: no window avoids loss and the lower bound keeps the root busy.
"""

from __future__ import annotations

import math

from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import ClusterLatency, ClusterModel, Linear, Piecewise, ceil_log2

US = 1e-6  # Table 1 is in microseconds


def _us(slope: float, intercept: float) -> Linear:
    return Linear(slope=slope * US, intercept=intercept * US)


#: Paper 000 Table 1: the 16-node Fast Ethernet cluster (Direct Point, Intel 510T switch).
TABLE1 = ClusterModel(
    Os=Piecewise(small=_us(0.0291, 6.308), large=_us(0.0253, 6.37)),
    Ts=Piecewise(small=_us(0.049, 11.732), large=_us(0.0776, 10.88)),
    gs=Piecewise(small=_us(0, 6.73), large=_us(0.0796, 3.027)),
    gr=Piecewise(small=_us(0, 6.73), large=_us(0.0788, 4.986)),
    Or=Piecewise(small=_us(0.0426, 12.245), large=_us(0.0429, 12.176)),
    Ur=Piecewise.same(_us(0, 9.93)),
    L=ClusterLatency(per_proc=1.556 * US, base=16.684 * US, per_byte=0.0826 * US, saturation=90 / US),
    Mctc=Piecewise.same(_us(0.015, 0.194)),
    Mctm=Piecewise.same(_us(0.0149, 2.07)),
    Mmtm=Piecewise.same(_us(0.0314, 1.756)),
    BL=1935,
    mtu=1500,
)


def transfer_ratio(arrival: float, departure: float, buffer: float, items: float) -> float:
    """Eq. 3-4: the fraction of ``items`` that get through a stage with ``buffer`` items of room,
    fed at ``arrival`` and drained at ``departure`` items per second."""
    if arrival <= departure or items <= 0:
        return 1.0
    return min(1.0, departure / arrival + buffer / items)


def gather_bounds(model: ClusterModel, procs: int, m: int, buffer: int | None = None) -> tuple[int, int]:
    """(Gal, Gau): the fewest and the most ranks that may send to the gather root at once for
    blocks of ``m`` bytes (see the module docstring for the derivation).  ``buffer`` is the
    switch buffer in bytes (default: the model's BL packets of ``mtu`` bytes)."""
    p0 = procs - 1
    room = model.BL if buffer is None else buffer / model.mtu
    packet = min(max(m, 1), model.mtu)
    ratio = model.gs(packet) / model.gr(packet)
    gal = max(1, math.ceil(ratio))
    items = p0 * math.ceil(m / model.mtu)
    if room >= items:
        return gal, p0
    return gal, min(p0, math.floor(ratio / (1 - room / items)))


def coordinated_window(model: ClusterModel, procs: int, m: int, buffer: int | None = None) -> int:
    """Eq. 7: the coordinated gather's sender window w for ``procs`` ranks and ``m`` bytes each
    (``buffer`` as in :func:`gather_bounds`)."""
    p0 = procs - 1
    if p0 <= 0:
        return 1
    gal, gau = gather_bounds(model, procs, m, buffer)
    ok = [x for x in range(gal, gau + 1) if p0 % x == 0 or p0 % x >= gal]
    return max(ok) if ok else gal


@formula("gather", "coordinated", "cluster",
         "paper 000 eq. 8: C1 + (P-1) i D + C2; window 0 means w by eq. 7 from this model")
def _gather_coordinated(model: ClusterModel, c: Case) -> float:
    """C1 = Os + L(packet, P), the first packet's arrival at the bottleneck; D = gr(packet), the
    bottleneck's service time per packet; i = ceil(m / mtu) packets per rank; C2 = Or + Ur, the
    last packet's way into the root's buffer."""
    P, m = c.procs, c.size
    packet = min(m, model.mtu)
    buffer = c.params["switch_buffer"]
    _, gau = gather_bounds(model, P, m, buffer)
    everyone = buffer >= (P - 1) * m
    window = c.params["window"] or coordinated_window(model, P, m, buffer)
    if not everyone and window > gau:
        raise Unavailable(f"window {window} exceeds Gau = {gau}: packets are lost, "
                          f"which paper 000 eq. 8 does not price")
    i = math.ceil(m / model.mtu)
    c1 = model.Os(packet) + model.latency(packet, P)
    c2 = model.Or(packet) + model.Ur(packet)
    return c1 + (P - 1) * i * model.gr(packet) + c2


@formula("bcast", ("binomial_tree", "binomial_tree_segmented"), "cluster",
         "paper 000 eq. 2: (k-1)(ceil(log2 P/2) gs + Or + Ur) + ceil(log2 P)(Os + L + Or + Ur)", segmented=True)
def _bcast_binomial(model: ClusterModel, c: Case) -> float:
    """The binomial broadcast of k packets, one after another: the rank P/2 (the root's first
    child) receives packet i while it forwards earlier ones, so each further packet costs it
    its ceil(log2 P/2) sends plus the receive costs Or + Ur (paper 000 Fig. 3)."""
    s, k = c.segments()
    if s > model.mtu:
        raise Unavailable(f"paper 000's cluster model prices packets of at most mtu = {model.mtu} bytes; "
                          f"this sends {s}-byte messages")
    P = c.procs
    hop = model.Os(s) + model.latency(s, P) + model.Or(s) + model.Ur(s)
    return (k - 1) * (ceil_log2(math.ceil(P / 2)) * model.gs(s) + model.Or(s) + model.Ur(s)) + ceil_log2(P) * hop
