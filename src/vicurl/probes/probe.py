"""One variance probe of a training run at one checkpoint (the paper's Figures "variance ratio" and
"absolute variance"); what it measures: docs/configuration.md ("Variance probes").

The checkpoint after ``step`` updates is pi_old of training step ``step + 1``: K rollouts per probe
prompt are scored exactly as training scores them (`vicurl.engines.rollout.RolloutScorer`), the
run's curriculum selects as at step ``step + 1``, and ``variance`` estimates on kept / full. The
probe batch is a seeded draw per run seed, the same at every step, so the seeds' spread includes
the sampling of prompts. g(x, y_k) is the gradient of rollout k's term of the surrogate, 1/T_k
sum_t [clipped ratio term - beta_KL KL_t], at theta_old with weight 1 (the variance components are
properties of the prompts; the 1/beta_t weight only rescales the estimator); the reference policy
is the run's initial model. On a GPU the rollouts come from a bf16 copy (as verl's vLLM draws them)
while everything compared stays float32/float64, as on the CPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import torch
from transformers import AutoTokenizer

from vicurl.algos.grpo import grpo_loss, loss_config
from vicurl.config.methods import probeable
from vicurl.config.settings import TrainSettings
from vicurl.curriculum import Selection, make_curriculum
from vicurl.data.long_prompts import fit_training_set
from vicurl.engines.rollout import RolloutScorer, ScoredRollouts, load_models, sequence_logprobs
from vicurl.engines.step import seed_for
from vicurl.probes import variance
from vicurl.runtime import devices

METHODS = ("exact", "streaming", "sketch")


@dataclass(frozen=True)
class ProbeConfig:
    n_prompts: int = 32
    rollouts: int = 8  # K
    method: str = "exact"
    sketch_dim: int = 4096
    seed: int = 0


def probe_prompt_ids(train_df: pd.DataFrame, n: int, seed: int, run_seed: int) -> list[str]:
    """A run's probe batch: the first ``n`` of a permutation of the training set seeded by the
    probe's and the run's seeds."""
    if n > len(train_df):
        raise ValueError(f"probes.n_prompts={n} exceeds the training set's {len(train_df)} rows")
    order = np.random.default_rng([int(seed), 41, int(run_seed)]).permutation(len(train_df))
    return [str(train_df["id"].iloc[i]) for i in order[:n]]


def micro_batch_size(device: torch.device, configured: int) -> int:
    """Sequences per forward/backward of a probe: the run's own on the CPU (the demo's numbers);
    one on CUDA, where a 3,584-token sequence's float32 logits over Qwen's 152k vocabulary take
    2.2 GB and the entropy and the backward keep several copies (64 would need ~0.7 TB). The
    per-rollout gradients are one sequence each anyway; only the batched means lose batching."""
    return int(configured) if device.type == "cpu" else 1


def run_probe(
    train_cfg: TrainSettings,
    checkpoint_dir: str | Path,
    base_dir: str | Path,
    train_df: pd.DataFrame,
    *,
    step: int,
    probe: ProbeConfig,
    device: str | torch.device = "auto",
) -> dict[str, Any]:
    """One probe (module docstring); ``device``: ``vicurl.runtime.devices.resolve``, the config's ``device``."""
    check(train_cfg, probe)
    t0 = time.perf_counter()
    device = devices.resolve(device)
    settings = replace(train_cfg, group_size=probe.rollouts,
                       micro_batch_size=micro_batch_size(device, train_cfg.micro_batch_size))
    scorer = load_scorer(settings, checkpoint_dir, base_dir, train_df, device)
    # the rows it trains on (long prompts dropped)
    ids = probe_prompt_ids(scorer.train_df, probe.n_prompts, probe.seed, settings.seed)
    part = scorer.rollout(ids, seed=seed_for(probe.seed, 5, settings.seed, step))  # independent across run seeds
    selection = select(scorer, part, step + 1)
    kept = selection.mask.bool()
    rewards = part.scored.rewards.view(len(ids), probe.rollouts)
    informative = rewards.amax(1) > rewards.amin(1)  # unequal rewards: a nonzero advantage
    ref_lp = scorer.ref_logprobs(part.rollouts)
    scorer.release()  # the reference and the bf16 sampler are done with: on a GPU their memory goes to the gradients
    est, within, gram = estimate(rollout_gradient(scorer.policy, part, ref_lp, settings),
                                 trainable_shapes(scorer.policy), probe, len(ids), kept, informative)
    return {
        "step": int(step),
        "beta_t": float(selection.metrics.get("curriculum/beta_target", float("nan"))),
        "n_prompts": len(ids),
        "n_kept": int(kept.sum()),
        "n_informative": int(informative.sum()),
        "n_kept_informative": int((kept & informative).sum()),
        "rollouts": probe.rollouts,
        "method": probe.method,
        "reward_mean": float(part.scored.rewards.mean()),
        "conf_mean": float(part.scored.confidence.mean()),
        **est,
        "seconds": time.perf_counter() - t0,
        "per_prompt": {
            "id": ids,
            "kept": kept.tolist(),
            "informative": informative.tolist(),
            "confidence": part.scored.confidence.tolist(),
            "reward": rewards.double().mean(1).tolist(),
            "within": within.tolist(),
            "gram": None if gram is None else gram.tolist(),  # streaming holds no prompt means
        },
    }


def check(train_cfg: TrainSettings, probe: ProbeConfig) -> None:
    if probe.method not in METHODS:
        raise ValueError(f"probes.method must be one of {METHODS}, got {probe.method!r}")
    if train_cfg.curriculum not in probeable():
        raise ValueError(f"probes: curriculum {train_cfg.curriculum!r} keeps state across steps; "
                         f"probe runs of {probeable()}")


def load_scorer(settings: TrainSettings, checkpoint_dir: str | Path, base_dir: str | Path, train_df: pd.DataFrame,
                device: torch.device) -> RolloutScorer:
    """The checkpoint as pi_old, the run's initial model as the reference, on the rows the run trains on."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir)
    rows, prompts, _ = fit_training_set(train_df, tokenizer, settings, "the training set")
    policy, ref = load_models(checkpoint_dir, settings, device, ref_model_path=base_dir)
    return RolloutScorer(policy, ref, tokenizer, device, settings, rows, prompts)


def select(scorer: RolloutScorer, part: ScoredRollouts, step: int) -> Selection:
    """The selection the run's curriculum makes at training step ``step`` (it keeps no state across steps)."""
    s = scorer.settings
    curriculum = make_curriculum(s.curriculum, s.curriculum_params)
    curriculum.setup(scorer.train_df, batch_size=s.batch_size, total_steps=scorer.curriculum_steps, seed=s.seed)
    return curriculum.select(scorer.curriculum_batch(part, step))


def rollout_gradient(policy, part: ScoredRollouts, ref_lp: torch.Tensor | None,
                     settings: TrainSettings) -> Callable[[Any], list[torch.Tensor]]:
    """g(rows): the gradient of the mean surrogate over ``rows`` of ``part`` (seq-mean-token-mean,
    weight 1) at theta_old, ``ref_lp`` the reference's log-probs of all rows (None: no KL term)."""
    params = [p for p in policy.parameters() if p.requires_grad]
    policy.eval()
    if next(policy.parameters()).is_cuda:
        recompute_activations(policy)
    loss_cfg, mb = loss_config(settings), settings.micro_batch_size

    def mean_grad(rows, copy: bool = True) -> list[torch.Tensor]:
        """``copy=False``: the model's own gradient tensors, valid until the next call."""
        rows = torch.as_tensor(list(rows))
        policy.zero_grad(set_to_none=True)
        for i in range(0, len(rows), mb):
            r = rows[i : i + mb]
            lp, _ = sequence_logprobs(policy, part.rollouts, r, settings.temperature, with_entropy=False)
            loss, _ = grpo_loss(lp, part.old_lp[r], part.scored.advantages[r], part.rollouts.response_mask[r],
                                torch.ones(len(r)), loss_cfg, ref_log_prob=None if ref_lp is None else ref_lp[r],
                                global_batch_size=len(rows))
            loss.backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad.detach() for p in params]
        return [g.clone() for g in grads] if copy else grads

    return mean_grad


def recompute_activations(policy) -> None:
    """Activation checkpointing (transformers'), which the model applies in train mode only: a 1.5B
    model's float32 activations of one 3,272-token sequence are about 20 GB, kept for the backward;
    recomputed layer by layer, about one layer's. Train mode computes what eval mode does where no
    module draws randomness (dropout): only then."""
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in policy.modules()) or \
            float(getattr(policy.config, "attention_dropout", 0.0) or 0.0) > 0:
        return
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.config.use_cache = False
    policy.train()


def trainable_shapes(policy) -> list[tuple[str, torch.Size]]:
    return [(n, p.shape) for n, p in policy.named_parameters() if p.requires_grad]


def estimate(mean_grad, shapes: list[tuple[str, torch.Size]], probe: ProbeConfig, n_prompts: int,
             kept: torch.Tensor, informative: torch.Tensor) -> tuple[dict[str, float], torch.Tensor, torch.Tensor | None]:
    """The action and problem variances (`variance`) of the K rollouts of ``n_prompts`` prompts
    by ``probe.method``, ``shapes`` the trainable parameters' (the sketch hashes them); with
    the per-prompt action variances and the prompt means' Gram matrix (None when streaming)."""
    k = probe.rollouts
    if probe.method == "streaming":
        est, within = variance.streaming(mean_grad, lambda row: mean_grad([row], copy=False), n_prompts, k, kept,
                                         informative)
        return est, within, None
    n = n_prompts * k
    if probe.method == "sketch":
        sketch = variance.CountSketch(shapes, probe.sketch_dim, seed=probe.seed)
        grads = torch.stack([sketch([x.cpu() for x in mean_grad([row])]) for row in range(n)])  # the hashes are on the CPU
    else:
        # every gradient written once into one float64 (P*K, d) buffer in host memory: no per-row
        # concatenation and no stacking copy, which cost more than the backward passes
        grads = torch.empty(n, sum(int(np.prod(shape)) for _, shape in shapes), dtype=torch.float64)
        for row in range(n):
            offset = 0
            for x in mean_grad([row]):
                grads[row, offset : offset + x.numel()].copy_(x.reshape(-1))
                offset += x.numel()
    within, gram = variance.moments(grads.view(n_prompts, k, -1))
    return variance.estimates(within, gram, variance.subset_masks(kept, informative)), within, gram
