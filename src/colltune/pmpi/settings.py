"""The settings the interposition library reads, checked once at ``MPI_Init`` so that a bad one is
never ignored in silence.

With ``COLLTUNE_TABLE`` set, the library's ``MPI_Init`` (and ``MPI_Init_thread``) calls
:func:`check_job` on every rank of ``MPI_COMM_WORLD``: the table is read by the reader of the
Python API (:func:`colltune.runtime.calls.active_table`), and every other ``COLLTUNE_*`` variable
the library or the runtime reads is checked against the values it takes.  Where a rank finds a
problem, the lowest such rank prints it (one line naming the variable, its value and what is wrong)
and the job aborts; with ``COLLTUNE_ON_ERROR=native`` it warns instead, and every call of the job
goes to the MPI library's own collectives.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from colltune.errors import ColltuneError
from colltune.runtime.compiled import EXECUTOR_ENV
from colltune.runtime.hosts import HOSTS_ENV, made_up_host
from colltune.runtime.state import CHECK_ENV
from colltune.tune.table import TABLE_ENV

#: What the library does when a setting is wrong: ``abort`` the job (the default), or warn and
#: run the MPI library's own collectives (``native``).
ON_ERROR_ENV = "COLLTUNE_ON_ERROR"
ON_ERROR = ("abort", "native")

#: The values of the variables that take a word ("" for unset, the default).
CHOICES: dict[str, tuple[str, ...]] = {ON_ERROR_ENV: ON_ERROR, CHECK_ENV: ("full",), EXECUTOR_ENV: ("python",)}


def _word(environ: Mapping[str, str], name: str) -> str:
    return environ.get(name, "").strip().lower()


def problems(environ: Mapping[str, str] = os.environ) -> list[str]:
    """What is wrong with the ``COLLTUNE_*`` settings of ``environ``, one line each naming the
    variable, its value and the problem; empty when nothing is."""
    from colltune.runtime.calls import active_table

    found = []
    table = environ.get(TABLE_ENV)
    if table:
        try:
            active_table(table)
        except ColltuneError as exc:
            found.append(f"{TABLE_ENV}: {exc}")  # the reader's message names the file
    hosts = environ.get(HOSTS_ENV)
    if hosts:
        try:
            made_up_host(hosts, 0)
        except ColltuneError as exc:
            found.append(str(exc))
    for name, values in CHOICES.items():
        word = _word(environ, name)
        if word and word not in values:
            found.append(f"{name}={environ[name]!r}: give {' or '.join(values)}, or leave it unset")
    return found


def check_job() -> bool:
    """At ``MPI_Init`` under the interposition library, on every rank of ``MPI_COMM_WORLD``:
    True if no rank finds a problem (:func:`problems`).  Else the lowest rank that found one prints
    it on standard error, and the job aborts; with ``COLLTUNE_ON_ERROR=native`` that rank warns
    instead and every rank returns False (the MPI library runs every call)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    mine = problems()
    found = comm.allgather(mine[0] if mine else None)
    first = next(((rank, p) for rank, p in enumerate(found) if p), None)
    if first is None:
        return True
    rank, problem = first
    native = _word(os.environ, ON_ERROR_ENV) == "native"
    if comm.Get_rank() == rank:
        also = "; every collective runs as the MPI library's own (COLLTUNE_ON_ERROR=native)" if native else ""
        print(f"colltune (libcolltune_pmpi.so): {problem}{also}", file=sys.stderr, flush=True)
    if native:
        return False
    comm.Barrier()  # the line is out before the job ends
    if comm.Get_rank() == rank:
        comm.Abort(1)
    comm.Barrier()  # the others wait for the abort that ends them
    return False  # not reached


__all__ = ["CHOICES", "ON_ERROR", "ON_ERROR_ENV", "check_job", "problems"]
