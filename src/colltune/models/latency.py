"""Broadcast time of a tree over a latency matrix (paper 004 eq. 1-4).

Eq. 2: a rank i whose parent j delivers to it receives at
``T(i) = T(j) + (c - 1)(T_SO + T_G) + L(j, i) + T_RO`` and T(root) = 0; eq. 1: the broadcast
ends at max_i T(i).  Paper 004 writes c for the number of j's children, which charges every
child as if it were the last; colltune charges child number c (1-based, in send order) for the
c - 1 sends before it, so the last child matches the paper and earlier ones are exact.  With
T_SO = T_G = T_RO = 0 (paper 004 on a WAN) this is eq. 3 for the flat tree, ``max_i L(root, i)``,
and eq. 4 for any other tree, ``max_i (L_j + L(j, i))`` with L_j the latency sum of j's path.
Message sizes do not enter: the model is for latency-bound (small) messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from colltune.algorithms.bcast import TREE_VARIANTS, TreeVariant
from colltune.algorithms.trees import flat_tree
from colltune.models.costs import Case, Unavailable, formula
from colltune.models.params import LatencyMatrix

SOURCE = "paper 004 eq. 1-2 over the latency matrix"


def arrival_times(model: LatencyMatrix, children: Mapping[int, Sequence[int]], root: int) -> dict[int, float]:
    """T(i) of eq. 2 for every rank reached from ``root``; ``children[j]`` lists j's children in
    send order (absolute ranks)."""
    times = {root: 0.0}
    stack = [root]
    while stack:
        j = stack.pop()
        for c, i in enumerate(children.get(j, ()), start=1):
            times[i] = times[j] + (c - 1) * (model.o_s + model.gap) + model.latency[j][i] + model.o_r
            stack.append(i)
    return times


def broadcast_time(model: LatencyMatrix, children: Mapping[int, Sequence[int]], root: int) -> float:
    """Eq. 1: the time at which the last rank has the message."""
    return max(arrival_times(model, children, root).values())


def _tree_formula(variant: TreeVariant) -> None:
    """Register eq. 1-2 for the broadcast down ``variant``'s tree shape (its shape parameters, such
    as the k-nomial radix, come from the algorithm's parameters)."""
    shape_params = [p.name for p in variant.params]
    eq = "eq. 3" if variant.shape is flat_tree else "eq. 4"

    @formula("bcast", variant.name, "latency", f"{SOURCE}; {eq} without overheads")
    def cost(model: LatencyMatrix, c: Case) -> float:
        P = c.procs
        if P > len(model.names):  # fewer ranks: the matrix's first P, as in colltune.sim's latency network
            raise Unavailable(f"the latency matrix has {len(model.names)} ranks; P = {P}")
        tree = variant.shape(P, **{k: c.params[k] for k in shape_params})
        children = {(rel + c.root) % P: [(k + c.root) % P for k in kids] for rel, kids in enumerate(tree.children)}
        return broadcast_time(model, children, c.root)


for _variant in TREE_VARIANTS:
    if not (_variant.segmented or _variant.rendezvous):  # the model has neither sizes nor handshakes
        _tree_formula(_variant)
