"""``colltune <command>``: the command-line face of colltune.

Every command takes ``--json`` for machine-readable output.  Exit codes: 0 on
success, 1 when a verification fails, 2 for bad input (click's usage errors).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from colltune import __version__
from colltune.algorithms import REGISTRY, Algorithm
from colltune.collectives import COLLECTIVES, Problem
from colltune.errors import ColltuneError, VerificationError
from colltune.schedule import REDUCTION_DTYPES, REDUCTION_OPS
from colltune.schedule import verify as verify_schedule
from colltune.units import parse_int_list, parse_size_list

NATIVE_NOTE = ("`native` (runtime only): the MPI library's own collective, called through mpi4py; "
               "it has no schedule, so it is not verified or simulated.")


def _console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def _collective_option(required: bool, allow_all: bool = False) -> Any:
    choices = [*COLLECTIVES, "all"] if allow_all else list(COLLECTIVES)
    return click.option("--collective", "-c", type=click.Choice(choices), required=required,
                        help="Collective operation" + (", or 'all'." if allow_all else "."))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    con = _console()
    con.print(table)
    con.print(NATIVE_NOTE.replace("`", ""))


def _parse_params(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not of the form name=value", param_hint="--param")
        out[key.strip()] = value.strip()
    return out


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
        proc_list = parse_int_list(procs, "--procs")
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
    con = _console()
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


if __name__ == "__main__":
    main()
