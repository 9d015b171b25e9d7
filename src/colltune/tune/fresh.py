"""The fresh-job check: long calls where the library's own choice is fast only in a job that has
run other traffic.

The tuners time every candidate in one job, one after another.  On a TCP network what a call costs
can depend on what the job's connections carried before, for seconds: MPICH's own all-to-all of
256 KiB (its pairwise exchange) runs faster once the scattered all-to-all has run in the job
(``benchmarks/diagnostics/call_regimes.py`` shows the regimes).  The tuning job has always run the
other candidates at the sizes below, so it may time the library's own choice in its fast regime,
where a program that runs only that choice meets the slow one.

So once the rules of a collective are decided in the job, :func:`check_fresh` looks at each
*contest*: a grid size of a long call (``native`` timed at ``settle_call`` seconds or more) that
the rules give to ``native`` or to the algorithm the library runs there by itself (its *holder*),
while the fastest candidate that is neither was timed within :data:`colltune.tune.select.SURE_LEAD`
of the holder (a lead smaller than that may be the job's regime).  It times the holders at the
contested sizes in ascending order in a fresh job, and the challengers at the same sizes in another
(``run``, :class:`colltune.tune.spawn.FreshJobs`), the holders' job first.  Both jobs run the
rules' own choices at the grid size before the first contested size and at any grid size between
two contested ones, as a program that runs the sizes in ascending order does: a call right after
another algorithm's pays for the switch.  The pair of jobs is run again, the challengers' first,
and a size goes to its challenger where it leads in both passes together: its times summed, times
one plus the tolerance, below the holder's.  One pass decides nothing (fresh jobs of one algorithm
spread by up to 20 %, and the library's own choice draws its regime per job); the passes are
summed rather than counted, because a count lets small leads win; and there are two, not three,
because each costs two jobs of several seconds.  Where the challenger is the rules' own choice at
the grid size before, or has just won it (the holder's rule begins with a switch there), any lead
over the two passes will do: after another algorithm's sizes the library's own choice is not what
the library runs by itself, and the switch costs the program more than a fresh job's ten calls
see.  A contested size between two sizes that go to the same challenger goes to it too where it was
faster in all passes together.

Where a collective has contests, the check also contests each other long call that the rules give
to an algorithm the library does not run there by itself, with a lead over ``native`` in the job
below :data:`colltune.tune.select.SURE_LEAD`: ``native`` holds it in the holders' job, the rule's
choice challenges in the challengers' job, and it keeps the size only as a challenger wins one.  So
the holders' job is the program with every contest lost, the challengers' job the one with every
contest won: the tuning job times a switch between two algorithms only right after the other's
timing, not after the sizes below as a program runs them.  These contests ride along: they are not
checked where nothing else is, because a check costs four jobs (about 25 s of the tuner's five
minutes), and such a rule has led ``native`` in the job by more than the tolerance in two of three
timings, or continues a rule that did.

This module only decides; it has no MPI.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from colltune.tune.select import SURE_LEAD, Choice, RulesCheck, choice, label
from colltune.tune.sequence import NATIVE_CHOICE, rule_choice
from colltune.tune.table import NATIVE, Rule, Sample

#: ``run(collective, procs, [(size, choice), ...])``: seconds per call at each size, the sizes run in
#: the given order in a fresh job of ``procs`` processes (inf where the job cannot run the choice).
FreshRun = Callable[[str, int, Sequence[tuple[int, Choice]]], dict[int, float]]
#: ``same(collective, procs, size, choice)``: True if ``choice`` is what the library runs by
#: itself at ``size`` bytes on ``procs`` ranks (timing the two in fresh jobs would time one thing).
SameAsNative = Callable[[str, int, int, Choice], bool]


@dataclass(frozen=True)
class Contest:
    """Grid size ``size`` (bytes), held in the job by ``holder`` (``native``, or the algorithm the
    library runs there by itself), and the fastest other candidate timed there, ``challenger``,
    with the two times in the job (seconds)."""

    size: int
    holder: Choice
    challenger: Choice
    held: float
    theirs: float


def _rule_at(rules: Sequence[Rule], size: int) -> Rule:
    return next(r for r in rules if r.covers(size))


def contests(collective: str, procs: int, rules: Sequence[Rule], sizes: Sequence[int],
             samples: Mapping[int, Sample], settle_call: float,
             same: SameAsNative = lambda *_: False) -> list[Contest]:
    """The contested grid sizes of ``rules`` (see the module docstring), ascending: where the rule
    runs ``native`` or what the library runs by itself (``same``), ``native``'s call takes at least
    ``settle_call`` seconds, and the fastest candidate that is neither was timed within
    :data:`SURE_LEAD` of the rule's choice.  Where there is one, also each other grid size of a
    long call where the rule runs another algorithm that leads ``native`` by less than
    :data:`SURE_LEAD` in the job: there ``native`` holds and the rule's choice challenges (it keeps
    the size only by leading in the fresh jobs as any challenger must), since the jobs run anyway
    and one more size costs them about a second each."""
    found: list[Contest] = []
    others: list[Contest] = []
    for size in sorted(s for s in sizes if s in samples):
        rule = _rule_at(rules, size)
        holder = choice(rule.algorithm, rule.params)
        times = {choice(c.algorithm, c.params): c.time for c in samples[size].candidates}
        native, held = times.get(NATIVE_CHOICE), times.get(holder)
        if native is None or held is None or native < settle_call:
            continue
        if rule.algorithm != NATIVE and not same(collective, procs, size, holder):
            if held * SURE_LEAD > native:
                others.append(Contest(size, NATIVE_CHOICE, holder, native, held))
            continue
        other = next((c for c in samples[size].candidates
                      if c.algorithm != NATIVE and not same(collective, procs, size, choice(c.algorithm, c.params))),
                     None)
        if other is None or other.time > held * SURE_LEAD:
            continue
        found.append(Contest(size, holder, choice(other.algorithm, other.params), held, other.time))
    return sorted(found + others, key=lambda c: c.size) if found else []


def take(rules: Sequence[Rule], sizes: Sequence[int], won: Mapping[int, Choice]) -> tuple[Rule, ...]:
    """``rules`` with each grid size of ``won`` given to its choice (a challenger's, or ``native``
    where the rule's own choice lost), with the sizes above the grid size before it (within the
    rule that held it), and the sizes above it within that rule where it is the largest grid size
    or that rule ends below the next grid size at a crossover to the same choice; neighbouring
    equal rules merged."""
    grid = sorted(sizes)
    spans: list[tuple[int, int | None, Choice, Rule]] = [(r.size_min, r.size_max, rule_choice(r), r) for r in rules]
    for size, ch in sorted(won.items()):
        rule = _rule_at(rules, size)
        i = grid.index(size)
        lo = max(grid[i - 1] + 1 if i else 0, rule.size_min)
        hi = rule.size_max if i == len(grid) - 1 else size
        if i + 1 < len(grid) and rule.size_max is not None and rule.size_max < grid[i + 1] and \
                rule_choice(_rule_at(rules, grid[i + 1])) == ch:
            hi = rule.size_max  # the rule ends at a crossover to ``ch`` below the next grid size
        spans = _overlay(spans, lo, hi, ch)
    out: list[Rule] = []  # _overlay merged neighbouring spans of one choice
    for lo, hi, ch, origin in spans:
        rule = Rule(size_min=lo, size_max=hi, algorithm=ch[0], params=dict(ch[1]),
                    crossover=origin.crossover if rule_choice(origin) == ch and origin.size_min == lo else None)
        if out and rule.crossover is not None and rule.crossover[0] != out[-1].algorithm:
            rule = rule.model_copy(update={"crossover": None})
        out.append(rule)
    return tuple(out)


def _overlay(spans: list[tuple[int, int | None, Choice, Rule]], lo: int, hi: int | None,
             ch: Choice) -> list[tuple[int, int | None, Choice, Rule]]:
    """``spans`` (tiling the sizes from 0) with ``lo``..``hi`` (inclusive, None: unbounded) running ``ch``."""
    def below(a: int | None, b: int | None) -> bool:  # a < b, None being infinity
        return a is not None and (b is None or a < b)

    out: list[tuple[int, int | None, Choice, Rule]] = []
    for a, b, c, origin in spans:
        if below(b, lo) or (hi is not None and a > hi):
            out.append((a, b, c, origin))
            continue
        if a < lo:
            out.append((a, lo - 1, c, origin))
        out.append((max(a, lo), b if below(b, hi) else hi, ch, origin))
        if hi is not None and below(hi, b):
            out.append((hi + 1, b, c, origin))
    merged: list[tuple[int, int | None, Choice, Rule]] = []
    for span in out:
        if merged and merged[-1][2] == span[2]:
            merged[-1] = (merged[-1][0], span[1], span[2], merged[-1][3])
        else:
            merged.append(span)
    return merged


def _uncontested(sequences: Mapping[str, Sequence[tuple[int, Choice]]], timed: Mapping[str, Mapping[int, float]],
                 contested: Mapping[int, Contest]) -> str:
    """The times both jobs of a pass read at the sizes they run but do not contest (the rules' own
    choices there), for the progress line: between two contested sizes the holders' job meets
    such a choice as a program with the rules does, after the holder."""
    shown = [f"{size} B {label(ch)} {timed['holders'][size] * 1e3:.3g} ms in the holders' job, "
             f"{timed['challengers'][size] * 1e3:.3g} in the challengers'"
             for size, ch in sequences["holders"] if size not in contested]
    return f"; also {', '.join(shown)}" if shown else ""


def check_fresh(run: FreshRun, collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
                samples: Mapping[int, Sample], settle_call: float, tolerance: float,
                same: SameAsNative = lambda *_: False, say: Callable[[str], None] = lambda _: None,
                notes: list[str] | None = None) -> tuple[Rule, ...]:
    """The rules of ``collective`` at ``procs`` processes, each contested size (:func:`contests`)
    given to its challenger where it leads the holder by more than ``tolerance`` (by anything where
    the challenger is what the size below went to) over two passes of fresh jobs together
    (``run``; see the module docstring), else to its holder.  ``say`` hears what is timed and
    decided, ``notes`` (if given) gets a line for each size whose choice changed."""
    found = contests(collective, procs, rules, sizes, samples, settle_call, same)
    if not found:
        return rules
    grid = sorted(sizes)
    own = {s: rule_choice(_rule_at(rules, s)) for s in grid}  # the rules' choice at each grid size
    span = grid[max(grid.index(found[0].size) - 1, 0):grid.index(found[-1].size) + 1]
    contested = {c.size: c for c in found}
    sequences = {name: [(s, pick(contested[s]) if s in contested else own[s]) for s in span]
                 for name, pick in (("holders", lambda c: c.holder), ("challengers", lambda c: c.challenger))}
    passes: list[dict[str, dict[int, float]]] = []
    for attempt, order in enumerate((("holders", "challengers"), ("challengers", "holders")), 1):
        timed = {name: run(collective, procs, sequences[name]) for name in order}
        passes.append(timed)
        say(f"fresh jobs: {collective} (pass {attempt}): " + ", ".join(
            f"{c.size} B {c.challenger[0]} {timed['challengers'][c.size] * 1e3:.3g} ms against {c.holder[0]}'s "
            f"{timed['holders'][c.size] * 1e3:.3g} ms" for c in found) + _uncontested(sequences, timed, contested))

    # the challenger's and the holder's seconds per call at each contested size, summed over the passes
    together = {c.size: (sum(p["challengers"][c.size] for p in passes), sum(p["holders"][c.size] for p in passes))
                for c in found}
    decided: dict[int, Choice] = {}
    for c in found:  # ascending: what a size below went to decides whether this one begins with a switch
        i = grid.index(c.size)
        before = decided.get(grid[i - 1], own[grid[i - 1]]) if i else None
        bar = 0.0 if before == c.challenger else tolerance
        theirs, held = together[c.size]
        # a holder a job could not run says nothing
        decided[c.size] = c.challenger if theirs * (1 + bar) < held < math.inf else c.holder
    for c in found:  # bridge a contested size between two won by the same challenger
        i = grid.index(c.size)
        if decided[c.size] == c.challenger or i == 0 or i == len(grid) - 1:
            continue
        theirs, held = together[c.size]
        if decided.get(grid[i - 1]) == c.challenger == decided.get(grid[i + 1]) and theirs < held:
            decided[c.size] = c.challenger
    changed = {c.size: decided[c.size] for c in found if decided[c.size] != own[c.size]}
    for c in found:
        if c.size not in changed:
            continue
        fresh = " and ".join(f"{p['challengers'][c.size] * 1e3:.3g} against {p['holders'][c.size] * 1e3:.3g} ms"
                             for p in passes)
        line = (f"fresh jobs: {collective} at P = {procs}: {label(changed[c.size])} at {c.size} B ({label(c.challenger)} "
                f"{fresh} in fresh jobs; {c.theirs * 1e3:.3g} against {c.held * 1e3:.3g} ms in this job) instead of "
                f"{label(own[c.size])}")
        say(line)
        if notes is not None:
            notes.append(line)
    return take(rules, sizes, changed) if changed else rules


def fresh_hook(run: FreshRun, settle_call: float, tolerance: float, same: SameAsNative,
               say: Callable[[str], None],
               notes: list[str]) -> RulesCheck:
    """``check(collective, procs, rules, sizes, samples)`` for :func:`colltune.tune.select.build_table`'s
    ``check``: :func:`check_fresh` with the other arguments."""
    def check(collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
              samples: Mapping[int, Sample]) -> tuple[Rule, ...]:
        return check_fresh(run, collective, procs, rules, sizes, samples, settle_call, tolerance, same, say, notes)
    return check


__all__ = ["Contest", "FreshRun", "SameAsNative", "check_fresh", "contests", "fresh_hook", "take"]
