"""Grids (paper 004): latency matrices, latency-aware broadcast trees and multi-level topologies.

- :mod:`colltune.grid.matrix`: latency matrices from CSV, JSON or a profile;
- :mod:`colltune.grid.trees`: the tree builders by name (:data:`BUILDERS`): flat, binomial, MST,
  HLOT and earliest completing edge first;
- :mod:`colltune.grid.levels`: grouping into levels and composing a tree per level;
- :mod:`colltune.grid.predict`: a tree's broadcast time by eq. 1-4 and by simulation.

Trees are edge lists that the ``given_tree`` algorithms of the registry turn into broadcast,
scatter, gather and reduce schedules.
"""

from colltune.grid.levels import auto_partitions, compose, group_levels
from colltune.grid.matrix import LatencyFileError, read_latency
from colltune.grid.predict import simulated_time, tree_time
from colltune.grid.trees import BUILDERS, TreeBuilder, children

__all__ = ["BUILDERS", "LatencyFileError", "TreeBuilder", "auto_partitions", "children", "compose", "group_levels",
           "read_latency", "simulated_time", "tree_time"]
