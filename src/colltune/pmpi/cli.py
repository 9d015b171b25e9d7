"""``colltune lib`` (where the interposition library is) and ``colltune trace-to-goal`` (a recorded run as GOAL)."""

from __future__ import annotations

import click

from colltune.command import example
from colltune.errors import ColltuneError
from colltune.pmpi import library_path


@example('LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=t.json mpiexec -n 8 ./app')
@click.command("lib")
def lib() -> None:
    """Print the path of the interposition library, for LD_PRELOAD.

    LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=t.json mpiexec -n 8 ./app runs the program's
    collectives as the decision table says (docs/pmpi.md).
    """
    try:
        click.echo(str(library_path()))
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None


@example('LD_PRELOAD=$(colltune lib) COLLTUNE_RECORD=rec mpiexec -n 8 ./app', 'colltune trace-to-goal rec -o app.goal')
@click.command("trace-to-goal")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="The GOAL file to write.")
@click.option("--table", "table_file", type=click.Path(dir_okay=False),
              help="Run every collective as this decision table says, instead of what ran it.")
@click.option("--goal-unit", default=1e-9, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per GOAL time unit.")
def trace_to_goal(directory: str, output: str, table_file: str | None, goal_unit: float) -> None:
    """Turn a recorded run (COLLTUNE_RECORD=DIRECTORY) into GOAL, for colltune simulate --goal.

    The time between two recorded calls of a rank becomes a delay; collectives become the
    schedules of the algorithms that ran them (or, with --table, that the table chooses).
    """
    from colltune.pmpi.trace import read_records, to_schedule
    from colltune.sim.goal import write_goal
    from colltune.tune.table import read_table

    try:
        records = read_records(directory)
        table = read_table(table_file) if table_file else None
        schedule = to_schedule(records, table)
        write_goal(output, schedule, goal_unit)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    spans = [(r.events[-1].t1 - r.events[0].t0) if r.events else 0.0 for r in records]
    slowest = max(range(len(spans)), key=spans.__getitem__)
    click.echo(f"{directory}: {len(records)} ranks, {sum(len(r.events) for r in records)} recorded calls; "
               f"recorded span {spans[slowest]:.6f} s (rank {slowest}, first call to last)")
    click.echo(f"wrote {output}: {len(schedule)} operations")
