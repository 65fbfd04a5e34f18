"""The verl engine on CPU: verl's own trainer methods on real DataProto batches, against the local engine.

``VICuRLTrainer`` is built with ``object.__new__`` and the attributes its methods read; the actor
worker group is mocked at its API boundary (``compute_log_prob`` / ``update_actor`` take and return
TensorDicts in verl's no-padding layout). No Ray, no GPU: no end-to-end verl run happens here.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto
from verl.trainer.ppo import ray_trainer
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.reward import extract_reward
from verl.utils import tensordict_utils as tu

from vicurl.algos.grpo import grpo_loss, loss_config
from vicurl.config import checks, methods
from vicurl.config import runs as runs_lib
from vicurl.config.settings import TrainSettings
from vicurl.data.prompts import build_prompts
from vicurl.engines import local as local_engine
from vicurl.engines import rollout as rollout_engine
from vicurl.engines import workdir
from vicurl.engines.local import LocalTrainer
from vicurl.engines.step import sequence_weights
from vicurl.engines.verl import hook as hook_lib
from vicurl.engines.verl import launch
from vicurl.engines.verl.data import VERBATIM_TEMPLATE, to_verl_frame
from vicurl.engines.verl.hook import Hook, loss_plan
from vicurl.engines.verl.patches import rollout_seeds
from vicurl.engines.verl.sampler import CurriculumSampler
from vicurl.engines.verl.trainer import OVERRIDES, VICuRLTrainer
from vicurl.models.sampling import Rollouts

from harness import DEMO, ENGINE_RUN, LAUNCHER_RUN, REPO, settings_for

B, G, R = ENGINE_RUN["batch_size"], ENGINE_RUN["group_size"], ENGINE_RUN["max_response_length"]

# every prompt of the batch gets G responses: right, wrong, unboxed, repeated answers
RESPONSES = [
    ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "no"],
    ["\\boxed{5}", "\\boxed{3}", "\\boxed{3}", "\\boxed{3}"],
    ["\\boxed{7}", "\\boxed{8}", "\\boxed{9}", "\\boxed{6}"],
    ["x", "\\boxed{4}", "\\boxed{4}", "\\boxed{4}"],
]


def problems(n=8):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "question": [f"Compute {i} + 1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)], "answer_type": ["math"] * n,
                         "options": [[] for _ in range(n)]})


def prompt_stats(n=8):
    """The prompt_stats rule's table (AdaRFT's difficulty, SENT's semantic entropy) for ``problems(n)``."""
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)],
                         "difficulty": [float((37 * i) % 100) for i in range(n)],
                         "semantic_entropy": [float((5 * i) % 7) / 3 for i in range(n)]})


def fixed_rollouts(tokenizer, prompts, responses=RESPONSES):
    """What ``sample`` would return: B x G responses, EOS-terminated, right-padded to R."""
    tokenizer.padding_side = "left"
    enc = tokenizer([p for p in prompts for _ in range(G)], return_tensors="pt", padding=True, add_special_tokens=False)
    texts = [t for group in responses[: len(prompts)] for t in group]
    ids = torch.full((len(texts), R), tokenizer.pad_token_id)
    mask = torch.zeros(len(texts), R, dtype=torch.long)
    truncated = torch.zeros(len(texts), dtype=torch.bool)
    for i, t in enumerate(texts):
        tok = tokenizer(t, add_special_tokens=False)["input_ids"][: R - 1] + [tokenizer.eos_token_id]
        ids[i, : len(tok)] = torch.tensor(tok)
        mask[i, : len(tok)] = 1
    return Rollouts(enc["input_ids"], enc["attention_mask"], ids, mask, texts, truncated)


def local_step(model_dir, tmp_path, monkeypatch, settings, step=2):
    """The local engine on the fixed rollouts: its scored rollouts, selection and per-sequence weights."""
    cfg = TrainSettings.from_dict(settings)
    tr = LocalTrainer(cfg, model_dir, problems(), tmp_path / "local", prompt_stats=prompt_stats())
    ids = tr.ids[:B]
    roll = fixed_rollouts(tr.tokenizer, [tr.prompts[tr.row_of[i]] for i in ids])
    monkeypatch.setattr(rollout_engine, "sample", lambda *a, **k: roll)
    part = tr.scorer.rollout(ids, seed=0)
    batch = tr.scorer.curriculum_batch(part, step)
    selection = tr.curriculum.select(batch)
    return tr, part, selection, sequence_weights(selection.weights, part.scored.keep, G)


def interleave_order():
    """A verl-like row order (``balance_batch`` reorders rows): groups round-robin, so first
    appearances stay in prompt order and rows keep their order within a group (float sums then
    add up in the local engine's order: confidences equal bit for bit)."""
    return np.array([g * G + j for j in range(G) for g in range(B)])


def verl_batch(tr, part, order):
    """The local rollouts as a verl batch, rows in ``order``: verl's keys and layout."""
    roll = part.rollouts
    df = tr.train_df.iloc[[tr.row_of[i] for i in part.ids]]
    uids = np.repeat([str(uuid.uuid4()) for _ in range(len(part.ids))], G)
    input_ids = torch.cat([roll.prompt_ids, roll.response_ids], 1)
    attn = torch.cat([roll.prompt_mask, roll.response_mask], 1)
    tensors = {
        "prompts": roll.prompt_ids, "responses": roll.response_ids, "input_ids": input_ids, "attention_mask": attn,
        "position_ids": (attn.cumsum(-1) - 1).clamp(min=0), "response_mask": roll.response_mask,
        "rm_scores": torch.zeros(len(uids), R),
    }
    rows = torch.as_tensor(order)
    reward_model = np.array([{"ground_truth": str(a)} for a in df["answer"] for _ in range(G)], dtype=object)
    extra = np.array([{"id": pid, "answer_type": "math", "options": []} for pid in part.ids for _ in range(G)], dtype=object)
    return DataProto(
        batch=TensorDict({k: v[rows] for k, v in tensors.items()}, batch_size=[len(order)]),
        non_tensor_batch={"uid": uids[order], "reward_model": reward_model[order], "extra_info": extra[order]},
        meta_info={"temperature": 1.0},
    )


def to_no_padding(values: torch.Tensor, td: TensorDict) -> torch.Tensor:
    """Response values (N, R) as the worker returns them: one jagged row per sequence of its
    valid tokens, the value of response token t at position (prompt_len + t - 1)."""
    attn = td["attention_mask"]
    p = td["prompts"].shape[1]
    rows, offsets = [], [0]
    for i in range(attn.shape[0]):
        pl, rl = int(attn[i, :p].sum()), int(attn[i, p:].sum())
        seq = torch.zeros(pl + rl, dtype=values.dtype)
        seq[pl - 1 : pl - 1 + rl] = values[i, :rl]
        rows.append(seq)
        offsets.append(offsets[-1] + pl + rl)
    return torch.nested.nested_tensor_from_jagged(torch.cat(rows), offsets=torch.tensor(offsets))


class MockActorGroup:
    """The actor/rollout worker group at its API boundary."""

    def __init__(self, old_lp, entropys):
        self.old_lp, self.entropys, self.sent = old_lp, entropys, None
        self._dispatch_info = {"actor": [0]}

    def compute_log_prob(self, td):
        assert tu.get(td, "calculate_entropy") is True
        out = TensorDict({"log_probs": to_no_padding(self.old_lp, td), "entropy": to_no_padding(self.entropys, td)},
                         batch_size=[])
        tu.assign_non_tensor(out, metrics={"mfu": 0.0})
        return out

    def update_actor(self, td):
        self.sent = td
        out = TensorDict({}, batch_size=[])
        tu.assign_non_tensor(out, metrics={"actor/pg_loss": [0.1, 0.3], "actor/grad_norm": [1.0], "mfu": [0.5]})
        return out


def make_trainer(settings, tr, old_lp_rows, ent_rows, tmp_path, ppo_mini=B, ppo_epochs=1):
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({
        "actor_rollout_ref": {
            "actor": {"calculate_sum_pi_squared": False, "calculate_entropy": False, "entropy_coeff": 0.0,
                      "ppo_mini_batch_size": ppo_mini, "ppo_epochs": ppo_epochs, "data_loader_seed": 42,
                      "shuffle": False},
            "rollout": {"n": G, "temperature": 1.0, "multi_turn": {"enable": False}},
        },
        "trainer": {"default_local_dir": str(tmp_path / "ckpt")},
        "vicurl": {"work_dir": str(tmp_path / "work")},
    })
    t.tokenizer = tr.tokenizer
    t.global_steps = 2
    t.total_training_steps = settings["total_steps"]
    t.actor_rollout_wg = MockActorGroup(old_lp_rows, ent_rows)
    t._hook = Hook(settings, tr.train_df, tr.tokenizer, tr.vocab_size, settings["total_steps"],
                   metrics_path=tmp_path / "work" / "metrics.jsonl", prompt_stats=prompt_stats())
    return t


SUPPORTED = [c for c in DEMO["curricula"] if c in methods.supported_by("verl")]
CASES = [(r, c, {}) for r in methods.REWARDS for c in SUPPORTED]
# a run continuing another (the mechanism study): the schedule spans the source's 2 steps, beta = 1 from step 2
CASES.append(("entropy", "vicurl", {"total_steps": 8, "curriculum_steps": 2}))


def test_every_demo_curriculum_runs_on_verl():
    assert set(DEMO["curricula"]) == set(SUPPORTED)
    for c in DEMO["curricula"]:
        hook_lib.check_settings(settings_for("oracle", c, weight_kl=c != "soft_confidence"))


@pytest.mark.parametrize("reward,curriculum,extra", CASES)
def test_rewards_advantages_and_weights_equal_the_local_engine(reward, curriculum, extra, char_model_dir, tmp_path,
                                                               monkeypatch):
    weight_kl = curriculum != "soft_confidence"  # soft weights need the unweighted-KL variant on verl
    settings = settings_for(reward, curriculum, weight_kl=weight_kl, **extra)
    tr, part, selection, seq_w = local_step(char_model_dir, tmp_path, monkeypatch, settings)
    order = interleave_order()
    batch = verl_batch(tr, part, order)
    rows = torch.as_tensor(order)
    trainer = make_trainer(settings, tr, part.old_lp[rows], part.entropys[rows], tmp_path)

    # fit(): extract_reward, then the old-policy pass (our override), then the scores -> advantages
    reward_tensor, _ = extract_reward(batch)
    old, _ = trainer._compute_old_log_prob(batch)
    # rows of dropped prompts have left the batch (train.skip_dropped), and the reward tensor fit holds
    subset = trainer._hook.pending.row_subset
    if subset is not None:
        w_full = seq_w[rows]
        assert (w_full[torch.as_tensor(subset)] != 0).sum() == (w_full != 0).sum()  # every kept row is there
        assert len(subset) < len(rows) and len(batch) == len(subset) == len(reward_tensor)
        rows = rows[torch.as_tensor(subset)]
    mask = part.rollouts.response_mask[rows].float()  # verl's layout: zeros past the response
    torch.testing.assert_close(old.batch["old_log_probs"], part.old_lp[rows] * mask)
    torch.testing.assert_close(old.batch["entropys"], part.entropys[rows] * mask)
    old.batch.pop("entropys")
    batch = batch.union(old)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    batch = ray_trainer.compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=G)

    torch.testing.assert_close(batch.batch["token_level_scores"].sum(-1), part.scored.rewards[rows])
    torch.testing.assert_close(batch.batch["advantages"] * mask, part.scored.advantages[rows] * mask)
    scored = trainer._hook.pending.scored
    torch.testing.assert_close(scored.confidence, part.scored.confidence)
    assert torch.equal(scored.keep, part.scored.keep)

    # the update: what reaches the worker group weights every sequence as the local loss does
    out = trainer._update_actor(batch)
    logged = ray_trainer.reduce_metrics(out.meta_info["metrics"])  # what fit() hands verl's logger
    assert logged["curriculum/beta_actual"] == pytest.approx(selection.metrics["curriculum/beta_actual"])
    if "curriculum/beta_target" in selection.metrics:
        assert logged["curriculum/beta_target"] == pytest.approx(selection.metrics["curriculum/beta_target"], nan_ok=True)
        if extra:
            assert logged["curriculum/beta_target"] == 1.0
    assert f"reward/{reward}/mean" in logged and logged["actor/pg_loss"] == pytest.approx(0.2)
    sent = trainer.actor_rollout_wg.sent
    n = B * G  # the loss normalizer counts every sequence of the batch, also when dropped ones left it
    scale = n / tu.get(sent, "global_batch_size")
    assert tu.get(sent, "mini_batch_size") == len(rows)  # one optimizer step: the rows there are
    loss_mask = sent["response_mask"]
    kept = loss_mask.sum(-1) > 0
    is_w = sent["rollout_is_weights"][:, 0]
    pg_w = torch.where(kept, is_w * scale, torch.zeros_like(is_w))
    kl_w = torch.where(kept, torch.full_like(is_w, scale), torch.zeros_like(is_w))
    torch.testing.assert_close(pg_w, seq_w[rows].float())
    if weight_kl:
        torch.testing.assert_close(kl_w, seq_w[rows].float())
    else:
        torch.testing.assert_close(kl_w, torch.ones(len(rows)))
    assert torch.equal(batch.batch["response_mask"], part.rollouts.response_mask[rows])  # fit's metrics unchanged
    rec = json.loads((tmp_path / "work" / "metrics.jsonl").read_text().splitlines()[-1])
    assert rec["step"] == 2 and rec["reward/mean"] == pytest.approx(float(part.scored.rewards.mean()))
    assert rec["actor/pg_loss"] == pytest.approx(0.2) and rec["actor/update_seqs"] == float((loss_mask.sum(-1) > 0).sum())
    for k, v in selection.metrics.items():
        assert rec[k] == (None if not np.isfinite(v) else pytest.approx(v, rel=1e-6, abs=1e-9)), k


def verl_update(settings, char_model_dir, tmp_path, monkeypatch, ranks: int = 1):
    """One step of the local engine, then the same rollouts through the trainer's old-policy pass and
    ``_update_actor`` on ``ranks`` data-parallel ranks, a reference policy that differs; verl's actor
    config as the launcher composes it, and log-probs near the old ones to take the losses at."""
    from verl.utils.config import omega_conf_to_dataclass

    tr, part, selection, seq_w = local_step(char_model_dir, tmp_path, monkeypatch, settings)
    rows = torch.as_tensor(interleave_order())
    batch = verl_batch(tr, part, rows.tolist())
    trainer = make_trainer(settings, tr, part.old_lp[rows], part.entropys[rows], tmp_path)
    if ranks > 1:
        trainer.actor_rollout_wg._dispatch_info = {"actor": list(range(ranks))}
    old, _ = trainer._compute_old_log_prob(batch)
    subset = trainer._hook.pending.row_subset
    rows = rows[torch.as_tensor(subset)]
    old.batch.pop("entropys")
    batch = batch.union(old)
    ref_lp = part.old_lp - 0.05 * torch.arange(R).float()
    batch.batch["ref_log_prob"] = ref_lp[rows]
    batch.batch["advantages"] = part.scored.advantages[rows]
    trainer._update_actor(batch)
    cfg = launch.compose(launch.overrides(settings, model_path=str(char_model_dir), train_files="t.parquet",
                                          work_dir=str(tmp_path), settings_path="s.json", train_set="t.parquet",
                                          vocab_size=tr.vocab_size, n_train=8))
    torch.manual_seed(0)
    logp = (part.old_lp + 0.1 * torch.randn_like(part.old_lp)).requires_grad_(True)
    local_loss, _ = grpo_loss(logp, part.old_lp, part.scored.advantages, part.rollouts.response_mask, seq_w,
                              loss_config(tr.cfg), ref_log_prob=ref_lp, global_batch_size=B * G)
    return SimpleNamespace(seq_w=seq_w, subset=subset, rows=rows, batch=batch, sent=trainer.actor_rollout_wg.sent,
                           actor_cfg=omega_conf_to_dataclass(cfg.actor_rollout_ref.actor), logp=logp,
                           local_loss=local_loss)


def test_verl_loss_equals_the_local_loss(char_model_dir, tmp_path, monkeypatch):
    """verl's worker loss (``verl.workers.utils.losses.ppo_loss``) on the TensorDict the trainer
    sends equals the local engine's ``grpo_loss``: value and gradient, weighted KL included."""
    from verl.workers.utils.losses import ppo_loss

    settings = settings_for("oracle", "vicurl", curriculum_params={"beta_start": 0.25}, kl_coef=0.5)  # step 2: beta 0.5; a KL term that counts
    u = verl_update(settings, char_model_dir, tmp_path, monkeypatch)
    assert 0 < int((u.seq_w == 0).sum()) < B * G  # some prompts dropped, some kept
    # the dropped prompts' rows left the batch: verl's loss over the rest is the local loss over all
    assert u.subset is not None and len(u.subset) == int((u.seq_w != 0).sum())
    sent = u.sent
    tu.assign_non_tensor(sent, dp_size=1, batch_num_tokens=int(sent["response_mask"].sum()))
    verl_loss, _ = ppo_loss(u.actor_cfg, {"log_probs": to_no_padding(u.logp[u.rows], u.batch.batch)}, sent)
    (g_verl,) = torch.autograd.grad(verl_loss, u.logp)
    (g_local,) = torch.autograd.grad(u.local_loss, u.logp)
    torch.testing.assert_close(verl_loss, u.local_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(g_verl, g_local, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("mini,epochs", [(None, 1), (2, 1), (1, 3), (2, 2)])
def test_mini_batches_and_epochs_reach_both_engines_alike(mini, epochs, char_model_dir, tmp_path, monkeypatch):
    """train.mini_batch_size (prompts) and train.ppo_epochs: on both engines ppo_epochs x B / mini
    optimizer steps per training step, each over mini x G sequences and normalized by their
    number. The local engine's update counted; verl's from its config as the launcher composes it,
    its own ``_update_actor`` and the worker's own split of the batch (``tensordict_utils.make_iterator``)."""
    from verl.utils.tensordict_utils import make_iterator

    settings = settings_for("oracle", "vicurl", mini_batch_size=mini, ppo_epochs=epochs, curriculum_params={"beta_start": 1.0})
    tr, part, selection, seq_w = local_step(char_model_dir, tmp_path, monkeypatch, settings)
    normalizers, steps = [], []
    real_loss = local_engine.grpo_loss
    monkeypatch.setattr(local_engine, "grpo_loss",
                        lambda *a, **k: (normalizers.append(k["global_batch_size"]), real_loss(*a, **k))[1])
    real_step = tr.optimizer.step
    monkeypatch.setattr(tr.optimizer, "step", lambda *a, **k: (steps.append(len(normalizers)), real_step(*a, **k))[1])
    tr._update(2, part.rollouts, part.old_lp, part.scored.advantages, seq_w)
    local_updates = len(steps)
    local_sizes = sorted(set(normalizers))

    ov = launch.overrides(settings, model_path=str(char_model_dir), train_files="t.parquet", work_dir=str(tmp_path),
                          settings_path="s.json", train_set="ts.parquet", vocab_size=100, n_train=len(problems()),
                          verl={"n_gpus_per_node": 1})
    actor = launch.compose(ov).actor_rollout_ref.actor
    order = interleave_order()
    rows = torch.as_tensor(order)
    trainer = make_trainer(settings, tr, part.old_lp[rows], part.entropys[rows], tmp_path,
                           ppo_mini=actor.ppo_mini_batch_size, ppo_epochs=actor.ppo_epochs)
    batch = verl_batch(tr, part, order)
    reward_tensor, _ = extract_reward(batch)
    old, _ = trainer._compute_old_log_prob(batch)
    old.batch.pop("entropys")
    batch = batch.union(old)
    batch.batch["token_level_scores"] = batch.batch["token_level_rewards"] = reward_tensor
    batch = ray_trainer.compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=G)
    trainer._update_actor(batch)
    sent = trainer.actor_rollout_wg.sent  # what the worker receives; with one data-parallel rank it splits it so
    minis = list(make_iterator(sent, mini_batch_size=tu.get(sent, "mini_batch_size"), epochs=tu.get(sent, "epochs"),
                               seed=tu.get(sent, "seed"), dataloader_kwargs=tu.get(sent, "dataloader_kwargs")))
    assert len(minis) == local_updates == epochs * B // (mini or B)
    assert {m.batch_size[0] for m in minis} == set(local_sizes) == {(mini or B) * G}
    assert tu.get(sent, "global_batch_size") == (mini or B) * G  # the normalizer (all prompts kept: scale 1)


def test_loss_plan():
    w = torch.tensor([2.0, 2.0, 0.0, 0.0])
    p = loss_plan(w, weight_kl=True, kl_on=True)
    assert p.keep.tolist() == [True, True, False, False] and p.scale == 2.0 and p.is_weights.tolist() == [1, 1, 0, 0]
    p = loss_plan(w, weight_kl=False, kl_on=True)
    assert p.keep.all() and p.scale == 1.0 and torch.equal(p.is_weights, w)
    soft = torch.tensor([0.5, 1.5, 1.0, 1.0])
    assert torch.equal(loss_plan(soft, weight_kl=True, kl_on=False).is_weights, soft)
    with pytest.raises(ValueError, match="weight_kl"):
        loss_plan(soft, weight_kl=True, kl_on=True)
    assert not loss_plan(torch.zeros(4), weight_kl=True, kl_on=True).keep.any()


def test_overridden_methods_exist_in_the_installed_verl():
    """A verl upgrade that renames or reshapes what the trainer hooks into fails here."""
    for name, params in OVERRIDES.items():
        assert name in VICuRLTrainer.__dict__, name
        base = getattr(ray_trainer.RayPPOTrainer, name)
        assert tuple(inspect.signature(base).parameters) == params, name
        assert tuple(inspect.signature(VICuRLTrainer.__dict__[name]).parameters) == params, name
    # the order of fit() the hooks rely on
    fit = inspect.getsource(ray_trainer.RayPPOTrainer.fit)
    marks = ["extract_reward(batch)", "self._compute_old_log_prob(batch)", 'old_log_prob.batch.pop("entropys")',
             'batch.batch["token_level_scores"] = reward_tensor', "compute_advantage(", "self._update_actor(batch)"]
    pos = [fit.index(m) for m in marks]
    assert pos == sorted(pos)
    assert "self._save_checkpoint()" in fit
    # the lines of fit that VICuRLTrainer._vicurl_rollout repeats to roll out VCRL's replayed prompts
    for line in ['batch.meta_info["temperature"] = self.config.actor_rollout_ref.rollout.temperature',
                 "gen_batch = self._get_gen_batch(batch)", 'gen_batch.meta_info["global_steps"] = self.global_steps',
                 "gen_batch.repeat(repeat_times=rollout_n, interleave=True)",
                 "self.async_rollout_manager.generate_sequences(combined_gen_batch)",
                 "self.checkpoint_manager.sleep_replicas()", "self.checkpoint_manager.update_weights(self.global_steps)",
                 "batch = batch.repeat(repeat_times=self.config.actor_rollout_ref.rollout.n, interleave=True)",
                 "batch = batch.union(gen_batch_output)", 'batch.batch["response_mask"] = compute_response_mask(batch)',
                 "for batch_dict in self.train_dataloader:", "self.global_steps += 1"]:
        assert line in fit, line
    # the dataloader CurriculumSampler relies on: single-process when num_workers=0, the sampler as given
    cdl = inspect.getsource(ray_trainer.RayPPOTrainer._create_dataloader)
    assert "sampler=train_sampler" in cdl and 'num_workers = self.config.data["dataloader_num_workers"]' in cdl
    # extract_reward hands out the batch's own tensor (the in-place write reaches the advantages)
    b = DataProto(batch=TensorDict({"rm_scores": torch.zeros(2, 3)}, batch_size=[2]))
    assert extract_reward(b)[0] is b.batch["rm_scores"]
    upd = inspect.getsource(ray_trainer.RayPPOTrainer._update_actor)
    assert "global_batch_size=ppo_mini_batch_size" in upd and "self.actor_rollout_wg.update_actor(batch_td)" in upd
    from verl.trainer import main_ppo_v0

    assert main_ppo_v0.RayPPOTrainer is ray_trainer.RayPPOTrainer
    assert "RayPPOTrainer(" in inspect.getsource(main_ppo_v0.TaskRunner.__ray_actor_class__.run)
    from verl.workers.utils import losses

    src = inspect.getsource(losses.ppo_loss)
    assert '"rollout_is_weights" in data' in src and 'data["global_batch_size"]' in src


def paper_config():
    return checks.read(yaml.safe_load((REPO / "config" / "paper.yaml").read_text()))


def test_paper_runs_compose_with_verls_config(tmp_path):
    """verl's own config and its ``validate_config`` (what its ``main`` runs first) accept every run."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    cfg = paper_config()
    assert cfg["engine"] == "verl"
    seen, checkpointing = set(), {}
    for run in runs_lib.runs(cfg):
        settings = runs_lib.train_settings(cfg, run)
        hook_lib.check_settings(settings)
        ov = launch.overrides(settings, model_path=cfg["models"][run.model]["hub_id"], train_files="/d/train.parquet",
                              work_dir=f"/w/{run.path}/_work", settings_path="/w/s.json", train_set="/d/t.parquet",
                              vocab_size=151936, n_train=40315, verl=runs_lib.verl_settings(cfg, run.model))
        # the same overrides as a run already composed, up to the values that name the run (its seed goes
        # into data.seed and the experiment's name: values, not keys)
        key = tuple(o for o in ov if "model.path" not in o and "_work" not in o
                    and not o.startswith(("data.seed=", "trainer.experiment_name=", "actor_rollout_ref.rollout.seed=")))
        if key in seen:
            continue
        seen.add(key)
        c = launch.compose(ov)  # raises on any key verl's ppo_trainer.yaml rejects
        validate_config(config=c, use_reference_policy=need_reference_policy(c), use_critic=need_critic(c))
        assert need_reference_policy(c) and not need_critic(c)  # KL to the frozen initial policy; GRPO has no critic
        a = c.actor_rollout_ref
        assert c.trainer.use_v1 is False and c.trainer.resume_mode == "auto"
        assert a.rollout.n == settings["group_size"] and a.actor.kl_loss_coef == settings["kl_coef"]
        assert a.actor.optim.lr == settings["lr"] and c.data.train_batch_size == settings["batch_size"]
        assert c.data.max_response_length == settings["max_response_length"]
        assert c.trainer.total_training_steps == settings["total_steps"]
        assert c.trainer.save_freq == settings["save_every"]  # resume saves; the trainer saves evaluated steps itself
        assert "hf_model" not in a.actor.checkpoint.save_contents  # exports are merged from the shards
        assert a.model.override_config.attn_implementation == "vicurl_varlen" and a.model.use_remove_padding
        assert a.ref.fsdp_config.model_dtype == "bf16"  # the reference's weights in its compute dtype
        verl = runs_lib.verl_settings(cfg, run.model)  # the model's settings, as the train job gives them
        # the update's budget, the forward-only passes' larger one; a whole sequence fits either (long_output)
        longest = settings["max_prompt_length"] + settings["max_response_length"]
        assert a.actor.ppo_max_token_len_per_gpu == max(verl.max_token_len_per_gpu, longest)
        assert a.ref.log_prob_max_token_len_per_gpu == a.rollout.log_prob_max_token_len_per_gpu \
            == max(verl.forward_token_len_per_gpu, longest) > a.actor.ppo_max_token_len_per_gpu
        assert a.model.enable_gradient_checkpointing == verl.gradient_checkpointing
        checkpointing[run.model] = verl.gradient_checkpointing
        assert a.model.custom_chat_template == VERBATIM_TEMPLATE and c.vicurl.vocab_size == 151936
        assert a.rollout.seed == rollout_seeds.engine_seed(settings["seed"], 0)
    # each model's own settings (verl.models): the 7B checkpoints its update, the smaller ones do not
    assert checkpointing == {"qwen_math_1.5b": False, "r1_distill_1.5b": False, "llama_3b_instruct": False,
                             "qwen_math_7b": True}, checkpointing


def leaves(node, key=""):
    """(dotted key, value) of every leaf of a plain config tree."""
    if isinstance(node, dict):
        return [x for k, v in node.items() for x in leaves(v, f"{key}.{k}" if key else str(k))]
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in leaves(v, f"{key}[{i}]")]
    return [(key, node)]


def test_every_path_verl_and_ray_get_is_absolute(tmp_path, monkeypatch):
    """The train rule hands the launcher paths relative to the workflow's folder (the model folder the fetch
    made, the training files, the work and checkpoint folders, the prompt table, the trackers' folders); on a
    user's Ray cluster of several nodes the workers run elsewhere, so every path in the composed config, in the
    job's environment and in the variables Ray's workers get is absolute, and names the same file. A Hub id
    stays one."""
    from vicurl.config.settings import VerlSettings

    monkeypatch.chdir(tmp_path)
    for folder in ("results/s/models/tiny/hub", "results/s/prompt_stats"):
        Path(folder).mkdir(parents=True)
    Path("results/s/prompt_stats/stats.parquet").touch()
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    monkeypatch.setenv("PYTHONPATH", "lib")  # a user's relative entry
    relative = {"tensorboard": "results/s/tensorboard/main/tiny/x/seed0", "wandb": "results/s/wandb/main/tiny/x/seed0"}
    settings = TrainSettings.from_dict(settings_for("oracle", "sent", run=LAUNCHER_RUN))
    for model in ("results/s/models/tiny/hub", "Qwen/Qwen2.5-Math-1.5B"):
        ov, env = launch.job_overrides(settings, model, Path("results/s/runs/x/_work"), VerlSettings.from_dict({}),
                                       "results/s/prompt_stats/stats.parquet", n_train=64, start_step=0,
                                       tracking=relative, vocab_size=100)
        config = OmegaConf.to_container(launch.compose(ov), resolve=True)

        def strings(node):
            if isinstance(node, dict):
                return [x for v in node.values() for x in strings(v)]
            if isinstance(node, list):
                return [x for v in node for x in strings(v)]
            return [node] if isinstance(node, str) else []

        values = strings(config) + list(env.values())
        ours = [v for v in values if "results/" in v]
        assert len(ours) >= 8 and all(os.path.isabs(v) for v in ours), [v for v in ours if not os.path.isabs(v)]
        assert all(Path(v).is_relative_to(tmp_path) for v in ours)
        # and no other path of verl's config is relative (its defaults of sections GRPO never builds aside:
        # the critic's; a folder in the home directory is one on every node)
        paths = {k: v for k, v in leaves(config) if k.rsplit(".", 1)[-1].endswith(("path", "dir", "files"))
                 and isinstance(v, str) and v and not k.startswith("critic.")}
        left = {k: v for k, v in paths.items() if not (os.path.isabs(v) or v.startswith("~/") or v == model)}
        assert len(paths) >= 10 and not left, left
        assert config["global_profiler"]["save_path"] == str(tmp_path / "results/s/runs/x/_work/profile")
        assert all(os.path.isabs(p) for p in env["PYTHONPATH"].split(os.pathsep)), env["PYTHONPATH"]
        assert config["actor_rollout_ref"]["model"]["path"] == (str(tmp_path / model) if model.startswith("results")
                                                                else model)
        assert env["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "results/s/runs/x/_work/verl_log.jsonl")
        assert config["ray_kwargs"]["ray_init"]["runtime_env"]["env_vars"]["TENSORBOARD_DIR"] == str(tmp_path / relative["tensorboard"])


@pytest.mark.parametrize("copy_fails", [False, True])
def test_a_failed_runs_error_names_its_logs_where_they_were_copied(char_model_dir, tmp_path, monkeypatch, copy_fails):
    """verl's loop fails (here its supervisor is told so; tests/gpu_path fails a real run inside a Ray worker):
    Ray's and vLLM's logs, which live in the job's temp folder, are copied beside the job's log before the folder
    goes, and the error names the copies. Where the copy itself fails (a full disk), the loop's own error is
    still the one raised, with why its logs are not there."""
    from vicurl.runtime import supervise

    def failing_loop(cmd, *, env, **kwargs):
        log = Path(env["TMPDIR"]) / "session_1" / "logs" / "worker-1.out"
        log.parent.mkdir(parents=True)
        log.write_text("RuntimeError: boom\n")
        raise supervise.LoopFailed(f"the rollout engine is gone; its log: {log}")

    def no_room(temp, dest):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(supervise, "run", failing_loop)
    if copy_fails:
        monkeypatch.setattr(supervise, "keep_logs", no_room)
    settings = TrainSettings.from_dict(settings_for("oracle", "vicurl", run=LAUNCHER_RUN))
    work = tmp_path / "_work"
    work.mkdir()
    with pytest.raises(supervise.LoopFailed) as failed:
        launch.train(settings, str(char_model_dir), work, {}, None, n_train=64, failure_logs=tmp_path / "seed0.failed")
    message = str(failed.value)
    assert message.startswith("the rollout engine is gone; its log: ")
    if copy_fails:
        assert "could not be copied from its temp folder to " in message and "No space left on device" in message
        return
    copy = Path(message.split("its log: ")[1].split("\n")[0])
    assert copy.is_relative_to(tmp_path / "seed0.failed") and copy.read_text() == "RuntimeError: boom\n"
    assert f"copied from its temp folder: {copy.parents[2]}" in message


def test_each_seed_and_each_resumed_job_has_its_own_rollout_stream():
    """verl's vLLM engines are seeded by ``rollout.seed`` (default 42, for every run): the launcher derives
    it from the run's seed and the step a job starts after, so the training seeds sample from different
    streams and a resumed job does not replay its run's first rollouts (unseeded requests, the default)."""
    seeds = {(seed, start): rollout_seeds.engine_seed(seed, start) for seed in range(5) for start in (0, 50, 100)}
    assert len(set(seeds.values())) == len(seeds) and 42 not in seeds.values()
    assert rollout_seeds.engine_seed(3, 50) == seeds[(3, 50)]  # a function of the two alone


def test_unknown_verl_key_is_rejected():
    with pytest.raises(Exception, match="no_such_key"):
        launch.compose(["actor_rollout_ref.actor.no_such_key=1"])


def test_the_launchers_config_sets_only_verls_keys():
    """vicurl_ppo_trainer.yaml extends verl's ppo_trainer; Hydra merges a config's own keys unchecked
    (a misspelt one would be added silently, where an override fails), so each is one of ppo_trainer's,
    and the composed config holds its value."""
    import os

    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig

    own = OmegaConf.load(launch.CONFIG)
    assert list(own.defaults) == ["ppo_trainer", "_self_"]

    def leaves(node, prefix=""):
        for k, v in node.items():
            if isinstance(v, DictConfig):
                yield from leaves(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}"

    keys = [k for k in leaves(own) if not k.startswith(("hydra.", "defaults"))]
    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"),
                               version_base=None):
        verls = compose(config_name="ppo_trainer")

    def has(cfg, key):  # also a key verl leaves mandatory (???: rollout.name)
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent)
        return isinstance(node, DictConfig) and leaf in node.keys()

    assert [k for k in keys if not has(verls, k)] == []
    ours = launch.compose([])
    assert {k: OmegaConf.select(ours, k) for k in keys} == {k: OmegaConf.select(own, k) for k in keys}


def test_verl_dataset_format(char_model_dir, tmp_path):
    from transformers import AutoTokenizer

    df = problems(3).assign(options=[[], ["a", "b"], []], answer_type=["math", "multiple_choice", "math"])
    tok = AutoTokenizer.from_pretrained(char_model_dir)
    prompts = build_prompts(df, "question_first", tok, False)
    out = to_verl_frame(df, prompts)
    assert list(out.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert out["reward_model"][1] == {"style": "rule", "ground_truth": "2"}
    assert out["extra_info"][1] == {"index": 1, "id": "p1", "answer_type": "multiple_choice", "options": ["a", "b"]}
    path = tmp_path / "train.parquet"
    out.to_parquet(path)
    back = pd.read_parquet(path)
    msgs = [dict(m) for m in back["prompt"][1]]
    # verl renders the messages with the launcher's pass-through template: the local engine's prompt, unchanged
    tok.chat_template = VERBATIM_TEMPLATE
    rendered = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert rendered == prompts[1] and "B. b" in rendered


def test_metrics_file_keeps_the_last_record_of_each_step(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "a": 1}\n{"step": 2, "a": 2}\n{"step": 2, "a": 3}\n')  # step 2 rerun after a resume
    assert workdir.read_metrics(p) == [{"step": 1, "a": 1}, {"step": 2, "a": 3}]


def test_save_freq_is_save_every_and_the_trainer_saves_the_other_evaluated_steps():
    """The mechanism study's T_ref = 313 is prime: a save_freq hitting it would save every step."""
    s = {"total_steps": 626, "save_every": 10, "export_steps": [50, 100, 313, 626]}
    assert launch.save_freq(s) == 10
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"trainer": {"save_freq": 10}})
    t._hook = type("H", (), {"settings": TrainSettings.from_dict(s), "total_steps": 626})()
    assert t._vicurl_extra_saves() == {313}


# ---------------------------------------------------------------- curricula that choose prompts (AdaRFT, SENT)


class CheckpointingActorGroup(MockActorGroup):
    """The mock worker group, with the checkpoint calls ``_save_checkpoint`` / ``_load_checkpoint`` make."""

    def __init__(self, rollouts_of):
        super().__init__(None, None)
        self.rollouts_of = rollouts_of  # batch -> (old_lp, entropys) rows

    def compute_log_prob(self, td):
        self.old_lp, self.entropys = self.rollouts_of(td)
        return super().compute_log_prob(td)

    def save_checkpoint(self, local_path, remote_path, step, max_ckpt_to_keep=None):
        Path(local_path, "huggingface").mkdir(parents=True, exist_ok=True)

    def load_checkpoint(self, local_path, del_local_after_load=False):
        pass


def sampler_trainer(settings, tr, tmp_path, rollouts_of):
    """A ``VICuRLTrainer`` whose dataloader is built by verl's own ``_create_dataloader`` (our override first)."""
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({
        "actor_rollout_ref": {
            "actor": {"calculate_sum_pi_squared": False, "calculate_entropy": False, "entropy_coeff": 0.0,
                      "ppo_mini_batch_size": B, "ppo_epochs": 1, "data_loader_seed": 42, "shuffle": False,
                      "checkpoint": {"async_save": False}, "optim": {"lr": 1e-6}},
            "rollout": {"n": G, "temperature": 1.0, "multi_turn": {"enable": False}},
        },
        "data": {"train_batch_size": B, "gen_batch_size": None, "val_batch_size": None, "dataloader_num_workers": 0,
                 "validation_shuffle": False},
        "trainer": {"default_local_dir": str(tmp_path / "ckpt"), "default_hdfs_dir": None, "total_epochs": 2,
                    "total_training_steps": settings["total_steps"], "resume_mode": "auto",
                    "max_actor_ckpt_to_keep": 1, "del_local_ckpt_after_load": False},
        "vicurl": {"work_dir": str(tmp_path / "work")},
    })
    t.tokenizer = tr.tokenizer
    t.use_critic = False
    t.actor_rollout_wg = CheckpointingActorGroup(rollouts_of)
    t._hook = Hook(settings, tr.train_df, tr.tokenizer, tr.vocab_size, settings["total_steps"],
                   metrics_path=tmp_path / "work" / "metrics.jsonl", prompt_stats=prompt_stats())
    rows = [{"extra_info": {"id": pid}, "index": i} for i, pid in enumerate(tr.ids)]  # verl's dataset rows
    from verl.utils.dataset.rl_dataset import collate_fn

    t._create_dataloader(rows, rows, collate_fn, None)
    return t


def fit_like(t, run_step, stop_after=None):
    """The loop of ``RayPPOTrainer.fit`` (0.9.1) around the step: resume, epochs, global_steps."""
    t.global_steps = 0
    t._load_checkpoint()
    current_epoch = t.global_steps // len(t.train_dataloader)
    t.global_steps += 1
    for _epoch in range(current_epoch, t.config.trainer.total_epochs):
        for batch_dict in t.train_dataloader:
            run_step(t, batch_dict)
            t._save_checkpoint()  # save_freq 1
            if t.global_steps >= t.total_training_steps or t.global_steps == stop_after:
                return
            t.global_steps += 1


@pytest.mark.parametrize("curriculum", ["adarft", "sent"])
def test_proposed_batches_equal_the_local_engines_and_survive_a_resume(curriculum, char_model_dir, tmp_path,
                                                                      monkeypatch):
    """verl's dataloader with ``CurriculumSampler`` draws the local engine's prompts at every step
    (the curriculum fed the same rewards in between), across an epoch boundary and after resuming
    from a checkpoint inside an epoch and at an epoch boundary."""
    params = {"target_start": 50.0} if curriculum == "adarft" else {}  # low rewards: the target moves down
    settings = settings_for("oracle", curriculum, export_steps=[], curriculum_params=params)
    cfg = TrainSettings.from_dict(settings)
    tr = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "local", prompt_stats=prompt_stats())
    monkeypatch.setattr(rollout_engine, "sample", lambda model, tok, prompts, *a, **k: fixed_rollouts(tok, prompts))
    local_ids, parts = [], {}
    rollout = tr.scorer.rollout

    def recording(ids, seed):
        part = rollout(ids, seed)
        local_ids.append(list(ids))
        parts[tuple(ids)] = part
        return part

    tr.scorer.rollout = recording
    tr.run()  # the local engine, 4 steps (2 epochs of 2 batches)
    assert len(local_ids) == 4 and len({tuple(i) for i in local_ids}) > 1
    if curriculum == "adarft":
        assert tr.curriculum.target != 50.0  # the rewards moved the target

    # same rollouts on verl: pi_old's values of the prompts' local rollouts (the step's own; the
    # policy moved in the local run, which changes confidences, not these curricula's choices)
    fresh = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "local2", prompt_stats=prompt_stats())
    order = interleave_order()
    rows = torch.as_tensor(order)

    def run_step(drawn):
        def step(t, batch_dict):
            ids = [e["id"] for e in batch_dict["extra_info"]]
            drawn.append(ids)
            part = fresh.scorer.rollout(ids, seed=0)
            batch = verl_batch(fresh, part, order)
            t.actor_rollout_wg.rollouts_of = lambda td: (part.old_lp[rows], part.entropys[rows])
            reward_tensor, _ = extract_reward(batch)
            old, _ = t._compute_old_log_prob(batch)
            old.batch.pop("entropys")
            batch = batch.union(old)
            batch.batch["token_level_scores"] = reward_tensor
            batch.batch["token_level_rewards"] = reward_tensor
            batch = ray_trainer.compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=G)
            t._update_actor(batch)
        return step

    drawn: list[list[str]] = []
    t = sampler_trainer(settings, fresh, tmp_path / "a", None)
    assert isinstance(t.train_dataloader.sampler, CurriculumSampler) and len(t.train_dataloader) == 2
    fit_like(t, run_step(drawn))
    assert drawn == local_ids
    if curriculum == "adarft":
        assert t._hook.curriculum.target == pytest.approx(tr.curriculum.target)

    # interrupted after step 3 (inside epoch 2), resumed by a fresh trainer: step 4 as uninterrupted
    first: list[list[str]] = []
    t = sampler_trainer(settings, fresh, tmp_path / "b", None)
    fit_like(t, run_step(first), stop_after=3)
    resumed: list[list[str]] = []
    t = sampler_trainer(settings, fresh, tmp_path / "b", None)
    fit_like(t, run_step(resumed))
    assert first + resumed == local_ids and len(resumed) == 1

    # resumed at the epoch boundary (verl skips the dataloader state there): steps 3 and 4 as uninterrupted
    (tmp_path / "b" / "ckpt" / "latest_checkpointed_iteration.txt").write_text("2")
    resumed = []
    t = sampler_trainer(settings, fresh, tmp_path / "b", None)
    fit_like(t, run_step(resumed))
    assert resumed == local_ids[2:]
    state = json.loads((tmp_path / "b" / "ckpt" / "global_step_4" / "vicurl_curriculum.json").read_text())
    assert state["curriculum"] == tr.curriculum.state_dict()


def test_sampler_refuses_prefetching_workers(char_model_dir, tmp_path):
    settings = settings_for("oracle", "sent", export_steps=[])
    tr = LocalTrainer(TrainSettings.from_dict(settings), char_model_dir, problems(), tmp_path / "l",
                      prompt_stats=prompt_stats())
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"data": {"dataloader_num_workers": 8}, "vicurl": {}})
    t._hook = Hook(settings, tr.train_df, tr.tokenizer, tr.vocab_size, 4, prompt_stats=prompt_stats())
    with pytest.raises(RuntimeError, match="dataloader_num_workers must be 0"):
        t._create_dataloader([], [], None, None)


# ---------------------------------------------------------------- VCRL's replay

REPLAY_RESPONSES = [
    ["\\boxed{6}", "\\boxed{1}", "\\boxed{6}", "no"],  # p5, gold 6
    ["\\boxed{7}", "\\boxed{7}", "\\boxed{2}", "\\boxed{7}"],  # p6, gold 7
    ["\\boxed{8}", "x", "\\boxed{8}", "\\boxed{3}"],  # p7, gold 8
]
BANK = {"bank": {"p5": {"priority": 0.5, "inserted": 1, "replays": 0},
                 "p6": {"priority": 0.2, "inserted": 1, "replays": 1},
                 "p7": {"priority": 0.1, "inserted": 1, "replays": 0}}}


@pytest.mark.parametrize("reward", ["oracle", "entropy"])
def test_vcrl_replay_equals_the_local_engine(reward, char_model_dir, tmp_path, monkeypatch):
    """One VCRL step with replay: the local engine appends the re-rolled bank prompts; verl's
    trainer rolls them out in ``_compute_old_log_prob`` and puts them in dropped prompts' rows.
    Rewards, advantages, old log-probs and every sequence's loss weight over its normalizer agree."""
    # continuous rewards are min-max scaled per group (p high): a stricter kappa drops some prompts
    settings = settings_for(reward, "vcrl", kl_coef=0.5,
                            curriculum_params={"switch_step": 6, "kappa_early": 0.3 if reward == "oracle" else 0.9})
    cfg = TrainSettings.from_dict(settings)
    tr = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "local", prompt_stats=prompt_stats())
    tr.curriculum.load_state_dict(BANK)
    monkeypatch.setattr(rollout_engine, "sample", lambda model, tok, prompts, *a, **k: fixed_rollouts(
        tok, prompts, RESPONSES if len(prompts) == B else REPLAY_RESPONSES))
    step = 2
    ids = tr.ids[:B]
    # LocalTrainer.train_step up to the update
    part = tr.scorer.rollout(ids, seed=0)
    batch_l = tr.scorer.curriculum_batch(part, step)
    sel = tr.curriculum.select(batch_l)
    assert sel.replay, "the fixture must drop prompts and replay bank entries"
    extra = tr.scorer.rollout(sel.replay, seed=1)
    final = tr.curriculum.after_replay(sel, batch_l, tr.scorer.curriculum_batch(extra, step))
    full = part.concat(extra, tr.tokenizer.pad_token_id)
    tr.curriculum.observe(batch_l.concat(tr.scorer.curriculum_batch(extra, step)), final)
    seq_w = sequence_weights(final.weights, full.scored.keep, G)
    r = len(sel.replay)
    dropped = np.flatnonzero(sel.mask.numpy() == 0)[:r]

    # verl: the same rollouts; the replay batch in its own row order
    order = interleave_order()
    rows = torch.as_tensor(order)
    batch = verl_batch(tr, part, order)
    r_order = np.arange(r * G).reshape(r, G)[::-1].reshape(-1).copy()  # groups swapped, rows in order within
    r_batch = verl_batch(tr, extra, r_order)
    trainer = make_trainer(settings, tr, None, None, tmp_path)
    trainer._hook.curriculum.load_state_dict(BANK)
    calls = iter([(part.old_lp[rows], part.entropys[rows]),
                  (extra.old_lp[torch.as_tensor(r_order)], extra.entropys[torch.as_tensor(r_order)])])
    group = trainer.actor_rollout_wg

    def compute_log_prob(td):
        group.old_lp, group.entropys = next(calls)
        return MockActorGroup.compute_log_prob(group, td)

    group.compute_log_prob = compute_log_prob
    asked = []
    trainer._vicurl_rollout = lambda pids: (asked.append(list(pids)), r_batch)[1]

    reward_tensor, _ = extract_reward(batch)
    old, _ = trainer._compute_old_log_prob(batch)
    assert asked == [list(sel.replay)]
    old.batch.pop("entropys")
    batch = batch.union(old)
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = reward_tensor
    batch = ray_trainer.compute_advantage(batch, adv_estimator=AdvantageEstimator.GRPO, num_repeat=G)

    # verl row i holds local (concatenated, prompt-major) row src[i]; rows of prompts still dropped after
    # the replay have left the batch (train.skip_dropped)
    src = order.copy()
    slot_of = {int(g): j for j, g in enumerate(dropped)}
    for i, lr in enumerate(order):
        g, k = divmod(int(lr), G)
        if g in slot_of:
            src[i] = B * G + slot_of[g] * G + k
    subset = trainer._hook.pending.row_subset
    if subset is not None:
        src = src[subset]
    srct = torch.as_tensor(src)
    mask = full.rollouts.response_mask[srct].float()
    assert torch.equal(batch.batch["response_mask"], full.rollouts.response_mask[srct])
    torch.testing.assert_close(batch.batch["token_level_scores"].sum(-1), full.scored.rewards[srct])
    torch.testing.assert_close(batch.batch["advantages"] * mask, full.scored.advantages[srct] * mask)
    torch.testing.assert_close(batch.batch["old_log_probs"], full.old_lp[srct] * mask)
    assert len(set(batch.non_tensor_batch["uid"])) == len({int(s) // G for s in src})  # one uid a prompt

    trainer._update_actor(batch)
    sent = trainer.actor_rollout_wg.sent
    gbs = tu.get(sent, "global_batch_size")
    kept = sent["response_mask"].sum(-1) > 0
    is_w = sent["rollout_is_weights"][:, 0]
    # each sequence's share of the loss, w_i / normalizer, policy and (weighted) KL term alike
    verl_share = torch.where(kept, is_w / gbs, torch.zeros_like(is_w))
    kl_share = torch.where(kept, torch.full_like(is_w, 1.0 / gbs), torch.zeros_like(is_w))
    local_share = seq_w[srct].float() / (len(full.ids) * G)
    torch.testing.assert_close(verl_share, local_share)
    torch.testing.assert_close(kl_share, local_share)
    # what the verl batch no longer holds (the replaced and the dropped prompts) weighed nothing locally
    gone = torch.as_tensor(sorted(set(range(len(full.ids) * G)) - set(src.tolist())))
    assert (seq_w[gone] == 0).all()
    rec = json.loads((tmp_path / "work" / "metrics.jsonl").read_text().splitlines()[-1])
    assert rec["curriculum/replayed"] == r and rec["reward/mean"] == pytest.approx(float(full.scored.rewards.mean()))
    for k, v in final.metrics.items():
        assert rec[k] == (None if not np.isfinite(v) else pytest.approx(v, rel=1e-6, abs=1e-9)), k
    assert trainer._hook.curriculum.state_dict() == tr.curriculum.state_dict()


@pytest.mark.parametrize("curriculum", ["vcrl", "adarft", "sent"])
def test_selecting_curricula_compose_with_verls_config(curriculum):
    settings = settings_for("oracle", curriculum, total_steps=313, batch_size=128, group_size=8,
                            max_response_length=3072, curriculum_params=dict(DEMO["curricula"][curriculum]))
    ov = launch.overrides(settings, model_path="Qwen/Qwen2.5-Math-1.5B", train_files="/d/t.parquet", work_dir="/w",
                          settings_path="/w/s.json", train_set="/d/t.parquet", vocab_size=151936, n_train=40315,
                          prompt_stats="/r/prompt_stats.parquet")
    c = launch.compose(ov)
    assert c.data.dataloader_num_workers == (0 if curriculum in ("adarft", "sent") else 8)
    assert c.data.filter_overlong_prompts is False and c.vicurl.prompt_stats == "/r/prompt_stats.parquet"


def test_config_check_refuses_what_verl_cannot_run():
    """A setting the verl engine refuses fails when the workflow parses the config, naming the key."""
    cfg = paper_config()
    cfg["curricula"].update(vcrl={}, adarft={}, sent={})
    cfg["studies"]["main"]["settings"]["oracle"] = ["none", "vcrl", "adarft", "sent", "vicurl"]
    checks.check(cfg)  # the paper's oracle x {none, vcrl, adarft, sent, vicurl} runs on verl
    bad = copy.deepcopy(cfg)
    bad["studies"]["main"]["settings"]["oracle"].append("soft_confidence")
    bad["curricula"]["soft_confidence"] = {}  # weighted KL (train.weight_kl's default)
    with pytest.raises(ValueError, match=r"studies\.main\.settings\.oracle: 'soft_confidence'.*"
                                         r"curricula\.soft_confidence\.weight_kl"):
        checks.check(bad)
    bad = copy.deepcopy(cfg)
    bad["train"]["mini_batch_size"] = 32
    with pytest.raises(ValueError, match=r"studies\.main\.settings\.oracle: 'vcrl'.*train\.mini_batch_size"):
        checks.check(bad)
    bad["engine"] = "local"
    checks.check(bad)  # the local engine runs both


@pytest.mark.parametrize("rows", [4, 12, 20, 28, 64])
def test_a_replay_of_any_size_reaches_eight_agent_loop_workers(rows):
    """verl's agent loop gives each of its workers (8 on a GPU) an equal chunk of a generation batch
    (``DataProto.chunk``, which refuses unequal ones); a replay batch has r x G rows (G = 4: 12, 20, 28
    for r = 3, 5, 7). `generate_in_equal_chunks` fills the last chunk with copies and drops their
    rollouts: each real row gets its own, in order."""
    from vicurl.engines.verl.trainer import generate_in_equal_chunks

    class AgentLoopManager:  # verl's split (AgentLoopManager.generate_sequences), rows rolled out in place
        def generate_sequences(self, batch):
            chunks = batch.chunk(8)
            for c in chunks:
                c.batch["responses"] = c.batch["input_ids"] * 10
            return DataProto.concat(chunks)

    batch = DataProto.from_single_dict({"input_ids": torch.arange(rows)[:, None], "uid": np.arange(rows).astype(object)})
    if rows % 8:
        with pytest.raises(AssertionError, match="only support equal chunk"):
            AgentLoopManager().generate_sequences(batch)
    out = generate_in_equal_chunks(AgentLoopManager(), batch, 8)
    assert out.batch["responses"][:, 0].tolist() == [10 * i for i in range(rows)]
    assert list(out.non_tensor_batch["uid"]) == list(range(rows))


def test_eight_data_parallel_ranks_train_as_one(char_model_dir, tmp_path, monkeypatch):
    """With 8 data-parallel ranks the kept rows are padded with dropped ones (zero response mask) to a
    multiple of 8 (``_vicurl_drop_rows``); verl's dispatch gives each rank an equal slice, each rank's
    loss is normalized by the whole batch's sequences times the ranks (``ppo_loss``, dp_size 8) and
    FSDP averages the ranks' gradients. That average equals one rank's loss on the kept rows alone, and
    the local engine's (policy and weighted KL terms, value and gradient): the padding adds nothing,
    and the kept sequences keep their weight 1/beta-hat."""
    from verl.workers.utils.losses import ppo_loss

    settings = settings_for("oracle", "vicurl", curriculum_params={"beta_start": 0.25}, kl_coef=0.5)
    u = verl_update(settings, char_model_dir, tmp_path, monkeypatch, ranks=8)
    kept_rows = int((u.seq_w != 0).sum())
    assert kept_rows % 8  # padding is needed
    assert len(u.subset) == kept_rows + (-kept_rows) % 8 and len(u.subset) % 8 == 0
    sent = u.sent
    assert int((sent["response_mask"].sum(-1) > 0).sum()) == kept_rows  # the padding rows: zero mask

    tokens = int(sent["response_mask"].sum())
    per_rank = []
    shards = tu.chunk_tensordict(sent, 8)  # verl's dispatch to the ranks: equal contiguous slices
    for shard, idx in zip(shards, torch.arange(len(u.rows)).chunk(8), strict=True):
        tu.assign_non_tensor(shard, dp_size=8, batch_num_tokens=tokens)
        loss, _ = ppo_loss(u.actor_cfg, {"log_probs": to_no_padding(u.logp[u.rows[idx]], u.batch.batch[idx])}, shard)
        per_rank.append(loss)
    dp_loss = torch.stack(per_rank).mean()  # FSDP: the mean of the ranks' gradients
    (g_dp,) = torch.autograd.grad(dp_loss, u.logp)
    (g_local,) = torch.autograd.grad(u.local_loss, u.logp)
    torch.testing.assert_close(dp_loss, u.local_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(g_dp, g_local, rtol=1e-5, atol=1e-8)

    # a rank that holds padding rows only (fewer kept rows than ranks, G not a multiple of them; no run here
    # reaches it): its loss is 0 and its gradient 0, not NaN, which FSDP's average would spread to every rank
    idx = torch.arange(len(u.rows)).chunk(8)[0]
    padding = shards[0].clone()
    padding["response_mask"] = torch.zeros_like(padding["response_mask"])
    tu.assign_non_tensor(padding, dp_size=8, batch_num_tokens=tokens)
    loss, _ = ppo_loss(u.actor_cfg, {"log_probs": to_no_padding(u.logp[u.rows[idx]], u.batch.batch[idx])}, padding)
    (g,) = torch.autograd.grad(loss, u.logp)
    assert float(loss.detach()) == 0.0 and torch.isfinite(g).all() and float(g.abs().max()) == 0.0


RAY_WORKER_ENV = """
import json, os, sys
import ray

ray.init(address="local", num_cpus=1, include_dashboard=False, runtime_env=json.loads(sys.argv[1]))
keys = json.loads(sys.argv[2])
print(json.dumps(ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in keys}).remote())))
ray.shutdown()
"""


def test_a_cluster_of_several_nodes_hands_the_workers_the_runs_variables(tmp_path):
    """On several nodes the run joins the user's Ray cluster, whose workers (started by `ray start` on each node)
    inherit nothing from the train job: every variable the launcher set (the project's verl patches, the run's
    socket token, vLLM's sampler, the trackers' folders, PYTHONPATH) goes to them through the ``runtime_env`` that
    verl's ``run_ppo`` hands ``ray.init`` (verl's defaults merged with the launcher's overrides). Here a Ray
    started by a process that has none of them: its worker sees each, with its value (commas and all)."""
    import subprocess
    import sys

    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    from vicurl.runtime import tracking

    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    folders = {k: tmp_path / v for k, v in tracking.folders({"loggers": ["tensorboard", "wandb"], "scenario": "paper"},
                                                             "main/qwen/oracle-vicurl/seed0").items()}
    env = launch.job_environment(base, tmp_path, folders)
    settings = settings_for("oracle", "vicurl", run=LAUNCHER_RUN, params_from=None)
    ov = launch.overrides(settings, model_path="m", train_files="t.parquet", work_dir=str(tmp_path), settings_path="s",
                          train_set="ts.parquet", vocab_size=100, n_train=8, verl={"n_gpus_per_node": 8, "nnodes": 2})
    config = launch.compose(ov + launch.ray_worker_variables(env, base))
    runtime_env = OmegaConf.to_container(OmegaConf.merge(get_ppo_ray_runtime_env(config),
                                                         config.ray_kwargs.ray_init.runtime_env))
    wanted = {k: v for k, v in env.items() if k not in base}
    assert {"VERL_USE_EXTERNAL_MODULES", "VICURL_RUN_TOKEN", "VLLM_USE_FLASHINFER_SAMPLER", "TENSORBOARD_DIR",
            "WANDB_RUN_ID", "WANDB_TAGS", "PYTHONPATH"} <= set(wanted)
    assert "VLLM_RPC_BASE_PATH" not in runtime_env["env_vars"] and "RAY_TMPDIR" not in runtime_env["env_vars"]
    driver = {**base, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "RAY_TMPDIR": tempfile.mkdtemp(prefix="r", dir="/tmp")}
    try:
        out = subprocess.run([sys.executable, "-c", RAY_WORKER_ENV, json.dumps(runtime_env), json.dumps(sorted(wanted))],
                             env=driver, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(driver["RAY_TMPDIR"], ignore_errors=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == wanted


def test_each_run_starts_a_ray_of_its_own_with_the_runs_variables(tmp_path, monkeypatch):
    """The train job's environment, which every process of the run inherits: the project's verl patches, the
    run's socket token, vLLM with nothing to compile, the trackers' folders. On one node verl's ``ray.init`` is
    told to start a Ray of its own (address "local"): given no address, Ray joins the cluster that RAY_ADDRESS
    or a `ray start` on the node names (its ray_current_cluster file), whose workers never see these
    variables; several nodes need the user's cluster of them."""
    from ray._private import services

    from vicurl.engines import workdir
    from vicurl.runtime import tracking

    base = {"RAY_ADDRESS": "10.0.0.1:6379", "PATH": "/usr/bin", "VERL_USE_EXTERNAL_MODULES": "mine"}
    folders = {k: tmp_path / v for k, v in tracking.folders({"loggers": ["tensorboard", "wandb"], "scenario": "paper"},
                                                             "main/qwen/oracle-vicurl/seed0").items()}
    env = launch.job_environment(base, tmp_path, folders)
    assert env["PATH"] == "/usr/bin" and env["VERL_USE_EXTERNAL_MODULES"].split(",") == ["mine", *launch.VERL_MODULES]
    assert env["VICURL_RUN_TOKEN"] and env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert env["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "verl_log.jsonl")
    assert env["TENSORBOARD_DIR"] == str(folders["tensorboard"].resolve())
    # W&B offline in the run's folder, one W&B run per training (a resumed job continues it), the seeds grouped
    assert (env["WANDB_MODE"], env["WANDB_DIR"]) == ("offline", str(folders["wandb"].resolve()))
    assert env["WANDB_RUN_ID"] == workdir.training_id(tmp_path) and env["WANDB_RESUME"] == "allow"
    assert env["WANDB_RUN_GROUP"] == "paper/main/qwen/oracle-vicurl"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO / "src")

    settings = settings_for("oracle", "vicurl", run=LAUNCHER_RUN, params_from=None)

    def address(nnodes):
        ov = launch.overrides(settings, model_path="m", train_files="t.parquet", work_dir=str(tmp_path),
                              settings_path="s", train_set="ts.parquet", vocab_size=100, n_train=8,
                              verl={"n_gpus_per_node": 1, "nnodes": nnodes})
        return launch.compose(ov).ray_kwargs.ray_init.get("address")

    assert address(1) == "local" and address(2) is None
    # what Ray makes of it on a node where `ray start` ran and RAY_ADDRESS names that cluster
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("10.0.0.1:6379")
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert services.canonicalize_bootstrap_address(None) == "10.0.0.1:6379"  # no address: that cluster
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert services.canonicalize_bootstrap_address("local") is None  # "local": a new one
