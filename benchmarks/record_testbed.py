"""A C application recorded on the emulated cluster and predicted by the simulator (needs root).

Run: ``python benchmarks/record_testbed.py [--hosts 8] [--link 100Mbit] [--iterations 24]
[--work-us 10000] [--halo 65536] [--bcast 262144] [--alltoall 16384] [--every 4] [--runs 3]
[--probe default|quick] [--profile FILE] [--keep DIR] [--json FILE] [--results DIR]``.

Issue #21's last target: a recorded run of a C program, converted (``colltune trace-to-goal``) and
simulated (``colltune simulate --goal``) with the profile of the machine it ran on, predicts its
measured total.  Brings up a testbed (``colltune testbed up``: one switch, ``--hosts`` hosts,
``--link`` links, one rank per host), probes it as a user would (``probe --topology`` with the
testbed's own topology file; ``--profile`` skips this), builds ``benchmarks/c/record_stencil.c``
with the wheel's ``mpicc`` (an iterative application: sleep-based computation, a ring halo
exchange, a one-double allreduce, and every ``--every`` iterations a broadcast and an all-to-all)
and runs it ``--runs`` times in each of three ways:

* ``plain``: the program alone (what recording costs is its time against the next);
* ``recorded``: under ``LD_PRELOAD=$(colltune lib)`` with ``COLLTUNE_RECORD`` and no table, so
  that every collective is MPICH's own;
* ``table``: recorded as well, with ``COLLTUNE_TABLE`` a table that runs colltune's binomial
  broadcast and pairwise all-to-all instead.

The measured total of a run is the slowest rank's time from the end of its first barrier to the end
of its last.  Each recorded run is converted to GOAL and simulated with the profile's default
network model (and the profile's topology), which predicts that run's total; the ``recorded`` runs
are also converted with ``--table`` set to the other table, which predicts what the ``table`` runs
measure without having run them.  It prints each prediction's relative error, their median, and the
share of the total the program spent outside MPI (the recorded computation), and tears the testbed
down.  The simulated total also contains the first barrier, which the measured one leaves out (well
under a millisecond against totals of a second or more).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from library_testbed import colltune  # this directory's: run python -m colltune, exit with its error

HERE = Path(__file__).resolve().parent
#: The other table's choices: colltune's algorithms, unlike MPICH's defaults at these sizes.
OTHER = {"bcast": ("binomial_tree", {}), "alltoall": ("pairwise_exchange", {})}


def measured_total(out: str, hosts: int) -> float:
    """The slowest rank's ``elapsed`` from the program's output."""
    times = {int(r): float(t) for tag, r, t in (line.split() for line in out.splitlines() if line.startswith("elapsed"))}
    if sorted(times) != list(range(hosts)):
        sys.exit(f"expected an elapsed line from each of {hosts} ranks, got:\n{out[-2000:]}")
    return max(times.values())


def predict(record: Path, profile: Path, where: Path, table: Path | None = None) -> float:
    """The simulated total (seconds) of a recorded run, converted with ``table`` if given."""
    goal = where / (record.name + (".table" if table else "") + ".goal")
    colltune("trace-to-goal", str(record), "-o", str(goal), *(["--table", str(table)] if table else []))
    return float(json.loads(colltune("simulate", "--goal", str(goal), "--profile", str(profile), "--json"))["total"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--iterations", type=int, default=24)
    parser.add_argument("--work-us", type=int, default=10000, help="computation per iteration, microseconds")
    parser.add_argument("--halo", type=int, default=65536, help="bytes each way to each ring neighbour")
    parser.add_argument("--bcast", type=int, default=262144, help="broadcast bytes")
    parser.add_argument("--alltoall", type=int, default=16384, help="all-to-all bytes per block")
    parser.add_argument("--every", type=int, default=4, help="a broadcast and an all-to-all every this many iterations")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--probe", choices=("default", "quick"), default="default")
    parser.add_argument("--profile", type=Path, help="a profile of this testbed (skips the probe)")
    parser.add_argument("--keep", type=Path, help="keep the profile, records, GOAL files and tables here")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--results", help="directory of the results file [default: benchmarks/results]")
    args = parser.parse_args()
    from colltune.files import write_atomic
    from colltune.pmpi import library_path
    from colltune.testbed import topology_file
    from colltune.tune import fixed_table, write_table

    mpicc = shutil.which("mpicc", path=str(Path(sys.executable).parent))
    if mpicc is None:
        sys.exit("mpicc of the mpich wheel is needed (pip install 'colltune[mpich]')")
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        exe, table = d / "record_stencil", d / "other-table.json"
        subprocess.run([mpicc, "-O2", "-o", str(exe), str(HERE / "c" / "record_stencil.c")], check=True)
        write_table(fixed_table(OTHER, "benchmarks/record_testbed.py"), table)
        app = [str(exe), str(args.iterations), str(args.work_us), str(args.halo), str(args.bcast), str(args.alltoall),
               str(args.every)]
        colltune("testbed", "up", "--hosts", str(args.hosts), "--link", args.link)
        topology = d / "topology.json"
        write_atomic(topology, topology_file("colltune").read_text())
        runs: dict[str, list[dict[str, object]]] = {"plain": [], "recorded": [], "table": []}
        try:
            profile = args.profile
            if profile is None:
                profile = d / "profile.json"
                print(f"probe ({args.probe}) ...", flush=True)
                start = time.perf_counter()
                colltune("testbed", "run", "--", sys.executable, "-m", "colltune", "probe",
                         *([] if args.probe == "default" else ["--quick"]), "--topology", str(topology),
                         "-o", str(profile), timeout=1800)
                print(f"probe took {time.perf_counter() - start:.0f} s", flush=True)
            base = {k: v for k, v in os.environ.items() if not k.startswith("COLLTUNE_")}
            for k in range(args.runs):  # the three ways alternate, so that a slow spell hits each alike
                for way, done in runs.items():
                    env = dict(base)
                    record = d / f"{way}-{k}"
                    if way != "plain":
                        shutil.rmtree(record, ignore_errors=True)
                        record.mkdir()
                        env.update(LD_PRELOAD=str(library_path()), COLLTUNE_RECORD=str(record))
                    if way == "table":
                        env["COLLTUNE_TABLE"] = str(table)
                    total = measured_total(colltune("testbed", "run", "--", *app, env=env), args.hosts)
                    done.append({"run": k, "measured_s": total, "record": None if way == "plain" else str(record)})
                    print(f"run {k} {way:9} {total:8.3f} s", flush=True)
        finally:
            subprocess.run([sys.executable, "-m", "colltune", "testbed", "down"], check=False)
        print("predicting ...", flush=True)
        for way in ("recorded", "table"):
            for r in runs[way]:
                r["predicted_s"] = predict(Path(str(r["record"])), profile, d)
        for r in runs["recorded"]:
            r["predicted_with_table_s"] = predict(Path(str(r["record"])), profile, d, table)
        profile_text = json.loads(Path(profile).read_text())
    work = args.iterations * args.work_us * 1e-6
    table_measured = statistics.median(float(r["measured_s"]) for r in runs["table"])  # type: ignore[arg-type]
    rows = []
    print(f"\n{args.hosts} hosts, {args.link}; {args.iterations} iterations of {args.work_us} us computation "
          f"({work:.2f} s in all), profile's network model {profile_text['default_network']}")
    print(f"{'run':<10} {'measured (s)':>12} {'predicted (s)':>13} {'error':>7} {'outside MPI':>11}")
    for way in ("recorded", "table"):
        for r in runs[way]:
            m, p = float(r["measured_s"]), float(r["predicted_s"])  # type: ignore[arg-type]
            rows.append({"way": way, "measured_s": m, "predicted_s": p, "error": p / m - 1})
            print(f"{way + ' ' + str(r['run']):<10} {m:>12.3f} {p:>13.3f} {p / m - 1:>+7.1%} {work / m:>11.0%}")
    for r in runs["recorded"]:
        p = float(r["predicted_with_table_s"])  # type: ignore[arg-type]
        rows.append({"way": "recorded, predicted with the other table", "measured_s": table_measured,
                     "predicted_s": p, "error": p / table_measured - 1})
        print(f"{'rec ' + str(r['run']) + ' -> table':<10} {table_measured:>12.3f} {p:>13.3f} "
              f"{p / table_measured - 1:>+7.1%}   (measured: the table runs' median)")
    errors = sorted(abs(float(r["error"])) for r in rows)  # type: ignore[arg-type]
    plain = statistics.median(float(r["measured_s"]) for r in runs["plain"])  # type: ignore[arg-type]
    recorded = statistics.median(float(r["measured_s"]) for r in runs["recorded"])  # type: ignore[arg-type]
    print(f"\nmedian |error| {statistics.median(errors):.1%}, worst {errors[-1]:.1%} ({len(errors)} predictions); "
          f"plain runs {plain:.3f} s, recorded {recorded:.3f} s (median)")
    if args.json:
        write_atomic(args.json, json.dumps({"hosts": args.hosts, "link": args.link, "app": app[1:], "runs": runs,
                                            "predictions": rows}, indent=1) + "\n")
    from colltune.report.results import Headline, Table, save

    path = save(__file__, args.results, title="A recorded C application, predicted",
                what=f"A C stencil program (ring halo exchanges, an allreduce, a broadcast and an all-to-all every "
                     f"{args.every} iterations) recorded through the interposition library on the emulated cluster "
                     f"({args.hosts} hosts, one switch, {args.link}), turned into GOAL by `colltune trace-to-goal` and "
                     f"simulated with the probed profile, also with a table the recorded run did not use; "
                     f"{args.runs} runs of each way.",
                headline=[Headline(figure=f"prediction error, median |error| ({len(errors)} predictions)",
                                   value=f"{statistics.median(errors):.1%}"),
                          Headline(figure="prediction error, worst", value=f"{errors[-1]:.1%}"),
                          Headline(figure="what recording costs the program", value=f"{recorded / plain - 1:+.1%}")],
                tables=[Table(columns=("run", "measured (s)", "predicted (s)", "error"),
                              rows=tuple((r["way"], round(r["measured_s"], 4), round(r["predicted_s"], 4),
                                          f"{r['error']:+.1%}") for r in rows))],
                root=True, mpi=profile_text.get("provenance", {}).get("mpi_library"))
    print(f"results written to {path}")


if __name__ == "__main__":
    main()
