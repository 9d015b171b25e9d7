"""Cores that hosts share: the pattern the probe times to measure a topology's ``message_cpu``,
as a schedule, and its simulated cost (no MPI here; :mod:`colltune.probe.run` times it).

On a cluster emulated on one machine (the testbed: 8 hosts on 2 cores) every rank's sends and
receives take processor time of the same few cores, so a step in which every rank sends costs more
than the same step between two ranks; :class:`~colltune.sim.topology.Topology` models it with
``cores`` and ``message_cpu`` (a message waits for a core at each end where more want them than
there are), and :func:`colltune.probe.fit.fit_message_cpu` finds the ``message_cpu`` that makes the
simulated excess of :func:`shift_schedule` over all ranks against two match the measured one, and
:func:`colltune.probe.fit.fit_send_hold` the ``send_hold`` (a random hold at every send) that does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from colltune.models.params import Hockney
from colltune.schedule import Buf, Region, Schedule, ScheduleBuilder
from colltune.sim import Topology, simulate


def shift_schedule(procs: int, size: int, among: int, distance: int = 1) -> Schedule:
    """:meth:`colltune.probe.measure.Meter.shift`'s pattern both ways as a schedule of ``procs``
    ranks: ranks 0 .. among-1 each send ``size`` bytes to the rank ``distance`` after it and
    receive as many from the one ``distance`` before it (modulo ``among``), at once."""
    if not 2 <= among <= procs:
        raise ValueError(f"a shift needs 2 to {procs} ranks, not {among}")
    if not 1 <= distance < among:
        raise ValueError(f"a shift among {among} ranks moves by 1 to {among - 1}, not {distance}")
    b = ScheduleBuilder(procs, send_bytes=size, recv_bytes=size)
    for r in range(among):
        b.recv(r, (r - distance) % among, Region(Buf.RECV, 0, size))
        b.send(r, (r + distance) % among, Region(Buf.SEND, 0, size))
    return b.build()


def shift_excess(topology: Topology, hockney: Hockney, sizes: Sequence[int],
                 cost: Literal["message_cpu", "send_hold"] = "message_cpu") -> Callable[[int, float], float]:
    """``excess(size, v)``: how much longer (s) the shift of every rank of ``topology`` takes than
    that of ranks 0 and 1 alone, simulated with ``hockney`` over ``topology`` whose messages take
    v seconds of a shared core at each end (``cost`` "message_cpu"; ``topology.cores`` must be
    set) or whose sends each hold their sender for a random time of mean v ("send_hold")."""
    if cost == "message_cpu" and topology.cores is None:
        raise ValueError(f"topology {topology.name!r} gives no cores that its hosts share")
    procs = topology.procs
    schedules = {(s, k): shift_schedule(procs, s, k) for s in sizes for k in (procs, 2)}

    def excess(size: int, v: float) -> float:
        topo = topology.model_copy(update={"message_cpu": ((1.0, v),)} if cost == "message_cpu" else
                                   {"message_cpu": None, "send_hold": v})
        return (simulate(schedules[size, procs], "hockney", hockney, topology=topo).total
                - simulate(schedules[size, 2], "hockney", hockney, topology=topo).total)

    return excess
