"""Does a policy's confidence point at the prompts it solves? The measurement that chose the mini
reproduction's second variance condition (docs/mini.md).

For each training set given, draws K rollouts of P prompts from a model (as a training step draws
them: `vicurl.engines.rollout.RolloutScorer`, the oracle reward) and prints the mean reward, the
share of all-wrong and all-right groups (both zero-gradient groups), Spearman's correlation of the
prompt's confidence (minus its mean token entropy) with its mean reward, and, per half of the
prompts split at the median confidence, the mean reward and the share of zero-gradient groups. The
paper's premise is that the confident half is the solved half.

    .venv/bin/python measurements/confidence_vs_correctness.py results/mini/models/tiny/base \\
        results/mini/data/arith_train.parquet results/mini/data/arith_train_easy.parquet [--prompts 96]

About a minute per set on 2 cores for the tiny model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vicurl.config.settings import TrainSettings  # noqa: E402
from vicurl.data import schema  # noqa: E402
from vicurl.probes.probe import load_scorer, probe_prompt_ids  # noqa: E402
from vicurl.report.probe_stats import spearman  # noqa: E402
from vicurl.runtime import devices  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("train_sets", nargs="+")
    ap.add_argument("--prompts", type=int, default=96)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--max-response-length", type=int, default=64)
    a = ap.parse_args()
    settings = TrainSettings(total_steps=1, batch_size=a.prompts, group_size=a.rollouts, lr=0.0,
                             max_response_length=a.max_response_length, micro_batch_size=128,
                             rollout_batch_size=256, reward="oracle", curriculum="none", seed=0)
    for path in a.train_sets:
        scorer = load_scorer(settings, a.model, a.model, schema.read(path), devices.resolve("cpu"))
        ids = probe_prompt_ids(scorer.train_df, a.prompts, 0, 0)
        part = scorer.rollout(ids, seed=0)
        r = part.scored.rewards.view(len(ids), a.rollouts).double().numpy()
        conf = part.scored.confidence.double().numpy()
        mean = r.mean(1)
        zero = (r.max(1) == r.min(1))
        hi = conf >= np.median(conf)
        print(f"{Path(path).stem}: {len(ids)} prompts x {a.rollouts}: mean reward {mean.mean():.3f}; "
              f"all wrong {np.mean(mean == 0):.2f}, all right {np.mean(mean == 1):.2f}; "
              f"Spearman(confidence, reward) {spearman(conf, mean):+.2f}")
        for name, half in (("confident half", hi), ("other half", ~hi)):
            print(f"  {name}: mean reward {mean[half].mean():.3f}, zero-gradient groups {zero[half].mean():.2f} "
                  f"(all wrong {np.mean(mean[half] == 0):.2f}, all right {np.mean(mean[half] == 1):.2f})")


if __name__ == "__main__":
    main()
