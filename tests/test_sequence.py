"""The in-order check (colltune.tune.sequence): suspects, verdicts, and what is given back, on a
fake timer whose calls cost more after another algorithm ran (a network with memory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from colltune.models import Unavailable
from colltune.tune.select import grid_sizes
from colltune.tune.sequence import check_in_order, give_back, judge, steps, suspects
from colltune.tune.table import NATIVE, Rule

SIZES = grid_sizes(1 << 16)


def rules(*spec: tuple[int, str]) -> tuple[Rule, ...]:
    """Rules from (size_min, algorithm) pairs in ascending order."""
    out = []
    for i, (lo, name) in enumerate(spec):
        hi = spec[i + 1][0] - 1 if i + 1 < len(spec) else None
        out.append(Rule(size_min=lo, size_max=hi, algorithm=name, params={"k": 2} if name == "tree" else {}))
    return tuple(out)


@dataclass
class MemoryTimer:
    """Seconds per call: ``base[algorithm] * size``; ``native`` costs ``after`` times more while
    the last algorithm run before it was ``gentle`` (and for ``lasting`` calls of native after it)."""

    base: dict[str, float]
    gentle: str = "pairwise"
    after: float = 1.3
    lasting: int = 3
    calls: list[tuple[str, int]] = field(default_factory=list)
    _since: int = 99

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        if algorithm not in self.base:
            raise Unavailable(algorithm)
        self.calls.append((algorithm, size))
        t = self.base[algorithm] * max(size, 1)
        if algorithm == self.gentle:
            self._since = 0
        else:
            if algorithm == NATIVE and self._since < self.lasting:
                t *= self.after
            self._since += 1
        return t, dict(params)


def test_suspects_are_other_choices_followed_by_native_on_grid_sizes() -> None:
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE), (40000, "tree"), (40001, NATIVE))
    found = suspects(r, SIZES)
    # the tree rule covers no grid size (40000 only): it cannot be timed in order, and is no suspect
    assert [(s.rule, s.own, s.after) for s in found] == [(1, (4096, 8192), (16384, 32768))]
    assert suspects(rules((0, NATIVE), (4096, "pairwise")), SIZES) == []
    assert suspects(rules((0, "pairwise"), (4096, "tree")), SIZES) == []
    assert steps(r, SIZES, 4096, 16384) == [(4096, ("pairwise", ())), (8192, ("pairwise", ())),
                                             (16384, (NATIVE, ()))]


def test_judge_weighs_seconds_and_the_tolerance() -> None:
    s = suspects(rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE)), SIZES)[0]
    native = {4096: 1.0, 8192: 2.0, 16384: 4.0, 32768: 8.0, 65536: 16.0}
    # gains 0.2 + 0.4, loses 0.4 + 0.8 + 1.6 (10 % at each size after): given back
    table = {4096: 0.8, 8192: 1.6, 16384: 4.4, 32768: 8.8, 65536: 17.6}
    v = judge(s, table, native, 0.05)
    assert v.gain == pytest.approx(0.6) and v.loss == pytest.approx(2.8) and v.guilty
    assert v.worst[0] in (16384, 32768, 65536)
    # the same losses within the tolerance: kept
    assert not judge(s, table, native, 0.15).guilty
    # losses beyond the tolerance but smaller than the gains: kept
    big_gain = {**table, 4096: 0.1, 8192: 0.1}
    big_gain.update({16384: 4.3, 32768: 8.0, 65536: 16.0})
    assert not judge(s, big_gain, native, 0.05).guilty


def test_give_back_merges_native_neighbours() -> None:
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE), (131072, "tree"))
    out = give_back(r, [1])
    assert [(x.size_min, x.size_max, x.algorithm) for x in out] == [(0, 131071, NATIVE), (131072, None, "tree")]
    assert give_back(r, []) == r
    first = give_back(rules((0, "pairwise"), (16384, NATIVE)), [0])
    assert [(x.size_min, x.size_max, x.algorithm, x.params) for x in first] == [(0, None, NATIVE, {})]


def test_a_choice_whose_followers_lose_is_given_back_after_two_passes() -> None:
    # pairwise is 10 % faster than native on its own, but native costs 30 % more for 3 calls after it
    timer = MemoryTimer({NATIVE: 1e-6, "pairwise": 0.9e-6})
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE))
    notes: list[str] = []
    lines: list[str] = []
    out = check_in_order(timer, "alltoall", 8, r, SIZES, 0.05, lines.append, notes)
    assert [(x.size_min, x.algorithm) for x in out] == [(0, NATIVE)]
    assert len(notes) == 1 and "pairwise at 4096-16383 B" in notes[0] and "given back" in notes[0]
    # only the suspect's sizes and those after it were timed, twice each way: native's sequence
    # first in the first pass, the table's first in the second
    span = [s for s in SIZES if 4096 <= s]
    native = [(NATIVE, s) for s in span]
    table = [("pairwise" if s < 16384 else NATIVE, s) for s in span]
    assert timer.calls == native + table + table + native


def test_a_choice_is_kept_when_the_network_forgets() -> None:
    timer = MemoryTimer({NATIVE: 1e-6, "pairwise": 0.9e-6}, after=1.0)
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE))
    lines: list[str] = []
    assert check_in_order(timer, "alltoall", 8, r, SIZES, 0.05, lines.append) == r
    assert len(timer.calls) == 2 * len([s for s in SIZES if s >= 4096])  # one pass: nothing to confirm
    assert len(lines) == 1 and "(pass 1)" in lines[0]


def test_nothing_is_timed_without_a_suspect() -> None:
    timer = MemoryTimer({NATIVE: 1e-6, "pairwise": 0.9e-6})
    for r in (rules((0, NATIVE)), rules((0, NATIVE), (4096, "pairwise")), rules((0, "pairwise"))):
        assert check_in_order(timer, "alltoall", 8, r, SIZES, 0.05) == r
    assert timer.calls == []


def test_only_losses_after_a_choice_give_it_back() -> None:
    """A choice the timer cannot run in order counts as infinitely slow at its own sizes, but what
    it does there was decided by the tuner; only the sizes after it can give it back."""
    timer = MemoryTimer({NATIVE: 1e-6, "pairwise": 0.9e-6})
    r = rules((0, NATIVE), (4096, "tree"), (16384, NATIVE))
    assert check_in_order(timer, "alltoall", 8, r, SIZES, 0.05) == r


def test_each_suspect_is_timed_over_its_own_span_with_three_followers_at_most() -> None:
    timer = MemoryTimer({NATIVE: 1e-6, "pairwise": 0.9e-6, "tree": 0.9e-6}, after=1.0)
    sizes = grid_sizes(1 << 20)
    r = rules((0, NATIVE), (64, "tree"), (128, NATIVE), (4096, "pairwise"), (8192, NATIVE))
    assert check_in_order(timer, "alltoall", 8, r, sizes, 0.05) == r
    assert {s for _, s in timer.calls} == {64, 128, 256, 512, 4096, 8192, 16384, 32768}


def test_progress_lines_give_small_times_in_microseconds_without_exponents() -> None:
    timer = MemoryTimer({NATIVE: 1e-10, "pairwise": 0.9e-10}, after=1.0)  # gains of about 0.1 us
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE))
    lines: list[str] = []
    check_in_order(timer, "alltoall", 8, r, SIZES, 0.05, lines.append)
    assert lines and all(" us" in line and "e-" not in line for line in lines), lines


@dataclass
class SecondTimer:
    """Seconds per call: ``base[algorithm] * size``, ``second`` times more in the second sequence
    of each pass (a sequence starts where the size goes down), whatever it runs."""

    base: dict[str, float]
    second: float = 1.2
    calls: list[tuple[str, int]] = field(default_factory=list)
    sequence: int = 0

    def price(self, collective: str, algorithm: str, procs: int, size: int,
              params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        if self.calls and size < self.calls[-1][1]:
            self.sequence += 1
        self.calls.append((algorithm, size))
        return self.base[algorithm] * max(size, 1) * (self.second if self.sequence % 2 else 1.0), dict(params)


def test_a_cost_on_whichever_sequence_runs_second_gives_nothing_back() -> None:
    # in the first pass the table's sequence runs second and loses 20 % everywhere; in the second
    # native's does: the choice loses only once, and is kept
    timer = SecondTimer({NATIVE: 1e-6, "pairwise": 0.95e-6})
    r = rules((0, NATIVE), (4096, "pairwise"), (16384, NATIVE))
    lines: list[str] = []
    assert check_in_order(timer, "alltoall", 8, r, SIZES, 0.05, lines.append) == r
    assert len(lines) == 2 and "(pass 2)" in lines[1]
    # timed native first in both passes, the same cost would have given it back twice
    span = [s for s in SIZES if 4096 <= s]
    assert timer.calls[:len(span)] == [(NATIVE, s) for s in span]
    assert timer.calls[2 * len(span)][0] == "pairwise"
