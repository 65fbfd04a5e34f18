"""The VI-CuRL step inside verl's GRPO loop, on verl's own batches (``verl.protocol.DataProto``).

verl keeps a batch's rows in its own order (``trainer.balance_batch`` reorders them across
data-parallel ranks); the G rollouts of a prompt share a ``uid``. ``Hook`` puts the rows in
prompt-major order (groups in order of first appearance, rows in batch order within a group),
calls the pure functions of `vicurl.engines.step` that the local engine calls, and maps the
results back onto verl's rows:

``score``    after the old-policy pass: rewards (all four sources, oracle included, so both
             engines grade with the same code), advantages, confidences; writes the rewards
             into the batch's token-level scores *in place* (before verl computes advantages)
``weigh``    before the actor update: the curriculum's w_j / beta_t per row, turned into a
             ``LossPlan`` verl's loss computes exactly (see ``loss_plan``)

Nothing here needs Ray or a GPU.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vicurl import rewards as reward_sources
from vicurl.algos.grpo import outcome_to_token_rewards
from vicurl.curriculum import Batch, Selection, make_curriculum
from vicurl.engines import step as engine_step

# curricula the verl engine runs, and why the others do not (the launcher refuses them)
SUPPORTED_CURRICULA = ("none", "vicurl", "reverse_confidence", "random", "length_first", "static_confidence",
                       "soft_confidence")
UNSUPPORTED_CURRICULA = {
    "vcrl": "its memory-bank replay rolls out extra prompts in the middle of a step, which needs a second "
            "generation inside RayPPOTrainer.fit (a copy of fit); use engine: local",
    "adarft": "it chooses each step's prompts (Curriculum.propose), which needs a curriculum-driven sampler "
              "for verl's prefetching dataloader; use engine: local",
    "sent": "it chooses each step's prompts (Curriculum.propose), which needs a curriculum-driven sampler "
            "for verl's prefetching dataloader; use engine: local",
}


def check_settings(settings: dict[str, Any]) -> None:
    """Settings the verl engine cannot run exactly: an error naming the config key."""
    cur = settings.get("curriculum", "none")
    if cur in UNSUPPORTED_CURRICULA:
        raise ValueError(f"engine verl: curriculum {cur!r} is not supported: {UNSUPPORTED_CURRICULA[cur]}")
    if cur not in SUPPORTED_CURRICULA:
        raise ValueError(f"engine verl: unknown curriculum {cur!r}")
    reward_sources.check_params(settings.get("reward", "oracle"), settings.get("reward_params", {}))
    n_votes = (settings.get("reward_params") or {}).get("n_votes")
    if n_votes is not None and int(n_votes) != int(settings.get("group_size", 8)):
        raise ValueError("engine verl: rewards.majority_vote.n_votes must be null (vote with the G trained rollouts); "
                         "TTRL's n_votes > G needs extra samples per prompt, use engine: local")
    if settings.get("loss_agg_mode", "seq-mean-token-mean") != "seq-mean-token-mean":
        raise ValueError("engine verl: train.loss_agg_mode must be seq-mean-token-mean")
    if cur == "soft_confidence" and settings.get("weight_kl", True) and settings.get("kl_coef", 0.001) > 0:
        raise ValueError("engine verl: soft_confidence gives non-uniform weights, and verl's KL loss has no "
                         "per-sample weight; set train.weight_kl: false for this study (the policy term stays "
                         "weighted exactly) or use engine: local")


# ---------------------------------------------------------------- rows and groups


def group_rows(uids: np.ndarray, group_size: int) -> np.ndarray:
    """Row indices in prompt-major order: groups by first appearance of their uid, rows in
    batch order within a group. Every group must have ``group_size`` rows."""
    uids = np.asarray(uids)
    _, first, inverse = np.unique(uids, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))  # group id -> its first-appearance rank
    order = np.lexsort((np.arange(len(uids)), rank[inverse]))
    counts = np.bincount(inverse)
    if (counts != group_size).any():
        raise ValueError(f"every prompt needs {group_size} rollouts (actor_rollout_ref.rollout.n); got {sorted(set(counts))}")
    return order


def _field(row_dicts: np.ndarray, key: str, default: Any = None) -> list[Any]:
    return [(d or {}).get(key, default) if isinstance(d, dict) else default for d in row_dicts]


# ---------------------------------------------------------------- the loss plan


@dataclass
class LossPlan:
    """How the curriculum weights enter verl's actor loss, exactly.

    verl's loss per mini-batch of N sequences (seq-mean-token-mean, normalizer ``global_batch_size``):
        1/gbs * sum_i [ is_w_i * pg_i + kl_coef * kl_i ],  sequences with an all-zero response mask
    contributing nothing. The local engine's (and the paper's) loss is
        1/N * sum_i w_i * [ pg_i + kl_coef * kl_i ]    (weight_kl)   or   1/N * sum_i [ w_i pg_i + kl_coef kl_i ].
    With ``keep`` (rows whose response mask stays), ``is_weights`` and ``scale`` s below and
    gbs = N / s, the two are equal.
    """

    keep: torch.Tensor  # (N,) bool
    is_weights: torch.Tensor  # (N,) rollout_is_weights per sequence (broadcast over tokens)
    scale: float  # s: the normalizer global_batch_size is divided by it


def loss_plan(seq_w: torch.Tensor, weight_kl: bool, kl_on: bool, atol: float = 1e-6) -> LossPlan:
    """The per-row masks and weights that make verl's loss the weighted loss of ``seq_w``.

    - no KL term, or KL not weighted: every row stays, rollout_is_weights = w, s = 1 (exact for any w)
    - weighted KL: rows with w = 0 get an all-zero response mask (no policy nor KL term), the kept
      rows rollout_is_weights = w / s and the normalizer N / s, s their common weight; exact when the
      kept rows share one weight (every beta-share curriculum: 1/beta_t), which is checked.
    """
    w = seq_w.float()
    if not kl_on or not weight_kl:
        return LossPlan(torch.ones_like(w, dtype=torch.bool), w.clone(), 1.0)
    keep = w != 0
    if not keep.any():
        return LossPlan(keep, torch.zeros_like(w), 1.0)
    s = float(w[keep].max())
    if float((w[keep] - s).abs().max()) > atol * max(1.0, abs(s)):
        raise ValueError("weighted KL with non-uniform curriculum weights: verl's KL loss has no per-sample "
                         "weight; set train.weight_kl: false")
    return LossPlan(keep, torch.where(keep, w / s, torch.zeros_like(w)), s)


# ---------------------------------------------------------------- the hook


@dataclass
class _Scored:
    rows: np.ndarray  # prompt-major order of the batch rows
    prompt_ids: list[str]
    scored: engine_step.Scored
    lengths: torch.Tensor  # (N,) prompt-major
    metrics: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0


class Hook:
    """Settings, curriculum and per-step state of one run inside verl's trainer."""

    def __init__(self, settings: dict[str, Any], train_df: pd.DataFrame, tokenizer, vocab_size: int,
                 total_steps: int, metrics_path: str | Path | None = None, prompt_stats: pd.DataFrame | None = None):
        check_settings(settings)
        self.settings = dict(settings)
        self.G = int(settings.get("group_size", 8))
        self.reward = settings.get("reward", "oracle")
        self.reward_params = dict(settings.get("reward_params") or {})
        self.weight_kl = bool(settings.get("weight_kl", True))
        self.kl_on = float(settings.get("kl_coef", 0.001)) > 0
        self.seed = int(settings.get("seed", 0))
        self.total_steps = int(total_steps)
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size)
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.curriculum = make_curriculum(settings.get("curriculum", "none"), settings.get("curriculum_params") or {})
        self.curriculum.setup(train_df, batch_size=int(settings.get("batch_size", 128)), total_steps=self.total_steps,
                              seed=self.seed, stats=prompt_stats)
        self.pending: _Scored | None = None

    # -------------------------------------------------------- after the old-policy pass

    def score(self, batch, entropys: torch.Tensor) -> _Scored:
        """Rewards, advantages and confidences of a verl batch; the rewards go into
        ``batch.batch["rm_scores"]`` in place (the tensor verl's ``extract_reward`` handed out)."""
        t0 = time.perf_counter()
        rows = group_rows(batch.non_tensor_batch["uid"], self.G)
        idx = torch.as_tensor(rows, dtype=torch.long)
        mask = batch.batch["response_mask"][idx]
        responses = batch.batch["responses"][idx]
        texts = engine_step.decode_responses(self.tokenizer, responses, mask)
        first = rows[:: self.G]
        ntb = batch.non_tensor_batch
        extra = ntb["extra_info"][first] if "extra_info" in ntb else np.array([{}] * len(first), dtype=object)
        golds = [str(g) for g in _field(ntb["reward_model"][first], "ground_truth", "")]
        prompt_ids = [str(i) for i in _field(extra, "id")]
        answer_types = [t or "math" for t in _field(extra, "answer_type", "math")]
        options = [list(o) if o is not None else [] for o in _field(extra, "options", [])]
        scored = engine_step.score(self.reward, self.reward_params, texts, mask, entropys[idx].float(), golds=golds,
                                   answer_types=answer_types, options=options, group_size=self.G,
                                   vocab_size=self.vocab_size)
        rm = batch.batch["rm_scores"]
        rm.zero_()
        rm[idx] = outcome_to_token_rewards(scored.rewards, mask).to(rm.dtype)
        lengths = mask.sum(-1)
        eos = self.tokenizer.eos_token_id
        truncated = ~((responses == eos) & mask.bool()).any(-1) if eos is not None else lengths >= mask.shape[1]
        metrics = {**engine_step.rollout_metrics(scored.rewards, scored.correct, lengths, truncated,
                                                 entropys[idx].float(), mask), **scored.metrics}
        self.pending = _Scored(rows, prompt_ids, scored, lengths, metrics, t0)
        return self.pending

    # -------------------------------------------------------- before the actor update

    def weigh(self, batch, step: int) -> tuple[torch.Tensor, LossPlan, Selection, Batch]:
        """Per-row weights w_j / beta_t of the curriculum (in verl's row order) and their loss plan."""
        if self.pending is None:
            raise RuntimeError("Hook.weigh before Hook.score: the old-policy pass did not run (rollout "
                               "correction's bypass mode skips it; the verl engine does not support it)")
        p = self.pending
        cb = engine_step.curriculum_batch(p.scored, p.lengths, p.prompt_ids, step, self.total_steps, self.seed, self.G)
        selection = self.curriculum.select(cb)
        if selection.replay:
            raise RuntimeError(f"curriculum {self.curriculum.name!r} asked for replay; the verl engine cannot roll out mid-step")
        self.curriculum.observe(cb, selection)
        seq_w = engine_step.sequence_weights(selection.weights, p.scored.keep, self.G)
        w_rows = torch.zeros(len(p.rows), dtype=torch.float32)
        w_rows[torch.as_tensor(p.rows, dtype=torch.long)] = seq_w.float()
        return w_rows, loss_plan(w_rows, self.weight_kl, self.kl_on), selection, cb

    def record(self, step: int, selection: Selection, plan: LossPlan, actor_metrics: dict[str, float]) -> dict[str, Any]:
        """The step's row of ``metrics.jsonl`` (the local engine's columns), appended to the file."""
        p = self.pending
        rec = {"step": int(step), **p.metrics, **selection.metrics, **actor_metrics,
               "actor/update_seqs": float(plan.keep.sum()),
               "time/step_s": time.perf_counter() - p.t0}
        if self.metrics_path is not None:
            self.metrics_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.metrics_path, "a") as f:
                f.write(json.dumps(_finite(rec), sort_keys=True) + "\n")
        self.pending = None
        return rec


def _finite(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in metrics.items()}


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The metrics file of a (possibly resumed) run: the last record of each step, in step order."""
    by_step: dict[int, dict[str, Any]] = {}
    p = Path(path)
    if p.exists():
        for line in p.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                by_step[int(rec["step"])] = rec
    return [by_step[s] for s in sorted(by_step)]
