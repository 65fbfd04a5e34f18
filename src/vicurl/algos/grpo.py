"""GRPO as the paper uses it (its GRPO objective and hyperparameter table), on top of verl's core_algos.

    A_i = (R_i - mean R) / (std R + 1e-6)           (verl: torch.std, i.e. Bessel-corrected)
    l   = 1/G sum_i 1/T_i sum_t [ min(rho A, clip(rho, 1-eps, 1+eps) A) - beta_KL * k3_t ]

The loss to minimise is -l, aggregated "seq-mean-token-mean". Curriculum weights w_j/beta_t
multiply each sequence's contribution; by default the KL term too (the paper's L_t weights the
whole l), or only the policy term (``weight_kl=False``, verl's ``rollout_is_weights``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from vicurl.config.settings import TrainSettings


@dataclass(frozen=True)
class LossConfig:
    clip_ratio: float
    kl_coef: float
    kl_type: str
    loss_agg_mode: str
    weight_kl: bool


def loss_config(settings: TrainSettings) -> LossConfig:
    """The loss settings of a run (their defaults: `vicurl.config.settings.TrainSettings`)."""
    return LossConfig(settings.clip_ratio, settings.kl_coef, settings.kl_type, settings.loss_agg_mode, settings.weight_kl)


def outcome_to_token_rewards(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Place each sequence's scalar reward on its last response token (verl's layout)."""
    last = (response_mask.sum(-1) - 1).clamp(min=0).long()
    out = torch.zeros(response_mask.shape, dtype=torch.float32)
    out[torch.arange(len(scores)), last] = scores.float()
    return out


def group_advantages(scores: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalized advantages broadcast over response tokens, by verl's GRPO estimator."""
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=outcome_to_token_rewards(scores, response_mask),
        response_mask=response_mask.float(),
        index=index,
        epsilon=eps,
        norm_adv_by_std_in_grpo=True,
    )
    return adv


class _ActorLossConfig(dict):
    """The fields of verl's ActorConfig that ``compute_policy_loss_vanilla`` reads."""

    def __init__(self, clip_ratio: float, global_batch_size: int):
        super().__init__(clip_ratio_c=3.0)
        self.clip_ratio = self.clip_ratio_low = self.clip_ratio_high = clip_ratio
        self.global_batch_info = {"dp_size": 1, "global_batch_size": global_batch_size}


def grpo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    seq_weights: torch.Tensor,
    cfg: LossConfig,
    ref_log_prob: torch.Tensor | None = None,
    global_batch_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Loss (to minimise) of one micro-batch; gradients of micro-batches add up to the mini-batch's.

    ``global_batch_size`` is the number of sequences in the whole mini-batch (default: this
    micro-batch), so that seq-mean divides by it, as verl does across micro-batches.
    """
    if cfg.loss_agg_mode != "seq-mean-token-mean":
        raise ValueError(f"train.loss_agg_mode: only seq-mean-token-mean is supported, got {cfg.loss_agg_mode!r}")
    n = global_batch_size or log_prob.shape[0]
    mask = response_mask.float()
    tok_w = seq_weights.float()[:, None].expand_as(mask)
    pg_loss, pg_metrics = core_algos.compute_policy_loss_vanilla(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=cfg.loss_agg_mode,
        config=_ActorLossConfig(cfg.clip_ratio, n),
        rollout_is_weights=tok_w,
    )
    loss = pg_loss
    metrics = {"actor/pg_loss": pg_loss.item(), **pg_metrics}
    if cfg.kl_coef > 0:
        if ref_log_prob is None:
            raise ValueError("kl_coef > 0 needs ref_log_prob")
        kl = core_algos.kl_penalty(log_prob, ref_log_prob, cfg.kl_type)
        if cfg.weight_kl:
            kl = kl * tok_w
        kl_loss = core_algos.agg_loss(kl, mask, cfg.loss_agg_mode, dp_size=1, global_batch_size=n)
        loss = loss + cfg.kl_coef * kl_loss
        metrics["actor/kl_loss"] = kl_loss.item()
    return loss, metrics
