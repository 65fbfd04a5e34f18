"""Curricula that keep a beta_t share of each batch and weight it 1/beta_t.

VI-CuRL (paper, Algorithm 1) ranks prompts by confidence; the paper's ablations rank them
by the opposite order, by response length or at random, or fix beta at 0.2. All share the
schedule (``schedules.py``), the threshold (``threshold.py``) and the 1/beta weight, so they
differ only in the ranking. The soft-confidence ablation keeps every prompt and weights it by
its confidence instead.

The weight of a kept prompt (``weight_by``): the paper's implementation divides by the empirical
batch retention beta-hat_t = (1/B) sum_j w_t(x_j) ("In the implementation, we estimate beta_t
using the empirical batch retention"), so the weights sum to B; ``scheduled`` divides by the
scheduled beta_t instead (beta-hat_t exceeds it by at most 1/B without ties, more with ties).
Both are logged every step: ``curriculum/beta_target`` (scheduled), ``curriculum/beta_actual``
(beta-hat_t), and ``curriculum/weight`` (the weight a kept prompt gets).
"""

from __future__ import annotations

import torch

from vicurl.curriculum.base import Batch, Curriculum, Selection, rng_for, selection_metrics
from vicurl.curriculum.schedules import SCHEDULES, schedule_beta
from vicurl.curriculum.threshold import kept_count, quantile_threshold

WEIGHT_BY = ("empirical", "scheduled")  # a kept prompt's weight: 1/beta-hat_t (the paper's implementation) or 1/beta_t


class NoCurriculum(Curriculum):
    """Plain GRPO: every prompt, weight 1."""


class ShareCurriculum(Curriculum):
    """Keep the top-beta_t share of ``scores(batch)``; weight w_j / beta_t.

    ``scores`` are oriented so that higher is kept first; ``tau_sign`` turns the threshold back
    into the ranked quantity's own units for the metrics (-1: the scores are a negated
    confidence or length, so the kept prompts are those at or below the logged tau).
    """

    tau_sign = 1.0

    def __init__(self, beta_start: float, beta_end: float, fraction: float, schedule: str, weight_by: str):
        super().__init__(beta_start=beta_start, beta_end=beta_end, fraction=fraction, schedule=schedule, weight_by=weight_by)
        if not 0 < beta_start <= 1 or not 0 < beta_end <= 1:
            raise ValueError(f"curricula.{self.name}: beta_start and beta_end must lie in (0, 1], got {beta_start}, {beta_end}")
        if not 0 < fraction <= 1:
            raise ValueError(f"curricula.{self.name}: fraction must lie in (0, 1], got {fraction}")
        if schedule not in SCHEDULES:
            raise ValueError(f"curricula.{self.name}: schedule must be one of {SCHEDULES}, got {schedule!r}")
        if weight_by not in WEIGHT_BY:
            raise ValueError(f"curricula.{self.name}: weight_by must be one of {WEIGHT_BY}, got {weight_by!r}")
        self.beta_start, self.beta_end, self.fraction, self.schedule = beta_start, beta_end, fraction, schedule
        self.weight_by = weight_by

    def beta(self, step: int, total_steps: int) -> float:
        return schedule_beta(self.schedule, step, total_steps, self.beta_start, self.beta_end, self.fraction)

    def scores(self, batch: Batch) -> torch.Tensor:
        raise NotImplementedError

    def weighted(self, batch: Batch, mask: torch.Tensor, beta: float, tau: float) -> Selection:
        """The kept prompts weighted 1/beta-hat_t (or 1/beta_t), the metrics with both."""
        beta_hat = float(mask.mean())
        weight = 1.0 / (beta_hat if self.weight_by == "empirical" else beta)
        metrics = selection_metrics(batch, mask, beta, tau)
        metrics["curriculum/weight"] = weight
        return Selection(mask * weight, metrics)

    def select(self, batch: Batch) -> Selection:
        beta = self.beta(batch.step, batch.total_steps)
        mask, tau = quantile_threshold(self.scores(batch), beta)
        return self.weighted(batch, mask, beta, self.tau_sign * tau)


class VICuRL(ShareCurriculum):
    """The paper: the most confident beta_t share, c(x) = 1 - normalized mean token entropy."""

    def scores(self, batch: Batch) -> torch.Tensor:
        return batch.confidence


class StaticConfidence(VICuRL):
    """Ablation: the most confident beta_start share (20 %) at every step (its schedule: constant)."""


class ReverseConfidence(ShareCurriculum):
    """Ablation: the least confident beta_t share (the threshold applied to -c)."""

    tau_sign = -1.0  # keeps c <= tau

    def scores(self, batch: Batch) -> torch.Tensor:
        return -batch.confidence


class LengthFirst(ShareCurriculum):
    """Ablation: the beta_t share with the shortest mean response length."""

    tau_sign = -1.0  # keeps mean length <= tau (tokens)

    def scores(self, batch: Batch) -> torch.Tensor:
        return -batch.lengths.float().mean(-1)


class RandomShare(ShareCurriculum):
    """Ablation: a uniformly random beta_t share, as many prompts as VI-CuRL keeps without ties."""

    def select(self, batch: Batch) -> Selection:
        beta = self.beta(batch.step, batch.total_steps)
        n_keep = kept_count(batch.size, beta)
        order = rng_for(batch.seed, batch.step, stream=11).permutation(batch.size)
        mask = torch.zeros(batch.size)
        mask[torch.as_tensor(order[:n_keep])] = 1.0
        return self.weighted(batch, mask, beta, float("nan"))


class SoftConfidence(Curriculum):
    """Ablation (the paper's "Soft Confidence Weighting", a static alternative "using confidence as
    sample weights without hard filtering"): every prompt kept, weight proportional to its
    confidence, normalized to mean 1 over the batch, the same at every step:

        w_j = c(x_j) / ((1/B) sum_k c(x_k))

    (c in [0, 1]; a batch whose confidences are all 0 is weighted uniformly).
    """

    def __init__(self):  # no parameters: no schedule, no threshold
        super().__init__()

    def select(self, batch: Batch) -> Selection:
        c = batch.confidence.float().clamp(min=0.0)
        mean = float(c.mean()) if c.numel() else 0.0
        weights = c / mean if mean > 0 else torch.ones(batch.size)
        metrics = selection_metrics(batch, (weights > 0).float(), 1.0, float("nan"))
        metrics["curriculum/weight_min"] = float(weights.min()) if weights.numel() else float("nan")
        metrics["curriculum/weight_max"] = float(weights.max()) if weights.numel() else float("nan")
        return Selection(weights, metrics)
