"""The verdict rule of a claim and its power: scipy's and statsmodels' tests, stated here once.

A claim compares the per-seed values of a statistic (a Pass@1 averaged over a table's benchmarks at the
last step, an upgration, a variance ratio's log) between two arms, or between an arm and a constant
(``b`` None, ``threshold``); ``side`` is where it puts a - b, ``gap`` the paper's a - b:

``superiority``      one-sided Welch test of a - b in the claimed direction (``scipy.stats.ttest_ind``,
                     ``equal_var=False``); a collapse is a superiority claim below Base, also reported as
                     k of n seeds below Base with an exact binomial bound (``collapse_seeds``)
``non_inferiority``  one-sided Welch test that a - b > -margin
``equivalence``      two one-sided Welch tests that -margin < a - b < margin (``statsmodels``' ``ttost_ind``)

Verdicts (``verdict``), with ``alpha`` the claim's level after the Holm correction across the plan's
confirmatory claims (``holm``, statsmodels' ``multipletests``):

``opposite``                    the other direction is significant (for non-inferiority: a - b < -margin)
``smaller than the paper's gap`` a - b < gap is significant: the paper's number is refuted
``holds``                       the claimed direction (or non-inferiority, or equivalence) is significant
``inconclusive``                none of these (or fewer than two seeds in an arm)

``RULE`` says it in one sentence for the findings and the plans.

Power (``power``): of the one-sided test at level alpha for a true difference ``delta``: Welch's, as the
mean over the arms' sample variances of the chance the normal mean difference clears its critical value
there; a one-sample test's by the noncentral t (``scipy.stats.nct``). tests/unit/test_planning_stats.py
checks it, and the rule's false "holds" rate, by simulation.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

TYPES = ("superiority", "non_inferiority", "equivalence")
VERDICTS = ("holds", "smaller than the paper's gap", "opposite", "inconclusive")
RULE = ("a one-sided Welch test of the claim's two arms (seeds as samples; a one-sample t test against a constant) "
        "in the claimed direction, Holm-corrected across the table's claims at family-wise alpha; non-inferiority "
        "a one-sided Welch test against the margin, equivalence two one-sided tests; holds: the claim's test "
        "rejects after Holm; opposite: the other direction (non-inferiority: beyond the margin; equivalence: "
        "outside it) is significant at alpha; smaller than the paper's gap: the paper's difference is rejected at "
        "alpha; inconclusive: none of these, or fewer than two seeds in an arm; a collapse also as k of n seeds "
        "below Base with an exact binomial bound")


def finite(x: Sequence[float] | None) -> np.ndarray:
    """The finite values of ``x`` (a seed without a result is NaN); none for None."""
    v = np.asarray(x if x is not None else (), dtype=float)
    return v[np.isfinite(v)]


def one_sided(a: Sequence[float], b: Sequence[float] | None, shift: float = 0.0, side: str = ">",
              threshold: float = 0.0) -> float:
    """p of the one-sided Welch test that mean(a) - mean(b) - shift lies on ``side`` of 0 (b None: that
    mean(a) - threshold - shift does, a one-sample t test); 1.0 where an arm has fewer than two values."""
    a = finite(a)
    alternative = "greater" if side == ">" else "less"
    if len(a) < 2 or (b is not None and len(finite(b)) < 2):
        return 1.0
    with warnings.catch_warnings():  # an arm of equal values (a collapsed run's): scipy warns, the test stands
        warnings.simplefilter("ignore", RuntimeWarning)
        if b is None:
            p = stats.ttest_1samp(a - threshold - shift, 0.0, alternative=alternative).pvalue
        else:
            p = stats.ttest_ind(a - shift, finite(b), equal_var=False, alternative=alternative).pvalue
    return 1.0 if not np.isfinite(p) else float(p)  # no spread at all: no evidence either way


def holm(pvalues: Sequence[float], alpha: float) -> list[bool]:
    """Which of ``pvalues`` Holm's step-down procedure rejects at family-wise level ``alpha``."""
    from statsmodels.stats.multitest import multipletests

    if len(pvalues) <= 1:  # one test: Holm's level is alpha (multipletests would pay a gc.collect per call)
        return [bool(p < alpha) for p in pvalues]
    return [bool(r) for r in multipletests(list(pvalues), alpha=alpha, method="holm")[0]]


@dataclass(frozen=True)
class Test:
    """A claim's test on the per-seed values: the p-values its verdict reads."""

    p_claim: float  # the claimed direction, non-inferiority, or equivalence (TOST's larger p)
    p_opposite: float
    p_smaller: float  # that the difference is below the paper's gap (superiority only; 1.0 otherwise)


def test(kind: str, a: Sequence[float], b: Sequence[float] | None = None, *, side: str = ">",
         gap: float = math.nan, margin: float = 0.0, threshold: float = 0.0) -> Test:
    """The claim's p-values (see the module docstring): ``side`` where the claim puts a - b (or a - threshold),
    ``gap`` the paper's difference (NaN: no refutation test), ``margin`` non-inferiority's or equivalence's."""
    if kind not in TYPES:
        raise ValueError(f"claim type {kind!r}: one of {TYPES}")
    if side not in (">", "<"):
        raise ValueError(f"side must be '>' or '<', got {side!r}")
    other = "<" if side == ">" else ">"
    if kind == "superiority":
        claimed = math.isfinite(gap) and (gap > 0 if side == ">" else gap < 0)
        return Test(one_sided(a, b, 0.0, side, threshold), one_sided(a, b, 0.0, other, threshold),
                    one_sided(a, b, gap, other, threshold) if claimed else 1.0)
    if kind == "non_inferiority":  # a - b beyond -margin on the claimed side (a "matches or outperforms")
        bound = -margin if side == ">" else margin
        return Test(one_sided(a, b, bound, side, threshold), one_sided(a, b, bound, other, threshold), 1.0)
    outside = min(one_sided(a, b, margin, ">", threshold), one_sided(a, b, -margin, "<", threshold))
    av, bv = finite(a), None if b is None else finite(b)
    if bv is not None and len(av) >= 2 and len(bv) >= 2:
        from statsmodels.stats.weightstats import ttost_ind

        p = float(ttost_ind(av, bv, -margin, margin, usevar="unequal")[0])
        return Test(p if np.isfinite(p) else 1.0, outside, 1.0)
    lo, hi = one_sided(a, b, -margin, ">", threshold), one_sided(a, b, margin, "<", threshold)  # TOST, one sample
    return Test(max(lo, hi), outside, 1.0)


def verdict(t: Test, alpha_claim: float, alpha: float) -> str:
    """The verdict from a claim's p-values: ``alpha_claim`` the level its claim test got after Holm (0 where
    Holm rejected nothing up to it), ``alpha`` the plan's level for the refutations."""
    if t.p_opposite < alpha:
        return VERDICTS[2]
    if t.p_smaller < alpha:
        return VERDICTS[1]
    if t.p_claim < alpha_claim:
        return VERDICTS[0]
    return VERDICTS[3]


def verdicts(tests: Sequence[Test], alpha: float) -> list[str]:
    """Every confirmatory claim's verdict, the claim tests Holm-corrected together."""
    rejected = holm([t.p_claim for t in tests], alpha)
    return [verdict(t, 1.0 if r else 0.0, alpha) for t, r in zip(tests, rejected)]


def collapse_seeds(a: Sequence[float], base_mean: float, confidence: float = 0.95) -> tuple[int, int, float]:
    """(k, n, lower): k of the arm's n seeds end below the Base mean, and the exact (Clopper-Pearson) lower
    bound at ``confidence`` on the chance that a seed does (``scipy.stats.binomtest``)."""
    a = finite(a)
    k, n = int((a < base_mean).sum()), len(a)
    if n == 0:
        return 0, 0, 0.0
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=2 * confidence - 1, method="exact")
    return k, n, float(ci.low)


# ---------------------------------------------------------------- power


GRID = 96  # quantiles a sample variance's distribution is read at (``power``)


@functools.lru_cache(maxsize=4096)
def _welch_thresholds(n: int, ratio: float) -> np.ndarray:
    """Over the joint distribution of the two arms' sample variances (each arm's ``GRID`` chi-square quantiles,
    spreads ``1`` and ``ratio``), Welch's critical value times its estimated standard error, over the true
    standard error; with the 95 % quantile of t at the Welch-Satterthwaite degrees of freedom of those
    variances (alpha enters through ``_crit``)."""
    q = stats.chi2.ppf((np.arange(GRID) + 0.5) / GRID, n - 1) / (n - 1)  # s^2 / sigma^2 of one arm
    ua, ub = np.meshgrid(q, q * ratio * ratio, indexing="ij")
    va, vb = ua / n, ub / n
    df = (va + vb) ** 2 / (va * va / (n - 1) + vb * vb / (n - 1))
    return np.stack([df.ravel(), np.sqrt((va + vb) / ((1 + ratio * ratio) / n)).ravel()])


def power(delta: float, sa: float, sb: float | None, n: int, alpha: float) -> float:
    """The power of a one-sided Welch test at level ``alpha`` with ``n`` seeds an arm, spreads ``sa`` and ``sb``
    (``sb`` None: a one-sample t test against a constant, exact by the noncentral t), when the true difference
    beyond the test's null is ``delta`` (> 0 on the tested side). Two arms: the mean difference is independent
    of the sample variances, so the power is the mean over their distribution (``_welch_thresholds``) of the
    normal chance that the difference clears Welch's critical value at those variances."""
    if n < 2:
        return 0.0
    if sb is None:
        if sa == 0:
            return 1.0 if delta > 0 else 0.0
        df = n - 1
        return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, delta / (sa / math.sqrt(n))))
    if sa == 0 and sb == 0:
        return 1.0 if delta > 0 else 0.0
    big, small = max(sa, sb), min(sa, sb)
    se = math.sqrt((big * big + small * small) / n)
    return float(stats.norm.sf(_cleared(n, round(small / big, 3), float(alpha)) - delta / se).mean())


@functools.lru_cache(maxsize=65536)
def _cleared(n: int, ratio: float, alpha: float) -> np.ndarray:
    """Welch's critical value at each grid point of the sample variances, times its estimated standard error
    over the true one: what the normal mean difference (in true standard errors) must clear there."""
    df, scale = _welch_thresholds(n, ratio)
    grid, crit = _t_quantiles(alpha)
    return np.interp(np.log(df), grid, crit) * scale


@functools.lru_cache(maxsize=1024)
def _t_quantiles(alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """t's 1 - alpha quantile on a fine grid of log degrees of freedom (1 to 10^5): read by interpolation, within
    1e-5 (relative) of scipy's at every Welch degree of freedom a plan meets (tests/unit/test_planning_stats.py)."""
    grid = np.linspace(0.0, math.log(1e5), 4000)
    return grid, stats.t.ppf(1 - alpha, np.exp(grid))


def claim_power(kind: str, gap: float, true: float, sa: float, sb: float | None, n: int, alpha: float,
                margin: float = 0.0) -> float:
    """The power of the claim's test (``kind``) when the true difference is ``true``: to confirm with ``true``
    the paper's gap, to refute (``smaller than the paper's gap``) with ``true`` zero for a superiority claim."""
    if kind == "superiority":
        return power(abs(true), sa, sb, n, alpha) if true * (1 if gap >= 0 else -1) > 0 else 0.0
    if kind == "non_inferiority":
        return power(true + margin, sa, sb, n, alpha)
    # equivalence: both one-sided tests at alpha; their joint power, bounded below by the sum rule
    lo, hi = power(true + margin, sa, sb, n, alpha), power(margin - true, sa, sb, n, alpha)
    return max(0.0, lo + hi - 1.0)


def refute_power(kind: str, gap: float, sa: float, sb: float | None, n: int, alpha: float,
                 margin: float = 0.0) -> float:
    """The power to refute the paper's number when the true difference is zero: ``smaller than the paper's
    gap`` for superiority; for non-inferiority and equivalence, the opposite verdict when the truth lies a
    margin beyond it (zero difference is within their margins)."""
    if kind == "superiority":
        return power(abs(gap), sa, sb, n, alpha)
    return power(margin, sa, sb, n, alpha) if margin else 0.0


def seeds_needed(kind: str, gap: float, sa: float, sb: float | None, alpha: float, target: float,
                 margin: float = 0.0, lowest: int = 2, highest: int = 50) -> int | None:
    """The fewest seeds an arm (at least ``lowest``) with power >= ``target`` to confirm the paper's gap; None
    when ``highest`` seeds do not reach it."""
    for n in range(max(2, lowest), highest + 1):
        if claim_power(kind, gap, gap, sa, sb, n, alpha, margin) >= target:
            return n
    return None


def smallest_detectable(sa: float, sb: float | None, n: int, alpha: float, target: float) -> float:
    """The smallest true difference the one-sided test detects with power ``target`` at ``n`` seeds an arm."""
    if n < 2:
        return math.inf
    hi = 1.0
    while power(hi, sa, sb, n, alpha) < target and hi < 1e6:
        hi *= 2
    lo = 0.0
    while hi - lo > 1e-5 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid, sa, sb, n, alpha) < target else (lo, mid)
    return hi
