"""colltune's algorithms in the MPI libraries' terms: Open MPI coll/tuned numbers and MPICH names.

Each registry algorithm maps to the library's nearest equivalent.  ``exact=False`` marks a
mapping that is only the closest the library has; its ``note`` says what differs, and the export
repeats it.  Every registry algorithm has an entry in both maps: importing this module checks it.

Open MPI numbers are those of Open MPI 5.0 (``ompi_info --param coll tuned --level 9`` lists them);
MPICH names are the selection-tree containers of MPICH 5.0 (``MPIR_<Coll>_intra_<name>``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from colltune.algorithms import REGISTRY
from colltune.tune.promises import Promises


@dataclass(frozen=True)
class OpenMPIAlgorithm:
    """A coll/tuned algorithm: its number, and how colltune's parameters fill a rule's
    fan-in/out, segment size and (rule file version 2) maximum requests."""

    number: int
    name: str
    exact: bool = True
    note: str = ""
    faninout: int = 0
    segsize_from: str | None = None
    max_requests_from: str | None = None


@dataclass(frozen=True)
class MPICHAlgorithm:
    """An MPICH selection container (``algorithm=MPIR_<Coll>_intra_<name>``) and its fixed
    parameters; ``chunk_from`` names the colltune parameter that gives ``chunk_size``, and
    ``k_from`` the one that gives ``k`` (``procs`` for the block's largest process count - 1).
    ``pow2_only`` names the container MPICH must use instead on a process count that is not a
    power of two (where the algorithm asserts)."""

    name: str
    exact: bool = True
    note: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    chunk_from: str | None = None
    k_from: str | None = None
    pow2_only: str | None = None


#: Open MPI's collective ids (``COLLTYPE`` in coll_base_functions.h) for the classic rules file.
OPENMPI_IDS = {"allgather": 0, "allreduce": 2, "alltoall": 3, "barrier": 6, "bcast": 7, "gather": 9,
               "reduce": 11, "scatter": 15}

#: The collectives coll/han of Open MPI 5.0 takes on communicators that span nodes
#: (``mca_coll_han_is_coll_dynamic_implemented``, ``coll_han_dynamic.c``; not alltoall).
HAN_COLLECTIVES = ("allgather", "allreduce", "barrier", "bcast", "gather", "reduce", "scatter")
#: coll/han's component numbers (``COMPONENT_T``, ``coll_han_dynamic.h``) of the two it may run
#: on the whole communicator.
HAN_COMPONENTS = {"tuned": 3, "han": 6}


def han_module_variable(collective: str) -> str:
    """The MCA variable naming the component coll/han runs ``collective`` with on the whole
    communicator (its ``global_communicator`` level)."""
    return f"coll_han_{collective}_dynamic_global_communicator_module"


#: coll/tuned algorithm numbers a rules file may name for a reduction: a rules file cannot tell a
#: non-commutative operation, so only those that give MPI's rank-order result for one too.  From Open
#: MPI 5's coll_base_reduce.c and coll_base_allreduce.c: linear (1) and in-order binary (6) reduce
#: combine in rank order, Rabenseifner's reduce (7) and allreduce (6) fall back to the linear
#: algorithm for a non-commutative operation, recursive doubling (3) orders each pair, basic linear
#: (1) and nonoverlapping (2) allreduce reduce through these same rules; chain, pipeline, binary,
#: binomial and k-nomial reduce, the two ring allreduces and allgather-reduce do not (Open MPI 5.0.11
#: gave wrong results from binomial reduce and segmented-ring allreduce in this project's tests).
OPENMPI_ANY_OPERATION = {"reduce": frozenset({1, 6, 7}), "allreduce": frozenset({1, 2, 3, 6})}
#: Collectives that Open MPI sizes on every rank from an argument MPI reads only at the root: the
#: promise (a field of :class:`~colltune.tune.promises.Promises`) without which a rules file must leave
#: them to Open MPI's fixed rules, and why.  Open MPI 5's coll_tuned_decision_dynamic.c sizes a scatter
#: on every rank as the size of that rank's send type times its send count times the communicator size.
OPENMPI_ROOT_SIZED = {"scatter": ("uniform_scatter", ("Open MPI sizes a scatter from each rank's send count, which "
                                                      "MPI reads only at the root, so the ranks could pick different "
                                                      "algorithms"))}


def openmpi_unpromised(collective: str, promises: Promises) -> tuple[str, str] | None:
    """``(promise, why)`` where Open MPI sizes ``collective`` from an argument MPI reads only at the
    root (:data:`OPENMPI_ROOT_SIZED`) and the program does not make ``promise``; else None."""
    promise, why = OPENMPI_ROOT_SIZED.get(collective, ("", ""))
    return (promise, why) if promise and not getattr(promises, promise) else None


def openmpi_rule_problem(collective: str, number: int, promises: Promises | None = None) -> str | None:
    """Why a rules file must not name coll/tuned algorithm ``number`` for ``collective`` (None if it
    may; 0, Open MPI's fixed decision, always may): :data:`OPENMPI_ROOT_SIZED` and
    :data:`OPENMPI_ANY_OPERATION`, each unless the program ``promises`` what makes it safe (the
    user says so: ``colltune tune --uniform-scatter``, ``--commutative``)."""
    promises = promises or Promises()
    if number == 0:
        return None
    unpromised = openmpi_unpromised(collective, promises)
    if unpromised:
        return unpromised[1]
    if not promises.commutative and number not in OPENMPI_ANY_OPERATION.get(collective, frozenset({number})):
        return ("it combines out of rank order for a non-commutative operation, which a rules file cannot "
                "tell from a commutative one")
    return None


_O = OpenMPIAlgorithm
_NOT_TUNED = "coll/tuned has no hierarchical algorithm; this is its network level's default"
_ONLY_LINEAR = "Open MPI's basic linear algorithm"
OPENMPI: dict[tuple[str, str], OpenMPIAlgorithm] = {
    ("bcast", "flat_tree"): _O(1, "basic_linear"),
    ("bcast", "flat_tree_rendezvous"): _O(1, "basic_linear", False, "no rendezvous step"),
    ("bcast", "flat_tree_segmented"): _O(1, "basic_linear", False, "basic linear does not segment"),
    ("bcast", "chain"): _O(2, "chain", faninout=1),
    ("bcast", "chain_rendezvous"): _O(2, "chain", False, "no rendezvous step", faninout=1),
    ("bcast", "chain_segmented"): _O(3, "pipeline", segsize_from="segment_size"),
    ("bcast", "binary_tree"): _O(5, "binary_tree"),
    ("bcast", "binomial_tree"): _O(6, "binomial"),
    ("bcast", "binomial_tree_rendezvous"): _O(6, "binomial", False, "no rendezvous step"),
    ("bcast", "binomial_tree_segmented"): _O(6, "binomial", segsize_from="segment_size"),
    ("bcast", "knomial_tree"): _O(7, "knomial", False, "the radix is the MCA parameter "
                                  "coll_tuned_bcast_algorithm_knomial_radix, not the rule's"),
    ("bcast", "scatter_recursive_doubling_allgather"): _O(8, "scatter_allgather"),
    ("bcast", "scatter_ring_allgather"): _O(9, "scatter_allgather_ring"),
    ("bcast", "symmetric_async"): _O(9, "scatter_allgather_ring", False,
                                     "pieces are forwarded by a ring, not directly to every rank"),
    ("bcast", "given_tree"): _O(6, "binomial", False, "a given tree cannot be expressed"),
    ("scatter", "flat_tree"): _O(1, "basic_linear"),
    ("scatter", "chain"): _O(2, "binomial", False, "no chain scatter; binomial also forwards combined blocks"),
    ("scatter", "chain_pipelined"): _O(1, "basic_linear", False, "no pipelined chain; " + _ONLY_LINEAR),
    ("scatter", "binomial_tree"): _O(2, "binomial"),
    ("scatter", "given_tree"): _O(2, "binomial", False, "a given tree cannot be expressed"),
    ("gather", "flat_tree"): _O(1, "basic_linear"),
    ("gather", "binomial_tree"): _O(2, "binomial"),
    ("gather", "linear_synchronized"): _O(3, "linear_sync"),
    ("gather", "coordinated"): _O(3, "linear_sync", False, "senders are synchronised one by one, not in windows"),
    ("gather", "given_tree"): _O(2, "binomial", False, "a given tree cannot be expressed"),
    ("allgather", "ring"): _O(4, "ring"),
    ("allgather", "recursive_doubling"): _O(3, "recursive_doubling"),
    ("allgather", "bruck"): _O(2, "bruck"),
    ("allgather", "direct"): _O(4, "ring", False, "no direct exchange; ring moves the same bytes per rank"),
    ("allgather", "gather_bcast"): _O(1, "linear"),
    ("alltoall", "direct"): _O(1, "linear", False, "Open MPI rotates the order of peers"),
    ("alltoall", "direct_rotated"): _O(1, "linear"),
    ("alltoall", "pairwise_exchange"): _O(2, "pairwise"),
    ("alltoall", "recv_all_xor_sends"): _O(2, "pairwise", False, "pairs by rotation, not by XOR"),
    ("alltoall", "bruck"): _O(3, "modified_bruck"),
    ("alltoall", "linear_throttled"): _O(4, "linear_sync", max_requests_from="max_outstanding"),
    ("reduce", "flat_tree"): _O(1, "linear"),
    ("reduce", "binomial_tree"): _O(5, "binomial"),
    ("reduce", "chain"): _O(2, "chain", faninout=1),
    ("reduce", "chain_segmented"): _O(3, "pipeline", segsize_from="segment_size"),
    ("reduce", "reduce_scatter_gather"): _O(7, "rabenseifner"),
    ("reduce", "given_tree"): _O(5, "binomial", False, "a given tree cannot be expressed"),
    ("allreduce", "reduce_bcast"): _O(2, "nonoverlapping"),
    ("allreduce", "recursive_doubling"): _O(3, "recursive_doubling"),
    ("allreduce", "ring"): _O(5, "segmented_ring", segsize_from="segment_size"),
    ("allreduce", "reduce_scatter_allgather"): _O(6, "rabenseifner"),
    ("barrier", "linear"): _O(1, "linear"),
    ("barrier", "dissemination"): _O(4, "bruck"),
    ("barrier", "tree"): _O(6, "tree"),
    ("barrier", "recursive_doubling"): _O(3, "recursive_doubling"),
    **{(c, "hierarchical"): _O(n, name, False, _NOT_TUNED) for c, n, name in (
        ("bcast", 6, "binomial"), ("scatter", 2, "binomial"), ("gather", 2, "binomial"), ("allgather", 4, "ring"),
        ("alltoall", 2, "pairwise"), ("reduce", 5, "binomial"), ("allreduce", 3, "recursive_doubling"),
        ("barrier", 4, "bruck"))},
}

_M = MPICHAlgorithm
# is_non_blocking 1 (MPICH's default, MPIR_CVAR_BCAST_IS_NON_BLOCKING): the tree broadcasts post an
# MPI_Isend to every child and wait for them all, as colltune's k-ary tree schedules do; with 0 they
# send to one child after the other, blocking (bcast_intra_tree.c), as MPICH's binomial broadcast and
# colltune's binomial trees do (colltune.algorithms.bcast.send_to_children).
# recv_pre_posted 1: the pipelined tree posts the receives of all chunks at once, as the segmented
# schedules do (with 0 it keeps three posted; bcast_intra_pipelined_tree.c).
_KARY = {"tree_type": "kary", "is_non_blocking": 1, "topo_overhead": 0, "topo_diff_groups": 0,
         "topo_diff_switches": 0, "topo_same_switches": 0}
_PIPE = {"tree_type": "kary", "is_non_blocking": 1, "recv_pre_posted": 1}
_ONLY_BINOMIAL = "MPICH has only a binomial {} in its selection tree"
_SMP = "MPICH's smp composition chooses the algorithm of each level itself"
_NO_SMP = "MPICH has no hierarchical {} in its selection tree"
MPICH: dict[tuple[str, str], MPICHAlgorithm] = {
    ("bcast", "flat_tree"): _M("tree", params={**_KARY}, k_from="procs"),
    ("bcast", "flat_tree_rendezvous"): _M("tree", False, "no rendezvous step", {**_KARY}, k_from="procs"),
    ("bcast", "flat_tree_segmented"): _M("pipelined_tree", params={**_PIPE}, chunk_from="segment_size",
                                         k_from="procs"),
    ("bcast", "chain"): _M("tree", params={**_KARY, "k": 1}),
    ("bcast", "chain_rendezvous"): _M("tree", False, "no rendezvous step", {**_KARY, "k": 1}),
    ("bcast", "chain_segmented"): _M("pipelined_tree", params={**_PIPE, "k": 1}, chunk_from="segment_size"),
    ("bcast", "binary_tree"): _M("tree", params={**_KARY, "k": 2}),
    ("bcast", "binomial_tree"): _M("binomial"),
    ("bcast", "binomial_tree_rendezvous"): _M("binomial", False, "no rendezvous step"),
    ("bcast", "binomial_tree_segmented"): _M("pipelined_tree", params={**_PIPE, "tree_type": "knomial_1", "k": 2},
                                             chunk_from="segment_size"),
    ("bcast", "knomial_tree"): _M("tree", params={**_KARY, "tree_type": "knomial_1"}, k_from="radix"),
    ("bcast", "scatter_recursive_doubling_allgather"): _M("scatter_recursive_doubling_allgather",
                                                          pow2_only="scatter_ring_allgather"),
    ("bcast", "scatter_ring_allgather"): _M("scatter_ring_allgather"),
    ("bcast", "symmetric_async"): _M("scatter_ring_allgather", False,
                                     "pieces are forwarded by a ring, not directly to every rank"),
    ("bcast", "given_tree"): _M("binomial", False, "a given tree cannot be expressed"),
    **{("scatter", a): _M("binomial", a == "binomial_tree", "" if a == "binomial_tree" else
                          _ONLY_BINOMIAL.format("scatter"))
       for a in ("flat_tree", "chain", "chain_pipelined", "binomial_tree", "given_tree")},
    **{("gather", a): _M("binomial", a == "binomial_tree", "" if a == "binomial_tree" else
                         _ONLY_BINOMIAL.format("gather"))
       for a in ("flat_tree", "binomial_tree", "linear_synchronized", "coordinated", "given_tree")},
    ("allgather", "ring"): _M("ring"),
    ("allgather", "recursive_doubling"): _M("recursive_doubling", pow2_only="brucks"),
    ("allgather", "bruck"): _M("brucks"),
    ("allgather", "direct"): _M("ring", False, "no direct exchange; ring moves the same bytes per rank"),
    ("allgather", "gather_bcast"): _M("ring", False, "no gather + broadcast allgather"),
    ("alltoall", "direct"): _M("scattered", False, "MPICH posts requests in batches of MPIR_CVAR_ALLTOALL_THROTTLE"),
    ("alltoall", "direct_rotated"): _M("scattered", False,
                                       "MPICH posts requests in batches of MPIR_CVAR_ALLTOALL_THROTTLE"),
    ("alltoall", "linear_throttled"): _M("scattered", False, "the batch size is MPIR_CVAR_ALLTOALL_THROTTLE, "
                                         "not the rule's max_outstanding"),
    ("alltoall", "pairwise_exchange"): _M("pairwise"),
    ("alltoall", "recv_all_xor_sends"): _M("pairwise", False, "pairs by XOR only on 2^k ranks"),
    ("alltoall", "bruck"): _M("brucks"),
    ("reduce", "flat_tree"): _M("binomial", False, "no linear reduce in the selection tree"),
    ("reduce", "binomial_tree"): _M("binomial"),
    ("reduce", "chain"): _M("binomial", False, "no chain reduce in the selection tree"),
    ("reduce", "chain_segmented"): _M("binomial", False, "no pipelined reduce in the selection tree"),
    ("reduce", "reduce_scatter_gather"): _M("reduce_scatter_gather"),
    ("reduce", "given_tree"): _M("binomial", False, "a given tree cannot be expressed"),
    ("allreduce", "reduce_bcast"): _M("recursive_doubling", False, "no reduce + broadcast allreduce"),
    ("allreduce", "recursive_doubling"): _M("recursive_doubling"),
    ("allreduce", "ring"): _M("ring", False, "MPICH's ring does not segment"),
    ("allreduce", "reduce_scatter_allgather"): _M("reduce_scatter_allgather"),
    ("barrier", "linear"): _M("k_dissemination", False, "no linear barrier in the selection tree", {"k": 2}),
    ("barrier", "dissemination"): _M("k_dissemination", params={"k": 2}),
    ("barrier", "tree"): _M("k_dissemination", False, "no tree barrier in the selection tree", {"k": 2}),
    ("barrier", "recursive_doubling"): _M("k_dissemination", False, "dissemination has the same rounds on 2^k ranks", {"k": 2}),
    **{(c, "hierarchical"): _M("smp", False, _SMP) for c in ("bcast", "reduce", "allreduce", "barrier")},
    ("scatter", "hierarchical"): _M("binomial", False, _NO_SMP.format("scatter")),
    ("gather", "hierarchical"): _M("binomial", False, _NO_SMP.format("gather")),
    ("allgather", "hierarchical"): _M("ring", False, _NO_SMP.format("allgather")),
    ("alltoall", "hierarchical"): _M("pairwise", False, _NO_SMP.format("all-to-all")),
}


def _check_complete() -> None:
    names = {(a.collective, a.name) for a in REGISTRY}
    for label, table in (("Open MPI", OPENMPI), ("MPICH", MPICH)):
        missing, extra = names - set(table), set(table) - names
        if missing or extra:
            raise RuntimeError(f"the {label} map does not match the registry: missing {sorted(missing)}, "
                               f"unknown {sorted(extra)}")


_check_complete()
