"""The models: the papers' own numbers and orderings, cross-checks between models, the formula registry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import hockney_critical_path
from hypothesis import given, settings
from hypothesis import strategies as st

from colltune import REGISTRY
from colltune.models import (
    MODELS,
    TABLE1,
    Hockney,
    LatencyMatrix,
    LogGP,
    LogP,
    PLogP,
    PLogPTable,
    Postal,
    Tabulated,
    Unavailable,
    alltoall_bounds,
    best_segment,
    broadcast_time,
    coordinated_window,
    fit_contention_ratio,
    formulas,
    gather_bounds,
    predict,
    predict_all,
    rto_count,
    switch_between,
    transfer_ratio,
)
from colltune.models.costs import Case
from colltune.models.params import Linear, Piecewise
from colltune.profiles import builtin

GRID = builtin("paper004-grid").models.latency
IDX = {n: i for i, n in enumerate("ABCDEFGH")}


def _children(edges: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for e in edges.split():
        out.setdefault(IDX[e[0]], []).append(IDX[e[1]])
    return out


# --- paper 004 -------------------------------------------------------------------------------------

def test_paper004_fig2_registry_trees() -> None:
    """Fig. 2 (a) and (c): binomial 1420, flat 800 for root A."""
    assert predict(GRID, "latency", "bcast", "binomial_tree", 8, 2).time == 1420
    assert predict(GRID, "latency", "bcast", "flat_tree", 8, 2).time == 800


def test_paper004_fig2_mst_and_hlot() -> None:
    """Fig. 2 (b) and (d): the MST's path A-H-G-F-E takes 1150, the HLOT tree 600 (eq. 4)."""
    assert broadcast_time(GRID, _children("AH HG GF FE AB BC AD"), 0) == 1150
    assert broadcast_time(GRID, _children("AB AD AE AH HF HG BC"), 0) == 600


def test_latency_overheads_charge_earlier_sends() -> None:
    """Eq. 2: the c-th child waits for c-1 sends of overhead + gap, and every receiver pays T_RO."""
    m = LatencyMatrix(names=("a", "b", "c"), latency=((0, 10, 10), (10, 0, 10), (10, 10, 0)), o_s=1, gap=2, o_r=4)
    assert broadcast_time(m, {0: [1, 2]}, 0) == 10 + 4 + 3
    with pytest.raises(Unavailable, match="3 ranks"):
        predict(m, "latency", "bcast", "flat_tree", 4, 1)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9).flatmap(lambda n: st.lists(st.lists(st.integers(1, 1000), min_size=n, max_size=n),
                                                    min_size=n, max_size=n)))
def test_flat_tree_is_max_direct_latency(rows: list[list[int]]) -> None:
    """Eq. 3: without overheads the flat tree takes the root's largest direct latency."""
    n = len(rows)
    m = LatencyMatrix(names=tuple(str(i) for i in range(n)), latency=tuple(tuple(r) for r in rows))
    for root in range(n):
        assert predict(m, "latency", "bcast", "flat_tree", n, 1, root).time == max(
            rows[root][j] for j in range(n) if j != root)


# --- paper 001 -------------------------------------------------------------------------------------

GIGE = builtin("paper001-gige").models.plogpt


def test_paper001_switch_predicate() -> None:
    """Section IV-B: on Table II, P_S(h, h+1) is false exactly when h is 2 or 3."""
    assert [switch_between(GIGE.bidirectional, h, h + 1, GIGE.eps_s) for h in range(1, 5)] == [True, False, False,
                                                                                                 True]


def test_paper001_rto_and_ordering() -> None:
    """Eq. 26-27: Alltoall_A is faster than Alltoall_B exactly when an RTO occurs; no RTO for small m."""
    seen = set()
    for m in (64, 1024, 8192, 20000, 40000, 1 << 20):
        n_rto = rto_count(GIGE, 32, m)
        seen.add(n_rto)
        a = predict(GIGE, "plogpt", "alltoall", "pairwise_exchange", 32, m).time
        b = predict(GIGE, "plogpt", "alltoall", "recv_all_xor_sends", 32, m).time
        assert (a < b) == (n_rto > 0)
        assert b - a == pytest.approx(n_rto * GIGE.t_rto - 30 * GIGE.L)
    assert seen == {0, 1, 2}
    assert rto_count(GIGE, 32, 64) == 0


def test_paper001_example_full_bisection_reduces_to_plogp() -> None:
    """With b(h) = 2^(h-1) b(1) (full bisection) eq. 23 is eq. 18 and the tree adds nothing."""
    ex = builtin("paper001-example").models
    full = ex.plogpt.model_copy(update={"bidirectional": ex.plogpt.bidirectional.model_copy(update={"b": (3, 6)})})
    assert predict(full, "plogpt", "alltoall", "pairwise", 4, 8).time == pytest.approx(
        predict(ex.plogp, "plogp", "alltoall", "pairwise", 4, 8).time)
    # the example's bottleneck (b(2) = 4 < 6) makes the height-2 steps 1.5 times longer: 8 + 2*12 + 3*3
    assert predict(ex.plogpt, "plogpt", "alltoall", "pairwise", 4, 8).time == 41
    with pytest.raises(Unavailable, match="d\\(h\\)"):
        predict(ex.plogpt, "plogpt", "alltoall", "recv_all_xor_sends", 4, 8)
    with pytest.raises(Unavailable, match="P = 2\\^D"):
        predict(ex.plogpt, "plogpt", "alltoall", "pairwise", 3, 8)


# --- paper 003 -------------------------------------------------------------------------------------

def _plogp(g: Tabulated, L: float = 5e-5, gamma: float | None = None) -> PLogP:
    lin = Tabulated(sizes=(0, 1 << 20), values=(1e-5, 1e-5 + 1e-9 * (1 << 20)))
    return PLogP(L=L, unidirectional=PLogPTable(g=g, os=lin, or_=lin), contention_gamma=gamma)


def test_contention_ratio_fit_recovers_gamma() -> None:
    """Section 5: T = Lower + (Upper - Lower) gamma; least squares on noisy times recovers gamma."""
    p = _plogp(Tabulated(sizes=(0, 1 << 20), values=(3e-5, 3e-5 + 8e-9 * (1 << 20))))
    rng = np.random.default_rng(1)
    pts = [alltoall_bounds(p, P, m) for P in (4, 8, 16, 24) for m in (1024, 65536, 1 << 20)]
    lo, up = np.array(pts).T
    measured = (lo + (up - lo) * 2 / 3) * (1 + rng.normal(0, 0.01, lo.size))
    gamma, residuals = fit_contention_ratio(lo, up, measured)
    assert gamma == pytest.approx(2 / 3, rel=0.02)
    assert residuals.shape == lo.shape and np.abs(residuals).max() < 0.05 * measured.max()
    q = p.model_copy(update={"contention_gamma": gamma})
    assert predict(q, "plogp", "alltoall", "direct", 8, 1024).time == pytest.approx(
        lo[3] + (up[3] - lo[3]) * gamma)
    with pytest.raises(Unavailable, match="contention ratio"):
        predict(p, "plogp", "alltoall", "direct", 8, 1024)


def test_table1_rendezvous_and_segments() -> None:
    """Table 1: a rendezvous adds 2 g(1) + 2 L per hop; one segment equals the unsegmented cost."""
    g = Tabulated(sizes=(0, 1024, 1 << 20), values=(2e-5, 3e-5, 9e-3))
    p = _plogp(g)
    for P in (2, 5, 8, 13):
        m = 70000
        hop = 2 * g(1) + 2 * p.L
        assert predict(p, "plogp", "bcast", "chain_rendezvous", P, m).time == pytest.approx(
            predict(p, "plogp", "bcast", "chain", P, m).time + (P - 1) * hop)
        assert predict(p, "plogp", "bcast", "flat_tree_rendezvous", P, m).time == pytest.approx(
            predict(p, "plogp", "bcast", "flat_tree", P, m).time + hop)
        for seg, plain in (("chain_segmented", "chain"), ("binomial_tree_segmented", "binomial_tree"),
                           ("flat_tree_segmented", "flat_tree")):
            assert predict(p, "plogp", "bcast", seg, P, m, segment_size=m).time == pytest.approx(
                predict(p, "plogp", "bcast", plain, P, m).time)


def test_segment_search_finds_the_pipeline_optimum() -> None:
    """Section 3: the searched segment is at least as good as every s = m/2^i and a brute-force optimum."""
    h = Hockney(alpha=50e-6, beta=8e-9)
    P, m = 8, 1 << 20
    pred = predict(h, "hockney", "bcast", "chain_segmented", P, m)
    s = pred.params["segment_size"]
    brute = min(predict(h, "hockney", "bcast", "chain_segmented", P, m, segment_size=x).time
                for x in range(256, m + 1, 256))
    assert pred.time <= brute * 1.001
    # the continuous optimum of (P + m/s - 2)(alpha + beta s) is s = sqrt(m alpha / ((P - 2) beta))
    assert s == pytest.approx(math.sqrt(m * h.alpha / ((P - 2) * h.beta)), rel=0.15)


def test_best_segment_skips_unavailable_sizes() -> None:
    def cost(c: Case) -> float:
        if c.params["segment_size"] > 100:
            raise Unavailable("too big")
        return 1000 / c.params["segment_size"] + c.params["segment_size"]
    assert best_segment(cost, Case(4, 4096, 0, {"segment_size": 1})) == (32, 1000 / 32 + 32)
    with pytest.raises(Unavailable):
        best_segment(lambda c: (_ for _ in ()).throw(Unavailable("never")), Case(4, 64, 0, {"segment_size": 1}))


# --- paper 000 -------------------------------------------------------------------------------------

def test_gather_bounds_from_table1() -> None:
    """Gal = ceil(gs/gr); Gau is the largest sender count whose transfer ratio (eq. 4) stays one."""
    for P in (4, 8, 16):
        for m in (100, 1500, 65536, 1 << 20):
            pk = min(m, TABLE1.mtu)
            gal, gau = gather_bounds(TABLE1, P, m)
            assert gal == max(1, math.ceil(TABLE1.gs(pk) / TABLE1.gr(pk)))
            items = (P - 1) * math.ceil(m / TABLE1.mtu)
            ratio = [transfer_ratio(x / TABLE1.gs(pk), 1 / TABLE1.gr(pk), TABLE1.BL, items) for x in range(1, P)]
            assert ratio[gau - 1] == 1.0
            assert gau == P - 1 or ratio[gau] < 1.0
            w = coordinated_window(TABLE1, P, m)
            assert gal <= w <= max(gal, gau)
            assert (P - 1) % w == 0 or (P - 1) % w >= gal


def test_coordinated_gather_defaults_to_eq7() -> None:
    """The coordinated gather's window 0 builds the same schedule as w from eq. 7."""
    alg = REGISTRY.get("gather", "coordinated")
    for P, m in ((16, 1 << 20), (8, 65536), (5, 3000)):
        w = coordinated_window(TABLE1, P, m, alg.validate_params({})["switch_buffer"])
        a = alg.schedule(P, 0, m)
        b = alg.schedule(P, 0, m, window=w)
        assert all(np.array_equal(a.columns[k], b.columns[k]) for k in a.columns)


def test_eq2_exceeds_eq1_by_the_receive_interference() -> None:
    """Paper 000 eq. 1 vs eq. 2 with Os + L + Or + Ur as eq. 1's latency: each further packet costs rank P/2
    ceil(log2 P/2) gs + Or + Ur instead of the root's ceil(log2 P) gs, i.e. (k-1)(Or + Ur - gs) more for P = 16."""
    s, P = 1000, 16
    hop = TABLE1.Os(s) + TABLE1.latency(s, P) + TABLE1.Or(s) + TABLE1.Ur(s)
    logp = LogP(L=hop, o=0, g=TABLE1.gs(s))
    for k in (1, 2, 50):
        eq2 = predict(TABLE1, "cluster", "bcast", "binomial_tree_segmented", P, k * s, segment_size=s).time
        eq1 = predict(logp, "logp", "bcast", "binomial_tree_segmented", P, k * s, segment_size=s).time
        assert eq2 - eq1 == pytest.approx((k - 1) * (TABLE1.Or(s) + TABLE1.Ur(s) - TABLE1.gs(s)), rel=1e-9)
    with pytest.raises(Unavailable, match="mtu"):
        predict(TABLE1, "cluster", "bcast", "binomial_tree_segmented", P, 1 << 20, segment_size=4096)


def test_a_zero_send_gap_offers_no_load() -> None:
    """A probe on shared memory can fit gs(m) = 0 (seen in CI at P = 4): L(m, p) then has no
    saturation term, as the fit takes it, instead of dividing by zero."""
    idle = TABLE1.model_copy(update={"gs": Piecewise.same(Linear(intercept=0.0))})
    c = TABLE1.L
    assert idle.latency(1000, 8) == pytest.approx(c.per_proc * 8 + c.base + c.per_byte * 1000)
    assert TABLE1.latency(0, 8) == idle.latency(0, 8)


# --- paper 002 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("P", [2, 3, 5, 8, 13])
def test_symmetric_eq5_is_the_schedule_critical_path(P: int) -> None:
    """Eq. 5 (and eq. 4 for whole messages) against the symmetric schedule's critical path."""
    h = Hockney(alpha=1e-4, beta=1e-8)
    for m in (0, 1000, 4096, 100003, 1 << 20):
        s = REGISTRY.get("bcast", "symmetric_async").schedule(P, 0, m)
        assert predict(h, "hockney", "bcast", "symmetric_async", P, m).time == pytest.approx(
            hockney_critical_path(s, h.alpha, h.beta), abs=P * h.beta)


def test_symmetric_is_constant_in_p_and_beats_binomial() -> None:
    """Paper 002: O(1) in P, twice as fast as the tree for large messages and enough nodes."""
    h = Hockney(alpha=1e-4, beta=8e-8)
    m = 512 * 1024
    times = [predict(h, "hockney", "bcast", "symmetric", P, m).time for P in (4, 8, 16, 32)]
    assert max(times) < 2 * h.alpha + 2 * m * h.beta
    assert predict(h, "hockney", "bcast", "binomial_tree", 16, m).time > 2 * times[2]
    assert predict(h, "hockney", "bcast", "flat_tree", 16, m).time == 15 * (h.alpha + m * h.beta)


# --- cross-checks between models --------------------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(st.integers(1, 64), st.integers(1, 1 << 22), st.integers(1, 1 << 20), st.floats(1, 50))
def test_logp_with_unit_gap_and_no_overhead_is_postal(P: int, m: int, s: int, lam: float) -> None:
    for alg, params in (("binomial_tree", {}), ("binomial_tree_segmented", {"segment_size": s})):
        assert predict(LogP(L=lam, o=0, g=1), "logp", "bcast", alg, P, m, **params).time == pytest.approx(
            predict(Postal(lam=lam), "postal", "bcast", alg, P, m, **params).time)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 64), st.integers(1, 65536), st.floats(1e-5, 1e-4), st.floats(0, 1e-6),
       st.floats(1e-6, 1e-5), st.floats(1e-10, 1e-8))
def test_plogp_with_linear_gap_is_loggp(P: int, m: int, L: float, o: float, g: float, G: float) -> None:
    """pLogP with g(m) = g + (m-1)G and L_p = 2o + L - g prices the flat tree and the chain as LogGP (g >= o)."""
    loggp = LogGP(L=L, o=o, g=g, G=G, S=1 << 20)
    gap = Tabulated(sizes=(1, 1 << 20), values=(g, g + ((1 << 20) - 1) * G))
    plogp = PLogP(L=2 * o + L - g, unidirectional=PLogPTable(g=gap))
    for alg in ("flat_tree", "chain"):
        assert predict(plogp, "plogp", "bcast", alg, P, m).time == pytest.approx(
            predict(loggp, "loggp", "bcast", alg, P, m).time, rel=1e-9, abs=1e-15)
    with pytest.raises(Unavailable, match="rendezvous"):
        predict(loggp.model_copy(update={"S": 0}), "loggp", "bcast", "chain", 4, 10)


def test_hockney_rabenseifner_beats_binomial_for_long_vectors() -> None:
    """TRG 2005: reduce-scatter + allgather beats recursive doubling for long vectors, not short ones."""
    h = Hockney(alpha=50e-6, beta=1e-9, gamma=1e-9)
    rd, rab = "recursive_doubling", "reduce_scatter_allgather"
    assert predict(h, "hockney", "allreduce", rab, 16, 1 << 22).time < predict(h, "hockney", "allreduce", rd, 16,
                                                                               1 << 22).time
    assert predict(h, "hockney", "allreduce", rab, 16, 8).time > predict(h, "hockney", "allreduce", rd, 16, 8).time
    with pytest.raises(Unavailable, match="gamma"):
        predict(Hockney(alpha=1, beta=1), "hockney", "allreduce", rab, 16, 8)
    with pytest.raises(Unavailable, match="power of two"):
        predict(h, "hockney", "allreduce", rab, 12, 8)


# --- the registry of formulas -----------------------------------------------------------------------

def test_every_formula_prices_a_registry_algorithm() -> None:
    for f in formulas():
        assert REGISTRY.get(f.collective, f.algorithm).name == f.algorithm
        assert f.model in MODELS and f.source


def test_missing_formula_is_unavailable_not_approximated() -> None:
    h = Hockney(alpha=1e-5, beta=1e-9)
    with pytest.raises(Unavailable, match="no hockney formula for bcast/binomial_tree_rendezvous; models with one"):
        predict(h, "hockney", "bcast", "binomial_tree_rendezvous", 8, 100)
    done, missing = predict_all(h, "hockney", "bcast", 8, 100)
    assert {p.algorithm for p in done} | set(missing) == set(REGISTRY.names("bcast"))
    assert [p.time for p in done] == sorted(p.time for p in done)


@pytest.mark.parametrize("alg", [a for a in REGISTRY if a.collective != "barrier"],
                         ids=lambda a: f"{a.collective}-{a.name}")
def test_zero_predictions_stand_for_schedules_without_messages(alg) -> None:  # type: ignore[no-untyped-def]
    """predict() returns 0 for size 0 and for P = 1 because no such schedule sends a message."""
    from colltune.schedule import Kind

    for P, m in ((1, 0), (1, 8), (2, 0), (5, 0), (8, 0)):
        assert not np.any(alg.schedule(P, 0, m).columns["kind"] == Kind.SEND), (P, m)
        if get_formula_or_none(alg) is not None:
            assert predict(*get_formula_or_none(alg), alg.collective, alg.name, P, m).time == 0.0


def get_formula_or_none(alg):  # type: ignore[no-untyped-def]
    """(parameters, model) of some model that prices ``alg``, or None."""
    samples = {"hockney": Hockney(alpha=1e-5, beta=1e-9, gamma=1e-9), "plogp": _plogp(Tabulated.constant(1e-5)),
               "postal": Postal(lam=3), "logp": LogP(L=1e-5, o=1e-6, g=2e-6),
               "loggp": LogGP(L=1e-5, o=1e-6, g=2e-6, G=1e-9), "cluster": TABLE1}
    for f in formulas(alg.collective):
        if f.algorithm == alg.name and f.model in samples:
            return samples[f.model], f.model
    return None
