"""The VI-CuRL step inside verl's GRPO loop, on verl's own batches (``verl.protocol.DataProto``).

verl keeps a batch's rows in its own order (``trainer.balance_batch`` reorders them across
data-parallel ranks); the G rollouts of a prompt share a ``uid``. ``Hook`` puts the rows in
prompt-major order (groups in order of first appearance, rows in batch order within a group),
calls the pure functions of `vicurl.engines.step` that the local engine calls, and maps the
results back onto verl's rows:

``score``    after the old-policy pass: rewards (all four sources, oracle included, so both
             engines grade with the same code), advantages, confidences; writes the rewards
             into the batch's token-level scores *in place* (before verl computes advantages)
``select``   then the curriculum's selection (``Curriculum.select``)
``merge_replay``  VCRL: the replayed prompts' scored rollouts take dropped prompts' rows
``weigh``    before the actor update: the curriculum's w_j / beta-hat_t per row, turned into a
             ``LossPlan`` verl's loss computes exactly (see ``loss_plan``); the curriculum
             observes the step

Nothing here needs Ray or a GPU.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vicurl.algos import rewards as reward_sources
from vicurl.algos.grpo import outcome_to_token_rewards
from vicurl.config.checks import verl_refusal
from vicurl.config.settings import TrainSettings
from vicurl.curriculum import Batch, Selection, make_curriculum, schedules
from vicurl.engines import step as engine_step
from vicurl.engines import workdir
from vicurl.models.sampling import decode_responses

log = logging.getLogger(__name__)


def check_settings(settings: TrainSettings | dict[str, Any]) -> TrainSettings:
    """The settings parsed (a run's ``train_config.json`` dict is), refused where the verl engine
    cannot run them exactly: an error naming the config key."""
    s = TrainSettings.of(settings)
    why = verl_refusal(s)
    if why is not None:
        raise ValueError(f"engine verl: {why}")
    reward_sources.check_params(s.reward, s.reward_params)
    return s


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
      kept rows share one weight (every beta-share curriculum: 1/beta-hat_t), which is checked.
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
                         "weight; set train.weight_kl (or curricula.soft_confidence.weight_kl): false")
    return LossPlan(keep, torch.where(keep, w / s, torch.zeros_like(w)), s)


# The probabilities vLLM sampled with against the trainer's for the same tokens: the cheapest check that
# the rollout runs the weights being trained (verl's rollout.calculate_log_probs, kept on for it; vLLM
# computes the sampled token's log-prob only). bf16 on both sides differs by 0.001-0.005 on average.
ROLLOUT_DIFF_WARN = 0.02


def rollout_agreement(rollout_lp: torch.Tensor, old_lp: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Mean and largest |p_rollout - p_trainer| over the response tokens (``rollout/probs_diff_*``)."""
    m = mask.bool()
    diff = (rollout_lp.float().exp() - old_lp.float().exp()).abs()[m]
    if diff.numel() == 0:
        return {}
    return {"rollout/probs_diff_mean": float(diff.mean()), "rollout/probs_diff_max": float(diff.max())}



# ---------------------------------------------------------------- the hook


@dataclass
class _Scored:
    rows: np.ndarray  # prompt-major order of the batch rows
    prompt_ids: list[str]
    scored: engine_step.Scored
    lengths: torch.Tensor  # (N,) prompt-major
    metrics: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0
    truncated: torch.Tensor | None = None  # (N,) prompt-major
    entropys: torch.Tensor | None = None  # (N, R) prompt-major
    mask: torch.Tensor | None = None  # (N, R) prompt-major response mask
    cb: Batch | None = None  # what the curriculum saw (after a replay: batch + replayed)
    selection: Selection | None = None  # the curriculum's choice (after a replay: the final one)
    seq_w: torch.Tensor | None = None  # after a replay: per-sequence weights of the merged batch, prompt-major
    row_subset: np.ndarray | None = None  # the verl rows left after dropping zero-weight ones (``keep_rows``)
    extra: dict[str, float] = field(default_factory=dict)  # other columns of the step's row (``note``)


def _in_order(part: _Scored, ids: list[str], group_size: int) -> _Scored:
    """``part`` with its prompts (groups) in the order of ``ids``."""
    g = int(group_size)
    pos = {pid: i for i, pid in enumerate(part.prompt_ids)}
    groups = torch.as_tensor([pos[i] for i in ids], dtype=torch.long)
    seqs = (groups[:, None] * g + torch.arange(g)).reshape(-1)
    s = part.scored
    scored = engine_step.Scored(s.rewards[seqs], s.correct[seqs], s.advantages[seqs], s.confidence[groups],
                                s.keep[groups], s.metrics)
    return _Scored(part.rows.reshape(-1, g)[groups.numpy()].reshape(-1), list(ids), scored, part.lengths[seqs],
                   part.metrics, part.t0, part.truncated[seqs], part.entropys[seqs], part.mask[seqs])


class Hook:
    """Settings, curriculum and per-step state of one run inside verl's trainer."""

    def __init__(self, settings: TrainSettings | dict[str, Any], train_df: pd.DataFrame, tokenizer, vocab_size: int,
                 total_steps: int, metrics_path: str | Path | None = None, prompt_stats: pd.DataFrame | None = None):
        self.settings = s = check_settings(settings)
        self.G = int(s.group_size)
        self.reward = s.reward
        self.reward_params = dict(s.reward_params)
        self.weight_kl = bool(s.weight_kl)
        self.kl_on = float(s.kl_coef) > 0
        self.seed = int(s.seed)
        self.total_steps = int(total_steps)
        self.curriculum_steps = schedules.curriculum_steps(total_steps, s.curriculum_steps)
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size)
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self.ids = [str(i) for i in train_df["id"]]  # verl's dataset row i is training-set row i
        self.curriculum = make_curriculum(s.curriculum, s.curriculum_params)
        self.curriculum.setup(train_df, batch_size=int(s.batch_size), total_steps=self.curriculum_steps,
                              seed=self.seed, stats=prompt_stats)
        self.pending: _Scored | None = None

    # -------------------------------------------------------- after the old-policy pass

    def score(self, batch, entropys: torch.Tensor) -> _Scored:
        """Rewards, advantages and confidences of a verl batch; the rewards go into
        ``batch.batch["rm_scores"]`` in place (the tensor verl's ``extract_reward`` handed out)."""
        self.pending = self.score_part(batch, entropys)
        return self.pending

    def score_part(self, batch, entropys: torch.Tensor) -> _Scored:
        """``score`` without making the batch the step's pending one (VCRL's replayed prompts)."""
        t0 = time.perf_counter()
        rows = group_rows(batch.non_tensor_batch["uid"], self.G)
        idx = torch.as_tensor(rows, dtype=torch.long)
        mask = batch.batch["response_mask"][idx]
        responses = batch.batch["responses"][idx]
        texts = decode_responses(self.tokenizer, responses, mask)
        first = rows[:: self.G]
        ntb = batch.non_tensor_batch
        extra = ntb["extra_info"][first] if "extra_info" in ntb else np.array([{}] * len(first), dtype=object)
        golds = [str(g) for g in _field(ntb["reward_model"][first], "ground_truth", "")]
        prompt_ids = [str(i) for i in _field(extra, "id")]
        answer_types = [t or "math" for t in _field(extra, "answer_type", "math")]
        options = [list(o) if o is not None else [] for o in _field(extra, "options", [])]
        ent = entropys[idx].float()
        scored = engine_step.score(self.reward, self.reward_params, texts, mask, ent, golds=golds,
                                   answer_types=answer_types, options=options, group_size=self.G,
                                   vocab_size=self.vocab_size)
        rm = batch.batch["rm_scores"]
        rm.zero_()
        rm[idx] = outcome_to_token_rewards(scored.rewards, mask).to(rm.dtype)
        lengths = mask.sum(-1)
        eos = self.tokenizer.eos_token_id
        truncated = ~((responses == eos) & mask.bool()).any(-1) if eos is not None else lengths >= mask.shape[1]
        metrics = {**engine_step.rollout_metrics(scored.rewards, scored.correct, lengths, truncated, ent, mask),
                   **scored.metrics}
        return _Scored(rows, prompt_ids, scored, lengths, metrics, t0, truncated, ent, mask)

    def select(self, step: int) -> Selection:
        """The curriculum's selection over the pending batch (``Curriculum.select``, as the local engine)."""
        p = self._pending()
        p.cb = engine_step.curriculum_batch(p.scored, p.lengths, p.prompt_ids, step, self.curriculum_steps, self.seed,
                                            self.G, engine_step.reward_bounded(self.reward))
        p.selection = self.curriculum.select(p.cb)
        return p.selection

    def merge_replay(self, replayed: _Scored, step: int) -> tuple[np.ndarray, np.ndarray]:
        """VCRL: the replayed prompts (``replayed``, their own verl batch, scored) take the rows of
        dropped prompts of the pending batch; returns (rows of the batch, rows of the replay batch)
        to copy, one replayed prompt onto one dropped prompt, in prompt-major order.

        The local engine appends the r replayed prompts to the B of the batch and weighs kept and
        replayed prompts (B + r) / (K + r) over a loss normalized by (B + r) G sequences
        (`VCRL.after_replay`). Here the batch keeps its B G rows (verl's loss normalizer B G) and a
        replayed prompt replaces a dropped one (weight 0 there, so nothing of it is lost to the
        update): the weights are scaled by B / (B + r), which makes every sequence's term of the
        loss, 1/N w_i l_i, the local engine's. Metrics are computed over the B + r prompts as the
        local engine's.
        """
        p = self._pending()
        if p.selection is None or not p.selection.replay:
            raise RuntimeError("Hook.merge_replay without a selection asking for replay")
        G, B, r = self.G, len(p.prompt_ids), len(replayed.prompt_ids)
        if sorted(replayed.prompt_ids) != sorted(p.selection.replay):
            raise RuntimeError(f"replayed prompts {replayed.prompt_ids} are not the ones asked for {p.selection.replay}")
        replayed = _in_order(replayed, list(p.selection.replay), G)  # the local engine's order
        rb = engine_step.curriculum_batch(replayed.scored, replayed.lengths, replayed.prompt_ids, step,
                                          self.curriculum_steps, self.seed, G, engine_step.reward_bounded(self.reward))
        final = self.curriculum.after_replay(p.selection, p.cb, rb)
        slots = np.flatnonzero(p.selection.mask.numpy() == 0)[:r]
        if len(slots) < r:
            raise RuntimeError(f"{r} replayed prompts but only {len(slots)} dropped prompts to replace")
        w = final.weights[:B].clone().float()
        keep = p.scored.keep.clone()
        for j, g in enumerate(slots):
            w[g] = float(final.weights[B + j])
            keep[g] = replayed.scored.keep[j]
        p.seq_w = engine_step.sequence_weights(w * (B / (B + r)), keep, G)
        s, q = p.scored, replayed.scored
        cat = torch.cat
        metrics = {**engine_step.rollout_metrics(cat([s.rewards, q.rewards]), cat([s.correct, q.correct]),
                                                 cat([p.lengths, replayed.lengths]),
                                                 cat([p.truncated, replayed.truncated]),
                                                 cat([p.entropys, replayed.entropys]), cat([p.mask, replayed.mask])),
                   **engine_step.mean_metrics(s.metrics, B, q.metrics, r)}
        p.metrics = metrics
        p.cb, p.selection = p.cb.concat(rb), final
        dest = np.concatenate([p.rows[g * G : (g + 1) * G] for g in slots])
        src = np.concatenate([replayed.rows[j * G : (j + 1) * G] for j in range(r)])
        return dest, src

    def _pending(self) -> _Scored:
        if self.pending is None:
            raise RuntimeError("the old-policy pass did not run (rollout correction's bypass mode skips it; the "
                               "verl engine does not support it)")
        return self.pending

    # -------------------------------------------------------- before the actor update

    def row_weights(self, step: int) -> torch.Tensor:
        """Per-row weights w_j / beta-hat_t of the curriculum, in the order of verl's batch as scored."""
        p = self._pending()
        if p.selection is None:
            self.select(step)
        if p.selection.replay and p.seq_w is None:
            raise RuntimeError(f"curriculum {self.curriculum.name!r} asked for replay, which the trainer did not roll out")
        seq_w = p.seq_w if p.seq_w is not None else engine_step.sequence_weights(p.selection.weights, p.scored.keep, self.G)
        w_rows = torch.zeros(len(p.rows), dtype=torch.float32)
        w_rows[torch.as_tensor(p.rows, dtype=torch.long)] = seq_w.float()
        return w_rows

    def droppable(self, w_rows: torch.Tensor) -> torch.Tensor:
        """Rows that contribute nothing to the update: weight 0, and no KL term of their own (the KL
        is weighted too, or off). They need no reference pass nor forward/backward (``keep_rows``)."""
        return (w_rows == 0) & (self.weight_kl or not self.kl_on)

    def keep_rows(self, rows: np.ndarray) -> None:
        """The trainer removed every other row from verl's batch: ``weigh`` answers for these rows."""
        self._pending().row_subset = np.asarray(rows)

    def weigh(self, batch, step: int) -> tuple[torch.Tensor, LossPlan, Selection, Batch]:
        """Per-row weights w_j / beta-hat_t of the curriculum (in verl's row order, of the rows the batch
        still has) and their loss plan; the curriculum observes the step (AdaRFT moves its target
        before the next batch is drawn)."""
        w_rows = self.row_weights(step)
        p = self._pending()
        if p.row_subset is not None:
            w_rows = w_rows[torch.as_tensor(p.row_subset, dtype=torch.long)]
        if len(w_rows) != len(batch):
            raise RuntimeError(f"verl's batch has {len(batch)} rows, the curriculum weighed {len(w_rows)}")
        selection, cb = p.selection, p.cb
        self.curriculum.observe(cb, selection)
        return w_rows, loss_plan(w_rows, self.weight_kl, self.kl_on), selection, cb

    def note(self, metrics: dict[str, float], step: int) -> None:
        """Columns of the step's row besides the local engine's (the rollout's agreement with the trainer),
        with a warning when vLLM's probabilities stray from the trainer's (stale or wrong weights)."""
        self._pending().extra.update(metrics)
        if metrics.get("rollout/probs_diff_mean", 0.0) > ROLLOUT_DIFF_WARN:
            log.warning("step %d: vLLM's token probabilities differ from the trainer's by %.4f on average (max %.4f; "
                        "bf16 on both sides: 0.001-0.005): are the rollout's weights the trained ones?", step,
                        metrics["rollout/probs_diff_mean"], metrics.get("rollout/probs_diff_max", float("nan")))

    def record(self, step: int, selection: Selection, plan: LossPlan, actor_metrics: dict[str, float]) -> dict[str, Any]:
        """The step's row of ``metrics.jsonl`` (the local engine's columns), appended to the file."""
        p = self.pending
        rec = {"step": int(step), **p.metrics, **p.extra, **selection.metrics, **actor_metrics,
               "actor/update_seqs": float(plan.keep.sum()),
               "time/step_s": time.perf_counter() - p.t0}
        if self.metrics_path is not None:
            workdir.append_progress(self.metrics_path, engine_step.finite_metrics(rec))
        self.pending = None
        return rec

