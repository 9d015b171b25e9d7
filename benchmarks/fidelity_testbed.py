"""How well colltune's predictions hold on the emulated cluster (needs root): issue #18's fidelity benchmark.

Run: ``python benchmarks/fidelity_testbed.py [--shapes star,tree:2] [--hosts 8] [--ranks-per-host 1]
[--placement block] [--probe-topology given] [--link 100Mbit] [--tcp cubic]
[--sizes 4KiB,64KiB,512KiB] [--probe default] [--reps 5] [--fill 0.05] [--warmup 2] [--rounds 3]
[--short-rounds 9] [--playoff 5] [--keep DIR]
[--plot FILE]
[--testbed NAME]``;
``--repredict DIR`` predicts the times kept in DIR again with the installed colltune (no root needed);
``--send-hold SECONDS`` predicts with a random hold of that mean at every send (the topology's ``send_hold``);
``--set FIELD=JSON`` (repeatable) with any field of the profile's topology set so, e.g. ``--set
'message_cpu=[[1, 1e-5]]'`` (10 us of a shared core per message) or ``--set duplex=null``;
``--against DIR`` also scores the times another run kept in DIR as a predictor (``measured:NAME``): the
figures of a model that knew that run's times exactly, how far two runs agree; the results file
carries them as a row of its own (the benchmark's run-to-run spread, against which a model's misses
are judged).

For each shape it brings up a testbed (``colltune testbed up``; ``tree:2`` gets 2:1 oversubscribed
uplinks: two hosts of ``--link`` share one uplink of ``--link``), then:

1. probes it as a user would who knows the network's shape (``colltune testbed run -- python -m
   colltune probe --topology FILE`` with the testbed's topology file, timed), or with
   ``--probe-topology none`` as one who does not (the probe infers a star of the hosts it finds);
2. times every registered algorithm of every collective (with its default parameters) and
   ``native`` at each size, root 0, in one MPI job: a plan built once, ``--warmup`` runs, then
   ``--reps`` runs (more for a short call, to fill ``--fill`` seconds: :data:`FILL_FACTOR`) each
   started after a barrier, the slowest rank's time per run, the median;
   every case once per round, over ``--rounds`` rounds (after the first in a shuffled order, so
   that no case always follows the same one), a case that ran below :data:`SHORT_CALL` in one of
   them over ``--short-rounds`` in all, and the median of the rounds;
3. predicts each case with every predictor the profile supports (each network model of the
   simulator, each endpoint model again over the testbed's own topology file as the probe kept
   it in the profile, with the retransmission timeout its incast measured, each analytic model;
   :mod:`colltune.report.fidelity`);

4. where the default predictor's choice of a cell is not the algorithm measured fastest there,
   times the two again, alternating, in ``--playoff`` rounds of their own (one MPI job, while the
   testbed is still up), and judges the cell by those rounds
   (:func:`colltune.report.fidelity.checked_best_within`): the fastest of some ten noisy medians
   is biased low, so a choice that runs as fast is found behind it by chance;

and writes a results file per shape (``fidelity-SHAPE.json`` in ``--keep``, the playoff's rounds in
``playoff-SHAPE.json``), a figure (predicted against measured, log-log, one colour per collective)
and prints, per predictor, the cases, the median and 90th-percentile relative error, how often the
predicted best is within 5 % of the measured best (for the default predictor also after the
playoff), and the regret (from the rounds).  ``native`` (MPICH's own choice) is measured for reference and
left out of the figures.

With ``--ranks-per-host K`` every host runs K ranks (``--placement block`` or ``round-robin``),
the hierarchical algorithms are timed and predicted too, on the hosts the probe found, and the
results go to ``fidelity_testbed_NxK_PLACEMENT.json``.

8 ranks on 2 cores: every rank busy-polls while it waits, so small messages carry CPU noise.
``--link`` slower than 100Mbit (e.g. 20Mbit) is the extra configuration in which the network
dominates more.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from colltune.report.fidelity import FidelityCase
    from colltune.sim import Topology

COLLECTIVES = ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce", "barrier")
#: At most this many times ``--reps`` runs per round, for a call short enough that ``--reps`` runs
#: fill less than ``--fill`` seconds.  With 5 runs per round the barriers' round medians (0.2-0.3 ms
#: calls) spread over 0.18-0.59 ms on both shapes (the runs of 2026-11-26), and which barrier was
#: measured best changed from run to run; 100 runs of 0.2 ms fill 20 ms.
FILL_FACTOR = 20
#: A case that ran below this many seconds in one of the first ``--rounds`` rounds is timed in
#: ``--short-rounds`` rounds in all (the extra rounds hold only such cases, shuffled).  On the star
#: and tree:2 of 2026-12-01 the round medians of a 0.2-5 ms case spread over up to 2.1x (the
#: pairwise all-to-all of 4 KiB: 5.42, 2.94 and 2.62 ms; the dissemination barrier 0.22-0.38 ms),
#: so that the median of three rounds could put any of four algorithms first; a round of such a
#: case costs about 0.15 s (the rest, the warm-ups and ``--fill``).  The tuner's
#: :data:`colltune.tune.timing.MEAN_CALL` is the same bound: below it, a call's timing is noisy
#: enough that the tuner times it again.
SHORT_CALL = 0.01


def colltune(*args: str, timeout: float = 7200, progress: bool = False) -> str:
    """Run ``python -m colltune ARGS``; its output, or with ``progress`` its progress lines shown as they come."""
    res = subprocess.run([sys.executable, "-m", "colltune", *args], stdout=subprocess.PIPE,
                         stderr=None if progress else subprocess.PIPE, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        sys.exit(f"colltune {' '.join(args)} failed:\n{(res.stderr or '')[-3000:]}")
    return res.stdout


def round_order(cases: int, rnd: int) -> list[int]:
    """The order in which round ``rnd`` (from 0) times the ``cases``: the listed order in the first
    round, a shuffle seeded by the round in the others (every rank computes the same).

    Why: on a TCP network a case can pay for the one before it.  In the listed order every 4 KiB
    reduce follows the 512 KiB all-to-alls; on the star (2026-11-25) all of them ran 3.6-22 ms in
    two of three rounds and 0.65-2.2 ms in the third, so the median of the rounds kept the
    aftermath.  Shuffled, a case follows a given one in one round at most.  The aftermath turned
    out to be the CPU scheduler's, not the network's, and every case now starts after every rank
    has slept (:data:`colltune.tune.measure.REST`); the shuffle stays, so that what remains of a
    case's dependence on the one before does not repeat in every round."""
    order = list(range(cases))
    if rnd:
        random.Random(rnd).shuffle(order)
    return order


def time_job(out: str, collectives: list[str], sizes: list[int], reps: int, warmup: int, rounds: int,
             fill: float = 0.0, short_rounds: int = 0) -> None:
    """Under mpiexec: time every case in each of ``rounds`` rounds (:func:`round_order`), then
    each case that ran below :data:`SHORT_CALL` in one of those rounds in further rounds of only
    such cases until it has ``short_rounds``; rank 0 writes them as JSON to ``out``, each
    case's median the median of its rounds' and its quartiles the extremes of theirs, so that a
    disturbance during one round does not make the figure, and each round's median and place in
    its round beside them (every rank times the same cases: a timing is the slowest rank's)."""
    from mpi4py import MPI

    from colltune.files import write_atomic
    from colltune.tune.measure import REST, time_collective
    from colltune.runtime.hosts import host_labels
    from colltune.tune.select import candidates

    comm = MPI.COMM_WORLD
    procs, me = comm.Get_size(), comm.Get_rank()
    hosts = len(set(host_labels(comm)))
    shared = 1 < hosts < procs  # some host has several ranks: the hierarchical algorithms too
    plan = [(coll, size, name, default_params(coll, name, procs, size))
            for coll in collectives for size in ([0] if coll == "barrier" else sizes)
            for name in ["native", *(a.name for a in candidates(coll, shared))]]
    timings: list[list] = [[] for _ in plan]
    places: list[list[int]] = [[] for _ in plan]
    short: list[int] = []
    for rnd in range(max(rounds, short_rounds)):
        if rnd == rounds:
            short = [i for i, found in enumerate(timings) if min(t.median for t in found) < SHORT_CALL]
        order = round_order(len(plan), rnd) if rnd < rounds else [short[j] for j in round_order(len(short), rnd)]
        for place, i in enumerate(order):
            coll, size, name, params = plan[i]
            t = time_collective(comm, coll, name, size, params, reps, warmup, rest=REST, fill=fill,
                                fill_factor=FILL_FACTOR)
            timings[i].append(t)
            places[i].append(place)
            if me == 0:
                print(f"round {rnd + 1}/{max(rounds, short_rounds)} {coll}/{name} {size} B: {t.median * 1e3:.2f} ms",
                      file=sys.stderr, flush=True)
    cases = [{"collective": coll, "algorithm": name, "size": size, "params": params,
              "median": statistics.median(t.median for t in found), "q1": min(t.q1 for t in found),
              "q3": max(t.q3 for t in found), "reps": sum(t.reps for t in found),
              "rounds": [t.median for t in found], "places": place}
             for (coll, size, name, params), found, place in zip(plan, timings, places, strict=True)]
    if me == 0:
        write_atomic(out, json.dumps({"library": MPI.Get_library_version().strip().splitlines()[0], "procs": procs,
                                      "hosts": sorted(set(comm.gather(MPI.Get_processor_name()) or [])),
                                      "cases": cases}))
    else:
        comm.gather(MPI.Get_processor_name())


def default_params(collective: str, name: str, procs: int, size: int) -> dict:
    """The parameters ``name`` runs with by default at ``procs`` ranks and ``size`` bytes (none for ``native``)."""
    from colltune.algorithms import REGISTRY

    return {} if name == "native" else dict(REGISTRY.get(collective, name).schedule(procs, 0, size).meta["params"])


def playoff_job(out: str, pairs_file: str, reps: int, warmup: int, rounds: int, fill: float = 0.0) -> None:
    """Under mpiexec: time the algorithms of each cell of ``pairs_file`` (a JSON list of
    ``[collective, size, [algorithm, ...]]``) as :func:`time_job` times a case, in ``rounds``
    rounds, every other round in reverse order; rank 0 writes each case's round medians (s) as
    JSON to ``out``."""
    from mpi4py import MPI

    from colltune.files import write_atomic
    from colltune.tune.measure import REST, time_collective

    comm = MPI.COMM_WORLD
    procs = comm.Get_size()
    plan = [(coll, size, name, default_params(coll, name, procs, size))
            for coll, size, names in json.loads(Path(pairs_file).read_text()) for name in names]
    found: list[list[float]] = [[] for _ in plan]
    for rnd in range(rounds):
        for i in (range(len(plan)) if rnd % 2 == 0 else reversed(range(len(plan)))):
            coll, size, name, params = plan[i]
            t = time_collective(comm, coll, name, size, params, reps, warmup, rest=REST, fill=fill,
                                fill_factor=FILL_FACTOR)
            found[i].append(t.median)
            if comm.Get_rank() == 0:
                print(f"playoff {rnd + 1}/{rounds} {coll}/{name} {size} B: {t.median * 1e3:.2f} ms", file=sys.stderr,
                      flush=True)
    if comm.Get_rank() == 0:
        write_atomic(out, json.dumps({"rounds": rounds, "cases": [
            {"collective": coll, "size": size, "algorithm": name, "rounds": times}
            for (coll, size, name, _), times in zip(plan, found, strict=True)]}))


def read_playoff(d: Path, shape: str) -> dict[tuple[str, int], dict[str, list[float]]]:
    """The playoff rounds kept in ``d`` for ``shape`` (none if it had no playoff), per cell and algorithm."""
    path = d / f"playoff-{tag(shape)}.json"
    out: dict[tuple[str, int], dict[str, list[float]]] = {}
    for c in json.loads(path.read_text())["cases"] if path.is_file() else []:
        out.setdefault((c["collective"], c["size"]), {})[c["algorithm"]] = c["rounds"]
    return out


def tag(shape: str) -> str:
    """``shape`` as it stands in file names: ``tree:2`` -> ``tree2``."""
    return shape.replace(":", "")


def run_shape(shape: str, args: argparse.Namespace, d: Path) -> Path:
    """Bring up ``shape``, probe, time, tear down; returns the results file."""
    from colltune.files import write_atomic

    up = ["testbed", "up", "--name", args.testbed, "--hosts", str(args.hosts), "--link", args.link, "--topology", shape,
          "--ranks-per-host", str(args.ranks_per_host), *(["--tcp", args.tcp] if args.tcp else [])]
    run = ["testbed", "run", "--name", args.testbed, "--placement", args.placement, "--"]
    if shape.startswith("tree:"):
        up += ["--uplink", args.link]  # K hosts of --link share one uplink of --link
    out = colltune(*up)
    topo_file = d / f"topology-{tag(shape)}.json"
    topo_path = Path(out.strip().rsplit(" ", 1)[-1])
    write_atomic(topo_file, topo_path.read_text())
    try:
        print(f"[{shape}] probe ({args.probe}) ...", flush=True)
        start = time.perf_counter()
        mode = [] if args.probe == "default" else [f"--{args.probe}"]
        given = ["--topology", str(topo_file)] if args.probe_topology == "given" else []
        colltune(*run, sys.executable, "-m", "colltune", "probe", *mode, *given,
                 "-o", str(d / f"profile-{tag(shape)}.json"))
        probe_s = time.perf_counter() - start
        print(f"[{shape}] probe took {probe_s:.0f} s; timing every algorithm ...", flush=True)
        colltune(*run, sys.executable, __file__, "--time-job",
                 str(d / f"times-{tag(shape)}.json"), "--collectives", args.collectives, "--sizes", args.sizes,
                 "--reps", str(args.reps), "--fill", str(args.fill), "--warmup", str(args.warmup), "--rounds",
                 str(args.rounds), "--short-rounds", str(args.short_rounds), progress=True)
        path = predict_shape(shape, args, d, probe_s)
        if args.playoff:
            from colltune.report.fidelity import playoff_pairs, read_fidelity

            results = read_fidelity(path)
            measured = [c for c in results.cases if c.algorithm != "native"]
            pairs = playoff_pairs(measured, results.default_predictor, results.procs, results.hosts)
            (d / f"playoff-{tag(shape)}.json").unlink(missing_ok=True)
            if pairs:
                print(f"[{shape}] playoff of {len(pairs)} cells whose predicted choice is not the measured fastest "
                      f"({args.playoff} rounds) ...", flush=True)
                listed = d / f"playoff-cells-{tag(shape)}.json"
                write_atomic(listed, json.dumps([[coll, size, list(two)] for (coll, size), two in pairs.items()]))
                colltune(*run, sys.executable, __file__, "--playoff-job", str(d / f"playoff-{tag(shape)}.json"),
                         "--playoff-cells", str(listed), "--reps", str(args.reps), "--fill", str(args.fill),
                         "--warmup", str(args.warmup), "--playoff", str(args.playoff), progress=True)
    finally:
        subprocess.run([sys.executable, "-m", "colltune", "testbed", "down", "--name", args.testbed], check=False)
    return path


def predict_shape(shape: str, args: argparse.Namespace, d: Path, probe_s: float | None) -> Path:
    """Predict the cases timed on ``shape`` (kept in ``d``) and write its results file."""
    from colltune.files import write_atomic
    from colltune.profiles import read_profile
    from colltune.profiles.format import Provenance
    from colltune.report.fidelity import FidelityResults, default_predictor, predict_cases, predictors, with_measured
    from colltune.sim import read_topology

    profile = read_profile(d / f"profile-{tag(shape)}.json")
    # the probe keeps the testbed's file in the profile, with what it measured (the incast's T_RTO)
    topology = profile.topology or read_topology(d / f"topology-{tag(shape)}.json")
    hold = [] if args.send_hold is None else [f"send_hold={args.send_hold!r}"]
    topology = with_fields(topology, hold + (args.set or []))
    timed = json.loads((d / f"times-{tag(shape)}.json").read_text())
    cases = kept_cases(timed)
    print(f"[{shape}] predicting {len(cases)} cases ...", flush=True)
    hosts = topology.host_labels(timed["procs"])
    cases = predict_cases(cases, timed["procs"], predictors(profile, topology), hosts)
    if args.against:  # another run's measured times as a predictor: the benchmark's repeatability
        kept = Path(args.against) / f"times-{tag(shape)}.json"
        if not kept.is_file():
            raise SystemExit(f"--against {args.against}: no {kept.name} there (a directory kept by --keep)")
        cases = with_measured(cases, kept_cases(json.loads(kept.read_text())), against_name(args.against))
    how = (f"sizes {args.sizes}, {args.reps} runs (up to {FILL_FACTOR}x to fill {args.fill} s) after {args.warmup} "
           f"warm-ups, root 0, median of {args.rounds} rounds ({args.short_rounds} below {SHORT_CALL * 1e3:g} ms)")
    prov = profile.provenance.model_copy(update={"source": "benchmarks/fidelity_testbed.py", "notes": (how,)})
    results = FidelityResults(network=f"{shape} {args.hosts} hosts {args.link}", procs=timed["procs"],
                              profile=str(d / f"profile-{tag(shape)}.json"),
                              default_predictor=default_predictor(profile, timed["procs"]),
                              probe_seconds=probe_s, hosts=hosts,
                              provenance=Provenance(**prov.model_dump()), cases=tuple(cases))
    path = d / f"fidelity-{tag(shape)}.json"
    write_atomic(path, results.to_json())
    return path


def kept_cases(timed: dict) -> list[FidelityCase]:
    """The cases of a times file (``--keep``) as :class:`colltune.report.fidelity.FidelityCase`; what
    the file keeps beyond a case (each round's median and place) stays there."""
    from colltune.report.fidelity import FidelityCase

    return [FidelityCase(**{k: v for k, v in c.items() if k in FidelityCase.model_fields}) for c in timed["cases"]]


def against_name(directory: str) -> str:
    """The predictor that holds the measured times kept in ``directory`` (``--against``)."""
    return f"measured:{Path(directory).resolve().name}"


def with_fields(topology: Topology, settings: list[str]) -> Topology:
    """``topology`` with each ``FIELD=JSON`` of ``settings`` set, validated as a topology file is."""
    import pydantic

    from colltune.files import describe
    from colltune.sim import Topology

    data = topology.model_dump()
    for item in settings:
        field, sep, value = item.partition("=")
        if not sep or field not in Topology.model_fields:
            raise SystemExit(f"--set {item!r}: give FIELD=JSON with FIELD a topology field "
                             f"({', '.join(Topology.model_fields)})")
        try:
            data[field] = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"--set {item!r}: the value is not JSON ({exc})") from None
    try:
        return Topology.model_validate(data)
    except pydantic.ValidationError as exc:
        raise SystemExit(f"--set {' '.join(settings)}: {describe(exc)}") from None


def report(path: Path, plot: Path | None, also: str | None = None,
           playoff: dict[tuple[str, int], dict[str, list[float]]] | None = None) -> dict[str, object]:
    from colltune.report.fidelity import checked_best_within, claim_outcomes, fidelities, fidelity_figure, read_fidelity
    from colltune.report.figure import write_png

    results = read_fidelity(path)
    results = results.model_copy(update={"cases": tuple(c for c in results.cases if c.algorithm != "native")})
    figures = fidelities(results)
    if playoff:
        checked = checked_best_within(results.cases, results.default_predictor, results.procs, playoff,
                                      results.hosts)
        print(f"\n{results.default_predictor}: {checked} cells within 5 % after the playoff of {len(playoff)} cells")
    probe = "" if results.probe_seconds is None else f"; probe {results.probe_seconds:.0f} s"
    print(f"\n{results.network}, P = {results.procs}: {len(results.cases)} cases{probe}; default predictor "
          f"{results.default_predictor}")
    print(f"{'predictor':34} {'cases':>5} {'median':>7} {'p90':>7} {'best<=5%':>9} {'regret':>7}")
    for f in figures:
        mark = " *" if f.predictor == results.default_predictor else ""
        print(f"{f.predictor:34} {f.cases:5d} {f.median_error:7.1%} {f.p90_error:7.1%} "
              f"{f.best_within:4d}/{f.cells:<4d} {f.regret:7.3f}{mark}")
    most = max(f.cases for f in figures)
    best = next(f for f in figures if f.cases == most)  # the best of those that price every case
    names = list(dict.fromkeys([results.default_predictor, best.predictor, *([also] if also else [])]))
    print("\nthe papers' claims: time of the first / the second, measured and predicted (ok: same winner, "
          "ties within 5 %)")
    for o in claim_outcomes(results.cases):
        said = "  ".join(f"{n} {o.predicted[n]:.2f} {'ok' if o.agrees(n) else 'WRONG'}" for n in names
                         if n in o.predicted)
        print(f"paper {o.claim.paper} {o.claim.collective} {o.claim.first} / {o.claim.second} "
              f"{o.size // 1024} KiB: measured {o.measured:.2f} ({o.winner}); {said}")
    if plot is not None:
        write_png(fidelity_figure(results, names), plot)
    return {f.predictor: {"cases": f.cases, "median": f.median_error, "p90": f.p90_error,
                          "best_within": f.best_within, "cells": f.cells, "regret": f.regret} for f in figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="star,tree:2")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--ranks-per-host", type=int, default=1, help="ranks on each host [default: 1]")
    parser.add_argument("--placement", choices=("block", "round-robin"), default="block",
                        help="how the ranks are placed on the hosts [default: block]")
    parser.add_argument("--probe-topology", choices=("given", "none"), default="given",
                        help="probe with the testbed's topology file, or with none (the probe infers one) "
                             "[default: given]")
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--testbed", default="colltune", help="the testbed's name")
    parser.add_argument("--tcp", help="the hosts' TCP congestion control [default: the testbed's, cubic]")
    parser.add_argument("--collectives", default=",".join(COLLECTIVES))
    parser.add_argument("--sizes", default="4KiB,64KiB,512KiB")
    parser.add_argument("--probe", default="default", choices=["quick", "default", "thorough"])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--fill", type=float, default=0.05,
                        help="seconds of runs per round that a short call's runs fill at least (up to "
                             f"{FILL_FACTOR}x --reps)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="time every case in this many rounds (median)")
    parser.add_argument("--short-rounds", type=int, default=9,
                        help=f"time a case that ran below {SHORT_CALL * 1e3:g} ms in one of the --rounds in this many rounds in "
                             "all (median)")
    parser.add_argument("--keep", help="keep the profiles, topologies, times and results in this directory")
    parser.add_argument("--plot", help="figure file per shape: FILE with the shape inserted before .png")
    parser.add_argument("--report", nargs="+", metavar="RESULTS", help="only print the figures of these results files")
    parser.add_argument("--repredict", metavar="DIR",
                        help="predict again the times kept in DIR (by --keep) with this colltune, and print the figures")
    parser.add_argument("--send-hold", type=float, metavar="SECONDS",
                        help="predict with a random hold of this mean at every send (the topology's send_hold; "
                             "default: the profile's)")
    parser.add_argument("--set", action="append", metavar="FIELD=JSON",
                        help="predict with this field of the profile's topology set so (repeatable; with "
                             "--repredict), e.g. 'message_cpu=[[1, 1e-5]]' or duplex=null")
    parser.add_argument("--against", metavar="DIR",
                        help="also score the times another run kept in DIR (by --keep) as a predictor of this "
                             "run's (measured:NAME): how far two runs of the benchmark agree")
    parser.add_argument("--results", help="directory of the results file and figures [default: benchmarks/results]")
    parser.add_argument("--results-from", metavar="DIR",
                        help="write the results file (and figures) from the run kept in DIR (by --keep), and stop")
    parser.add_argument("--playoff", type=int, default=5,
                        help="playoff rounds of each cell whose predicted choice is not the measured fastest (0: none)")
    parser.add_argument("--time-job", help=argparse.SUPPRESS)
    parser.add_argument("--playoff-job", help=argparse.SUPPRESS)
    parser.add_argument("--playoff-cells", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from colltune.units import parse_bytes

    sizes = [parse_bytes(s) for s in args.sizes.split(",")]
    if args.time_job:
        time_job(args.time_job, args.collectives.split(","), sizes, args.reps, args.warmup, args.rounds, args.fill,
                 args.short_rounds)
        return
    if args.playoff_job:
        playoff_job(args.playoff_job, args.playoff_cells, args.reps, args.warmup, args.playoff, args.fill)
        return
    if args.report:
        for path in args.report:
            report(Path(path), None)
        return
    if args.results_from:
        write_results(Path(args.results_from), args)
        return
    also = against_name(args.against) if args.against else None  # printed beside the default's claims
    if args.repredict:
        d = Path(args.repredict)
        for shape in args.shapes.split(","):
            old = json.loads((d / f"fidelity-{tag(shape)}.json").read_text())
            report(predict_shape(shape, args, d, old.get("probe_seconds")), None, also, read_playoff(d, shape))
        return
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(args.keep) if args.keep else Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        for shape in args.shapes.split(","):
            path = run_shape(shape, args, d)
            plot = Path(args.plot.replace(".png", f"-{tag(shape)}.png")) if args.plot else None
            report(path, plot, also, read_playoff(d, shape))
        write_results(d, args)


#: The targets the figures are judged by: median and 90th percentile of the relative error, cells whose
#: predicted best is measured within 5 % of the fastest, and the regret.
TARGETS = {"median": 0.10, "p90": 0.25, "cells": 20 / 22, "regret": 1.03}


def results_name(args: argparse.Namespace) -> str:
    """The results file's name: ``fidelity_testbed``, with the hosts, ranks per host and placement
    where hosts have several ranks."""
    if args.ranks_per_host == 1:
        return "fidelity_testbed"
    return f"fidelity_testbed_{args.hosts}x{args.ranks_per_host}_{args.placement.replace('-', '_')}"


def write_results(d: Path, args: argparse.Namespace) -> None:
    """The default predictor's figures per shape of the run kept in ``d``, and a figure per shape, as
    ``benchmarks/results/fidelity_testbed.json`` (``--results``)."""
    from colltune.report.fidelity import (
        checked_best_within,
        claim_outcomes,
        fidelities,
        fidelity_figure,
        read_fidelity,
    )
    from colltune.report.figure import write_png
    from colltune.report.results import Headline, Table, default_directory, save

    out = Path(args.results) if args.results else default_directory(__file__)
    out.mkdir(parents=True, exist_ok=True)
    headline, rows, figures, mpi = [], [], [], None
    for shape in args.shapes.split(","):
        results = read_fidelity(d / f"fidelity-{tag(shape)}.json")
        results = results.model_copy(update={"cases": tuple(c for c in results.cases if c.algorithm != "native")})
        mpi = results.provenance.mpi_library if results.provenance else mpi
        f = next(f for f in fidelities(results) if f.predictor == results.default_predictor)
        claims = claim_outcomes(results.cases)
        agree = sum(o.agrees(f.predictor) for o in claims if f.predictor in o.predicted)
        playoff = read_playoff(d, shape)
        checked = checked_best_within(results.cases, f.predictor, results.procs, playoff, results.hosts)
        rows.append((shape, f.predictor, None if results.probe_seconds is None else round(results.probe_seconds),
                     f.cases, round(f.median_error, 4), round(f.p90_error, 4), f"{checked} of {f.cells}",
                     f"{f.best_within} of {f.cells}", len(playoff), round(f.regret, 4), f"{agree} of {len(claims)}"))
        headline.append(Headline(figure=f"{shape}: median / 90th percentile error / cells within 5 % (after the "
                                        f"playoff) / regret",
                                 value=f"{f.median_error:.1%} / {f.p90_error:.1%} / {checked} of {f.cells} / "
                                       f"{f.regret:.3f}",
                                 target=f"{TARGETS['median']:.0%} / {TARGETS['p90']:.0%} / "
                                        f"{round(TARGETS['cells'] * f.cells)} of {f.cells} / {TARGETS['regret']}"))
        for other in (f for f in fidelities(results) if f.predictor.startswith("measured:")):
            # --against: another run's times as the predictor, the benchmark's own run-to-run spread
            rows.append((shape, other.predictor, None, other.cases, round(other.median_error, 4),
                         round(other.p90_error, 4), None, f"{other.best_within} of {other.cells}", 0,
                         round(other.regret, 4), None))
        name = f"{results_name(args)}-{tag(shape)}.png"
        write_png(fidelity_figure(results, [results.default_predictor]), out / name)
        figures.append(name)
    nodes = "" if args.ranks_per_host == 1 else f", {args.ranks_per_host} ranks per host, {args.placement} placement"
    given = "with its topology file" if args.probe_topology == "given" else "without a topology (the probe infers one)"
    path = save(__file__, out, title="Predictions against the emulated cluster" + (
                    f" of {args.hosts} hosts x {args.ranks_per_host} ranks, {args.placement}" if nodes else ""),
                name=results_name(args),
                what=f"Probes the emulated cluster ({args.hosts} hosts at {args.link}{nodes}; shapes {args.shapes}) "
                     f"{given}, times every algorithm of every collective at {args.sizes} (median of "
                     f"{args.rounds} rounds, up to {args.short_rounds} for short cases), and predicts each case with "
                     "the profile's network model carried over the topology (the default predictor, as `tune` "
                     "prices). Figures: relative error |predicted - measured| / measured; cells (a collective at a "
                     "size) whose predicted fastest algorithm runs within 5 % of the measured fastest, where the two "
                     f"differ judged by {args.playoff} playoff rounds of both (and before the playoff); regret (the "
                     "geometric mean of measured time of the predicted choice / measured best); the seed papers' "
                     "claims predicted the right way round.",
                headline=headline,
                tables=[Table(columns=("shape", "predictor", "probe (s)", "cases", "median error", "p90 error",
                                       "cells within 5 %", "cells within 5 % before the playoff", "playoff cells",
                                       "regret", "papers' claims"), rows=tuple(rows))],
                figures=figures, root=True, mpi=mpi)
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
