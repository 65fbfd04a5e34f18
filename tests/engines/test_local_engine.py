"""The local engine: deterministic, resumable, and exporting loadable checkpoints."""

import json

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

from vicurl.algos import rewards as reward_sources
from vicurl.config import methods
from vicurl.config.settings import TrainSettings
from vicurl.engines.local import LocalTrainer


def problems(n=24):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "question": [f"Compute {i} + 1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)]})


def config(**kw):
    base = dict(total_steps=5, batch_size=4, group_size=4, lr=1e-3, max_response_length=12, micro_batch_size=6,
                mini_batch_size=2, save_every=2, export_steps=[3, 5], curriculum="vicurl",
                curriculum_params={"beta_start": 0.5}, seed=3)
    base.update(kw)
    return TrainSettings(**base)


def without_times(history):
    """A run's metrics without their timings (which differ between runs with the same numbers)."""
    return [{k: v for k, v in m.items() if not k.startswith("time/")} for m in history]


def weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_resume_gives_the_same_numbers(char_model_dir, tmp_path):
    full = LocalTrainer(config(), char_model_dir, problems(), tmp_path / "full")
    hist_full = full.run()

    # a run "killed" after step 3: its last checkpoint is step 2; a fresh process resumes from it
    first = LocalTrainer(config(), char_model_dir, problems(), tmp_path / "resumed")
    first.run(until_step=3)
    assert sorted(p.name for p in (tmp_path / "resumed").glob("ckpt_*.pt")) == ["ckpt_step000002.pt"]
    second = LocalTrainer(config(), char_model_dir, problems(), tmp_path / "resumed")
    hist_resumed = second.run()
    assert second.step == 5

    assert json.dumps(without_times(hist_resumed)) == json.dumps(without_times(hist_full))
    wf, wr = weights(full.policy), weights(second.policy)
    assert all(torch.equal(wf[k], wr[k]) for k in wf)


def test_a_continued_run_is_the_source_run_trained_on(char_model_dir, tmp_path):
    """A run continuing another from its final state (the mechanism study: main's runs continued)
    ends with exactly the numbers of one run trained straight through with the schedule spanning
    the source's steps: the data order, the optimizer and the curriculum carry over; beta_t reaches
    1 at the source's last step and stays there."""
    straight = LocalTrainer(config(total_steps=8, curriculum_steps=4, export_steps=[8]), char_model_dir, problems(),
                            tmp_path / "straight")
    hist_straight = straight.run()

    source = LocalTrainer(config(total_steps=4, export_steps=[4]), char_model_dir, problems(), tmp_path / "source")
    source.run()
    continued = LocalTrainer(config(total_steps=8, curriculum_steps=4, export_steps=[6, 8]), char_model_dir,
                             problems(), tmp_path / "continued")
    continued.fork(tmp_path / "source", 4)
    hist_continued = continued.run()

    assert json.dumps(without_times(hist_continued)) == json.dumps(without_times(hist_straight))
    ws, wc = weights(straight.policy), weights(continued.policy)
    assert all(torch.equal(ws[k], wc[k]) for k in ws)
    betas = [m["curriculum/beta_target"] for m in hist_continued]
    assert betas[3:] == [1.0] * 5 and betas[0] == 0.5 and betas[2] < 1.0  # 0.5 -> 1 over steps 1..4
    # only this run's steps were trained here: steps 1-4 came from the source's final state
    assert sorted(p.name for p in (tmp_path / "continued" / "exports").iterdir()) == ["step6", "step8"]
    assert (tmp_path / "source" / "ckpt_step000004.pt").exists()  # the source's state is left as it was


def test_a_continuation_refuses_a_source_with_other_settings_or_no_state(char_model_dir, tmp_path):
    LocalTrainer(config(total_steps=4, export_steps=[4]), char_model_dir, problems(), tmp_path / "source").run()
    other = LocalTrainer(config(total_steps=8, export_steps=[8]), char_model_dir, problems(), tmp_path / "other")
    other.fork(tmp_path / "source", 4)  # the schedule would span 8 steps, the source's spanned 4
    with pytest.raises(RuntimeError, match="other training settings"):
        other.run()
    lost = LocalTrainer(config(total_steps=8, curriculum_steps=4), char_model_dir, problems(), tmp_path / "lost")
    with pytest.raises(RuntimeError, match="no training state of step 3"):
        lost.fork(tmp_path / "source", 3)


def test_training_changes_the_policy_and_exports(char_model_dir, tmp_path):
    tr = LocalTrainer(config(curriculum="none", curriculum_params={}), char_model_dir, problems(), tmp_path / "w")
    before = weights(tr.policy)
    hist = tr.run()
    assert [m["step"] for m in hist] == [1, 2, 3, 4, 5]
    assert any(not torch.equal(before[k], v) for k, v in tr.policy.state_dict().items())
    out = tmp_path / "out"
    tr.publish({3: out / "step3", 5: out / "step5"}, tmp_path / "metrics.jsonl")
    reloaded = AutoModelForCausalLM.from_pretrained(out / "step5")
    assert all(torch.equal(reloaded.state_dict()[k], v) for k, v in tr.policy.state_dict().items() if k in reloaded.state_dict())
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[0])["curriculum/beta_actual"] == 1.0


def test_vicurl_logs_its_schedule(char_model_dir, tmp_path):
    hist = LocalTrainer(config(total_steps=3, export_steps=[3]), char_model_dir, problems(), tmp_path / "w").run()
    assert [m["curriculum/beta_target"] for m in hist] == pytest.approx([0.5, 0.75, 1.0])
    assert hist[0]["curriculum/kept"] >= 3  # B = 4, beta = 0.5: k = 2, tau = c_(2) (1-based) keeps 3 (more with ties)


def test_changed_settings_refuse_to_resume(char_model_dir, tmp_path):
    LocalTrainer(config(), char_model_dir, problems(), tmp_path / "w").run(until_step=2)
    with pytest.raises(RuntimeError, match="other training settings"):
        LocalTrainer(config(lr=5e-4), char_model_dir, problems(), tmp_path / "w").run()


def test_unknown_setting_is_named():
    with pytest.raises(ValueError, match="lrr"):
        TrainSettings.from_dict({"total_steps": 1, "lrr": 1.0})


def parity_reward(group):
    """A deterministic stand-in reward with spread within groups (the random model never answers right)."""
    return reward_sources.GroupReward([float(len(t) % 2) for t in group.texts])


@pytest.fixture
def parity(monkeypatch):
    """Register ``parity`` as a reward source (config ``reward="parity"``) for this test."""
    monkeypatch.setitem(methods.REWARDS, "parity", methods.RewardSpec("parity", f"{__name__}:parity_reward",
                                                                      "Parity", "Parity", "Parity"))


@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_skipping_dropped_prompts_is_exact(char_model_dir, tmp_path, optimizer, parity):
    """The compute saving: processing only kept prompts gives the masked update's parameters.

    SGD without clipping makes the parameters linear in the gradient, so a wrong normalizer
    (which AdamW's scale invariance would hide) shows up too.
    """
    for extra in ({}, {"mini_batch_size": 2, "ppo_epochs": 2}):
        params = []
        for skip in (True, False):
            cfg = config(total_steps=2, batch_size=8, curriculum_params={"beta_start": 0.25}, save_every=100,
                         export_steps=[], skip_dropped=skip, reward="parity", **extra,
                         **({"grad_clip": 1e9} if optimizer == "sgd" else {}))
            tr = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / f"{optimizer}{skip}{len(extra)}")
            if optimizer == "sgd":
                tr.optimizer = torch.optim.SGD(tr.policy.parameters(), lr=0.5)
            before = weights(tr.policy)
            hist = tr.run(until_step=1)
            params.append(weights(tr.policy))
            seqs = hist[0]["actor/update_seqs"]
            kept = hist[0]["curriculum/kept"]
            assert seqs == (kept if skip else 8) * 4 * cfg.ppo_epochs  # G = 4 sequences per prompt
            assert kept < 8
        skip_w, mask_w = params
        assert any(not torch.equal(before[k], skip_w[k]) for k in skip_w)
        assert all(torch.allclose(skip_w[k], mask_w[k], atol=1e-6, rtol=0) for k in skip_w)


def test_no_skipping_when_kl_is_unweighted(char_model_dir, tmp_path):
    cfg = config(total_steps=1, batch_size=8, curriculum_params={"beta_start": 0.25}, export_steps=[], weight_kl=False)
    tr = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "w")
    hist = tr.run()
    assert hist[0]["actor/update_seqs"] == 8 * 4  # the KL term of dropped prompts still counts


def test_vcrl_replays_in_the_engine_and_resumes(char_model_dir, tmp_path, parity):
    cfg = config(total_steps=4, batch_size=4, curriculum="vcrl", curriculum_params={"kappa_early": 0.9, "switch_step": 10},
                 save_every=2, export_steps=[], reward="parity")
    full = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "full")
    hist = full.run()
    assert sum(m["curriculum/replayed"] for m in hist) > 0
    assert any(m["curriculum/kept"] > 0 for m in hist)
    first = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "resumed")
    first.run(until_step=3)
    second = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "resumed")
    hist2 = second.run()
    assert json.dumps(without_times(hist2)) == json.dumps(without_times(hist))  # the memory bank survived the restart


def test_adarft_and_sent_choose_the_prompts(char_model_dir, tmp_path):
    df = problems()
    stats = pd.DataFrame({"id": df["id"], "difficulty": [float(4 * i) for i in range(24)],
                          "semantic_entropy": [float(i % 12) for i in range(24)]})
    cfg = config(total_steps=3, batch_size=4, curriculum="adarft", curriculum_params={}, save_every=1, export_steps=[])
    hist = LocalTrainer(cfg, char_model_dir, df, tmp_path / "a", prompt_stats=stats).run()
    assert hist[0]["curriculum/target_difficulty"] == 0.0
    assert hist[0]["curriculum/batch_difficulty"] == pytest.approx((0 + 4 + 8 + 12) / 4)  # the 4 easiest
    assert hist[1]["curriculum/target_difficulty"] < 0.5  # reward ~0 pulls the target down (clipped at 0)
    resumed = LocalTrainer(cfg, char_model_dir, df, tmp_path / "a", prompt_stats=stats)
    assert resumed.latest_checkpoint() is not None
    cfg = config(total_steps=2, batch_size=4, curriculum="sent", curriculum_params={}, export_steps=[])
    tr = LocalTrainer(cfg, char_model_dir, df, tmp_path / "s", prompt_stats=stats)
    assert set(tr.curriculum.propose(1, [])) <= set(df["id"][stats["semantic_entropy"] < 6])
    with pytest.raises(ValueError, match="needs per-prompt statistics"):
        LocalTrainer(cfg, char_model_dir, df, tmp_path / "s2")


# ---------------------------------------------------------------- prompts over train.max_prompt_length


def with_long_questions(df, rows, size=1_000_000):
    """``df`` with the question of ``rows`` a ``size``-character one (a token a character here)."""
    df = df.copy()
    for i in rows:
        df.loc[i, "question"] = "Compute " + "1+" * (size // 2) + "1."
    return df


def test_a_huge_training_question_is_dropped_and_counted(char_model_dir, tmp_path):
    """A 1 MB question (1M tokens) is never sampled from: the run trains on the other rows, exactly as
    on the set without it, and says what it dropped in _work/long_prompts.json."""
    cfg = config(total_steps=2, export_steps=[], save_every=2)
    tr = LocalTrainer(cfg, char_model_dir, with_long_questions(problems(), [5]), tmp_path / "w", source="train.parquet")
    assert "p5" not in list(tr.train_df["id"]) and len(tr.train_df) == len(tr.prompts) == 23
    report = json.loads((tmp_path / "w" / "long_prompts.json").read_text())
    assert report == tr.long_prompts
    assert report["dropped"] == 1 and report["dropped_ids"] == ["p5"] and report["rows"] == 24
    assert report["max_prompt_length"] == 512 and report["longest"] > 1_000_000
    without = problems().drop(index=5).reset_index(drop=True)
    trained = tr.run()
    trained_without = LocalTrainer(cfg, char_model_dir, without, tmp_path / "v").run()
    assert json.dumps(without_times(trained)) == json.dumps(without_times(trained_without))


def test_a_set_without_long_prompts_is_trained_as_given(char_model_dir, tmp_path):
    tr = LocalTrainer(config(), char_model_dir, problems(), tmp_path / "w")
    from vicurl.data.prompts import build_prompts

    pd.testing.assert_frame_equal(tr.train_df, problems())
    assert tr.prompts == build_prompts(problems(), "question_first", tr.tokenizer, "auto")
    assert tr.long_prompts["dropped"] == 0 and tr.long_prompts["longest"] < 512


def test_long_training_prompts_refuse_the_set_naming_the_rows(char_model_dir, tmp_path):
    df = with_long_questions(problems(), [3, 7], size=600)
    with pytest.raises(ValueError, match=r"train.parquet: 2 prompt\(s\) longer than train.max_prompt_length=512 tokens: "
                                         r"'p3' \(\d+ tokens\), 'p7' .*set train.long_prompts: drop"):
        LocalTrainer(config(long_prompts="fail"), char_model_dir, df, tmp_path / "f", source="train.parquet")
    with pytest.raises(ValueError, match="train.long_prompts must be one of"):
        LocalTrainer(config(long_prompts="cut"), char_model_dir, df, tmp_path / "c")
    # dropping every row, or too many for a batch, is an error saying so, not a crash later
    with pytest.raises(ValueError, match=r"train.parquet: all 24 prompts are longer than train.max_prompt_length=20 "
                                         r"tokens .*nothing left"):
        LocalTrainer(config(max_prompt_length=20), char_model_dir, df, tmp_path / "a", source="train.parquet")
    with pytest.raises(ValueError, match=r"train.parquet has 3 rows once 2 longer than train.max_prompt_length=512 "
                                         r"tokens are dropped, fewer than train.batch_size=4"):
        LocalTrainer(config(), char_model_dir, with_long_questions(problems(5), [1, 3], size=600), tmp_path / "b",
                     source="train.parquet")


def test_scored_rollouts_concat_holds_both_parts(char_model_dir, tmp_path):
    """VCRL's replay appends a second scored part: rows, values and Scored concatenated, responses
    re-padded, reward metrics the per-prompt mean."""
    tr = LocalTrainer(config(max_response_length=6), char_model_dir, problems(), tmp_path / "w")
    a = tr.scorer.rollout(tr.ids[:2], seed=1)
    b = tr.scorer.rollout(tr.ids[2:5], seed=2)
    b.scored.metrics = {"reward/x": 4.0}
    a.scored.metrics = {"reward/x": 1.0}
    both = a.concat(b, tr.tokenizer.pad_token_id)
    assert both.ids == tr.ids[:5] and len(both.rollouts.texts) == 5 * 4
    assert torch.equal(both.scored.rewards, torch.cat([a.scored.rewards, b.scored.rewards]))
    assert torch.equal(both.scored.keep, torch.cat([a.scored.keep, b.scored.keep]))
    w = a.old_lp.shape[1]
    assert torch.equal(both.old_lp[:8, :w], a.old_lp) and torch.equal(both.scored.advantages[:8, :w], a.scored.advantages)
    assert both.scored.metrics == {"reward/x": (1.0 * 2 + 4.0 * 3) / 5}
    batch = tr.scorer.curriculum_batch(both, 1)
    assert batch.prompt_ids == tr.ids[:5] and batch.rewards.shape == (5, 4)
