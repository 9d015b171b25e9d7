"""The probe's check by choices (colltune.probe.choices): which algorithm each network model would
choose, where the models disagree, and how their choices are scored by measured times."""

from __future__ import annotations

import pytest

from colltune.algorithms import REGISTRY
from colltune.errors import ColltuneError
from colltune.probe.choices import (
    CHOICE_TIE,
    ROUNDS_BUDGET,
    SHORT_ROUNDS,
    choice_scores,
    choose_by_choices,
    disputed,
    in_rounds,
    model_choices,
    price_cells,
    round_count,
    short_cases,
)
from colltune.profiles import builtin
from colltune.sim import NETWORKS, star
from colltune.sim.calls import steady_call
from colltune.tune.ties import PREDICTED_TIE, load

SIZES = (4096, 65536)


@pytest.mark.parametrize("procs", [3, 8])
def test_each_model_chooses_a_near_fastest_algorithm_with_the_lightest_load(procs):
    """In every cell, a model's choice is an algorithm of that collective, priced within the
    near-tie window of the fastest it priced there, with no heavier network load (bytes of its
    busiest rank, then peers) than any other in the window;
    a barrier has one cell, at size 0; over a topology the third call is priced."""
    models = builtin("ethernet-10g-tcp").models
    topology = star(procs, 1.25e7)
    networks = ["hockney", "plogp", "logp"]
    choices = model_choices(price_cells(models, procs, networks, SIZES, topology), procs)
    assert set(choices) == set(networks)
    for net, cells in choices.items():
        params = getattr(models, NETWORKS[net].params)
        assert ("barrier", 0) in cells and not any(c == "barrier" and s != 0 for c, s in cells)
        assert {c for c, _ in cells} == {a.collective for a in REGISTRY}
        for (coll, size), name in cells.items():
            priced = {}
            for alg in REGISTRY.select(coll):
                try:
                    priced[alg.name] = steady_call(alg.schedule(procs, 0, size), net, params, topology=topology)
                except ColltuneError:
                    continue  # not runnable here with its defaults: not a candidate
            fastest = min(priced.values())
            assert priced[name] <= fastest * (1 + PREDICTED_TIE) * (1 + 1e-12)
            window = [a for a, t in priced.items() if t <= fastest * (1 + PREDICTED_TIE)]
            assert load(coll, name, procs, size, {}) == min(load(coll, a, procs, size, {}) for a in window)


def test_the_disputed_cases_are_every_choice_in_the_cells_where_choices_differ():
    choices = {"a": {("bcast", 4096): "chain", ("gather", 4096): "flat_tree", ("barrier", 0): "dissemination"},
               "b": {("bcast", 4096): "binomial_tree", ("gather", 4096): "flat_tree",
                     ("barrier", 0): "dissemination"},
               "c": {("bcast", 4096): "chain", ("gather", 4096): "binomial_tree", ("barrier", 0): "dissemination"}}
    assert disputed(choices) == [("bcast", "binomial_tree", 4096), ("bcast", "chain", 4096),
                                 ("gather", "binomial_tree", 4096), ("gather", "flat_tree", 4096)]
    assert disputed({"a": choices["a"], "z": choices["a"]}) == []


def test_choices_are_scored_by_how_much_slower_they_ran_than_the_fastest_chosen():
    """A choice within 5 % of the fastest chosen counts as the fastest; a cell where a choice was not
    measured is left out; a model's score is the geometric mean over the disputed cells."""
    choices = {"a": {("bcast", 4096): "chain", ("gather", 4096): "flat_tree", ("reduce", 4096): "chain"},
               "b": {("bcast", 4096): "binomial_tree", ("gather", 4096): "binomial_tree",
                     ("reduce", 4096): "flat_tree"}}
    measured = {("bcast", "chain", 4096): 1.04, ("bcast", "binomial_tree", 4096): 1.0,
                ("gather", "flat_tree", 4096): 1.0, ("gather", "binomial_tree", 4096): 2.25,
                ("reduce", "chain", 4096): 1.0}  # reduce/flat_tree not measured
    scores = choice_scores(choices, measured)
    assert scores["a"] == pytest.approx(1.0)
    assert scores["b"] == pytest.approx(1.5)  # sqrt(1.0 * 2.25)
    assert choice_scores({"a": choices["a"]}, measured) == {"a": 1.0}


def test_the_model_whose_choices_ran_fastest_wins_and_close_scores_go_to_the_smaller_error():
    assert choose_by_choices({"a": 1.2, "b": 1.0}, {"a": 0.1, "b": 0.3}) == "b"
    assert choose_by_choices({"a": 1.0, "b": 1.0}, {"a": 0.3, "b": 0.1}) == "b"
    assert choose_by_choices({"b": 1.0, "a": 1.0}, {"a": 0.2, "b": 0.2}) == "a"
    # the probe of 2026-12-04 on the star: 1 % apart is a tie, which hockney's check error takes
    assert choose_by_choices({"logp": 1.024, "hockney": 1.034}, {"logp": 0.29, "hockney": 0.17}) == "hockney"
    # a tie is within CHOICE_TIE of the smallest score, not of the next one: c is out
    least = 1.1
    scores = {"a": least, "b": least * (1 + CHOICE_TIE) * 0.999, "c": least * (1 + CHOICE_TIE) * 1.001}
    assert choose_by_choices(scores, {"a": 0.3, "b": 0.2, "c": 0.1}) == "b"
    # equal errors: the smaller score; a model without a check error goes last
    assert choose_by_choices({"a": 1.01, "b": 1.0}, {"a": 0.2, "b": 0.2}) == "b"
    assert choose_by_choices({"a": 1.0, "b": 1.0}, {"a": 0.5}) == "a"


def test_times_that_one_model_predicts_choose_that_model_by_its_choices():
    """With every disputed case measured as hockney prices it, hockney's choices are the fastest
    in every disputed cell, so it scores 1 and wins against models with smaller check errors
    whose choices ran slower."""
    models = builtin("ethernet-10g-tcp").models
    procs, topology = 8, None  # endpoint models alone: over a 100 Mbit/s star their choices agree
    choices = model_choices(price_cells(models, procs, ["hockney", "logp", "loggops"], SIZES, topology), procs)
    cases = disputed(choices)
    assert len(cases) > 10
    measured = {(c, a, s): steady_call(REGISTRY.get(c, a).schedule(procs, 0, s), "hockney", models.hockney,
                                       topology=topology) for c, a, s in cases}
    scores = choice_scores(choices, measured)
    assert scores["hockney"] == 1.0
    slower = [net for net, score in scores.items() if score > 1.0]
    assert slower  # the models do choose differently, and it shows in the times
    errors = {"hockney": 0.9, "logp": 0.1, "loggops": 0.2}
    assert scores[choose_by_choices(scores, errors)] == 1.0
    assert choose_by_choices({n: scores[n] for n in ["hockney", *slower]}, errors) == "hockney"


def test_short_cases_are_those_every_model_prices_below_the_bound():
    prices = {"a": {("bcast", 4096): {"chain": 0.002, "binomial_tree": 0.02}, ("barrier", 0): {"linear": 0.001}},
              "b": {("bcast", 4096): {"chain": 0.004, "binomial_tree": 0.005}}}
    cases = [("bcast", "chain", 4096), ("bcast", "binomial_tree", 4096), ("barrier", "linear", 0)]
    # binomial_tree: a prices it above; the barrier: b does not price it
    assert short_cases(cases, prices, 0.01) == [("bcast", "chain", 4096)]
    assert short_cases(cases, prices, 0.001) == []


def test_short_cases_come_back_in_turned_rounds():
    """Each short case is timed in the given rounds in all, the first with every case; in each
    later round the short ones come in an order turned by one more place."""
    x, y, z, w = (("bcast", n, 4096) for n in ("a", "b", "c", "d"))
    order = in_rounds([x, y, z, w], [x, z, w], SHORT_ROUNDS)
    assert order[:4] == [x, y, z, w]
    assert [order.count(c) for c in (x, y, z, w)] == [SHORT_ROUNDS, 1, SHORT_ROUNDS, SHORT_ROUNDS]
    assert order[4:7] == [z, w, x] and order[7:10] == [w, x, z]
    assert in_rounds([x, y], [], SHORT_ROUNDS) == [x, y] == in_rounds([x, y], [x], 1)


def test_the_rounds_after_the_first_fit_in_their_budget():
    assert round_count(0.0) == SHORT_ROUNDS
    assert round_count(ROUNDS_BUDGET / 100) == SHORT_ROUNDS  # cheap: every round
    assert round_count(ROUNDS_BUDGET / 3.5) == 4  # three more fit
    assert round_count(ROUNDS_BUDGET * 2) == 1  # not even one more
