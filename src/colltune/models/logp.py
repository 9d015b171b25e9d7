"""Postal, LogP and LogGP costs.

Paper 000 eq. 1 prices the binomial broadcast of k packets, repeated packet by packet, in the
normalised LogP (Postal) model: ``B_k(p) = log2 p (k gs + L - gs)``, where L is the end-to-end
latency of one packet and gs the sender's gap.  In Postal terms gs is the send step and L is
lambda; in LogP terms gs = max(g, o) and the end-to-end latency is o + L + o.  colltune applies
it to ``binomial_tree`` (k = 1) and ``binomial_tree_segmented`` (k = ceil(m/s)), with
ceil(log2 P) rounds, the binomial tree's round count for any P (the paper's P = 16 is a power
of two).

LogGP (eager messages of at most S bytes; the LogGOPSim rules with O = 0): a message of s bytes
costs ``2o + L + (s-1) G`` end to end and a sender starts one every ``max(o, g + (s-1) G)``.
From these, colltune derives the flat tree ``(P-2) gap(m) + message(m)`` (the last of P-1
back-to-back sends) and the chain ``(P-1) message(m)`` (each rank forwards once it has received).
Rendezvous messages (m > S) have no closed form here.
"""

from __future__ import annotations

from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import LogGP, LogP, Postal, ceil_log2

EQ1 = "paper 000 eq. 1"


@formula("bcast", ("binomial_tree", "binomial_tree_segmented"), "postal",
         f"{EQ1} (normalised LogP): ceil(log2 P)(k step + lambda - step), k = ceil(m/s)", segmented=True)
def _postal_binomial(p: Postal, c: Case) -> float:
    return ceil_log2(c.procs) * (c.segments()[1] * p.step + p.lam - p.step)


@formula("bcast", ("binomial_tree", "binomial_tree_segmented"), "logp",
         f"{EQ1}: ceil(log2 P)(k gs + (2o + L) - gs) with gs = max(g, o), k = ceil(m/s)", segmented=True)
def _logp_binomial(p: LogP, c: Case) -> float:
    gs = max(p.g, p.o)
    return ceil_log2(c.procs) * (c.segments()[1] * gs + 2 * p.o + p.L - gs)


def _eager(p: LogGP, c: Case) -> None:
    if c.size > p.S:
        raise Unavailable(f"LogGP has no closed form for rendezvous messages (m = {c.size} > S = {p.S} bytes)")


@formula("bcast", "flat_tree", "loggp", "LogGP (Alexandrov et al. 1997), eager: (P-2) max(o, g + (m-1)G) "
                                        "+ 2o + L + (m-1)G")
def _loggp_flat(p: LogGP, c: Case) -> float:
    _eager(p, c)
    return (c.procs - 2) * p.gap(c.size) + p.message(c.size)


@formula("bcast", "chain", "loggp", "LogGP (Alexandrov et al. 1997), eager: (P-1)(2o + L + (m-1)G)")
def _loggp_chain(p: LogGP, c: Case) -> float:
    _eager(p, c)
    return (c.procs - 1) * p.message(c.size)
