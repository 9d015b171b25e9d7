"""Broadcast trees over a latency matrix (paper 004), registered by name.

Every builder is a pure function ``(matrix, root) -> edges``: (parent, child) pairs in absolute
ranks, each parent's children in send order, ready for the ``given_tree`` algorithms
(:mod:`colltune.algorithms.given`).  ``latency[i][j]`` is the one-way latency from i to j (s, or
the matrix's abstract unit); the matrix may be asymmetric.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import networkx as nx
import numpy as np

from colltune.algorithms.trees import binomial_tree
from colltune.models.params import LatencyMatrix

Edges = list[tuple[int, int]]


@dataclass(frozen=True)
class TreeBuilder:
    """A registered tree builder: its name, source and documentation."""

    name: str
    source: str
    doc: str
    build: Callable[[LatencyMatrix, int], Edges]

    @property
    def summary(self) -> str:
        return " ".join(self.doc.strip().split("\n\n")[0].split())


BUILDERS: dict[str, TreeBuilder] = {}


def builder(name: str, source: str) -> Callable[[Callable[[LatencyMatrix, int], Edges]],
                                                Callable[[LatencyMatrix, int], Edges]]:
    """Register a tree builder under ``name``; its docstring documents it."""
    def deco(fn: Callable[[LatencyMatrix, int], Edges]) -> Callable[[LatencyMatrix, int], Edges]:
        if name in BUILDERS:
            raise ValueError(f"tree builder {name!r} registered twice")
        BUILDERS[name] = TreeBuilder(name, source, fn.__doc__ or "", fn)
        return fn
    return deco


def _matrix(model: LatencyMatrix) -> np.ndarray:
    return np.asarray(model.latency, dtype=np.float64)


@builder("flat", "paper 004 Fig. 2(c), eq. 3")
def flat(model: LatencyMatrix, root: int) -> Edges:
    """Flat tree: the root sends to every other rank, in rank order.

    Eq. 3 without overheads: max_i L(root, i).
    """
    return [(root, i) for i in range(len(model.names)) if i != root]


@builder("binomial", "paper 004 Fig. 2(a); the binomial tree of paper 003 Table 1")
def binomial(model: LatencyMatrix, root: int) -> Edges:
    """Binomial tree over ranks relative to the root, blind to the latencies.

    Minimises the number of rounds, not the latency of its paths.
    """
    P = len(model.names)
    tree = binomial_tree(P)
    return [((rel + root) % P, (c + root) % P) for rel in tree.preorder for c in tree.children[rel]]


def _oriented(tree: nx.Graph, root: int, lat: np.ndarray) -> Edges:
    """The undirected ``tree`` as edges from ``root``, each parent's children by rising latency."""
    edges: Edges = []
    for parent, kids in nx.bfs_successors(tree, root):
        edges += [(parent, c) for c in sorted(kids, key=lambda c: (lat[parent][c], c))]
    return edges


@builder("mst", "paper 004 Fig. 2(b): minimum spanning tree (Prim)")
def mst(model: LatencyMatrix, root: int) -> Edges:
    """Minimum spanning tree by Prim's algorithm (networkx), taken from the root.

    A link's weight is the larger of its two directions' latencies, so that an asymmetric matrix
    gives one undirected graph; children are sent to by rising latency.  It minimises the sum of
    the links, not the paths: it can build long chains (Fig. 2(b): A, H, G, F, E).
    """
    lat = _matrix(model)
    P = len(lat)
    graph = nx.Graph()
    graph.add_nodes_from(range(P))
    graph.add_weighted_edges_from((i, j, max(lat[i][j], lat[j][i])) for i in range(P) for j in range(i + 1, P))
    return _oriented(nx.minimum_spanning_tree(graph, algorithm="prim"), root, lat)


@builder("hlot", "paper 004 section 3.2, Fig. 3")
def hlot(model: LatencyMatrix, root: int) -> Edges:
    """HLOT, the hierarchical latency-optimal tree: Prim's algorithm that keeps the direct link
    from the root unless an indirect path beats it.

    Repeatedly take the lowest-latency link (c, n) from a reached rank c to an unreached rank n
    whose path latency D[c] + L(c, n) does not exceed the root's direct L(root, n); the direct
    link always qualifies, so every rank is reached no later than in the flat tree (eq. 4 never
    exceeds eq. 3).  Ties go to the lower ranks.
    """
    lat = _matrix(model)
    P = len(lat)
    reached = {root: 0.0}
    edges: Edges = []
    while len(reached) < P:
        c, n = min(((c, n) for c in reached for n in range(P)
                    if n not in reached and reached[c] + lat[c][n] <= lat[root][n]),
                   key=lambda e: (lat[e[0]][e[1]], e))
        reached[n] = reached[c] + lat[c][n]
        edges.append((c, n))
    return edges


@builder("ecef", "earliest completing edge first (Bhat, Raghavendra and Prasanna 1999), on paper 004 eq. 2")
def ecef(model: LatencyMatrix, root: int) -> Edges:
    """Earliest completing edge first: grow the tree by the send that delivers earliest,
    counting the sender's serialisation.

    A reached rank c can start its next send at R(c) = T(c) + k (T_SO + T_G) after k sends; the
    next edge is the (c, n) with the smallest arrival R(c) + L(c, n) + T_RO (eq. 2), so the order
    of a rank's sends follows from the choice.  Without overheads this is the shortest-path tree
    from the root, optimal under eq. 4; with them, a busy rank stops being the best parent.
    """
    lat = _matrix(model)
    P = len(lat)
    step = model.o_s + model.gap
    ready = {root: 0.0}
    edges: Edges = []
    while len(ready) < P:
        c, n = min(((c, n) for c in ready for n in range(P) if n not in ready),
                   key=lambda e: (ready[e[0]] + lat[e[0]][e[1]], e))
        arrival = ready[c] + lat[c][n] + model.o_r
        ready[c] += step
        ready[n] = arrival
        edges.append((c, n))
    return edges


def children(edges: Edges) -> dict[int, list[int]]:
    """Each parent's children in send order."""
    out: dict[int, list[int]] = {}
    for parent, child in edges:
        out.setdefault(parent, []).append(child)
    return out
