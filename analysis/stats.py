"""Statistics for sim-to-real measurement, as pure vectorised functions (docs/methods.md is the spec).

Section references (§) point to docs/methods.md. Every function that draws random numbers takes a
seeded `numpy.random.Generator`; none touches global random state. Interval functions named in the
public API return plain ``(lo, hi)`` pairs; everything richer returns a typed result object.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy import stats as sps

from realbench.errors import AnalysisError

FloatArray = NDArray[np.float64]
Z95 = float(sps.norm.ppf(0.975))

__all__ = [
    "Allocation",
    "BootstrapResult",
    "IccResult",
    "SampleSize",
    "SignFlipResult",
    "as_result_dict",
    "cluster_bootstrap",
    "cohen_kappa",
    "delta_ci",
    "design_effect_n",
    "double_sampling",
    "double_sampling_variance",
    "fieller",
    "fieller_set",
    "format_interval",
    "format_set",
    "gain_bias",
    "holm",
    "icc",
    "mcnemar",
    "mcnemar_power",
    "mcnemar_sample_size",
    "neyman_allocation",
    "optimal_repeats",
    "pabak",
    "pass_at_k",
    "pass_hat_k",
    "proportional_allocation",
    "raw_agreement",
    "repeated_runs_sample_size",
    "rogan_gladen",
    "rogan_gladen_variance",
    "sign_flip_test",
    "stratified_means",
    "wilson",
]


def as_result_dict(obj: Any) -> dict[str, Any]:
    """dataclass → JSON-friendly dict (numpy scalars and arrays become Python values)."""

    def clean(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return [clean(x) for x in v.tolist()]
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return {k: clean(v) for k, v in asdict(obj).items()}


# --------------------------------------------------------------------------------------------
# Proportions (§3)


def wilson(k: ArrayLike, n: ArrayLike, z: float = 1.96) -> tuple[Any, Any]:
    """Wilson score interval for k successes in n trials (§3). Vectorised; n = 0 gives (0, 1).

    Non-integer k and n are allowed so that effective sample sizes (n_eff) can be used.
    """
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    if np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise AnalysisError("wilson: need 0 <= k <= n", hint="pass counts of successes and trials")
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(n_arr > 0, k_arr / np.where(n_arr > 0, n_arr, 1), 0.0)
        safe_n = np.where(n_arr > 0, n_arr, 1.0)
        denom = 1 + z * z / safe_n
        centre = (p + z * z / (2 * safe_n)) / denom
        half = z * np.sqrt(p * (1 - p) / safe_n + z * z / (4 * safe_n * safe_n)) / denom
    lo = np.where(n_arr > 0, np.clip(centre - half, 0.0, 1.0), 0.0)
    hi = np.where(n_arr > 0, np.clip(centre + half, 0.0, 1.0), 1.0)
    # Exact endpoints at the boundaries (rounding would otherwise leave 1e-17 above 0).
    lo = np.where(k_arr == 0, 0.0, lo)
    hi = np.where((k_arr == n_arr) & (n_arr > 0), 1.0, hi)
    if lo.ndim == 0:
        return float(lo), float(hi)
    return lo, hi


def design_effect_n(n: float, m: float, icc_value: float) -> float:
    """Effective sample size n / [1 + (m − 1)·ICC] for m correlated runs per task (§3)."""
    return float(n / (1.0 + max(m - 1.0, 0.0) * max(icc_value, 0.0)))


# --------------------------------------------------------------------------------------------
# Paired tests (§4)


def mcnemar(b: int, c: int, mid_p: bool = False) -> float:
    """Exact McNemar p-value on discordant counts b, c (§4): min(1, 2·BinomCDF(min(b,c); b+c, ½)).

    With ``mid_p`` the probability of the observed table counts half.
    """
    if b < 0 or c < 0:
        raise AnalysisError("mcnemar: discordant counts must be >= 0")
    n = int(b) + int(c)
    if n == 0:
        return 1.0
    k = min(int(b), int(c))
    p = 2.0 * float(sps.binom.cdf(k, n, 0.5))
    if mid_p:
        p -= float(sps.binom.pmf(k, n, 0.5))
    return float(min(1.0, p))


@dataclass(frozen=True)
class SignFlipResult:
    """Sign-flip permutation test of a (weighted) mean per-task difference being zero."""

    statistic: float
    p_value: float
    exact: bool
    n_flips: int
    n_nonzero: int
    alternative: str

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def sign_flip_test(
    d: ArrayLike,
    *,
    strata: Sequence[Any] | None = None,
    stratum_weights: dict[Any, float] | None = None,
    alternative: str = "two-sided",
    exact_max: int = 20,
    n_flips: int = 100_000,
    rng: np.random.Generator | None = None,
) -> SignFlipResult:
    """Sign-flip permutation test on per-task differences d (§4).

    The statistic is the mean of d, or under stratified sampling Σ_h W_h · mean_h(d) (each task
    weighted W_h / n_h); flipping signs task by task is a permutation within strata. Exact over
    all 2^n sign vectors when at most ``exact_max`` differences are non-zero (zeros never change
    the statistic), else ``n_flips`` seeded random flips with p = (1 + #extreme)/(1 + n_flips).
    """
    d_arr = np.asarray(d, dtype=float)
    if d_arr.ndim != 1 or d_arr.size == 0:
        raise AnalysisError("sign_flip_test: need a non-empty 1-D array of differences")
    if alternative not in ("two-sided", "greater", "less"):
        raise AnalysisError(f"unknown alternative {alternative!r}", hint="two-sided, greater or less")
    if strata is None:
        w = np.full(d_arr.size, 1.0 / d_arr.size)
    else:
        labels = np.asarray(list(strata), dtype=object)
        if labels.size != d_arr.size:
            raise AnalysisError("sign_flip_test: strata and d differ in length")
        uniq, inv = np.unique(labels.astype(str), return_inverse=True)
        n_h = np.bincount(inv)
        if stratum_weights is None:
            big_w = n_h / n_h.sum()
        else:
            big_w = np.array([float(stratum_weights[u]) for u in uniq])
            big_w = big_w / big_w.sum()
        w = big_w[inv] / n_h[inv]
    contrib = w * d_arr
    observed = float(contrib.sum())
    nz = contrib[contrib != 0]
    tol = 1e-12 * max(1.0, float(np.abs(nz).sum()) if nz.size else 1.0)

    def extreme(stat: FloatArray) -> NDArray[np.bool_]:
        if alternative == "two-sided":
            return np.abs(stat) >= abs(observed) - tol
        if alternative == "greater":
            return stat >= observed - tol
        return stat <= observed + tol

    if nz.size == 0:
        return SignFlipResult(observed, 1.0, True, 1, 0, alternative)
    if nz.size <= exact_max:
        total = 0
        count = 0
        # Enumerate sign vectors in chunks of 2^16 to bound memory.
        n = nz.size
        chunk_bits = min(n, 16)
        low = ((np.arange(2**chunk_bits)[:, None] >> np.arange(chunk_bits)) & 1) * -2 + 1
        low_sum = low @ nz[:chunk_bits]
        rest = nz[chunk_bits:]
        for high in itertools.product((1.0, -1.0), repeat=n - chunk_bits):
            stat = low_sum + (float(np.dot(high, rest)) if rest.size else 0.0)
            count += int(extreme(stat).sum())
            total += stat.size
        return SignFlipResult(observed, count / total, True, total, int(nz.size), alternative)
    if rng is None:
        raise AnalysisError(
            "sign_flip_test needs a seeded rng for random flips", hint="pass rng=np.random.default_rng(seed)"
        )
    count = 0
    done = 0
    batch = 10_000
    while done < n_flips:
        b = min(batch, n_flips - done)
        signs = rng.integers(0, 2, size=(b, nz.size), dtype=np.int8) * 2 - 1
        count += int(extreme(signs @ nz).sum())
        done += b
    return SignFlipResult(observed, (1 + count) / (1 + n_flips), False, n_flips, int(nz.size), alternative)


def holm(p_values: ArrayLike) -> FloatArray:
    """Holm step-down adjusted p-values (§4, per-app and per-stratum tests)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    m = p.size
    adj_sorted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adj_sorted, 1.0)
    return out


# --------------------------------------------------------------------------------------------
# Agreement (§3)


def _square(table: ArrayLike) -> FloatArray:
    t = np.asarray(table, dtype=float)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 2:
        raise AnalysisError("agreement needs a square k×k table (k >= 2)")
    if t.sum() <= 0:
        raise AnalysisError("agreement table is empty", hint="no items were rated by both raters")
    return t


def raw_agreement(table: ArrayLike) -> float:
    """Observed agreement p_o = trace / total."""
    t = _square(table)
    return float(np.trace(t) / t.sum())


def cohen_kappa(table: ArrayLike) -> float:
    """Cohen's κ = (p_o − p_e)/(1 − p_e) for a k×k table of rater A (rows) × rater B (cols) (§3).

    Returns nan when p_e = 1 (both raters constant and identical: κ is undefined).
    """
    t = _square(table)
    n = t.sum()
    p_o = np.trace(t) / n
    p_e = float((t.sum(axis=1) / n) @ (t.sum(axis=0) / n))
    if math.isclose(p_e, 1.0):
        return float("nan")
    return float((p_o - p_e) / (1 - p_e))


def pabak(table: ArrayLike) -> float:
    """Prevalence- and bias-adjusted κ: (k·p_o − 1)/(k − 1); 2·p_o − 1 for a 2×2 table."""
    t = _square(table)
    k = t.shape[0]
    return float((k * raw_agreement(t) - 1) / (k - 1))


# --------------------------------------------------------------------------------------------
# Judge correction (§3)


def rogan_gladen(q: ArrayLike, se: ArrayLike, sp: ArrayLike) -> Any:
    """Rogan–Gladen corrected prevalence p = (q + Sp − 1)/(Se + Sp − 1), clipped to [0, 1] (§3).

    Raises when Se + Sp ≤ 1 (a judge no better than chance cannot be inverted).
    """
    q_a, se_a, sp_a = (np.asarray(x, dtype=float) for x in (q, se, sp))
    youden = se_a + sp_a - 1
    if np.any(youden <= 0):
        raise AnalysisError(
            "Rogan–Gladen needs Se + Sp > 1", hint="the judge is no better than chance on the validation set"
        )
    p = np.clip((q_a + sp_a - 1) / youden, 0.0, 1.0)
    return float(p) if p.ndim == 0 else p


def rogan_gladen_variance(
    q: ArrayLike, se: ArrayLike, sp: ArrayLike, n: ArrayLike, n_pos: ArrayLike, n_neg: ArrayLike
) -> Any:
    """Var of the Rogan–Gladen estimate (§3):
    [q(1−q)/n + p²·Se(1−Se)/n₊ + (1−p)²·Sp(1−Sp)/n₋] / (Se + Sp − 1)²,
    with n judged items, n₊/n₋ positives/negatives of the validation set.
    """
    q_a, se_a, sp_a, n_a, np_a, nn_a = (np.asarray(x, dtype=float) for x in (q, se, sp, n, n_pos, n_neg))
    p = np.asarray(rogan_gladen(q_a, se_a, sp_a), dtype=float)
    v = (
        q_a * (1 - q_a) / n_a + p**2 * se_a * (1 - se_a) / np_a + (1 - p) ** 2 * sp_a * (1 - sp_a) / nn_a
    ) / (se_a + sp_a - 1) ** 2
    return float(v) if v.ndim == 0 else v


def youden_lower_bound(se: float, sp: float, n_pos: float, n_neg: float, z: float = 1.96) -> float:
    """Lower confidence bound of Se + Sp − 1 (binomial variances on n₊ positives and n₋ negatives,
    effective sizes allowed): at or below 0, the judge is not shown to beat chance."""
    var = se * (1 - se) / max(n_pos, 1.0) + sp * (1 - sp) / max(n_neg, 1.0)
    return se + sp - 1 - z * math.sqrt(var)


def double_sampling(q: ArrayLike, ppv: ArrayLike, npv: ArrayLike) -> Any:
    """Corrected prevalence when the validation sample was drawn by judge verdict (§3):
    p = PPV·q + (1 − NPV)(1 − q)."""
    q_a, ppv_a, npv_a = (np.asarray(x, dtype=float) for x in (q, ppv, npv))
    p = np.clip(ppv_a * q_a + (1 - npv_a) * (1 - q_a), 0.0, 1.0)
    return float(p) if p.ndim == 0 else p


def double_sampling_variance(
    q: float,
    ppv: float,
    npv: float,
    n: float,
    n_judged_pos: float,
    n_judged_neg: float,
    *,
    fpc_pos: float = 1.0,
    fpc_neg: float = 1.0,
) -> float:
    """Delta-method variance of the double-sampling estimate: the q term plus the binomial
    variances of PPV (from n₊ audited judge-positives) and NPV (from n₋ audited judge-negatives),
    each times its finite-population correction 1 − n_h/N_h (the labels are drawn without
    replacement from the judged episodes of that verdict, as the labelling plan's half-widths assume)."""
    return float(
        (ppv - (1 - npv)) ** 2 * q * (1 - q) / n
        + q**2 * ppv * (1 - ppv) * fpc_pos / n_judged_pos
        + (1 - q) ** 2 * npv * (1 - npv) * fpc_neg / n_judged_neg
    )


def gain_bias(p_base: float, p_trained: float, fpr: tuple[float, float], fnr: tuple[float, float]) -> float:
    """Bias a judge adds to a gain (§3): each arm's bias is FPR_M(1 − p_M) − FNR_M·p_M; the gain's
    bias is trained minus base. ``fpr``/``fnr`` are (base, trained)."""
    bias_b = fpr[0] * (1 - p_base) - fnr[0] * p_base
    bias_r = fpr[1] * (1 - p_trained) - fnr[1] * p_trained
    return float(bias_r - bias_b)


# --------------------------------------------------------------------------------------------
# Ratio intervals (§1)


def fieller(
    a: float, b: float, v_aa: float, v_bb: float, v_ab: float, q: float = 1.96
) -> tuple[float, float] | None:
    """Fieller interval for the ratio a/b (§1). Returns None when g = q²·v_bb/b² ≥ 1 — the interval
    is unbounded and the ratio is "not estimable" (report a and b separately)."""
    if b == 0:
        return None
    g = q * q * v_bb / (b * b)
    if g >= 1:
        return None
    mid = a * b - q * q * v_ab
    disc = mid * mid - (b * b - q * q * v_bb) * (a * a - q * q * v_aa)
    disc = max(disc, 0.0)  # ≥ 0 in exact arithmetic when g < 1 and the covariance matrix is PSD
    denom = b * b - q * q * v_bb
    root = math.sqrt(disc)
    return ((mid - root) / denom, (mid + root) / denom)


def fieller_set(
    a: float, b: float, v_aa: float, v_bb: float, v_ab: float, q: float = 1.96
) -> list[tuple[float, float]]:
    """The exact Fieller confidence set {θ : (a − θb)² ≤ q²·Var(a − θb)} as a list of intervals
    (±inf for unbounded ends; §1). One bounded interval when g < 1; when g ≥ 1 two half-lines
    (−∞, r₁] ∪ [r₂, ∞) or the whole line — the set a "not estimable" ratio really has."""
    qq = q * q
    big_a = b * b - qq * v_bb
    big_b = a * b - qq * v_ab
    big_c = a * a - qq * v_aa
    inf = math.inf
    scale = max(b * b, qq * v_bb, 1e-300)
    if abs(big_a) <= 1e-12 * scale:
        if big_b > 0:
            return [(big_c / (2 * big_b), inf)]
        if big_b < 0:
            return [(-inf, big_c / (2 * big_b))]
        return [(-inf, inf)] if big_c <= 0 else []
    disc = big_b * big_b - big_a * big_c
    if big_a > 0:
        root = math.sqrt(max(disc, 0.0))
        return [((big_b - root) / big_a, (big_b + root) / big_a)]
    if disc <= 0:
        return [(-inf, inf)]
    root = math.sqrt(disc)
    lo, hi = sorted(((big_b + root) / big_a, (big_b - root) / big_a))
    return [(-inf, lo), (hi, inf)]


MINUS = "\u2212"  # the one minus sign of every printed number (−∞ uses it too)


def minus_sign(text: str) -> str:
    """A formatted number with its leading hyphen-minus written as U+2212."""
    return MINUS + text[1:] if text.startswith("-") else text


def format_interval(ci: Sequence[float] | None, pct: bool = False, digits: int = 3) -> str:
    """``[lo, hi]`` with infinite ends written ∞ (open brackets there), never a dash."""
    if ci is None:
        return "—"

    def one(v: float) -> str:
        if math.isinf(v):
            return "∞" if v > 0 else MINUS + "∞"
        if math.isnan(v):
            return "undefined"
        return minus_sign(f"{100 * v:.1f}%" if pct else f"{v:.{digits}f}")

    lo, hi = float(ci[0]), float(ci[1])
    left = "(" if math.isinf(lo) else "["
    right = ")" if math.isinf(hi) else "]"
    return f"{left}{one(lo)}, {one(hi)}{right}"


def format_set(pieces: Sequence[Sequence[float]], digits: int = 3) -> str:
    """A union of intervals, e.g. ``(−∞, 0.117] ∪ [0.849, ∞)``; ∅ when empty."""
    if not pieces:
        return "∅"
    return " ∪ ".join(format_interval(p, digits=digits) for p in pieces)


def fieller_g(b: float, v_bb: float, q: float = 1.96) -> float:
    """Fieller's g = q²·v_bb/b² (the interval is bounded iff g < 1; delta method only if g < 0.1)."""
    return float("inf") if b == 0 else float(q * q * v_bb / (b * b))


def delta_ci(
    a: float, b: float, v_aa: float, v_bb: float, v_ab: float, q: float = 1.96
) -> tuple[float, float]:
    """Delta-method interval for a/b (§1): SE = √(v_aa − 2R·v_ab + R²·v_bb)/|b|. Quick look only;
    trustworthy when Fieller's g < 0.1."""
    if b == 0:
        return (float("-inf"), float("inf"))
    r = a / b
    var = max(v_aa - 2 * r * v_ab + r * r * v_bb, 0.0)
    se = math.sqrt(var) / abs(b)
    return (r - q * se, r + q * se)


# --------------------------------------------------------------------------------------------
# Task-cluster bootstrap (§1)


@dataclass(frozen=True)
class BootstrapResult:
    estimate: float
    percentile_ci: tuple[float, float]
    bca_ci: tuple[float, float] | None
    se: float
    bias_correction_z0: float
    acceleration: float
    n_resamples: int
    n_undefined: int
    min_stratum_size: int
    reliable: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def _strata_index(strata: Sequence[Any] | None, n: int) -> tuple[NDArray[np.int64], list[str]]:
    if strata is None:
        return np.zeros(n, dtype=np.int64), ["all"]
    labels = np.asarray([str(s) for s in strata])
    if labels.size != n:
        raise AnalysisError("strata and data differ in length")
    uniq, inv = np.unique(labels, return_inverse=True)
    return inv.astype(np.int64), [str(u) for u in uniq]


def resample_counts(
    strata_index: NDArray[np.int64], n_resamples: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """(B, n) multiplicities of each task in B resamples drawn with replacement within strata."""
    n = strata_index.size
    counts = np.zeros((n_resamples, n), dtype=np.float64)
    for h in np.unique(strata_index):
        members = np.flatnonzero(strata_index == h)
        counts[:, members] = rng.multinomial(
            members.size, np.full(members.size, 1.0 / members.size), size=n_resamples
        )
    return counts


def stratified_means(
    counts: FloatArray, values: FloatArray, strata_index: NDArray[np.int64], weights: FloatArray | None = None
) -> FloatArray:
    """Σ_h W_h · (weighted mean of ``values`` over stratum h) for each row of task multiplicities.

    counts (B, n); values (n,) or (n, k); weights W_h (H,), default n_h/n (plain mean). Returns (B,)
    or (B, k). Works for jackknife rows too (a stratum mean renormalises over the tasks left).
    """
    n_strata = int(strata_index.max()) + 1
    onehot = np.zeros((strata_index.size, n_strata))
    onehot[np.arange(strata_index.size), strata_index] = 1.0
    if weights is None:
        weights = onehot.sum(axis=0) / strata_index.size
    sums_w = counts @ onehot  # (B, H)
    vals = values if values.ndim == 2 else values[:, None]
    out = np.zeros((counts.shape[0], vals.shape[1]))
    for h in range(n_strata):
        mask = onehot[:, h]
        with np.errstate(invalid="ignore", divide="ignore"):
            out += weights[h] * ((counts * mask) @ vals) / sums_w[:, h : h + 1]
    return out if values.ndim == 2 else out[:, 0]


def _quantile(x: FloatArray, q: Any) -> Any:
    """Quantiles that tolerate ±inf replicates (a resampled ratio whose denominator hit 0):
    linear interpolation between two infinities is undefined, so such arrays use the empirical CDF."""
    if np.all(np.isfinite(x)):
        return np.quantile(x, q)
    return np.quantile(x, q, method="inverted_cdf")


def bca_interval(
    boot: FloatArray, estimate: float, jackknife: FloatArray, alpha: float = 0.05
) -> tuple[tuple[float, float] | None, float, float]:
    """BCa interval from bootstrap replicates and leave-one-task-out jackknife values.

    Returns (interval or None when undefined, z0, acceleration).
    """
    finite = boot[~np.isnan(boot)]
    if finite.size == 0:
        return None, float("nan"), float("nan")
    prop = (np.sum(finite < estimate) + 0.5 * np.sum(finite == estimate)) / finite.size
    if prop <= 0 or prop >= 1:
        return None, float("nan"), float("nan")
    z0 = float(sps.norm.ppf(prop))
    jk = jackknife[np.isfinite(jackknife)]
    diff = jk.mean() - jk
    denom = 6.0 * float(np.sum(diff**2)) ** 1.5
    accel = float(np.sum(diff**3) / denom) if denom > 0 else 0.0
    z = sps.norm.ppf([alpha / 2, 1 - alpha / 2])
    adj = sps.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    lo, hi = _quantile(finite, adj)
    return (float(lo), float(hi)), z0, accel


def cluster_bootstrap(
    statistic: Callable[[FloatArray], FloatArray],
    n_tasks: int,
    *,
    strata: Sequence[Any] | None = None,
    n_resamples: int = 10_000,
    alpha: float = 0.05,
    rng: np.random.Generator,
    min_stratum_for_bootstrap: int = 5,
) -> BootstrapResult:
    """Task-cluster bootstrap (§1): resample tasks with replacement within strata, percentile and
    BCa intervals (acceleration from the leave-one-task-out jackknife).

    ``statistic(counts)`` maps a (B, n_tasks) array of task multiplicities to B values — a task's
    runs stay together because the caller aggregates per task before. Use `stratified_means` to
    build statistics. Strata with fewer than ``min_stratum_for_bootstrap`` sampled tasks (≤ 4) mark
    the result unreliable: rely on Fieller there.
    """
    if n_resamples < 1:
        raise AnalysisError("cluster_bootstrap: n_resamples must be >= 1")
    idx, _ = _strata_index(strata, n_tasks)
    sizes = np.bincount(idx)
    estimate = float(statistic(np.ones((1, n_tasks)))[0])
    counts = resample_counts(idx, n_resamples, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = np.asarray(statistic(counts), dtype=float)
        jack_counts = np.ones((n_tasks, n_tasks)) - np.eye(n_tasks)
        # A stratum of one task cannot lose its only member; skip those jackknife rows.
        keep = sizes[idx] > 1
        jack = np.asarray(statistic(jack_counts[keep]), dtype=float) if keep.any() else np.array([estimate])
    n_undefined = int(np.sum(np.isnan(boot)))
    finite = boot[~np.isnan(boot)]
    pct: tuple[float, float] = (
        (float(_quantile(finite, alpha / 2)), float(_quantile(finite, 1 - alpha / 2)))
        if finite.size
        else (float("nan"), float("nan"))
    )
    bca, z0, accel = bca_interval(boot, estimate, jack, alpha)
    with np.errstate(invalid="ignore"):
        se = float(np.std(finite[np.isfinite(finite)], ddof=1)) if finite.size > 1 else float("nan")
    min_size = int(sizes.min())
    reliable = min_size >= min_stratum_for_bootstrap
    note = "" if reliable else f"a stratum has only {min_size} sampled task(s): rely on Fieller"
    return BootstrapResult(
        estimate, pct, bca, se, z0, accel, n_resamples, n_undefined, min_size, reliable, note
    )


# --------------------------------------------------------------------------------------------
# Allocation and power (§2)


@dataclass(frozen=True)
class Allocation:
    method: str
    strata: list[str]
    population: list[int]
    n: list[int]
    taken_whole: list[bool]

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.strata, self.n, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def _allocate(
    names: list[str],
    n_pop: NDArray[np.int64],
    score: FloatArray,
    n_total: int,
    min_per_stratum: int,
    method: str,
    floors: dict[str, int] | None = None,
) -> Allocation:
    """Largest-remainder allocation ∝ score, with floors of min(min_per_stratum, N_h) (or a larger
    per-stratum floor from ``floors``) and caps N_h.

    Strata whose floor or cap binds are fixed and the rest re-allocated, until nothing changes.
    """
    h = n_pop.size
    if n_total > int(n_pop.sum()):
        n_total = int(n_pop.sum())
    extra = np.array([int((floors or {}).get(k, 0)) for k in names], dtype=np.int64)
    floor = np.minimum(np.maximum(min_per_stratum, extra), n_pop)
    if n_total < int(floor.sum()):
        raise AnalysisError(
            f"{method} allocation: {n_total} tasks cannot give every stratum its minimum ({int(floor.sum())} in all)",
            hint="raise the budget or drop strata",
        )
    fixed = np.zeros(h, dtype=bool)
    alloc = np.zeros(h, dtype=np.int64)
    # Tiny strata (no more tasks than the floor) are taken whole.
    tiny = n_pop <= floor
    alloc[tiny] = n_pop[tiny]
    fixed |= tiny
    while True:
        free = ~fixed
        remaining = n_total - int(alloc[fixed].sum())
        if not free.any():
            break
        s = np.where(free, np.maximum(score, 0.0), 0.0)
        ideal = remaining * s / s.sum() if s.sum() > 0 else remaining * free / free.sum()
        changed = False
        low = free & (ideal < floor)
        if low.any():
            alloc[low] = floor[low]
            fixed |= low
            changed = True
        high = free & ~low & (ideal > n_pop)
        if high.any():
            alloc[high] = n_pop[high]
            fixed |= high
            changed = True
        if not changed:
            base = np.floor(ideal).astype(np.int64)
            short = remaining - int(base[free].sum())
            frac = np.where(free, ideal - base, -1.0)
            for i in np.argsort(-frac, kind="stable")[:short]:
                base[i] += 1
            alloc[free] = base[free]
            break
    return Allocation(
        method, names, [int(x) for x in n_pop], [int(x) for x in alloc], [bool(x) for x in alloc >= n_pop]
    )


def proportional_allocation(
    n_pop: dict[str, int], n: int, min_per_stratum: int = 2, floors: dict[str, int] | None = None
) -> Allocation:
    """n_h ∝ N_h (§2), at least ``min_per_stratum`` per stratum (``floors`` raises it for named
    strata, e.g. stable-failure controls), tiny strata taken whole."""
    names = list(n_pop)
    pop = np.array([int(n_pop[k]) for k in names], dtype=np.int64)
    return _allocate(names, pop, pop.astype(float), n, min_per_stratum, "proportional", floors)


def neyman_allocation(
    N_h: dict[str, int],
    S_h: dict[str, float],
    n: int,
    cost_h: dict[str, float] | None = None,
    min_per_stratum: int = 2,
    floors: dict[str, int] | None = None,
) -> Allocation:
    """Neyman allocation n_h ∝ N_h·S_h/√c_h (§2), at least ``min_per_stratum`` per stratum (tiny
    strata taken whole). Strata with S_h = 0 get the floor."""
    names = list(N_h)
    pop = np.array([int(N_h[k]) for k in names], dtype=np.int64)
    s = np.array([float(S_h.get(k, 0.0)) for k in names])
    c = np.array([float((cost_h or {}).get(k, 1.0)) for k in names])
    if np.any(c <= 0):
        raise AnalysisError("neyman_allocation: costs must be positive")
    return _allocate(names, pop, pop * s / np.sqrt(c), n, min_per_stratum, "neyman", floors)


@dataclass(frozen=True)
class SampleSize:
    """Tasks needed for an exact McNemar test of device gain > 0 (§2.6)."""

    n_connor: int
    n_exact: int | None
    power_at_n_exact: float | None
    p10: float
    p01: float
    alpha: float
    power: float

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def _mcnemar_power_table(n_max: int, p10: float, p01: float, alpha: float) -> FloatArray:
    """Power of the two-sided exact McNemar test for n = 0..n_max tasks (vectorised)."""
    psi = p10 + p01
    pi = p10 / psi
    d = np.arange(n_max + 1)
    # Largest k with 2·BinomCDF(k; D, ½) ≤ α (−1 when none) for each discordant count D.
    k_lo = np.full(n_max + 1, -1)
    for dd in range(1, n_max + 1):
        cdf = 2 * sps.binom.cdf(np.arange(dd // 2 + 1), dd, 0.5)
        ok = np.flatnonzero(cdf <= alpha)
        k_lo[dd] = ok[-1] if ok.size else -1
    reject = np.where(
        k_lo >= 0, sps.binom.cdf(k_lo, d, pi) + sps.binom.sf(d - k_lo - 1, d, pi), 0.0
    )  # P(reject | D)
    power = np.zeros(n_max + 1)
    for n in range(1, n_max + 1):
        power[n] = float(sps.binom.pmf(d[: n + 1], n, psi) @ reject[: n + 1])
    return power


def mcnemar_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Power of the exact two-sided McNemar test with n tasks, discordance probabilities p10, p01."""
    if p10 + p01 <= 0:
        return 0.0
    return float(_mcnemar_power_table(int(n), p10, p01, alpha)[int(n)])


def mcnemar_sample_size(
    p10: float, p01: float, alpha: float = 0.05, power: float = 0.8, exact: bool = True, n_max: int = 5000
) -> SampleSize:
    """Sample size for the paired test of a gain (§2.6): Connor's formula
    n = [z_{α/2}√ψ + z_β√(ψ − δ²)]²/δ² with ψ = p10 + p01, δ = p10 − p01, then (``exact``) the
    smallest n whose exact-McNemar power, by enumeration, reaches ``power``."""
    psi, delta = p10 + p01, p10 - p01
    if not (0 <= p10 <= 1 and 0 <= p01 <= 1 and psi <= 1):
        raise AnalysisError("mcnemar_sample_size: p10, p01 must be probabilities with p10 + p01 <= 1")
    if delta == 0:
        raise AnalysisError("mcnemar_sample_size: no effect (p10 == p01)", hint="a gain needs p10 != p01")
    za = sps.norm.ppf(1 - alpha / 2)
    zb = sps.norm.ppf(power)
    n_c = int(
        math.ceil((za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / delta**2)
    )
    if not exact:
        return SampleSize(n_c, None, None, p10, p01, alpha, power)
    upper = min(n_max, max(3 * n_c, n_c + 50))
    table = _mcnemar_power_table(upper, p10, p01, alpha)
    hits = np.flatnonzero(table >= power)
    if hits.size == 0:
        return SampleSize(n_c, None, None, p10, p01, alpha, power)
    return SampleSize(n_c, int(hits[0]), float(table[hits[0]]), p10, p01, alpha, power)


def repeated_runs_sample_size(
    delta: float, sigma2_tau: float, sigma2_w: float, m: int, alpha: float = 0.05, power: float = 0.8
) -> int:
    """Tasks needed with m runs per task (§2.6): n = (z_{α/2} + z_β)²(σ²_τ + σ²_w/m)/δ²."""
    if delta == 0:
        raise AnalysisError("repeated_runs_sample_size: delta must be non-zero")
    za = sps.norm.ppf(1 - alpha / 2)
    zb = sps.norm.ppf(power)
    return int(math.ceil((za + zb) ** 2 * (sigma2_tau + sigma2_w / m) / delta**2))


def optimal_repeats(cost_task: float, cost_run: float, sigma2_tau: float, sigma2_w: float) -> float:
    """Best repeats per task m* = √((c_task/c_run)·σ²_w/σ²_τ) (§2.6); inf when σ²_τ = 0."""
    if sigma2_tau <= 0:
        return float("inf")
    return float(math.sqrt((cost_task / cost_run) * sigma2_w / sigma2_tau))


# --------------------------------------------------------------------------------------------
# Aggregation (§4)


def pass_at_k(n: ArrayLike, c: ArrayLike, k: int) -> Any:
    """pass@k = 1 − C(n−c, k)/C(n, k): probability that at least one of k of the n runs succeeds."""
    n_a, c_a = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    if np.any(k > n_a):
        raise AnalysisError("pass_at_k: k must not exceed the number of runs")
    out = 1.0 - special.comb(n_a - c_a, k) / special.comb(n_a, k)
    return float(out) if out.ndim == 0 else out


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: int) -> Any:
    """pass^k = C(c, k)/C(n, k): probability that all of k of the n runs succeed."""
    n_a, c_a = np.asarray(n, dtype=float), np.asarray(c, dtype=float)
    if np.any(k > n_a):
        raise AnalysisError("pass_hat_k: k must not exceed the number of runs")
    out = special.comb(c_a, k) / special.comb(n_a, k)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class IccResult:
    """Variance components of per-task success rates (§4)."""

    mean: float
    sigma2_tau: float
    sigma2_w: float
    icc: float
    var_mean: float
    n_tasks: int
    runs_per_task: float
    n_eff: float = field(default=float("nan"))

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def icc(rates: ArrayLike, m: ArrayLike) -> IccResult:
    """σ̂²_w = mean p̂_i(1−p̂_i)·m/(m−1), σ̂²_τ = var(p̂_i) − σ̂²_w/m (clipped at 0),
    ICC = σ²_τ/(σ²_τ + σ²_w), Var(mean) = (σ²_τ + σ²_w/m)/n (§4). ``m`` is runs per task (scalar or
    per task; the mean is used where the formula needs one m)."""
    p = np.asarray(rates, dtype=float)
    m_a = np.broadcast_to(np.asarray(m, dtype=float), p.shape)
    if p.size < 2:
        raise AnalysisError("icc needs at least 2 tasks")
    if np.any(m_a < 2):
        raise AnalysisError("icc needs at least 2 runs per task", hint="within-task variance needs repeats")
    s2w = float(np.mean(p * (1 - p) * m_a / (m_a - 1)))
    m_bar = float(m_a.mean())
    s2t = max(float(np.var(p, ddof=1)) - s2w / m_bar, 0.0)
    total = s2t + s2w
    icc_value = s2t / total if total > 0 else 0.0
    n = p.size
    var_mean = (s2t + s2w / m_bar) / n
    n_eff = design_effect_n(n * m_bar, m_bar, icc_value)
    return IccResult(float(p.mean()), s2t, s2w, icc_value, var_mean, n, m_bar, n_eff)
