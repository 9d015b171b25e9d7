"""A simulated run as a Chrome trace (JSON, the Trace Event Format), which Perfetto and
chrome://tracing open: one track per rank, every op a slice from its start to its end.

Sends are named ``send -> R``, receives ``recv <- R`` (the slice runs from posting to
completion, so it shows the wait), local ops by their kind; each slice carries the tag, the bytes
and, for a send whose flow crossed a topology, its flow's end and final rate.  Timestamps are in
microseconds, as the format requires (abstract time units are written as if they were seconds).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from colltune.files import write_atomic
from colltune.schedule import Kind, Schedule
from colltune.sim.engine import SimResult

US = 1e6


def trace_events(schedule: Schedule, result: SimResult) -> list[dict[str, Any]]:
    """The trace's events: thread names, then one complete ("X") event per op."""
    c = schedule.columns
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 0,
                                     "args": {"name": f"colltune simulate ({result.network})"}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": r, "args": {"name": f"rank {r}"}}
               for r in range(schedule.procs)]
    for i in range(len(schedule)):
        kind = int(c["kind"][i])
        start, end = float(result.start[i]), float(result.end[i])
        args: dict[str, Any] = {"op": schedule.local_index(i), "bytes": int(c["length"][i])}
        if kind == Kind.SEND:
            name = f"send -> {int(c['peer'][i])}"
            args["tag"] = int(c["tag"][i])
            if not math.isnan(result.flow_end[i]):
                args["flow_end_s"] = float(result.flow_end[i])
                args["flow_rate"] = float(result.flow_rate[i])
            if result.rto[i]:
                args["retransmission"] = True
        elif kind == Kind.RECV:
            name = f"recv <- {int(c['peer'][i])}"
            args["tag"] = int(c["tag"][i])
        else:
            name = Kind(kind).name.lower()
        events.append({"name": name, "cat": Kind(kind).name.lower(), "ph": "X", "pid": 0, "tid": int(c["rank"][i]),
                       "ts": start * US, "dur": max(end - start, 0.0) * US, "args": args})
    return events


def write_trace(path: str | Path, schedule: Schedule, result: SimResult) -> None:
    """Write the Chrome trace of ``result`` to ``path`` atomically."""
    doc = {"traceEvents": trace_events(schedule, result), "displayTimeUnit": "ns",
           "otherData": {"network": result.network, "total_s": result.total}}
    write_atomic(path, json.dumps(doc))
