r"""Statistics of the variance probes (``vicurl.probes``) behind the findings' Section 5.3 rows.

Per probe (``probe_quantities``): the ratios kept/full of sigma^2 and V_prob (the paper's Ratio_sigma
and Ratio_V), the same among the informative prompts (unequal rewards), the kept minus full share of
zero-gradient groups, and V_prob without its action noise, V_hat - sigma2_hat / K (a prompt's mean of
K rollouts carries sigma^2 / K of noise; ``noise_share_full`` is that part's share of the full
batch's V_hat). That difference is unbiased but noisy (it can be negative), so a seed's ratio of it
is a ratio of means over its probes. ``decompose``: the action-variance ratio as share ratio x ratio
among informative prompts x the zero groups' factor (1 were their gradients 0; only the KL term
keeps them from it), exact by sigma2(S) = q sigma2_inf(S) + (1 - q) sigma2_zero(S). Per run seed
(``seed_statistics``): the means while beta_t < 1 and at beta_t <= ``EARLY_BETA``, and the slope of
|log ratio| on beta_t. ``bootstrap_se`` resamples each seed's probe prompts with replacement, one
draw for all its steps (its probes share their prompts), the kept and informative flags travelling
with their prompts; it needs the Gram matrices (a streaming probe has none: NaN). The claims:
docs/mini.md; the formulas: docs/algorithms.md.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from vicurl.probes.variance import estimates, subset_masks

EARLY_BETA = 0.25  # "at beta ~0.2": the probes with beta_t at most this
ESTIMATORS = ("sigma2", "vprob")
BOOTSTRAP = 200  # resamples; the se's own relative error is about 1 / sqrt(2 * 200) = 5 %


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 and math.isfinite(a) else math.nan


def probe_estimates(rec: Mapping[str, Any], weights: np.ndarray | None = None) -> dict[str, float]:
    """The probe's ``sigma2_*`` / ``vprob_*`` for ``variance.SUBSETS``: as recorded, or from its
    per-prompt quantities with each prompt counted ``weights`` times (a bootstrap draw)."""
    if weights is None:
        return {k: float(v) for k, v in rec.items() if k.startswith(("sigma2_", "vprob_"))}
    pp = rec["per_prompt"]
    if pp.get("gram") is None:
        raise ValueError(f"probe of step {rec.get('step')}: no Gram matrix (a streaming probe) to resample")
    w = torch.as_tensor(weights, dtype=torch.float64)
    masks = subset_masks(torch.tensor(pp["kept"]), torch.tensor(pp["informative"]))
    return estimates(torch.tensor(pp["within"], dtype=torch.float64), torch.tensor(pp["gram"], dtype=torch.float64),
                     {name: m.double() * w for name, m in masks.items()})


def _counts(rec: Mapping[str, Any], weights: np.ndarray | None) -> dict[str, float]:
    """Prompt counts (weighted) of the full batch, the kept prompts and their informative ones."""
    if weights is None:
        return {"full": rec["n_prompts"], "kept": rec["n_kept"], "full_inf": rec["n_informative"],
                "kept_inf": rec["n_kept_informative"]}
    pp, w = rec["per_prompt"], np.asarray(weights, dtype=float)
    kept, inf = np.asarray(pp["kept"], bool), np.asarray(pp["informative"], bool)
    return {"full": w.sum(), "kept": w[kept].sum(), "full_inf": w[inf].sum(), "kept_inf": w[kept & inf].sum()}


def probe_quantities(rec: Mapping[str, Any], weights: np.ndarray | None = None) -> dict[str, float]:
    """One probe's ratios and shares (module docstring)."""
    e, n, k = probe_estimates(rec, weights), _counts(rec, weights), int(rec["rollouts"])
    out = {"beta_t": float(rec["beta_t"])}
    for est in ESTIMATORS:
        out[f"ratio_{est}"] = _ratio(e[f"{est}_kept"], e[f"{est}_full"])
        out[f"ratio_inf_{est}"] = _ratio(e[f"{est}_kept_inf"], e[f"{est}_full_inf"])
    out["vprob_adj_kept"] = e["vprob_kept"] - e["sigma2_kept"] / k
    out["vprob_adj_full"] = e["vprob_full"] - e["sigma2_full"] / k
    out["noise_share_full"] = _ratio(e["sigma2_full"] / k, e["vprob_full"])
    out["zero_share_kept"] = 1 - n["kept_inf"] / n["kept"] if n["kept"] else math.nan
    out["zero_share_full"] = 1 - n["full_inf"] / n["full"]
    out["zero_share_diff"] = out["zero_share_kept"] - out["zero_share_full"]
    return out


def decompose(rec: Mapping[str, Any]) -> dict[str, float]:
    """The action-variance ratio kept/full as share ratio x ratio among informative prompts x the
    zero groups' factor (module docstring); ``product`` is the three multiplied, equal to ``ratio``."""
    e, n = probe_estimates(rec), _counts(rec, None)

    def zero_part(s: str) -> float:  # the zero groups' mean action variance in subset s
        n_zero = n[s] - n[f"{s}_inf"]
        return (n[s] * e[f"sigma2_{s}"] - n[f"{s}_inf"] * e[f"sigma2_{s}_inf"]) / n_zero if n_zero else 0.0

    q = {s: n[f"{s}_inf"] / n[s] if n[s] else math.nan for s in ("kept", "full")}
    inf = {s: e[f"sigma2_{s}_inf"] for s in ("kept", "full")}
    factor = {s: 1 + (1 - q[s]) * zero_part(s) / (q[s] * inf[s]) if q[s] and inf[s] > 0 else math.nan
              for s in ("kept", "full")}
    out = {"ratio": _ratio(e["sigma2_kept"], e["sigma2_full"]), "informative_kept": q["kept"],
           "informative_full": q["full"], "share_ratio": _ratio(q["kept"], q["full"]),
           "ratio_inf": _ratio(inf["kept"], inf["full"]), "zero_factor": _ratio(factor["kept"], factor["full"])}
    out["product"] = out["share_ratio"] * out["ratio_inf"] * out["zero_factor"]
    return out


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of y on x; NaN with fewer than two distinct finite points."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2 or np.ptp(x) == 0:
        return math.nan
    return float(np.polyfit(x, y, 1)[0])


def _mean(values) -> float:
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if len(v) else math.nan


def seed_statistics(quantities: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """A run seed's statistics over its probes' ``probe_quantities`` (module docstring)."""
    during = [q for q in quantities if q["beta_t"] < 1]
    early = [q for q in during if q["beta_t"] <= EARLY_BETA + 1e-9]
    out = {}
    for est in ESTIMATORS:
        out[f"mean_{est}"] = _mean(q[f"ratio_{est}"] for q in during)
        out[f"early_{est}"] = _mean(q[f"ratio_{est}"] for q in early)
        out[f"to_one_{est}"] = slope([q["beta_t"] for q in during],
                                     [abs(math.log(q[f"ratio_{est}"])) if q[f"ratio_{est}"] > 0 else math.nan
                                      for q in during])
        out[f"inf_{est}"] = _mean(q[f"ratio_inf_{est}"] for q in during)
    out["vprob_adj"] = _ratio(_mean(q["vprob_adj_kept"] for q in during), _mean(q["vprob_adj_full"] for q in during))
    out["noise_share_full"] = _mean(q["noise_share_full"] for q in during)
    out["zero_share_diff"] = _mean(q["zero_share_diff"] for q in during)
    out["zero_share_kept"] = _mean(q["zero_share_kept"] for q in during)
    out["zero_share_full"] = _mean(q["zero_share_full"] for q in during)
    return out


def by_seed(records: Sequence[Mapping[str, Any]]) -> dict[int, list[Mapping[str, Any]]]:
    """Probe records grouped by run seed, each seed's sorted by step."""
    out: dict[int, list] = {}
    for rec in sorted(records, key=lambda r: (int(r["seed"]), int(r["step"]))):
        out.setdefault(int(rec["seed"]), []).append(rec)
    return out


def bootstrap_se(records: Sequence[Mapping[str, Any]], n: int = BOOTSTRAP, seed: int = 0) -> dict[str, float]:
    """Per statistic of ``seed_statistics``: the bootstrap standard error of its mean across seeds
    (module docstring); NaN for all when a probe has no Gram matrix or a seed's probes disagree on
    their prompts."""
    seeds = by_seed(records)
    for recs in seeds.values():
        if any((r.get("per_prompt") or {}).get("gram") is None for r in recs):
            return {k: math.nan for k in seed_statistics([probe_quantities(recs[0])])}
        if len({tuple(r["per_prompt"]["id"]) for r in recs}) != 1:
            return {k: math.nan for k in seed_statistics([probe_quantities(recs[0])])}
    rng = np.random.default_rng([int(seed), 53])
    draws: list[dict[str, float]] = []
    for _ in range(n):
        per_seed = []
        for recs in seeds.values():
            p = len(recs[0]["per_prompt"]["id"])
            w = np.bincount(rng.integers(0, p, p), minlength=p)
            per_seed.append(seed_statistics([probe_quantities(r, w) for r in recs]))
        draws.append({k: _mean(s[k] for s in per_seed) for k in per_seed[0]})
    def sd(values) -> float:
        v = np.asarray(values, float)
        v = v[np.isfinite(v)]
        return float(v.std(ddof=1)) if len(v) >= 2 else math.nan

    return {k: sd([d[k] for d in draws]) for k in draws[0]}


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN for a constant series."""
    rx, ry = (pd.Series(np.asarray(v, float)).rank().to_numpy() for v in (x, y))  # pandas' own ranks need no scipy
    if len(rx) < 3 or rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def confidence_vs_reward(records: Sequence[Mapping[str, Any]], step: int = 0) -> float:
    """The mean across seeds of Spearman(confidence, mean reward) over the probe prompts at
    ``step`` (0: the base model): above 0 when the confident prompts are the solved ones."""
    return _mean(spearman(r["per_prompt"]["confidence"], r["per_prompt"]["reward"])
                 for r in records if int(r["step"]) == step)
