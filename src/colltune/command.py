"""What the command groups of ``colltune`` share: the frame of a command run on every rank of an
MPI job, the check that its outputs can be written before it measures, progress as plain lines,
the console tables print to, and how repeated ``--collective`` options are read."""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from colltune.collectives import COLLECTIVES
from colltune.errors import ColltuneError
from colltune.mpi_library import launcher


def example(*lines: str) -> Callable[[click.Command], click.Command]:
    """Decorate a click command (above its ``@command`` line) so that its ``--help`` ends with
    ``lines``, an example of its use, printed as given."""
    def add(command: click.Command) -> click.Command:
        command.epilog = "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)
        return command
    return add


def console() -> Console:
    """A console for tables on standard output: 160 columns when not on a terminal."""
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


@contextmanager
def mpi_job(comm: Any, outputs: list[str | None]) -> Iterator[Callable[[str], NoReturn]]:
    """The frame of a command run on every rank of an MPI job.  Before the body, rank 0 checks that
    every output can be written.  Yields ``fail(message)``: one usage error, printed once by rank 0,
    with every rank exiting 2; a :class:`ColltuneError` in the body ends the same way, and any
    other exception on one rank aborts the whole job instead of leaving the others waiting."""
    me = comm.Get_rank()

    def fail(message: str) -> NoReturn:
        if me == 0:
            raise click.UsageError(message)
        raise SystemExit(2)

    problem = comm.bcast(unwritable_any(outputs) if me == 0 else None, root=0)
    if problem:
        fail(problem)
    try:
        yield fail
    except ColltuneError as exc:
        fail(str(exc))
    except click.ClickException as exc:
        fail(exc.format_message())
    except Exception:  # noqa: BLE001 - any failure on one rank must end the whole job
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)


def unwritable(output: str) -> str | None:
    """Why ``output`` cannot be written (checked before measuring), or None."""
    target = Path(output)
    if target.is_dir():
        return f"{output}: is a directory"
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        return f"{output}: directory {folder} does not exist"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"{output}: cannot write in {folder}: {exc.strerror}"
    return None


def chosen_collectives(given: tuple[str, ...], default: list[str]) -> list[str]:
    """The collectives of repeated ``--collective`` options (``all``: every one), else ``default``."""
    if not given:
        return default
    return list(COLLECTIVES) if "all" in given else list(dict.fromkeys(given))


def unwritable_any(paths: list[str | None]) -> str | None:
    """Why the first of ``paths`` (None: not asked for) cannot be written, or None."""
    for path in paths:
        if path:
            problem = unwritable(path)
            if problem:
                return problem
    return None


def progress_lines(me: int) -> Callable[[str], None]:
    """Progress as plain lines on standard error, from rank 0 only (long commands run under mpiexec
    and in CI logs)."""
    def say(line: str) -> None:
        if me == 0:
            print(line, file=sys.stderr, flush=True)
    return say


def under_mpi_launcher() -> bool:
    """True if a launcher started this process (mpiexec, mpirun, srun or another that speaks PMI:
    :func:`colltune.mpi_library.launcher`), from the environment it sets, without initialising MPI."""
    return launcher() is not None
