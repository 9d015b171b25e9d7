"""Test helpers: rebuilding a schedule with mutations."""

from __future__ import annotations

from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS, Buf, Kind, Region, Schedule, ScheduleBuilder


def rebuild(s: Schedule, drop_op: int | None = None, forget: int | None = None,
            retag: int | None = None) -> Schedule:
    """Copy ``s`` op by op, optionally dropping one op, removing one op from every
    dependency list (``forget``), or changing the tag of one op (all by global index)."""
    b = ScheduleBuilder(s.procs, s.buffer_sizes[:, Buf.SEND].tolist(), s.buffer_sizes[:, Buf.RECV].tolist())
    for r in range(s.procs):
        b.need_scratch(r, int(s.buffer_sizes[r, Buf.SCRATCH]))
    c = s.columns
    new: dict[int, int] = {}
    for i in range(len(s)):
        if i == drop_op:
            continue
        idx, start = s.deps(i)
        keep = [(int(d), bool(st)) for d, st in zip(idx, start) if int(d) in new and int(d) != forget]
        req = [new[d] for d, st in keep if not st]
        ireq = [new[d] for d, st in keep if st]
        rank, kind = int(c["rank"][i]), int(c["kind"][i])
        region = Region(Buf(int(c["buf"][i])), int(c["offset"][i]), int(c["length"][i]))
        tag = int(c["tag"][i]) + (1 if i == retag else 0)
        if kind == Kind.SEND:
            new[i] = b.send(rank, int(c["peer"][i]), region, tag, req, ireq)
        elif kind == Kind.RECV:
            new[i] = b.recv(rank, int(c["peer"][i]), region, tag, req, ireq)
        elif kind in (Kind.COPY, Kind.REDUCE):
            src = Region(Buf(int(c["src_buf"][i])), int(c["src_offset"][i]), int(c["length"][i]))
            if kind == Kind.COPY:
                new[i] = b.copy(rank, src, region, req, ireq)
            else:
                new[i] = b.reduce(rank, src, region, REDUCTION_OPS[int(c["redop"][i])],
                                  REDUCTION_DTYPES[int(c["dtype"][i])], req, ireq)
        else:
            new[i] = b.delay(rank, float(c["delay"][i]), req, ireq)
    return b.build(s.meta)


def hockney_critical_path(s: Schedule, alpha: float, beta: float) -> float:
    """The schedule's completion time under paper 002's reading of the Hockney model (seconds).

    Each rank has one outgoing link: a send of x bytes starts once its dependencies allow and the
    link is free, holds the link for x beta and arrives alpha + x beta after it started (so sends
    posted together overlap their start-ups, paper 002 eq. 4).  A receive completes when its
    matching message (MPI order per source and tag) has arrived; copies and reductions are free.
    Operations are posted in order: none starts before its predecessor on the rank has started.
    """
    c = s.columns
    n = len(s)
    start: dict[int, float] = {}
    done: dict[int, float] = {}
    arrival: dict[int, float] = {}
    queues: dict[tuple[int, int, int], list[int]] = {}
    match: dict[int, int] = {}
    for i in range(n):  # FIFO matching per (source, destination, tag)
        if int(c["kind"][i]) == Kind.SEND:
            queues.setdefault((int(c["rank"][i]), int(c["peer"][i]), int(c["tag"][i])), []).append(i)
    for i in range(n):
        if int(c["kind"][i]) == Kind.RECV:
            match[i] = queues[(int(c["peer"][i]), int(c["rank"][i]), int(c["tag"][i]))].pop(0)
    link = [0.0] * s.procs
    first = {int(s.rank_ptr[r]) for r in range(s.procs)}
    while len(done) < n:
        progress = False
        for i in range(n):
            if i in done or (i not in first and i - 1 not in start):
                continue
            idx, st = s.deps(i)
            if any(int(d) not in (start if flag else done) for d, flag in zip(idx, st)):
                continue
            ready = max([start[i - 1]] if i not in first else [0.0])
            ready = max([ready] + [(start if flag else done)[int(d)] for d, flag in zip(idx, st)])
            kind, rank, x = int(c["kind"][i]), int(c["rank"][i]), int(c["length"][i])
            if kind == Kind.SEND:
                t = max(ready, link[rank])
                link[rank] = t + x * beta
                start[i], done[i], arrival[i] = t, t + x * beta, t + alpha + x * beta
            elif kind == Kind.RECV:
                start[i] = ready
                if match[i] not in arrival:
                    continue
                done[i] = max(ready, arrival[match[i]])
            else:
                start[i] = done[i] = ready
            progress = True
        if not progress:
            raise AssertionError("schedule deadlocks under the critical-path evaluation")
    return max(done.values(), default=0.0)


def random_tree(procs: int, root: int, seed: int) -> tuple[tuple[int, int], ...]:
    """A random spanning tree from ``root`` whose subtrees are in general not ranges of ranks:
    each rank, in a shuffled order, hangs under a random rank already in the tree."""
    import numpy as np

    rng = np.random.default_rng(seed)
    others = [r for r in rng.permutation(procs).tolist() if r != root]
    placed, edges = [root], []
    for r in others:
        edges.append((placed[int(rng.integers(len(placed)))], r))
        placed.append(r)
    return tuple(edges)


def run_bounded(command: list[str], timeout: float, what: str, env=None):  # type: ignore[no-untyped-def]
    """Run ``command`` in a new session; on timeout kill the whole group and fail the test, so a
    hang (of mpiexec, or of a rank it left behind) fails fast instead of blocking the suite.
    ``env`` replaces the environment when given."""
    import os
    import signal
    import subprocess

    import pytest

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{what} hung for {timeout} s\nstdout:\n{out}\nstderr:\n{err[-4000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


#: Bytes per size rule of :func:`every_algorithm_table`.
RULE_STEP = 800
#: Parameter values :func:`every_algorithm_table` gives, chosen to give uneven segments.
SYNTHETIC_PARAMS = {"segment_size": 96, "radix": 3, "max_outstanding": 2}


def every_algorithm_table(procs_max: int = 64):  # type: ignore[no-untyped-def]
    """A decision table in which every candidate algorithm of every collective, and native, owns
    one range of RULE_STEP bytes (rule i: sizes i*RULE_STEP .. (i+1)*RULE_STEP - 1, the last one
    unbounded), for 1..procs_max processes; barriers alternate their algorithm by process count."""
    from colltune.profiles.format import Provenance
    from colltune.tune import NATIVE, Block, DecisionTable, Rule, candidates

    colls = {}
    for coll in ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier"):
        names = [NATIVE] + [a.name for a in candidates(coll)]
        params = {a.name: {p.name: SYNTHETIC_PARAMS[p.name] for p in a.params if p.name in SYNTHETIC_PARAMS}
                  for a in candidates(coll)}
        if coll == "barrier":
            colls[coll] = tuple(Block(procs_min=p, procs_max=p, tuned_at=(p,), rules=(
                Rule(size_min=0, algorithm=names[p % len(names)], params=params.get(names[p % len(names)], {})),))
                for p in range(1, procs_max + 1))
            continue
        rules = tuple(Rule(size_min=i * RULE_STEP, size_max=None if i + 1 == len(names) else (i + 1) * RULE_STEP - 1,
                           algorithm=n, params=params.get(n, {})) for i, n in enumerate(names))
        colls[coll] = (Block(procs_min=1, procs_max=procs_max, tuned_at=(1,), rules=rules),)
    return DecisionTable(method="model", model="hockney", profile="synthetic", provenance=Provenance(source="tests"),
                         collectives=colls)
