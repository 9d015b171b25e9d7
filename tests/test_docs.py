"""The README, docs and results pages: their limits, that the generated ones are current, that no
run's story stands in them or in the code, that every command's help ends with an example, and
that the tutorial's commands run."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import click
import click.testing
import pytest

from colltune.cli import commands_markdown, main
from colltune.errors import ParameterError
from colltune.report.results import (
    README_BEGIN,
    README_END,
    BenchmarkResults,
    Headline,
    ResultsError,
    Table,
    command_line,
    mpi_library_of,
    provenance,
    read_directory,
    read_results,
    readme_results,
    results_page,
    save,
    with_readme_results,
    write_results,
)
from colltune.units import parse_rate
from helpers import run_bounded

TOP = Path(__file__).resolve().parent.parent
DOCS = TOP / "docs"
#: Pages generated from the code or from data, each with the test that keeps it current.
GENERATED = {"algorithms.md", "models.md", "simulator.md", "libraries.md", "grid.md", "commands.md", "results.md",
             "profile.schema.json"}
#: What a run's story leaves behind: a date, a time of day, an issue number, a commit hash.
STORY = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b|\b[0-2]\d:[0-5]\d\b|\bissue #?\d+|#\d{2,}\b|"
                   r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")


def _make_docs():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(TOP / "benchmarks"))
    try:
        import make_docs
    finally:
        sys.path.pop(0)
    return make_docs


def test_the_readme_is_short_and_keeps_its_three_commands_first():
    text = (TOP / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    lines = block.group(1).strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("pip install") and lines[1].startswith("colltune tune")
    assert "pytest" in lines[2]


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md") if p.name not in GENERATED))
def test_every_written_page_of_the_docs_is_at_most_500_lines(page):
    assert len((DOCS / page).read_text().splitlines()) <= 500


def _story_lines(path: Path) -> list[str]:
    found = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if 'date="' in line or "hexdigest" in line:  # provenance data, not a story
            continue
        for m in STORY.finditer(line):
            found.append(f"{path.relative_to(TOP)}:{n}: {m.group(0)!r} in {line.strip()[:100]}")
    return found


def test_no_run_story_stands_in_the_readme_the_docs_or_the_code():
    """Dates and times of runs, issue numbers and commit hashes belong in commit messages and the
    generated results page, not in what users and developers read as a description."""
    paths = [TOP / "README.md", *(p for p in DOCS.glob("*.md") if p.name != "results.md"),
             *(p for p in (TOP / "src").rglob("*") if p.suffix in {".py", ".cpp", ".hpp", ".c", ".h"})]
    found = [line for p in paths for line in _story_lines(p)]
    assert not found, "\n".join(found)


def test_the_story_pattern_finds_what_it_must_and_spares_the_rest():
    hits = [bool(STORY.search(t)) for t in ("measured on 2026-12-04", "at 22:28", "issue #19", "(e6670db)",
                                            "0x1f2e3d4c", "tree:2", "64 KiB", "a1", "deadbeef", "0.5 s")]
    assert hits == [True, True, True, True, False, False, False, False, False, False]


def test_the_generated_results_pages_are_current():
    stale = [str(path.relative_to(TOP)) for path, text in _make_docs().pages().items()
             if path.read_text(encoding="utf-8") != text]
    assert not stale, f"{stale} are stale: run `python benchmarks/make_docs.py`"


def test_docs_commands_is_current():
    assert (DOCS / "commands.md").read_text() == commands_markdown(), \
        "docs/commands.md is stale: run `colltune commands-doc > docs/commands.md`"


def test_every_results_file_is_valid_and_named_for_its_benchmark():
    results = read_directory(TOP / "benchmarks" / "results")
    assert results
    for r in results:
        script = r.command.split()[r.command.split().index("python") + 1] if "python" in r.command.split() else ""
        assert (TOP / script).is_file(), f"{r.benchmark}: {r.command!r} names no benchmark script"
        for figure in r.figures:
            assert (TOP / "benchmarks" / "results" / figure).is_file()


def _commands(group: click.Group, path: list[str]):  # type: ignore[no-untyped-def]
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
        yield [*path, name], command
        if isinstance(command, click.Group):
            yield from _commands(command, [*path, name])


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in _commands(main, [])])
def test_every_command_help_ends_with_an_example(path):
    out = click.testing.CliRunner().invoke(main, [*path.split(), "--help"])
    assert out.exit_code == 0, out.output
    tail = out.output.rstrip().splitlines()
    at = max(i for i, line in enumerate(tail) if line.strip() == "Example:")
    example = tail[at + 1:]
    assert example and all(line.startswith("    ") for line in example)
    assert any("colltune" in line for line in example)


def test_an_example_of_the_help_runs():
    """The examples of the commands that need no MPI job and no root run as printed."""
    runner = click.testing.CliRunner()
    for path in (["algorithms"], ["predict"], ["verify"]):
        help_text = runner.invoke(main, [*path, "--help"]).output
        line = help_text.rstrip().splitlines()[-1].strip()
        result = runner.invoke(main, line.split()[1:])
        assert result.exit_code == 0, f"{line}: {result.output}"


def test_a_rate_takes_every_unit_testbed_up_takes():
    assert parse_rate("100mbit") == parse_rate("100Mbit") == 12.5e6
    assert parse_rate("1Gbit/s") == 1.25e8
    assert parse_rate("12.5MB") == 12.5e6
    assert parse_rate("1MiB") == 2.0**20
    assert parse_rate("125000") == 125000.0
    for bad in ("fast", "-1Mbit", "0", "inf", "1e999"):
        with pytest.raises(ParameterError, match="rate"):
            parse_rate(bad, "--link")


def test_simulate_takes_a_star_at_a_rate_with_a_unit():
    runner = click.testing.CliRunner()
    args = ["simulate", "--profile", "builtin:ethernet-10g-tcp", "-c", "bcast", "-a", "binomial_tree", "-p", "4",
            "-s", "64KiB", "--json", "--topology"]
    with_unit = runner.invoke(main, [*args, "star:100mbit"])
    in_bytes = runner.invoke(main, [*args, "star:12500000"])
    assert with_unit.exit_code == 0, with_unit.output
    assert json.loads(with_unit.output)["total"] == json.loads(in_bytes.output)["total"]
    bad = runner.invoke(main, [*args, "star:fast"])
    assert bad.exit_code == 2 and "'fast' is not a rate" in bad.output


def _sample(**changes) -> BenchmarkResults:  # type: ignore[no-untyped-def]
    fields = dict(benchmark="sample_bench", title="A sample", what="What it measures.",
                  command="python benchmarks/sample_bench.py --n 3", provenance=provenance("MPICH 5"),
                  headline=(Headline(figure="speed", value="2.0x", target="1.5x"),),
                  tables=(Table(title="cells", columns=("case", "time (s)"), rows=(("a", 0.5), ("b", None))),))
    fields.update(changes)
    return BenchmarkResults(**fields)


def test_the_readme_gives_one_table_per_benchmark_script():
    """Two results files of one script (two configurations) share one table, the second's
    headlines led by its title, with both rerun commands; another script gets its own table."""
    first = _sample()
    second = _sample(benchmark="sample_bench_other", title="A sample, other shape",
                     command="python benchmarks/sample_bench.py --n 3 --shape other",
                     headline=(Headline(figure="speed", value="1.2x"),))
    third = _sample(benchmark="another", title="Another", command="python benchmarks/another.py")
    block = readme_results([first, second, third])
    assert block.count("| figure | latest") == 2
    assert ("**A sample**: `python benchmarks/sample_bench.py --n 3` · "
            "`python benchmarks/sample_bench.py --n 3 --shape other`") in block
    assert "| speed | 2.0x | 1.5x |" in block and "| A sample, other shape: speed | 1.2x |  |" in block
    assert "**Another**: `python benchmarks/another.py`" in block


def test_a_results_file_round_trips_and_renders(tmp_path):
    path = write_results(_sample(), tmp_path)
    assert path == tmp_path / "sample_bench.json"
    back = read_results(path)
    assert back == _sample().model_copy(update={"provenance": back.provenance})
    page = results_page([back])
    assert "## A sample" in page and "`python benchmarks/sample_bench.py --n 3`" in page
    assert "| speed | 2.0x | 1.5x |" in page and "| a | 0.5 |" in page
    block = readme_results([back])
    assert block.startswith(README_BEGIN) and block.endswith(README_END)
    assert back.provenance.date[:4] not in block, "the README quotes no dates"
    readme = f"# x\n\n{README_BEGIN}\nold\n{README_END}\n\nafter\n"
    assert with_readme_results(readme, [back]) == f"# x\n\n{block}\n\nafter\n"
    with pytest.raises(ResultsError, match="markers"):
        with_readme_results("# no markers\n", [back])


def test_the_rerun_command_leaves_out_where_the_run_kept_its_files():
    argv = ["--reps", "20", "--keep", "/tmp/x", "--json=/tmp/y.json", "--plot", "f.png", "--name", "a b",
            "--against", "/tmp/z"]
    assert command_line("benchmarks/x.py", argv) == "python benchmarks/x.py --reps 20 --name 'a b'"


def test_save_writes_the_benchmark_rerun_command_with_its_environment(tmp_path):
    path = save(str(tmp_path / "sample_bench.py"), tmp_path, title="t", what="w",
                headline=[Headline(figure="f", value="1")], argv=["--n", "2", "--keep", "d"],
                env="OPENBLAS_NUM_THREADS=1")
    assert read_results(path).command == "OPENBLAS_NUM_THREADS=1 python benchmarks/sample_bench.py --n 2"


def test_the_mpi_library_is_read_in_a_process_of_its_own():
    assert "MPICH" in (mpi_library_of() or "")
    assert mpi_library_of("/nonexistent/python") is None


def test_a_bad_results_file_names_the_file_and_the_field(tmp_path):
    path = write_results(_sample(), tmp_path)
    data = json.loads(path.read_text())
    data["headline"][0].pop("value")
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match=r"sample_bench\.json: headline\.0\.value"):
        read_results(path)
    data["headline"][0]["value"] = "1"
    data["version"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="version"):
        read_results(path)
    other = tmp_path / "other.json"
    shutil.copy(path, other)
    data["version"] = 1
    other.write_text(json.dumps(data))
    with pytest.raises(ResultsError, match="not the file's name"):
        read_results(other)
    with pytest.raises(ValueError, match="row 0 has 1 cells for 2 columns"):
        Table(columns=("a", "b"), rows=(("x",),))


TUTORIAL = DOCS / "tutorial.md"


def test_the_tutorial_commands_that_need_no_root_run(tmp_path):
    """Every ``sh`` block of docs/tutorial.md, in order, in one shell, from a copy of the repository's
    examples (the ``bash`` blocks need root and the emulated cluster)."""
    blocks = re.findall(r"```sh\n(.*?)```", TUTORIAL.read_text(), re.S)
    assert len(blocks) >= 3
    shutil.copytree(DOCS / "examples", tmp_path / "docs" / "examples")
    script = tmp_path / "tutorial.sh"
    script.write_text(f"set -euo pipefail\ncd {tmp_path}\n" + "\n".join(blocks))
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("COLLTUNE_TABLE", None)
    done = run_bounded(["bash", str(script)], 300, "the tutorial", env=env) if shutil.which("bash") else None
    assert done is not None and done.returncode == 0, done and done.stderr[-3000:]
    assert done.stdout.count("bcast  524288 B:") == 2, done.stdout
    assert (tmp_path / "t.json").is_file() and (tmp_path / "mpich.json").is_file()

