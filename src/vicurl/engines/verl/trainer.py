"""``VICuRLTrainer``: verl 0.9.1's legacy ``RayPPOTrainer`` with the VI-CuRL step hooked in.

Three methods are overridden, each calling verl's own first; ``fit()`` is not copied.

``_compute_old_log_prob``  verl's pass returns the old policy's per-token ``entropys`` (which
    ``fit`` pops right after). Before handing them back, the hook scores the batch: rewards of
    the configured source (oracle, majority_vote, entropy, semantic), confidences c(x). The
    rewards are written *in place* into ``batch.batch["rm_scores"]``: in 0.9.1 ``fit`` took
    ``reward_tensor = batch.batch["rm_scores"]`` (``extract_reward``, by reference) just before
    this call and assigns it to ``token_level_scores`` after it, so verl's GRPO advantages
    (``compute_advantage``, the same ``core_algos`` estimator the local engine calls) use them.
``_update_actor``  the curriculum's weights w_j / beta_t enter verl's loss (``hook.loss_plan``):
    ``rollout_is_weights`` on the policy term, an all-zero response mask on zero-weight rows,
    and the loss normalizer ``global_batch_size`` divided by the kept rows' common weight (set on
    the TensorDict verl's ``_update_actor`` sends to the worker group). The curriculum and
    reward metrics join the actor's, so ``fit`` logs them through verl's logger; the hook also
    appends the step's row to the run's ``metrics.jsonl``.
``_save_checkpoint``  after verl's save, a step the workflow evaluates has its ``huggingface/``
    export copied to ``<work>/exports/step{N}`` before ``max_actor_ckpt_to_keep`` deletes it.

The run's settings come from the config section ``vicurl`` the launcher adds
(``vicurl.settings``: a JSON file of `vicurl.runs.train_settings`, ``vicurl.train_set``,
``vicurl.work_dir``, ``vicurl.vocab_size``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer
from verl.utils import tensordict_utils as tu
from verl.utils.metric import reduce_metrics

from vicurl.engines.verl.hook import Hook

# the methods overridden, with the parameters verl 0.9.1 gives them (tests check them)
OVERRIDES = {
    "_compute_old_log_prob": ("self", "batch"),
    "_update_actor": ("self", "batch"),
    "_save_checkpoint": ("self",),
}


class _NormalizerScaledGroup:
    """The actor worker group, except that ``update_actor`` divides the TensorDict's loss normalizer
    ``global_batch_size`` by ``scale`` and adds per-token ``rollout_is_weights``."""

    def __init__(self, group, scale: float):
        self._group, self._scale = group, scale

    def update_actor(self, batch_td):
        gbs = tu.get_non_tensor_data(batch_td, key="global_batch_size", default=None)
        if gbs is None:
            raise RuntimeError("verl's _update_actor no longer sets global_batch_size; the curriculum weights need it")
        tu.assign_non_tensor(batch_td, global_batch_size=gbs / self._scale)
        return self._group.update_actor(batch_td)

    def __getattr__(self, name):
        return getattr(self._group, name)


class VICuRLTrainer(RayPPOTrainer):
    # ------------------------------------------------------------ the hook, built on first use

    def _vicurl_hook(self) -> Hook:
        hook = getattr(self, "_hook", None)
        if hook is None:
            cfg = self.config.vicurl
            settings = json.loads(Path(cfg.settings).read_text())
            from vicurl.data import schema

            stats = pd.read_parquet(cfg.prompt_stats) if cfg.get("prompt_stats") else None
            hook = Hook(settings, schema.read(cfg.train_set), self.tokenizer, int(cfg.vocab_size),
                        total_steps=int(self.total_training_steps),
                        metrics_path=Path(cfg.work_dir) / "metrics.jsonl", prompt_stats=stats)
            self._hook = hook
        return hook

    # ------------------------------------------------------------ overrides

    def _compute_old_log_prob(self, batch: DataProto):
        old_log_prob, mfu = super()._compute_old_log_prob(batch)
        self._vicurl_hook().score(batch, old_log_prob.batch["entropys"])
        return old_log_prob, mfu

    def _update_actor(self, batch: DataProto) -> DataProto:
        hook = self._vicurl_hook()
        step = int(self.global_steps)
        w_rows, plan, selection, _ = hook.weigh(batch, step)
        # a copy of the batch for the update: fit's metrics keep reading the true response mask
        weighted = DataProto(batch=batch.batch.clone(recurse=False), non_tensor_batch=dict(batch.non_tensor_batch),
                             meta_info=dict(batch.meta_info))
        mask = batch.batch["response_mask"]
        weighted.batch["response_mask"] = mask * plan.keep.to(mask.dtype)[:, None]
        weighted.batch["rollout_is_weights"] = plan.is_weights[:, None].expand(mask.shape).to(torch.float32).contiguous()
        group = self.actor_rollout_wg
        self.actor_rollout_wg = _NormalizerScaledGroup(group, plan.scale)
        try:
            actor_output = super()._update_actor(weighted)
        finally:
            self.actor_rollout_wg = group
        actor_metrics = {}
        for k, v in reduce_metrics(dict(actor_output.meta_info["metrics"])).items():  # reduces a copy
            try:
                actor_metrics[k] = float(v)
            except (TypeError, ValueError):
                pass
        rec = hook.record(step, selection, plan, actor_metrics)
        # the curriculum and reward columns go to verl's logger with the actor's metrics (fit logs them)
        for k, v in rec.items():
            if k.startswith(("curriculum/", "reward/")) and k not in actor_output.meta_info["metrics"]:
                actor_output.meta_info["metrics"][k] = v
        return actor_output

    def _save_checkpoint(self):
        super()._save_checkpoint()
        hook = self._vicurl_hook()
        step = int(self.global_steps)
        if step in set(hook.settings.get("export_steps", [])):
            src = Path(self.config.trainer.default_local_dir) / f"global_step_{step}" / "actor" / "huggingface"
            dest = Path(self.config.vicurl.work_dir) / "exports" / f"step{step}"
            if not src.exists():
                raise RuntimeError(f"no Hugging Face export in {src}; the launcher sets actor.checkpoint.save_contents "
                                   f"with hf_model")
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
