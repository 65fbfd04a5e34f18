"""AdaRFT (adaptive curriculum reinforcement finetuning), the paper's oracle-reward baseline.

Every prompt has a difficulty d in [0, 100]: 100 * (1 - pass rate of a reference model over
k samples), computed offline by the workflow (rule ``prompt_stats``, the initial policy as
reference; ``difficulty_from: offline``) or read from the training set's metadata key
``difficulty`` (a provided table such as DeepScaleR_Difficulty; ``difficulty_from: metadata``). Each step trains on the B prompts whose
difficulty is nearest the target T (ties broken at random, seeded by (seed, step)); after the
step the target moves with the batch's mean reward R:

    T <- clip(T + eta * tanh(alpha * (R - target_reward)), 0, 100),   T_0 = 0, eta = 50, alpha = 2, target_reward = 0.5

Continuous rewards (RENT's negative entropy) [ours]: R is the mean of exp(reward), in (0, 1].
Every rolled-out prompt is kept with weight 1 (AdaRFT chooses data, it does not filter it).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from vicurl.curriculum.base import Batch, Curriculum, Selection, rng_for, selection_metrics

D_MIN, D_MAX = 0.0, 100.0


def next_target(target: float, mean_reward: float, eta: float = 50.0, alpha: float = 2.0, target_reward: float = 0.5) -> float:
    """AdaRFT's target update: T + eta tanh(alpha (R - target_reward)), clipped to [0, 100]."""
    return float(min(D_MAX, max(D_MIN, target + eta * math.tanh(alpha * (mean_reward - target_reward)))))


def nearest(difficulty: np.ndarray, target: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of the ``n`` difficulties nearest ``target`` (random order among equal distances)."""
    tie_break = rng.random(len(difficulty))
    order = np.lexsort((tie_break, np.abs(difficulty - target)))
    return order[:n]


class AdaRFT(Curriculum):
    def __init__(self, target_start: float, eta: float, alpha: float, target_reward: float, difficulty_from: str):
        super().__init__(target_start=target_start, eta=eta, alpha=alpha, target_reward=target_reward,
                         difficulty_from=difficulty_from)
        if not D_MIN <= target_start <= D_MAX:
            raise ValueError(f"curricula.adarft.target_start must lie in [0, 100], got {target_start}")
        if difficulty_from not in ("offline", "metadata"):
            raise ValueError(f"curricula.adarft.difficulty_from must be 'offline' or 'metadata', got {difficulty_from!r}")
        self.difficulty_from = difficulty_from
        self.eta, self.alpha, self.target_reward = eta, alpha, target_reward
        self.target = float(target_start)
        self.difficulty = np.zeros(0)

    def setup(self, prompts: pd.DataFrame, *, batch_size: int, total_steps: int, seed: int = 0,
              stats: pd.DataFrame | None = None) -> None:
        super().setup(prompts, batch_size=batch_size, total_steps=total_steps, seed=seed, stats=stats)
        if self.difficulty_from == "offline":
            self.difficulty = self.stat(stats, "difficulty")
        else:  # the training set's own annotation (e.g. DeepScaleR_Difficulty), metadata key `difficulty`
            values = []
            for pid, meta in zip(self.ids, prompts["metadata"]):
                d = json.loads(meta or "{}").get("difficulty")
                if d is None:
                    raise ValueError(f"adarft: difficulty_from=metadata but prompt {pid!r} has no metadata 'difficulty'")
                values.append(float(d))
            self.difficulty = np.asarray(values)
        bad = ~np.isfinite(self.difficulty) | (self.difficulty < D_MIN) | (self.difficulty > D_MAX)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"adarft: difficulty must lie in [0, 100]; prompt {self.ids[i]!r} has {self.difficulty[i]}")

    def propose(self, step: int, default_ids: list[str]) -> list[str]:
        pos = nearest(self.difficulty, self.target, self.batch_size, rng_for(self.seed, step, stream=21))
        return [self.ids[i] for i in pos]

    def select(self, batch: Batch) -> Selection:
        mask = torch.ones(batch.size)
        metrics = selection_metrics(batch, mask, 1.0, float("-inf"))
        d = dict(zip(self.ids, self.difficulty.tolist()))
        metrics["curriculum/target_difficulty"] = self.target
        metrics["curriculum/batch_difficulty"] = float(np.mean([d[i] for i in batch.prompt_ids]))
        return Selection(mask, metrics)

    def observe(self, batch: Batch, selection: Selection) -> None:
        r = batch.rewards.double()
        mean_reward = float((r if batch.reward_bounded else r.exp()).mean())
        self.target = next_target(self.target, mean_reward, self.eta, self.alpha, self.target_reward)

    def state_dict(self) -> dict[str, Any]:
        return {"target": self.target}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.target = float(state["target"])
