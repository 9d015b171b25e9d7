"""``colltune tune`` and ``colltune bench``: deciding, exporting and checking decision tables.

``tune`` prices the candidates by model, simulation, timing or both (:mod:`colltune.tune.select`,
:mod:`colltune.tune.hybrid`); ``bench`` times a table's choices in the job, or with ``--library``
the C client under MPICH or Open MPI with and without the exported file
(:mod:`colltune.tune.library_bench`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from colltune import __version__, mpi_library, testbed
from colltune.collectives import COLLECTIVES
from colltune.command import (
    chosen_collectives,
    console,
    example,
    mpi_job,
    progress_lines,
    under_mpi_launcher,
    unwritable,
    unwritable_any,
)
from colltune.errors import ColltuneError
from colltune.files import write_atomic
from colltune.models import MODELS
from colltune.profiles import Profile, load_profile
from colltune.profiles.format import Provenance
from colltune.report import plot_bench
from colltune.sim import NETWORKS, profile_network
from colltune.tune import (
    NATIVE_SOURCE,
    TABLE_ENV,
    BenchResults,
    DecisionTable,
    ModelPricer,
    SimPricer,
    build_table,
    grid_sizes,
    read_table,
    write_bench,
    write_table,
)
from colltune.tune.bench import Predictor
from colltune.sim.topology import PLACEMENTS
from colltune.tune.export import CH4_SUFFIX, FORMATS, export_files
from colltune.tune.hybrid import HYBRID_MARGIN, SHARE_POLL, HybridPricer
from colltune.tune.library_bench import (
    LIBRARIES,
    MIN_TIME,
    LibraryBench,
    geomean,
    library_bench,
    toolchain,
    write_library_bench,
)
from colltune.tune.promises import Promises, flag
from colltune.tune.select import RegistrySpace, RulesCheck, chain, space_on
from colltune.tune.table import Rule, Sample
from colltune.tune.targets import TARGETS
from colltune.tune.warmup import NETWORK_WARMUP
from colltune.units import parse_bytes, parse_int_list, parse_size_list

DEFAULT_TUNE_PROCS = "2-16,24,32,48,64"


def _outputs(output: str, files: dict[str, str | None]) -> list[str | None]:
    """Every file a tune writes: the table, the exports asked for, the MPICH export's ch4 file
    and every export's ``.env`` file."""
    more = [f"{f}{CH4_SUFFIX}" for k, f in files.items() if f and k == "mpich_json"]
    return [output, *files.values(), *more, *(f"{f}.env" for f in files.values() if f)]


def _export_files(table: DecisionTable, files: dict[str, str | None]) -> list[str]:
    """Write the requested exports of ``table``, each with ``FILE.env`` beside it (the environment
    that makes the library read it); the notes on nearest equivalents."""
    notes: list[str] = []
    for key, path in files.items():
        if path:
            written, more = export_files(key, table, path)
            for name, text in written.items():
                write_atomic(name, text)
            notes += [n for n in more if n not in notes]
    return notes


def promise_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with one flag per field of :class:`Promises` (``--commutative``, ...), passed to it
    together as one ``promises`` argument."""
    @functools.wraps(command)
    def promised(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in Promises.model_fields}
        return command(*args, promises=Promises(**given), **kwargs)

    for name, field in reversed(Promises.model_fields.items()):
        promised = click.option(flag(name), name, is_flag=True, help=field.description)(promised)
    return promised


@example('colltune tune --profile builtin:ethernet-10g-tcp -o table.json --mpich-json mpich.json', 'mpiexec -n 8 colltune tune --library mpich -o t.json --mpich-json mpich.json')
@click.command("tune")
@click.option("--profile", "profile_spec", metavar="FILE|builtin:NAME",
              help="Profile to price the candidates from (not used by --method measure).")
@click.option("--method", type=click.Choice(["model", "simulate", "measure", "hybrid"]), default=None,
              help="Price candidates by the cost formulas, by simulation, by timing them all in this MPI job, or "
                   "(hybrid) by simulating all and timing in this job only those predicted near the best "
                   "[default: hybrid under mpiexec, else model].")
@click.option("--model", "-m", default=None,
              help="Analytic model (--method model) or network model (--method simulate, hybrid); default: the "
                   "profile's.")
@click.option("--margin", default=HYBRID_MARGIN, show_default=True, type=click.FloatRange(min=0),
              help="--method hybrid: time the candidates predicted within this fraction above the best.")
@click.option("--collective", "-c", "collectives", multiple=True, type=click.Choice(["all", *COLLECTIVES]),
              default=("all",), show_default=True, help="Collective(s) to tune; repeatable.")
@click.option("--procs", "-p", default=None,
              help=f"Process counts to tune at, e.g. 2-16,32 [default: {DEFAULT_TUNE_PROCS}; under mpiexec (measure, "
                   f"hybrid): the same spacing up to the job's P, and P, each timed on the job's first ranks].")
@click.option("--max-size", default=None, help="Largest block size, units allowed [default: 4MiB; measure: 1MiB].")
@click.option("--reps", default=10, show_default=True, type=click.IntRange(min=1),
              help="Timed repetitions per candidate and size (--method measure).")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0),
              help="Untimed runs before them (--method measure).")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Decision table to write.")
@click.option("--openmpi-rules", type=click.Path(dir_okay=False), help="Also write an Open MPI coll/tuned rules file.")
@click.option("--openmpi-json", type=click.Path(dir_okay=False), help="Also write Open MPI 6's JSON rules file.")
@click.option("--mpich-json", type=click.Path(dir_okay=False), help="Also write an MPICH selection JSON file.")
@click.option("--library", "target", type=click.Choice(["colltune", *TARGETS]), default="colltune",
              show_default=True,
              help="Whose algorithms to choose among: colltune's own (run by colltune, exported as the nearest "
                   "library equivalents), or the MPI library's own (exported exactly as decided).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@promise_options
def tune_cmd(profile_spec: str | None, method: str | None, model: str | None, margin: float,
             collectives: tuple[str, ...], procs: str | None, max_size: str | None, reps: int, warmup: int,
             output: str, openmpi_rules: str | None, openmpi_json: str | None, mpich_json: str | None, target: str,
             promises: Promises, as_json: bool) -> None:
    """Choose the fastest algorithm for every collective, process count and size; write the decision
    table and, on request, the same decisions as Open MPI and MPICH files."""
    files = {"openmpi_rules": openmpi_rules, "openmpi_json": openmpi_json, "mpich_json": mpich_json}
    colls = chosen_collectives(collectives, list(COLLECTIVES))
    method = method or ("hybrid" if under_mpi_launcher() else "model")
    if target != "colltune":
        other = [f"--{k.replace('_', '-')}" for k, v in files.items() if v and not k.startswith(target)]
        if other:
            raise click.UsageError(f"a table of {target}'s own algorithms exports to {target} only, not {other[0]}")
    if method in ("measure", "hybrid"):
        table = (_tune_measure(colls, procs, max_size, reps, warmup, output, files, target, promises)
                 if method == "measure" else
                 _tune_hybrid(colls, procs, max_size, reps, warmup, output, files, target, profile_spec, model,
                              margin, promises))
        if table is None:
            return
    else:
        table = _tune_offline(profile_spec, method, model, colls, procs, max_size, output, files, target,
                              promises)
    try:
        write_table(table, output)
        notes = _export_files(table, files)
    except OSError as exc:
        raise click.UsageError(f"{exc.filename}: cannot write: {exc.strerror}") from None
    _print_tune(table, output, files, notes, as_json)


def _pricer(profile: Profile, method: str, model: str | None) -> tuple[ModelPricer | SimPricer, str]:
    """The pricer of ``--method model|simulate`` on ``profile`` and the name of its model
    (``--model``, else the profile's default analytic model or its network)."""
    if method == "model":
        name = model or profile.default_model
        if name not in MODELS:
            raise click.UsageError(f"--model {name!r}: not an analytic model; valid: {', '.join(MODELS)}")
        return ModelPricer(profile.params(name), name), name
    name = model or profile_network(profile)
    if name not in NETWORKS:
        raise click.UsageError(f"--model {name!r}: not a network model; valid: {', '.join(NETWORKS)}")
    return SimPricer(profile.params(NETWORKS[name].params), name, profile.topology), name


def _flags(target: str, promises: Promises) -> str:
    """The options of a tune that change what it may choose, as the table's provenance names them."""
    return (f" --library {target}" if target != "colltune" else "") + "".join(" " + f for f in promises.flags())


def _tune_offline(profile_spec: str | None, method: str, model: str | None, colls: list[str], procs: str | None,
                  max_size: str | None, output: str, files: dict[str, str | None],
                  target: str, promises: Promises) -> DecisionTable:
    problem = unwritable_any(_outputs(output, files))
    if problem:
        raise click.UsageError(problem)
    try:
        if profile_spec is None:
            raise click.UsageError(f"--method {method} needs --profile FILE|builtin:NAME")
        profile = load_profile(profile_spec)
        procs_list = parse_int_list(DEFAULT_TUNE_PROCS if procs is None else procs, "--procs", smallest=1)
        largest = parse_bytes("4MiB" if max_size is None else max_size)
        pricer, name = _pricer(profile, method, model)
        provenance = Provenance(source=f"colltune tune --method {method} --model {name} --profile {profile_spec}"
                                       + _flags(target, promises),
                                date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                colltune_version=__version__,
                                notes=(f"native priced as {NATIVE_SOURCE}",))
        total = len(colls) * len(set(procs_list))
        with Progress(TextColumn("{task.description:<30}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(f"tuning ({method})", total=total)
            space = space_on(profile.topology, procs_list) if method == "simulate" and target == "colltune" \
                else None
            return build_table(pricer, method, colls, procs_list, largest, provenance,  # type: ignore[arg-type]
                               model=name, profile=profile.name, time_unit=profile.time_unit,
                               native=NATIVE_SOURCE, progress=lambda: bar.advance(task), library=target,
                               promises=promises, space=space)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None


def _warm(comm: Any, say: Callable[[str], None], notes: list[str]) -> float:
    """Warm the job's network before its first timing, as the C client of ``bench --library`` does
    (:func:`colltune.tune.timing.warm_network`, for :func:`~colltune.tune.measure.network_warmup`
    seconds: none on one host), and say so in ``notes`` (the table's provenance); the seconds,
    which the fresh jobs spend too."""
    from colltune.tune.measure import network_warmup
    from colltune.tune.timing import warm_network

    seconds = network_warmup(comm)
    if seconds:
        line = f"network warm-up: 256 KiB between every pair of ranks, one peer at a time, for {seconds:g} s"
        say(line)
        rounds = warm_network(comm, seconds)
        notes.append(f"{line} ({rounds} rounds) before the first timing")
    return seconds


def _checks(comm: Any, target: str, timer: Any, forcer: Any, reps: int, warmup: int, say: Callable[[str], None],
            notes: list[str], network_warmup: float) -> RulesCheck:
    """The last looks at each collective's rules in the job: under MPICH, the fresh-job check
    (:mod:`colltune.tune.fresh`; jobs spawned from this one, each warming its network for
    ``network_warmup`` seconds first), then the in-order check (:mod:`colltune.tune.sequence`).  The
    fresh-job check is MPICH's only: colltune models no other library's own choice, and Open MPI's
    long calls showed no such regimes (docs/tune.md); ``forcer`` forces the algorithms in its jobs,
    each of as many processes as the rules are for; it needs a launcher that can spawn
    (:func:`colltune.mpi_library.can_spawn`: not srun)."""
    from colltune.tune.fresh import fresh_hook
    from colltune.tune.measure import SETTLE_CALL
    from colltune.tune.sequence import in_order_hook
    from colltune.tune.spawn import FreshJobs
    from colltune.tune.targets import runs_by_itself

    in_order = in_order_hook(timer, MEASURE_TOLERANCE, say, notes)
    if target != "mpich":
        return in_order
    if not mpi_library.can_spawn():
        line = (f"no fresh-job check: this job's launcher ({mpi_library.launcher()}) cannot spawn processes "
                f"(MPI_Comm_spawn); the in-order check only")
        say(line)
        notes.append(line)
        return in_order
    fresh = fresh_hook(FreshJobs(comm, forcer, reps, warmup, network_warmup=network_warmup), SETTLE_CALL,
                       MEASURE_TOLERANCE,
                       lambda *args: runs_by_itself(target, *args), say, notes)
    return chain(fresh, in_order)


def _tune_measure(colls: list[str], procs: str | None, max_size: str | None, reps: int, warmup: int, output: str,
                  files: dict[str, str | None], target: str, promises: Promises) -> DecisionTable | None:
    """Tune by timing every candidate in this MPI job (``target`` ``mpich``: MPICH's own, forced), at
    each process count of ``procs`` on the job's first ranks (:mod:`colltune.tune.subcomms`); the
    table on rank 0, None on the others."""
    from mpi4py import MPI

    from colltune.tune.forcing import forcer_for
    from colltune.tune.targets import LibrarySpace

    comm = MPI.COMM_WORLD
    me, size = comm.Get_rank(), comm.Get_size()
    say = progress_lines(me)
    with mpi_job(comm, _outputs(output, files)):
        procs_list = _job_procs(procs, size)
        largest = parse_bytes("1MiB" if max_size is None else max_size)
        library = MPI.Get_library_version().strip()
        provenance = Provenance(source=f"colltune tune --method measure (reps {reps}, warm-up {warmup})"
                                       + _flags(target, promises),
                                date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                colltune_version=__version__, mpi_library=library,
                                hosts=tuple(comm.allgather(MPI.Get_processor_name())), procs=size)
        forcer = forcer_for(target, library) if target != "colltune" else None
        notes: list[str] = []
        warm = _warm(comm, say, notes)
        with _sub_timers(comm, procs_list, forcer, reps, warmup) as pricer:
            try:
                table = build_table(pricer, "measure", colls, procs_list, largest, provenance,
                                    native="the MPI library's own collective, timed", resolution=MEASURE_RESOLUTION,
                                    tolerance=MEASURE_TOLERANCE, library=target, promises=promises,
                                    space=(_job_space(comm, procs_list) if forcer is None else
                                           LibrarySpace(target, promises)),
                                    check=_checks(comm, target, pricer, forcer, reps, warmup, say, notes, warm),
                                    say=say)
            finally:
                if forcer is not None:
                    forcer.close()
        table = table.model_copy(update={"provenance": provenance.model_copy(update={"notes": tuple(notes)})})
    return table if me == 0 else None


def _job_procs(procs: str | None, size: int) -> list[int]:
    """The process counts a tune in this job of ``size`` ranks decides for: those of ``procs``
    (``--procs``), each at most ``size``, else :func:`colltune.tune.subcomms.default_procs`."""
    from colltune.tune.subcomms import default_procs, job_procs

    return default_procs(size) if procs is None else job_procs(parse_int_list(procs, "--procs", smallest=1), size)


@contextlib.contextmanager
def _sub_timers(comm: Any, procs_list: list[int], forcer: Any, reps: int, warmup: int,
                quick_below: int | None = None) -> Iterator[Any]:
    """The timer of a tune in this job: colltune's algorithms (``forcer`` None) or the library's
    own, forced, on the communicator of the job's first ranks for each count of ``procs_list``
    (:class:`colltune.tune.subcomms.OnSubComms`); the communicators are freed afterwards.  At the
    counts below ``quick_below`` (the count the hybrid tuner decides in full) a timing's budget and
    fill are :data:`colltune.tune.timing.QUICK_TIMING` of the full count's."""
    from colltune.tune.measure import LibraryTimer, MeasurePricer
    from colltune.tune.subcomms import OnSubComms, SubComms
    from colltune.tune.timing import QUICK_TIMING, TIMING_BUDGET, TIMING_FILL

    def timer_for(on: Any) -> Any:
        scale = QUICK_TIMING if quick_below is not None and on.Get_size() < quick_below else 1.0
        lengths = {"budget": TIMING_BUDGET * scale, "fill": TIMING_FILL * scale}
        return MeasurePricer(on, reps, warmup, **lengths) if forcer is None else \
            LibraryTimer(on, forcer, reps, warmup, **lengths)

    subs = SubComms(comm, procs_list)
    results = comm.Dup()
    try:
        yield OnSubComms(subs, timer_for, results)
    finally:
        results.Free()
        subs.free()


def _tune_hybrid(colls: list[str], procs: str | None, max_size: str | None, reps: int, warmup: int, output: str,
                 files: dict[str, str | None], target: str, profile_spec: str | None, model: str | None,
                 margin: float, promises: Promises) -> DecisionTable | None:
    """Tune in this MPI job by simulating every candidate and timing the contenders (see
    :mod:`colltune.tune.hybrid`), at each process count of ``procs`` on the job's first ranks
    (:mod:`colltune.tune.subcomms`); the table on rank 0, None on the others."""
    from mpi4py import MPI

    from colltune.runtime.quiet import quiet_bcast
    from colltune.tune.forcing import forcer_for
    from colltune.tune.targets import LibraryPricer, LibrarySpace

    comm = MPI.COMM_WORLD
    me, size = comm.Get_rank(), comm.Get_size()
    say = progress_lines(me)
    with mpi_job(comm, _outputs(output, files)):
        procs_list = _job_procs(procs, size)
        largest = parse_bytes("1MiB" if max_size is None else max_size)
        profile = _job_profile(comm, profile_spec, say)
        predictor, name = _pricer(profile, "simulate", model)
        library = MPI.Get_library_version().strip()
        forcer = forcer_for(target, library) if target != "colltune" else None
        notes: list[str] = []
        warm = _warm(comm, say, notes)
        verdicts = comm.Dup()
        try:
            with _sub_timers(comm, procs_list, forcer, reps, warmup, quick_below=max(procs_list)) as timer:
                if forcer is not None:
                    space: Any = LibrarySpace(target, promises)
                    predictor = LibraryPricer(predictor, target)
                else:
                    space = space_on(profile.topology, procs_list)
                hybrid = HybridPricer(predictor, timer, space, margin, progress=say,
                                      share=lambda value: quiet_bcast(verdicts, value, poll=SHARE_POLL),
                                      leader=me == 0, always=space.library_default if forcer is not None else None,
                                      full=max(procs_list), tolerance=MEASURE_TOLERANCE)
                say(f"hybrid: {', '.join(colls)} at P = {_counts(procs_list)}, sizes up to {largest} B, predicted by "
                    f"{name} on {profile.name}, timing those within {1 + margin:g} x the best prediction ({reps} runs "
                    f"each)")
                provenance = Provenance(
                    source=f"colltune tune --method hybrid --model {name} --margin {margin:g} (reps {reps}, warm-up "
                           f"{warmup})" + _flags(target, promises),
                    date=datetime.now(timezone.utc).isoformat(timespec="seconds"), colltune_version=__version__,
                    mpi_library=library, hosts=tuple(comm.allgather(MPI.Get_processor_name())), procs=size)
                table = build_table(hybrid, "hybrid", colls, procs_list, largest, provenance, model=name,
                                    profile=profile.name, native="the MPI library's own collective, timed",
                                    resolution=MEASURE_RESOLUTION, library=target, space=space,
                                    tolerance=MEASURE_TOLERANCE, promises=promises,
                                    check=_at_full_count(hybrid, _checks(comm, target, timer, forcer, reps, warmup,
                                                                         say, notes, warm)),
                                    say=say)
        finally:
            verdicts.Free()
            if forcer is not None:
                forcer.close()
        table = table.model_copy(update={"provenance": provenance.model_copy(
            update={"notes": (hybrid.summary(), *notes)})})
        say(hybrid.summary())
    return table if me == 0 else None


def _at_full_count(hybrid: HybridPricer, check: RulesCheck) -> RulesCheck:
    """``check`` at the count the hybrid tuner decides in full; at the counts it narrows
    (:meth:`HybridPricer.narrowed`) the rules pass unchecked: the in-order check and the fresh
    jobs time whole sequences of long calls, as much as the quick decision itself."""
    def checked(collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
                samples: Mapping[int, Sample]) -> tuple[Rule, ...]:
        return rules if hybrid.narrowed(procs) else check(collective, procs, rules, sizes, samples)
    return checked


def _counts(procs_list: list[int]) -> str:
    """``2-8`` or ``2, 4, 8``: the process counts of a tune, for its progress lines."""
    whole = procs_list == list(range(procs_list[0], procs_list[-1] + 1))
    return f"{procs_list[0]}-{procs_list[-1]}" if whole and len(procs_list) > 2 else ", ".join(map(str, procs_list))


def _job_space(comm: Any, procs_list: list[int]) -> RegistrySpace:
    """colltune's algorithms to time in this job at the counts of ``procs_list``: the hierarchical
    ones too at a count whose first ranks run on several hosts and share one (collective)."""
    from colltune.runtime.hosts import host_labels

    labels = host_labels(comm)
    return RegistrySpace(frozenset(p for p in procs_list if 1 < len(set(labels[:p])) < p))


def _job_profile(comm: Any, spec: str | None, say: Callable[[str], None]) -> Profile:
    """The profile ``spec`` names, else one measured now in this job (``probe --quick``; at P = 1,
    where nothing is sent, the built-in default); the same on every rank."""
    if spec is not None:
        return load_profile(spec)
    if comm.Get_size() < 2:
        return load_profile(f"builtin:{ONE_RANK_PROFILE}")
    from colltune.probe.run import probe

    say("no --profile: probing this job's network (probe --quick)")
    start = time.perf_counter()
    profile = probe(comm, "quick", None, "probe")
    profile = comm.bcast(profile, root=0)
    say(f"probed in {time.perf_counter() - start:.0f} s")
    return profile


#: The profile the hybrid tuner predicts from at P = 1 without --profile: one rank sends nothing,
#: so any profile gives the same decisions; this is the README's.
ONE_RANK_PROFILE = "ethernet-10g-tcp"


#: Measured crossovers are bisected until the interval is within 1/8 of its lower end: timings
#: of neighbouring sizes differ by less than their noise below that.
MEASURE_RESOLUTION = 1 / 8
#: A timed choice must beat native by more than 5 %, in two of three timings, to be taken: what a
#: program can tell from noise, and about the spread of repeated timings on a TCP network.
MEASURE_TOLERANCE = 0.05


def _print_tune(table: DecisionTable, output: str, files: dict[str, str | None], notes: list[str],
                as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"table": output, "method": table.method, "model": table.model,
                               "files": {k: v for k, v in files.items() if v}, "notes": notes,
                               "collectives": {c: [{"procs": [b.procs_min, b.procs_max],
                                                    "rules": [r.model_dump() for r in b.rules]} for b in blocks]
                                               for c, blocks in table.collectives.items()}}, indent=1))
        return
    con = console()
    t = Table(title=f"decisions ({table.method}, {table.model or 'timed'}, {table.profile or 'this job'})")
    for col in ("collective", "P", "sizes (bytes) -> algorithm"):
        t.add_column(col, overflow="fold")
    for coll, blocks in table.collectives.items():
        for b in blocks:
            rules = "; ".join(f"{r.size_min}+ {r.algorithm}" + (f" ({', '.join(f'{k}={v}' for k, v in r.params.items())})"
                                                             if r.params else "") for r in b.rules)
            t.add_row(coll, f"{b.procs_min}" if b.procs_min == b.procs_max else f"{b.procs_min}-{b.procs_max}", rules)
    con.print(t)
    con.print(f"decision table written to {output}")
    for key, label in FORMATS.items():
        if files[key]:
            also = f" (and the device's compositions to {files[key]}{CH4_SUFFIX})" if key == "mpich_json" else ""
            con.print(f"{label} written to {files[key]}{also}, the environment that makes the library read it to "
                      f"{files[key]}.env")
    for n in notes:
        con.print(f"[dim]{n}[/dim]")


@example('mpiexec -n 4 colltune bench --table t.json --max-size 256KiB -o bench.json', 'colltune bench --library mpich --table t.json -n 4 -o bench.json')
@click.command("bench")
@click.option("--table", "table_spec", envvar=TABLE_ENV, show_envvar=True, metavar="FILE",
              help="Decision table whose choices to time.")
@click.option("--collective", "-c", "collectives", multiple=True, type=click.Choice(["all", *COLLECTIVES]),
              help="Collective(s) to time; repeatable [default: the table's].")
@click.option("--sizes", metavar="LIST", help="Block sizes to time, e.g. 0,1KiB,64KiB [default: 0, 1, 2, 4, ... "
                                              "up to --max-size].")
@click.option("--max-size", default="1MiB", show_default=True, help="Largest block size of the default sizes.")
@click.option("--reps", default=10, show_default=True, type=click.IntRange(min=1),
              help="Timed repetitions per algorithm and size.")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0), help="Untimed runs before them.")
@click.option("--profile", "profile_spec", metavar="FILE|builtin:NAME",
              help="Profile to predict the times from [default: no predictions].")
@click.option("--method", type=click.Choice(["model", "simulate"]), default="model", show_default=True,
              help="Predict by the cost formulas or by simulation (with --profile).")
@click.option("--model", "-m", default=None,
              help="Analytic model (--method model) or network model (simulate); default: the profile's.")
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="Results file (JSON) to write.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Also draw time against size, predicted beside measured (PNG).")
@click.option("--library", type=click.Choice(LIBRARIES),
              help="Instead: time a C client (OSU-like) under this MPI library, with its defaults and with the "
                   "table exported to its own file; not under mpiexec, it starts the jobs itself.")
@click.option("--procs", "-n", type=click.IntRange(min=1),
              help="--library: ranks of the client [default: one per host of --testbed].")
@click.option("--testbed", "testbed_name", metavar="NAME",
              help="--library: run the client on this testbed (colltune testbed up) instead of locally.")
@click.option("--placement", type=click.Choice(PLACEMENTS), default="block", show_default=True,
              help="--library --testbed: how the client's ranks are placed on the testbed's hosts.")
@click.option("--preload", is_flag=True,
              help="--library: run colltune's own table through the interposition library (LD_PRELOAD) instead "
                   "of exporting it to the library's file.")
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(min=1),
              help="--library: rounds of (defaults, with the file); each cell keeps the median.")
@click.option("--min-time", default=MIN_TIME, show_default=True, type=click.FloatRange(min=0),
              help="--library: seconds to time each size for at least, per run: more calls than --reps where "
                   "those take less (counted from the warm-up); 0 for exactly --reps.")
@click.option("--network-warmup", type=click.FloatRange(min=0), metavar="SECONDS",
              help=f"--library: seconds every run of the client first exchanges 256 KiB blocks between every pair "
                   f"of ranks (one peer at a time), so that TCP's start-up does not slow its first sizes [default: {NETWORK_WARMUP:g} with "
                   f"--testbed, else 0].")
@click.option("--forced", is_flag=True,
              help="--library: also force each of the library's own algorithms in every round, to compare the "
                   "exported choice with the best of them.")
@click.option("--playoff", default=0, show_default=True, type=click.IntRange(min=0),
              help="--library: rounds more, of the file against the defaults where it was below 0.95 of them at "
                   "some size and (--forced) against each forced algorithm that beat it by more than 5 % at some "
                   "size, which then compare the two (of many sizes some look slow by chance; the best of many is "
                   "biased low).")
@click.option("--back-to-back", is_flag=True,
              help="--library: also time the calls with the defaults and with the file back to back, without "
                   "a barrier between them, as a program's loop of collectives makes them.")
@click.option("--mpicc", type=click.Path(dir_okay=False), help="--library: the library's compiler wrapper.")
@click.option("--mpiexec", "launcher", type=click.Path(dir_okay=False), help="--library: the library's launcher.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def bench_cmd(table_spec: str | None, collectives: tuple[str, ...], sizes: str | None, max_size: str, reps: int,
              warmup: int, profile_spec: str | None, method: str, model: str | None, output: str,
              plot_file: str | None, library: str | None, procs: int | None, testbed_name: str | None,
              placement: str, preload: bool, rounds: int, min_time: float, network_warmup: float | None, forced: bool,
              playoff: int, back_to_back: bool, mpicc: str | None, launcher: str | None, as_json: bool) -> None:
    """Time the decision table's chosen algorithms and native over a grid of sizes in this MPI job
    (run under mpiexec -n P); write the results and, on request, a figure of predicted beside measured.

    With --library mpich|openmpi, time instead what the table gains a C program: an OSU-like client
    under that library, as it comes and with the table exported to the library's own file.
    """
    if library is not None:
        if profile_spec or plot_file or model or method != "model":
            raise click.UsageError("--library times the library itself: --profile, --method, --model and --plot "
                                   "do not apply")
        if not table_spec:
            raise click.UsageError(f"bench needs a decision table: --table FILE or {TABLE_ENV}")
        if procs is None and testbed_name is None:
            raise click.UsageError("--library: give the ranks with -n (or --testbed NAME for one per host)")
        problem = unwritable(output)
        if problem:
            raise click.UsageError(problem)
        try:
            size_list = parse_size_list(sizes) if sizes else grid_sizes(parse_bytes(max_size))
        except ColltuneError as exc:
            raise click.UsageError(f"{'--sizes' if sizes else '--max-size'}: {exc}") from None
        if testbed_name is not None:
            testbed.net.require_root()
        colls = chosen_collectives(collectives, [])
        if network_warmup is None:
            network_warmup = NETWORK_WARMUP if testbed_name is not None else 0.0
        if placement != "block" and testbed_name is None:
            raise click.UsageError("--placement places the ranks on a testbed's hosts: add --testbed NAME")
        if preload and forced:
            raise click.UsageError("--forced compares the library's file with its own algorithms; --preload runs "
                                   "colltune's algorithms instead")
        bench_library(library, table_spec, colls, size_list, reps, warmup, min_time, rounds, procs, testbed_name,
                      mpicc, launcher, output, as_json, forced, playoff, network_warmup, placement, preload,
                      back_to_back)
        return
    if procs is not None or testbed_name is not None or mpicc or launcher or rounds != 3 or forced or playoff or \
            min_time != MIN_TIME or network_warmup is not None or placement != "block" or preload or back_to_back:
        raise click.UsageError("-n, --testbed, --placement, --preload, --rounds, --min-time, --network-warmup, "
                               "--forced, --playoff, --back-to-back, --mpicc and --mpiexec go with --library")
    from mpi4py import MPI

    from colltune.tune.measure import bench

    comm = MPI.COMM_WORLD
    me = comm.Get_rank()
    with mpi_job(comm, [output, plot_file]) as fail:
        if not table_spec:
            fail(f"bench needs a decision table: --table FILE or {TABLE_ENV} (colltune tune writes one)")
        table = read_table(table_spec)
        try:
            size_list = parse_size_list(sizes) if sizes else grid_sizes(parse_bytes(max_size))
        except ColltuneError as exc:
            fail(f"{'--sizes' if sizes else '--max-size'}: {exc}")
        colls = chosen_collectives(collectives, list(table.collectives))
        if not colls:
            fail(f"{table_spec}: the table decides no collective; name them with --collective")
        pricer, predictor = None, None
        if not profile_spec and (model is not None or method != "model"):
            fail("--method and --model choose how to predict from a profile; add --profile FILE|builtin:NAME")
        if profile_spec:
            profile = load_profile(profile_spec)
            if profile.time_unit != "s":
                fail(f"{profile_spec}: its times are in {profile.time_unit} units, which cannot be set beside "
                     f"measured seconds; give a profile in seconds")
            pricer, name = _pricer(profile, method, model)
            predictor = Predictor(method=method, model=name, profile=profile_spec)  # type: ignore[arg-type]
        if me == 0:
            with Progress(TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("timing", total=None)
                results = bench(comm, table, table_spec, colls, size_list, reps, warmup, pricer, predictor,
                                progress=lambda done, total: bar.update(task, completed=done, total=total))
        else:
            bench(comm, table, table_spec, colls, size_list, reps, warmup, pricer, predictor)
    if me == 0:
        try:
            write_bench(results, output)
            if plot_file:
                plot_bench(results, plot_file)
        except OSError as exc:
            raise click.UsageError(f"{exc.filename}: cannot write: {exc.strerror}") from None
        _print_bench(results, output, plot_file, as_json)


def _print_bench(results: BenchResults, output: str, plot_file: str | None, as_json: bool) -> None:
    summaries = {c: results.summary(c) for c in results.collectives}
    if as_json:
        click.echo(json.dumps({"results": output, "plot": plot_file, "procs": results.procs,
                               "collectives": {c: dataclasses.asdict(s) for c, s in summaries.items()}}, indent=1))
        return
    t = Table(title=f"bench of {results.table} at P = {results.procs} ({results.reps} repetitions)")
    for col in ("collective", "algorithms", "sizes", "native / choice (geomean)", "worst (size, choice)",
                "predicted / measured (median)"):
        t.add_column(col, overflow="fold")
    for coll, s in summaries.items():
        algs = ", ".join(series.algorithm for series in results.collectives[coll])
        worst = f"{s.worst[0]:.2f} ({s.worst[1]} B, {s.worst[2]})" if s.worst else "-"
        t.add_row(coll, algs, str(s.sizes), f"{s.speedup:.2f}" if s.speedup else "-", worst,
                  f"{s.prediction:.2f}" if s.prediction else "-")
    con = console()
    con.print(t)
    con.print(f"results written to {output}")
    if plot_file:
        con.print(f"figure written to {plot_file}")



def bench_library(library: str, table_spec: str, collectives: list[str], sizes: list[int], reps: int, warmup: int,
                  min_time: float, rounds: int, procs: int | None, testbed: str | None, mpicc: str | None,
                  launcher: str | None, output: str, as_json: bool, forced: bool = False, playoff: int = 0,
                  network_warmup: float = 0.0, placement: str = "block", preload: bool = False,
                  back_to_back: bool = False) -> None:
    """Run the library benchmark and print its speedups (see ``colltune bench --help``); no
    ``collectives``: the table's."""
    try:
        table = read_table(table_spec)
        collectives = collectives or list(table.collectives)
        if not collectives:
            raise ColltuneError(f"{table_spec}: the table decides no collective; name them with --collective")
        tools = toolchain(library, mpicc, launcher)
        provenance = Provenance(
            source=f"colltune bench --library {library}{' --preload' if preload else ''} --table {table_spec}"
                   f"{f' --placement {placement}' if placement != 'block' else ''} (client {tools.mpicc.name}, "
                   f"{reps} calls or {min_time:g} s, {warmup} warm-up, {rounds} rounds"
                   f"{f', {network_warmup:g} s of network warm-up' if network_warmup else ''}"
                   f"{f', {playoff} playoff rounds' if playoff else ''}{', back to back too' if back_to_back else ''})",
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"), colltune_version=__version__,
            procs=procs)
        results = library_bench(table, table_spec, tools, procs, collectives, sizes, warmup, reps, min_time, rounds,
                                testbed, provenance, progress=lambda line: click.echo(line, err=True),
                                forced=forced, playoff=playoff, network_warmup=network_warmup, placement=placement,
                                preload=preload, back_to_back=back_to_back)
        write_library_bench(results, output)
    except ColltuneError as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.UsageError(f"{exc.filename}: {exc.strerror}") from None
    print_library_bench(results, output, as_json)


def print_library_bench(results: LibraryBench, output: str, as_json: bool) -> None:
    """Per collective: the speedup (default / with the file) at every size (beside it, that of the
    playoff rounds where the defaults ran in them), its geometric mean and the worst size, over the
    rounds; with forced runs, the file over the best forced algorithm at every size."""
    summary = {}
    for coll in results.collectives():
        pairs = results.speedups(coll)
        worst = min(pairs, key=lambda p: p[1])
        summary[coll] = {"geomean": geomean([s for _, s in pairs]), "worst": {"size": worst[0], "speedup": worst[1]},
                         "speedups": {str(size): s for size, s in pairs}}
        summary[coll].update(results.figure_geomeans(coll))
        played = {str(c.size): s for c in results.cells if c.collective == coll
                  for s, from_playoff in [c.checked_speedup] if from_playoff}
        if played:
            summary[coll]["playoff_speedups"] = played
        over = {c.size: c.over_best for c in results.cells if c.collective == coll and c.over_best}
        if over:
            summary[coll]["over_best_forced"] = {str(size): ratio for size, (_, ratio, _) in over.items()}
            summary[coll]["best_forced"] = {str(size): label for size, (label, _, _) in over.items()}
            summary[coll]["playoff_sizes"] = [size for size, (_, _, played) in over.items() if played]
    if as_json:
        click.echo(json.dumps({"results": output, "library": results.library, "procs": results.procs,
                               "collectives": summary}, indent=1))
        return
    con = console()
    how = "through LD_PRELOAD" if results.preload else "exported"
    where = f", {results.placement} placement" if results.testbed and results.placement != "block" else ""
    t = Table(title=f"{results.library} with {results.table} {how} against its defaults, P = {results.procs}{where} "
                    f"(speedup = default / with the file, by the slowest rank's mean call unless said; OSU's figure: "
                    f"by the ranks' mean; median of {results.rounds} rounds"
                    + (f"; *: from {results.playoff} playoff rounds" if results.playoff else "")
                    + ")")
    forced = any("over_best_forced" in s for s in summary.values())
    loop = any("geomean_back_to_back" in s for s in summary.values())
    for col in ("collective", "geomean", "OSU's figure", *(["back to back"] if loop else []), "worst (size)",
                "speedup by block size (bytes)", *(["with the file / best forced, by size"] if forced else [])):
        t.add_column(col, overflow="fold")
    for coll, s in summary.items():
        t.add_row(coll, f"{s['geomean']:.2f}", f"{s['geomean_ranks_mean']:.2f}" if "geomean_ranks_mean" in s else "-",
                  *([f"{s['geomean_back_to_back']:.2f}" if "geomean_back_to_back" in s else "-"] if loop else []),
                  f"{s['worst']['speedup']:.2f} ({s['worst']['size']})",
                  " ".join(f"{size}:{v:.2f}" + (f"({s['playoff_speedups'][size]:.2f}*)"
                                                   if size in s.get("playoff_speedups", {}) else "")
                           for size, v in s["speedups"].items()),
                  *([" ".join(f"{size}:{v:.2f}{'*' if int(size) in s['playoff_sizes'] else ''}"
                              for size, v in s.get("over_best_forced", {}).items())] if forced else []))
    con.print(t)
    for note in results.notes:
        con.print(f"[dim]{note}[/dim]")
    con.print(f"results written to {output}")
