"""PlogPT (paper 001 section III): the switch predicate P_S (eq. 4-5), the buffer predicate P_B
(eq. 8-9), the retransmission count N_RTO (eq. 24) and the all-to-all costs eq. 23 and 25.

In the XOR exchange of ``P = 2^D`` ranks, the steps of height h are the 2^(h-1) partners
r XOR i with 2^(h-1) <= i < 2^h; at height h all 2^(h-1) leaves below an edge send through it at
once, so each flow gets ``b(h) / 2^(h-1)`` (eq. 7) and a message of m bytes lasts
``2^(h-1) b(1)/b(h) g(m)`` (eq. 6, 22).  Bandwidths are in bytes per second, delays in seconds.
"""

from __future__ import annotations

import math

from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import PlogPT, TreeLevels, is_power_of_two


def switch_between(tree: TreeLevels, h: int, h2: int, eps_s: float) -> bool:
    """P_S(h, h') of eq. 5: whether switches lie between heights h and h' (1-based).

    True when ``log(2^(h'-h) b(h)/b(h'))^2 + log(d(h)/d(h'))^2 > eps_s``; the delay term is left
    out when the tree has no d(h).
    """
    b, d = tree.b, tree.d
    value = math.log(2 ** (h2 - h) * b[h - 1] / b[h2 - 1]) ** 2
    if d is not None:
        value += math.log(d[h - 1] / d[h2 - 1]) ** 2
    return value > eps_s


def flow_bandwidth(tree: TreeLevels, h: int) -> float:
    """b_c at height h in the XOR pattern (eq. 7): the edge's b(h) shared by its 2^(h-1) flows, B/s."""
    return tree.b[h - 1] / 2 ** (h - 1)


def buffer_filled(tree: TreeLevels, h: int, m: int) -> bool:
    """P_B of eq. 8-9 for a message of ``m`` bytes ending at height h: B(C) = d(h) b_c < m."""
    if tree.d is None:
        raise Unavailable("the RTO rule of paper 001 needs the buffer delays d(h)")
    return tree.d[h - 1] * flow_bandwidth(tree, h) < m


def rto_count(model: PlogPT, procs: int, m: int) -> int:
    """N_RTO (eq. 24): the heights h < D at which the exchange switches to height h+1 across a
    switch (P_S(h, h+1)) while the last height-h message overflowed the buffers (P_B)."""
    tree = model.bidirectional
    D = _depth(model, procs)
    return sum(1 for h in range(1, D) if switch_between(tree, h, h + 1, model.eps_s) and buffer_filled(tree, h, m))


def _depth(model: PlogPT, procs: int) -> int:
    if not is_power_of_two(procs):
        raise Unavailable(f"PlogPT's all-to-all costs hold for P = 2^D ranks; P = {procs}")
    D = procs.bit_length() - 1
    if D > model.bidirectional.depth:
        raise Unavailable(f"P = {procs} needs a tree of depth {D}; the profile's has depth {model.bidirectional.depth}")
    return D


def _transfer(model: PlogPT, c: Case) -> float:
    """sum_(h=1..D) 2^(h-1) (2^(h-1) b(1)/b(h) g(m)), the sending part of eq. 23 and 25."""
    if model.g is None or model.L is None:
        missing = " and ".join(n for n, v in (("g", model.g), ("L", model.L)) if v is None)
        raise Unavailable(f"PlogPT's all-to-all costs need {missing}; give them in the profile or with --set")
    b = model.bidirectional.b
    g = model.g(c.size)
    return sum(2 ** (h - 1) * (2 ** (h - 1) * b[0] / b[h - 1] * g) for h in range(1, _depth(model, c.procs) + 1))


@formula("alltoall", "pairwise_exchange", "plogpt", "paper 001 eq. 23 (Alltoall_A): sum_h 4^(h-1) b(1)/b(h) g(m) "
                                                    "+ (P-1) L")
def _alltoall_a(model: PlogPT, c: Case) -> float:
    return _transfer(model, c) + (c.procs - 1) * model.L  # type: ignore[operator]


@formula("alltoall", "recv_all_xor_sends", "plogpt", "paper 001 eq. 25 (Alltoall_B): sum_h 4^(h-1) b(1)/b(h) g(m) "
                                                     "+ L + N_RTO T_RTO")
def _alltoall_b(model: PlogPT, c: Case) -> float:
    return _transfer(model, c) + model.L + rto_count(model, c.procs, c.size) * model.t_rto  # type: ignore[operator]
