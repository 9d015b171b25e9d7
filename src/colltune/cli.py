"""``colltune <command>``: the command-line face of colltune.

Every command takes ``--json`` for machine-readable output.  Exit codes: 0 on
success, 1 when a verification fails, 2 for bad input (click's usage errors).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from colltune import __version__, testbed
from colltune.algorithms import REGISTRY, Algorithm
from colltune.collectives import COLLECTIVES, Problem
from colltune.command import console, example, mpi_job, progress_lines
from colltune.errors import ColltuneError, VerificationError
from colltune.info import info as info_command
from colltune.limits import MAX_PROCS
from colltune.mpi_library import NOT_FOUND, missing
from colltune.grid import BUILDERS, auto_partitions, compose, read_latency, simulated_time, tree_time
from colltune.models import MODELS, ParamSet, Prediction, Unavailable, formulas, predict, predict_all
from colltune.models.params import TreeLevels
from colltune.pmpi.cli import lib as lib_command
from colltune.pmpi.cli import trace_to_goal as trace_to_goal_command
from colltune.profiles import BUILTINS, Profile, builtin, load_profile, profile_schema, with_overrides, write_profile
from colltune.report import plot_profile
from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS, Schedule
from colltune.schedule import verify as verify_schedule
from colltune.sim import (
    NETWORKS,
    Topology,
    binary_tree,
    drops,
    profile_network,
    read_topology,
    simulate,
    star,
    two_level,
)
from colltune.sim import calls as sim_calls
from colltune.sim.calls import steady_call
from colltune.sim.goal import goal_lines, read_goal, write_goal
from colltune.sim.network import on_topology, topology_for
from colltune.sim.topology import PLACEMENTS
from colltune.sim.trace import write_trace
from colltune.tune.cli import bench_cmd, tune_cmd
from colltune.tune.export import libraries_markdown
from colltune.units import format_seconds, parse_bytes, parse_int_list, parse_rate, parse_size_list

NATIVE_NOTE = ("`native` (runtime only): the MPI library's own collective, called through mpi4py; "
               "it has no schedule, so it is not verified or simulated.")


def _collective_option(required: bool, allow_all: bool = False) -> Any:
    choices = [*COLLECTIVES, "all"] if allow_all else list(COLLECTIVES)
    return click.option("--collective", "-c", type=click.Choice(choices), required=required,
                        help="Collective operation" + (", or 'all'." if allow_all else "."))


class _Group(click.Group):
    """colltune's command group: a command that needs MPI where mpi4py can load no MPI library ends
    with one line that says what to install (:data:`colltune.mpi_library.NOT_FOUND`), not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:  # a RuntimeError too: --help and the like
            raise
        except RuntimeError:  # mpi4py raises it on import when it loads no libmpi
            if missing():
                raise click.ClickException(NOT_FOUND) from None
            raise


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="colltune")
def main() -> None:
    """colltune: measure the network, model and verify collective algorithms, run the fastest over MPI."""


def algorithms_markdown(algs: list[Algorithm]) -> str:
    """The documentation table of the registry (docs/algorithms.md is this text)."""
    lines = ["# Algorithms", "",
             "Generated from the registry by `colltune algorithms --markdown`; do not edit by hand.", ""]
    for coll in (c for c in COLLECTIVES if any(a.collective == c for a in algs)):
        lines += [f"## {coll}", "", COLLECTIVES[coll].summary[0].upper() + COLLECTIVES[coll].summary[1:] + ".", "",
                  "| name | aliases | parameters | source | summary |", "| --- | --- | --- | --- | --- |"]
        for a in (a for a in algs if a.collective == coll):
            params = "; ".join(f"`{p.name}` ({p.type.__name__}, default {p.default}"
                               f"{', ' + p.unit if p.unit else ''}): {p.doc}" for p in a.params) or "none"
            aliases = ", ".join(f"`{x}`" for x in a.aliases) or ""
            lines.append(f"| `{a.name}` | {aliases} | {params} | {a.source} | {a.summary} |")
        lines += ["", NATIVE_NOTE, ""]
        for a in (a for a in algs if a.collective == coll):
            order = []
            if COLLECTIVES[coll].reduces:
                order = ["Operation: " + ("must be commutative (combines out of rank order)." if a.needs_commutative
                                          else "any associative one; rank order is kept (verified).")]
            lines += [f"### {coll} / {a.name}", "", a.doc.strip(), "", f"Constraints: {a.constraints}.", *order,
                      f"Source: {a.source}.", ""]
    return "\n".join(lines).rstrip() + "\n"


@example('colltune algorithms --collective bcast')
@main.command("algorithms")
@_collective_option(required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--markdown", is_flag=True, help="Print the documentation table (docs/algorithms.md).")
def algorithms_cmd(collective: str | None, as_json: bool, markdown: bool) -> None:
    """List the registered algorithms, their parameters and sources."""
    algs = REGISTRY.select(collective)
    if as_json:
        click.echo(json.dumps([a.as_dict() for a in algs], indent=2))
        return
    if markdown:
        click.echo(algorithms_markdown(algs), nl=False)
        return
    table = Table(title="colltune algorithms")
    for col in ("collective", "name", "parameters (default)", "source", "summary"):
        table.add_column(col, overflow="fold")
    for a in algs:
        params = ", ".join(f"{p.name}={p.default}" for p in a.params) or "-"
        table.add_row(a.collective, a.name, params, a.source, a.summary)
    con = console()
    con.print(table)
    con.print(NATIVE_NOTE.replace("`", ""))


def _parse_params(pairs: tuple[str, ...], option: str = "--param") -> dict[str, Any]:
    """``name=value`` pairs; a value in brackets is JSON (a list, such as a tree's edges)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not of the form name=value", param_hint=option)
        value = value.strip()
        if value.startswith("["):
            try:
                out[key.strip()] = json.loads(value)
            except json.JSONDecodeError as exc:
                raise click.BadParameter(f"{pair!r}: not a JSON list: {exc.msg}", param_hint=option) from None
            except RecursionError:
                raise click.BadParameter(f"{key.strip()}: a JSON list nested deeper than colltune reads",
                                         param_hint=option) from None
            continue
        out[key.strip()] = value
    return out


@example('colltune verify -c bcast -a all -p 1-9 -s 0,1,64KiB --root all')
@main.command("verify")
@_collective_option(required=True, allow_all=True)
@click.option("--algorithm", "-a", required=True, type=click.Choice(["all", *REGISTRY.names(aliases=True)]),
              metavar="NAME", help="Algorithm name or alias (see `colltune algorithms`), or 'all'.")
@click.option("--procs", "-p", required=True, help="Process count(s): 8, 1-33 or 2,3,5.")
@click.option("--size", "-s", required=True, help="Message size(s) in bytes, units allowed: 0,1,64KiB,1MB.")
@click.option("--root", "-r", default="0", show_default=True, help="Root rank(s), or 'all'.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Algorithm parameter; repeatable.")
@click.option("--op", type=click.Choice(REDUCTION_OPS), default=None,
              help="Reduction operation (reduce, allreduce; default sum).")
@click.option("--dtype", type=click.Choice(REDUCTION_DTYPES), default=None,
              help="Element type (reduce, allreduce; default uint8); sizes must be whole elements.")
@click.option("--non-commutative", is_flag=True,
              help="Check that rank order is kept (reductions; with 'all', only order-preserving algorithms).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify_cmd(collective: str, algorithm: str, procs: str, size: str, root: str, params: tuple[str, ...],
               op: str | None, dtype: str | None, non_commutative: bool, as_json: bool) -> None:
    """Prove algorithms correct by symbolic execution; exit 1 if any check fails."""
    asked = {"op": op, "dtype": dtype, "commutative": not non_commutative}
    collectives = list(COLLECTIVES) if collective == "all" else [collective]
    try:
        if collective == "all" and algorithm != "all":
            raise click.BadParameter("with --collective all, use --algorithm all", param_hint="--algorithm")
        if collective == "all" and any(v is not None for v in (op, dtype)):
            raise click.BadParameter("--op and --dtype need a reduction collective", param_hint="--op/--dtype")
        proc_list = parse_int_list(procs, "--procs", smallest=1)
        sizes = parse_size_list(size)
        reduction = {}
        for c in collectives:
            if COLLECTIVES[c].synchronizes and collective == "all":
                continue
            reduction[c] = asked if COLLECTIVES[c].reduces else {}
            for n in sizes:
                Problem(c, 1, 0, n, **(asked if collective != "all" else reduction[c]))
        if algorithm == "all":
            algs = [a for c in collectives for a in REGISTRY.select(c)
                    if not (non_commutative and a.needs_commutative)]
        else:
            algs = [REGISTRY.get(collective, algorithm)]
        values = _parse_params(params)
        unused = set(values) - {p.name for a in algs for p in a.params}
        if unused:
            raise click.BadParameter(f"no selected algorithm takes {', '.join(sorted(unused))}",
                                     param_hint="--param")
        # each algorithm gets the parameters it takes; one named algorithm is checked here, so that a
        # bad value is a usage error (with 'all', it fails that algorithm's rows instead)
        params_of = {(a.collective, a.name): {k: v for k, v in values.items() if k in {p.name for p in a.params}}
                     for a in algs}
        if algorithm != "all":
            params_of[(algs[0].collective, algs[0].name)] = algs[0].validate_params(values)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    results = []
    for a in algs:
        coll = COLLECTIVES[a.collective]
        for P in proc_list:
            roots = (range(P) if root == "all" else _roots(root, P)) if coll.rooted else [0]
            for r in roots:
                for n in ([0] if coll.synchronizes else sizes):
                    results.append(_verify_one(a, P, r, n, params_of[(a.collective, a.name)],
                                               reduction.get(a.collective, {})))
    failed = [x for x in results if not x["ok"]]
    if as_json:
        click.echo(json.dumps({"ok": not failed, "results": results}, indent=2))
    else:
        _print_results(results)
    sys.exit(1 if failed else 0)


def _roots(text: str, procs: int) -> list[int]:
    try:
        roots = parse_int_list(text, "--root")
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    bad = [r for r in roots if r >= procs]
    if bad:
        raise click.UsageError(f"--root {bad[0]} is not a rank of {procs} processes (0..{procs - 1})")
    return roots


def _verify_one(a: Algorithm, procs: int, root: int, size: int, params: dict[str, Any],
                reduction: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"collective": a.collective, "algorithm": a.name, "procs": procs, "root": root,
                           "size": size, "params": params, **reduction}
    try:
        report = verify_schedule(a.schedule(procs, root, size, **reduction, **params))
    except VerificationError as exc:
        row.update(ok=False, error=str(exc), rank=exc.rank, op=exc.op)
    except ColltuneError as exc:
        row.update(ok=False, error=str(exc))
    else:
        row.update(ok=True, messages=report.messages, bytes_sent=report.bytes_sent, ops=report.ops)
    return row


def _print_results(results: list[dict[str, Any]]) -> None:
    con = console()
    table = Table(title="symbolic verification")
    for col in ("collective", "algorithm", "P", "root", "size (B)", "messages", "bytes sent", "result"):
        table.add_column(col, overflow="fold")
    for x in results:
        verdict = "[green]ok[/green]" if x["ok"] else f"[red]FAILED[/red]: {x['error']}"
        table.add_row(x["collective"], x["algorithm"], str(x["procs"]), str(x["root"]), str(x["size"]), str(x.get("messages", "-")),
                      str(x.get("bytes_sent", "-")), verdict)
    con.print(table)
    failed = sum(not x["ok"] for x in results)
    con.print(f"{len(results) - failed} verified, {failed} failed")


@example('colltune predict --profile builtin:ethernet-10g-tcp -c bcast -a all -p 16 -s 1MiB')
@main.command("predict")
@click.option("--profile", "profile_spec", metavar="FILE|builtin:NAME",
              help=f"Profile to read the model parameters from ({', '.join('builtin:' + n for n in BUILTINS)}).")
@click.option("--model", "-m", type=click.Choice(list(MODELS)), default=None,
              help="Model to predict with (default: the profile's default_model).")
@_collective_option(required=True)
@click.option("--algorithm", "-a", required=True, type=click.Choice(["all", *REGISTRY.names(aliases=True)]),
              metavar="NAME", help="Algorithm name or alias, or 'all' for every one with a formula, fastest first.")
@click.option("--procs", "-p", required=True, type=click.IntRange(1, MAX_PROCS), help="Process count P.")
@click.option("--size", "-s", required=True, help="Block size in bytes, units allowed: 1000, 64KiB, 1MiB.")
@click.option("--root", "-r", default=0, show_default=True, type=click.IntRange(min=0), help="Root rank.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Algorithm parameter, e.g. segment_size=8192 (default: searched for segmented algorithms).")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Give or override a model parameter, in seconds and bytes (e.g. alpha=50e-6); repeatable.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (times in seconds, or the profile's units).")
def predict_cmd(profile_spec: str | None, model: str | None, collective: str, algorithm: str, procs: int, size: str,
                root: int, params: tuple[str, ...], sets: tuple[str, ...], as_json: bool) -> None:
    """Predict the time of a collective from a model's cost formulas."""
    try:
        profile = load_profile(profile_spec) if profile_spec else None
        if model is None and profile is None:
            raise click.UsageError("give --profile, or --model with its parameters as --set NAME=VALUE")
        model = model or profile.default_model  # type: ignore[union-attr]
        values = _model_params(profile, model, sets)
        nbytes = parse_bytes(size)
        if root >= procs:
            raise click.UsageError(f"--root {root} is not a rank of {procs} processes (0..{procs - 1})")
        algparams = _parse_params(params)
        unit = profile.time_unit if profile is not None else "s"
        if algorithm == "all":
            if algparams:
                raise click.UsageError("--param needs one --algorithm")
            done, missing = predict_all(values, model, collective, procs, nbytes, root)
        else:
            try:
                done, missing = [predict(values, model, collective, algorithm, procs, nbytes, root, **algparams)], {}
            except Unavailable as exc:
                done, missing = [], {REGISTRY.get(collective, algorithm).name: str(exc)}
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"profile": profile.name if profile else None, "model": model, "time_unit": unit,
                               "predictions": [p.as_dict() for p in done], "unavailable": missing}, indent=2))
    else:
        _print_predictions(done, missing, model, unit, profile.name if profile else "--set")
    if not done:
        sys.exit(1)


def _model_params(profile: Profile | None, model: str, sets: tuple[str, ...]) -> ParamSet:
    """The ``model`` parameters of ``profile`` (if any) with the ``--set`` overrides applied."""
    found = getattr(profile.models, model) if profile is not None else None
    if profile is not None and found is None and not sets:
        profile.params(model)  # raises, naming the models the profile has
    return with_overrides(found, model, _parse_params(sets, "--set")) if sets or found is None else found


def _print_predictions(done: list[Prediction], missing: dict[str, str], model: str, unit: str, origin: str) -> None:
    con = console()
    if done:
        first = done[0]
        table = Table(title=f"{first.collective}, P = {first.procs}, {first.size} B: {model} model ({origin})")
        for col in ("algorithm", "time", "parameters", "formula"):
            table.add_column(col, overflow="fold")
        for p in done:
            shown = format_seconds(p.time) if unit == "s" else f"{p.time:.6g} units"
            table.add_row(p.algorithm, shown, ", ".join(f"{k}={v}" for k, v in p.params.items()), p.source)
        con.print(table)
    for name, why in missing.items():
        con.print(f"[dim]{name}: unavailable ({why})[/dim]")


def _registry_schedule(collective: str | None, algorithm: str | None, procs: int | None, size: str | None,
                       root: int, params: tuple[str, ...]) -> Schedule:
    """The registry schedule named on the command line (for simulate and export-goal)."""
    missing = [name for name, v in (("--collective", collective), ("--algorithm", algorithm), ("--procs", procs),
                                    ("--size", size)) if v is None]
    if missing:
        raise click.UsageError(f"give {', '.join(missing)} (or --goal FILE)")
    if root >= procs:  # type: ignore[operator]
        raise click.UsageError(f"--root {root} is not a rank of {procs} processes (0..{procs - 1})")  # type: ignore[operator]
    alg = REGISTRY.get(collective, algorithm)  # type: ignore[arg-type]
    return alg.schedule(procs, root, parse_bytes(size), **_parse_params(params))  # type: ignore[arg-type]


def _topology(spec: str | None, procs: int) -> Topology | None:
    """``--topology``: a topology file, or ``star:RATE`` (one switch, RATE per link: bytes per second
    or a rate with a unit, as ``testbed up --link`` takes), or ``none``."""
    if spec is None or spec == "none":
        return None
    if spec.startswith("star:"):
        return star(procs, _rate(spec[5:], "--topology star:RATE"))
    return read_topology(spec)


@example('colltune simulate --profile builtin:paper001-gige -c alltoall -a pairwise_exchange -p 16 -s 64KiB')
@main.command("simulate")
@click.option("--profile", "profile_spec", metavar="FILE|builtin:NAME",
              help="Profile to read the model parameters from.")
@click.option("--model", "-m", type=click.Choice(list(NETWORKS)), default=None,
              help="Network model (default: the profile's default_network, else the one for its default_model); "
                   "see docs/simulator.md.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE",
              help="Give or override a model parameter, in seconds and bytes (e.g. L=5e-6); repeatable.")
@_collective_option(required=False)
@click.option("--algorithm", "-a", type=click.Choice(REGISTRY.names(aliases=True)), metavar="NAME",
              help="Algorithm name or alias.")
@click.option("--procs", "-p", type=click.IntRange(1, MAX_PROCS), help="Process count P.")
@click.option("--size", "-s", help="Block size in bytes, units allowed: 1000, 64KiB, 1MiB.")
@click.option("--root", "-r", default=0, show_default=True, type=click.IntRange(min=0), help="Root rank.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Algorithm parameter; repeatable.")
@click.option("--goal", "goal_file", type=click.Path(dir_okay=False), help="Simulate this GOAL file instead.")
@click.option("--goal-unit", default=1e-9, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per GOAL time unit (calc N lasts N of them).")
@click.option("--topology", "topology_spec", metavar="FILE|star:RATE|none",
              help="Carry the messages as flows over this switched network (endpoint models only); default: "
                   "the profile's topology, if it has one; none: no topology.")
@click.option("--sharing", type=click.Choice(["equal", "maxmin"]), default="equal", show_default=True,
              help="How a link's bandwidth is split among its flows (paper 001 eq. 7, or max-min fairness).")
@click.option("--buffer", "buffer", metavar="BYTES",
              help="Give every switch port of --topology a queue of BYTES that drops when full (paper 000 eq. 4).")
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), help="Write a Chrome trace (Perfetto).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON; the total time in seconds is 'total'.")
def simulate_cmd(profile_spec: str | None, model: str | None, sets: tuple[str, ...], collective: str | None,
                 algorithm: str | None, procs: int | None, size: str | None, root: int, params: tuple[str, ...],
                 goal_file: str | None, goal_unit: float, topology_spec: str | None, sharing: str,
                 buffer: str | None, trace_file: str | None, as_json: bool) -> None:
    """Simulate a collective (or a GOAL schedule) on a network model, event by event."""
    try:
        profile = load_profile(profile_spec) if profile_spec else None
        if model is None and profile is None:
            raise click.UsageError("give --profile, or --model with its parameters as --set NAME=VALUE")
        network = model or profile_network(profile)  # type: ignore[arg-type]
        values = _model_params(profile, NETWORKS[network].params, sets)
        if goal_file is not None:
            if collective or algorithm:
                raise click.UsageError("--goal replaces --collective/--algorithm; give one or the other")
            schedule = read_goal(goal_file, goal_unit)
        else:
            schedule = _registry_schedule(collective, algorithm, procs, size, root, params)
        topology = _topology(topology_spec, schedule.procs)
        if topology_spec is None and profile is not None:
            topology = topology_for(profile.topology, network, schedule.procs)
        if buffer is not None:
            if topology is None:
                raise click.UsageError("--buffer sets the switch ports' queues of --topology; give --topology too")
            room = parse_bytes(buffer)
            if room <= 0:
                raise click.BadParameter(f"{buffer!r}: a buffer holds at least one byte", param_hint="--buffer")
            topology = topology.with_buffer(room)
        result = simulate(schedule, network, values, topology=topology, sharing=sharing)  # type: ignore[arg-type]
        # what the tuner prices over a topology: the third of back-to-back calls (streams run on)
        steady = None if topology is None or goal_file is not None else steady_call(
            schedule, network, values, topology=topology, sharing=sharing)  # type: ignore[arg-type]
        if trace_file:
            write_trace(trace_file, schedule, result)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename}: {exc.strerror}") from None
    unit = profile.time_unit if profile is not None else "s"
    what = {"goal": goal_file} if goal_file else {k: schedule.meta[k] for k in
                                                  ("collective", "algorithm", "procs", "root", "size", "params")}
    if as_json:
        click.echo(json.dumps({"profile": profile.name if profile else None, "time_unit": unit, **what,
                               "topology": topology.name if topology is not None else None,
                               "steady_call": steady, **result.as_dict()}, indent=2))
        return
    shown = format_seconds(result.total) if unit == "s" else f"{result.total:.6g} units"
    origin = profile.name if profile else "--set"
    title = goal_file if goal_file else f"{what['collective']}/{what['algorithm']}, P = {schedule.procs}, {what['size']} B"
    over = "" if topology is None else f" over topology {topology.name}"
    con = console()
    con.print(f"{title} on {network}{over} ({origin}): [bold]{shown}[/bold]")
    if steady is not None:
        con.print("the third of calls made back to back, each after a barrier (what tune prices): "
                  + (format_seconds(steady) if unit == "s" else f"{steady:.6g} units"))
    con.print(f"{result.messages} messages, {result.events} events"
              + (f", {int(result.rto.sum())} retransmission timeouts" if result.rto.any() else ""))
    if trace_file:
        con.print(f"trace written to {trace_file}")


@example('colltune export-goal -c bcast -a binomial_tree -p 16 -s 64KiB -o bcast.goal')
@main.command("export-goal")
@_collective_option(required=True)
@click.option("--algorithm", "-a", required=True, type=click.Choice(REGISTRY.names(aliases=True)), metavar="NAME",
              help="Algorithm name or alias.")
@click.option("--procs", "-p", required=True, type=click.IntRange(1, MAX_PROCS), help="Process count P.")
@click.option("--size", "-s", required=True, help="Block size in bytes, units allowed: 1000, 64KiB, 1MiB.")
@click.option("--root", "-r", default=0, show_default=True, type=click.IntRange(min=0), help="Root rank.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Algorithm parameter; repeatable.")
@click.option("--goal-unit", default=1e-9, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per GOAL time unit, for calc statements.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="GOAL file to write, or - for standard output.")
def export_goal_cmd(collective: str, algorithm: str, procs: int, size: str, root: int, params: tuple[str, ...],
                    goal_unit: float, output: str) -> None:
    """Write a registry schedule as GOAL, the schedule language of LogGOPSim."""
    try:
        schedule = _registry_schedule(collective, algorithm, procs, size, root, params)
        if output == "-":
            for line in goal_lines(schedule, goal_unit):
                click.echo(line)
        else:
            write_goal(output, schedule, goal_unit)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename}: {exc.strerror}") from None


@example('colltune profiles --show builtin:paper000-cluster')
@main.command("profiles")
@click.option("--show", "show", metavar="FILE|builtin:NAME", help="Print one profile as JSON.")
@click.option("--schema", is_flag=True, help="Print the profile format's JSON Schema (docs/profile.schema.json).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles_cmd(show: str | None, schema: bool, as_json: bool) -> None:
    """List the built-in profiles, print one, or print the profile format's JSON Schema."""
    if schema:
        click.echo(json.dumps(profile_schema(), indent=2))
        return
    if show:
        try:
            click.echo(load_profile(show).to_json(), nl=False)
        except ColltuneError as exc:
            raise click.UsageError(str(exc)) from None
        return
    rows = [{"name": f"builtin:{n}", "models": (p := builtin(n)).models.present(), "default_model": p.default_model,
             "time_unit": p.time_unit, "description": p.description} for n in BUILTINS]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="built-in profiles")
    for col in ("name", "models", "unit", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["name"], ", ".join(r["models"]), r["time_unit"], r["description"])
    console().print(table)


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    """A parameter set's fields as (dotted name, text) rows; tabulated functions on one row."""
    if isinstance(value, dict) and set(value) == {"sizes", "values"}:
        return [(prefix, ", ".join(f"{s} B: {v:.4g}" for s, v in zip(value["sizes"], value["values"], strict=True)))]
    if isinstance(value, dict):
        return [row for k, v in value.items() if v is not None for row in _flatten(f"{prefix}.{k}" if prefix else k, v)]
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):
            return [(prefix, f"{len(value)} x {len(value[0])} matrix")]
        return [(prefix, ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in value))]
    return [(prefix, f"{value:.6g}" if isinstance(value, float) else str(value))]


@example('colltune show builtin:paper001-gige --plot gige.png')
@main.command("show")
@click.argument("profile_spec", metavar="PROFILE")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Also draw g(m), os(m), or(m) and b(h) into this PNG file.")
def show_cmd(profile_spec: str, plot_file: str | None) -> None:
    """Print a profile (a file or builtin:NAME) as tables: its models, measurements and fits."""
    try:
        profile = load_profile(profile_spec)
        if plot_file:
            plot_profile(profile, plot_file)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename or plot_file}: {exc.strerror}") from None
    con = console()
    prov = profile.provenance
    con.print(f"[bold]{profile.name}[/bold]: {profile.description}")
    con.print(f"times in {'seconds' if profile.time_unit == 's' else 'abstract units'}, sizes in bytes, "
              f"bandwidths in B/s; default model {profile.default_model}, network model {profile_network(profile)}"
              + ("" if profile.topology is None else
                 f" over its topology ({profile.topology.name}: {profile.topology.description or 'no description'})"))
    con.print(f"source: {prov.source}" + "".join(f"; {k}: {v}" for k, v in (
        ("date", prov.date), ("MPI", prov.mpi_library), ("P", prov.procs), ("colltune", prov.colltune_version))
        if v is not None))
    for note in prov.notes:
        con.print(f"  - {note}")
    for name in profile.models.present():
        params = getattr(profile.models, name)
        table = Table(title=f"{name} ({type(params).__name__})", title_justify="left")
        table.add_column("parameter")
        table.add_column("value", overflow="fold")
        for key, text in _flatten("", params.model_dump(by_alias=True)):
            table.add_row(key, text)
        con.print(table)
        if name == "latency":
            matrix = Table(title="latency (s), row to column", title_justify="left")
            matrix.add_column("")
            for n in params.names:
                matrix.add_column(n, justify="right")
            for n, row in zip(params.names, params.latency, strict=True):
                matrix.add_row(n, *(f"{v:.3g}" for v in row))
            con.print(matrix)
    if profile.measurements:
        table = Table(title="measurements (median, and the widest IQR relative to it)", title_justify="left")
        for col in ("name", "unit", "x", "median", "max IQR/median", "reps", "rejected"):
            table.add_column(col, overflow="fold")
        for key, ser in profile.measurements.items():
            rel = max((p.iqr / abs(p.median) for p in ser.points if p.median), default=0.0)
            table.add_row(key, ser.unit, f"{ser.x_name} {', '.join(f'{x:g}' for x in ser.x)}",
                          ", ".join(f"{v:.3g}" for v in ser.medians), f"{rel:.1%}",
                          str(min((p.reps for p in ser.points), default=0)),
                          str(sum(p.rejected for p in ser.points)))
        con.print(table)
    if profile.fits:
        table = Table(title="fits", title_justify="left")
        for col in ("model", "data", "points", "rms residual", "method"):
            table.add_column(col, overflow="fold")
        for key, f in profile.fits.items():
            table.add_row(key, ", ".join(f.data), str(len(f.residuals)), f"{f.rms:.3g}", f.method)
        con.print(table)
    if plot_file:
        con.print(f"figure written to {plot_file}")


@example('mpiexec -n 8 colltune probe --topology star:100mbit -o profile.json')
@main.command("probe")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Profile file to write.")
@click.option("--quick", "mode", flag_value="quick", help="A few seconds: fewer sizes and repetitions.")
@click.option("--thorough", "mode", flag_value="thorough", help="More sizes and repetitions.")
@click.option("--sizes", metavar="LIST", help="Message sizes for the point-to-point sweep, e.g. 0,1,1KiB,64KiB.")
@click.option("--name", default="probe", show_default=True, help="The profile's name.")
@click.option("--topology", "topology_spec", metavar="FILE|star:RATE",
              help="The network's topology (rank r on its host r): the check then chooses the network model "
                   "carried over it, and the profile keeps it for simulate and tune.")
def probe_cmd(output: str, mode: str | None, sizes: str | None, name: str, topology_spec: str | None) -> None:
    """Measure the network inside this MPI job and write a profile (run under mpiexec -n P, P >= 2)."""
    from mpi4py import MPI

    from colltune.probe.run import probe

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    with mpi_job(comm, [output]):
        size_list = parse_size_list(sizes) if sizes else None
        topology = _topology(topology_spec, comm.Get_size())
        if me == 0 and not sys.stderr.isatty():
            say = progress_lines(me)
            start = time.perf_counter()
            profile = probe(comm, mode or "default", size_list, name, topology,
                            progress=lambda what, done, total: say(f"probe {done + 1}/{total} "
                                                                   f"({time.perf_counter() - start:.0f} s): {what}"))
        elif me == 0:
            with Progress(TextColumn("{task.description:<52}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("starting", total=None)
                profile = probe(comm, mode or "default", size_list, name, topology,
                                progress=lambda what, done, total: bar.update(task, description=what,
                                                                              completed=done, total=total))
        else:
            probe(comm, mode or "default", size_list, name, topology)
    if me == 0:
        try:
            write_profile(profile, output)
        except OSError as exc:
            raise click.UsageError(f"{output}: cannot write the profile: {exc.strerror}") from None
        click.echo(f"profile written to {output} ({len(profile.measurements)} measurements, "
                   f"models: {', '.join(profile.models.present())})")



UNIT_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "abstract": 1.0}


def _level_builders(spec: str | None, levels: int) -> list[str]:
    """``--level-builders``, or paper 004's choice: HLOT at the top, flat in between, binomial at the bottom."""
    if spec:
        return [b.strip() for b in spec.split(",")]
    if levels == 1:
        return ["hlot"]
    return ["hlot", *["flat"] * (levels - 2), "binomial"]


def _partition(spec: str, names: tuple[str, ...]) -> list[list[int]]:
    """``A,B;C,D``: groups of rank names (or numbers) separated by semicolons."""
    index = {n: i for i, n in enumerate(names)}
    groups = []
    for part in spec.split(";"):
        group = []
        for token in (t.strip() for t in part.split(",") if t.strip()):
            if token not in index and not (token.isdigit() and int(token) < len(names)):
                raise click.BadParameter(f"{token!r} is not a rank name ({', '.join(names)}) or number",
                                         param_hint="--groups")
            group.append(index.get(token, int(token) if token.isdigit() else -1))
        groups.append(group)
    return groups


@example('colltune grid --latency builtin:paper004-grid --root A --builder all')
@main.command("grid")
@click.option("--latency", "latency_spec", required=True, metavar="FILE|builtin:NAME",
              help="Latency matrix: CSV, JSON, or a profile with a latency model.")
@click.option("--unit", type=click.Choice(list(UNIT_SCALE)), default=None,
              help="Unit of the file's latencies [default: the profile's, else s].")
@click.option("--root", "root_name", required=True, help="The root: a rank name from the matrix, or a number.")
@click.option("--builder", type=click.Choice(["all", *BUILDERS]), default="all", show_default=True,
              help="Tree builder, or all to compare them.")
@click.option("--groups", "group_specs", multiple=True, metavar="auto|A,B;C,D",
              help="Also compose a multi-level tree: one --groups per level from the top (groups of names "
                   "separated by ';'), or auto to find the levels from the latencies.")
@click.option("--level-builders", metavar="B1,B2,...",
              help="Builder per level with --groups, top first [default: hlot, flat..., binomial].")
@click.option("--size", "-s", default="1", show_default=True, help="Message size for the simulation, bytes.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def grid_cmd(latency_spec: str, unit: str | None, root_name: str, builder: str, group_specs: tuple[str, ...],
             level_builders: str | None, size: str, as_json: bool) -> None:
    """Build broadcast trees over a latency matrix (paper 004) and predict their time."""
    try:
        abstract = unit == "abstract" or (unit is None and latency_spec.startswith("builtin:")
                                           and load_profile(latency_spec).time_unit == "abstract")
        model = read_latency(latency_spec, UNIT_SCALE[unit or "s"])
        names = model.names
        if root_name in names:
            root = names.index(root_name)
        elif root_name.isdigit() and int(root_name) < len(names):
            root = int(root_name)
        else:
            raise click.BadParameter(f"{root_name!r} is not one of {', '.join(names)}", param_hint="--root")
        trees = {name: BUILDERS[name].build(model, root) for name in (BUILDERS if builder == "all" else [builder])}
        if group_specs:
            partitions = auto_partitions(model) if group_specs == ("auto",) else \
                [_partition(g, names) for g in group_specs]
            chosen = _level_builders(level_builders, len(partitions) + 1)
            trees["multilevel:" + "/".join(chosen)] = compose(model, root, partitions, chosen)
        nbytes = parse_bytes(size)
        rows = [{"builder": name, "time": tree_time(model, edges, root, overheads=False),
                 "time_with_overheads": tree_time(model, edges, root),
                 "simulated": simulated_time(model, edges, root, nbytes),
                 "edges": [[a, b] for a, b in edges],
                 "edge_names": [f"{names[a]}->{names[b]}" for a, b in edges]} for name, edges in trees.items()]
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"latency": latency_spec, "root": names[root], "names": list(names),
                               "time_unit": "abstract" if abstract else "s", "trees": rows}, indent=2))
        return

    def shown(t: float) -> str:
        return f"{t:.6g}" if abstract else format_seconds(t)

    table = Table(title=f"broadcast trees from {names[root]} over {latency_spec} "
                        f"({'abstract units' if abstract else 'seconds'}; eq. 4 leaves out T_SO, T_G, T_RO)",
                  title_justify="left")
    for col in ("builder", "eq. 4", "eq. 1-2", "simulated", "edges"):
        table.add_column(col, overflow="fold")
    for r in sorted(rows, key=lambda r: r["time_with_overheads"]):
        table.add_row(r["builder"], shown(r["time"]), shown(r["time_with_overheads"]), shown(r["simulated"]),
                      ", ".join(r["edge_names"]))
    con = console()
    con.print(table)
    best = min(rows, key=lambda r: r["time_with_overheads"])
    con.print(f"run it: --algorithm given_tree --root {root} --param 'edges={json.dumps(best['edges'])}'")


def models_markdown() -> str:
    """The documentation table of the cost formulas (docs/models.md is this text)."""
    lines = ["# Cost formulas", "", ("Generated from the formula registry by `colltune models-doc`; "
             "do not edit by hand."), "",
             ("Every (collective, algorithm, model) with a formula. A pair that is not listed is *unavailable*: "
             "`colltune predict` says so rather than price it with another formula. m is the block size in bytes, "
             "s the segment size, k = ceil(m/s). TRG 2005: Thakur, Rabenseifner and Gropp, \"Optimization of "
              "collective communication operations in MPICH\", IJHPCA 2005. PG 2007: Pjesivac-Grbovic et al., "
              "\"Performance analysis of MPI collective operations\", Cluster Computing 2007."), ""]
    for coll in COLLECTIVES:
        rows = formulas(coll)
        if not rows:
            continue
        lines += [f"## {coll}", "", "| algorithm | model | formula and source |", "| --- | --- | --- |"]
        order = {a.name: i for i, a in enumerate(REGISTRY.select(coll))}
        for f in sorted(rows, key=lambda f: (order[f.algorithm], list(MODELS).index(f.model))):
            lines.append(f"| `{f.algorithm}` | {f.model} | {f.source} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def networks_markdown() -> str:
    """The documentation of the simulator's network models (docs/simulator.md is this text)."""
    lines = ["# Simulator network models", "",
             "Generated from the network registry by `colltune sim-doc`; do not edit by hand.", "",
             ("`colltune simulate --model NAME` times a schedule event by event on one of these models; its "
              "parameters come from the profile's model of the same family (or from `--set NAME=VALUE`, in seconds "
              "and bytes). `--topology FILE|star:RATE` carries the messages of any endpoint model as flows over a "
              "switched network whose links are shared by the flows crossing them, one stream per sender and "
              "receiver carrying its messages in order (`--sharing equal`, paper 001 "
              "eq. 7, or `maxmin`). Registry schedules post each rank's operations in list order; GOAL schedules "
              "(`--goal FILE`) carry only their own dependencies, and may hold wildcard receives (`recv ... from -1` or "
              "`tag -1`, as LogGOPSim accepts), which the simulator matches as MPI matches `MPI_ANY_SOURCE` and "
              "`MPI_ANY_TAG`: with the oldest message that fits when the receive is posted, otherwise with the "
              "first one to arrive; such a schedule is simulated but neither verified nor run."), "",
             "| model | parameters from | source | summary |", "| --- | --- | --- | --- |"]
    lines += [f"| `{n.name}` | {n.params} | {n.source} | {n.summary} |" for n in NETWORKS.values()]
    lines.append("")
    for n in NETWORKS.values():
        where = f"Parameters: the profile's `{n.params}` model. Source: {n.source}."
        lines += [f"## {n.name}", "", inspect.cleandoc(n.doc), "", where, ""]
    lines += ["## Endpoint models over a topology (`--topology`)", "",
              inspect.cleandoc(on_topology.__doc__ or ""), ""]
    lines += ["## Hosts that send and receive at once (`duplex` in a topology file)", "",
              inspect.getdoc(Topology.duplex_factor) or "", ""]
    lines += ["## Switch links that carry data both ways (`trunk_duplex` in a topology file)", "",
              inspect.getdoc(Topology.trunk_duplex_factor) or "", ""]
    lines += ["## Hosts that share processor cores (`cores` and `message_cpu` in a topology file)", "",
              inspect.getdoc(Topology.message_cpu_of) or "", ""]
    lines += ["## Calls made back to back (what `tune` prices over a topology)", "",
              inspect.cleandoc(sim_calls.__doc__ or ""), ""]
    lines += ["## Finite switch buffers (`--buffer BYTES`, or `buffer` in a topology file)", "",
              inspect.cleandoc(drops.__doc__ or ""), ""]
    return "\n".join(lines).rstrip() + "\n"


def _rate(text: str, option: str) -> float:
    """A rate option (:func:`colltune.units.parse_rate`), bytes per second."""
    try:
        return parse_rate(text, option)
    except ColltuneError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from None


@example('colltune testbed up --hosts 8 --link 100Mbit', 'colltune testbed run -- python -m colltune probe -o p.json', 'colltune testbed down')
@main.group("testbed")
def testbed_group() -> None:
    """An emulated cluster on this machine: namespaces, shaped links, switch trees (needs root)."""


@example('colltune testbed up --hosts 8 --topology tree:2 --link 100Mbit --uplink 100Mbit',
         'colltune testbed up --hosts 4 --ranks-per-host 2 --link 100Mbit')
@testbed_group.command("up")
@click.option("--hosts", "-n", "hosts", required=True, type=click.IntRange(min=1), help="Number of hosts.")
@click.option("--topology", "shape", default="star", show_default=True, metavar="star|tree:K|binary|FILE",
              help="One switch; leaf switches of K hosts under a core switch; a binary tree of switches; "
                   "or a topology file.")
@click.option("--link", default="1Gbit", show_default=True, help="Rate of each host link, e.g. 100Mbit.")
@click.option("--uplink", "uplinks", multiple=True,
              help="Rate of the switch uplinks, one per level from the bottom [default: non-blocking].")
@click.option("--queue", default="128KiB", show_default=True,
              help="Queue of every switch port, bytes (about 10 ms at 100 Mbit/s).")
@click.option("--burst", default=None, metavar="BYTES",
              help="Token bucket of every link, bytes [default: two frames and 72 B, so that links serialise "
                   "nearly frame by frame, like a wire; larger emulates a policed link].")
@click.option("--tcp", "congestion", default=testbed.net.TCP_CONGESTION, show_default=True, metavar="NAME",
              help="TCP congestion control of every host (one of the kernel's "
                   "tcp_available_congestion_control); the default is Linux's, whatever this machine uses.")
@click.option("--ranks-per-host", "per_host", default=1, show_default=True, type=click.IntRange(min=1),
              help="Ranks on each host: they share its link and talk through shared memory.")
@click.option("--name", default="colltune", show_default=True, help="The testbed's name.")
def testbed_up_cmd(hosts: int, shape: str, link: str, uplinks: tuple[str, ...], queue: str, burst: str | None,
                   congestion: str, per_host: int, name: str) -> None:
    """Create the testbed and write its topology (the simulator's format)."""
    rate = _rate(link, "--link")
    ups = [_rate(u, "--uplink") for u in uplinks]
    try:
        if shape == "star":
            topology = star(hosts, rate)
        elif shape.startswith("tree:"):
            k = int(shape[5:]) if shape[5:].isdigit() else 0
            topology = two_level(hosts, k, rate, ups[0] if ups else rate * k)
        elif shape == "binary":
            depth = max(1, (hosts - 1).bit_length())
            levels = [rate * 2 ** h for h in range(depth)]
            for h, u in enumerate(ups[:depth - 1], start=1):
                levels[h] = u
            topology = binary_tree(hosts, TreeLevels(b=tuple(levels)))
        else:
            topology = read_topology(shape)
            if len(topology.host_names) != hosts:
                raise click.BadParameter(f"{shape} places ranks on {len(topology.host_names)} hosts, not {hosts}",
                                         param_hint="--hosts")
        topology = topology.placed(per_host)
        path = testbed.up(topology, name, parse_bytes(queue),
                          testbed.net.BURST if burst is None else parse_bytes(burst), congestion)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"testbed {name} is up: {topology.description}, TCP {congestion}; topology written to {path}")


@example('colltune testbed run -- python -m colltune probe -o p.json',
         'colltune testbed run --placement round-robin -- ./app')
@testbed_group.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--mpi", type=click.Choice(["mpich", "openmpi"]), default="mpich", show_default=True,
              help="The MPI library whose launcher starts the job (the command must use the same library).")
@click.option("--mpiexec", "launcher", type=click.Path(dir_okay=False),
              help="Its launcher [default: mpich's mpiexec beside this Python; Open MPI's mpirun on PATH].")
@click.option("--name", default="colltune", show_default=True, help="The testbed's name.")
@click.option("--procs", "-n", type=click.IntRange(min=1), help="Ranks [default: the testbed's ranks per host on "
                                                                      "every host].")
@click.option("--placement", type=click.Choice(PLACEMENTS), default="block", show_default=True,
              help="block: rank r on host r // (ranks per host); round-robin: rank r on host r mod (hosts).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def testbed_run_cmd(mpi: str, launcher: str | None, name: str, procs: int | None, placement: str,
                    command: tuple[str, ...]) -> None:
    """Run an MPI job on the testbed's hosts, TCP between hosts, shared memory within one:
    colltune testbed run -- COMMAND ..."""
    try:
        testbed.net.require_root()
        cmd, env = testbed.mpiexec_command(name, list(command), procs, mpi, launcher, placement)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    sys.exit(subprocess.run(cmd, env=env, check=False).returncode)


@example('colltune testbed status')
@testbed_group.command("status")
@click.option("--name", default="colltune", show_default=True, help="The testbed's name.")
def testbed_status_cmd(name: str) -> None:
    """Print the testbed's namespaces and, per shaped port, bytes sent and drops (JSON)."""
    try:
        click.echo(json.dumps(testbed.status(name), indent=2))
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None


@example('colltune testbed down')
@testbed_group.command("down")
@click.option("--name", default="colltune", show_default=True, help="The testbed's name.")
def testbed_down_cmd(name: str) -> None:
    """Remove everything the testbed made (safe to repeat)."""
    try:
        removed = testbed.down(name)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"testbed {name} is down ({len(removed)} namespaces and links removed)")


def grid_markdown() -> str:
    """The documentation of the grid tree builders (docs/grid.md is this text)."""
    from colltune.grid import levels

    lines = ["# Grid trees", "", "Generated from the tree builder registry by `colltune grid-doc`; do not edit by hand.",
             "", ("`colltune grid --latency FILE --root NAME --builder NAME|all` builds these trees over a latency "
                  "matrix (paper 004) and prints their edges and times; any tree runs as the `given_tree` broadcast, "
                  "scatter, gather or reduce with `--param edges=[[parent,child],...]`."), "",
             "| builder | source | summary |", "| --- | --- | --- |"]
    lines += [f"| `{b.name}` | {b.source} | {b.summary} |" for b in BUILDERS.values()]
    lines.append("")
    for b in BUILDERS.values():
        lines += [f"## {b.name}", "", inspect.cleandoc(b.doc), "", f"Source: {b.source}.", ""]
    lines += ["## Levels (`--groups`)", "", inspect.cleandoc(levels.__doc__ or ""), "",
              inspect.cleandoc(levels.group_levels.__doc__ or ""), "", inspect.cleandoc(levels.compose.__doc__ or ""), ""]
    return "\n".join(lines).rstrip() + "\n"


def commands_markdown() -> str:
    """docs/commands.md: every command's ``--help``, as ``colltune COMMAND --help`` prints it at 100 columns."""
    lines = ["# Commands", "",
             "Generated by `colltune commands-doc > docs/commands.md` from the command line's own help; "
             "`colltune COMMAND --help` prints the same.", "",
             "Sizes take B, kB, MB, GB, KiB, MiB and GiB (`64KiB`); rates take bytes per second or a unit "
             "(`100Mbit`, `1Gbit`, `12.5MB`); process counts and sizes take lists and ranges (`1-8,16`).  "
             "Exit codes: 0 done, 1 a failed check (verify, predict without a formula), 2 bad input.", ""]

    def walk(command: click.Command, path: list[str], parent: click.Context | None) -> None:
        if command.hidden:
            return
        ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=100, max_content_width=100,
                            help_option_names=["-h", "--help"])
        lines.extend([f"## `{' '.join(path)}`", "", "```", command.get_help(ctx), "```", ""])
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name], ctx)

    root = click.Context(main, info_name="colltune", terminal_width=100, max_content_width=100)
    for name in main.list_commands(root):
        walk(main.commands[name], ["colltune", name], root)
    return "\n".join(lines).rstrip() + "\n"


#: The generated documentation: hidden command -> (its generator, the file it prints).
GENERATED_DOCS: dict[str, tuple[Callable[[], str], str]] = {
    "grid-doc": (grid_markdown, "docs/grid.md"),
    "sim-doc": (networks_markdown, "docs/simulator.md"),
    "models-doc": (models_markdown, "docs/models.md"),
    "libraries-doc": (libraries_markdown, "docs/libraries.md"),
    "commands-doc": (commands_markdown, "docs/commands.md"),
}


def _doc_command(name: str, make: Callable[[], str], path: str) -> None:
    @main.command(name, hidden=True, help=f"Print {path}.")
    def doc_cmd() -> None:
        click.echo(make(), nl=False)


for _name, (_make, _path) in GENERATED_DOCS.items():
    _doc_command(_name, _make, _path)

main.add_command(tune_cmd)
main.add_command(bench_cmd)
main.add_command(lib_command)
main.add_command(info_command)
main.add_command(trace_to_goal_command)


if __name__ == "__main__":
    main()
