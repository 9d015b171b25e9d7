"""colltune's version, from the installed distribution's metadata (``0+unknown`` in a source tree
that is not installed); ``colltune.__version__`` reads it on first use, since
:mod:`importlib.metadata` takes longer to import than most of colltune's modules."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("colltune")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
