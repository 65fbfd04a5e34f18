"""What the verl engine runs exactly, and what it refuses (plain Python: the workflow checks a
config with it at parse time, `vicurl.runs.check`, before any job reaches a cluster).

Every curriculum of the catalog (`vicurl.methods`) runs on verl. How the three that do more than weigh a batch do it:

``adarft``, ``sent``  choose each step's prompts: a sampler asking the curriculum
                      (`vicurl.engines.verl.sampler`); the dataloader runs in the trainer's
                      process (``data.dataloader_num_workers=0``) so no batch is drawn before
                      the previous step's rewards reached the curriculum.
``vcrl``              re-rolls memory-bank prompts inside the step: ``VICuRLTrainer`` generates
                      them after the old-policy pass and puts them in the rows of dropped prompts
                      (`vicurl.engines.verl.hook.Hook.merge_replay`).
"""

from __future__ import annotations

from typing import Any, Mapping

from vicurl import methods
from vicurl.settings import TrainSettings


def refusal(settings: TrainSettings | Mapping[str, Any]) -> str | None:
    """Why the verl engine cannot run these training settings exactly (naming the config key), or None."""
    s = TrainSettings.of(settings)
    cur = s.curriculum
    if cur not in methods.supported_by("verl"):
        return f"curriculum {cur!r} is unknown to the verl engine (known: {methods.supported_by('verl')})"
    n_votes = s.reward_params.get("n_votes")
    if n_votes is not None and int(n_votes) != int(s.group_size):
        return ("rewards.majority_vote.n_votes must be null (vote with the G trained rollouts); TTRL's n_votes > G "
                "needs extra samples per prompt, use engine: local")
    if s.loss_agg_mode != "seq-mean-token-mean":
        return "train.loss_agg_mode must be seq-mean-token-mean"
    if cur == "soft_confidence" and s.weight_kl and float(s.kl_coef) > 0:
        return ("curriculum soft_confidence gives non-uniform weights, and verl's KL loss has no per-sample weight; "
                "set curricula.soft_confidence.weight_kl: false (the policy term stays weighted exactly) or use "
                "engine: local")
    mini = s.mini_batch_size
    if cur == "vcrl" and mini is not None and int(mini) != int(s.batch_size):
        return ("curriculum vcrl: train.mini_batch_size must be unset (one optimizer step per batch): the local "
                "engine splits the batch plus the replayed prompts into mini-batches, verl the batch of fixed size")
    return None
