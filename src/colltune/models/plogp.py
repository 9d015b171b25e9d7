"""pLogP costs: paper 003 Tables 1-3 and the contention ratio gamma (section 5); paper 001 eq. 18-19.

pLogP prices a message of m bytes as ``g(m) + L`` end to end, and a sender starts one every
``g(m)``.  m is the block size in bytes, s the segment size and k = ceil(m/s) the number of
segments.  The formulas are transcribed as the papers print them, with the unidirectional
parameters (the ones paper 003 measured, and the ones paper 001's PlogP estimates use); paper
003 writes the binary tree's cost as an upper bound, and its binomial costs are exact when P is
a power of two.  Paper 001 derives eq. 18-19 for P = 2^D ranks exchanging with XOR partners.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import PLogP, PLogPTable, ceil_log2, floor_log2, is_power_of_two

T1 = "paper 003 Table 1"
T2 = "paper 003 Table 2"


def _uni(p: PLogP) -> PLogPTable:
    return p.unidirectional


@formula("bcast", "flat_tree", "plogp", f"{T1} (Flat Tree): (P-1) g(m) + L")
@formula("scatter", "flat_tree", "plogp", f"{T2} (Flat Tree): (P-1) g(m) + L")
def _flat(p: PLogP, c: Case) -> float:
    return (c.procs - 1) * _uni(p).g(c.size) + p.L


@formula("bcast", "flat_tree_rendezvous", "plogp", f"{T1} (Flat Tree Rendezvous): (P-1) g(m) + 2 g(1) + 3 L")
def _flat_rendezvous(p: PLogP, c: Case) -> float:
    g = _uni(p).g
    return (c.procs - 1) * g(c.size) + 2 * g(1) + 3 * p.L


@formula("bcast", "flat_tree_segmented", "plogp", f"{T1} (Segmented Flat Tree): (P-1) g(s) k + L", segmented=True)
def _flat_segmented(p: PLogP, c: Case) -> float:
    s, k = c.segments()
    return (c.procs - 1) * _uni(p).g(s) * k + p.L


@formula("bcast", "chain", "plogp", f"{T1} (Chain): (P-1)(g(m) + L)")
@formula("scatter", "chain_pipelined", "plogp", f"{T2} (Pipelined Chain): (P-1)(g(m) + L)")
def _chain(p: PLogP, c: Case) -> float:
    return (c.procs - 1) * (_uni(p).g(c.size) + p.L)


@formula("bcast", "chain_rendezvous", "plogp", f"{T1} (Chain Rendezvous): (P-1)(g(m) + 2 g(1) + 3 L)")
def _chain_rendezvous(p: PLogP, c: Case) -> float:
    g = _uni(p).g
    return (c.procs - 1) * (g(c.size) + 2 * g(1) + 3 * p.L)


@formula("bcast", "chain_segmented", "plogp", f"{T1} (Seg. Chain (Pipeline)): (P-1)(g(s) + L) + g(s)(k-1)", segmented=True)
def _chain_segmented(p: PLogP, c: Case) -> float:
    s, k = c.segments()
    gs = _uni(p).g(s)
    return (c.procs - 1) * (gs + p.L) + gs * (k - 1)


@formula("bcast", "binary_tree", "plogp", f"{T1} (Binary Tree), an upper bound: ceil(log2 P)(2 g(m) + L)")
def _binary(p: PLogP, c: Case) -> float:
    return ceil_log2(c.procs) * (2 * _uni(p).g(c.size) + p.L)


@formula("bcast", "binomial_tree", "plogp", f"{T1} (Binomial Tree): floor(log2 P) g(m) + ceil(log2 P) L")
def _binomial(p: PLogP, c: Case) -> float:
    return floor_log2(c.procs) * _uni(p).g(c.size) + ceil_log2(c.procs) * p.L


@formula("bcast", "binomial_tree_rendezvous", "plogp",
         f"{T1} (Binomial Tree Rendezvous): floor(log2 P) g(m) + ceil(log2 P)(2 g(1) + 3 L)")
def _binomial_rendezvous(p: PLogP, c: Case) -> float:
    g = _uni(p).g
    return floor_log2(c.procs) * g(c.size) + ceil_log2(c.procs) * (2 * g(1) + 3 * p.L)


@formula("bcast", "binomial_tree_segmented", "plogp",
         f"{T1} (Seg. Binomial Tree): floor(log2 P) g(s) k + ceil(log2 P) L", segmented=True)
def _binomial_segmented(p: PLogP, c: Case) -> float:
    s, k = c.segments()
    return floor_log2(c.procs) * _uni(p).g(s) * k + ceil_log2(c.procs) * p.L


@formula("scatter", "chain", "plogp", f"{T2} (Chain): sum_(j=1..P-1) g(j m) + (P-1) L")
def _scatter_chain(p: PLogP, c: Case) -> float:
    g = _uni(p).g
    return sum(g(j * c.size) for j in range(1, c.procs)) + (c.procs - 1) * p.L


@formula("scatter", "binomial_tree", "plogp",
         f"{T2} (Binomial Tree): sum_(j=0..ceil(log2 P)-1) g(2^j m) + ceil(log2 P) L")
def _scatter_binomial(p: PLogP, c: Case) -> float:
    g = _uni(p).g
    lg = ceil_log2(c.procs)
    return sum(g(2**j * c.size) for j in range(lg)) + lg * p.L


def alltoall_bounds(p: PLogP, procs: int, m: int) -> tuple[float, float]:
    """Paper 003 Table 3: the (lower, upper) bounds of an all-to-all of ``m`` bytes per pair, in seconds.

    Lower = (P-1) os(m) + (P-1) or(m) + L: a node hands each message to its interface as soon
    as the previous send returned.  Upper = (P-1) g(m) + (P-1) or(m) + L: contention serialises
    its sends at the gap.
    """
    t = _uni(p)
    if t.os is None or t.or_ is None:
        raise Unavailable("paper 003 Table 3 needs the unidirectional os(m) and or(m) in the pLogP parameters")
    n = procs - 1
    recv = n * t.or_(m) + p.L
    return n * t.os(m) + recv, n * t.g(m) + recv


@formula("alltoall", ("direct", "direct_rotated"), "plogp",
         "paper 003 section 5 and Table 3: Lower + (Upper - Lower) gamma")
def _alltoall_contention(p: PLogP, c: Case) -> float:
    if p.contention_gamma is None:
        raise Unavailable("paper 003's all-to-all cost needs the contention ratio gamma (plogp.contention_gamma); "
                          "fit it from measured times with colltune.models.fit_contention_ratio")
    lower, upper = alltoall_bounds(p, c.procs, c.size)
    return lower + (upper - lower) * p.contention_gamma


def fit_contention_ratio(lower: Sequence[float], upper: Sequence[float], measured: Sequence[float],
                         ) -> tuple[float, np.ndarray]:
    """Least-squares gamma of paper 003 section 5 from measured all-to-all times (seconds).

    Fits ``measured - lower = gamma (upper - lower)`` over all points (each point one (P, m) with
    its Table 3 bounds); returns gamma and the residuals ``measured - (lower + (upper - lower)
    gamma)`` in seconds.
    """
    lo, up, t = (np.asarray(x, dtype=float) for x in (lower, upper, measured))
    if not (lo.shape == up.shape == t.shape) or lo.ndim != 1 or lo.size == 0:
        raise ValueError("lower, upper and measured must be equally long, non-empty sequences")
    span = up - lo
    if not np.any(span > 0):
        raise ValueError("the upper bound never exceeds the lower one: gamma is undetermined")
    (gamma,), *_ = np.linalg.lstsq(span[:, None], t - lo, rcond=None)
    return float(gamma), t - (lo + span * gamma)


def _xor_pattern(c: Case) -> None:
    if not is_power_of_two(c.procs):
        raise Unavailable(f"paper 001 derives this cost for P = 2^D ranks (XOR partners); P = {c.procs}")


@formula("alltoall", "pairwise_exchange", "plogp", "paper 001 eq. 18 (Alltoall_A): (P-1)(g(m) + L)")
def _alltoall_a(p: PLogP, c: Case) -> float:
    _xor_pattern(c)
    return (c.procs - 1) * (_uni(p).g(c.size) + p.L)


@formula("alltoall", "recv_all_xor_sends", "plogp", "paper 001 eq. 19 (Alltoall_B): (P-1) g(m) + L")
def _alltoall_b(p: PLogP, c: Case) -> float:
    _xor_pattern(c)
    return (c.procs - 1) * _uni(p).g(c.size) + p.L
