"""The broadcast time of a tree: paper 004 eq. 1-4, and the simulator with per-pair latency."""

from __future__ import annotations

from colltune.algorithms import REGISTRY
from colltune.grid.trees import Edges, children
from colltune.models.latency import broadcast_time
from colltune.models.params import LatencyMatrix


def tree_time(model: LatencyMatrix, edges: Edges, root: int, overheads: bool = True) -> float:
    """Eq. 1-2 down ``edges`` from ``root`` (s, or the matrix's unit); without ``overheads``,
    T_SO = T_G = T_RO = 0: eq. 3 for the flat tree, eq. 4 for the others."""
    if not overheads:
        model = model.model_copy(update={"o_s": 0.0, "gap": 0.0, "o_r": 0.0})
    return broadcast_time(model, children(edges), root)


def simulated_time(model: LatencyMatrix, edges: Edges, root: int, size: int = 1) -> float:
    """The ``given_tree`` broadcast of ``size`` bytes down ``edges``, simulated event by event on
    the ``latency`` network model (per-pair latency, the matrix's overheads)."""
    from colltune.sim import simulate

    schedule = REGISTRY.get("bcast", "given_tree").schedule(len(model.names), root, size, edges=tuple(edges))
    return simulate(schedule, "latency", model).total
