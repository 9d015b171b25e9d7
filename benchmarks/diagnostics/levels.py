"""colltune's own algorithms, flat and hierarchical, timed side by side on hosts of several ranks (root).

Run: ``python benchmarks/diagnostics/levels.py [--collective alltoall] [--size 512KiB]
[--algorithms direct,pairwise_exchange,native,hierarchical,hierarchical@inter=direct] [--rounds 7]
[--reps 3] [--hosts 4] [--ranks-per-host 2] [--placement block] [--link 100Mbit] [--profile FILE]``.

Brings up a testbed of ``--hosts`` hosts of ``--ranks-per-host`` ranks each (``colltune testbed
up``), runs itself under ``colltune testbed run`` and tears the testbed down.  In the job, each
round times every algorithm in turn as the fidelity benchmark times a case
(:func:`colltune.tune.measure.time_collective`: a plan built once, a rest, a warm-up, ``--reps``
runs each after a barrier, the slowest rank's time, the median) and prints it; at the end, per
algorithm, the median of the rounds and every round's time, in ms.  With ``--profile`` (a profile
probed on the same testbed, e.g. one that ``fidelity_testbed.py --keep`` kept) it first prints the
simulator's price of each (the profile's default network over its topology, the third of calls
back to back, as the tuner prices it).  An algorithm may carry parameter values, each after an
``@`` (``hierarchical@inter=direct``).

What it showed (4 x 2, block, 100 Mbit/s, all-to-all of 512 KiB, 7 rounds, the profile of a
``fidelity_testbed.py --hosts 4 --ranks-per-host 2 --probe-topology none`` run): the flat
algorithms ran 546-609 ms a call (MPICH's own 549, pairwise exchange 552, direct 595, medians),
every hierarchical one slower and more spread: pairwise exchange between the leaders 567-771 (683),
direct 591-709 (628), rotated 591-637 (608), where the simulator prices them 564, 540 and 540 ms,
ahead of the direct one's 572.  Each host sends the same 6 MiB over the network in all of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from colltune.collectives import COLLECTIVES
from colltune.units import parse_bytes


def algorithm(text: str) -> tuple[str, dict]:
    """``name@key=value@...`` as (name, parameters); values read as JSON where they parse."""
    name, *pairs = text.split("@")
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--algorithms {text!r}: expected name@key=value, got {pair!r}")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return name, params


def inner(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from colltune.tune.measure import REST, time_collective

    world = MPI.COMM_WORLD
    cases = [algorithm(a) for a in args.algorithms.split(",")]
    times: list[list[float]] = [[] for _ in cases]
    for rnd in range(args.rounds):
        for (name, params), found in zip(cases, times, strict=True):
            t = time_collective(world, args.collective, name, args.size, params, args.reps, 1, rest=REST)
            found.append(t.median)
            if world.Get_rank() == 0:
                print(f"round {rnd + 1}/{args.rounds} {name} {params or ''}: {t.median * 1e3:.1f} ms", flush=True)
    if world.Get_rank() != 0:
        return
    for (name, params), found in zip(cases, times, strict=True):
        print(f"{name} {params or ''}: median {statistics.median(found) * 1e3:.1f} ms; rounds "
              + " ".join(f"{t * 1e3:.0f}" for t in found), flush=True)


def prices(args: argparse.Namespace, cases: list[tuple[str, dict]], procs: int) -> list[float | None]:
    """The tuner's simulated price (s) of each case on the profile ``args.profile``."""
    from colltune.models import Unavailable
    from colltune.profiles import load_profile
    from colltune.sim import profile_network
    from colltune.tune.select import SimPricer

    profile = load_profile(str(args.profile))
    network = profile_network(profile)
    pricer = SimPricer(profile.params(network), network, profile.topology)
    out: list[float | None] = []
    for name, params in cases:
        try:
            out.append(pricer.price(args.collective, name, procs, args.size, params)[0])
        except Unavailable:
            out.append(None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collective", choices=sorted(COLLECTIVES), default="alltoall")
    parser.add_argument("--size", default="512KiB", help="block size (bytes, or with a unit)")
    parser.add_argument("--algorithms",
                        default="direct,pairwise_exchange,native,hierarchical,hierarchical@inter=direct",
                        help="colltune's algorithm names (native: the library's own), comma-separated, each with "
                             "@key=value parameters if any")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--ranks-per-host", type=int, default=2)
    parser.add_argument("--placement", choices=("block", "round-robin"), default="block")
    parser.add_argument("--link", default="100Mbit")
    parser.add_argument("--profile", type=Path, help="also print each algorithm's simulated price on this profile")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.size = parse_bytes(str(args.size))
    from colltune.algorithms import REGISTRY
    from colltune.errors import ColltuneError

    for text in args.algorithms.split(","):
        try:
            name, _ = algorithm(text)
            if name != "native":
                REGISTRY.get(args.collective, name)
        except (argparse.ArgumentTypeError, ColltuneError, KeyError) as exc:
            parser.error(str(exc))
    if args.profile is not None and not args.profile.is_file():
        parser.error(f"--profile {args.profile}: no such file")
    if args.inner:
        inner(args)
        return
    if args.profile is not None:  # priced first: a profile that cannot be used fails before the testbed is up
        procs = args.hosts * args.ranks_per_host
        cases = [algorithm(a) for a in args.algorithms.split(",")]
        for (name, params), price in zip(cases, prices(args, cases, procs), strict=True):
            said = "cannot be priced" if price is None else f"{price * 1e3:.1f} ms"
            print(f"simulated at P = {procs}: {name} {params or ''}: {said}", flush=True)
    run = [sys.executable, "-m", "colltune", "testbed"]
    subprocess.run([*run, "up", "--hosts", str(args.hosts), "--ranks-per-host", str(args.ranks_per_host),
                    "--link", args.link], check=True)
    try:
        subprocess.run([*run, "run", "--placement", args.placement, "--", sys.executable, __file__, "--inner",
                        "--collective", args.collective, "--size", str(args.size), "--algorithms", args.algorithms,
                        "--rounds", str(args.rounds), "--reps", str(args.reps),
                        *(["--profile", str(args.profile)] if args.profile else [])], check=True, timeout=3600)
    finally:
        subprocess.run([*run, "down"], check=False)


if __name__ == "__main__":
    main()
