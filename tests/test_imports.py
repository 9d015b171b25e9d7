"""Every module of colltune imports on its own, first thing in a fresh interpreter.

The packages re-export their names on first use (colltune.lazy), so no package ``__init__`` fixes
the order in which modules load any more: a cycle between two modules (an algorithm that reads a
model's table, a model that reads the registry) shows only when one of them is imported first.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers import run_bounded

import colltune

PACKAGE = Path(colltune.__file__).parent
MODULES = sorted(
    ".".join(("colltune", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py") if path.name != "__main__.py")


def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    assert "colltune.tune.spawn" in MODULES and "colltune.models.costs" in MODULES

    def first(module: str) -> tuple[str, int, str]:
        res = run_bounded([sys.executable, "-c", f"import {module}"], 120, f"import {module}")
        return module, res.returncode, res.stderr[-1500:]

    with ThreadPoolExecutor(2) as pool:
        failed = [(m, err) for m, rc, err in pool.map(first, MODULES) if rc != 0]
    assert not failed, failed


def test_a_package_name_is_imported_on_first_use_and_kept() -> None:
    res = run_bounded([sys.executable, "-c", (
        "import sys, colltune\n"
        "assert 'colltune.algorithms' not in sys.modules\n"
        "registry = colltune.REGISTRY\n"
        "assert 'colltune.algorithms' in sys.modules and vars(colltune)['REGISTRY'] is registry\n"
        "from colltune.tune import NATIVE\n"
        "assert NATIVE == 'native'\n"
        "try:\n"
        "    colltune.no_such_name\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n")], 120, "colltune's lazy names")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "module 'colltune' has no attribute 'no_such_name'" in res.stdout
