"""How many probe prompts the variance ratios need: the heavy tail of the per-prompt variances and
the spread of a ratio with fewer prompts, from a finished run's probes.

For each probe (the exact or sketch method: they record every prompt's action variance and the
Gram matrix of the prompt means), prints per condition (study):

- the share of the batch's action variance held by its 3 largest prompts (the heavy tail);
- for m prompts drawn without replacement from the P probed (m = P/4, P/2, 3P/4, P), the standard
  deviation across 200 draws of the mean action-variance and problem-variance ratio kept/full over a
  seed's probes with beta_t < 1, averaged over seeds (at m = P it is 0: the draw is the batch), and
  the same divided by the finite-population factor sqrt(1 - m/P): the sd of m prompts drawn from an
  unlimited pool. It falls about as 1/sqrt(m); at m = P it is what prompt sampling adds to a seed's
  ratio (compare the findings' bootstrap se times sqrt(seeds)).

    .venv/bin/python measurements/probe_prompts.py [results/mini]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vicurl.report import probe_stats as PS  # noqa: E402


def main(results: Path) -> None:
    records = [json.loads(p.read_text()) for p in sorted((results / "probes").rglob("step*.json"))]
    records = [r for r in records if (r.get("per_prompt") or {}).get("gram") is not None]
    if not records:
        raise SystemExit(f"{results}/probes: no probe with per-prompt quantities (the exact or sketch method)")
    rng = np.random.default_rng(0)
    for study in dict.fromkeys(r["study"] for r in records):
        recs = [r for r in records if r["study"] == study]
        tops = []
        for r in recs:
            w = np.sort(np.asarray(r["per_prompt"]["within"]))[::-1]
            if w.sum() > 0:
                tops.append(w[:3].sum() / w.sum())
        p = len(recs[0]["per_prompt"]["id"])
        print(f"{study}: {len(recs)} probes of {p} prompts; the 3 largest prompts hold "
              f"{100 * np.median(tops):.0f} % of a probe's action variance (median; range "
              f"{100 * min(tops):.0f}-{100 * max(tops):.0f} %)")
        for m in sorted({max(2, p // 4), p // 2, 3 * p // 4, p}):
            sds = {"mean_sigma2": [], "mean_vprob": []}
            for seed_recs in PS.by_seed(recs).values():
                draws = []
                for _ in range(200):
                    w = np.zeros(p)
                    w[rng.choice(p, m, replace=False)] = 1
                    draws.append(PS.seed_statistics([PS.probe_quantities(r, w) for r in seed_recs]))
                for k in sds:
                    v = np.asarray([d[k] for d in draws], float)
                    sds[k].append(np.nanstd(v[np.isfinite(v)], ddof=1))
            fpc = np.sqrt(1 - m / p) if m < p else np.nan  # drawing m of P without replacement
            print(f"  m = {m:3d} prompts: sd of a seed's mean ratio, sigma^2 {np.mean(sds['mean_sigma2']):.3f}, "
                  f"V_prob {np.mean(sds['mean_vprob']):.3f}; from an unlimited pool (sd / sqrt(1 - m/P)): "
                  f"{np.mean(sds['mean_sigma2']) / fpc:.3f}, {np.mean(sds['mean_vprob']) / fpc:.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results" / "mini")
