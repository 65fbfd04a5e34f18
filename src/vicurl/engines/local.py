"""The local engine: GRPO + curriculum in one process (the demo and the tests on the CPU).

One training step is the paper's Algorithm 1: B prompts, G rollouts each from pi_old; old and
reference log-probs and entropies; rewards per group and group-normalized advantages
(`vicurl.engines.rollout.RolloutScorer`, which the variance probes share); the curriculum's weights
w_j / beta-hat_t (`vicurl.engines.step`); PPO epochs over mini-batches of prompts with AdamW. The
trainer owns the optimizer, the curriculum's state and the checkpoints; every random draw is seeded
from (seed, step), so a resumed run ends with exactly an uninterrupted one's numbers
(docs/resume.md). On CUDA the policy and reference stay float32 and rollouts come from a bf16 copy;
rollouts, log-probs, rewards and advantages are CPU tensors whatever the device.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import AutoTokenizer

from vicurl.algos.grpo import grpo_loss, loss_config
from vicurl.config.settings import TrainSettings
from vicurl.curriculum import make_curriculum, schedules
from vicurl.data.long_prompts import fit_training_set, write_report
from vicurl.engines import step as engine_step
from vicurl.engines import workdir
from vicurl.engines.rollout import RolloutScorer, load_models, sequence_logprobs
from vicurl.runtime import devices
from vicurl.runtime.io import atomic_path, link_or_copy, write_text

log = logging.getLogger(__name__)


class LocalTrainer:
    def __init__(self, cfg: TrainSettings, model_path: str | Path, train_df: pd.DataFrame, work_dir: str | Path,
                 prompt_stats: pd.DataFrame | None = None, device: str | torch.device = "cpu",
                 source: str = "the training set"):
        """``device`` (``vicurl.runtime.devices.resolve``): the CPU by default, so local training keeps the
        demo's numbers anywhere. ``source``: the training set's file, named in errors and in the log.

        Prompts over ``max_prompt_length`` tokens are dropped (``long_prompts: drop``; the count and
        ids in ``<work>/long_prompts.json``, ``self.long_prompts`` and the log) or refuse the set
        (``fail``), as on the verl engine: ``self.train_df`` holds the rows trained on."""
        self.cfg = cfg
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        # before anything sees the rows: a prompt too long to sample from would fail an allocation
        # deep in `generate`, naming neither the set nor the row
        self.train_df, self.prompts, self.long_prompts = fit_training_set(train_df, self.tokenizer, cfg, source)
        write_report(self.work_dir, self.long_prompts, source)
        self.device = devices.resolve(device)
        self.policy, self.ref = load_models(model_path, cfg, self.device)
        self.scorer = RolloutScorer(self.policy, self.ref, self.tokenizer, self.device, cfg, self.train_df, self.prompts)
        self.ids, self.row_of, self.vocab_size = self.scorer.ids, self.scorer.row_of, self.scorer.vocab_size
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=cfg.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
        )
        self.curriculum = make_curriculum(cfg.curriculum, cfg.curriculum_params)
        self.curriculum_steps = self.scorer.curriculum_steps
        self.curriculum.setup(self.train_df, batch_size=cfg.batch_size, total_steps=self.curriculum_steps, seed=cfg.seed,
                              stats=prompt_stats)
        self.step = 0
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------ data order

    def batch_indices(self, step: int) -> np.ndarray:
        """Prompts of step ``step`` (1-based): a fresh seeded permutation each epoch, last partial batch dropped."""
        return engine_step.batch_indices(len(self.train_df), self.cfg.batch_size, self.cfg.seed, step)

    # ------------------------------------------------------------ one step

    def train_step(self, step: int) -> dict[str, Any]:
        cfg, G = self.cfg, self.cfg.group_size
        t0 = time.perf_counter()
        default_ids = [self.ids[i] for i in self.batch_indices(step)]
        scorer = self.scorer
        part = scorer.rollout(self.curriculum.propose(step, default_ids), seed=engine_step.seed_for(cfg.seed, 2, step))
        batch = scorer.curriculum_batch(part, step)
        selection = self.curriculum.select(batch)
        if selection.replay:  # VCRL: refill dropped slots with memory-bank prompts, rolled out now
            extra = scorer.rollout(selection.replay, seed=engine_step.seed_for(cfg.seed, 4, step))
            replayed = scorer.curriculum_batch(extra, step)
            selection = self.curriculum.after_replay(selection, batch, replayed)
            batch, part = batch.concat(replayed), part.concat(extra, self.tokenizer.pad_token_id)
        self.curriculum.observe(batch, selection)
        t_rollout = time.perf_counter() - t0

        t1 = time.perf_counter()
        seq_w = engine_step.sequence_weights(selection.weights, part.scored.keep, G)  # EMPO's drop
        update = self._update(step, part.rollouts, part.old_lp, part.scored.advantages, seq_w)
        t_update = time.perf_counter() - t1

        return {
            "step": step,
            **engine_step.rollout_metrics(part.scored.rewards, part.scored.correct, part.rollouts.lengths,
                                          part.rollouts.truncated, part.entropys, part.rollouts.response_mask),
            **part.scored.metrics,
            **selection.metrics,
            **update,
            "time/rollout_s": t_rollout,
            "time/update_s": t_update,
            "time/step_s": time.perf_counter() - t0,
        }

    def _contributes(self, seq_w: torch.Tensor) -> torch.Tensor:
        """Sequences whose loss term can be non-zero. A zero curriculum weight silences the policy
        term, and the KL term too when w/beta weights it (or there is no KL): such sequences need
        no forward or backward pass at all (the compute saving the paper claims for VI-CuRL)."""
        if not self.cfg.skip_dropped or (self.cfg.kl_coef > 0 and not self.cfg.weight_kl):
            return torch.ones_like(seq_w, dtype=torch.bool)
        return seq_w != 0

    def _update(self, step, rollouts, old_lp, advantages, seq_w) -> dict[str, float]:
        """PPO epochs over mini-batches of prompts; AdamW steps.

        Each mini-batch's loss is normalized by all of its sequences (seq-mean-token-mean over
        the mini-batch, as verl does), whether or not they are processed: skipping the dropped
        ones is then exactly the masked, w/beta-weighted gradient of the paper, computed on the
        kept prompts only (equivalently: their plain gradients averaged over a mini-batch scaled
        by beta). The reference policy is scored only on the sequences that need it.
        """
        cfg, G = self.cfg, self.cfg.group_size
        loss_cfg = loss_config(cfg)
        n_prompts = len(seq_w) // G
        mini = cfg.mini_batch_size or n_prompts
        active = self._contributes(seq_w)
        ref_lp = None
        if self.ref is not None:
            need = torch.nonzero(active).flatten()
            ref_lp = torch.zeros_like(old_lp)
            ref_lp[need] = self.scorer.ref_logprobs(rollouts, need)
        params = [p for p in self.policy.parameters() if p.requires_grad]
        sums: dict[str, float] = {}
        n_mb, grad_norms, processed = 0, [], 0
        for epoch in range(cfg.ppo_epochs):
            order = np.random.default_rng(engine_step.seed_for(cfg.seed, 3, step, epoch)).permutation(n_prompts)
            for m in range(0, n_prompts, mini):
                prompts_mb = order[m : m + mini]
                seqs = torch.as_tensor((prompts_mb[:, None] * G + np.arange(G)).reshape(-1))
                run = seqs[active[seqs]]
                self.optimizer.zero_grad(set_to_none=True)
                for s in range(0, len(run), cfg.micro_batch_size):
                    rows = run[s : s + cfg.micro_batch_size]
                    lp, _ = sequence_logprobs(self.policy, rollouts, rows, cfg.temperature, with_entropy=False)
                    loss, metrics = grpo_loss(
                        lp,
                        old_lp[rows],
                        advantages[rows],
                        rollouts.response_mask[rows],
                        seq_w[rows],
                        loss_cfg,
                        ref_log_prob=None if ref_lp is None else ref_lp[rows],
                        global_batch_size=len(seqs),
                    )
                    loss.backward()
                    for k, v in metrics.items():
                        sums[k] = sums.get(k, 0.0) + v
                    n_mb += 1
                processed += len(run)
                for p in params:  # an all-dropped mini-batch still takes its (zero-gradient) AdamW step
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)))
                self.optimizer.step()
        out = {k: v / max(n_mb, 1) for k, v in sums.items()}
        out["actor/grad_norm"] = float(np.mean(grad_norms)) if grad_norms else 0.0
        out["actor/update_seqs"] = float(processed)
        return out

    # ------------------------------------------------------------ checkpoints

    def _ckpt_path(self, step: int) -> Path:
        return self.work_dir / f"ckpt_step{step:06d}.pt"

    def latest_checkpoint(self) -> Path | None:
        found = sorted(self.work_dir.glob("ckpt_step*.pt"))
        return found[-1] if found else None

    def save_checkpoint(self) -> None:
        state = {
            "step": self.step,
            "model": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "curriculum": self.curriculum.state_dict(),
            "history": self.history,
            "config": asdict(self.cfg),
        }
        with atomic_path(self._ckpt_path(self.step)) as tmp:
            torch.save(state, tmp)
        for old in sorted(self.work_dir.glob("ckpt_step*.pt"))[: -self.cfg.keep_checkpoints]:
            old.unlink()

    def load_checkpoint(self, path: Path) -> None:
        """Resume from ``path``: a checkpoint of this run, or the last one of the run it continues
        (`fork`), written with the same settings except how long it trains (the curriculum's
        schedule spanning the same steps)."""
        state = torch.load(path, map_location="cpu", weights_only=False)
        if _comparable(state["config"]) != _comparable(asdict(self.cfg)):
            raise RuntimeError(f"checkpoint {path} was written with other training settings; delete {self.work_dir} to restart")
        if int(state["step"]) > self.cfg.total_steps:
            raise RuntimeError(f"checkpoint {path} is of step {state['step']}, past this run's {self.cfg.total_steps} steps")
        self.policy.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.curriculum.load_state_dict(state["curriculum"])
        self.history = state["history"]
        self.step = state["step"]
        log.info("resumed from %s (step %d)", path, self.step)

    def fork(self, source_work_dir: str | Path, step: int) -> None:
        """Start this run from the final state (step ``step``) of the run it continues: its last
        checkpoint, hard-linked (copied across file systems) into this run's work folder, so the
        next ``run`` resumes from it. A no-op once this run has a checkpoint of its own."""
        if self.latest_checkpoint() is not None:
            return
        src = Path(source_work_dir) / self._ckpt_path(step).name
        if not src.exists():
            raise RuntimeError(f"{src} is missing: the run this one continues has no training state of step {step} "
                               f"(its work folder was deleted?); retrain it to continue from it")
        with atomic_path(self._ckpt_path(step)) as tmp:
            link_or_copy(src, tmp)
        log.info("continuing from %s (step %d)", src, step)

    def export_dir(self, step: int) -> Path:
        return self.work_dir / "exports" / f"step{step}"

    def export(self, step: int) -> None:
        """A Hugging Face copy of the policy, loadable like any model by the evaluation rules."""
        with atomic_path(self.export_dir(step)) as tmp:
            self.policy.save_pretrained(tmp)
            self.tokenizer.save_pretrained(tmp)

    # ------------------------------------------------------------ the loop

    def run(self, until_step: int | None = None, tracker=None) -> list[dict[str, Any]]:
        """Train to ``total_steps`` (or stop after ``until_step``), resuming from the latest checkpoint; each
        step's metrics row is appended to ``<work>/metrics.jsonl`` (`workdir.PROGRESS`) and logged to
        ``tracker`` (`vicurl.runtime.tracking.Tracker`), as verl's loop does."""
        ckpt = self.latest_checkpoint()
        if ckpt is not None:
            self.load_checkpoint(ckpt)
        last = self.cfg.total_steps if until_step is None else min(until_step, self.cfg.total_steps)
        while self.step < last:
            step = self.step + 1
            metrics = self.train_step(step)
            self.step = step
            self.history.append(metrics)
            workdir.append_progress(self.work_dir / workdir.PROGRESS, engine_step.finite_metrics(metrics))
            if tracker is not None:
                tracker.log(metrics, step)
            log.info("step %d %s", step, json.dumps({k: round(v, 4) for k, v in metrics.items() if isinstance(v, float)}))
            if step in self.cfg.export_steps and not self.export_dir(step).exists():
                self.export(step)
            if step % self.cfg.save_every == 0 or step == self.cfg.total_steps:
                self.save_checkpoint()
        return self.history

    def publish(self, checkpoint_dirs: dict[int, str | Path], metrics_path: str | Path) -> None:
        """Copy the exports and metrics into the declared outputs (hard links where possible)."""
        for step, dest in checkpoint_dirs.items():
            src = self.export_dir(step)
            if not src.exists():
                raise RuntimeError(f"no export for step {step} in {src}; is it in train.export_steps?")
            with atomic_path(dest) as tmp:
                shutil.copytree(src, tmp, copy_function=link_or_copy)
        write_text(metrics_path, "".join(json.dumps(engine_step.finite_metrics(m), sort_keys=True) + "\n" for m in self.history))


def _comparable(settings: dict[str, Any]) -> str:
    """The settings a checkpoint must share with the run resuming from it: all but how long the
    run trains and what it saves, with the curriculum's span resolved (continued runs: `fork`)."""
    out = {k: v for k, v in settings.items()
           if k not in ("save_every", "keep_checkpoints", "export_steps", "total_steps", "curriculum_steps")}
    out["curriculum_steps"] = schedules.curriculum_steps(settings["total_steps"], settings.get("curriculum_steps"))
    return json.dumps(out, sort_keys=True, default=list)


