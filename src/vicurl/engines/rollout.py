"""Scored rollouts on one process: the local engine's and the variance probes' way from prompt ids
to what a training step sees.

``load_models``     the policy (float32 on ``device``) and the frozen reference (when ``kl_coef`` > 0)
``RolloutScorer``   policy, reference, tokenizer, device, settings and the training rows ->
                    ``rollout(ids, seed)``: G rollouts per prompt from pi_old, scored (old log-probs
                    and entropies in one forward pass, then `vicurl.engines.step.score`);
                    ``logprobs`` of any rows under a model, ``ref_logprobs``; ``curriculum_batch``
``ScoredRollouts``  the rollouts of some prompts with pi_old's values and their ``Scored``
``sequence_logprobs``  log-probs (and entropies) of response tokens under a model, with gradient

On CUDA rollouts are drawn from a bf16 copy of the policy (as verl draws them with bf16 vLLM and
rescores with its actor); everything returned is a CPU tensor whatever the device.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoModelForCausalLM
from verl.utils.torch_functional import logprobs_from_logits

from vicurl.algos import rewards as reward_sources
from vicurl.algos.confidence import logprobs_and_entropy
from vicurl.config.settings import TrainSettings
from vicurl.curriculum import Batch, schedules
from vicurl.engines import step as engine_step
from vicurl.models import rope
from vicurl.models.sampling import Rollouts, sample
from vicurl.runtime import devices


def load_models(model_path: str | Path, settings: TrainSettings, device: torch.device,
                ref_model_path: str | Path | None = None):
    """The policy (float32 on ``device``, train mode) and the frozen reference policy: a copy of the
    policy, or ``ref_model_path`` (a probe's checkpoint is scored against the initial model); None
    without a KL term. Float32: gradients, log-probs and the probes' differences of gradients need it."""
    torch.manual_seed(settings.seed)
    policy = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device)
    policy.train()
    ref = None
    if settings.kl_coef > 0:
        if ref_model_path is None:
            ref = copy.deepcopy(policy)
        else:
            ref = AutoModelForCausalLM.from_pretrained(ref_model_path, dtype=torch.float32).to(device)
        ref.eval().requires_grad_(False)
    return policy, ref


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


@dataclass
class ScoredRollouts:
    """Scored rollouts of some prompts: G sequences per prompt, prompt-major."""

    ids: list[str]
    rollouts: Rollouts
    old_lp: torch.Tensor  # (N, R) log pi_old of the response tokens
    entropys: torch.Tensor  # (N, R) H(pi_old(.|s_t)) at the rollout temperature
    scored: engine_step.Scored  # rewards, oracle correctness, advantages, confidences, keep, reward metrics

    def concat(self, other: "ScoredRollouts", pad_token_id: int) -> "ScoredRollouts":
        """Rows of ``self`` then ``other`` (VCRL's replayed prompts), responses re-padded to one width;
        the reward metrics are per-prompt means over both."""
        width = max(self.old_lp.shape[1], other.old_lp.shape[1])

        def cat(a, b):
            pad = lambda x: torch.nn.functional.pad(x, (0, width - x.shape[1]))  # noqa: E731
            return torch.cat([pad(a), pad(b)])

        s, o = self.scored, other.scored
        scored = engine_step.Scored(
            torch.cat([s.rewards, o.rewards]),
            torch.cat([s.correct, o.correct]),
            cat(s.advantages, o.advantages),
            torch.cat([s.confidence, o.confidence]),
            torch.cat([s.keep, o.keep]),
            engine_step.mean_metrics(s.metrics, len(self.ids), o.metrics, len(other.ids)),
        )
        return ScoredRollouts(self.ids + other.ids, self.rollouts.concat(other.rollouts, pad_token_id),
                              cat(self.old_lp, other.old_lp), cat(self.entropys, other.entropys), scored)


class RolloutScorer:
    """Rollouts of a training set's prompts from a policy, scored as a training step scores them."""

    def __init__(self, policy, ref, tokenizer, device: torch.device, settings: TrainSettings,
                 train_df: pd.DataFrame, prompts: list[str]):
        """``train_df``, ``prompts``: the training rows (ids unique) and their prompt texts, row i's
        ``prompts[i]`` (`vicurl.data.long_prompts.fit_training_set`); ``ref``: None without a KL term."""
        reward_sources.check_params(settings.reward, settings.reward_params)
        # TTRL's n_votes > G: sample n_votes per prompt, train on the first G, let all of them vote
        self.n_votes = int(settings.reward_params.get("n_votes") or settings.group_size)
        if self.n_votes < settings.group_size:
            raise ValueError(f"rewards.{settings.reward}.n_votes={self.n_votes} is below "
                             f"train.group_size={settings.group_size}")
        self.policy, self.ref, self.tokenizer, self.device = policy, ref, tokenizer, device
        self.settings = settings
        self.train_df, self.prompts = train_df, prompts
        self.ids = [str(i) for i in train_df["id"]]
        self.row_of = {pid: i for i, pid in enumerate(self.ids)}
        if len(self.row_of) != len(self.ids):
            raise ValueError("training set ids are not unique")
        self.vocab_size = policy.get_output_embeddings().weight.shape[0]
        self.curriculum_steps = schedules.curriculum_steps(settings.total_steps, settings.curriculum_steps)
        self._sampler = None  # the bf16 copy rollouts are drawn from on CUDA (``sampling_model``)

    def sampling_model(self):
        """The model rollouts are drawn from: the policy itself on the CPU; on CUDA a bf16 copy
        holding the policy's current weights (kept between steps, refreshed before each use), its rotary
        frequencies float32 as the policy's (`vicurl.models.rope`)."""
        dtype = devices.sampling_dtype(self.device)
        if dtype == self.policy.dtype:
            return self.policy
        if self._sampler is None:
            self._sampler = rope.cast(copy.deepcopy(self.policy), dtype).requires_grad_(False)
        else:
            self._sampler.load_state_dict(self.policy.state_dict())  # casts to bf16 in place
        return self._sampler

    def release(self) -> None:
        """Drop the reference and the bf16 sampler (a probe's gradients want their GPU memory):
        no rollouts nor reference log-probs after this."""
        self.ref = self._sampler = None

    @torch.no_grad()
    def logprobs(self, model, rollouts: Rollouts, rows: torch.Tensor, with_entropy: bool):
        """Log-probs (and entropies) of ``rows`` under ``model``, micro-batched; no gradient."""
        mb, lps, ents = self.settings.micro_batch_size, [], []
        for s in range(0, len(rows), mb):
            lp, ent = sequence_logprobs(model, rollouts, rows[s : s + mb], self.settings.temperature, with_entropy)
            lps.append(lp)
            ents.append(ent)
        width = rollouts.response_ids.shape[1]
        if not lps:
            return torch.zeros(0, width), (torch.zeros(0, width) if with_entropy else None)
        return torch.cat(lps), (torch.cat(ents) if with_entropy else None)

    def ref_logprobs(self, rollouts: Rollouts, rows: torch.Tensor | None = None) -> torch.Tensor | None:
        """The reference's log-probs of ``rows`` (all by default); None without a KL term."""
        if self.ref is None:
            return None
        rows = torch.arange(len(rollouts.texts)) if rows is None else rows
        return self.logprobs(self.ref, rollouts, rows, with_entropy=False)[0]

    def rollout(self, ids: list[str], seed: int) -> ScoredRollouts:
        """G rollouts of each prompt in ``ids`` from pi_old, scored: old log-probs and entropies
        (one forward pass), rewards, group-normalized advantages, confidences."""
        s, G = self.settings, self.settings.group_size
        rows = self.train_df.iloc[[self.row_of[i] for i in ids]]
        rollouts = sample(self.sampling_model(), self.tokenizer, [self.prompts[self.row_of[i]] for i in ids],
                          self.n_votes, temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_response_length,
                          seed=seed, batch_size=s.rollout_batch_size)
        vote_texts = None
        if self.n_votes > G:
            vote_texts = [rollouts.texts[j * self.n_votes : (j + 1) * self.n_votes] for j in range(len(ids))]
            rollouts = first_of_each_group(rollouts, self.n_votes, G)
        self.policy.eval()  # no dropout in scoring passes
        old_lp, entropys = self.logprobs(self.policy, rollouts, torch.arange(len(rollouts.texts)), with_entropy=True)
        scored = engine_step.score(
            s.reward, s.reward_params, rollouts.texts, rollouts.response_mask, entropys,
            golds=[str(a) for a in rows["answer"]],
            answer_types=list(rows["answer_type"]) if "answer_type" in rows else None,
            options=[list(o) for o in rows["options"]] if "options" in rows else None,
            group_size=G, vocab_size=self.vocab_size, vote_texts=vote_texts,
        )
        return ScoredRollouts(list(ids), rollouts, old_lp, entropys, scored)

    def curriculum_batch(self, part: ScoredRollouts, step: int) -> Batch:
        """What the curriculum sees of ``part`` at training step ``step``."""
        s = self.settings
        return engine_step.curriculum_batch(part.scored, part.rollouts.lengths, part.ids, step, self.curriculum_steps,
                                            s.seed, s.group_size, engine_step.reward_bounded(s.reward))
