"""The local engine: GRPO + curriculum in one process (the demo and the tests on the CPU; the
variance probes on a GPU when the job has one, ``device``).

One training step (paper, Algorithm 1):
  1. sample B prompts, G rollouts each from pi_old (transformers ``generate``)
  2. one forward pass of pi_old gives old log-probs and per-token entropies; pi_ref gives ref log-probs
  3. rewards per group (`vicurl.rewards.group_rewards`), group-normalized advantages (verl core_algos)
  4. the curriculum turns confidences into per-prompt weights w_j / beta-hat_t
  5. PPO epochs over mini-batches of prompts, micro-batches of sequences, AdamW

Every random draw is seeded from (seed, step), so a run resumed from a checkpoint ends with
exactly the numbers of an uninterrupted one.

Devices: the policy and the reference live on ``device`` in float32 (gradients, log-probs and
the variance probes' differences of gradients need it); on CUDA rollouts are drawn from a bf16
copy of the policy, as verl draws them with bf16 vLLM and rescores with its actor. Rollouts,
log-probs, rewards and advantages are CPU tensors whatever the device.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from vicurl import devices
from vicurl import rewards as reward_sources
from verl.utils.torch_functional import logprobs_from_logits

from vicurl.algos.confidence import logprobs_and_entropy
from vicurl.algos.grpo import LossConfig, grpo_loss
from vicurl.engines import step as engine_step
from vicurl.curriculum import Batch, make_curriculum
from vicurl.generation import Rollouts, sample
from vicurl.io import atomic_path, link_or_copy, write_text
from vicurl.long_prompts import fit_training_set, write_report

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    """Training settings of one run (defaults: the paper's hyperparameter table)."""

    total_steps: int
    curriculum_steps: int | None = None  # the curriculum schedule's span; None = total_steps (engine_step.curriculum_steps)
    batch_size: int = 128  # prompts per step
    group_size: int = 8  # G
    lr: float = 3e-6
    weight_decay: float = 0.01  # verl's AdamW default
    adam_betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0  # verl's actor default
    temperature: float = 1.0  # rollout temperature
    top_p: float = 1.0
    max_prompt_length: int = 512
    long_prompts: str = "drop"  # a longer prompt is dropped and counted, or refuses the set (vicurl.long_prompts)
    max_response_length: int = 3072
    mini_batch_size: int | None = None  # prompts per optimizer step; None = the whole batch
    micro_batch_size: int = 64  # sequences per forward/backward
    ppo_epochs: int = 1
    clip_ratio: float = 0.2
    kl_coef: float = 0.001
    kl_type: str = "low_var_kl"
    loss_agg_mode: str = "seq-mean-token-mean"
    weight_kl: bool = True
    skip_dropped: bool = True  # no forward/backward for zero-weight sequences (exact; see _update)
    rollout_batch_size: int = 256  # sequences per generate call
    save_every: int = 10
    keep_checkpoints: int = 1
    export_steps: list[int] = field(default_factory=list)
    seed: int = 0
    prompt_order: str = "question_first"
    chat_template: bool | str = "auto"  # models.<name>.chat_template (vicurl.prompts)
    reward: str = "oracle"
    reward_params: dict[str, Any] = field(default_factory=dict)
    curriculum: str = "none"
    curriculum_params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown training setting(s) {unknown}")
        d = dict(d)
        if "adam_betas" in d:
            d["adam_betas"] = tuple(d["adam_betas"])
        return cls(**d)

    @property
    def loss(self) -> LossConfig:
        return LossConfig(self.clip_ratio, self.kl_coef, self.kl_type, self.loss_agg_mode, self.weight_kl)


def sequence_logprobs(model, rollouts: Rollouts, rows: slice | torch.Tensor, temperature: float, with_entropy: bool):
    """Log-probs (and entropies) of the response tokens of ``rows`` under ``model``, computed on
    the model's device and returned on the CPU (differentiably; both moves are no-ops on the CPU)."""
    dev = model.device
    p_ids, p_mask = rollouts.prompt_ids[rows].to(dev), rollouts.prompt_mask[rows].to(dev)
    r_ids, r_mask = rollouts.response_ids[rows].to(dev), rollouts.response_mask[rows].to(dev)
    input_ids = torch.cat([p_ids, r_ids], dim=1)
    attn = torch.cat([p_mask, r_mask], dim=1)
    position_ids = (attn.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids, attention_mask=attn, position_ids=position_ids, use_cache=False).logits
    logits = logits[:, p_ids.shape[1] - 1 : -1].float()  # the logits that predict response tokens
    if with_entropy:
        lp, ent = logprobs_and_entropy(logits, r_ids, temperature)
        return lp.cpu(), ent.cpu()
    return logprobs_from_logits(logits / temperature, r_ids).cpu(), None  # the update pass needs no entropy


def first_of_each_group(rollouts: Rollouts, n: int, g: int) -> Rollouts:
    """Keep the first ``g`` of every ``n`` prompt-major rows (TTRL: vote with n, train on g)."""
    b = len(rollouts.texts) // n
    rows = (torch.arange(b)[:, None] * n + torch.arange(g)).reshape(-1)
    return Rollouts(rollouts.prompt_ids[rows], rollouts.prompt_mask[rows], rollouts.response_ids[rows],
                    rollouts.response_mask[rows], [rollouts.texts[i] for i in rows.tolist()], rollouts.truncated[rows])


class LocalTrainer:
    def __init__(self, cfg: TrainConfig, model_path: str | Path, train_df: pd.DataFrame, work_dir: str | Path,
                 prompt_stats: pd.DataFrame | None = None, ref_model_path: str | Path | None = None,
                 device: str | torch.device = "cpu", source: str = "the training set"):
        """``ref_model_path``: the frozen reference policy when it is not ``model_path`` itself
        (a variance probe loads a checkpoint as the policy and the initial model as reference).
        ``device`` (``vicurl.devices.resolve``): the CPU by default, so local training keeps the
        demo's numbers anywhere; the variance probes pass theirs (``auto``). ``source``: the
        training set's file, named in errors and in the log.

        Prompts over ``max_prompt_length`` tokens are dropped (``long_prompts: drop``; the count and
        ids in ``<work>/long_prompts.json``, ``self.long_prompts`` and the log) or refuse the set
        (``fail``), as on the verl engine: ``self.train_df`` holds the rows trained on."""
        self.cfg = cfg
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        reward_sources.check_params(cfg.reward, cfg.reward_params)
        # TTRL's n_votes > G: sample n_votes per prompt, train on the first G, let all of them vote
        self.n_votes = int(cfg.reward_params.get("n_votes") or cfg.group_size)
        if self.n_votes < cfg.group_size:
            raise ValueError(f"rewards.{cfg.reward}.n_votes={self.n_votes} is below train.group_size={cfg.group_size}")
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        # before anything sees the rows: a prompt too long to sample from would fail an allocation
        # deep in `generate`, naming neither the set nor the row
        self.train_df, self.prompts, self.long_prompts = fit_training_set(
            train_df, self.tokenizer, max_prompt_length=cfg.max_prompt_length, policy=cfg.long_prompts,
            prompt_order=cfg.prompt_order, chat_template=cfg.chat_template, source=source)
        write_report(self.work_dir, self.long_prompts, source)
        if len(self.train_df) < cfg.batch_size:
            dropped = self.long_prompts["dropped"]
            why = f" once {dropped} longer than {self.long_prompts['limit']} are dropped" if dropped else ""
            raise ValueError(f"{source} has {len(self.train_df)} rows{why}, fewer than train.batch_size={cfg.batch_size}")
        torch.manual_seed(cfg.seed)
        self.device = devices.resolve(device)
        self.policy = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(self.device)
        self.policy.train()
        self._sampler = None  # the bf16 copy rollouts are drawn from on CUDA (``sampling_model``)
        self.ref = None
        if cfg.kl_coef > 0:
            if ref_model_path is None:
                self.ref = copy.deepcopy(self.policy)
            else:
                self.ref = AutoModelForCausalLM.from_pretrained(ref_model_path, dtype=torch.float32).to(self.device)
            self.ref.eval().requires_grad_(False)
        self.vocab_size = self.policy.get_output_embeddings().weight.shape[0]
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(), lr=cfg.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay
        )
        self.curriculum = make_curriculum(cfg.curriculum, cfg.curriculum_params)
        self.curriculum_steps = engine_step.curriculum_steps(cfg.total_steps, cfg.curriculum_steps)
        self.curriculum.setup(self.train_df, batch_size=cfg.batch_size, total_steps=self.curriculum_steps, seed=cfg.seed,
                              stats=prompt_stats)
        self.ids = [str(i) for i in self.train_df["id"]]
        self.row_of = {pid: i for i, pid in enumerate(self.ids)}
        if len(self.row_of) != len(self.ids):
            raise ValueError("training set ids are not unique")
        self.step = 0
        self.history: list[dict[str, Any]] = []

    # ------------------------------------------------------------ data order

    def batch_indices(self, step: int) -> np.ndarray:
        """Prompts of step ``step`` (1-based): a fresh seeded permutation each epoch, last partial batch dropped."""
        return engine_step.batch_indices(len(self.train_df), self.cfg.batch_size, self.cfg.seed, step)

    # ------------------------------------------------------------ one step

    @torch.no_grad()
    def _logprobs(self, model, rollouts: Rollouts, rows: torch.Tensor, with_entropy: bool):
        """Log-probs (and entropies) of ``rows`` under ``model``, micro-batched; no gradient."""
        lps, ents = [], []
        for s in range(0, len(rows), self.cfg.micro_batch_size):
            lp, ent = sequence_logprobs(model, rollouts, rows[s : s + self.cfg.micro_batch_size], self.cfg.temperature, with_entropy)
            lps.append(lp)
            ents.append(ent)
        width = rollouts.response_ids.shape[1]
        if not lps:
            return torch.zeros(0, width), (torch.zeros(0, width) if with_entropy else None)
        return torch.cat(lps), (torch.cat(ents) if with_entropy else None)

    def sampling_model(self):
        """The model rollouts are drawn from: the policy itself on the CPU; on CUDA a bf16 copy
        holding the policy's current weights (kept between steps, refreshed before each use)."""
        dtype = devices.sampling_dtype(self.device)
        if dtype == self.policy.dtype:
            return self.policy
        if self._sampler is None:
            self._sampler = copy.deepcopy(self.policy).to(dtype).requires_grad_(False)
        else:
            self._sampler.load_state_dict(self.policy.state_dict())  # casts to bf16 in place
        return self._sampler

    def _rollout(self, ids: list[str], seed: int) -> "_Part":
        """G rollouts of each prompt in ``ids`` from pi_old, scored: old log-probs and entropies
        (one forward pass), rewards, group-normalized advantages, confidences."""
        cfg, G = self.cfg, self.cfg.group_size
        rows = self.train_df.iloc[[self.row_of[i] for i in ids]]
        rollouts = sample(
            self.sampling_model(),
            self.tokenizer,
            [self.prompts[self.row_of[i]] for i in ids],
            self.n_votes,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_response_length,
            seed=seed,
            batch_size=cfg.rollout_batch_size,
        )
        vote_texts = None
        if self.n_votes > G:
            vote_texts = [rollouts.texts[j * self.n_votes : (j + 1) * self.n_votes] for j in range(len(ids))]
            rollouts = first_of_each_group(rollouts, self.n_votes, G)
        self.policy.eval()  # no dropout in scoring passes
        old_lp, entropys = self._logprobs(self.policy, rollouts, torch.arange(len(rollouts.texts)), with_entropy=True)
        scored = engine_step.score(
            cfg.reward, cfg.reward_params, rollouts.texts, rollouts.response_mask, entropys,
            golds=[str(a) for a in rows["answer"]],
            answer_types=list(rows["answer_type"]) if "answer_type" in rows else None,
            options=[list(o) for o in rows["options"]] if "options" in rows else None,
            group_size=G, vocab_size=self.vocab_size, vote_texts=vote_texts,
        )
        return _Part(
            ids=list(ids),
            rollouts=rollouts,
            old_lp=old_lp,
            entropys=entropys,
            rewards=scored.rewards,
            correct=scored.correct,
            advantages=scored.advantages,
            confidence=scored.confidence,
            keep=scored.keep,
            reward_metrics=scored.metrics,
        )

    def _batch(self, part: "_Part", step: int) -> Batch:
        scored = engine_step.Scored(part.rewards, part.correct, part.advantages, part.confidence, part.keep, {})
        return engine_step.curriculum_batch(scored, part.rollouts.lengths, part.ids, step, self.curriculum_steps,
                                            self.cfg.seed, self.cfg.group_size,
                                            engine_step.reward_bounded(self.cfg.reward))

    def train_step(self, step: int) -> dict[str, Any]:
        cfg, G = self.cfg, self.cfg.group_size
        t0 = time.perf_counter()
        default_ids = [self.ids[i] for i in self.batch_indices(step)]
        part = self._rollout(self.curriculum.propose(step, default_ids), seed=engine_step.seed_for(cfg.seed, 2, step))
        batch = self._batch(part, step)
        selection = self.curriculum.select(batch)
        if selection.replay:  # VCRL: refill dropped slots with memory-bank prompts, rolled out now
            extra = self._rollout(selection.replay, seed=engine_step.seed_for(cfg.seed, 4, step))
            replayed = self._batch(extra, step)
            selection = self.curriculum.after_replay(selection, batch, replayed)
            batch, part = batch.concat(replayed), part.concat(extra, self.tokenizer.pad_token_id)
        self.curriculum.observe(batch, selection)
        t_rollout = time.perf_counter() - t0

        t1 = time.perf_counter()
        seq_w = engine_step.sequence_weights(selection.weights, part.keep, G)  # EMPO's drop
        update = self._update(step, part.rollouts, part.old_lp, part.advantages, seq_w)
        t_update = time.perf_counter() - t1

        return {
            "step": step,
            **engine_step.rollout_metrics(part.rewards, part.correct, part.rollouts.lengths, part.rollouts.truncated,
                                          part.entropys, part.rollouts.response_mask),
            **part.reward_metrics,
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
        n_prompts = len(seq_w) // G
        mini = cfg.mini_batch_size or n_prompts
        active = self._contributes(seq_w)
        ref_lp = None
        if self.ref is not None:
            need = torch.nonzero(active).flatten()
            ref_lp = torch.zeros_like(old_lp)
            ref_lp[need] = self._logprobs(self.ref, rollouts, need, with_entropy=False)[0]
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
                        cfg.loss,
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

    def run(self, until_step: int | None = None) -> list[dict[str, Any]]:
        """Train to ``total_steps`` (or stop after ``until_step``), resuming from the latest checkpoint."""
        ckpt = self.latest_checkpoint()
        if ckpt is not None:
            self.load_checkpoint(ckpt)
        last = self.cfg.total_steps if until_step is None else min(until_step, self.cfg.total_steps)
        while self.step < last:
            step = self.step + 1
            metrics = self.train_step(step)
            self.step = step
            self.history.append(metrics)
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


@dataclass
class _Part:
    """Scored rollouts of some prompts: G sequences per prompt, prompt-major."""

    ids: list[str]
    rollouts: Rollouts
    old_lp: torch.Tensor  # (N, R) log pi_old of the response tokens
    entropys: torch.Tensor  # (N, R) H(pi_old(.|s_t)) at the rollout temperature
    rewards: torch.Tensor  # (N,)
    correct: torch.Tensor  # (N,) oracle correctness (logged whatever the reward)
    advantages: torch.Tensor  # (N, R)
    confidence: torch.Tensor  # (B,) c(x) per prompt
    keep: torch.Tensor  # (B,) bool: False drops the prompt from the update (EMPO's entropy filter)
    reward_metrics: dict[str, float]  # the reward source's ``reward/...`` metrics

    def concat(self, other: "_Part", pad_token_id: int) -> "_Part":
        width = max(self.old_lp.shape[1], other.old_lp.shape[1])

        def cat(a, b):
            pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[1]))  # noqa: E731
            return torch.cat([pad(a), pad(b)])

        return _Part(
            self.ids + other.ids,
            self.rollouts.concat(other.rollouts, pad_token_id),
            cat(self.old_lp, other.old_lp),
            cat(self.entropys, other.entropys),
            torch.cat([self.rewards, other.rewards]),
            torch.cat([self.correct, other.correct]),
            cat(self.advantages, other.advantages),
            torch.cat([self.confidence, other.confidence]),
            torch.cat([self.keep, other.keep]),
            _mean_metrics(self.reward_metrics, len(self.ids), other.reward_metrics, len(other.ids)),
        )


_mean_metrics = engine_step.mean_metrics


def _comparable(settings: dict[str, Any]) -> str:
    """The settings a checkpoint must share with the run resuming from it: all but how long the
    run trains and what it saves, with the curriculum's span resolved (continued runs: `fork`)."""
    out = {k: v for k, v in settings.items()
           if k not in ("save_every", "keep_checkpoints", "export_steps", "total_steps", "curriculum_steps")}
    out["curriculum_steps"] = engine_step.curriculum_steps(settings["total_steps"], settings.get("curriculum_steps"))
    return json.dumps(out, sort_keys=True, default=list)


