"""One variance probe of a training run at one checkpoint (the paper's Figures "variance ratio" and
"absolute variance").

The checkpoint after ``step`` updates is the policy pi_old of training step ``step + 1``. On a
fixed batch of prompts (the same for every step and run: a seeded draw from the training set),
it draws K rollouts per prompt at the training temperature and scores them exactly as training
does (the local engine's own rollout code: rewards, advantages normalized within the K rollouts,
confidences). The run's curriculum then selects, as training step ``step + 1`` would, and the
action and problem variances of the per-rollout gradients (``variance.py``) are estimated on
the kept prompts and on the full batch.

g(x, y_k) is the gradient of rollout k's term of the training surrogate, 1/T_k sum_t [clipped
ratio term - beta_KL KL_t] (weight 1: the components are properties of the prompts, the 1/beta_t
weight only rescales the estimator), at theta = theta_old. The reference policy is the run's
initial model.

On a GPU (``device``, ``vicurl.devices``) the rollouts are drawn from a bf16 copy of the
checkpoint (as verl's vLLM draws them) and everything compared (old log-probs, gradients, their
squared distances) is float32/float64 as on the CPU, where the numbers are unchanged.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vicurl import devices
from vicurl.algos.grpo import grpo_loss
from vicurl.engines.local import LocalTrainer, TrainConfig, sequence_logprobs
from vicurl.engines.step import seed_for
from vicurl.methods import probeable
from vicurl.probes import variance

METHODS = ("exact", "streaming", "sketch")


@dataclass(frozen=True)
class ProbeConfig:
    n_prompts: int = 32
    rollouts: int = 8  # K
    method: str = "exact"
    sketch_dim: int = 4096
    seed: int = 0


def probe_prompt_ids(train_df: pd.DataFrame, n: int, seed: int) -> list[str]:
    """The fixed probe batch: the first ``n`` of a seeded permutation of the training set."""
    if n > len(train_df):
        raise ValueError(f"probes.n_prompts={n} exceeds the training set's {len(train_df)} rows")
    order = np.random.default_rng([int(seed), 41]).permutation(len(train_df))
    return [str(train_df["id"].iloc[i]) for i in order[:n]]


def micro_batch_size(device: torch.device, configured: int) -> int:
    """Sequences per forward/backward of a probe: the run's own on the CPU (the demo's numbers);
    one on CUDA, where a 3,584-token sequence's float32 logits over Qwen's 152k vocabulary take
    2.2 GB and the entropy and the backward keep several copies (64 would need ~0.7 TB). The
    per-rollout gradients are one sequence each anyway; only the batched means lose batching."""
    return int(configured) if device.type == "cpu" else 1


def run_probe(
    train_cfg: TrainConfig,
    checkpoint_dir: str | Path,
    base_dir: str | Path,
    train_df: pd.DataFrame,
    *,
    step: int,
    probe: ProbeConfig,
    device: str | torch.device = "auto",
) -> dict[str, Any]:
    """One probe (module docstring); ``device``: ``vicurl.devices.resolve``, the config's ``device``."""
    if probe.method not in METHODS:
        raise ValueError(f"probes.method must be one of {METHODS}, got {probe.method!r}")
    if train_cfg.curriculum not in probeable():
        raise ValueError(f"probes: curriculum {train_cfg.curriculum!r} keeps state across steps; "
                         f"probe runs of {probeable()}")
    t0 = time.perf_counter()
    device = devices.resolve(device)
    cfg = replace(train_cfg, group_size=probe.rollouts, micro_batch_size=micro_batch_size(device, train_cfg.micro_batch_size))
    with tempfile.TemporaryDirectory() as work:
        tr = LocalTrainer(cfg, checkpoint_dir, train_df, work, ref_model_path=base_dir, device=device)
    ids = probe_prompt_ids(tr.train_df, probe.n_prompts, probe.seed)  # the rows it trains on (long prompts dropped)
    part = tr._rollout(ids, seed=seed_for(probe.seed, 5, cfg.seed, step))  # independent across run seeds
    selection = tr.curriculum.select(tr._batch(part, step + 1))
    kept = selection.mask.bool()
    n_rows = len(part.rollouts.texts)
    ref_lp = None if tr.ref is None else tr._logprobs(tr.ref, part.rollouts, torch.arange(n_rows), False)[0]
    tr.ref = tr._sampler = None  # not needed past here: on a GPU their memory goes to the gradients
    params = [p for p in tr.policy.parameters() if p.requires_grad]
    tr.policy.eval()

    def mean_grad(rows) -> list[torch.Tensor]:
        """Gradient of the mean surrogate over ``rows`` (seq-mean-token-mean, weight 1)."""
        rows = torch.as_tensor(list(rows))
        tr.policy.zero_grad(set_to_none=True)
        for s in range(0, len(rows), cfg.micro_batch_size):
            r = rows[s : s + cfg.micro_batch_size]
            lp, _ = sequence_logprobs(tr.policy, part.rollouts, r, cfg.temperature, with_entropy=False)
            loss, _ = grpo_loss(lp, part.old_lp[r], part.advantages[r], part.rollouts.response_mask[r],
                                torch.ones(len(r)), cfg.loss, ref_log_prob=None if ref_lp is None else ref_lp[r],
                                global_batch_size=len(rows))
            loss.backward()
        return [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params]

    k = probe.rollouts
    if probe.method == "streaming":
        est = variance.streaming(mean_grad, lambda row: mean_grad([row]), len(ids), k, kept)
    else:
        if probe.method == "sketch":
            names = [(n, p.shape) for n, p in tr.policy.named_parameters() if p.requires_grad]
            sketch = variance.CountSketch(names, probe.sketch_dim, seed=probe.seed)
            flat = lambda g: sketch([x.cpu() for x in g])  # noqa: E731  (the sketch's hashes are CPU tensors)
        else:
            flat = lambda g: torch.cat([x.reshape(-1).cpu().double() for x in g])  # noqa: E731  (P*K*d: host memory)
        grads = torch.stack([flat(mean_grad([row])) for row in range(n_rows)]).view(len(ids), k, -1)
        est = variance.from_gradients(grads, kept)
    return {
        "step": int(step),
        "beta_t": float(selection.metrics.get("curriculum/beta_target", float("nan"))),
        "n_prompts": len(ids),
        "n_kept": int(kept.sum()),
        "rollouts": k,
        "method": probe.method,
        "reward_mean": float(part.rewards.mean()),
        "conf_mean": float(part.confidence.mean()),
        **est,
        "seconds": time.perf_counter() - t0,
    }
