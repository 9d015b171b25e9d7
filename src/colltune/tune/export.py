"""A decision table as the MPI libraries read it: Open MPI coll/tuned rules and MPICH selection JSON.

Message sizes: the table keys on the block size ``m`` (bytes, :mod:`colltune.collectives`); the
libraries key on their own message size, which the export converts to:

* Open MPI (``coll_tuned_decision_dynamic.c``): ``m`` for bcast, reduce and allreduce; ``P*m``
  (the whole buffer) for allgather, alltoall, gather and scatter; 0 for barrier.  A comm-size
  block holds from its size up to the next block's, and the first block also holds every
  smaller communicator (``ompi_coll_tuned_get_com_rule_ptr``), so the export writes one block
  per process count where the conversion depends on P, and hands smaller communicators (a
  first block at size 1) and larger ones (a last block) back to Open MPI's fixed rules
  (algorithm 0): coll/han's node and leader sub-communicators among them.
* MPICH (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``): ``avg_msg_size`` (``m``) for allreduce,
  bcast, reduce and alltoall, where MPICH defines it; ``total_msg_size`` (``P*m``) elsewhere.

A table tuned for MPICH's own algorithms (``library`` ``"mpich"``, :mod:`colltune.tune.targets`)
is written as decided: each rule's container with its parameters, nothing substituted; it
cannot be exported to Open MPI.  The same holds for a table tuned for Open MPI's own algorithms.

Open MPI's rules cannot tell a non-commutative operation, nor the root's send count of a scatter
from the others': reduce and allreduce rules name only the algorithms that keep rank order
(:data:`~colltune.tune.libraries.OPENMPI_ANY_OPERATION`; a colltune rule that maps to another is
written as algorithm 0, with a note) unless the table says the program's reductions are all
commutative (``tune --commutative``), and scatter is left to Open MPI's fixed rules unless the table
says every rank passes the root's send count (``tune --uniform-scatter``; the table's
:class:`~colltune.tune.promises.Promises`).  The tuner for
Open MPI's own algorithms never chooses what the file could not carry
(:class:`~colltune.tune.targets.LibrarySpace`).

``native`` rules become the library's own choice: Open MPI's fixed rules (algorithm 0), and in
MPICH a subtree with MPICH's default decisions (:func:`mpich_default`).  Every mapping that is
only the nearest equivalent (:mod:`colltune.tune.libraries`) is reported in the returned notes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from colltune.tune.libraries import (
    HAN_COLLECTIVES,
    MPICH,
    OPENMPI,
    OPENMPI_ANY_OPERATION,
    OPENMPI_IDS,
    OPENMPI_ROOT_SIZED,
    MPICHAlgorithm,
    openmpi_rule_problem,
    openmpi_unpromised,
)
from colltune.tune.promises import Promises, flag
from colltune.tune.table import NATIVE, Block, DecisionTable, Rule, TableError
from colltune.tune.targets import COMPOSITION_NAMES, MPICH_ALGORITHMS, MPICH_FLAT_COMPOSITION, OPENMPI_ALGORITHMS

#: Collectives whose Open MPI message size is the whole buffer P*m.
_OMPI_TOTAL = {"allgather", "alltoall", "gather", "scatter"}
#: Collectives for which MPICH defines avg_msg_size; the others use total_msg_size.
MPICH_AVG = {"allreduce", "bcast", "reduce", "alltoall"}


def _note(notes: list[str], library: str, collective: str, algorithm: str, target: str, exact: bool,
          why: str) -> None:
    if not exact:
        line = f"{library}: {collective}/{algorithm} has no exact equivalent; using {target} ({why})"
        if line not in notes:
            notes.append(line)


#: Most process counts one block may be written out for, one by one (the files list them all).
MAX_PER_PROCS = 4096


def _procs_blocks(blocks: tuple[Block, ...], per_procs: bool) -> list[tuple[int, int, Block]]:
    """``(procs_min, procs_max, block)``; if ``per_procs`` (the library's size is the whole buffer,
    so a size boundary moves with P), one entry per process count for a block with size
    boundaries: at most :data:`MAX_PER_PROCS` of them."""
    out = []
    for b in blocks:
        if per_procs and len(b.rules) > 1:
            if b.procs_max - b.procs_min >= MAX_PER_PROCS:
                raise TableError(f"a block for {b.procs_min}-{b.procs_max} processes has size rules, which this "
                                 f"export writes once per process count; tune at the process counts you run "
                                 f"(at most {MAX_PER_PROCS} per block)")
            out += [(p, p, b) for p in range(b.procs_min, b.procs_max + 1)]
        else:
            out.append((b.procs_min, b.procs_max, b))
    return out


def _ompi_rule(collective: str, rule: Rule, notes: list[str], own: bool = False,
               promises: Promises | None = None) -> tuple[int, int, int, int]:
    """``(algorithm, faninout, segsize, max_requests)`` of one rule; ``own``: the rule names one of
    Open MPI's algorithms (a table tuned with ``--library openmpi``), written as decided;
    ``promises``: the table's :attr:`~colltune.tune.table.DecisionTable.promises`."""
    if rule.algorithm == NATIVE:
        return 0, 0, 0, 0
    if own:
        a = OPENMPI_ALGORITHMS[(collective, rule.algorithm)]
        problem = openmpi_rule_problem(collective, a.number, promises)
        if problem:
            raise TableError(f"Open MPI {collective}/{rule.algorithm} cannot go in a rules file: {problem}")
        return (a.number, int(rule.params.get("faninout", 0)), int(rule.params.get("segsize", 0)),
                int(rule.params.get("max_requests", 0)))
    o = OPENMPI[(collective, rule.algorithm)]
    problem = openmpi_rule_problem(collective, o.number, promises)
    if problem:
        line = (f"Open MPI: {collective}/{rule.algorithm} would be {o.name} ({o.number}); left to Open MPI's "
                f"fixed rules: {problem}")
        if line not in notes:
            notes.append(line)
        return 0, 0, 0, 0
    _note(notes, "Open MPI", collective, rule.algorithm, f"{o.name} ({o.number})", o.exact, o.note)
    seg = int(rule.params[o.segsize_from]) if o.segsize_from else 0
    req = int(rule.params[o.max_requests_from]) if o.max_requests_from else 0
    return o.number, o.faninout, seg, req


def _ompi_sizes(collective: str, block: Block, procs: int) -> list[tuple[int, Rule]]:
    scale = procs if collective in _OMPI_TOTAL else 0 if collective == "barrier" else 1
    out: list[tuple[int, Rule]] = []
    for r in block.rules:
        start = r.size_min * scale
        if out and start == out[-1][0]:
            continue  # sizes that collapse together (barrier): the first rule holds
        out.append((start, r))
    return out


def _require_library(table: DecisionTable, library: str, label: str) -> None:
    """A table tuned for one library's own algorithms exports to that library only."""
    if table.library not in ("colltune", library):
        raise TableError(f"the table decides among {table.library}'s own algorithms (colltune tune --library "
                         f"{table.library}); it exports to {table.library} only, not to {label}")


def _openmpi_collectives(table: DecisionTable, notes: list[str]) -> list[str]:
    _require_library(table, "openmpi", "Open MPI")
    out = []
    for coll, blocks in table.collectives.items():
        unpromised = openmpi_unpromised(coll, table.promises)
        if unpromised and blocks:
            promise, why = unpromised
            named = [r.algorithm for b in blocks for r in b.rules if r.algorithm != NATIVE]
            if table.library == "openmpi" and named:
                raise TableError(f"Open MPI {coll}/{named[0]} cannot go in a rules file: {why}")
            notes.append(f"Open MPI: {coll} is left to Open MPI's fixed rules: {why} (unless tuned with "
                         f"{flag(promise)})")
        elif blocks:
            out.append(coll)
    return out


def openmpi_rules(table: DecisionTable) -> tuple[str, list[str]]:
    """The classic coll/tuned rules file (``rule-file-version-2``: five columns, the last the
    maximum outstanding requests) and the notes on nearest equivalents."""
    notes: list[str] = []
    header = (f"# colltune decision table: method {table.method}, profile {table.profile}, "
              f"colltune {table.provenance.colltune_version}")
    out = ["rule-file-version-2", header,
           "# columns: message size, algorithm, fan-in/out, segment size, max requests"]
    colls = _openmpi_collectives(table, notes)
    out.append(f"{len(colls)}")
    for coll in colls:
        entries = _procs_blocks(table.collectives[coll], coll in _OMPI_TOTAL)
        below = entries[0][0] > 1  # coll/tuned gives a smaller communicator the first block's rules
        out += [f"# {coll}", f"{OPENMPI_IDS[coll]}", f"{len(entries) + 1 + below}"]
        out += ["1", "1", "0 0 0 0 0"] if below else []
        for lo, hi, block in entries:
            sizes = _ompi_sizes(coll, block, lo)
            out += [f"{lo}", f"{len(sizes)}"]
            for start, r in sizes:
                alg, fan, seg, req = _ompi_rule(coll, r, notes, table.library == "openmpi", table.promises)
                out.append(f"{start} {alg} {fan} {seg} {req}")
        out += [f"{entries[-1][1] + 1}", "1", "0 0 0 0 0"]
    return "\n".join(out) + "\n", notes


def openmpi_json(table: DecisionTable) -> tuple[dict[str, Any], list[str]]:
    """The JSON rules file of Open MPI 6 (``comm_size_min``/``max``, ``msg_size_min``/``max``) and the notes."""
    notes: list[str] = []
    colls: dict[str, Any] = {}
    for coll in _openmpi_collectives(table, notes):
        blocks = table.collectives[coll]
        comm_rules = []
        for lo, hi, block in _procs_blocks(blocks, coll in _OMPI_TOTAL):
            sizes = _ompi_sizes(coll, block, lo)
            rules = []
            for i, (start, r) in enumerate(sizes):
                own = table.library == "openmpi"
                alg, fan, seg, req = _ompi_rule(coll, r, notes, own, table.promises)
                if not alg:
                    continue  # no rule: Open MPI's fixed decision
                rule: dict[str, Any] = {"msg_size_min": start,
                                        "alg": r.algorithm if own else OPENMPI[(coll, r.algorithm)].name}
                if i + 1 < len(sizes):
                    rule["msg_size_max"] = sizes[i + 1][0] - 1
                rule.update({k: v for k, v in (("faninout", fan), ("seg_size", seg), ("reqs", req)) if v})
                rules.append(rule)
            comm_rules.append({"comm_size_min": lo, "comm_size_max": hi, "rules": rules})
        colls[coll] = comm_rules
    return {"collectives": colls}, notes


#: Where the coll/han rules file of an Open MPI export at ``FILE`` goes: ``FILE.han``.
HAN_SUFFIX = ".han"


def openmpi_han(table: DecisionTable) -> str | None:
    """coll/han's dynamic rules file (``coll_han_dynamic_file.c`` of Open MPI 5.0; message sizes
    are the block size ``m`` for every collective) for ``table``, or None if no collective of
    :data:`~colltune.tune.libraries.HAN_COLLECTIVES` has rules.

    Where a communicator spans nodes coll/han takes these collectives before coll/tuned and
    runs its own two-level algorithm, so a coll/tuned rules file reaches only HAN's
    sub-communicators.  This file names, for the whole communicator of each comm-size block of
    the table, ``tuned`` where a rule names a coll/tuned algorithm (the rules file then decides
    which) and ``han`` where it leaves the choice to Open MPI (``native``, or algorithm 0), as on
    communicators of sizes the table does not cover."""
    colls = [c for c in _openmpi_collectives(table, []) if c in HAN_COLLECTIVES]
    if not colls:
        return None
    own = table.library == "openmpi"
    out = [f"# colltune decision table: method {table.method}, profile {table.profile}, "
           f"colltune {table.provenance.colltune_version}",
           "# coll/han on the whole communicator: collective, level, comm sizes, message sizes -> component",
           f"{len(colls)}"]
    for coll in colls:
        configs: list[tuple[int, list[tuple[int, str]]]] = []
        uncovered = 1  # the smallest communicator size no block has covered yet
        for lo, hi, block in _procs_blocks(table.collectives[coll], False):
            if lo > uncovered:
                configs.append((uncovered, [(0, "han")]))
            sizes: list[tuple[int, str]] = []
            for r in block.rules:
                start = 0 if not sizes or coll == "barrier" else r.size_min
                component = "tuned" if _ompi_rule(coll, r, [], own, table.promises)[0] else "han"
                if sizes and (start == sizes[-1][0] or component == sizes[-1][1]):
                    continue  # sizes that collapse together (barrier), or the same component on
                sizes.append((start, component))
            configs.append((lo, sizes))
            uncovered = hi + 1
        configs.append((uncovered, [(0, "han")]))
        out += [coll, "1", "global_communicator", f"{len(configs)}"]
        for conf, sizes in configs:
            out += [f"{conf}", f"{len(sizes)}", *(f"{start} {component}" for start, component in sizes)]
    return "\n".join(out) + "\n"


def _cap(name: str) -> str:
    return name[0].upper() + name[1:]


def _mpich_leaf(collective: str, algorithm: str, params: dict[str, Any]) -> dict[str, Any]:
    keys = {f"{k}={v}": {} for k, v in params.items()}
    return {f"algorithm=MPIR_{_cap(collective)}_intra_{algorithm}": keys}


def mpich_default(collective: str) -> dict[str, Any]:
    """MPICH 5.0's default intra-communicator decision for ``collective`` (flat hierarchy), as a
    selection subtree: what a ``native`` rule hands back to MPICH.

    Process-count tests are written ``comm_size<=N``, never ``comm_size<N``: MPICH 5.0's selection
    search (``MPIR_Csel_search`` in ``src/mpi/coll/src/csel.c``) evaluates ``comm_size<N`` as
    ``<=``, and a test nested below a message-size test is evaluated there rather than pruned
    when the communicator is created, so ``comm_size<8`` sent 8 ranks down the wrong branch
    (measured on the testbed: a 16 KiB broadcast got the binomial tree, 1.8x slower)."""
    leaf = _mpich_leaf
    if collective == "bcast":
        return {"comm_size<=7": leaf("bcast", "binomial", {}),
                "comm_size=pow2": {"avg_msg_size<=12288": leaf("bcast", "binomial", {}),
                                   "avg_msg_size<=524288": leaf("bcast", "scatter_recursive_doubling_allgather", {}),
                                   "avg_msg_size=any": leaf("bcast", "scatter_ring_allgather", {})},
                "comm_size=any": {"avg_msg_size<=12288": leaf("bcast", "binomial", {}),
                                  "avg_msg_size=any": leaf("bcast", "scatter_ring_allgather", {})}}
    if collective in ("scatter", "gather"):
        return leaf(collective, "binomial", {})
    if collective == "allgather":
        return {"comm_size=pow2": {"total_msg_size<524288": leaf("allgather", "recursive_doubling", {}),
                                   "total_msg_size=any": leaf("allgather", "ring", {})},
                "comm_size=any": {"total_msg_size<81920": leaf("allgather", "brucks", {}),
                                  "total_msg_size=any": leaf("allgather", "ring", {})}}
    if collective == "alltoall":
        return {"comm_size<=7": {"avg_msg_size<=32768": leaf("alltoall", "scattered", {}),
                                "avg_msg_size=any": leaf("alltoall", "pairwise", {})},
                "comm_size=any": {"avg_msg_size<=256": leaf("alltoall", "brucks", {}),
                                  "avg_msg_size<=32768": leaf("alltoall", "scattered", {}),
                                  "avg_msg_size=any": leaf("alltoall", "pairwise", {})}}
    if collective == "reduce":
        return {"avg_msg_size<=2048": leaf("reduce", "binomial", {}),
                "avg_msg_size=any": _guard_pof2("reduce", "reduce_scatter_gather", "binomial")}
    if collective == "allreduce":
        return {"avg_msg_size<=8": leaf("allreduce", "recursive_doubling", {}),
                "avg_msg_size=any": _guard_pof2("allreduce", "reduce_scatter_allgather", "recursive_doubling")}
    if collective == "barrier":
        return leaf("barrier", "k_dissemination", {"k": 2})
    raise ValueError(f"no MPICH default for {collective!r}")


def _guard_pof2(collective: str, algorithm: str, fallback: str) -> dict[str, Any]:
    """MPICH's reduce-scatter algorithms need a built-in op and count >= the largest power of
    two <= P; elsewhere they are replaced by ``fallback``, as MPICH's own tree does."""
    return {"is_op_built_in=yes": {"count<pow2": _mpich_leaf(collective, fallback, {}),
                                   "count=any": _mpich_leaf(collective, algorithm, {})},
            "is_op_built_in=no": _mpich_leaf(collective, fallback, {})}


def _mpich_own(collective: str, rule: Rule) -> dict[str, Any]:
    """A rule of a table tuned for MPICH's own algorithms, as decided; MPICH's own preconditions
    kept (its reduce-scatter fallbacks; a power-of-two-only container elsewhere gives MPICH's
    default decision)."""
    a = MPICH_ALGORITHMS[(collective, rule.algorithm)]
    if a.composition:
        return mpich_default(collective)  # the composition runs MPICH's own algorithms inside
    if a.reduce_scatter_fallback:
        return _guard_pof2(collective, a.name, a.reduce_scatter_fallback)
    leaf = _mpich_leaf(collective, a.name, {**a.fixed, **rule.params})
    if (collective, a.name) == ("allreduce", "ring"):
        return {"is_commutative=yes": leaf, "is_commutative=no": _mpich_leaf(collective, "recursive_doubling", {})}
    if a.pow2_only:
        return {"comm_size=pow2": leaf, "comm_size=any": mpich_default(collective)}
    return leaf


def _mpich_branch(collective: str, rule: Rule, procs_max: int, notes: list[str],
                  own: bool = False) -> dict[str, Any]:
    if rule.algorithm == NATIVE:
        return mpich_default(collective)
    if own:
        return _mpich_own(collective, rule)
    m: MPICHAlgorithm = MPICH[(collective, rule.algorithm)]
    _note(notes, "MPICH", collective, rule.algorithm, f"MPIR_{_cap(collective)}_intra_{m.name}", m.exact, m.note)
    params = dict(m.params)
    if m.chunk_from:
        params["chunk_size"] = int(rule.params[m.chunk_from])
    if m.k_from:
        params["k"] = max(1, procs_max - 1) if m.k_from == "procs" else int(rule.params[m.k_from])
    if m.name in ("reduce_scatter_gather", "reduce_scatter_allgather"):
        return _guard_pof2(collective, m.name, "binomial" if collective == "reduce" else "recursive_doubling")
    if (collective, m.name) == ("allreduce", "ring"):
        return {"is_commutative=yes": _mpich_leaf(collective, "ring", {}),
                "is_commutative=no": _mpich_leaf(collective, "recursive_doubling", {})}
    if m.pow2_only:
        return {"comm_size=pow2": _mpich_leaf(collective, m.name, params),
                "comm_size=any": _mpich_leaf(collective, m.pow2_only, {})}
    return _mpich_leaf(collective, m.name, params)


def _mpich_sizes(collective: str, block: Block, procs: int, branch: Callable[[Rule], dict[str, Any]]) -> dict[str, Any]:
    """``block``'s rules as one size test each (MPICH's ``avg_msg_size`` or ``total_msg_size``
    for ``procs`` ranks), each rule's subtree made by ``branch``."""
    if collective == "barrier":
        return branch(block.rules[0])
    avg = collective in MPICH_AVG
    key, scale = ("avg_msg_size", 1) if avg else ("total_msg_size", procs)
    out: dict[str, Any] = {}
    for r in block.rules:
        cond = f"{key}=any" if r.size_max is None else f"{key}<={r.size_max * scale}"
        out[cond] = branch(r)
    return out


#: Intercommunicator containers (colltune tunes intracommunicators only) and the collectives
#: colltune does not tune, each with one safe MPICH algorithm.
_MPICH_INTER = {
    "bcast": "MPIR_Bcast_inter_remote_send_local_bcast", "scatter": "MPIR_Scatter_inter_linear",
    "gather": "MPIR_Gather_inter_linear", "allgather": "MPIR_Allgather_inter_local_gather_remote_bcast",
    "alltoall": "MPIR_Alltoall_inter_pairwise_exchange", "reduce": "MPIR_Reduce_inter_local_reduce_remote_send",
    "allreduce": "MPIR_Allreduce_inter_reduce_exchange_bcast", "barrier": "MPIR_Barrier_inter_bcast",
}
_MPICH_UNTUNED = {
    "allgatherv": {"comm_type=intra": "MPIR_Allgatherv_intra_ring",
                   "comm_type=inter": "MPIR_Allgatherv_inter_remote_gather_local_bcast"},
    "alltoallv": {"comm_type=intra": "MPIR_Alltoallv_intra_scattered",
                  "comm_type=inter": "MPIR_Alltoallv_inter_pairwise_exchange"},
    "alltoallw": {"comm_type=intra": "MPIR_Alltoallw_intra_scattered",
                  "comm_type=inter": "MPIR_Alltoallw_inter_pairwise_exchange"},
    "reduce_scatter": {"comm_type=intra": "MPIR_Reduce_scatter_intra_recursive_doubling",
                       "comm_type=inter": "MPIR_Reduce_scatter_inter_remote_reduce_local_scatter"},
    "reduce_scatter_block": {"comm_type=intra": "MPIR_Reduce_scatter_block_intra_recursive_doubling",
                             "comm_type=inter": "MPIR_Reduce_scatter_block_inter_remote_reduce_local_scatter"},
    "gatherv": {"": "MPIR_Gatherv_allcomm_linear"},
    "scatterv": {"": "MPIR_Scatterv_allcomm_linear"},
    "scan": {"": "MPIR_Scan_intra_recursive_doubling"},
    "exscan": {"": "MPIR_Exscan_intra_recursive_doubling"},
    **{f"neighbor_{n}": {"": f"MPIR_Neighbor_{n}_allcomm_nb"}
       for n in ("allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw")},
    "ibarrier": {"comm_type=intra": "MPIR_Ibarrier_intra_sched_recursive_doubling",
                 "comm_type=inter": "MPIR_Ibarrier_inter_sched_bcast"},
    "ibcast": {"comm_type=intra": "MPIR_Ibcast_intra_sched_binomial", "comm_type=inter": "MPIR_Ibcast_inter_sched_flat"},
    "iallreduce": {"comm_type=intra": "MPIR_Iallreduce_intra_sched_recursive_doubling",
                   "comm_type=inter": "MPIR_Iallreduce_inter_sched_remote_reduce_local_bcast"},
    "iallgather": {"comm_type=intra": "MPIR_Iallgather_intra_sched_ring",
                   "comm_type=inter": "MPIR_Iallgather_inter_sched_local_gather_remote_bcast"},
    "iallgatherv": {"comm_type=intra": "MPIR_Iallgatherv_intra_sched_ring",
                    "comm_type=inter": "MPIR_Iallgatherv_inter_sched_remote_gather_local_bcast"},
    "ialltoall": {"comm_type=intra": "MPIR_Ialltoall_intra_sched_pairwise",
                  "comm_type=inter": "MPIR_Ialltoall_inter_sched_pairwise_exchange"},
    "ialltoallv": {"comm_type=intra": "MPIR_Ialltoallv_intra_sched_blocked",
                   "comm_type=inter": "MPIR_Ialltoallv_inter_sched_pairwise_exchange"},
    "ialltoallw": {"comm_type=intra": "MPIR_Ialltoallw_intra_sched_blocked",
                   "comm_type=inter": "MPIR_Ialltoallw_inter_sched_pairwise_exchange"},
    "ireduce": {"comm_type=intra": "MPIR_Ireduce_intra_sched_binomial",
                "comm_type=inter": "MPIR_Ireduce_inter_sched_local_reduce_remote_send"},
    "ireduce_scatter": {"comm_type=intra": "MPIR_Ireduce_scatter_intra_sched_recursive_doubling",
                        "comm_type=inter": "MPIR_Ireduce_scatter_inter_sched_remote_reduce_local_scatterv"},
    "ireduce_scatter_block": {
        "comm_type=intra": "MPIR_Ireduce_scatter_block_intra_sched_recursive_doubling",
        "comm_type=inter": "MPIR_Ireduce_scatter_block_inter_sched_remote_reduce_local_scatterv"},
    "igather": {"comm_type=intra": "MPIR_Igather_intra_sched_binomial",
                "comm_type=inter": "MPIR_Igather_inter_sched_long"},
    "iscatter": {"comm_type=intra": "MPIR_Iscatter_intra_sched_binomial",
                 "comm_type=inter": "MPIR_Iscatter_inter_sched_linear"},
    "igatherv": {"": "MPIR_Igatherv_allcomm_sched_linear"},
    "iscatterv": {"": "MPIR_Iscatterv_allcomm_sched_linear"},
    "iscan": {"": "MPIR_Iscan_intra_sched_recursive_doubling"},
    "iexscan": {"": "MPIR_Iexscan_intra_sched_recursive_doubling"},
    **{f"ineighbor_{n}": {"": f"MPIR_Ineighbor_{n}_allcomm_sched_linear"}
       for n in ("allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw")},
}


def _by_comm_size(collective: str, blocks: tuple[Block, ...], default: dict[str, Any],
                  body: Callable[[int, int, Block], dict[str, Any]]) -> dict[str, Any]:
    """One ``comm_size<=N`` test per block of ``blocks`` (``body(procs_min, procs_max, block)``),
    ``default`` below the first and above the last, as MPICH's selection files test sizes."""
    out: dict[str, Any] = {}
    if blocks and blocks[0].procs_min > 1:
        out[f"comm_size<={blocks[0].procs_min - 1}"] = default
    for lo, hi, block in _procs_blocks(blocks, collective not in MPICH_AVG and collective != "barrier"):
        out[f"comm_size<={hi}"] = body(lo, hi, block)
    out["comm_size=any"] = default
    return out


def _inplace_guard(body: dict[str, Any]) -> dict[str, Any]:
    """An in-place alltoall (MPI_IN_PLACE) needs MPICH's sendrecv-replace algorithm."""
    return {"is_sendbuf_inplace=yes": _mpich_leaf("alltoall", "pairwise_sendrecv_replace", {}),
            "is_sendbuf_inplace=no": body}


def mpich_json(table: DecisionTable) -> tuple[dict[str, Any], list[str]]:
    """The MPICH selection tree for ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``: every collective
    MPICH selects for (MPICH asserts when a called one has no branch), the tuned ones from the
    table and the others with one safe algorithm each; and the notes on nearest equivalents."""
    _require_library(table, "mpich", "MPICH")
    own = table.library == "mpich"
    notes: list[str] = []
    tree: dict[str, Any] = {}
    for coll, inter in _MPICH_INTER.items():
        blocks = table.collectives.get(coll, ())
        default = mpich_default(coll)
        if coll == "alltoall":
            default = _inplace_guard(default)
        def body(lo: int, hi: int, block: Block, coll: str = coll) -> dict[str, Any]:
            sizes = _mpich_sizes(coll, block, lo, lambda r: _mpich_branch(coll, r, hi, notes, own))
            return _inplace_guard(sizes) if coll == "alltoall" else sizes
        intra = _by_comm_size(coll, blocks, default, body)
        tree[f"collective={coll}"] = {"comm_type=intra": intra, "comm_type=inter": {f"algorithm={inter}": {}}}
    for coll, branches in _MPICH_UNTUNED.items():
        if "" in branches:
            tree[f"collective={coll}"] = {f"algorithm={branches['']}": {}}
        else:
            tree[f"collective={coll}"] = {cond: {f"algorithm={alg}": {}} for cond, alg in branches.items()}
    return tree, notes


def mpich_text(table: DecisionTable) -> tuple[str, list[str]]:
    """:func:`mpich_json` as text."""
    tree, notes = mpich_json(table)
    return json.dumps(tree, indent=1) + "\n", notes


def _composition(collective: str, number: int) -> dict[str, Any]:
    return {f"composition=MPIDI_{_cap(collective)}_intra_composition_{COMPOSITION_NAMES[number]}": {}}


#: MPICH 5.0's default ch4 composition selection (``maint/tuning/coll/ch4/generic.json``), the
#: intra-communicator subtree of each collective: what a ``native`` rule hands back, and what the
#: collectives colltune does not decide keep.  ``comm_size<8`` is kept as MPICH writes it (its
#: selection search reads it as ``<= 8``, see :func:`mpich_default`): the default as MPICH runs it.
def mpich_ch4_default(collective: str) -> dict[str, Any]:
    """MPICH's default ch4 composition subtree of ``collective`` (see above)."""
    c = _composition
    if collective == "bcast":
        return {"comm_hierarchy=parent": {
                    "comm_size<8": {"avg_msg_size=any": c("bcast", 1)},
                    "comm_size=pow2": {"avg_msg_size<12288": c("bcast", 1), "avg_msg_size<524288": c("bcast", 2),
                                       "avg_msg_size=any": c("bcast", 3)},
                    "comm_size=any": {"avg_msg_size<12288": c("bcast", 1), "avg_msg_size=any": c("bcast", 3)}},
                "comm_hierarchy=any": c("bcast", 3)}
    if collective == "allreduce":
        return {"comm_size=node_comm_size": c("allreduce", 3),
                "comm_size=any": {"comm_hierarchy=parent": {"is_commutative=yes": {"avg_msg_size=any": c("allreduce", 1)},
                                                            "is_commutative=no": c("allreduce", 2)},
                                  "comm_hierarchy=any": c("allreduce", 2)}}
    if collective == "reduce":
        return {"comm_hierarchy=parent": {"is_commutative=yes": {"avg_msg_size<=2048": c("reduce", 2),
                                                                 "avg_msg_size=any": c("reduce", 1)},
                                          "is_commutative=no": c("reduce", 3)},
                "comm_hierarchy=any": c("reduce", 3)}
    if collective == "barrier":
        return {"comm_hierarchy=parent": c("barrier", 1), "comm_hierarchy=any": c("barrier", 2)}
    return c(collective, MPICH_FLAT_COMPOSITION.get(collective, 1))  # network only


#: The collectives of MPICH's ch4 selection that colltune does not decide, as MPICH's default has them.
_CH4_UNTUNED = ("gatherv", "scatterv", "alltoallv", "alltoallw", "allgatherv", "reduce_scatter",
                "reduce_scatter_block", "exscan")


def _ch4_branch(collective: str, rule: Rule, own: bool) -> dict[str, Any]:
    """A rule as a ch4 composition: ``native``, MPICH's default composition subtree; a composition
    decided by the tuner, that composition on a communicator that spans nodes (MPICH's own
    guards: a parent communicator, a commutative operation; its network-only one elsewhere);
    anything else, the network-only composition, where the MPIR selection file decides."""
    if rule.algorithm == NATIVE:
        return mpich_ch4_default(collective)
    flat = MPICH_FLAT_COMPOSITION.get(collective)
    if flat is None:
        return mpich_ch4_default(collective)  # gather, scatter: one composition, network only
    number = MPICH_ALGORITHMS[(collective, rule.algorithm)].composition if own else 0
    if not number:
        return _composition(collective, flat)
    chosen = _composition(collective, number)
    if collective in ("reduce", "allreduce"):
        chosen = {"is_commutative=yes": chosen, "is_commutative=no": _composition(collective, flat)}
    return {"comm_hierarchy=parent": chosen, "comm_hierarchy=any": _composition(collective, flat)}


def mpich_ch4_json(table: DecisionTable) -> dict[str, Any]:
    """The ch4 device's composition selection (``MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE``)
    for ``table``: per collective and size, the node-aware composition the tuner chose, MPICH's
    default where it chose ``native``, and the network-only composition where it chose an MPIR
    container (so that the MPIR selection file of :func:`mpich_json` decides on the whole
    communicator); the collectives colltune does not decide keep MPICH's defaults."""
    _require_library(table, "mpich", "MPICH")
    own = table.library == "mpich"
    tree: dict[str, Any] = {}
    for coll in _MPICH_INTER:
        blocks = table.collectives.get(coll, ())
        intra = _by_comm_size(coll, blocks, mpich_ch4_default(coll), lambda lo, hi, block, coll=coll: _mpich_sizes(
            coll, block, lo, lambda r: _ch4_branch(coll, r, own)))
        tree[f"collective={coll}"] = {"comm_type=intra": intra}
    for coll in _CH4_UNTUNED:
        tree[f"collective={coll}"] = {"comm_type=intra": mpich_ch4_default(coll)}
    tree["collective=scan"] = {"is_node_consecutive=yes": {"composition=MPIDI_Scan_intra_composition_alpha": {}},
                               "is_node_consecutive=no": {"composition=MPIDI_Scan_intra_composition_beta": {}}}
    return tree


#: Where the ch4 composition file of an MPICH export at ``FILE`` goes: ``FILE.ch4.json``.
CH4_SUFFIX = ".ch4.json"


def mpich_files(table: DecisionTable, path: str | os.PathLike[str]) -> tuple[dict[str, str], list[str]]:
    """The files of an MPICH export at ``path`` by name: the MPIR selection (``path``) and the ch4
    compositions (``path`` + :data:`CH4_SUFFIX`); and the notes."""
    text, notes = mpich_text(table)
    return {str(path): text, f"{path}{CH4_SUFFIX}": json.dumps(mpich_ch4_json(table), indent=1) + "\n"}, notes


#: The export formats: what each file is for.
FORMATS = {"mpich_json": "MPICH selection JSON", "openmpi_rules": "Open MPI rules", "openmpi_json": "Open MPI 6 JSON rules"}


def environment(kind: str, path: str | os.PathLike[str], han: bool = False) -> dict[str, str]:
    """The environment that makes an MPI library read the export of ``kind`` (a key of
    :data:`FORMATS`) written at ``path`` (made absolute, as a job may start elsewhere): MPICH's
    selection file and its ch4 composition file (``FILE`` + :data:`CH4_SUFFIX`); Open MPI's
    dynamic rules on, from the file (classic rules or, for Open MPI 6, JSON), and with ``han``
    coll/han's rules from ``FILE`` + :data:`HAN_SUFFIX` (:func:`openmpi_han`)."""
    where = str(Path(path).resolve())
    if kind == "mpich_json":
        return {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": where,
                "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE": where + CH4_SUFFIX}
    if kind in ("openmpi_rules", "openmpi_json"):
        env = {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": where}
        if han:
            env.update({"OMPI_MCA_coll_han_use_dynamic_file_rules": "1",
                        "OMPI_MCA_coll_han_dynamic_rules_filename": where + HAN_SUFFIX})
        return env
    raise ValueError(f"unknown export format {kind!r}; valid: {', '.join(FORMATS)}")


def export_files(kind: str, table: DecisionTable, path: str | os.PathLike[str]) -> tuple[dict[str, str], list[str]]:
    """Every file of ``table``'s export of ``kind`` (a key of :data:`FORMATS`) at ``path``, by
    name, with ``path.env`` (the environment that makes the library read them: :func:`environment`);
    and the notes on nearest equivalents."""
    if kind == "mpich_json":
        files, notes = mpich_files(table, path)
    elif kind in ("openmpi_rules", "openmpi_json"):
        text, notes = openmpi_rules(table) if kind == "openmpi_rules" else openmpi_json_text(table)
        files = {str(path): text}
        han = openmpi_han(table)
        if han is not None:
            files[f"{path}{HAN_SUFFIX}"] = han
    else:
        raise ValueError(f"unknown export format {kind!r}; valid: {', '.join(FORMATS)}")
    env = environment(kind, path, han=f"{path}{HAN_SUFFIX}" in files)
    return {**files, f"{path}.env": environment_text(env)}, notes


def environment_text(env: dict[str, str]) -> str:
    """``env`` as a ``.env`` file: one ``NAME=VALUE`` a line, for ``env $(cat FILE.env) ./app``."""
    return "".join(f"{name}={value}\n" for name, value in env.items())


def openmpi_json_text(table: DecisionTable) -> tuple[str, list[str]]:
    """:func:`openmpi_json` as text."""
    tree, notes = openmpi_json(table)
    return json.dumps(tree, indent=1) + "\n", notes


def _ompi_cell(o: Any) -> str:
    fills = [f"{field} from `{source}`" for field, source in (("segment size", o.segsize_from),
                                                               ("max requests", o.max_requests_from)) if source]
    fills += [f"fan-in/out {o.faninout}"] if o.faninout else []
    text = f"{o.number} `{o.name}`" + (f" ({', '.join(fills)})" if fills else "")
    return text if o.exact else f"{text}; nearest: {o.note}"


def _mpich_cell(m: MPICHAlgorithm) -> str:
    fixed = [f"{k}={v}" for k, v in m.params.items() if v != 0]
    fixed += [f"chunk_size from `{m.chunk_from}`"] if m.chunk_from else []
    fixed += ["k = P - 1" if m.k_from == "procs" else f"k from `{m.k_from}`"] if m.k_from else []
    text = f"`{m.name}`" + (f" ({', '.join(fixed)})" if fixed else "")
    text += f"; on P not a power of two: `{m.pow2_only}`" if m.pow2_only else ""
    return text if m.exact else f"{text}; nearest: {m.note}"


def libraries_markdown() -> str:
    """The documentation of the map from colltune's algorithms to the libraries' (docs/libraries.md)."""
    lines = ["# colltune's algorithms in Open MPI and MPICH", "",
             "Generated from `colltune.tune.libraries` by `colltune libraries-doc`; do not edit by hand.", "",
             ("The exports of `colltune tune` (`--openmpi-rules`, `--openmpi-json`, `--mpich-json`) write each "
              "choice of a decision table as the library's equivalent below; `native` becomes the library's own "
              "choice. Open MPI: the coll/tuned algorithm number and name of Open MPI 5.0, with the rule fields "
              "colltune's parameters fill. MPICH: the selection container `MPIR_<Coll>_intra_<name>` of MPICH 5.0 "
              "with its parameters (those that are 0 are not shown). *nearest* marks an algorithm the library does not have: the export uses the "
              "closest one, says what differs, and prints the same note. How the libraries are made to read the "
              "files is in [tune.md](tune.md)."), ""]
    for coll in dict.fromkeys(c for c, _ in OPENMPI):
        lines += [f"## {coll}", ""]
        if coll in OPENMPI_ROOT_SIZED:
            promise, why = OPENMPI_ROOT_SIZED[coll]
            lines += [(f"Open MPI: the export writes no {coll} rules, leaving {coll} to Open MPI's fixed rules: "
                       f"{why}; unless the table was tuned with {flag(promise)}, which says the program passes "
                       f"the root's arguments on every rank."), ""]
        elif coll in OPENMPI_ANY_OPERATION:
            safe = ", ".join(str(n) for n in sorted(OPENMPI_ANY_OPERATION[coll]))
            lines += [(f"Open MPI: a rules file cannot tell a non-commutative operation, so the export names only "
                       f"{coll} algorithms that combine in rank order for one ({safe}); a rule mapping to another "
                       f"is left to Open MPI's fixed rules, unless the table was tuned with --commutative."), ""]
        lines += ["| colltune | Open MPI | MPICH |", "| --- | --- | --- |"]
        lines += [f"| `{alg}` | {_ompi_cell(o)} | {_mpich_cell(MPICH[(coll, alg)])} |"
                  for (c, alg), o in OPENMPI.items() if c == coll]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
