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

from colltune.algorithms.trees import Tree, binary_tree, binomial_tree, chain, flat_tree, knomial_tree
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


def _tree_time(model: LatencyMatrix, c: Case, tree: Tree) -> float:
    P = c.procs
    if P != len(model.names):
        raise Unavailable(f"the latency matrix has {len(model.names)} ranks; P = {P}")
    children = {(rel + c.root) % P: [(k + c.root) % P for k in kids] for rel, kids in enumerate(tree.children)}
    return broadcast_time(model, children, c.root)


@formula("bcast", "flat_tree", "latency", f"{SOURCE}; eq. 3 without overheads")
def _flat(model: LatencyMatrix, c: Case) -> float:
    return _tree_time(model, c, flat_tree(c.procs))


@formula("bcast", "chain", "latency", f"{SOURCE}; eq. 4 without overheads")
def _chain(model: LatencyMatrix, c: Case) -> float:
    return _tree_time(model, c, chain(c.procs))


@formula("bcast", "binary_tree", "latency", f"{SOURCE}; eq. 4 without overheads")
def _binary(model: LatencyMatrix, c: Case) -> float:
    return _tree_time(model, c, binary_tree(c.procs))


@formula("bcast", "binomial_tree", "latency", f"{SOURCE}; eq. 4 without overheads")
def _binomial(model: LatencyMatrix, c: Case) -> float:
    return _tree_time(model, c, binomial_tree(c.procs))


@formula("bcast", "knomial_tree", "latency", f"{SOURCE}; eq. 4 without overheads")
def _knomial(model: LatencyMatrix, c: Case) -> float:
    return _tree_time(model, c, knomial_tree(c.procs, c.params["radix"]))
