"""``colltune bench --library``: the C client under MPICH or Open MPI, with and without the
exported decision file (the timing is :mod:`colltune.tune.library_bench`)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone

import click
from rich.console import Console
from rich.table import Table

from colltune import __version__
from colltune.errors import ColltuneError
from colltune.profiles.format import Provenance
from colltune.tune.library_bench import (
    LibraryBench,
    geomean,
    library_bench,
    toolchain,
    write_library_bench,
)
from colltune.tune.table import read_table


def bench_library(library: str, table_spec: str, collectives: list[str], sizes: list[int], reps: int, warmup: int,
                  rounds: int, procs: int | None, testbed: str | None, mpicc: str | None, launcher: str | None,
                  output: str, as_json: bool, forced: bool = False) -> None:
    """Run the library benchmark and print its speedups (see ``colltune bench --help``); no
    ``collectives``: the table's."""
    try:
        table = read_table(table_spec)
        collectives = collectives or list(table.collectives)
        if not collectives:
            raise ColltuneError(f"{table_spec}: the table decides no collective; name them with --collective")
        tools = toolchain(library, mpicc, launcher)
        provenance = Provenance(
            source=f"colltune bench --library {library} --table {table_spec} (client {tools.mpicc.name}, "
                   f"{reps} calls, {warmup} warm-up, {rounds} rounds)",
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"), colltune_version=__version__,
            procs=procs)
        results = library_bench(table, table_spec, tools, procs, collectives, sizes, warmup, reps, reps, rounds,
                                testbed, provenance, progress=lambda line: click.echo(line, err=True),
                                forced=forced)
        write_library_bench(results, output)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename}: {exc.strerror}") from None
    print_library_bench(results, output, as_json)


def print_library_bench(results: LibraryBench, output: str, as_json: bool) -> None:
    """Per collective: the speedup (default / with the file) at every size, its geometric mean and
    the worst size."""
    summary = {}
    for coll in results.collectives():
        pairs = results.speedups(coll)
        worst = min(pairs, key=lambda p: p[1])
        summary[coll] = {"geomean": geomean([s for _, s in pairs]), "worst": {"size": worst[0], "speedup": worst[1]},
                         "speedups": {str(size): s for size, s in pairs}}
        best = {c.size: c.best_forced for c in results.cells if c.collective == coll and c.best_forced}
        if best:
            ratios = {size: c.tuned / best[c.size][1] for c in results.cells if c.collective == coll
                      for size in [c.size] if size in best}
            summary[coll]["over_best_forced"] = {str(size): r for size, r in ratios.items()}
            summary[coll]["best_forced"] = {str(size): label for size, (label, _) in best.items()}
    if as_json:
        click.echo(json.dumps({"results": output, "library": results.library, "procs": results.procs,
                               "collectives": summary}, indent=1))
        return
    con = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)
    t = Table(title=f"{results.library} with {results.table} against its defaults, P = {results.procs} "
                    f"(speedup = default / with the file; median of {results.rounds} rounds)")
    forced = any("over_best_forced" in s for s in summary.values())
    for col in ("collective", "geomean", "worst (size)", "speedup by block size (bytes)",
                *(["with the file / best forced, by size"] if forced else [])):
        t.add_column(col, overflow="fold")
    for coll, s in summary.items():
        t.add_row(coll, f"{s['geomean']:.2f}", f"{s['worst']['speedup']:.2f} ({s['worst']['size']})",
                  " ".join(f"{size}:{v:.2f}" for size, v in s["speedups"].items()),
                  *([" ".join(f"{size}:{v:.2f}" for size, v in s.get("over_best_forced", {}).items())]
                    if forced else []))
    con.print(t)
    for note in results.notes:
        con.print(f"[dim]{note}[/dim]")
    con.print(f"results written to {output}")
