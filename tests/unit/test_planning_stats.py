"""The verdict rule's error rates and the planner's power (vicurl.planning.stats), by simulation."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from vicurl.planning import stats

ALPHA = 0.05


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("ratio", [1.0, 2.0, 3.0])
def test_false_holds_at_a_null_effect_is_at_most_alpha(n, ratio):
    """A superiority claim whose true difference is zero: "holds" in at most alpha of 200,000 draws (three
    Monte-Carlo standard errors of slack), spreads of the two arms up to 1:3 (Welch's test is exact only in the
    limit). The rule's verdict is scipy's vectorized test on the first 200 draws, which gives the rate."""
    rng = np.random.default_rng(n * 10 + int(ratio))
    draws = 200000
    a, b = rng.normal(0.3, 0.02, (draws, n)), rng.normal(0.3, 0.02 * ratio, (draws, n))
    p = sps.ttest_ind(a, b, axis=1, equal_var=False, alternative="greater").pvalue
    for i in range(200):
        got = stats.verdicts([stats.test("superiority", a[i], b[i], side=">")], ALPHA)
        assert (got == ["holds"]) == (p[i] < ALPHA)
    se = math.sqrt(ALPHA * (1 - ALPHA) / draws)
    assert (p < ALPHA).mean() <= ALPHA + 3 * se


def test_false_refutation_of_a_true_gap_is_at_most_alpha():
    """"Smaller than the paper's gap" when the true difference is the paper's."""
    rng = np.random.default_rng(7)
    draws, n = 40000, 3
    a, b = rng.normal(0.40, 0.03, (draws, n)), rng.normal(0.30, 0.05, (draws, n))
    p = sps.ttest_ind(a - 0.10, b, axis=1, equal_var=False, alternative="less").pvalue
    for i in range(200):
        got = stats.verdict(stats.test("superiority", a[i], b[i], side=">", gap=0.10), 1.0, ALPHA)
        assert (got == stats.VERDICTS[1]) == (p[i] < ALPHA)
    assert (p < ALPHA).mean() <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / draws)


def _welch_rejections(delta, sa, sb, n, alpha, draws, rng):
    a = rng.normal(delta, sa, (draws, n))
    b = rng.normal(0.0, sb, (draws, n)) if sb is not None else None
    if b is None:
        p = sps.ttest_1samp(a, 0.0, axis=1, alternative="greater").pvalue
    else:
        p = sps.ttest_ind(a, b, axis=1, equal_var=False, alternative="greater").pvalue
    return float((p < alpha).mean())


@pytest.mark.parametrize("delta,sa,sb,n,alpha", [
    (0.05, 0.02, 0.02, 2, 0.05), (0.03, 0.02, 0.04, 3, 0.05), (0.02, 0.02, 0.02, 5, 0.01),
    (0.01, 0.01, 0.03, 8, 0.05), (0.04, 0.03, 0.01, 4, 0.005), (0.02, 0.03, None, 4, 0.05),
])
def test_power_agrees_with_simulation_within_two_points(delta, sa, sb, n, alpha):
    rng = np.random.default_rng(int(delta * 1000) + n)
    simulated = _welch_rejections(delta, sa, sb, n, alpha, 40000, rng)
    assert stats.power(delta, sa, sb, n, alpha) == pytest.approx(simulated, abs=0.02)


def test_t_quantiles_are_read_within_1e_5_relative():
    grid, crit = stats._t_quantiles(0.05)
    for df in np.exp(np.linspace(0, math.log(1e5), 997)):
        assert np.interp(math.log(df), grid, crit) == pytest.approx(sps.t.ppf(0.95, df), rel=1e-5)


def test_seeds_needed_is_the_first_to_reach_the_power():
    n = stats.seeds_needed("superiority", 0.02, 0.015, 0.015, ALPHA, 0.8)
    assert stats.claim_power("superiority", 0.02, 0.02, 0.015, 0.015, n, ALPHA) >= 0.8
    assert stats.claim_power("superiority", 0.02, 0.02, 0.015, 0.015, n - 1, ALPHA) < 0.8
    assert stats.seeds_needed("superiority", 0.001, 0.05, 0.05, ALPHA, 0.8, highest=20) is None
    d = stats.smallest_detectable(0.015, 0.015, n, ALPHA, 0.8)
    assert d <= 0.02 and stats.power(d, 0.015, 0.015, n, ALPHA) == pytest.approx(0.8, abs=1e-3)


def test_holm_is_statsmodels():
    from statsmodels.stats.multitest import multipletests

    p = [0.001, 0.02, 0.013, 0.04, 0.3]
    assert stats.holm(p, ALPHA) == list(multipletests(p, ALPHA, method="holm")[0])
    assert stats.holm([0.04], ALPHA) == [True] and stats.holm([], ALPHA) == []


def test_collapse_seeds_is_an_exact_binomial_bound():
    k, n, low = stats.collapse_seeds([0.1, 0.2, 0.5, 0.15], 0.3)
    assert (k, n) == (3, 4)
    assert low == pytest.approx(sps.binomtest(3, 4).proportion_ci(0.9, method="exact").low)
