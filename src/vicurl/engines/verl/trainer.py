"""``VICuRLTrainer``: verl 0.9.1's legacy ``RayPPOTrainer`` with the VI-CuRL step hooked in.

The hook contract: six of verl's methods are overridden (``OVERRIDES``, with verl 0.9.1's signatures, which a
test checks against the installed verl together with the order in which ``fit`` calls them), each calling
verl's own; ``fit()`` is not copied. Each override's docstring says what it adds: ``init_workers`` (seeded
rollout requests), ``_create_dataloader`` (a curriculum's sampler), ``_compute_old_log_prob`` (the step:
rewards, confidences, selection, replay, the kept rows), ``_update_actor`` (the curriculum's weights in verl's
loss), ``_save_checkpoint`` and ``_load_checkpoint`` (the curriculum's state beside verl's save, the exports).

The run's settings come from the config section ``vicurl`` the launcher adds
(``vicurl.config.settings``: a JSON file of `vicurl.config.runs.train_settings`, ``vicurl.train_set``,
``vicurl.work_dir``, ``vicurl.vocab_size``, ``vicurl.base_model``, ``vicurl.prompt_stats`` for
AdaRFT and SENT).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from verl import DataProto
from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_response_mask
from verl.utils import tensordict_utils as tu
from verl.utils.metric import reduce_metrics

from vicurl.config.settings import TrainSettings
from vicurl.engines import workdir
from vicurl.engines.verl import export
from vicurl.engines.verl.hook import Hook, rollout_agreement
from vicurl.engines.verl.patches.rollout_seeds import SeededRollouts
from vicurl.engines.verl.sampler import CurriculumSampler, proposes
from vicurl.runtime.io import write_json

CURRICULUM_STATE = "vicurl_curriculum.json"  # next to verl's data.pt in global_step_N/

# the methods overridden, with the parameters verl 0.9.1 gives them (tests check them)
OVERRIDES = {
    "init_workers": ("self",),
    "_create_dataloader": ("self", "train_dataset", "val_dataset", "collate_fn", "train_sampler"),
    "_compute_old_log_prob": ("self", "batch"),
    "_update_actor": ("self", "batch"),
    "_save_checkpoint": ("self",),
    "_load_checkpoint": ("self",),
}


def generate_in_equal_chunks(manager, gen_batch: DataProto, workers: int) -> DataProto:
    """``manager.generate_sequences`` of ``gen_batch``, whatever its length: verl's agent loop splits a
    batch into one equal chunk per agent-loop worker (``DataProto.chunk``), and a replay's r x G rows
    need not divide (G = 4, 8 workers, r odd). Copies of its first rows fill the last chunk; their
    rollouts are dropped (and their seeds follow the real rows', so the real rows keep theirs)."""
    padded, pad = pad_dataproto_to_divisor(gen_batch, workers)
    return unpad_dataproto(manager.generate_sequences(padded), pad)


class _NormalizerScaledGroup:
    """The actor worker group, except that ``update_actor`` divides the TensorDict's loss normalizer
    ``global_batch_size`` by ``scale``; with ``one_mini_batch`` (dropped rows removed, one optimizer
    step per batch) the mini-batch is all the rows there are."""

    def __init__(self, group, scale: float, one_mini_batch: bool = False):
        self._group, self._scale, self._one = group, scale, one_mini_batch

    def update_actor(self, batch_td):
        gbs = tu.get_non_tensor_data(batch_td, key="global_batch_size", default=None)
        if gbs is None:
            raise RuntimeError("verl's _update_actor no longer sets global_batch_size; the curriculum weights need it")
        tu.assign_non_tensor(batch_td, global_batch_size=gbs / self._scale)
        if self._one:
            tu.assign_non_tensor(batch_td, mini_batch_size=int(batch_td.batch_size[0]))
        return self._group.update_actor(batch_td)

    def __getattr__(self, name):
        return getattr(self._group, name)


class VICuRLTrainer(RayPPOTrainer):
    # ------------------------------------------------------------ the hook, built on first use

    def _vicurl_hook(self) -> Hook:
        hook = getattr(self, "_hook", None)
        if hook is None:
            cfg = self.config.vicurl
            settings = TrainSettings.from_dict(json.loads(Path(cfg.settings).read_text()))
            from vicurl.data import schema

            stats = pd.read_parquet(cfg.prompt_stats) if cfg.get("prompt_stats") else None
            hook = Hook(settings, schema.read(cfg.train_set), self.tokenizer, int(cfg.vocab_size),
                        total_steps=int(settings.total_steps),
                        metrics_path=Path(cfg.work_dir) / workdir.PROGRESS, prompt_stats=stats)
            self._hook = hook
            from vicurl.grading import symbolic

            symbolic.configure(workers=symbolic.cpu_workers())  # the GPUs wait while the step is graded
        return hook

    # ------------------------------------------------------------ overrides

    def init_workers(self):
        """Verl's rollout manager, wrapped so that, where the config asks (``reproducible``), every rollout
        request carries its own seed (`vicurl.engines.verl.patches.rollout_seeds`): the samples follow from the
        run's seed, resumed or not; it also times each step's generation."""
        super().init_workers()
        # with `reproducible`, every rollout request carries its own seed (`rollout_seeds`): the samples
        # follow from the run's seed; the wrapper also times each step's generation
        hook = self._vicurl_hook()
        self.async_rollout_manager = SeededRollouts(self.async_rollout_manager, hook.seed,
                                                    step_of=lambda: self.global_steps,
                                                    seeded=bool(hook.settings.reproducible))

    def _create_dataloader(self, train_dataset, val_dataset, collate_fn, train_sampler):
        """For curricula that choose each step's prompts (AdaRFT, SENT) the training sampler is
        ``CurriculumSampler`` (`vicurl.engines.verl.sampler`): each step's batch is the curriculum's ``propose``
        for that step, drawn when ``fit`` asks for the batch (single-process dataloader,
        ``data.dataloader_num_workers=0``: after the previous step's feedback). It then checks that verl's
        steps, training rows and batch size are the run's."""
        hook = self._vicurl_hook()
        sampler = None
        if proposes(hook.curriculum):
            workers = int(self.config.data.get("dataloader_num_workers", 0) or 0)
            if workers != 0:
                raise RuntimeError(f"curriculum {hook.curriculum.name!r} chooses each step's prompts after the previous "
                                   f"step's rewards: data.dataloader_num_workers must be 0 (got {workers}; worker "
                                   f"processes prefetch batches)")
            sampler = CurriculumSampler(hook.curriculum, hook.ids, hook.curriculum.batch_size, hook.seed,
                                        step_of=lambda: self.global_steps)
            train_sampler = sampler
        self._vicurl_sampler = sampler
        super()._create_dataloader(train_dataset, val_dataset, collate_fn, train_sampler)
        if int(self.total_training_steps) != hook.total_steps:
            raise RuntimeError(f"verl runs {self.total_training_steps} steps, the settings {hook.total_steps}")
        if sampler is not None or hook.curriculum.name == "vcrl":  # dataset index i must be training-set row i
            if len(self.train_dataset) != len(hook.ids):
                raise RuntimeError(f"verl's training set has {len(self.train_dataset)} rows, the prepared set "
                                   f"{len(hook.ids)} (data.filter_overlong_prompts must stay off)")
            loader_b = self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size
            if int(loader_b) != hook.curriculum.batch_size:
                raise RuntimeError(f"verl draws batches of {loader_b} prompts, the curriculum {hook.curriculum.batch_size}")

    def _compute_old_log_prob(self, batch: DataProto):
        """verl's pass returns the old policy's per-token ``entropys`` (which ``fit`` pops right after). Before
        handing them back, the hook scores the batch: rewards of the configured source (oracle, majority_vote,
        entropy, semantic), confidences c(x). The rewards are written *in place* into
        ``batch.batch["rm_scores"]``: in 0.9.1 ``fit`` took ``reward_tensor = batch.batch["rm_scores"]``
        (``extract_reward``, by reference) just before this call and assigns it to ``token_level_scores`` after
        it, so verl's GRPO advantages (``compute_advantage``, the same ``core_algos`` estimator the local engine
        calls) use them. Then the curriculum selects; when it asks for replay (VCRL's memory bank) the replayed
        prompts are rolled out here with the current policy (= pi_old: no update yet this step), scored the same
        way, and written into the rows of dropped prompts of ``batch`` (in place: every tensor, ``uid`` and the
        other per-row fields, and the returned old log-probs), so the reference pass, advantages and update that
        ``fit`` runs next see them (`Hook.merge_replay` explains why this equals the local engine's appended
        replay). Last, the rows that contribute nothing to the update (dropped prompts) leave the batch, so the
        reference pass and the update run on the kept rows only (``train.skip_dropped``, as the local engine).
        Alongside, vLLM's probabilities of the sampled tokens are compared with the trainer's
        (``rollout_agreement``), and with a curriculum that proposes, the batch's prompts are checked to be the
        ones it proposed."""
        old_log_prob, mfu = super()._compute_old_log_prob(batch)
        hook = self._vicurl_hook()
        step = int(self.global_steps)
        scored = hook.score(batch, old_log_prob.batch["entropys"])
        if "rollout_log_probs" in batch.batch.keys():
            hook.note(rollout_agreement(batch.batch["rollout_log_probs"], old_log_prob.batch["old_log_probs"],
                                        batch.batch["response_mask"]), step)
        sampler = getattr(self, "_vicurl_sampler", None)
        if sampler is not None and sorted(scored.prompt_ids) != sorted(sampler.drawn.get(step, [])):
            raise RuntimeError(f"step {step}: the batch's prompts are not the ones curriculum "
                               f"{hook.curriculum.name!r} proposed")
        selection = hook.select(step)
        if selection.replay:  # VCRL: roll the memory-bank prompts out now, into the rows of dropped prompts
            old_log_prob = self._vicurl_replay(batch, old_log_prob, list(selection.replay))
        if self._vicurl_skips_dropped():
            old_log_prob = self._vicurl_drop_rows(batch, old_log_prob)
        return old_log_prob, mfu

    def _vicurl_skips_dropped(self) -> bool:
        """Dropped prompts leave the batch before the reference pass and the update (``train.skip_dropped``,
        as the local engine skips them) when that is exact: one optimizer step per batch (a smaller
        mini-batch would be cut from fewer rows)."""
        s = self._vicurl_hook().settings
        return bool(s.skip_dropped) and s.mini_batch_size in (None, s.batch_size)

    def _vicurl_drop_rows(self, batch: DataProto, old_log_prob: DataProto) -> DataProto:
        """Remove the rows that contribute nothing to the update (``Hook.droppable``) from ``batch`` in
        place, and from ``old_log_prob`` and the reward tensor ``fit`` holds; kept rows are padded with
        dropped ones (zero weight, zero response mask in the update) to a multiple of the data-parallel
        size. The update is the same, with the reference pass and forward/backward of the kept rows only."""
        hook = self._vicurl_hook()
        w_rows = hook.row_weights(int(self.global_steps))
        drop = hook.droppable(w_rows).numpy()
        if not drop.any():
            return old_log_prob
        dp = self._get_dp_size(self.actor_rollout_wg, "actor")
        kept, dropped = np.flatnonzero(~drop), np.flatnonzero(drop)
        pad = (-len(kept)) % dp if len(kept) else dp
        rows = np.sort(np.concatenate([kept, dropped[:pad]]))
        idx = torch.as_tensor(rows, dtype=torch.long)
        # fit holds the reward tensor and the reward extras' arrays (extract_reward): shrunk in place, as the
        # tensor and arrays it puts back into the batch after the reference pass
        reward_tensor = batch.batch["rm_scores"]
        extras = set(batch.meta_info.get("reward_extra_keys", []))
        batch.batch = batch.batch[idx]
        reward_tensor.set_(batch.batch["rm_scores"])
        batch.batch["rm_scores"] = reward_tensor
        for key, arr in list(batch.non_tensor_batch.items()):
            if key in extras:
                arr[: len(rows)] = arr[rows]
                arr.resize((len(rows),) + arr.shape[1:], refcheck=False)
            else:
                batch.non_tensor_batch[key] = arr[rows]
        if "global_token_num" in batch.meta_info:
            batch.meta_info["global_token_num"] = [batch.meta_info["global_token_num"][i] for i in rows]
        hook.keep_rows(rows)
        return DataProto(batch=old_log_prob.batch[idx], non_tensor_batch={k: v[rows] for k, v in
                                                                          old_log_prob.non_tensor_batch.items()},
                         meta_info=dict(old_log_prob.meta_info))

    def _vicurl_replay(self, batch: DataProto, old_log_prob: DataProto, prompt_ids: list[str]) -> DataProto:
        """Roll out ``prompt_ids`` (G each, the current policy), score them, and copy them over
        dropped prompts' rows of ``batch`` and ``old_log_prob`` in place (`Hook.merge_replay`)."""
        hook = self._vicurl_hook()
        rb = self._vicurl_rollout(prompt_ids)
        dp = self._get_dp_size(self.actor_rollout_wg, "actor")
        padded, pad = pad_dataproto_to_divisor(rb, dp)
        # what fit sets on a step's batch before its old-policy pass (verl 0.9.1 ray_trainer.py:1553): the
        # workers report the pass's mfu from it, and _compute_old_log_prob reads that metric
        padded.meta_info["global_token_num"] = torch.sum(padded.batch["attention_mask"], dim=-1).tolist()
        r_old, _ = super()._compute_old_log_prob(padded)
        r_old = unpad_dataproto(r_old, pad)
        replayed = hook.score_part(rb, r_old.batch["entropys"])  # the rewards go into rb's rm_scores
        dest, src = hook.merge_replay(replayed, int(self.global_steps))
        d, s = torch.as_tensor(dest, dtype=torch.long), torch.as_tensor(src, dtype=torch.long)
        for target, source in ((batch, rb), (old_log_prob, r_old)):
            missing = set(target.batch.keys()) - set(source.batch.keys())
            if missing:
                raise RuntimeError(f"replayed rollouts lack the batch keys {sorted(missing)}")
            for key in target.batch.keys():
                t, v = target.batch[key], source.batch[key]
                if t.shape[1:] != v.shape[1:]:
                    raise RuntimeError(f"replayed rollouts' {key!r} has shape {tuple(v.shape[1:])} per row, the "
                                       f"batch {tuple(t.shape[1:])}")
                t[d] = v[s].to(t.dtype)  # in place: fit holds rm_scores as its reward tensor
            for key, arr in target.non_tensor_batch.items():
                if key not in source.non_tensor_batch:
                    raise RuntimeError(f"replayed rollouts lack the per-row field {key!r}")
                arr[dest] = source.non_tensor_batch[key][src]
        if "global_token_num" in batch.meta_info:
            batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
        return old_log_prob

    def _vicurl_rollout(self, prompt_ids: list[str]) -> DataProto:
        """G rollouts of each of ``prompt_ids`` from the current policy, as ``fit`` builds a step's
        batch in verl 0.9.1 (the lines between ``for batch_dict in self.train_dataloader`` and
        ``compute_response_mask``; a test pins ``fit``'s source, so an upgrade re-checks them)."""
        hook = self._vicurl_hook()
        index_of = {pid: i for i, pid in enumerate(hook.ids)}
        rows = [self.train_dataset[index_of[pid]] for pid in prompt_ids]
        batch = DataProto.from_single_dict(self.train_dataloader.collate_fn(rows))
        batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature
        batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
        gen_batch = self._get_gen_batch(batch)
        gen_batch.meta_info["global_steps"] = self.global_steps
        n = self.config.actor_rollout_ref.rollout.n
        gen_batch_output = gen_batch.repeat(repeat_times=n, interleave=True)
        # fit put the rollout replicas to sleep after this step's generation; waking them is a weight
        # sync, of the weights they already hold (the actor is not updated before _update_actor)
        self.checkpoint_manager.update_weights(self.global_steps)
        gen_output = generate_in_equal_chunks(self.async_rollout_manager, gen_batch_output,
                                              int(self.config.actor_rollout_ref.rollout.agent.num_workers))
        self.checkpoint_manager.sleep_replicas()
        gen_output.meta_info.pop("timing", None)
        batch = batch.repeat(repeat_times=n, interleave=True)
        batch = batch.union(gen_output)
        if "response_mask" not in batch.batch.keys():
            batch.batch["response_mask"] = compute_response_mask(batch)
        if "rm_scores" not in batch.batch.keys():
            raise RuntimeError("replayed rollouts have no rm_scores (verl's reward loop did not run on them)")
        return batch

    def _update_actor(self, batch: DataProto) -> DataProto:
        """The curriculum's weights w_j / beta-hat_t enter verl's loss (``hook.loss_plan``):
        ``rollout_is_weights`` on the policy term, an all-zero response mask on zero-weight rows, and the loss
        normalizer ``global_batch_size`` divided by the kept rows' common weight (set on the TensorDict verl's
        ``_update_actor`` sends to the worker group). The curriculum observes the step (AdaRFT's target moves)
        before ``fit`` draws the next batch. The curriculum and reward metrics join the actor's, so ``fit`` logs
        them through verl's logger; the hook also appends the step's row to the run's ``metrics.jsonl``."""
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
        self.actor_rollout_wg = _NormalizerScaledGroup(group, plan.scale, one_mini_batch=self._vicurl_skips_dropped())
        t0 = time.perf_counter()
        try:
            actor_output = super()._update_actor(weighted)
        finally:
            self.actor_rollout_wg = group
        # the local engine's timing columns: the step's generation (rollout_seeds) and this update
        rollouts = getattr(self, "async_rollout_manager", None)
        actor_metrics = {"time/update_s": time.perf_counter() - t0,
                         "time/rollout_s": float(getattr(rollouts, "seconds", {}).pop(step, float("nan")))}
        for k, v in reduce_metrics(dict(actor_output.meta_info["metrics"])).items():  # reduces a copy
            try:
                actor_metrics[k] = float(v)
            except (TypeError, ValueError):
                pass
        if step in self._vicurl_extra_saves():  # an evaluated step verl's save_freq does not save
            self._save_checkpoint()
        rec = hook.record(step, selection, plan, actor_metrics)
        # the curriculum and reward columns go to verl's logger with the actor's metrics (fit logs them)
        for k, v in rec.items():
            if k.startswith(("curriculum/", "reward/")) and k not in actor_output.meta_info["metrics"]:
                actor_output.meta_info["metrics"][k] = v
        return actor_output

    def _vicurl_extra_saves(self) -> set[int]:
        """Evaluated steps that verl's ``save_freq`` does not save (nor the last step, always saved)."""
        hook = self._vicurl_hook()
        every = int(self.config.trainer.get("save_freq", hook.settings.save_every) or 0)
        return {int(s) for s in hook.settings.export_steps
                if int(s) != hook.total_steps and (every <= 0 or int(s) % every)}

    def _save_checkpoint(self):
        """verl's save, with the curriculum's state written into the step's folder *before* verl's
        tracker names the step (a crash in between leaves the previous step the latest), then the
        step's HF export when the workflow evaluates it."""
        hook = self._vicurl_hook()
        step = int(self.global_steps)
        folder = export.step_dir(self.config.trainer.default_local_dir, step)
        write_json(folder / CURRICULUM_STATE, {"step": step, "curriculum": hook.curriculum.state_dict()})
        super()._save_checkpoint()
        if step in set(hook.settings.export_steps):
            export.export_step(folder / "actor", export.export_dir(self.config.vicurl.work_dir, step),
                               self.config.vicurl.base_model)
        # the saves made before a resume, which verl's in-memory rotation does not know of
        export.prune_shards(self.config.trainer.default_local_dir, int(self.config.trainer.max_actor_ckpt_to_keep))

    def _load_checkpoint(self):
        """After verl's resume, the curriculum's state of that checkpoint; a resume from the run's last step is
        refused (verl's ``fit`` would train one step more)."""
        out = super()._load_checkpoint()
        step = int(getattr(self, "global_steps", 0) or 0)
        if step > 0:  # resumed from global_step_{step}
            hook = self._vicurl_hook()
            if step >= hook.total_steps:  # fit would train step total + 1 before it checks for the end
                raise RuntimeError(f"verl resumed from its save of step {step}, the run's last ({hook.total_steps}): "
                                   f"nothing to train (the launcher publishes a trained run without verl)")
            trainer_cfg = self.config.trainer
            folder = Path(trainer_cfg.resume_from_path) if trainer_cfg.get("resume_mode") == "resume_path" else \
                export.step_dir(trainer_cfg.default_local_dir, step)
            path = folder / CURRICULUM_STATE
            if path.exists():
                hook.curriculum.load_state_dict(json.loads(path.read_text())["curriculum"])
            elif hook.curriculum.state_dict():
                raise RuntimeError(f"{path} is missing: the checkpoint has no state of curriculum "
                                   f"{hook.curriculum.name!r}; delete {folder.parent} to restart")
        return out
