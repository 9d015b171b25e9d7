"""Hockney (linear model) costs: alpha + beta m per message, gamma m per reduced byte.

Sources: paper 002 (eq. 2 linear broadcast, eq. 4-5 symmetric broadcast, section 2 binomial);
Thakur, Rabenseifner and Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 2005 (TRG below) for the usual algorithms; Pjesivac-Grbovic et al., "Performance
analysis of MPI collective operations", Cluster Computing 2007 (PG below) for chains and
pipelines.  m is the block size in bytes (see :mod:`colltune.collectives`), P the process count,
lg = ceil(log2 P).  TRG derive their costs for P a power of two; where colltune's schedule for
other P takes more steps than the formula says (recursive doubling), the formula is unavailable
for those P.
"""

from __future__ import annotations

from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import Hockney, ceil_log2, is_power_of_two


def _gamma(h: Hockney) -> float:
    if h.gamma is None:
        raise Unavailable("the Hockney formula of a reduction needs gamma (compute time per byte); "
                          "give it in the profile or with --set gamma=SECONDS_PER_BYTE")
    return h.gamma


def _power_of_two(c: Case, source: str) -> None:
    if not is_power_of_two(c.procs):
        raise Unavailable(f"{source} holds for P a power of two; P = {c.procs}")


@formula("bcast", "flat_tree", "hockney", "paper 002 eq. 2: (P-1)(alpha + beta m)")
@formula("scatter", "flat_tree", "hockney", "PG 2007 linear: (P-1)(alpha + beta m)")
@formula("gather", "flat_tree", "hockney", "PG 2007 linear: (P-1)(alpha + beta m)")
@formula("bcast", "chain", "hockney", "PG 2007 chain: (P-1)(alpha + beta m)")
@formula("allgather", "direct", "hockney", "P-1 messages of m bytes per rank: (P-1)(alpha + beta m)")
@formula("allgather", "ring", "hockney", "TRG 2005 ring: (P-1) alpha + (P-1) m beta")
def _linear(h: Hockney, c: Case) -> float:
    return (c.procs - 1) * h.message(c.size)


@formula("bcast", "binomial_tree", "hockney", "paper 002 section 2; TRG 2005: ceil(log2 P)(alpha + beta m)")
def _bcast_binomial(h: Hockney, c: Case) -> float:
    return ceil_log2(c.procs) * h.message(c.size)


@formula("bcast", "chain_segmented", "hockney", "PG 2007 pipeline: (P + k - 2)(alpha + beta s), k = ceil(m/s)", segmented=True)
def _bcast_pipeline(h: Hockney, c: Case) -> float:
    s, k = c.segments()
    return (c.procs + k - 2) * h.message(s)


@formula("bcast", "symmetric_async", "hockney",
         "paper 002 eq. 5 with p = P-1 destinations: 2 alpha + beta m (2 - 1/p); eq. 4 when sent whole")
def _bcast_symmetric(h: Hockney, c: Case) -> float:
    p = c.procs - 1
    if c.size < c.params["min_split_size"] or p == 1:
        # Whole message to every destination at once (paper 002 section 3, small messages; for a
        # single destination there is no second phase): eq. 4's overlapped sends of p m bytes.
        return h.alpha + p * c.size * h.beta
    return 2 * h.alpha + c.size * h.beta * (2 - 1 / p)


@formula("bcast", "scatter_recursive_doubling_allgather", "hockney",
         "TRG 2005 section 4.1: 2 log2 P alpha + 2 (P-1)/P m beta")
def _bcast_scatter_rd(h: Hockney, c: Case) -> float:
    _power_of_two(c, "TRG's scatter + recursive-doubling cost")
    P = c.procs
    return 2 * ceil_log2(P) * h.alpha + 2 * (P - 1) / P * c.size * h.beta


@formula("bcast", "scatter_ring_allgather", "hockney",
         "TRG 2005 section 4.1: (log2 P + P - 1) alpha + 2 (P-1)/P m beta")
def _bcast_scatter_ring(h: Hockney, c: Case) -> float:
    P = c.procs
    return (ceil_log2(P) + P - 1) * h.alpha + 2 * (P - 1) / P * c.size * h.beta


@formula("scatter", "binomial_tree", "hockney", "TRG 2005: log2 P alpha + (P-1) m beta")
@formula("gather", "binomial_tree", "hockney", "TRG 2005: log2 P alpha + (P-1) m beta")
@formula("allgather", "bruck", "hockney", "TRG 2005 (Bruck): ceil(log2 P) alpha + (P-1) m beta")
def _log_latency_linear_volume(h: Hockney, c: Case) -> float:
    return ceil_log2(c.procs) * h.alpha + (c.procs - 1) * c.size * h.beta


@formula("allgather", "recursive_doubling", "hockney", "TRG 2005: log2 P alpha + (P-1) m beta")
def _allgather_rd(h: Hockney, c: Case) -> float:
    _power_of_two(c, "TRG's recursive-doubling cost")
    return _log_latency_linear_volume(h, c)


@formula("allgather", "gather_bcast", "hockney",
         "TRG 2005 binomial gather + binomial broadcast of P m bytes: "
         "2 log2 P alpha + (P-1) m beta + log2 P P m beta")
def _allgather_gather_bcast(h: Hockney, c: Case) -> float:
    return _log_latency_linear_volume(h, c) + ceil_log2(c.procs) * h.message(c.procs * c.size)


@formula("alltoall", "pairwise_exchange", "hockney",
         "TRG 2005 pairwise exchange: one message of m bytes per step, P-1 steps (P steps for odd P)")
def _alltoall_pairwise(h: Hockney, c: Case) -> float:
    steps = c.procs - 1 if c.procs % 2 == 0 else c.procs
    return steps * h.message(c.size)


@formula("alltoall", "bruck", "hockney", "TRG 2005 (Bruck): log2 P alpha + (P m / 2) log2 P beta")
def _alltoall_bruck(h: Hockney, c: Case) -> float:
    _power_of_two(c, "TRG's Bruck all-to-all cost")
    lg = ceil_log2(c.procs)
    return lg * h.alpha + c.procs * c.size / 2 * lg * h.beta


@formula("reduce", "flat_tree", "hockney", "PG 2007 linear: (P-1)(alpha + beta m + gamma m)")
@formula("reduce", "chain", "hockney", "PG 2007 chain: (P-1)(alpha + beta m + gamma m)")
def _reduce_linear(h: Hockney, c: Case) -> float:
    return (c.procs - 1) * (h.message(c.size) + _gamma(h) * c.size)


@formula("reduce", "binomial_tree", "hockney", "TRG 2005: log2 P (alpha + beta m + gamma m)")
def _reduce_binomial(h: Hockney, c: Case) -> float:
    return ceil_log2(c.procs) * (h.message(c.size) + _gamma(h) * c.size)


@formula("reduce", "chain_segmented", "hockney",
         "PG 2007 pipeline: (P + k - 2)(alpha + beta s + gamma s), k = ceil(m/s)", segmented=True)
def _reduce_pipeline(h: Hockney, c: Case) -> float:
    s, k = c.segments()
    return (c.procs + k - 2) * (h.message(s) + _gamma(h) * s)


@formula("reduce", "reduce_scatter_gather", "hockney",
         "TRG 2005 (Rabenseifner reduce): 2 log2 P alpha + 2 (P-1)/P m beta + (P-1)/P m gamma")
@formula("allreduce", "reduce_scatter_allgather", "hockney",
         "TRG 2005 (Rabenseifner allreduce): 2 log2 P alpha + 2 (P-1)/P m beta + (P-1)/P m gamma")
def _rabenseifner(h: Hockney, c: Case) -> float:
    _power_of_two(c, "TRG's Rabenseifner cost")
    P, m = c.procs, c.size
    return 2 * ceil_log2(P) * h.alpha + (P - 1) / P * m * (2 * h.beta + _gamma(h))


@formula("allreduce", "recursive_doubling", "hockney", "TRG 2005: log2 P (alpha + beta m + gamma m)")
def _allreduce_rd(h: Hockney, c: Case) -> float:
    _power_of_two(c, "TRG's recursive-doubling cost")
    return _reduce_binomial(h, c)


@formula("allreduce", "ring", "hockney",
         "Patarasuk and Yuan 2009; TRG 2005: 2 (P-1) alpha + 2 (P-1)/P m beta + (P-1)/P m gamma")
def _allreduce_ring(h: Hockney, c: Case) -> float:
    P, m = c.procs, c.size
    return 2 * (P - 1) * h.alpha + (P - 1) / P * m * (2 * h.beta + _gamma(h))


@formula("allreduce", "reduce_bcast", "hockney",
         "TRG 2005 binomial reduce + binomial broadcast: log2 P (2 alpha + 2 beta m + gamma m)")
def _allreduce_reduce_bcast(h: Hockney, c: Case) -> float:
    return _reduce_binomial(h, c) + _bcast_binomial(h, c)


@formula("barrier", "dissemination", "hockney", "TRG 2005 (dissemination): ceil(log2 P) alpha")
def _barrier_dissemination(h: Hockney, c: Case) -> float:
    return ceil_log2(c.procs) * h.alpha
