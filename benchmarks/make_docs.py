"""Generate ``docs/results.md`` and the README's results section from ``benchmarks/results/``.

Run: ``python benchmarks/make_docs.py [--check]``.  Every benchmark writes its latest results file
into ``benchmarks/results/`` (format ``colltune-benchmark``, :mod:`colltune.report.results`); this
script renders them, so that the pages quote exactly what the files hold.  ``--check`` writes
nothing and exits 1 when either page is stale (the test suite runs the same check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from colltune.files import write_atomic
from colltune.report.results import read_directory, results_page, with_readme_results

TOP = Path(__file__).resolve().parent.parent


def pages(top: Path = TOP) -> dict[Path, str]:
    """Each generated page's path and the text it must hold."""
    results = read_directory(top / "benchmarks" / "results")
    readme = top / "README.md"
    return {top / "docs" / "results.md": results_page(results),
            readme: with_readme_results(readme.read_text(encoding="utf-8"), results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args()
    stale = []
    for path, text in pages().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            stale.append(path.relative_to(TOP))
            if not args.check:
                write_atomic(path, text)
    if args.check and stale:
        sys.exit(f"stale: {', '.join(map(str, stale))}; run python benchmarks/make_docs.py")
    print(f"{'stale' if args.check else 'written'}: {', '.join(map(str, stale)) or 'nothing'}")


if __name__ == "__main__":
    main()
