"""Package attributes imported on first use (PEP 562), so that importing one module of a package
does not import every module the package re-exports.

The jobs that :mod:`colltune.tune.spawn` starts import a few small modules; when ``colltune``,
``colltune.tune`` and ``colltune.runtime`` imported all they re-export, each such process imported
the registry, every model, pydantic and the whole runtime first: 8 of them took 1.7 s on the
testbed's 2 cores.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> tuple[Callable[[str], Any], list[str]]:
    """A module ``__getattr__`` for ``package`` and its ``__all__``: ``modules`` maps each module to
    the names the package re-exports from it; each is imported on first use and kept in the
    package, so that later lookups find it directly."""
    where = {name: module for module, listed in modules.items() for name in listed}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            value = getattr(import_module(module), name)
        except RuntimeError:  # mpi4py raises it on import when it loads no libmpi: say what to install
            from colltune.mpi_library import NOT_FOUND, MPINotFound, missing

            if missing():
                raise MPINotFound(NOT_FOUND) from None
            raise
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__, sorted(where)


__all__ = ["exports"]
