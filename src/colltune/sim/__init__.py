"""The simulator: time schedules on network models, with a C++ event-driven engine.

- :func:`simulate` times a schedule on a registered network model (:data:`NETWORKS`), optionally
  carried over a switched :class:`Topology`;
- :mod:`colltune.sim.goal` reads and writes GOAL, LogGOPSim's schedule language;
- :mod:`colltune.sim.trace` writes a simulated run as a Chrome trace (Perfetto).
"""

from colltune.sim.engine import MAX_PROCS, SimResult, SimulationError, simulate
from colltune.sim.network import NETWORKS, Network, NetworkError, default_network, profile_network, topology_for
from colltune.sim.topology import Node, Topology, TopologyError, binary_tree, read_topology, star, two_level

__all__ = [
    "MAX_PROCS", "NETWORKS", "Network", "NetworkError", "Node", "SimResult", "SimulationError", "Topology",
    "TopologyError", "binary_tree", "default_network", "profile_network", "read_topology", "simulate", "star",
    "topology_for", "two_level",
]
