"""``colltune lib``: where the interposition library is."""

from __future__ import annotations

import click

from colltune.errors import ColltuneError
from colltune.pmpi import library_path


@click.command("lib")
def lib() -> None:
    """Print the path of the interposition library, for LD_PRELOAD.

    LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=t.json mpiexec -n 8 ./app runs the program's
    collectives as the decision table says (docs/pmpi.md).
    """
    try:
        click.echo(str(library_path()))
    except ColltuneError as exc:
        raise click.ClickException(str(exc)) from None
