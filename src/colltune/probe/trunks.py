"""Links between switches that carry data both ways: the pattern the probe times to measure a
topology's ``trunk_duplex``, and its simulated time (no MPI here; :mod:`colltune.probe.run` times
it).

In a tree of switches, the uplinks of an all-to-all carry data both ways at once, and a flow's
acknowledgements queue behind the data going the other way in the switch's port;
:meth:`colltune.sim.topology.Topology.trunk_duplex_factor` models the share of such a link a flow
can still use.  Every rank sending to the rank half the job away and receiving from it (ranks are
placed on hosts in order, so on a tree of equal subtrees the two halves sit under different
switches) loads those links both ways, and :func:`colltune.probe.fit.fit_trunk_duplex` finds the
share at which the simulated time of that shift matches the measured one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from colltune.models.params import Hockney
from colltune.probe.cores import shift_schedule
from colltune.sim import Topology, simulate


def trunk_distance(topology: Topology) -> int | None:
    """How far (in ranks) the probe's shift moves on ``topology`` to load its links between
    switches both ways: half its ranks, if that shift crosses such a link; None otherwise (a
    star, or fewer than 2 ranks)."""
    procs = topology.procs
    if procs < 2:
        return None
    distance = procs // 2
    parent, _, _, _, host_node = topology.arrays()
    is_host = np.zeros(len(parent), dtype=bool)
    is_host[host_node] = True
    ranks = np.arange(procs)
    _, paths = topology.routes(ranks, (ranks + distance) % procs)
    crossed = {v for climb, _, _ in paths for v in climb if not is_host[v] and parent[v] >= 0}
    return distance if crossed else None


def trunk_shift_time(topology: Topology, hockney: Hockney, sizes: Sequence[int]) -> Callable[[int, float], float]:
    """``time(size, e)``: the simulated time (s) of the shift by :func:`trunk_distance` over
    ``topology`` with ``hockney``, each of its links between switches giving a share ``e`` to
    flows while it carries data the other way (the topology's other tables as they are)."""
    distance = trunk_distance(topology)
    if distance is None:
        raise ValueError(f"topology {topology.name!r} has no link between switches that a shift loads both ways")
    procs = topology.procs
    schedules = {s: shift_schedule(procs, s, procs, distance) for s in sizes}

    def time(size: int, share: float) -> float:
        topo = topology.model_copy(update={"trunk_duplex": ((1.0, share),)})
        return simulate(schedules[size], "hockney", hockney, topology=topo).total

    return time
