"""Multi-level topologies (paper 004 section 3.3): ranks grouped into levels, a tree builder per
level, composed into one tree over the whole communicator.

Levels run from the top (for example heavy WAN between sites) to the bottom (a LAN, a node).
A level is a partition of the ranks that refines the one above it; the groups are given by the
user or found from the latency matrix by :func:`group_levels`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import networkx as nx
import numpy as np

from colltune.errors import ParameterError
from colltune.grid.trees import BUILDERS, Edges
from colltune.models.params import LatencyMatrix

#: Default factor of :func:`group_levels`: a latency more than twice the one below starts a level.
JUMP = 2.0


def group_levels(latency: Sequence[Sequence[float]] | np.ndarray,
                 factor: float = JUMP) -> list[tuple[float, list[list[int]]]]:
    """Ranks grouped into levels by latency (paper 004 section 3.3's automatic grouping).

    The rule: sort the distinct off-diagonal latencies of the symmetrised matrix (the larger of
    both directions); wherever one exceeds the previous by more than ``factor``, a new level
    starts.  A level's threshold is the largest latency below its jump; its groups are the
    connected components of the graph joining ranks whose latency is at most the threshold.
    Returns ``[(threshold, groups), ...]`` from the tightest level to the whole job.
    """
    lat = np.asarray(latency, dtype=np.float64)
    n = lat.shape[0]
    sym = np.maximum(lat, lat.T)
    off = np.unique(sym[~np.eye(n, dtype=bool)]) if n > 1 else np.zeros(0)
    thresholds = [float(a) for a, b in itertools.pairwise(off) if b > factor * max(a, 0.0)]
    if off.size:
        thresholds.append(float(off[-1]))
    levels = []
    for t in thresholds:
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from((i, j) for i in range(n) for j in range(i + 1, n) if sym[i, j] <= t)
        levels.append((t, sorted(sorted(c) for c in nx.connected_components(graph))))
    return levels


def auto_partitions(model: LatencyMatrix, factor: float = JUMP) -> list[list[list[int]]]:
    """The partitions of :func:`group_levels` from the top down, without the whole job."""
    return [groups for _, groups in reversed(group_levels(model.latency, factor)[:-1])]


def _restricted(model: LatencyMatrix, members: Sequence[int]) -> LatencyMatrix:
    lat = np.asarray(model.latency)
    return model.model_copy(update={"names": tuple(model.names[i] for i in members),
                                    "latency": tuple(tuple(float(lat[i][j]) for j in members) for i in members)})


def compose(model: LatencyMatrix, root: int, partitions: Sequence[Sequence[Sequence[int]]],
            builders: Sequence[str]) -> Edges:
    """One tree over every rank: ``builders[0]`` joins the groups of ``partitions[0]`` (through
    their leaders), and inside each group the rest is composed from ``partitions[1:]`` and
    ``builders[1:]``; the last builder spans each bottom group.  A group's leader is the root if
    the group holds it, else the member with the lowest latency from the root.  Needs one
    builder more than there are partitions, each partition refining the one before."""
    if len(builders) != len(partitions) + 1:
        raise ParameterError(f"{len(partitions)} levels of groups need {len(partitions) + 1} builders, "
                             f"one per level from the top; got {len(builders)}")
    for name in builders:
        if name not in BUILDERS:
            raise ParameterError(f"unknown tree builder {name!r}; valid: {', '.join(BUILDERS)}")
    P = len(model.names)
    for k, part in enumerate(partitions):
        ranks = sorted(r for g in part for r in g)
        if ranks != list(range(P)):
            raise ParameterError(f"level {k + 1}: the groups must hold every rank 0..{P - 1} exactly once")
    lat = np.asarray(model.latency)
    return _compose(model, lat, list(range(P)), root, [list(map(list, p)) for p in partitions], list(builders))


def _compose(model: LatencyMatrix, lat: np.ndarray, members: list[int], root: int,
             partitions: list[list[list[int]]], builders: list[str]) -> Edges:
    if not partitions:
        local = BUILDERS[builders[0]].build(_restricted(model, members), members.index(root))
        return [(members[a], members[b]) for a, b in local]
    inside = set(members)
    groups = [[r for r in g if r in inside] for g in partitions[0]]
    groups = [g for g in groups if g]
    leaders = [root if root in g else min(g, key=lambda r: (lat[root][r], r)) for g in groups]
    top = BUILDERS[builders[0]].build(_restricted(model, leaders), leaders.index(root))
    edges = [(leaders[a], leaders[b]) for a, b in top]
    for group, leader in zip(groups, leaders, strict=True):
        edges += _compose(model, lat, group, leader, partitions[1:], builders[1:])
    return edges
