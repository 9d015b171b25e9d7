"""What an exported decision file gains a C program: ``colltune bench --library mpich|openmpi``.

A small C client in the manner of the OSU micro-benchmarks (``c/collbench.c``: each call timed
alone with a barrier between calls, warm-up, iterations, the slowest rank's average), built at run
time with the library's ``mpicc``, runs under the library twice per round: once as the library
comes (its defaults) and once with the decision table exported to the library's own file:

* MPICH: the MPIR selection JSON and the ch4 device's composition JSON
  (:func:`~colltune.tune.export.mpich_files`), named by ``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``
  and ``MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE`` (docs/tune.md);
* Open MPI: the coll/tuned rules file (:func:`~colltune.tune.export.openmpi_rules`) with
  ``coll_tuned_use_dynamic_rules`` on, as ``OMPI_MCA_`` environment variables.

Each collective runs in a job of its own (on a testbed, after :data:`colltune.tune.warmup.NETWORK_WARMUP` seconds of
traffic between every pair of ranks), and the two alternate over ``rounds`` rounds (default
first, then tuned, in every round); each (collective, size) keeps the median over the rounds of
the slowest rank's average, so that a slow spell of the machine falls on both.  One job per
collective, because on a TCP network a collective starts from the connections' state the ones
before it left (congestion windows, the reordering and round-trip estimates Linux carries over).  With ``forced``, every round
then runs the client once per algorithm of the library's own that colltune knows
(:mod:`colltune.tune.targets`), forced at every size (MPICH: a selection file that names it; Open
MPI: its ``coll_tuned_<coll>_algorithm`` variables, since a rules file leaves scatter and the
reductions that combine out of rank order to the fixed rules), so that the exported choice can
be compared with the best the library has; after the first round only those still in the race
(:data:`FORCED_KEEP`).

The best of many forced algorithms, each a median of a few noisy rounds, is biased low: the one
that comes out fastest is often the one whose rounds were luckiest, so the file is found behind it
even where the file runs that very algorithm.  With ``playoff`` rounds, where the
file is more than :data:`PLAYOFF_OVER` behind the best forced algorithm at some size of a
collective, the file and each algorithm that beat it so are run again, alternating, in rounds of
their own, and the cell compares the two on those rounds only (:attr:`Cell.over_best`), which
the choice of the best did not see.

The same holds for the file against the defaults, cell by cell: a benchmark of some fifty cells
with a few rounds each finds some cells slow by chance, also where the file runs what the library
runs by itself.  So where the file is below :data:`PLAYOFF_BELOW` of
the defaults at some size, the defaults join that collective's playoff (with or without forced
runs, and for colltune's table through ``LD_PRELOAD`` as for an exported file), and the cell's verdict
(:attr:`Cell.checked_speedup`) comes from the playoff rounds; :attr:`Cell.speedup`, over the rounds
every cell had, stays the gain.  A playoff runs the sizes from the smallest up to the largest in
doubt, as the rounds did (a size's time can depend on the algorithm of the size before it).

Three figures of one call, for the rounds (the playoffs compare the first only):

* the slowest rank's mean call, each call timed alone after a barrier (:attr:`Cell.default`,
  :attr:`Cell.tuned`): the figure colltune's tuners price and compare;
* the ranks' mean of their mean calls (:attr:`Cell.default_ranks_mean`): what the OSU
  micro-benchmarks print as their average latency.  For a rooted collective it counts the ranks
  that leave the call early: a linear or tree reduction frees its leaves long before the root has
  the result, a pipeline keeps every rank to the end, so this figure can favour an algorithm whose
  root is several times slower;
* with ``back_to_back``, the seconds per call of as many calls made back to back, with no barrier
  between them (:attr:`Cell.default_back_to_back`): what a program's loop of collectives pays, where
  a pipeline may overlap the next call and no rank runs ahead of the slowest for long.

The results file (format ``colltune-library-bench``, version 4; versions 1, without playoffs, 2,
without the defaults in them, and 3, without the ranks' mean and the back-to-back figure, are still
read) keeps times in seconds with their provenance; speedup is default / tuned.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from colltune.collectives import COLLECTIVES
from colltune.errors import ColltuneError
from colltune.files import parse_record, read_json, write_atomic
from colltune.models import ParamSet
from colltune.profiles.format import Provenance
from colltune.tune.export import export_files
from colltune.tune.forcing import openmpi_forcing_environment
from colltune.tune.table import DecisionTable, fixed_table, write_table

FORMAT = "colltune-library-bench"
VERSION = 4
#: The MPI libraries whose own collectives can be benchmarked with and without an exported file.
LIBRARIES = ("mpich", "openmpi")
#: The C client's source, shipped with the package.
SOURCE = Path(__file__).parent / "c" / "collbench.c"
#: Seconds a compile may take, and seconds per client run on top of its expected time.
COMPILE_TIMEOUT = 120.0
RUN_TIMEOUT = 600.0
#: Seconds each size is timed for at least in each run of the client (``colltune bench --min-time``):
#: where ``--reps`` calls take less, the client makes more (counted from its warm-up).  A few calls
#: of a small collective measure the job's luck, not the library.
MIN_TIME = 0.25


class LibraryBenchError(ColltuneError, ValueError):
    """The client cannot be built or run, or a results file cannot be used; the message says which."""


@dataclass(frozen=True)
class Toolchain:
    """An MPI library's compiler wrapper and launcher."""

    library: Literal["mpich", "openmpi"]
    mpicc: Path
    launcher: Path


#: Per library: its launcher, and a program that only it installs beside its tools.
_TOOLS = {"mpich": ("mpiexec", "mpichversion"), "openmpi": ("mpirun", "ompi_info")}


def toolchain(library: str, mpicc: str | None = None, launcher: str | None = None) -> Toolchain:
    """The compiler wrapper and launcher of ``library``: the ones given, else the library's own
    (:data:`_TOOLS`) beside this Python (the ``mpich`` or ``openmpi`` extra), else on ``PATH`` (a
    site's MPI)."""
    if library not in LIBRARIES:
        raise LibraryBenchError(f"library {library!r}: expected one of {', '.join(LIBRARIES)}")
    here = Path(sys.executable).parent
    launcher_name, mark = _TOOLS[library]
    found = []
    for given, name, option in ((mpicc, "mpicc", "--mpicc"), (launcher, launcher_name, "--mpiexec")):
        if given:
            path = Path(given)
        elif (here / name).exists() and (here / mark).exists():
            path = here / name
        else:
            which = shutil.which(name)
            if which is None:
                raise LibraryBenchError(f"{library}: no {name} found; give {option} PATH (the library's own)")
            path = Path(which)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise LibraryBenchError(f"{option} {path}: not an executable file")
        found.append(path)
    return Toolchain(library, found[0], found[1])  # type: ignore[arg-type]


def cache_dir() -> Path:
    """Where built clients are kept: ``$XDG_CACHE_HOME/colltune`` (default ``~/.cache/colltune``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "colltune" / "collbench"


def build_client(tools: Toolchain, cache: Path | None = None) -> Path:
    """The C client compiled with ``tools.mpicc`` (``-O2``), built once per source and compiler and
    kept in ``cache`` (default :func:`cache_dir`)."""
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + str(tools.mpicc.resolve()).encode()).hexdigest()[:16]
    where = (cache or cache_dir()) / f"{tools.library}-{key}"
    exe = where / "collbench"
    if exe.exists():
        return exe
    where.mkdir(parents=True, exist_ok=True)
    partial = where / f"collbench.{os.getpid()}.tmp"
    try:
        res = subprocess.run([str(tools.mpicc), "-O2", "-o", str(partial), str(SOURCE)], capture_output=True,
                             text=True, timeout=COMPILE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LibraryBenchError(f"{tools.mpicc}: cannot compile {SOURCE.name}: {exc}") from None
    if res.returncode != 0:
        partial.unlink(missing_ok=True)
        raise LibraryBenchError(f"{tools.mpicc}: compiling {SOURCE.name} failed:\n{res.stderr[-2000:]}")
    partial.replace(exe)
    return exe


def exported(table: DecisionTable, library: str, directory: Path) -> tuple[dict[str, str], list[str]]:
    """Write ``table`` as ``library``'s file in ``directory``; the environment that makes the library
    read it, and the export's notes on nearest equivalents."""
    kind, path = ("mpich_json", directory / "mpich.json") if library == "mpich" else \
        ("openmpi_rules", directory / "ompi.rules")
    files, notes = export_files(kind, table, path)
    for name, text in files.items():
        write_atomic(name, text)
    return dict(line.split("=", 1) for line in files[f"{path}.env"].splitlines()), notes


def preloaded(table: DecisionTable, directory: Path) -> tuple[dict[str, str], list[str]]:
    """Write colltune's ``table`` in ``directory``; the environment that makes the client run it
    through the interposition library (``LD_PRELOAD=$(colltune lib) COLLTUNE_TABLE=...``)."""
    from colltune.pmpi import library_path

    if table.library != "colltune":
        raise LibraryBenchError(f"--preload runs colltune's own algorithms; this table decides among "
                                f"{table.library}'s")
    path = directory / "colltune.json"
    write_table(table, path)
    return {"LD_PRELOAD": str(library_path()), "COLLTUNE_TABLE": str(path)}, []


#: Environment variables that would change what the library runs: unset for the default runs.
_SELECTION_VARIABLES = ("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", "MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE",
                        "MPIR_CVAR_CH4_POSIX_COLL_SELECTION_TUNING_JSON_FILE", "MPIR_CVAR_DEVICE_COLLECTIVES")
#: ... and every variable of Open MPI's coll/tuned (its rules file, its forced algorithms) and coll/han.
_SELECTION_PREFIX = ("OMPI_MCA_coll_tuned_", "OMPI_MCA_coll_han_")


def launch(tools: Toolchain, procs: int | None, argv: list[str], testbed: str | None,
           placement: str = "block") -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start ``argv`` on ``procs`` ranks: on testbed
    ``testbed``, its ranks placed on its hosts by ``placement`` (see
    :func:`colltune.testbed.mpiexec_command`), else locally."""
    if testbed is not None:
        from colltune.testbed import mpiexec_command

        return mpiexec_command(testbed, argv, procs, tools.library, str(tools.launcher), placement)
    n = str(procs or 1)
    if tools.library == "mpich":
        return [str(tools.launcher), "-n", n, *argv], dict(os.environ)
    return ([str(tools.launcher), "--oversubscribe", "-n", n, *argv],
            dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))


@dataclass(frozen=True)
class Timing:
    """One client line: the slowest, fastest and mean rank's average seconds per call, and the
    seconds per call of the back-to-back loop (0 where the client did not run one)."""

    slowest: float
    fastest: float
    mean: float
    iterations: int
    back_to_back: float = 0.0


def parse_output(text: str) -> dict[tuple[str, int], Timing]:
    """The client's lines ``collective size max min mean iterations back_to_back``, by (collective,
    size)."""
    out: dict[tuple[str, int], Timing] = {}
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if len(parts) != 7 or parts[0] not in COLLECTIVES:
            continue  # the library's own chatter
        try:
            out[(parts[0], int(parts[1]))] = Timing(float(parts[2]), float(parts[3]), float(parts[4]), int(parts[5]),
                                                    float(parts[6]))
        except ValueError:
            raise LibraryBenchError(f"client output line {number}: cannot read {line!r}") from None
    return out


def run_client(exe: Path, tools: Toolchain, procs: int | None, collectives: Sequence[str], sizes: Sequence[int],
               warmup: int, iterations: int, min_time: float, testbed: str | None,
               extra_env: dict[str, str], network_warmup: float = 0.0,
               placement: str = "block", back_to_back: bool = False) -> dict[tuple[str, int], Timing]:
    """One run of the client: ``network_warmup`` seconds of exchanges between every pair of ranks
    first (:data:`colltune.tune.warmup.NETWORK_WARMUP`), then at least ``iterations`` calls per size, more where they
    take less than ``min_time`` seconds (:data:`MIN_TIME`), and with ``back_to_back`` as many again
    back to back; its timings by (collective, size).  Raises with the job's stderr if it fails or
    misses a line."""
    argv = [str(exe), ",".join(collectives), ",".join(map(str, sizes)), str(warmup), str(iterations),
            repr(float(min_time)), repr(float(network_warmup)), str(int(back_to_back))]
    cmd, env = launch(tools, procs, argv, testbed, placement)
    for name in [k for k in env if k in _SELECTION_VARIABLES or k.startswith(_SELECTION_PREFIX)]:
        del env[name]
    env.update(extra_env)
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise LibraryBenchError(f"the client did not finish within {RUN_TIMEOUT:.0f} s: {' '.join(cmd)}") from None
    if res.returncode != 0:
        raise LibraryBenchError(f"the client failed (exit {res.returncode}): {' '.join(cmd)}\n{res.stderr[-3000:]}")
    timings = parse_output(res.stdout)
    want = {(c, 0 if c == "barrier" else s) for c in collectives for s in sizes}
    missing = sorted(want - set(timings))
    if missing:
        raise LibraryBenchError(f"the client printed no time for {missing[0]} ({len(missing)} missing)\n"
                                f"{res.stdout[-1000:]}{res.stderr[-2000:]}")
    return timings


class Cell(ParamSet):
    """One collective at one block size: the median over the rounds of the slowest rank's average
    time per call (seconds), with the library's defaults, with the exported file and, with
    ``forced``, with each of the library's own algorithms forced; the ranks' mean and the
    back-to-back figure (module docstring) with the defaults and with the file."""

    collective: str
    size: int = Field(ge=0, description="block size in bytes")
    default: float = Field(gt=0, allow_inf_nan=False)
    tuned: float = Field(gt=0, allow_inf_nan=False)
    default_rounds: tuple[float, ...] = Field(description="each round's figure, seconds")
    tuned_rounds: tuple[float, ...]
    iterations: int = Field(ge=1, description="timed calls in the first round's run with the defaults (each run "
                                              "counts its own from min_time)")
    forced: dict[str, float] = Field(default_factory=dict,
                                     description="the library's own algorithms forced, by label: median seconds")
    forced_rounds: dict[str, tuple[float, ...]] = Field(
        default_factory=dict, description="each forced algorithm's figure in each round it ran, seconds (after the "
                                          "first round only those in the race: FORCED_KEEP)")
    playoff_tuned: tuple[float, ...] = Field((), description="the file's figure in each playoff round, seconds")
    playoff_forced: dict[str, tuple[float, ...]] = Field(
        default_factory=dict, description="each forced algorithm in the playoff (one that beat the file by more "
                                          "than PLAYOFF_OVER at some size): its figure in each playoff round")
    playoff_default: tuple[float, ...] = Field(
        (), description="the defaults' figure in each playoff round (where the file was below PLAYOFF_BELOW of them "
                        "at some size), seconds")
    default_ranks_mean: float | None = Field(None, gt=0, allow_inf_nan=False,
                                             description="the ranks' mean of their average call (OSU's average "
                                                         "latency) with the defaults, median over the rounds, seconds")
    tuned_ranks_mean: float | None = Field(None, gt=0, allow_inf_nan=False)
    default_back_to_back: float | None = Field(None, gt=0, allow_inf_nan=False,
                                               description="seconds per call of calls made back to back with the "
                                                           "defaults, median over the rounds (None: not timed)")
    tuned_back_to_back: float | None = Field(None, gt=0, allow_inf_nan=False)

    @property
    def ranks_mean_speedup(self) -> float | None:
        """default / tuned by the ranks' mean (what OSU reports); None in files without it."""
        if self.default_ranks_mean is None or self.tuned_ranks_mean is None:
            return None
        return self.default_ranks_mean / self.tuned_ranks_mean

    @property
    def back_to_back_speedup(self) -> float | None:
        """default / tuned by the back-to-back figure (what a loop of calls pays); None if not timed."""
        if self.default_back_to_back is None or self.tuned_back_to_back is None:
            return None
        return self.default_back_to_back / self.tuned_back_to_back

    @property
    def speedup(self) -> float:
        """default / tuned over the rounds: above 1 where the exported file is faster."""
        return self.default / self.tuned

    @property
    def checked_speedup(self) -> tuple[float, bool]:
        """default / tuned from the playoff rounds where the defaults ran in them (the medians of
        those rounds), else :attr:`speedup`; and whether it comes from the playoff."""
        if self.playoff_default and self.playoff_tuned:
            return statistics.median(self.playoff_default) / statistics.median(self.playoff_tuned), True
        return self.speedup, False

    @property
    def best_forced(self) -> tuple[str, float] | None:
        """The fastest forced algorithm and its time, None without forced runs."""
        if not self.forced:
            return None
        label = min(self.forced, key=self.forced.__getitem__)
        return label, self.forced[label]

    @property
    def over_best(self) -> tuple[str, float, bool] | None:
        """The best forced algorithm, the file's time over its time, and whether that ratio comes from
        the playoff rounds (the medians of the rounds in which both ran there; else the medians of
        the rounds, which chose that algorithm); None without forced runs."""
        best = self.best_forced
        if best is None:
            return None
        label, time = best
        if self.playoff_tuned and label in self.playoff_forced:
            return label, statistics.median(self.playoff_tuned) / statistics.median(self.playoff_forced[label]), True
        return label, self.tuned / time, False


class LibraryBench(ParamSet):
    """A ``colltune bench --library`` run: the cells and where they come from."""

    format: Literal["colltune-library-bench"] = FORMAT
    version: Literal[4] = VERSION
    provenance: Provenance
    library: Literal["mpich", "openmpi"]
    table: str = Field(description="the decision table exported")
    procs: int = Field(ge=1)
    testbed: str | None = None
    placement: str = Field("block", description="how the ranks were placed on the testbed's hosts")
    preload: bool = Field(False, description="the table ran through the interposition library (LD_PRELOAD), "
                                             "not the library's file")
    warmup: int = Field(ge=0)
    min_time: float = Field(0.0, ge=0, allow_inf_nan=False,
                            description="seconds each size was timed for at least, per run (0: a fixed count)")
    network_warmup: float = Field(0.0, ge=0, allow_inf_nan=False,
                                  description="seconds of traffic between every pair of ranks before each run's "
                                              "first timing (NETWORK_WARMUP)")
    rounds: int = Field(ge=1)
    playoff: int = Field(0, ge=0, description="playoff rounds (see the module docstring)")
    notes: tuple[str, ...] = Field((), description="the export's notes on nearest equivalents")
    cells: tuple[Cell, ...]

    def collectives(self) -> list[str]:
        return list(dict.fromkeys(c.collective for c in self.cells))

    def speedups(self, collective: str) -> list[tuple[int, float]]:
        return [(c.size, c.speedup) for c in self.cells if c.collective == collective]

    def figure_geomeans(self, collective: str) -> dict[str, float]:
        """``geomean_ranks_mean`` and ``geomean_back_to_back``: the geometric mean over the sizes of
        ``collective`` of the gain by OSU's figure and back to back, each where every cell has it."""
        cells = [c for c in self.cells if c.collective == collective]
        out = {}
        for figure in ("ranks_mean", "back_to_back"):
            gains = [getattr(c, f"{figure}_speedup") for c in cells]
            if None not in gains:
                out[f"geomean_{figure}"] = geomean(gains)
        return out


def geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


#: Chunk and segment sizes (bytes) at which a pipelined algorithm is forced: MPICH's default chunk
#: (MPIR_CVAR_BCAST_TREE_PIPELINE_CHUNK_SIZE, 8192) and a large one (and Open MPI's segment size 0,
#: the whole message).
FORCED_CHUNKS = (8192, 65536)


def forced_runs(library: str, collectives: Sequence[str], procs: int) -> list[dict[str, tuple[str, dict]]]:
    """The runs that force each of ``library``'s algorithms (:mod:`colltune.tune.targets`) that
    can run on ``procs`` ranks, every collective at once: run i forces the i-th algorithm of each
    collective that has one.  Pipelined ones are forced at :data:`FORCED_CHUNKS` (and segment size 0)."""
    from colltune.models import Unavailable
    from colltune.tune.targets import TARGETS

    per: dict[str, list[tuple[str, dict]]] = {}
    for coll in collectives:
        for (c, name), a in TARGETS[library].items():
            if c != coll:
                continue
            for params in a.variants(procs, max(FORCED_CHUNKS)):
                if any(params.get(key, 0) not in (0, *FORCED_CHUNKS) for key in ("chunk_size", "segsize")):
                    continue
                try:
                    a.equivalent(procs, max(FORCED_CHUNKS), params)
                except Unavailable:
                    continue
                per.setdefault(coll, []).append((name, params))
    longest = max((len(v) for v in per.values()), default=0)
    return [{c: v[i] for c, v in per.items() if i < len(v)} for i in range(longest)]


def forced_label(name: str, params: dict) -> str:
    """``tree(k=2, tree_type=kary)``: how a forced algorithm is named in the results."""
    return name + (f"({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})" if params else "")


def runs_alike(library: str, collective: str, procs: int, size: int, a: tuple[str, dict], b: tuple[str, dict]) -> bool:
    """True if ``library`` runs choices ``a`` and ``b`` (``(name, params)``) alike at ``size``
    bytes on ``procs`` ranks: the same choice, or two algorithms whose catalogued correspondences
    (:mod:`colltune.tune.targets`, both exact) price them with one schedule.  Open MPI's segmented
    ring allreduce with segment size 0 is its plain ring (it runs the plain ring wherever the
    message is less than P segments, ``ompi_coll_base_allreduce_intra_ring_segmented``), and both
    map to colltune's ring with whole blocks.  ``native`` (the library's own choice) is alike only
    to itself."""
    from colltune.models import Unavailable
    from colltune.tune.targets import TARGETS

    if a[0] == b[0] and dict(a[1]) == dict(b[1]):
        return True
    catalogue = TARGETS[library]
    found = [catalogue.get((collective, name)) for name, _ in (a, b)]
    if any(alg is None or not alg.exact for alg in found):
        return False
    try:
        return found[0].equivalent(procs, size, dict(a[1])) == found[1].equivalent(procs, size, dict(b[1]))
    except Unavailable:
        return False


def library_bench(table: DecisionTable, table_name: str, tools: Toolchain, procs: int | None,
                  collectives: Sequence[str], sizes: Sequence[int], warmup: int, iterations: int,
                  min_time: float, rounds: int, testbed: str | None, provenance: Provenance,
                  progress: Callable[[str], None] = lambda _: None, forced: bool = False,
                  playoff: int = 0, network_warmup: float = 0.0, placement: str = "block",
                  preload: bool = False, back_to_back: bool = False) -> LibraryBench:
    """Time ``collectives`` at ``sizes`` with ``tools``' library, as it comes and with ``table``
    exported, alternating over ``rounds`` rounds (see the module docstring), each size in each run
    for ``iterations`` calls or ``min_time`` seconds, whichever is more (:data:`MIN_TIME`), each run
    after ``network_warmup`` seconds of traffic between every pair of ranks (:data:`colltune.tune.warmup.NETWORK_WARMUP`); with
    ``forced``, each round also forces each of the library's own algorithms in turn
    (:func:`forced_runs`); ``playoff`` rounds follow for the collectives where the file was below
    :data:`PLAYOFF_BELOW` of the defaults (:func:`_doubted`) or one of the forced algorithms beat it
    by more than :data:`PLAYOFF_OVER` (:func:`_rivals`), at the sizes up to the largest in doubt.
    With ``preload``, the client runs colltune's own table through the interposition library
    (``LD_PRELOAD``, :func:`preloaded`) instead of the library's file; on a testbed, ``placement``
    puts the ranks on its hosts.  With ``back_to_back``, the runs with the defaults and with the
    file also time the calls back to back (module docstring)."""
    if rounds < 1 or iterations < 1 or warmup < 0 or not min_time >= 0 or not network_warmup >= 0:
        raise LibraryBenchError("rounds and iterations must be at least 1, warm-up, the minimum time and the "
                                "network's warm-up at least 0")
    if playoff < 0:
        raise LibraryBenchError(f"playoff rounds cannot be negative, not {playoff}")
    if procs is None and testbed is None:
        raise LibraryBenchError("give the number of ranks (-n) for a local run")
    if forced and tools.library not in _catalogued():
        raise LibraryBenchError(f"forcing {tools.library}'s own algorithms needs a catalogue of them, which colltune "
                                f"has for {', '.join(_catalogued())} only")
    ranks = procs or _testbed_hosts(testbed)
    progress(f"building the client with {tools.mpicc}")
    exe = build_client(tools)
    force = forced_runs(tools.library, collectives, ranks) if forced else []
    runs: dict[str, list[dict[tuple[str, int], Timing]]] = {"default": [{} for _ in range(rounds)],
                                                            "tuned": [{} for _ in range(rounds)]}
    #: (collective, size) -> forced label -> each round's figure; the same for the playoff rounds,
    #: with the file's figures under None and the defaults' under DEFAULTS
    own: dict[tuple[str, int], dict[str, list[float]]] = {}
    extra_rounds: dict[tuple[str, int], dict[str | None, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="colltune-libbench-") as tmp:
        env, notes = preloaded(table, Path(tmp)) if preload else exported(table, tools.library, Path(tmp))
        tuned_label = "with colltune's table (LD_PRELOAD)" if preload else "with the exported file"
        force_env = []
        for i, choices in enumerate(force):
            where = Path(tmp) / f"forced-{i}"
            where.mkdir()
            force_env.append(openmpi_forcing_environment(choices) if tools.library == "openmpi" else
                             exported(fixed_table(choices, "colltune bench --forced", library=tools.library),
                                      tools.library, where)[0])
        def client(coll: str, extra: dict[str, str], upto: int | None = None,
                   loop: bool = False) -> dict[tuple[str, int], Timing]:
            return run_client(exe, tools, procs, [coll], [s for s in sizes if upto is None or s <= upto], warmup,
                              iterations, min_time, testbed, extra, network_warmup, placement, loop)

        for r in range(rounds):
            for coll in collectives:
                for which, extra in (("default", {}), ("tuned", env)):
                    progress(f"round {r + 1}/{rounds}: {coll}: {tools.library} "
                             f"{tuned_label if which == 'tuned' else 'defaults'}")
                    runs[which][r].update(client(coll, extra, loop=back_to_back))
                mine = [(forced_label(*choices[coll]), extra) for choices, extra in zip(force, force_env)
                        if coll in choices]
                for i, (label, extra) in enumerate(mine):
                    if r > 0 and not _in_the_race(coll, label, runs, own):
                        continue
                    progress(f"round {r + 1}/{rounds}: {coll}: forced {i + 1}/{len(mine)}: {label}")
                    for key, timing in client(coll, extra).items():
                        own.setdefault(key, {}).setdefault(label, []).append(timing.slowest)
        for coll in collectives if playoff else ():
            envs = {forced_label(*choices[coll]): extra for choices, extra in zip(force, force_env) if coll in choices}
            rivals, below = _rivals(coll, runs, own), _doubted(coll, runs)
            lineup: list[tuple[str | None, dict[str, str]]] = [(None, env)]
            lineup += [(DEFAULTS, {})] if below else []
            lineup += [(label, envs[label]) for label in rivals]
            if len(lineup) == 1:
                continue
            upto = max(below + [size for label in rivals for size in rivals[label]])
            for r in range(playoff):  # the order turns round every round
                for label, extra in lineup if r % 2 == 0 else lineup[::-1]:
                    what = {None: tuned_label, DEFAULTS: f"{tools.library} defaults"}.get(
                        label, f"forced {label}")
                    progress(f"playoff {r + 1}/{playoff}: {coll} up to {upto} B: {what}")
                    for key, timing in client(coll, extra, upto).items():
                        extra_rounds.setdefault(key, {}).setdefault(label, []).append(timing.slowest)
    cells = []
    for key in runs["default"][0]:
        d = tuple(run[key].slowest for run in runs["default"])
        t = tuple(run[key].slowest for run in runs["tuned"])
        if min(d) <= 0 or min(t) <= 0:
            raise LibraryBenchError(f"{key[0]} at {key[1]} B: a run timed 0 s; raise the iterations")
        mine, then = own.get(key, {}), extra_rounds.get(key, {})
        figures: dict[str, float | None] = {}
        for which in ("default", "tuned"):
            means = [run[key].mean for run in runs[which]]
            loops = [run[key].back_to_back for run in runs[which]]
            figures[f"{which}_ranks_mean"] = statistics.median(means) if min(means) > 0 else None
            figures[f"{which}_back_to_back"] = statistics.median(loops) if min(loops) > 0 else None  # 0: not timed
        cells.append(Cell(collective=key[0], size=key[1], default=statistics.median(d), tuned=statistics.median(t),
                          default_rounds=d, tuned_rounds=t, iterations=runs["default"][0][key].iterations, **figures,
                          forced={label: statistics.median(v) for label, v in mine.items()},
                          forced_rounds={label: tuple(v) for label, v in mine.items()},
                          playoff_tuned=tuple(then.get(None, ())), playoff_default=tuple(then.get(DEFAULTS, ())),
                          playoff_forced={label: tuple(v) for label, v in then.items()
                                          if label not in (None, DEFAULTS)}))
    return LibraryBench(provenance=provenance, library=tools.library, table=table_name, procs=ranks,
                        testbed=testbed, warmup=warmup, min_time=min_time, network_warmup=network_warmup,
                        rounds=rounds, playoff=playoff, placement=placement, preload=preload,
                        notes=tuple(notes), cells=tuple(cells))


#: After the first round, a forced algorithm is run again only if, at some size, its first-round
#: time was within this factor of that round's best (forced, default or with the file).  One
#: round's figure of a cell strays from the median of five by up to about 10 %; an algorithm 25 %
#: behind at every size is not the library's best, and rerunning every forced algorithm every
#: round would double the benchmark's time.
FORCED_KEEP = 1.25


def _in_the_race(collective: str, label: str, runs: dict[str, list[dict[tuple[str, int], Timing]]],
                 own: dict[tuple[str, int], dict[str, list[float]]]) -> bool:
    """True if the forced algorithm ``label`` of ``collective`` was within :data:`FORCED_KEEP` of the
    first round's best at some size."""
    for key, times in own.items():
        if key[0] != collective or label not in times:
            continue
        best = min([v[0] for v in times.values()] + [runs[w][0][key].slowest for w in ("default", "tuned")])
        if times[label][0] <= FORCED_KEEP * best:
            return True
    return False


#: The file behind the best forced algorithm by more than this factor at a size ([decide]'s target:
#: within 5 % of the best of the library's own algorithms) puts that algorithm in the playoff.
PLAYOFF_OVER = 1.05
#: The file below the defaults by more than this factor at a size (default / with the file;
#: [decide]'s target: never slower than 0.95x) puts the defaults in the playoff.
PLAYOFF_BELOW = 0.95
#: The defaults' key among the playoff's forced labels (no algorithm's label has parentheses).
DEFAULTS = "(defaults)"


def _median(runs: list[dict[tuple[str, int], Timing]], key: tuple[str, int]) -> float:
    return statistics.median(run[key].slowest for run in runs)


def _rivals(collective: str, runs: dict[str, list[dict[tuple[str, int], Timing]]],
            own: dict[tuple[str, int], dict[str, list[float]]]) -> dict[str, list[int]]:
    """The forced algorithms of ``collective`` that were the best forced one at some size and beat
    the file there by more than :data:`PLAYOFF_OVER` (medians over the rounds), in label order,
    each with those sizes (bytes)."""
    found: dict[str, list[int]] = {}
    for key, times in sorted(own.items()):
        if key[0] != collective or not times:
            continue
        medians = {label: statistics.median(v) for label, v in times.items()}
        label = min(medians, key=medians.__getitem__)
        if _median(runs["tuned"], key) > PLAYOFF_OVER * medians[label]:
            found.setdefault(label, []).append(key[1])
    return dict(sorted(found.items()))


def _doubted(collective: str, runs: dict[str, list[dict[tuple[str, int], Timing]]]) -> list[int]:
    """The sizes (bytes) of ``collective`` where default / with the file was below
    :data:`PLAYOFF_BELOW` (medians over the rounds), ascending."""
    return sorted(key[1] for key in runs["default"][0] if key[0] == collective and
                  _median(runs["default"], key) < PLAYOFF_BELOW * _median(runs["tuned"], key))


def _catalogued() -> list[str]:
    from colltune.tune.targets import TARGETS

    return list(TARGETS)


def _testbed_hosts(name: str | None) -> int:
    from colltune.sim.topology import read_topology
    from colltune.testbed import topology_file

    return len(read_topology(topology_file(name or "")).hosts)


def write_library_bench(results: LibraryBench, path: str | os.PathLike[str]) -> None:
    """Write ``results`` to ``path`` atomically (JSON)."""
    write_atomic(path, results.model_dump_json(indent=1) + "\n")


def read_library_bench(path: str | os.PathLike[str]) -> LibraryBench:
    """Read a results file; a bad one raises :class:`LibraryBenchError` naming the file and field."""
    data = read_json(path, "library benchmark results", LibraryBenchError)
    if isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") in (1, 2, 3):
        # version 1 is 4 without playoff rounds, 2 without the defaults in them, 3 without the ranks'
        # mean and the back-to-back figure
        data = {**data, "version": VERSION}
    return parse_record(LibraryBench, data, str(path), FORMAT, VERSION, LibraryBenchError)
