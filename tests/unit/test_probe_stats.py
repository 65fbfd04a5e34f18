"""The probes' statistics (vicurl.report.probe_stats) on hand-built probes: the decomposition of the
action-variance ratio, V_prob without its action noise, the zero-gradient shares, the per-seed
statistics, the bootstrap over prompts, Spearman's rank correlation and Student's t tail."""

import math

import numpy as np
import pytest
import torch

from vicurl.probes import variance
from vicurl.report import probe_stats as PS


def record(grads, kept, informative, *, beta=0.5, step=0, seed=0, ids=None, k=None):
    """A probe record as ``run_probe`` writes it, from per-rollout gradients (P, K, d)."""
    grads = torch.as_tensor(grads, dtype=torch.float64)
    p, k = grads.shape[0], grads.shape[1]
    kept, informative = torch.tensor(kept).bool(), torch.tensor(informative).bool()
    within, gram = variance.moments(grads)
    return {"study": "s", "model": "tiny", "reward": "oracle", "curriculum": "vicurl", "seed": seed, "step": step,
            "beta_t": beta, "n_prompts": p, "n_kept": int(kept.sum()), "n_informative": int(informative.sum()),
            "n_kept_informative": int((kept & informative).sum()), "rollouts": k,
            **variance.estimates(within, gram, variance.subset_masks(kept, informative)),
            "per_prompt": {"id": ids or [f"p{i}" for i in range(p)], "kept": kept.tolist(),
                           "informative": informative.tolist(), "confidence": list(range(p)),
                           "reward": [0.5] * p, "within": within.tolist(), "gram": gram.tolist()}}


def batch(zero_scale=0.0, seed=0):
    """8 prompts x 4 rollouts x 6 dims; prompts 2, 3, 6, 7 are zero-gradient groups (equal rewards),
    whose gradients are ``zero_scale`` times noise (0: no KL term)."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(8, 4, 6, generator=gen, dtype=torch.float64) * torch.arange(1, 9).view(8, 1, 1)
    informative = [1, 1, 0, 0, 1, 1, 0, 0]
    g[torch.tensor(informative) == 0] *= zero_scale
    kept = [1, 1, 1, 1, 1, 0, 0, 0]
    return g, kept, informative


def test_decomposition_reproduces_the_ratio_without_and_with_a_kl_part():
    g, kept, inf = batch()
    d = PS.decompose(record(g, kept, inf))
    within = variance.moments(g)[0]
    kept_inf, full_inf = [0, 1, 4], [0, 1, 4, 5]
    assert d["ratio"] == pytest.approx(float(within[:5].mean() / within.mean()))
    assert d["informative_kept"] == pytest.approx(3 / 5) and d["informative_full"] == pytest.approx(4 / 8)
    assert d["share_ratio"] == pytest.approx((3 / 5) / (4 / 8))
    assert d["ratio_inf"] == pytest.approx(float(within[kept_inf].mean() / within[full_inf].mean()))
    assert d["zero_factor"] == pytest.approx(1.0)  # zero groups without gradient: the product alone
    assert d["product"] == pytest.approx(d["ratio"], rel=1e-12)
    # zero groups with a (KL) gradient of their own: the factor carries it and the identity still holds
    g2, _, _ = batch(zero_scale=0.3)
    d2 = PS.decompose(record(g2, kept, inf))
    assert d2["zero_factor"] != pytest.approx(1.0) and d2["product"] == pytest.approx(d2["ratio"], rel=1e-12)


def test_probe_quantities_by_hand():
    g, kept, inf = batch(zero_scale=0.1)
    rec = record(g, kept, inf)
    q = PS.probe_quantities(rec)
    e = variance.from_gradients(g, torch.tensor(kept), torch.tensor(inf))
    assert q["ratio_sigma2"] == pytest.approx(e["sigma2_kept"] / e["sigma2_full"])
    assert q["ratio_inf_vprob"] == pytest.approx(e["vprob_kept_inf"] / e["vprob_full_inf"])
    k = 4  # V_prob minus its action noise sigma^2 / K
    assert q["vprob_adj_kept"] == pytest.approx(e["vprob_kept"] - e["sigma2_kept"] / k)
    assert q["vprob_adj_full"] == pytest.approx(e["vprob_full"] - e["sigma2_full"] / k)
    assert q["noise_share_full"] == pytest.approx(e["sigma2_full"] / k / e["vprob_full"])
    assert q["zero_share_kept"] == pytest.approx(2 / 5) and q["zero_share_full"] == pytest.approx(4 / 8)
    assert q["zero_share_diff"] == pytest.approx(2 / 5 - 4 / 8)
    # weights of ones: the same numbers from the per-prompt quantities as from the record's
    again = PS.probe_quantities(rec, np.ones(8))
    assert all(again[key] == pytest.approx(v, rel=1e-10) for key, v in q.items())


def scalar_record(beta, ratio_sigma, ratio_v=1.0, seed=0, step=0):
    """A record with only the scalar estimates (ratio kept/full as given, every prompt informative)."""
    return {"seed": seed, "step": step, "beta_t": beta, "rollouts": 4, "n_prompts": 8, "n_kept": 4,
            "n_informative": 8, "n_kept_informative": 4,
            **{f"sigma2_{s}": ratio_sigma if s.startswith("kept") else 1.0 for s in variance.SUBSETS},
            **{f"vprob_{s}": ratio_v if s.startswith("kept") else 1.0 for s in variance.SUBSETS}}


def test_seed_statistics_early_mean_and_approach_to_one():
    recs = [scalar_record(0.2, 2.0), scalar_record(0.24, 1.8), scalar_record(0.5, 1.5), scalar_record(0.8, 1.2),
            scalar_record(1.0, 1.0)]  # beta = 1 keeps every prompt: left out
    s = PS.seed_statistics([PS.probe_quantities(r) for r in recs])
    assert s["mean_sigma2"] == pytest.approx(np.mean([2.0, 1.8, 1.5, 1.2]))
    assert s["early_sigma2"] == pytest.approx(np.mean([2.0, 1.8]))
    want = np.polyfit([0.2, 0.24, 0.5, 0.8], np.abs(np.log([2.0, 1.8, 1.5, 1.2])), 1)[0]
    assert s["to_one_sigma2"] == pytest.approx(want) and want < 0  # falls toward 1 from above: "approaches 1"
    below = [scalar_record(b, r) for b, r in ((0.2, 0.5), (0.5, 0.7), (0.8, 0.9))]
    assert PS.seed_statistics([PS.probe_quantities(r) for r in below])["to_one_sigma2"] < 0  # from below too
    away = [scalar_record(b, r) for b, r in ((0.2, 0.9), (0.5, 0.7), (0.8, 0.5))]
    assert PS.seed_statistics([PS.probe_quantities(r) for r in away])["to_one_sigma2"] > 0
    assert s["inf_sigma2"] == pytest.approx(s["mean_sigma2"])  # every prompt informative
    # V_prob without action noise: a ratio of means over the probes (each probe's difference is noisy)
    adj = [(1.0 - r * 1.0 / 4, 1.0 - 1.0 / 4) for r in (2.0, 1.8, 1.5, 1.2)]  # (kept, full): vprob 1 or ratio_v 1
    qs = [PS.probe_quantities(r) for r in recs[:4]]
    assert [v for q in qs for v in (q["vprob_adj_kept"], q["vprob_adj_full"])] == pytest.approx(np.ravel(adj))
    assert s["vprob_adj"] == pytest.approx(np.mean([a for a, _ in adj]) / np.mean([b for _, b in adj]))
    assert math.isnan(PS.slope([0.2, 0.2], [1, 2]))


def test_bootstrap_se_is_zero_for_identical_prompts_and_reproducible():
    gen = torch.Generator().manual_seed(5)
    one = torch.randn(1, 4, 6, generator=gen, dtype=torch.float64)
    same = [record(one.repeat(8, 1, 1), [1, 1, 1, 1, 0, 0, 0, 0], [1] * 8, seed=s, beta=0.3) for s in (0, 1)]
    assert PS.bootstrap_se(same, n=20)["mean_sigma2"] == pytest.approx(0.0, abs=1e-12)
    g, kept, inf = batch(zero_scale=0.1)
    recs = [record(g, kept, inf, seed=s, beta=b, step=t) for s in (0, 1) for t, b in ((0, 0.2), (5, 0.6))]
    a, b = PS.bootstrap_se(recs, n=50), PS.bootstrap_se(recs, n=50)
    assert a == b and a["mean_sigma2"] > 0 and a["zero_share_diff"] > 0
    streamed = [dict(r, per_prompt={**r["per_prompt"], "gram": None}) for r in recs]
    assert all(math.isnan(v) for v in PS.bootstrap_se(streamed, n=5).values())  # streaming: no Gram, no bootstrap


def test_spearman():
    assert PS.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert PS.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)  # 1 - 6 * 2 / (4 * 15)
    assert PS.spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(np.corrcoef([0.5, 0.5, 2, 3], [0, 1, 2, 3])[0, 1])
    assert math.isnan(PS.spearman([1, 1, 1], [1, 2, 3]))
