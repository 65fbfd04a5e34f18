"""One training step's math as pure functions over tensors: what both engines call.

Given the G rollouts of B prompts (rows prompt-major: the G rollouts of prompt 0, then of
prompt 1, ...), their response masks and pi_old's per-token entropies:

``score``            rewards (`vicurl.algos.rewards.group_rewards`), oracle correctness, group-normalized
                     advantages, confidences c(x), the prompts the reward keeps (EMPO)
``curriculum_batch`` what a curriculum sees (`vicurl.curriculum.Batch`)
``sequence_weights`` per-sequence loss weights w_j / beta-hat_t (zero for prompts the reward drops)
``rollout_metrics``  the per-step rollout metrics of ``metrics.jsonl``
``batch_indices``    the engines' default data order (a seeded permutation per epoch)

The local engine (`vicurl.engines.local`) and the verl engine (`vicurl.engines.verl`) call
exactly these; only the drivers around them differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from vicurl.algos import rewards as reward_sources
from vicurl.algos.confidence import mean_token_entropy, prompt_confidence
from vicurl.algos.grpo import group_advantages
from vicurl.config import methods
from vicurl.curriculum import Batch


@dataclass
class Scored:
    """Scored rollouts of B prompts, G each, prompt-major."""

    rewards: torch.Tensor  # (N,)
    correct: torch.Tensor  # (N,) oracle correctness (logged whatever the reward)
    advantages: torch.Tensor  # (N, R)
    confidence: torch.Tensor  # (B,) c(x)
    keep: torch.Tensor  # (B,) bool: False drops the prompt from the update (EMPO)
    metrics: dict[str, float]  # the reward source's ``reward/...`` metrics


def seed_for(*parts: int) -> int:
    """A deterministic 31-bit seed from integers (numpy's SeedSequence mixing)."""
    return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


def batch_indices(n_rows: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Training-set rows of step ``step`` (1-based) in the default data order: a fresh seeded
    permutation each epoch, the last partial batch dropped. A curriculum's ``propose`` may
    replace them (AdaRFT, SENT)."""
    per_epoch = n_rows // batch_size
    epoch, pos = divmod(step - 1, per_epoch)
    perm = np.random.default_rng(seed_for(seed, 1, epoch)).permutation(n_rows)
    return perm[pos * batch_size : (pos + 1) * batch_size]


def group_index(n_prompts: int, group_size: int) -> np.ndarray:
    """The prompt (group) of every prompt-major row."""
    return np.repeat(np.arange(n_prompts), group_size)


def score(
    reward: str,
    reward_params: dict,
    texts: Sequence[str],
    response_mask: torch.Tensor,
    entropys: torch.Tensor,
    *,
    golds: Sequence[str],
    answer_types: Sequence[str] | None,
    options: Sequence[Sequence[str]] | None,
    group_size: int,
    vocab_size: int,
    vote_texts: Sequence[Sequence[str]] | None = None,
) -> Scored:
    """Rewards from the same pi_old entropies (rollout temperature) that give the confidences."""
    g = int(group_size)
    n_prompts = len(texts) // g
    problems = dict(golds=[str(a) for a in golds], answer_types=answer_types, options=options)
    rew = reward_sources.group_rewards(reward, reward_params, texts, **problems,
                                       entropies=mean_token_entropy(entropys, response_mask), group_size=g,
                                       vote_texts=vote_texts)
    correct = rew.rewards if reward == "oracle" else \
        reward_sources.group_rewards("oracle", {}, texts, **problems, group_size=g).rewards
    index = group_index(n_prompts, g)
    return Scored(
        rewards=rew.rewards,
        correct=correct,
        advantages=group_advantages(rew.rewards, response_mask, index),
        confidence=prompt_confidence(entropys, response_mask, index, vocab_size),
        keep=rew.keep,
        metrics=rew.metrics,
    )


def reward_bounded(reward: str) -> bool:
    """Whether a reward source's rewards lie in [0, 1] (the catalog's ``bounded``: RENT's negative
    entropy does not; VCRL and AdaRFT then map them as its paper says)."""
    return methods.reward(reward).bounded



def curriculum_batch(scored: Scored, lengths: torch.Tensor, prompt_ids: list[str], step: int, total_steps: int,
                     seed: int, group_size: int, reward_bounded: bool = True) -> Batch:
    g = int(group_size)
    return Batch(
        confidence=scored.confidence,
        rewards=scored.rewards.view(-1, g),
        lengths=lengths.view(-1, g).float(),
        prompt_ids=list(prompt_ids),
        step=step,
        total_steps=total_steps,
        seed=seed,
        reward_bounded=bool(reward_bounded),
    )


def sequence_weights(prompt_weights: torch.Tensor, keep: torch.Tensor, group_size: int) -> torch.Tensor:
    """Per-sequence weights: the curriculum's w_j / beta-hat_t, zero where the reward drops the prompt."""
    return (prompt_weights * keep.to(prompt_weights.dtype)).repeat_interleave(int(group_size))


def rollout_metrics(rewards: torch.Tensor, correct: torch.Tensor, lengths: torch.Tensor, truncated: torch.Tensor,
                    entropys: torch.Tensor, response_mask: torch.Tensor) -> dict[str, float]:
    """The rollout columns of ``metrics.jsonl`` (both engines)."""
    mask = response_mask.to(entropys.dtype)
    return {
        "reward/mean": float(rewards.float().mean()),
        "reward/oracle_acc": float(correct.float().mean()),
        "response_length/mean": float(lengths.float().mean()),
        "response_length/truncated": float(truncated.float().mean()),
        "actor/entropy": float((entropys * mask).sum() / mask.sum().clamp(min=1)),
    }


COUNT_METRICS = ("reward/timeouts",)  # counts of a step, summed over its parts rather than averaged


def mean_metrics(a: dict[str, float], na: int, b: dict[str, float], nb: int) -> dict[str, float]:
    """Per-prompt means of two parts of a step (VCRL's replay), weighted by their numbers of prompts;
    the counts (``COUNT_METRICS``) summed."""
    def both(k: str) -> float:
        return a[k] + b[k] if k in COUNT_METRICS else (a[k] * na + b[k] * nb) / max(na + nb, 1)

    return {k: both(k) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}


def finite_metrics(metrics: dict) -> dict:
    """NaN / inf (e.g. the reward of dropped prompts when none is dropped) as JSON null."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}
