"""The in-order check: a table's choices timed one size after another, as a program runs them.

The tuners time every candidate at every size on its own.  On a TCP network a choice can also
change what the calls after it cost: a program that runs the sizes in ascending order meets the
library's own choice right after the table's choice at the sizes below, on connections whose
congestion state that choice left behind.

So once the rules of a collective are decided in the job, :func:`check_in_order` looks at each
*suspect*, a rule that chooses another algorithm followed by one that keeps ``native``: it times
the rules in ascending order of the grid sizes over the suspect's sizes and the first
:data:`FOLLOWERS` sizes of the ``native`` rule after it, and the library's own choice
(``native``) at the same sizes in the same order.  If, in order, the sizes of that ``native``
rule run more than the tolerance slower after the suspect than after ``native``, and
lose more there (seconds per call, summed over the sizes, as a program that runs each size equally
often spends them) than the suspect gains at its own sizes, the pair of sequences is timed again,
the table's first this time, and if the suspect loses again its sizes are given back to
``native``.  Two losses, as a choice needs two wins over ``native``
(:meth:`colltune.tune.select.Tuner._confirmed`), because a retransmission timeout makes one slow
sequence on its own; in both orders, so that a cost falling on whichever sequence runs second
cannot give a choice back.

Only sizes of the tuner's grid are run (0, 1, 2, 4, ... the largest size): the sizes the C client
runs, and those at which every rule was timed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from colltune.models import Unavailable
from colltune.tune.select import Choice, Pricer, RulesCheck, choice
from colltune.tune.table import NATIVE, Rule, Sample

NATIVE_CHOICE: Choice = choice(NATIVE, {})
#: How many grid sizes after a suspect are timed: on the testbed with its hosts on BBR, the pairwise
#: all-to-all still cost MPICH's own all-to-all 35 % three sizes later (64 KiB after 8 KiB), each
#: size run as the C client runs it (2 warm-up calls, 20 timed).
FOLLOWERS = 3


@dataclass(frozen=True)
class Suspect:
    """Rule ``rule`` (not ``native``) followed by rule ``rule + 1`` (``native``); ``own`` and
    ``after`` are the grid sizes (bytes) each covers."""

    rule: int
    own: tuple[int, ...]
    after: tuple[int, ...]


def rule_choice(rule: Rule) -> Choice:
    """What ``rule`` runs, as a :data:`Choice`."""
    return choice(rule.algorithm, rule.params)


def covered(rule: Rule, sizes: Sequence[int]) -> tuple[int, ...]:
    """The sizes of ``sizes`` that ``rule`` covers."""
    return tuple(s for s in sizes if rule.covers(s))


def suspects(rules: Sequence[Rule], sizes: Sequence[int]) -> list[Suspect]:
    """Every rule that chooses another algorithm than ``native`` and is followed by a ``native``
    rule, where both cover at least one of the grid ``sizes`` (of the ``native`` rule's, the first
    :data:`FOLLOWERS`)."""
    found = []
    for i, (rule, nxt) in enumerate(itertools.pairwise(rules)):
        if rule.algorithm != NATIVE and nxt.algorithm == NATIVE:
            own, after = covered(rule, sizes), covered(nxt, sizes)[:FOLLOWERS]
            if own and after:
                found.append(Suspect(i, own, after))
    return found


def steps(rules: Sequence[Rule], sizes: Sequence[int], first: int, last: int) -> list[tuple[int, Choice]]:
    """``(size, the rules' choice there)`` for each grid size from ``first`` to ``last`` bytes, ascending."""
    out = []
    for s in sizes:
        if first <= s <= last:
            rule = next(r for r in rules if r.covers(s))
            out.append((s, rule_choice(rule)))
    return out


def time_in_order(timer: Pricer, collective: str, procs: int,
                  sequence: Sequence[tuple[int, Choice]]) -> dict[int, float]:
    """Time each ``(size, choice)`` of ``sequence`` in turn (``timer.price``: warm-up, then the
    repetitions): seconds per call, by size.  A choice the timer cannot run counts as infinitely slow."""
    out = {}
    for size, (name, params) in sequence:
        try:
            out[size] = timer.price(collective, name, procs, size, dict(params))[0]
        except Unavailable:
            out[size] = float("inf")
    return out


@dataclass(frozen=True)
class Verdict:
    """What a suspect gains at its own sizes and loses at the ``native`` sizes after it, in
    seconds per call summed over the sizes (positive: the table is faster / slower than
    ``native``), and the follower's worst size with its two times (table, native)."""

    gain: float
    loss: float
    worst: tuple[int, float, float]
    tolerance: float

    @property
    def guilty(self) -> bool:
        """The sizes after the suspect run slower than the tolerance allows, and lose more than
        the suspect gains."""
        _, tab, nat = self.worst
        return tab > nat * (1 + self.tolerance) and self.loss > max(self.gain, 0.0)


def judge(suspect: Suspect, table: dict[int, float], native: dict[int, float], tolerance: float) -> Verdict:
    """The verdict on ``suspect`` from the times of the two sequences (seconds per call, by size)."""
    gain = sum(native[s] - table[s] for s in suspect.own)
    loss = sum(table[s] - native[s] for s in suspect.after)
    worst = max(suspect.after, key=lambda s: table[s] / native[s] if native[s] > 0 else float("inf"))
    return Verdict(gain, loss, (worst, table[worst], native[worst]), tolerance)


def give_back(rules: Sequence[Rule], indices: Sequence[int]) -> tuple[Rule, ...]:
    """``rules`` with the rules at ``indices`` running ``native``, neighbouring ``native`` rules merged."""
    out: list[Rule] = []
    for i, rule in enumerate(rules):
        if i in indices:
            rule = rule.model_copy(update={"algorithm": NATIVE, "params": {}, "crossover": None})
        if out and rule_choice(out[-1]) == rule_choice(rule):
            out[-1] = out[-1].model_copy(update={"size_max": rule.size_max})
            continue
        if out and rule.crossover is not None and rule.crossover[0] != out[-1].algorithm:
            rule = rule.model_copy(update={"crossover": None})
        out.append(rule)
    return tuple(out)


def _ms(seconds: float) -> str:
    """``seconds`` for a progress line: in ms, or in us below a millisecond (no exponents)."""
    return f"{seconds * 1e3:.3g} ms" if abs(seconds) >= 1e-3 else f"{seconds * 1e6:.3g} us"


def check_in_order(timer: Pricer, collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
                   tolerance: float, say: Callable[[str], None] = lambda _: None,
                   notes: list[str] | None = None) -> tuple[Rule, ...]:
    """The rules of ``collective`` at ``procs`` processes, each suspect (:func:`suspects`) given
    back to ``native`` where it loses twice in order (see the module docstring).  Each suspect is
    timed over its own span: its sizes, then those of the ``native`` rule after it; ``native``'s
    sequence first in the first pass, the table's first in the second.  ``timer``
    times in the running job (every rank calls this with the same arguments); ``say`` hears what is
    timed and decided, and ``notes`` (if given) gets a line for each rule given back."""
    guilty: list[tuple[Suspect, Verdict]] = []
    for suspect in suspects(rules, sizes):
        span = steps(rules, sizes, suspect.own[0], suspect.after[-1])
        sequences = {"native": [(s, NATIVE_CHOICE) for s, _ in span], "table": span}
        for attempt, order in ((1, ("native", "table")), (2, ("table", "native"))):
            timed = {name: time_in_order(timer, collective, procs, sequences[name]) for name in order}
            table, native = timed["table"], timed["native"]
            verdict = judge(suspect, table, native, tolerance)
            say(f"in order: {collective} {span[0][0]}-{span[-1][0]} B (pass {attempt}): "
                f"{rules[suspect.rule].algorithm} gains {_ms(verdict.gain)}, {NATIVE} after it loses "
                f"{_ms(verdict.loss)}")
            if not verdict.guilty:
                break
        if verdict.guilty:  # in both passes
            guilty.append((suspect, verdict))
    for suspect, v in guilty:
        rule = rules[suspect.rule]
        label = rule.algorithm + (f" {dict(rule.params)}" if rule.params else "")
        line = (f"in order: {collective} at P = {procs}: {label} at {rule.size_min}-{rule.size_max} B gains "
                f"{_ms(v.gain)} per call there, but {NATIVE} after it loses {_ms(v.loss)} ({v.worst[0]} B: "
                f"{_ms(v.worst[1])} against {_ms(v.worst[2])}): given back to {NATIVE}")
        say(line)
        if notes is not None:
            notes.append(line)
    return give_back(rules, [suspect.rule for suspect, _ in guilty])


def in_order_hook(timer: Pricer, tolerance: float, say: Callable[[str], None],
                  notes: list[str]) -> RulesCheck:
    """``check(collective, procs, rules, sizes, samples)`` for :func:`colltune.tune.select.build_table`'s
    ``check``: :func:`check_in_order` with ``timer``, ``tolerance``, ``say`` and ``notes``."""
    def check(collective: str, procs: int, rules: tuple[Rule, ...], sizes: Sequence[int],
              samples: Mapping[int, Sample]) -> tuple[Rule, ...]:
        return check_in_order(timer, collective, procs, rules, sizes, tolerance, say, notes)
    return check


__all__ = ["Suspect", "Verdict", "check_in_order", "covered", "give_back", "in_order_hook", "judge", "rule_choice",
           "steps", "suspects", "time_in_order"]

