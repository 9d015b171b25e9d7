"""Broadcast, scatter, gather and reduce down a tree given as data: its edges.

The tree is a rank-independent parameter, ``edges``: (parent, child) pairs in absolute ranks, each
parent sending to its children in the order their edges are listed.  It is what
:mod:`colltune.grid` builds from a latency matrix (flat, binomial, MST, HLOT, earliest completion
first, multi-level compositions) and what ``colltune grid`` prints; empty edges mean the flat
tree.  The schedules are the generic tree ones of each collective, so any spanning tree works.
"""

from __future__ import annotations

from colltune.algorithms.bcast import tree_bcast
from colltune.algorithms.gather import tree_gather
from colltune.algorithms.reduce import tree_reduce
from colltune.algorithms.registry import Param, register
from colltune.algorithms.scatter import tree_scatter
from colltune.algorithms.trees import from_edges
from colltune.collectives import Problem
from colltune.schedule import ScheduleBuilder

SOURCE = "paper 004 (a tree from the latency matrix, section 3); any tree built by colltune.grid"
EDGES = Param("edges", tuple[tuple[int, int], ...], (),
              "the tree: (parent, child) pairs in absolute ranks, children sent to in list order; "
              "empty for the flat tree; JSON on the command line, e.g. [[0,2],[2,1]]")
CONSTRAINTS = "any P >= 1, any size >= 0; the edges must span ranks 0..P-1 from the root"


@register("bcast", "given_tree", source=SOURCE, params=(EDGES,), constraints=CONSTRAINTS)
def _bcast_given(b: ScheduleBuilder, problem: Problem, edges: tuple[tuple[int, int], ...]) -> None:
    """Broadcast down the tree `edges`: each rank forwards the whole message to its children in order.

    Paper 004 eq. 1-2: rank i has the message at T(parent) + (c-1)(T_SO + T_G) + L(parent, i) + T_RO
    for the c-th child; eq. 4 without overheads.
    """
    tree_bcast(b, problem.procs, problem.root, problem.size, from_edges(problem.procs, problem.root, edges))


@register("scatter", "given_tree", source=SOURCE, params=(EDGES,), constraints=CONSTRAINTS)
def _scatter_given(b: ScheduleBuilder, problem: Problem, edges: tuple[tuple[int, int], ...]) -> None:
    """Scatter down the tree `edges`: each rank receives its subtree's blocks, keeps its own, forwards the rest.

    A child's blocks travel in one message per run that is contiguous in both ranks' buffers.
    """
    tree_scatter(b, problem, from_edges(problem.procs, problem.root, edges))


@register("gather", "given_tree", source=SOURCE, params=(EDGES,), constraints=CONSTRAINTS)
def _gather_given(b: ScheduleBuilder, problem: Problem, edges: tuple[tuple[int, int], ...]) -> None:
    """Gather up the tree `edges`: each rank collects its subtree's blocks and sends them to its parent.

    A child's blocks travel in one message per run that is contiguous in both ranks' buffers.
    """
    tree_gather(b, problem.procs, problem.root, problem.size, from_edges(problem.procs, problem.root, edges))


@register("reduce", "given_tree", source=SOURCE, params=(EDGES,), constraints=CONSTRAINTS, needs_commutative=True)
def _reduce_given(b: ScheduleBuilder, problem: Problem, edges: tuple[tuple[int, int], ...]) -> None:
    """Reduce up the tree `edges`: each rank combines its children's partial results with its own, then sends.

    The tree's subtrees need not be ranges of ranks, so the operation must be commutative.
    """
    tree_reduce(b, problem, problem.root, from_edges(problem.procs, problem.root, edges), problem.root)
