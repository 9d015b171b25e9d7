"""Seeded generators of bad input, and the check that each gets one clean error (tests/test_fuzz.py).

Every case is a command line of ``colltune`` (run in this process through click's test runner) and,
for the file kinds, the file it reads: mutated profiles, GOAL files, decision tables, latency
matrices and topology files, and odd process counts, sizes and algorithm parameters.  A case
passes when the command either succeeds or ends with a non-zero exit and ``Error: ...`` as the
last line of its output, with no traceback, within :data:`CASE_SECONDS`.  Run this module to
try more cases than the suite does::

    python tests/fuzz.py --cases 1000 --seed 7
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from colltune import cli
from colltune.algorithms import REGISTRY
from colltune.profiles.builtin import builtin
from colltune.sim.goal import to_goal
from colltune.sim.topology import star
from colltune.tune.table import fixed_table

#: The longest a case may take, seconds (a hang fails the case).
CASE_SECONDS = 20

#: Values that replace a JSON value or a number of a file: out of range, of the wrong type, huge.
BAD_VALUES: tuple[Any, ...] = (-1, 0, -0.5, 1e308, -1e308, 2 ** 64 + 1, 2 ** 63, 10 ** 30, "abc", "", True, False,
                               None, [], {}, [1, 2], {"a": 1}, 1.5, "1e9", "٤٤")
#: Tokens that replace a number in a command line or a GOAL line.
BAD_TOKENS: tuple[str, ...] = ("-1", "0", "1e9", "1000000000", "9223372036854775808", "2147483648",
                               "18446744073709551617", "1" * 400, "abc", "٤", "", "1.5", "0x10", "-0", "nan",
                               "inf", "100000000")
SIM = ("-m", "loggops", "--set", "L=5e-6", "--set", "o=1e-6", "--set", "g=1e-6", "--set", "G=1e-9")


@dataclass(frozen=True)
class Case:
    """One bad input: what it is, the command's arguments, and the file they name (if any)."""

    kind: str
    args: tuple[str, ...]
    file: bytes | None = None


def _mutate_json(rng: random.Random, doc: Any) -> bytes:
    """``doc`` with one random mutation, as file bytes."""
    how = rng.choice(("value", "value", "value", "drop", "extra", "truncate", "bytes", "deep", "digits", "empty"))
    text = json.dumps(doc)
    if how == "truncate":
        return text.encode()[: rng.randrange(len(text))]
    if how == "bytes":
        raw = bytearray(text.encode())
        at = rng.randrange(len(raw))
        raw[at:at] = bytes([rng.choice((0x80, 0xff, 0xc3, 0xfe))])
        return bytes(raw)
    if how == "deep":
        return ("[" * 100000 + "]" * 100000).encode()
    if how == "digits":
        return text.replace("1", "1" * 5000, 1).encode()
    if how == "empty":
        return b""
    paths = list(_paths(doc, ()))
    path = rng.choice(paths)
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if how == "drop" and isinstance(parent, dict):
        del parent[last]
    elif how == "extra" and isinstance(parent, dict):
        parent["unexpected_" + str(rng.randrange(100))] = 1
    else:
        parent[last] = rng.choice(BAD_VALUES)
    return json.dumps(doc).encode()


def _paths(doc: Any, at: tuple) -> Iterator[tuple]:
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return
    for key, value in items:
        yield (*at, key)
        yield from _paths(value, (*at, key))


def _mutate_text(rng: random.Random, text: str) -> bytes:
    """GOAL text with one random mutation of a line or of its bytes."""
    lines = text.splitlines()
    how = rng.choice(("number", "number", "number", "drop", "duplicate", "garbage", "bytes", "ranks"))
    i = rng.randrange(len(lines))
    if how == "number":
        words = lines[i].split()
        numeric = [k for k, w in enumerate(words) if any(c.isdigit() for c in w)]
        if numeric:
            k = rng.choice(numeric)
            token = rng.choice(BAD_TOKENS)
            words[k] = token + ("b" if words[k].endswith("b") else "")
            lines[i] = " ".join(words)
    elif how == "drop":
        del lines[i]
    elif how == "duplicate":
        lines[i:i] = lines[i: i + rng.randrange(1, 6)]
    elif how == "garbage":
        lines.insert(i, rng.choice(("send", "recv 8b", "rank {", "}", "l9 requires l9", "calc", "x: y")))
    elif how == "ranks":
        lines[0] = f"num_ranks {rng.choice(BAD_TOKENS)}"
    raw = bytearray("\n".join(lines).encode() + b"\n")
    if how == "bytes":
        raw[rng.randrange(len(raw))] = 0xff
    return bytes(raw)


def _profile(rng: random.Random) -> Case:
    doc = json.loads(builtin(rng.choice(("ethernet-10g-tcp", "paper000-cluster", "paper001-gige")))
                     .model_dump_json())
    collective = rng.choice(("bcast", "allreduce", "alltoall"))
    algorithm = {"bcast": "binomial_tree", "allreduce": "ring", "alltoall": "pairwise_exchange"}[collective]
    return Case("profile", ("simulate", "--profile", "{file}", "-c", collective, "-a", algorithm, "-p", "4",
                            "-s", "4KiB"), _mutate_json(rng, doc))


def _goal(rng: random.Random) -> Case:
    schedule = REGISTRY.get("bcast", rng.choice(("binomial_tree", "chain", "scatter_ring_allgather"))) \
        .schedule(rng.choice((2, 3, 4)), 0, 1000)
    return Case("goal", ("simulate", *SIM, "--goal", "{file}"), _mutate_text(rng, to_goal(schedule)))


def _table(rng: random.Random) -> Case:
    table = fixed_table({"bcast": ("binomial_tree", {}), "allreduce": ("ring", {}),
                         "alltoall": ("linear_throttled", {"max_outstanding": 2})}, "fuzz")
    doc = json.loads(table.model_dump_json())
    return Case("table", ("table-reader", "{file}"), _mutate_json(rng, doc))


def _latency(rng: random.Random) -> Case:
    doc = {"names": ["a", "b", "c"], "latency": [[0, 10, 20], [10, 0, 30], [20, 30, 0]]}
    return Case("latency", ("grid", "--latency", "{file}", "--unit", "ms", "--root", "a", "--builder", "all"),
                _mutate_json(rng, doc))


def _topology(rng: random.Random) -> Case:
    doc = json.loads(star(4, 1.25e7, 5e-5).model_dump_json())
    return Case("topology", ("simulate", *SIM, "--topology", "{file}", "-c", "bcast", "-a", "binomial_tree", "-p",
                             "4", "-s", "4KiB"), _mutate_json(rng, doc))


def _command_line(rng: random.Random) -> Case:
    collective, algorithm, param = rng.choice((("bcast", "knomial_tree", "radix"),
                                               ("bcast", "chain_segmented", "segment_size"),
                                               ("alltoall", "linear_throttled", "max_outstanding"),
                                               ("bcast", "binomial_tree", None)))
    with_formula = algorithm in ("chain_segmented", "binomial_tree")  # predict needs a hockney formula
    command = rng.choice(("verify", "simulate", "predict") if with_formula else ("verify", "simulate"))
    procs, size, root = "4", "1KiB", "0"
    params: list[str] = []
    which = rng.choice(("procs", "size", "root", "param", "param"))
    if which == "procs":
        procs = rng.choice((*BAD_TOKENS, "1-100000", "0-3", "3-1", "65535,", ",", "1,,2"))
    elif which == "size":
        size = rng.choice((*BAD_TOKENS, "1EiB", "-5KiB", "1.5KiB", "8 MiB", "5XB"))
    elif which == "root":
        root = rng.choice(("4", "-1", "99999999999999999999", "a"))
    else:
        params = ["--param", f"{param or 'radix'}={rng.choice((*BAD_TOKENS, 'true', '[1,2]', '[[' * 3000))}"]
    args = [command, "-c", collective, "-a", algorithm, "-p", procs, "-s", size, "-r", root, *params]
    if command != "verify":
        args += list(SIM if command == "simulate" else ("-m", "hockney", "--set", "alpha=5e-6", "--set",
                                                           "beta=1e-9"))
    return Case("command line", tuple(args))


def _model_parameters(rng: random.Random) -> Case:
    value = rng.choice(("1e308", "-1", "nan", "inf", "18446744073709551617", "[1,2]", "{}", "abc", "1e-320",
                        "1e20", "[" * 3000))
    name = rng.choice(("L", "o", "g", "G"))
    sets = [a for a in SIM if a != "--set"][2:]
    sets = [s if not s.startswith(name + "=") else f"{name}={value}" for s in sets]
    args = ["simulate", "-m", "loggops", *[x for s in sets for x in ("--set", s)], "-c", "alltoall", "-a",
            "pairwise_exchange", "-p", "8", "-s", "64KiB"]
    return Case("model parameters", tuple(args))


GENERATORS: tuple[Callable[[random.Random], Case], ...] = (_profile, _goal, _table, _latency, _topology,
                                                            _command_line, _model_parameters)


def cases(count: int, seed: int) -> list[Case]:
    """``count`` cases from the generators in turn, repeatable for ``seed``."""
    rng = random.Random(seed)
    return [GENERATORS[i % len(GENERATORS)](rng) for i in range(count)]


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raise :class:`_Timeout` in this thread if the block runs past ``seconds``."""
    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _table_problems(path: str) -> str | None:
    """What the interposition library's check at MPI_Init says of the table at ``path``
    (:func:`colltune.pmpi.settings.problems`): None if it says nothing or one line per problem."""
    from colltune.pmpi.settings import problems
    found = problems({"COLLTUNE_TABLE": path})
    return None if all("\n" not in p for p in found) else f"a message of several lines: {found}"


def _command(args: list[str]) -> str | None:
    """None if ``colltune args`` succeeded or ended with one ``Error:`` line and no traceback."""
    result = CliRunner().invoke(cli.main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if "Traceback" in result.output:
        return "a traceback in the output"
    if result.exit_code != 0:
        last = result.output.strip().splitlines()[-1] if result.output.strip() else ""
        if not last.startswith("Error: "):
            return f"exit {result.exit_code} without an 'Error:' line: {last!r}"
    return None


def run(case: Case, directory: Path) -> str | None:
    """Run ``case``; None if it passed, else what went wrong."""
    args = list(case.args)
    if case.file is not None:
        path = directory / "input"
        path.write_bytes(case.file)
        args = [str(path) if a == "{file}" else a for a in args]
    try:
        with _deadline(CASE_SECONDS):
            return _table_problems(args[1]) if args[0] == "table-reader" else _command(args)
    except _Timeout:
        return f"ran past {CASE_SECONDS} s"
    except Exception as exc:  # noqa: BLE001 - any exception is the defect this reports
        return f"{type(exc).__name__}: {exc}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    import tempfile
    failed = 0
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as directory:
        for i, case in enumerate(cases(options.cases, options.seed)):
            counts[case.kind] = counts.get(case.kind, 0) + 1
            problem = run(case, Path(directory))
            if problem is not None:
                failed += 1
                print(f"case {i} ({case.kind}): {problem}\n  args: {' '.join(case.args)[:300]}", flush=True)
    print(f"{options.cases} cases ({', '.join(f'{k}: {v}' for k, v in counts.items())}), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
