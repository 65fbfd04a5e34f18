"""Prompt-selection curricula: one interface, called unchanged by both engines.

A curriculum sees one batch after the rollouts (per-prompt confidences, rewards, response
lengths, prompt ids, the step) and returns per-prompt weights. The weight of a kept prompt is
1/beta_t, of a dropped one 0, so the update estimates grad L_t of the paper:

    g_hat = 1/|M| sum_j (w_j / beta_t) grad l_j,     w_j = 1[c_j >= tau_t]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


# ---------------------------------------------------------------- schedules


def linear_beta(step: int, total_steps: int, beta_start: float = 0.2, beta_end: float = 1.0, fraction: float = 1.0) -> float:
    """Retention beta_t, linear from beta_start at step 1 to beta_end at step ceil(fraction*T), then flat.

    Steps count from 1 (the first update). T_curr = max(1, round(fraction * total_steps)).
    """
    t_curr = max(1, round(fraction * total_steps))
    if t_curr == 1:
        return beta_end
    progress = min(1.0, max(0.0, (step - 1) / (t_curr - 1)))
    return beta_start + (beta_end - beta_start) * progress


def schedule_beta(kind: str, step: int, total_steps: int, beta_start: float, beta_end: float, fraction: float) -> float:
    if kind == "linear":
        return linear_beta(step, total_steps, beta_start, beta_end, fraction)
    if kind == "constant":
        return beta_start
    raise ValueError(f"curriculum schedule must be 'linear' or 'constant', got {kind!r}")


# ---------------------------------------------------------------- the threshold


def quantile_threshold(conf: torch.Tensor, beta: float) -> tuple[torch.Tensor, float]:
    """Mask w_j = 1[c_j >= tau] with tau = c_(k), k = floor((1 - beta) B), 1-based order statistic.

    As the paper's eq. (adaptive_tau) reads: with k = 0 every prompt is kept; otherwise the
    k-th smallest confidence is itself kept, so B - k + 1 prompts survive (more with ties),
    i.e. beta_hat >= beta. Returns (mask as float tensor, tau).
    """
    b = conf.numel()
    k = math.floor((1.0 - beta) * b + 1e-9)  # 1e-9: (1 - 0.8) * 10 must floor to 2, not 1
    if k <= 0:
        return torch.ones(b), float("-inf")
    tau = torch.sort(conf).values[k - 1]
    return (conf >= tau).float(), float(tau)


# ---------------------------------------------------------------- the interface


@dataclass
class Batch:
    """What a curriculum may look at. B prompts, G rollouts each."""

    confidence: torch.Tensor  # (B,) c(x) from pi_old
    rewards: torch.Tensor  # (B, G)
    lengths: torch.Tensor  # (B, G) response lengths in tokens
    prompt_ids: list[str]  # (B,)
    step: int  # 1-based training step
    total_steps: int


@dataclass
class Selection:
    weights: torch.Tensor  # (B,) w_j / beta_t, constants in the loss
    metrics: dict[str, float] = field(default_factory=dict)


def selection_metrics(batch: Batch, mask: torch.Tensor, beta: float, tau: float) -> dict[str, float]:
    """The per-step metrics of algorithms.md section 2 (names as the authors logged them)."""
    c = batch.confidence.float()
    r = batch.rewards.float().mean(-1)
    kept, dropped = mask > 0, mask == 0

    def mean(x: torch.Tensor) -> float:
        return float(x.mean()) if x.numel() else float("nan")

    if c.numel() > 1 and float(c.std()) > 0 and float(r.std()) > 0:
        corr = float(torch.corrcoef(torch.stack([c, r]))[0, 1])
    else:
        corr = float("nan")
    return {
        "curriculum/beta_target": beta,
        "curriculum/beta_actual": float(mask.mean()),
        "curriculum/tau": tau,
        "curriculum/conf_mean": float(c.mean()),
        "curriculum/conf_std": float(c.std()) if c.numel() > 1 else 0.0,
        "curriculum/kept": float(mask.sum()),
        "curriculum/reward_kept": mean(r[kept]),
        "curriculum/reward_dropped": mean(r[dropped]),
        "curriculum/conf_reward_corr": corr,
    }


class Curriculum:
    """Base class. Subclasses implement ``select``; stateful ones also ``state_dict``."""

    name = "base"

    def __init__(self, **params: Any):
        self.params = params

    def select(self, batch: Batch) -> Selection:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class NoCurriculum(Curriculum):
    """Plain GRPO: every prompt, weight 1."""

    name = "none"

    def select(self, batch: Batch) -> Selection:
        mask = torch.ones(batch.confidence.numel())
        return Selection(mask, selection_metrics(batch, mask, 1.0, float("-inf")))


class VICuRL(Curriculum):
    """Keep the top-beta_t share by confidence, weight 1/beta_t (paper, Algorithm 1)."""

    name = "vicurl"

    def __init__(self, beta_start: float = 0.2, beta_end: float = 1.0, fraction: float = 1.0, schedule: str = "linear"):
        super().__init__(beta_start=beta_start, beta_end=beta_end, fraction=fraction, schedule=schedule)
        if not 0 < beta_start <= 1 or not 0 < beta_end <= 1:
            raise ValueError(f"curricula.vicurl: beta_start and beta_end must lie in (0, 1], got {beta_start}, {beta_end}")
        self.beta_start, self.beta_end, self.fraction, self.schedule = beta_start, beta_end, fraction, schedule

    def beta(self, step: int, total_steps: int) -> float:
        return schedule_beta(self.schedule, step, total_steps, self.beta_start, self.beta_end, self.fraction)

    def select(self, batch: Batch) -> Selection:
        beta = self.beta(batch.step, batch.total_steps)
        mask, tau = quantile_threshold(batch.confidence, beta)
        return Selection(mask / beta, selection_metrics(batch, mask, beta, tau))


CURRICULA: dict[str, type[Curriculum]] = {c.name: c for c in (NoCurriculum, VICuRL)}


def make_curriculum(name: str, params: dict[str, Any] | None = None) -> Curriculum:
    if name not in CURRICULA:
        raise ValueError(f"unknown curriculum {name!r}; known: {sorted(CURRICULA)}")
    return CURRICULA[name](**(params or {}))
