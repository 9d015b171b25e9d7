"""How predicted near-ties are broken (colltune.tune.ties), the same rule in the tuner and in the
fidelity benchmark's figures."""

from __future__ import annotations

import pytest

from colltune.algorithms import REGISTRY
from colltune.profiles.format import Provenance
from colltune.tune import NATIVE, build_table
from colltune.tune.select import REGISTRY_SPACE, candidates
from colltune.tune.ties import (
    PREDICTED_TIE,
    SETTLED_BYTES,
    SETTLED_BYTES_PER_RANK,
    keeps_native,
    lightest_first,
    load,
    predicted_choice,
)


def peers(*args, **kwargs):
    """The peers part of :func:`colltune.tune.ties.load` (same arguments)."""
    return load(*args, **kwargs)[1]


def test_the_lightest_load_wins_only_within_the_window():
    items = [("a", 1.0, 5), ("b", 1.0 + PREDICTED_TIE / 2, 3), ("c", 1.0 + 2 * PREDICTED_TIE, 1), ("d", 2.0, 0)]
    asked = []

    def count(x):
        asked.append(x[0])
        return x[2]

    got = lightest_first(items, lambda x: x[1], count, lambda x: (x[1], x[0]))
    assert [x[0] for x in got] == ["b", "a", "c", "d"]
    assert sorted(asked) == ["a", "b"]  # only the near-ties are asked
    # equal peers: the first by order; one alone, or an unpriceable fastest: order only
    same = lightest_first([("y", 1.01, 2), ("x", 1.0, 2)], lambda x: x[1], lambda x: x[2], lambda x: x[1])
    assert [x[0] for x in same] == ["x", "y"]
    assert lightest_first([("x", float("-inf"), 9), ("y", 1.0, 1)], lambda x: x[1], lambda x: x[2],
                          lambda x: x[1])[0][0] == "x"
    assert lightest_first([], lambda x: 0.0, lambda x: 0, lambda x: 0) == []


def test_the_predicted_choice_breaks_ties_by_load_then_name():
    time = {"b": 1.0, "a": 1.0, "c": 1.0 + PREDICTED_TIE / 2, "d": 1.0 + 2 * PREDICTED_TIE}
    few = {"a": 4, "b": 4, "c": 2, "d": 1}
    assert predicted_choice(list(time), time.__getitem__, few.__getitem__, str) == "c"  # lightest load in the window
    level = dict.fromkeys(time, 3)
    assert predicted_choice(list(time), time.__getitem__, level.__getitem__, str) == "a"  # equal peers: time, name
    assert predicted_choice(["d"], time.__getitem__, few.__getitem__, str) == "d"


def test_native_is_the_predicted_choice_within_the_window_whatever_the_load():
    time = {NATIVE: 1.0, "a": 1.0 / (1 + PREDICTED_TIE / 2), "b": 2.0}
    few = {NATIVE: 7, "a": 1, "b": 1}
    assert predicted_choice(list(time), time.__getitem__, few.__getitem__, str) == NATIVE
    time["a"] = 1.0 / (1 + 2 * PREDICTED_TIE)  # far enough ahead: the fastest replaces native
    assert predicted_choice(list(time), time.__getitem__, few.__getitem__, str) == "a"
    assert keeps_native(1.0, 1.0) and keeps_native(float("-inf"), 1.0) and not keeps_native(1.1, 1.0)


def test_native_counts_as_the_algorithm_it_stands_for():
    from colltune.tune.native import native_equivalent

    name, params = native_equivalent("allgather", 8, 4096)
    assert peers("allgather", NATIVE, 8, 4096, {}) == peers("allgather", name, 8, 4096, params)


#: Two hosts of four ranks each, placed by blocks.
TWO_BY_FOUR = (0, 0, 0, 0, 1, 1, 1, 1)


def test_on_hosts_of_several_ranks_only_the_peers_over_the_network_count():
    """On two hosts of four ranks (block), a binomial broadcast from rank 0 reaches one rank of
    the other host (of its 3 peers), the chain one (of 2), the flat tree four (of 7); the
    hierarchical broadcast, built on those hosts, one; native counts as MPICH's composition there."""
    from colltune.tune.native import native_on_hosts

    assert [peers("bcast", a, 8, 4096, {}) for a in ("binomial_tree", "chain", "flat_tree")] == [3, 2, 7]
    assert [peers("bcast", a, 8, 4096, {}, TWO_BY_FOUR) for a in ("binomial_tree", "chain", "flat_tree")] == [1, 1, 4]
    assert peers("bcast", "hierarchical", 8, 4096, {}, TWO_BY_FOUR) == 1
    assert peers("barrier", "dissemination", 8, 0, {}, TWO_BY_FOUR) == 3
    name, params = native_on_hosts("bcast", TWO_BY_FOUR, 4096)
    assert name == "hierarchical"
    assert peers("bcast", NATIVE, 8, 4096, {}, TWO_BY_FOUR) == peers("bcast", name, 8, 4096, params, TWO_BY_FOUR)
    # one rank per host: every peer counts, as without hosts
    assert peers("bcast", "binomial_tree", 8, 4096, {}, tuple(range(8))) == 3


@pytest.mark.parametrize("per_host, placement", [(2, "block"), (4, "round-robin")])
def test_loads_on_hosts_are_counted_where_they_no_longer_change_with_the_size(per_host, placement):
    """Every candidate, flat or hierarchical, the tuner tries on 8 ranks of hosts of ``per_host``
    has, at 4, 16 and 256 KiB, the network peers of its schedule at the size load() builds it at,
    and its busiest rank's network bytes there order the candidates as those at the size do."""
    from colltune.sim import star
    from colltune.tune.select import space_on

    topology = star(8 // per_host, 12.5e6).placed(per_host, placement)
    hosts, space = topology.host_labels(), space_on(topology, [8])
    for collective in ("bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce"):
        for size in (4096, 1 << 14, 1 << 18):
            loads = []
            for alg in candidates(collective, True):
                for params in space.combos(collective, alg.name, 8, size):
                    schedule = alg.schedule(8, 0, size, hosts=hosts if alg.hierarchical else None, **params)
                    settled = load(collective, alg.name, 8, size, params, hosts)
                    assert settled[1] == schedule.max_remote_peers(hosts), alg.name
                    loads.append((schedule.max_remote_bytes(hosts), settled[0]))
            assert same_order(loads), (collective, size)


class Equal:
    """Prices every candidate of a collective alike (1 ms; native 2 ms), as a model that moves the
    same bytes over the same links would."""

    def price(self, collective, algorithm, procs, size, params):
        return (2e-3 if algorithm == NATIVE else 1e-3), dict(params)


@pytest.mark.parametrize("method, chosen", [("simulate", "recursive_doubling"), ("model", "recursive_doubling"),
                                            ("measure", "dissemination")])
def test_a_predicting_tuner_breaks_a_tie_by_peers_and_a_timing_one_does_not(method, chosen):
    """Predicted alike, the recursive-doubling barrier (3 peers at P = 8) is chosen over the
    dissemination barrier (5), whose name comes first; measured prices keep the order of the
    sample (time, then name)."""
    table = build_table(Equal(), method, ["barrier"], [8], 0, Provenance(source="tests"))
    assert table.lookup("barrier", 8, 0)[0] == chosen


def test_a_predicted_crossover_between_near_ties_follows_the_peers():
    """Two all-gathers predicted 2 % apart that move the same bytes, the one with fewer peers
    slower: it holds every size but 0, where neither sends a message (no peers), so the faster one
    does."""

    class Close(Equal):
        def price(self, collective, algorithm, procs, size, params):
            t = {"ring": 1.02e-3, "direct": 1e-3}.get(algorithm, 5e-3)
            return t * (1 + size / 1e6), dict(params)

    table = build_table(Close(), "simulate", ["allgather"], [8], 1 << 16, Provenance(source="tests"))
    assert table.lookup("allgather", 8, 0)[0] == "direct"
    assert {table.lookup("allgather", 8, s)[0] for s in (1, 2, 4095, 4096, 1 << 16)} == {"ring"}


class Placed(Equal):
    """Equal prices, the ranks placed on :data:`TWO_BY_FOUR` (as a simulator over a topology)."""

    def hosts(self, procs):
        return TWO_BY_FOUR[:procs]


class FourByTwo(Equal):
    """Equal prices, the ranks placed on four hosts of two ranks each (block)."""

    def hosts(self, procs):
        return (0, 0, 1, 1, 2, 2, 3, 3)[:procs]


@pytest.mark.parametrize("pricer, collective, chosen", [
    (Equal(), "bcast", "scatter_recursive_doubling_allgather"), (Placed(), "bcast", "binomial_tree"),
    (Equal(), "alltoall", "direct"), (FourByTwo(), "alltoall", "direct")])
def test_a_tuner_weighs_the_load_on_other_hosts_than_where_its_pricer_places_the_ranks(pricer, collective, chosen):
    """Candidates predicted alike at P = 8, 4 KiB.  Broadcasts: with one rank per host the busiest
    rank of the scatter then recursive-doubling all-gather moves the fewest bytes (7 KiB; the
    chain's 8, the binomial tree's 12); on two hosts of four ranks the binomial tree, the chain and
    the hierarchical broadcast each move 4 KiB over the network to one peer there, and the
    binomial tree's name comes first.  All-to-alls on four hosts of two ranks: the hierarchical
    one's leader talks to the fewest ranks on other hosts (3, the flat ones' ranks 6) but moves
    twice their bytes (the host's), so a flat one wins, as with one rank per host."""
    table = build_table(pricer, "simulate", [collective], [8], 4096, Provenance(source="tests"))
    assert table.lookup(collective, 8, 4096)[0] == chosen
    assert peers("alltoall", "hierarchical", 8, 4096, {}, FourByTwo().hosts(8)) == 3


def test_the_simulators_pricer_places_the_ranks_as_its_topology_does():
    from colltune.profiles import load_profile
    from colltune.sim import star
    from colltune.tune import SimPricer
    from colltune.tune.ties import placed_hosts

    profile = load_profile("builtin:ethernet-10g-tcp")
    topology = star(4, 12.5e6).placed(2, "block")
    assert SimPricer(profile.params("hockney"), "hockney", topology).hosts(8) == (0, 0, 1, 1, 2, 2, 3, 3)
    assert SimPricer(profile.params("hockney"), "hockney", None).hosts(8) is None
    assert placed_hosts(Equal(), 8) is None and placed_hosts(Placed(), 8) == TWO_BY_FOUR


@pytest.mark.parametrize("method, lead, chosen", [("simulate", PREDICTED_TIE / 2, NATIVE),
                                                  ("simulate", 2 * PREDICTED_TIE, "ring"),
                                                  ("model", PREDICTED_TIE / 2, NATIVE),
                                                  ("measure", PREDICTED_TIE / 2, "ring")])
def test_a_predicting_tuner_keeps_native_unless_a_candidate_is_predicted_beyond_the_window(method, lead, chosen):
    """An all-gather predicted ahead of native by ``lead`` (a fraction of its time) at every size
    but 0: predictions keep native within the window, and replace it beyond; timings take any lead."""

    class Ahead(Equal):
        def price(self, collective, algorithm, procs, size, params):
            t = 1e-3 * (1 + size / 1e6)
            return {NATIVE: t, "ring": t / (1 + lead)}.get(algorithm, 5 * t), dict(params)

    table = build_table(Ahead(), method, ["allgather"], [8], 1 << 16, Provenance(source="tests"))
    assert {table.lookup("allgather", 8, s)[0] for s in (1, 4096, 1 << 16)} == {chosen}


def same_order(loads: list[tuple[int, int]]) -> bool:
    """Whether the network bytes of the first of each pair order the candidates as the second's."""
    return all((a[0] < b[0]) == (a[1] < b[1]) for a in loads for b in loads)


@pytest.mark.parametrize("collective", ["bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce"])
@pytest.mark.parametrize("procs", [3, 8, 13])
def test_loads_are_counted_where_they_no_longer_change_with_the_size(collective, procs):
    """Every candidate with every parameter value the tuner tries has, at 4, 16 and 256 KiB, the
    peers of its schedule at the size load() builds it at (SETTLED_BYTES_PER_RANK bytes per rank or
    SETTLED_BYTES), and its busiest rank's network bytes there order the candidates as those at the
    size do."""
    for size in (4096, 1 << 14, 1 << 18):
        loads = []
        for alg in candidates(collective):
            for params in REGISTRY_SPACE.combos(collective, alg.name, procs, size):
                full = REGISTRY.get(collective, alg.name).schedule(procs, 0, size, **params)
                settled = load(collective, alg.name, procs, size, params)
                assert settled[1] == peers(collective, alg.name, procs, size, params) == full.max_peers, alg.name
                loads.append((full.max_remote_bytes(None), settled[0]))
        assert same_order(loads), (collective, size)
    assert SETTLED_BYTES_PER_RANK * procs <= SETTLED_BYTES < 1 << 14
