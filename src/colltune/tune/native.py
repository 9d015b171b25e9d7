"""What ``native`` stands for when the tuner predicts it: the MPI library's default choice.

``native`` is the MPI library's own collective.  A model or a simulation cannot time it
directly, so the tuner prices it as the registry algorithm the library would pick by default:
MPICH's default selection (the tree compiled into MPICH 5.0, :data:`NATIVE_SOURCE`), counts in
one-byte elements.  Where ranks share hosts, MPICH's ch4 device first picks a composition
(:func:`native_on_hosts`, ``maint/tuning/coll/ch4/generic.json``): broadcast, reduce, allreduce
and barrier then run among one leader per node with shared memory within the nodes.
The measuring tuner (``--method measure``) times ``native`` itself instead.
"""

from __future__ import annotations

from typing import Any

#: The name a table's rule gives the MPI library's own choice.
NATIVE = "native"

#: The source quoted in tables and docs for :func:`native_equivalent`.
NATIVE_SOURCE = ("MPICH 5.0's built-in selection tree (bcast: binomial up to 12288 B or below 8 ranks, then "
                 "scatter + recursive-doubling allgather up to 524288 B on 2^k ranks, else scatter + ring allgather; "
                 "allgather: recursive doubling below 524288 B in total on 2^k ranks, Bruck below 81920 B, else ring; "
                 "alltoall: Bruck up to 256 B on 8+ ranks, scattered (MPIR_CVAR_ALLTOALL_THROTTLE=32) up to "
                 "32768 B, else pairwise; reduce: binomial up to 2048 B, else reduce-scatter + gather; allreduce: "
                 "recursive doubling up to 8 B, else reduce-scatter + allgather; gather, scatter: binomial; "
                 "barrier: dissemination)")


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _pof2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def native_equivalent(collective: str, procs: int, size: int) -> tuple[str, dict[str, Any]]:
    """The registry algorithm and parameters MPICH runs by default for ``collective`` on ``procs``
    ranks with ``size`` bytes per block (reductions counted as ``size`` one-byte elements)."""
    total = procs * size
    if collective == "bcast":
        if size <= 12288 or procs < 8:
            return "binomial_tree", {}
        if _pow2(procs) and size <= 524288:
            return "scatter_recursive_doubling_allgather", {}
        return "scatter_ring_allgather", {}
    if collective in ("scatter", "gather"):
        return "binomial_tree", {}
    if collective == "allgather":
        if _pow2(procs):
            return ("recursive_doubling", {}) if total < 524288 else ("ring", {})
        return ("bruck", {}) if total < 81920 else ("ring", {})
    if collective == "alltoall":
        if size <= 256 and procs >= 8:
            return "bruck", {}
        if size <= 32768:
            return "linear_throttled", {"max_outstanding": 32}
        return "pairwise_exchange", {}
    if collective == "reduce":
        if size <= 2048 or size < _pof2_below(procs):
            return "binomial_tree", {}
        return "reduce_scatter_gather", {}
    if collective == "allreduce":
        if size <= 8 or size < _pof2_below(procs):
            return "recursive_doubling", {}
        return "reduce_scatter_allgather", {}
    if collective == "barrier":
        return "dissemination", {}
    raise ValueError(f"no native equivalent for {collective!r}")


def native_on_hosts(collective: str, hosts: tuple[int, ...], size: int) -> tuple[str, dict[str, Any]]:
    """What MPICH runs by default for ``collective`` on ranks on ``hosts`` (a host label per rank)
    with ``size`` bytes per block: where they span several hosts and some host holds several of
    them, the ch4 device's default composition (``maint/tuning/coll/ch4/generic.json``, its
    ``comm_size<8`` read as ``<= 8`` as MPICH's selection search reads it): a node-aware one for
    bcast (P <= 8 or below 12288 B; on 2^k ranks below 524288 B), reduce, allreduce (commutative
    operations, as the tuner times them) and barrier, as colltune's ``hierarchical`` with MPICH's
    default among the H leaders (:func:`native_equivalent` at H ranks) and trees within the hosts;
    elsewhere the network-only composition, :func:`native_equivalent` on all ranks."""
    procs, count = len(hosts), len(set(hosts))
    flat = native_equivalent(collective, procs, size)
    if not 1 < count < procs:
        return flat
    if collective == "bcast" and not (procs <= 8 or size < 12288 or (_pow2(procs) and size < 524288)):
        return flat
    if collective not in ("bcast", "reduce", "allreduce", "barrier"):
        return flat
    return composition(collective, native_equivalent(collective, count, size)[0])


def native_placed(collective: str, procs: int, size: int,
                  hosts: tuple[int, ...] | None = None) -> tuple[str, dict[str, Any]]:
    """What MPICH runs by default for ``collective`` on ``procs`` ranks with ``size`` bytes per
    block: on ``hosts`` (a host label per rank) :func:`native_on_hosts`, without them (one rank per
    host) :func:`native_equivalent`."""
    return native_on_hosts(collective, hosts, size) if hosts is not None else native_equivalent(collective, procs, size)


def composition(collective: str, inter: str) -> tuple[str, dict[str, Any]]:
    """MPICH's node-aware composition (alpha) of ``collective`` as colltune's ``hierarchical``:
    ``inter`` among one leader per host, trees within the hosts (MPICH's shared-memory level)."""
    if collective == "allreduce":
        return "hierarchical", {"inter": inter, "intra_reduce": "binomial_tree", "intra_bcast": "binomial_tree"}
    if collective == "barrier":
        return "hierarchical", {"inter": inter, "intra": "tree"}
    return "hierarchical", {"inter": inter, "intra": "binomial_tree"}
