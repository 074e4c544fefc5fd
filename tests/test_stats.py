"""Known values and properties of analysis.stats (METHODS.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from analysis import stats
from analysis.stats import (
    cluster_bootstrap,
    cohen_kappa,
    delta_ci,
    double_sampling,
    fieller,
    gain_bias,
    holm,
    icc,
    mcnemar,
    mcnemar_power,
    mcnemar_sample_size,
    neyman_allocation,
    optimal_repeats,
    pabak,
    pass_at_k,
    pass_hat_k,
    proportional_allocation,
    repeated_runs_sample_size,
    rogan_gladen,
    rogan_gladen_variance,
    sign_flip_test,
    stratified_means,
    wilson,
)
from realbench.errors import AnalysisError

# ---------------------------------------------------------------- known values


def test_wilson_textbook_8_of_10():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4)
    assert hi == pytest.approx(0.9433, abs=1e-4)


def test_wilson_edges_and_vectorised():
    assert wilson(0, 10)[0] == 0.0
    assert wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(np.array([0, 5, 10]), np.array([10, 10, 10]))
    assert lo.shape == (3,) and hi[1] == pytest.approx(1 - lo[1])
    # Rule-of-three neighbourhood: 0/100 upper bound is close to 3.7 %.
    assert wilson(0, 100)[1] == pytest.approx(0.037, abs=0.002)
    with pytest.raises(AnalysisError):
        wilson(11, 10)


@pytest.mark.parametrize(("b", "c"), [(1, 6), (0, 5), (3, 3), (10, 2), (0, 0), (25, 40)])
def test_mcnemar_exact_matches_binomtest(b, c):
    expected = 1.0 if b + c == 0 else sps.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_mid_p_smaller():
    assert mcnemar(1, 6) == pytest.approx(0.125)
    assert mcnemar(1, 6, mid_p=True) == pytest.approx(0.125 - 7 / 128)


def test_kappa_textbook():
    # Wikipedia's worked example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no → κ = 0.4.
    t = [[20, 5], [10, 15]]
    assert cohen_kappa(t) == pytest.approx(0.4)
    assert pabak(t) == pytest.approx(2 * 0.7 - 1)
    assert math.isnan(cohen_kappa([[10, 0], [0, 0]]))
    with pytest.raises(AnalysisError):
        cohen_kappa([[0, 0], [0, 0]])


def test_fieller_hand_computation():
    # a = 2, b = 4, v_aa = .1, v_bb = .2, v_ab = .05, q = 1.96:
    # (b² − q²v_bb)θ² − 2(ab − q²v_ab)θ + (a² − q²v_aa) = 0 → 15.23168θ² − 15.61584θ + 3.61584 = 0.
    lo, hi = fieller(2, 4, 0.1, 0.2, 0.05)
    assert lo == pytest.approx(0.353299, abs=1e-6)
    assert hi == pytest.approx(0.671922, abs=1e-6)
    # Endpoints solve (a − θb)² = q²(v_aa − 2θv_ab + θ²v_bb).
    for t in (lo, hi):
        assert (2 - 4 * t) ** 2 == pytest.approx(1.96**2 * (0.1 - 2 * t * 0.05 + t * t * 0.2))


def test_fieller_unbounded_is_none():
    assert fieller(0.2, 0.1, 0.01, 0.01, 0.0) is None  # g = 3.84·0.01/0.01 ≥ 1
    assert fieller(1.0, 0.0, 0.1, 0.1, 0.0) is None
    assert stats.fieller_g(0.1, 0.01) > 1


def test_delta_ci_matches_formula():
    lo, hi = delta_ci(2, 4, 0.1, 0.2, 0.05)
    se = math.sqrt(0.1 - 2 * 0.5 * 0.05 + 0.25 * 0.2) / 4
    assert (lo, hi) == pytest.approx((0.5 - 1.96 * se, 0.5 + 1.96 * se))


def test_rogan_gladen_values():
    assert rogan_gladen(0.5, 0.9, 0.8) == pytest.approx(0.3 / 0.7)
    assert rogan_gladen(0.05, 0.9, 0.9) == 0.0  # clipped
    assert rogan_gladen(0.4, 1.0, 1.0) == pytest.approx(0.4)
    v = rogan_gladen_variance(0.5, 0.9, 0.8, 200, 50, 60)
    p = 0.3 / 0.7
    expected = (0.25 / 200 + p * p * 0.09 / 50 + (1 - p) ** 2 * 0.16 / 60) / 0.49
    assert v == pytest.approx(expected)
    with pytest.raises(AnalysisError):
        rogan_gladen(0.5, 0.5, 0.5)
    assert double_sampling(0.4, 0.9, 0.95) == pytest.approx(0.9 * 0.4 + 0.05 * 0.6)


def test_gain_bias_equal_error_rates_shrink_gain():
    # Equal Se = Sp = 0.9 in both arms: observed gain = (Se + Sp − 1)·true gain, bias = −0.2·gain.
    bias = gain_bias(0.3, 0.7, fpr=(0.1, 0.1), fnr=(0.1, 0.1))
    assert bias == pytest.approx(-0.2 * 0.4)


def test_pass_at_k_and_pass_hat_k():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 4, 2) == 1.0
    assert pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert pass_hat_k(5, 5, 5) == 1.0
    np.testing.assert_allclose(pass_at_k(np.array([5, 5]), np.array([1, 2]), 1), [0.2, 0.4])


def test_icc_components():
    rates = np.array([0.0, 1.0, 0.0, 1.0])  # tasks fully determine outcomes
    res = icc(rates, 4)
    assert res.sigma2_w == 0.0 and res.icc == pytest.approx(1.0)
    rates = np.array([0.5, 0.5, 0.5, 0.5])  # no between-task variance
    res = icc(rates, 4)
    assert res.sigma2_tau == 0.0 and res.icc == 0.0
    assert res.sigma2_w == pytest.approx(0.25 * 4 / 3)
    assert res.var_mean == pytest.approx(res.sigma2_w / 4 / 4)


def test_sign_flip_exact_small():
    res = sign_flip_test([1.0, 2.0, 3.0])
    assert res.exact and res.n_flips == 8
    assert res.p_value == pytest.approx(0.25)
    res = sign_flip_test([1.0, 2.0, 3.0], alternative="greater")
    assert res.p_value == pytest.approx(1 / 8)
    # zeros do not count towards the enumeration
    assert sign_flip_test([0.0, 1.0, 2.0, 3.0]).n_nonzero == 3


def test_sign_flip_random_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(1)
    d = rng.normal(0.3, 1, size=18)
    exact = sign_flip_test(d)
    approx = sign_flip_test(d, exact_max=5, n_flips=50_000, rng=np.random.default_rng(3))
    again = sign_flip_test(d, exact_max=5, n_flips=50_000, rng=np.random.default_rng(3))
    assert exact.exact and not approx.exact
    assert approx.p_value == again.p_value
    assert approx.p_value == pytest.approx(exact.p_value, abs=0.01)
    with pytest.raises(AnalysisError):
        sign_flip_test(rng.normal(size=30))  # random flips need a generator


def test_sign_flip_stratified_weights():
    d = [1.0, 1.0, -1.0]
    res = sign_flip_test(d, strata=["a", "a", "b"], stratum_weights={"a": 0.5, "b": 0.5})
    assert res.statistic == pytest.approx(0.5 * 1 + 0.5 * -1)


def test_holm():
    np.testing.assert_allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])


def test_allocations():
    ney = neyman_allocation({"a": 100, "b": 100}, {"a": 1.0, "b": 3.0}, 20)
    assert ney.as_dict() == {"a": 5, "b": 15}
    costly = neyman_allocation({"a": 100, "b": 100}, {"a": 1.0, "b": 1.0}, 20, cost_h={"a": 1.0, "b": 4.0})
    assert costly.as_dict()["a"] > costly.as_dict()["b"]
    floors = neyman_allocation({"a": 100, "b": 50, "tiny": 1}, {"a": 1.0, "b": 0.0, "tiny": 5.0}, 12)
    assert floors.as_dict() == {"a": 9, "b": 2, "tiny": 1}
    assert floors.taken_whole == [False, False, True]
    prop = proportional_allocation({"a": 60, "b": 30, "c": 10}, 10)
    assert prop.as_dict() == {"a": 5, "b": 3, "c": 2}  # c floored to 2, the rest 8 ∝ 60:30
    assert sum(prop.n) == 10
    with pytest.raises(AnalysisError):
        proportional_allocation({"a": 10, "b": 10, "c": 10}, 4)


def test_mcnemar_sample_size_connor_and_exact():
    res = mcnemar_sample_size(0.3, 0.1)
    psi, delta = 0.4, 0.2
    connor = (1.959964 * math.sqrt(psi) + 0.841621 * math.sqrt(psi - delta**2)) ** 2 / delta**2
    assert res.n_connor == math.ceil(connor)
    assert res.n_exact is not None and res.power_at_n_exact >= 0.8
    assert mcnemar_power(res.n_exact - 1, 0.3, 0.1) < 0.8
    # Exact power agrees with a direct simulation of the test.
    rng = np.random.default_rng(0)
    n = 60
    cells = rng.multinomial(n, [0.3, 0.1, 0.6], size=4000)
    p = np.array([mcnemar(b, c) for b, c, _ in cells])
    assert mcnemar_power(n, 0.3, 0.1) == pytest.approx(np.mean(p <= 0.05), abs=0.025)


def test_repeated_runs_and_optimal_m():
    n = repeated_runs_sample_size(0.2, 0.04, 0.2, m=4)
    assert n == math.ceil((1.959964 + 0.841621) ** 2 * (0.04 + 0.05) / 0.04)
    assert optimal_repeats(9.0, 1.0, sigma2_tau=0.05, sigma2_w=0.2) == pytest.approx(6.0)


def test_cluster_bootstrap_mean_close_to_t_interval():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, size=200)
    idx = np.zeros(200, dtype=np.int64)

    def mean(counts):
        return stratified_means(counts, x, idx)

    res = cluster_bootstrap(mean, 200, n_resamples=10_000, rng=np.random.default_rng(1))
    half = 1.96 * x.std(ddof=1) / math.sqrt(200)
    assert res.estimate == pytest.approx(x.mean())
    assert res.bca_ci[0] == pytest.approx(x.mean() - half, abs=0.05)
    assert res.bca_ci[1] == pytest.approx(x.mean() + half, abs=0.05)
    assert res.percentile_ci[0] < res.estimate < res.percentile_ci[1]
    assert res.reliable


def test_cluster_bootstrap_stratified_keeps_strata_sizes_and_flags_small():
    x = np.array([0.0, 0.0, 0.0, 10.0, 10.0, 10.0])
    strata = ["a", "a", "a", "b", "b", "b"]
    idx = np.array([0, 0, 0, 1, 1, 1])
    res = cluster_bootstrap(
        lambda c: stratified_means(c, x, idx), 6, strata=strata, n_resamples=500, rng=np.random.default_rng(0)
    )
    # Within-stratum resampling never changes the mix, so the mean cannot move.
    assert res.percentile_ci == pytest.approx((5.0, 5.0))
    assert not res.reliable and "Fieller" in res.note


# ---------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 500), st.integers(1, 500))
def test_wilson_properties(k, n):
    k = min(k, n)
    lo, hi = wilson(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    lo2, hi2 = wilson(n - k, n)
    assert lo == pytest.approx(1 - hi2, abs=1e-12) and hi == pytest.approx(1 - lo2, abs=1e-12)
    if k < n:
        assert wilson(k + 1, n)[0] >= lo and wilson(k + 1, n)[1] >= hi


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.integers(0, 200))
def test_mcnemar_properties(b, c):
    p = mcnemar(b, c)
    assert 0.0 <= p <= 1.0
    assert p == mcnemar(c, b)
    assert mcnemar(b, c, mid_p=True) <= p
    if b >= c > 0:  # a more lopsided split of the same discordant total is more significant
        assert mcnemar(b + 1, c - 1) <= p


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=4, max_size=4).filter(lambda t: sum(t) > 0))
def test_kappa_properties(cells):
    t = np.array(cells).reshape(2, 2)
    k = cohen_kappa(t)
    if not math.isnan(k):
        assert -1.0 - 1e-12 <= k <= 1.0 + 1e-12
        assert k == pytest.approx(cohen_kappa(t.T))
    assert -1.0 <= pabak(t) <= 1.0


finite = st.floats(-5, 5, allow_nan=False)
pos = st.floats(1e-4, 2, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(finite, finite.filter(lambda b: abs(b) > 1e-3), pos, pos, st.floats(-0.99, 0.99))
def test_fieller_contains_ratio_when_bounded(a, b, v_aa, v_bb, rho):
    v_ab = rho * math.sqrt(v_aa * v_bb)
    ci = fieller(a, b, v_aa, v_bb, v_ab)
    if ci is None:
        assert stats.fieller_g(b, v_bb) >= 1
    else:
        assert ci[0] <= a / b + 1e-9 and a / b - 1e-9 <= ci[1]


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1), st.floats(0.51, 1), st.floats(0.51, 1))
def test_rogan_gladen_in_unit_interval(q, se, sp):
    p = rogan_gladen(q, se, sp)
    assert 0.0 <= p <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.data())
def test_pass_k_bounds(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    a, h = pass_at_k(n, c, k), pass_hat_k(n, c, k)
    # pass^k ≤ pass@1 = c/n ≤ pass@k, all within [0, 1]
    assert -1e-12 <= h <= c / n + 1e-9
    assert c / n <= a + 1e-9 <= 1.0 + 2e-9
