"""The local engine: deterministic, resumable, and exporting loadable checkpoints."""

import json

import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM

from vicurl.engines.local import LocalTrainer, TrainConfig


def problems(n=24):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "question": [f"Compute {i} + 1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)]})


def config(**kw):
    base = dict(total_steps=5, batch_size=4, group_size=4, lr=1e-3, max_response_length=12, micro_batch_size=6,
                mini_batch_size=2, save_every=2, export_steps=[3, 5], curriculum="vicurl",
                curriculum_params={"beta_start": 0.5}, seed=3)
    base.update(kw)
    return TrainConfig(**base)


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

    strip = lambda h: [{k: v for k, v in m.items() if not k.startswith("time/")} for m in h]
    assert json.dumps(strip(hist_resumed)) == json.dumps(strip(hist_full))
    wf, wr = weights(full.policy), weights(second.policy)
    assert all(torch.equal(wf[k], wr[k]) for k in wf)


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
        TrainConfig.from_dict({"total_steps": 1, "lrr": 1.0})
