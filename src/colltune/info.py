"""``colltune info``: which MPI library, launcher and tools colltune finds, and what applies to them."""

from __future__ import annotations

import json

import click

from colltune import __version__
from colltune.command import example
from colltune.mpi_library import NOT_FOUND, found

#: What each binary interface lets colltune run (the compiled executor and the interposition library).
_ABI = {"mpich": "MPICH's (libmpi.so.12)", "openmpi": "Open MPI's (libmpi.so.40)"}


@example("colltune info", "srun -n 1 colltune info --json")
@click.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def info(as_json: bool) -> None:
    """Say which MPI library colltune finds (through mpi4py), its binary interface, the launcher that
    started this process and the launchers found, and which exports and --library apply to it.

    Exits 1 when no MPI library can be loaded, saying what to install.
    """
    f = found()
    if as_json:
        click.echo(json.dumps({"colltune": __version__, **f.as_dict()}, indent=2))
    else:
        lines = [f"colltune {__version__}, mpi4py {f.mpi4py}"]
        if f.library is None:
            lines.append(f"MPI library: none; {NOT_FOUND}")
        else:
            lines.append(f"MPI library: {f.library} ({f.libmpi or 'file not found'})")
            lines.append(f"binary interface: {_ABI.get(f.abi or '', 'not one colltune knows')}; "
                         + ("colltune's algorithms run here (Python API, compiled executor, LD_PRELOAD)"
                            if f.abi else "colltune's algorithms run on the Python executor only"))
            lines.append("exports it reads: " + (" ".join(f.exports) + f"; tune --library {f.tune_library}"
                                                 if f.tune_library else "none (colltune writes MPICH's and Open "
                                                 "MPI's files only)"))
        lines.append(f"started by: {f.launcher or 'no launcher (a single process)'}")
        lines.append("found: " + (", ".join(f"{k} {v}" for k, v in f.tools.items()) or "no launcher or mpicc"))
        if f.interposition:
            lines.append(f"interposition library: {f.interposition}")
        click.echo("\n".join(lines))
    if f.library is None:
        raise SystemExit(1)
