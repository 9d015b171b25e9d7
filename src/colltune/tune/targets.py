"""Tuning for a target MPI library: its own algorithms are the candidates, each priced by a
registry schedule that does what the library does, and the export writes exactly what was decided.

``colltune tune --library mpich`` decides among the containers of MPICH 5's collective selection
(``MPIR_<Coll>_intra_<name>`` with the keys its selection JSON gives them) instead of among
colltune's algorithms; the table's rules name those containers and their parameters
(``DecisionTable.library`` is ``"mpich"``), and :func:`colltune.tune.export.mpich_json` writes
them as they are.  ``native`` stays MPICH's own default tree (:mod:`colltune.tune.native`).

Each :class:`LibraryAlgorithm` says which parameter values the tuner tries and which registry
algorithm, with which parameters, prices one value (:attr:`LibraryAlgorithm.equivalent`; see
:data:`MPICH_ALGORITHMS` for the list and :func:`catalogue_markdown` for the table in docs/tune.md).
Where MPICH runs a different algorithm than the container's name says (a precondition not met:
a power-of-two count, a count of at least the largest power of two below P), the equivalent is
the algorithm MPICH falls back to, and the export keeps MPICH's own guard.  Besides the MPIR
containers, the ch4 device's node-aware composition ``composition_alpha`` (bcast, reduce,
allreduce, barrier: one leader per node runs MPICH's own algorithm, shared memory within the
nodes) is a candidate, priced as colltune's ``hierarchical`` on the hosts the profile knows; the
export writes it in the device's composition file.  Containers and compositions with no schedule
yet (``k_brucks``, ``recexch_*``, ``recursive_multiplying``, ``tree`` allreduce,
``k_reduce_scatter_allgather``, ``k_dissemination`` with k > 2, the SMP ones, the multi-leader
compositions) are not candidates: :data:`MPICH_UNPRICED` lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from colltune.models import Unavailable
from colltune.tune.libraries import openmpi_rule_problem
from colltune.tune.promises import Promises
from colltune.tune.native import NATIVE, composition, native_equivalent
from colltune.tune.search import SEARCH
from colltune.tune.ties import load, placed_hosts

Params = dict[str, Any]


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _pof2_below(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _chunks(procs: int, size: int) -> list[int]:
    """Chunk sizes tried for a pipelined container: the tuner's segment sizes (powers of two from
    m/64 up to m, :data:`colltune.tune.search.SEARCH`)."""
    return SEARCH["segment_size"](procs, size)


@dataclass(frozen=True)
class LibraryAlgorithm:
    """One algorithm of a library as a tuning candidate.

    ``variants(procs, size)`` gives the parameter values to try (the first wins ties);
    ``equivalent(procs, size, params)`` the registry ``(algorithm, parameters)`` that prices them,
    raising :class:`~colltune.models.Unavailable` where the library cannot run them;
    ``fixed`` the container's other keys, written as they are; ``keys`` the tuned parameters a
    rule may carry."""

    collective: str
    name: str
    doc: str
    equivalent: Callable[[int, int, Params], tuple[str, Params]]
    variants: Callable[[int, int], list[Params]] = field(default=lambda procs, size: [{}])
    keys: tuple[str, ...] = ()
    fixed: Params = field(default_factory=dict)
    exact: bool = True
    pow2_only: bool = False
    #: MPICH's reduce-scatter preconditions (a built-in operation, count >= the largest power of
    #: two <= P); where they fail MPICH runs this container instead.
    reduce_scatter_fallback: str | None = None
    #: The values ``variants`` tries, in words (docs).
    tried: str = "-"
    #: Open MPI: the algorithm's number in coll/tuned (what its rules file writes).
    number: int = 0
    #: The library's own default values of tuned parameters (MPICH's chunk size, Open MPI's
    #: segment size 0): the hybrid tuner times a variant with these whatever its prediction, until
    #: its timings put it far behind (:meth:`colltune.tune.hybrid.HybridPricer.timed_far_behind`).
    library_defaults: Params = field(default_factory=dict)
    #: MPICH: the ch4 device's composition (``MPIR_CVAR_<COLL>_COMPOSITION``, 1 = alpha, ...) this
    #: entry is; 0 for an MPIR container, which runs inside the collective's network-only composition.
    composition: int = 0


def _same(algorithm: str, params: Params | None = None) -> Callable[[int, int, Params], tuple[str, Params]]:
    return lambda procs, size, p: (algorithm, dict(params or {}))


def _pow2_only(algorithm: str) -> Callable[[int, int, Params], tuple[str, Params]]:
    def equivalent(procs: int, size: int, p: Params) -> tuple[str, Params]:
        if not _pow2(procs):
            raise Unavailable(f"MPICH runs {algorithm} on power-of-two process counts only, not {procs}")
        return algorithm, {}
    return equivalent


def _reduce_scatter(algorithm: str, fallback: str) -> Callable[[int, int, Params], tuple[str, Params]]:
    """MPICH falls back to ``fallback`` when the count (one-byte elements, as the tuner counts
    reductions) is below the largest power of two <= P."""
    return lambda procs, size, p: (fallback, {}) if size < _pof2_below(procs) else (algorithm, {})


def _kary_edges(procs: int, k: int) -> tuple[tuple[int, int], ...]:
    """MPICH's k-ary tree from root 0 (``MPIR_Treealgo_tree_create_kary``): rank r's children are
    r*k + 1 .. r*k + k, in that order."""
    return tuple((r, c) for r in range(procs) for c in range(r * k + 1, min(procs, r * k + k + 1)))


def _bcast_tree(procs: int, size: int, p: Params) -> tuple[str, Params]:
    k = int(p["k"])
    if p["tree_type"] == "knomial_1":
        return "knomial_tree", {"radix": k}
    if k == 1:
        return "chain", {}
    if k == 2:
        return "binary_tree", {}
    if k >= procs - 1:
        return "flat_tree", {}
    return "given_tree", {"edges": _kary_edges(procs, k)}


def _tree_variants(procs: int, size: int) -> list[Params]:
    kary = sorted({1, 2, 4, max(1, procs - 1)})
    return [{"tree_type": "kary", "k": k} for k in kary] + [{"tree_type": "knomial_1", "k": k} for k in (2, 4, 8)]


def _bcast_pipelined(procs: int, size: int, p: Params) -> tuple[str, Params]:
    seg = {"segment_size": int(p["chunk_size"])}
    k = int(p["k"])
    if p["tree_type"] == "kary" and k == 1:
        return "chain_segmented", seg
    if p["tree_type"] == "kary" and k >= procs - 1:
        return "flat_tree_segmented", seg
    if p["tree_type"] == "knomial_1" and k == 2:
        return "binomial_tree_segmented", seg
    raise Unavailable(f"no schedule yet for MPICH's pipelined {p['tree_type']} tree with k = {k}")


def _pipelined_variants(procs: int, size: int) -> list[Params]:
    shapes = [("kary", 1), ("kary", max(1, procs - 1)), ("knomial_1", 2)]
    return [{"tree_type": t, "k": k, "chunk_size": c} for t, k in shapes for c in _chunks(procs, size)]


def _allreduce_ring(procs: int, size: int, p: Params) -> tuple[str, Params]:
    return "ring", {"segment_size": max(1, size)}  # MPICH's ring sends each block whole


def _composition(collective: str) -> Callable[[int, int, Params], tuple[str, Params]]:
    """MPICH's node-aware composition alpha of ``collective`` (``MPIDI_<Coll>_intra_composition_alpha``,
    ``src/mpid/ch4/src/ch4_coll_impl.h``): the nodes' leaders run MPICH's own MPIR algorithm among
    themselves, each node its shared-memory one; priced as colltune's ``hierarchical`` with MPICH's
    default algorithm at the leaders' level (:func:`colltune.tune.native.native_equivalent`, taken
    at P rather than at the count of nodes, which the catalogue does not know) and trees within
    the hosts: the shape of :func:`colltune.tune.native.native_on_hosts`."""
    return lambda procs, size, p: composition(collective, native_equivalent(collective, procs, size)[0])


#: MPICH's ch4 compositions by number (``MPIR_CVAR_<COLL>_COMPOSITION``; 0 is its own selection).
COMPOSITION_NAMES = {1: "alpha", 2: "beta", 3: "gamma", 4: "delta"}
#: The network-only composition of each collective that has a composition variable: the one that
#: runs MPICH's MPIR selection (``MPIR_<Coll>_impl``) on the whole communicator, where an MPIR
#: container decided by colltune runs.  Gather and scatter have a single, network-only composition.
MPICH_FLAT_COMPOSITION = {"bcast": 3, "reduce": 3, "allreduce": 2, "barrier": 2, "allgather": 2, "alltoall": 2}


# Non-blocking sends, pre-posted receives: what colltune's schedules do (see colltune.tune.libraries).
_TREE_KEYS = {"is_non_blocking": 1, "topo_overhead": 0, "topo_diff_groups": 0, "topo_diff_switches": 0,
              "topo_same_switches": 0}
_L = LibraryAlgorithm

#: MPICH 5.0's intra-communicator containers that colltune can price, by (collective, name).
MPICH_ALGORITHMS: dict[tuple[str, str], LibraryAlgorithm] = {(a.collective, a.name): a for a in (
    _L("bcast", "binomial", "binomial tree", _same("binomial_tree")),
    _L("bcast", "scatter_recursive_doubling_allgather", "binomial scatter, then recursive-doubling allgather "
       "(power-of-two P)", _pow2_only("scatter_recursive_doubling_allgather"), pow2_only=True),
    _L("bcast", "scatter_ring_allgather", "binomial scatter, then ring allgather", _same("scatter_ring_allgather")),
    _L("bcast", "tree", "the whole message down a k-ary or k-nomial tree (an Isend to each child, then wait for all)", _bcast_tree,
       _tree_variants, ("tree_type", "k"), _TREE_KEYS,
       tried="tree_type kary with k = 1, 2, 4, P - 1; knomial_1 with k = 2, 4, 8"),
    _L("bcast", "pipelined_tree", "chunks down a chain (k-ary, k = 1), a flat tree (k-ary, k = P - 1) or a "
       "binomial tree (k-nomial, k = 2)", _bcast_pipelined, _pipelined_variants, ("tree_type", "k", "chunk_size"),
       {"is_non_blocking": 1, "recv_pre_posted": 1},
       tried="those three shapes, chunk_size powers of two from m/64 up to m",
       library_defaults={"chunk_size": 8192}),  # MPIR_CVAR_BCAST_TREE_PIPELINE_CHUNK_SIZE
    _L("scatter", "binomial", "binomial tree", _same("binomial_tree")),
    _L("gather", "binomial", "binomial tree", _same("binomial_tree")),
    _L("allgather", "brucks", "Bruck's algorithm", _same("bruck")),
    _L("allgather", "recursive_doubling", "recursive doubling (power-of-two P)", _pow2_only("recursive_doubling"),
       pow2_only=True),
    _L("allgather", "ring", "ring", _same("ring")),
    _L("alltoall", "brucks", "Bruck's algorithm", _same("bruck")),
    _L("alltoall", "pairwise", "pairwise exchange", _same("pairwise_exchange")),
    _L("alltoall", "scattered", "all sends and receives posted in batches of MPIR_CVAR_ALLTOALL_THROTTLE (32)",
       _same("linear_throttled", {"max_outstanding": 32}), exact=False),
    _L("reduce", "binomial", "binomial tree", _same("binomial_tree")),
    _L("reduce", "reduce_scatter_gather", "Rabenseifner: reduce-scatter, then gather (binomial below a count of "
       "the largest power of two <= P)", _reduce_scatter("reduce_scatter_gather", "binomial_tree"),
       reduce_scatter_fallback="binomial"),
    _L("allreduce", "recursive_doubling", "recursive doubling", _same("recursive_doubling")),
    _L("allreduce", "reduce_scatter_allgather", "Rabenseifner: reduce-scatter, then allgather (recursive doubling "
       "below a count of the largest power of two <= P)",
       _reduce_scatter("reduce_scatter_allgather", "recursive_doubling"),
       reduce_scatter_fallback="recursive_doubling"),
    _L("allreduce", "ring", "ring reduce-scatter, then ring allgather, each block whole", _allreduce_ring),
    _L("barrier", "k_dissemination", "dissemination (k = 2)", _same("dissemination"), lambda procs, size: [{"k": 2}],
       ("k",), tried="k = 2"),    *(_L(coll, "composition_alpha", "the ch4 device's node-aware composition: MPICH's own algorithm among one "
         "leader per node, shared memory within each node" + (" (commutative operations)" if coll in
                                                               ("reduce", "allreduce") else ""),
         _composition(coll), exact=False, composition=1)
      for coll in ("bcast", "reduce", "allreduce", "barrier")),
)}

#: MPICH containers that are not candidates yet, and why.
MPICH_UNPRICED: dict[str, str] = {
    "bcast": "smp, circ_graph; tree and pipelined_tree with shapes other than those above; compositions beta "
             "and delta",
    "allgather": "k_brucks, recexch_doubling, recexch_halving, circ_graph; the multi-leader composition",
    "alltoall": "k_brucks; pairwise_sendrecv_replace (in place only); the multi-leader composition",
    "reduce": "smp, circ_graph; composition beta",
    "allreduce": "recursive_multiplying, tree, recexch, k_reduce_scatter_allgather, smp, ccl; the multi-leader "
                 "composition (delta)",
    "barrier": "k_dissemination with k > 2, recexch, smp",
}

def _segmented(whole: str, segmented: str | None) -> Callable[[int, int, Params], tuple[str, Params]]:
    """Open MPI's segment size 0 sends the message whole (``whole``); another value pipelines it
    in segments of that size (``segmented`` with ``segment_size``, or no schedule yet)."""
    def equivalent(procs: int, size: int, p: Params) -> tuple[str, Params]:
        seg = int(p.get("segsize", 0))
        if seg == 0 or seg >= size:
            return whole, {}
        if segmented is None:
            raise Unavailable(f"no schedule yet for a segmented {whole}")
        return segmented, {"segment_size": seg}
    return equivalent


def _segsizes(procs: int, size: int) -> list[Params]:
    """Segment sizes tried: 0 (the whole message, Open MPI's default) and the tuner's segment
    sizes below the message (:func:`_chunks`)."""
    return [{"segsize": 0}] + [{"segsize": c} for c in _chunks(procs, size) if c < size]


def _pow2_or(algorithm: str, fallback: str) -> Callable[[int, int, Params], tuple[str, Params]]:
    return lambda procs, size, p: (algorithm, {}) if _pow2(procs) else (fallback, {})


def _whole(procs: int, size: int) -> list[Params]:
    """Segment size 0 only (the whole message): the algorithms whose segmented form has no schedule."""
    return [{"segsize": 0}]


def _throttle_variants(procs: int, size: int) -> list[Params]:
    return [{"max_requests": m} for m in (1, 4, 32)]


def _allreduce_segmented_ring(procs: int, size: int, p: Params) -> tuple[str, Params]:
    seg = int(p.get("segsize", 0))
    return "ring", {"segment_size": max(1, size) if seg == 0 else seg}


_SEGSIZE = "segsize 0 (whole) and powers of two from m/64 below m"
#: Open MPI 5.0's coll/tuned algorithms that colltune can price, by (collective, name): the names
#: and numbers ``ompi_info --param coll tuned --level 9`` lists (``number`` is what the rules file
#: writes).  Parameters are the rule's columns: ``segsize``, ``faninout``, ``max_requests``.
OPENMPI_ALGORITHMS: dict[tuple[str, str], LibraryAlgorithm] = {(a.collective, a.name): a for a in (
    _L("bcast", "basic_linear", "the root sends to every rank", _same("flat_tree"), number=1),
    _L("bcast", "pipeline", "segments down a chain", _segmented("chain", "chain_segmented"), _segsizes,
       ("segsize",), number=3, tried=_SEGSIZE, library_defaults={"segsize": 0}),
    _L("bcast", "binary_tree", "binary tree (whole message; segmented not priced yet)",
       _segmented("binary_tree", None), _whole, ("segsize",), number=5,
       tried="segsize 0"),
    _L("bcast", "binomial", "binomial tree, whole or in segments",
       _segmented("binomial_tree", "binomial_tree_segmented"), _segsizes, ("segsize",), number=6, tried=_SEGSIZE,
       library_defaults={"segsize": 0}),
    _L("bcast", "knomial", "k-nomial tree of radix coll_tuned_bcast_algorithm_knomial_radix (4)",
       _same("knomial_tree", {"radix": 4}), number=7),
    _L("bcast", "scatter_allgather", "binomial scatter, then recursive-doubling allgather (power-of-two P priced)",
       _pow2_only("scatter_recursive_doubling_allgather"), number=8, exact=False, pow2_only=True),
    _L("bcast", "scatter_allgather_ring", "binomial scatter, then ring allgather", _same("scatter_ring_allgather"),
       number=9),
    _L("scatter", "basic_linear", "the root sends to every rank", _same("flat_tree"), number=1),
    _L("scatter", "binomial", "binomial tree", _same("binomial_tree"), number=2),
    _L("scatter", "linear_nb", "the root sends to every rank, non-blocking", _same("flat_tree"), number=3,
       exact=False),
    _L("gather", "basic_linear", "every rank sends to the root", _same("flat_tree"), number=1),
    _L("gather", "binomial", "binomial tree", _same("binomial_tree"), number=2),
    _L("gather", "linear_sync", "the root asks each rank in turn", _same("linear_synchronized"), number=3,
       exact=False),
    _L("allgather", "linear", "gather to rank 0, then broadcast", _same("gather_bcast"), number=1, exact=False),
    _L("allgather", "bruck", "Bruck's algorithm", _same("bruck"), number=2),
    _L("allgather", "recursive_doubling", "recursive doubling (Bruck's on other P)",
       _pow2_or("recursive_doubling", "bruck"), number=3),
    _L("allgather", "ring", "ring", _same("ring"), number=4),
    _L("alltoall", "linear", "all sends and receives posted at once, peers in rotated order",
       _same("direct_rotated"), number=1),
    _L("alltoall", "pairwise", "pairwise exchange", _same("pairwise_exchange"), number=2),
    _L("alltoall", "modified_bruck", "Bruck's algorithm", _same("bruck"), number=3),
    _L("alltoall", "linear_sync", "at most max_requests sends and receives outstanding",
       lambda procs, size, p: ("linear_throttled", {"max_outstanding": int(p["max_requests"])}),
       _throttle_variants, ("max_requests",), number=4, tried="max_requests 1, 4, 32"),
    _L("reduce", "linear", "every rank sends to the root, which reduces in order", _same("flat_tree"), number=1),
    _L("reduce", "pipeline", "segments up a chain", _segmented("chain", "chain_segmented"), _segsizes,
       ("segsize",), number=3, tried=_SEGSIZE, library_defaults={"segsize": 0}),
    _L("reduce", "binomial", "binomial tree (whole message; segmented not priced yet)",
       _segmented("binomial_tree", None), _whole, ("segsize",), number=5,
       tried="segsize 0"),
    _L("reduce", "rabenseifner", "reduce-scatter, then gather", _same("reduce_scatter_gather"), number=7,
       exact=False),
    _L("allreduce", "nonoverlapping", "reduce to rank 0, then broadcast", _same("reduce_bcast"), number=2),
    _L("allreduce", "recursive_doubling", "recursive doubling", _same("recursive_doubling"), number=3),
    _L("allreduce", "ring", "ring reduce-scatter, then ring allgather, each block whole", _allreduce_ring,
       number=4),
    _L("allreduce", "segmented_ring", "ring in segments", _allreduce_segmented_ring, _segsizes, ("segsize",),
       number=5, tried=_SEGSIZE, library_defaults={"segsize": 0}),
    _L("allreduce", "rabenseifner", "reduce-scatter, then allgather", _same("reduce_scatter_allgather"), number=6,
       exact=False),
    _L("barrier", "linear", "everyone to rank 0 and back", _same("linear"), number=1),
    _L("barrier", "recursive_doubling", "recursive doubling", _same("recursive_doubling"), number=3),
    _L("barrier", "bruck", "dissemination", _same("dissemination"), number=4),
    _L("barrier", "tree", "tree", _same("tree"), number=6),
)}

#: Open MPI containers that are not candidates yet, and why.
OPENMPI_UNPRICED: dict[str, str] = {
    "bcast": "chain with fan-out > 1, split_binary_tree, segmented binary tree, knomial with another radix",
    "allgather": "neighbor, two_proc, sparbit",
    "alltoall": "two_proc",
    "reduce": "chain with fan-out > 1, binary, in-order_binary, segmented binomial",
    "allreduce": "basic_linear (the same as nonoverlapping here)",
    "barrier": "double_ring, two_proc",
}

#: The catalogues by library.
TARGETS: dict[str, dict[tuple[str, str], LibraryAlgorithm]] = {"mpich": MPICH_ALGORITHMS,
                                                               "openmpi": OPENMPI_ALGORITHMS}
#: What is not priced yet, by library.
UNPRICED: dict[str, dict[str, str]] = {"mpich": MPICH_UNPRICED, "openmpi": OPENMPI_UNPRICED}


def library_algorithm(library: str, collective: str, name: str) -> LibraryAlgorithm:
    """The catalogue entry of ``library``'s algorithm ``name``; a :class:`ValueError` naming the
    valid ones otherwise."""
    catalogue = TARGETS.get(library)
    if catalogue is None:
        raise ValueError(f"no algorithm catalogue for library {library!r}; valid: {', '.join(TARGETS)}")
    entry = catalogue.get((collective, name))
    if entry is None:
        valid = ", ".join(n for c, n in catalogue if c == collective)
        raise ValueError(f"{library} has no {collective} algorithm {name!r} that colltune prices; valid: {valid}")
    return entry


def check_params(library: str, collective: str, name: str, params: Params) -> None:
    """Raise :class:`ValueError` if a rule's ``params`` are not the keys ``name`` is tuned by."""
    entry = library_algorithm(library, collective, name)
    if set(params) != set(entry.keys):
        raise ValueError(f"{library} {collective}/{name}: parameters {sorted(params)} given, "
                         f"{sorted(entry.keys)} expected")


@dataclass(frozen=True)
class LibrarySpace:
    """The tuner's candidates for ``library``: its catalogue's algorithms and their variants, less
    those the library's file cannot carry (Open MPI: :func:`~colltune.tune.libraries.openmpi_rule_problem`;
    they stay in the catalogue, forced by benchmarks), so that the export writes what was decided;
    ``promises``: what the program promises (:attr:`DecisionTable.promises`)."""

    library: str
    promises: Promises = field(default_factory=Promises)

    def names(self, collective: str) -> list[str]:
        return [n for (c, n), a in TARGETS[self.library].items() if c == collective and (
            self.library != "openmpi" or openmpi_rule_problem(c, a.number, self.promises) is None)]

    def combos(self, collective: str, name: str, procs: int, size: int) -> list[Params]:
        return library_algorithm(self.library, collective, name).variants(procs, size)

    def library_default(self, collective: str, name: str, params: Params) -> bool:
        """True if ``params`` give ``name``'s parameters the library's own default values
        (:attr:`LibraryAlgorithm.library_defaults`; False for an algorithm without any)."""
        if name == NATIVE:
            return False
        defaults = library_algorithm(self.library, collective, name).library_defaults
        return bool(defaults) and all(params.get(k) == v for k, v in defaults.items())


@dataclass
class LibraryPricer:
    """Prices a library's algorithm by its registry equivalent on ``inner`` (any pricer); the
    parameters it returns are the library's."""

    inner: Any
    library: str

    def price(self, collective: str, algorithm: str, procs: int, size: int, params: Params) -> tuple[float, Params]:
        if algorithm == NATIVE:
            return self.inner.price(collective, NATIVE, procs, size, {})
        entry = library_algorithm(self.library, collective, algorithm)
        registry_name, registry_params = entry.equivalent(procs, size, params)
        time, _ = self.inner.price(collective, registry_name, procs, size, registry_params)
        return time, dict(params)

    def hosts(self, procs: int) -> tuple[int, ...] | None:
        """Where the inner pricer places ``procs`` ranks (:func:`colltune.tune.ties.placed_hosts`)."""
        return placed_hosts(self.inner, procs)

    def load(self, collective: str, algorithm: str, procs: int, size: int, params: Params) -> tuple[int, int]:
        """:func:`colltune.tune.ties.load` of the library algorithm's registry equivalent, on the
        inner pricer's hosts."""
        if algorithm != NATIVE:
            algorithm, params = library_algorithm(self.library, collective, algorithm).equivalent(procs, size, params)
        return load(collective, algorithm, procs, size, params, self.hosts(procs))


def catalogue_markdown(library: str = "mpich") -> str:
    """The catalogue as a markdown table (docs/tune.md)."""
    what = "MPICH container" if library == "mpich" else "Open MPI algorithm (number)"
    lines = [f"| collective | {what} | what it does | parameters tried | priced as |", "| --- | --- | --- | --- | --- |"]
    for (coll, name), a in TARGETS[library].items():
        example = a.variants(8, 65536)
        shapes = sorted({a.equivalent(8, 65536, v)[0] for v in example if _priceable(a, v)})
        exact = "" if a.exact else " (nearest)"
        label = f"`{name}`" + (f" ({a.number})" if a.number else "")
        lines.append(f"| {coll} | {label} | {a.doc} | {a.tried} | {', '.join(f'`{s}`' for s in shapes)}{exact} |")
    return "\n".join(lines) + "\n"


def _priceable(a: LibraryAlgorithm, params: Params) -> bool:
    try:
        a.equivalent(8, 65536, params)
    except Unavailable:
        return False
    return True


def runs_by_itself(library: str, collective: str, procs: int, size: int, ch: tuple[str, Any]) -> bool:
    """True if the choice ``ch`` (name, sorted parameter pairs) of ``library``'s algorithms is, priced
    as a registry algorithm, what the library runs by itself at ``size`` bytes on ``procs`` ranks
    (MPICH: :func:`colltune.tune.native.native_equivalent`; False for other libraries, whose
    default choice colltune does not model)."""
    name, params = ch
    if library != "mpich" or name == NATIVE:
        return name == NATIVE
    try:
        mine = library_algorithm(library, collective, name).equivalent(procs, size, dict(params))
        return mine == native_equivalent(collective, procs, size)
    except (Unavailable, ValueError):
        return False
