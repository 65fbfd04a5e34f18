"""A verl run's exports and resume: verl's FSDP checkpoint manager on two gloo ranks, its model merger, the base
model's tokenizer and chat prompt, a finished run that only publishes, a continued run (the mechanism study)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from vicurl.data import schema
from vicurl.engines.verl import export, launch, varlen_attention
from vicurl.engines.verl.data import VERBATIM_TEMPLATE
from vicurl.engines.verl.trainer import CURRICULUM_STATE, VICuRLTrainer

from verl_support import (
    launch_settings,
    save_fsdp_checkpoint,
    train_df,
)


def test_an_export_renders_the_base_models_chat_prompt(chat_model_dir, saved_step, tmp_path):
    """base model -> launcher's tokenizer setup (verl's model config: the pass-through template) ->
    verl's checkpoint save -> export -> load: the prompt the base tokenizer renders, and the weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, ckpt = saved_step
    actor = export.step_dir(ckpt, 3) / "actor"
    saved = AutoTokenizer.from_pretrained(actor / "huggingface")
    assert saved.chat_template == VERBATIM_TEMPLATE  # what verl's save leaves: the defect an export must not copy
    assert "hf_model" not in config.actor_rollout_ref.actor.checkpoint.save_contents
    dest = tmp_path / "exports" / "step3"
    export.export_step(actor, dest, chat_model_dir)

    base, exported = AutoTokenizer.from_pretrained(chat_model_dir), AutoTokenizer.from_pretrained(dest)
    msgs = [{"role": "user", "content": "What is 2+3?"}]
    want = base.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert exported.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == want
    assert want.startswith("<s><|start|>user\n")
    assert exported("x 1", add_special_tokens=False)["input_ids"] == base("x 1", add_special_tokens=False)["input_ids"]
    # the weights: the shards' (base + 0.01), merged, in bf16 as verl's own hf_model save writes them
    model, ref = AutoModelForCausalLM.from_pretrained(dest), AutoModelForCausalLM.from_pretrained(chat_model_dir)
    for (name, p), (_, q) in zip(model.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(p.float(), (q + 0.01).bfloat16().float(), msg=name)


def test_an_export_is_made_and_loaded_where_the_launchers_attention_is_unknown(chat_model_dir, saved_step, tmp_path):
    """verl saves the training's attention (`varlen_attention`'s name) in the checkpoint's config. The
    launcher's own process merges a checkpoint a killed job left unexported, and an evaluation loads the export,
    neither having imported verl's external modules: the export is made there, and names no attention."""
    _, ckpt = saved_step
    actor = export.step_dir(ckpt, 3) / "actor"
    assert json.loads((actor / "huggingface" / "config.json").read_text())["attn_implementation"] == varlen_attention.NAME
    dest = tmp_path / "step3"
    code = ("import sys; from vicurl.engines.verl import export; export.export_step(sys.argv[1], sys.argv[2], sys.argv[3]); "
            "from transformers import AutoModelForCausalLM; m = AutoModelForCausalLM.from_pretrained(sys.argv[2]); "
            "print(m.config._attn_implementation)")
    out = subprocess.run([sys.executable, "-c", code, str(actor), str(dest), str(chat_model_dir)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "attn_implementation" not in json.loads((dest / "config.json").read_text())
    assert out.stdout.split()[-1] == "sdpa"  # transformers' own choice for a plain model


def test_a_killed_export_is_redone_and_a_rotated_one_is_refused(chat_model_dir, saved_step, tmp_path):
    config, ckpt = saved_step
    work = tmp_path / "work"
    (ckpt / export.TRACKER).write_text("3")
    half = work / "exports" / ".step3.k1ll3d.tmp" / "step3"  # what a job killed inside atomic_path leaves
    half.mkdir(parents=True)
    (half / "model.safetensors").write_bytes(b"\0" * 1000)
    assert export.missing_exports(work, [3, 6], ckpt) == [3]
    assert export.repair_exports(work, [3, 6], ckpt, chat_model_dir) == [3]
    assert (work / "exports" / "step3" / "config.json").exists() and export.missing_exports(work, [3, 6], ckpt) == []
    assert [p.name for p in (work / "exports").iterdir()] == ["step3"]  # the half-written folder went
    with pytest.raises(RuntimeError, match=r"steps \[2\].*delete"):
        export.repair_exports(work, [2, 3], ckpt, chat_model_dir)  # step 2's shards were rotated away


# ---------------------------------------------------------------- 3. a finished run only publishes


def test_a_rerun_after_the_last_save_publishes_without_training(chat_model_dir, saved_step, tmp_path, monkeypatch):
    """The tracker says T (the job died while exporting or publishing): no verl run (it would train
    step T + 1), the missing export is merged from the shards, everything is published."""

    _, ckpt0 = saved_step
    work = tmp_path / "_work"
    ckpt = work / "verl_checkpoints"
    shutil.copytree(export.step_dir(ckpt0, 3), export.step_dir(ckpt, 3))
    (ckpt / export.TRACKER).write_text("3")
    metrics = [{"step": s, "reward/mean": 0.1 * s} for s in (1, 2, 3)]
    (work / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(4), train_set)
    monkeypatch.setattr(launch, "train", lambda *a, **k: pytest.fail("a finished run must not train again"))
    s = launch_settings(total_steps=3, export_steps=[3])
    out = launch.run(s, str(chat_model_dir), str(train_set), str(work), str(tmp_path / "ck"), str(tmp_path / "m.jsonl"))
    assert (tmp_path / "ck" / "step3" / "model.safetensors").exists()
    assert [json.loads(x)["step"] for x in (tmp_path / "m.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert out["long_prompts"]["dropped"] == 0


def test_verl_resuming_from_the_last_step_is_refused(tmp_path):
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto"}})
    t._hook = type("H", (), {"total_steps": 6})()
    t.global_steps = 6
    with pytest.raises(RuntimeError, match="nothing to train"):
        _load_after_verls(t)


def _load_after_verls(t):
    """``VICuRLTrainer._load_checkpoint`` with verl's own part done (it set global_steps from the tracker)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    orig = RayPPOTrainer._load_checkpoint
    RayPPOTrainer._load_checkpoint = lambda self: None
    try:
        return t._load_checkpoint()
    finally:
        RayPPOTrainer._load_checkpoint = orig



# ---------------------------------------------------------------- continued runs (the mechanism study)


def _tree_digest(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def source_run_work(saved_step, work: Path):
    """A finished run's work folder as verl leaves it: the last save (step 3: FSDP shards, the
    dataloader's state after 3 batches, the curriculum's state), the tracker, the per-step metrics.
    Returns the folder and the batches the source's dataloader would have drawn next."""

    from torchdata.stateful_dataloader import StatefulDataLoader

    _, ckpt0 = saved_step
    ckpt = export.checkpoint_dir(work)
    shutil.copytree(export.step_dir(ckpt0, 3), export.step_dir(ckpt, 3))
    loader = StatefulDataLoader(list(range(20)), batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(0))
    it = iter(loader)
    for _ in range(3):
        next(it)
    torch.save(loader.state_dict(), export.step_dir(ckpt, 3) / "data.pt")  # what verl's _save_checkpoint writes
    following = [next(it).tolist() for _ in range(4)]
    (export.step_dir(ckpt, 3) / CURRICULUM_STATE).write_text(json.dumps({"step": 3, "curriculum": {}}))
    (ckpt / export.TRACKER).write_text("3")
    (work / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/mean": 0.1 * s}) + "\n" for s in (1, 2, 3)))
    return work, following


def test_a_continued_run_resumes_verl_from_its_source_runs_last_save(chat_model_dir, saved_step, tmp_path):
    """``export.fork`` puts the source run's last save into the continued run's checkpoints; then
    verl's own resume (``RayPPOTrainer._load_checkpoint``) finds it by its tracker, hands its shards to
    the actor, whose ``FSDPCheckpointManager`` loads the source's weights, and its dataloader draws the
    batches the source's would have drawn next. What the continued run writes afterwards (its metrics,
    verl's tracker, the rotation of old saves) leaves the source run's files as they were."""
    from types import SimpleNamespace

    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    from vicurl.curriculum import make_curriculum

    src, following = source_run_work(saved_step, tmp_path / "main" / "_work")
    before = _tree_digest(src)
    work = tmp_path / "mechanism" / "_work"
    export.fork(src, work, 3)
    ckpt = export.checkpoint_dir(work)
    assert find_latest_ckpt_path(str(ckpt)) == str(export.step_dir(ckpt, 3))
    shard = next((export.step_dir(ckpt, 3) / "actor").glob("model_world_size_*.pt"))
    assert shard.samefile(export.step_dir(export.checkpoint_dir(src), 3) / "actor" / shard.name)  # linked, not copied

    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"trainer": {"default_local_dir": str(ckpt), "default_hdfs_dir": None,
                                             "resume_mode": "auto", "del_local_ckpt_after_load": False}})
    loaded = []
    t.actor_rollout_wg = SimpleNamespace(load_checkpoint=lambda path, del_local_after_load: loaded.append(path))
    t.use_critic = False
    t.train_dataloader = StatefulDataLoader(list(range(20)), batch_size=2, shuffle=True,
                                            generator=torch.Generator().manual_seed(0))
    t._hook = SimpleNamespace(total_steps=6, curriculum=make_curriculum("vicurl", {}))
    t._load_checkpoint()  # verl's, then the curriculum's state
    assert t.global_steps == 3 and loaded == [str(export.step_dir(ckpt, 3) / "actor")]
    it = iter(t.train_dataloader)
    assert [next(it).tolist() for _ in range(4)] == following  # the data order goes on
    save_fsdp_checkpoint(saved_step[0], Path(loaded[0]), tmp_path, step=3, mode="load")  # the source's weights

    with open(work / "metrics.jsonl", "a") as f:  # the hook's next record
        f.write(json.dumps({"step": 4}) + "\n")
    (ckpt / export.TRACKER).write_text("6")  # verl's next save, and its rotation of the forked one
    shutil.rmtree(export.step_dir(ckpt, 3))
    assert _tree_digest(src) == before


def test_the_launcher_forks_before_training_and_only_once(chat_model_dir, saved_step, tmp_path, monkeypatch):
    src, _ = source_run_work(saved_step, tmp_path / "main" / "_work")
    work = tmp_path / "mechanism" / "_work"
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(4), train_set)
    seen = []

    def train(settings, model_path, work_dir, *a, **k):  # verl's run would resume from what it finds here
        seen.append(export.last_saved_step(export.checkpoint_dir(work_dir)))
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "train", train)
    s = launch_settings(total_steps=6, export_steps=[6], curriculum_steps=3)
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            launch.run(s, str(chat_model_dir), str(train_set), str(work), str(tmp_path / "ck"), str(tmp_path / "m.jsonl"),
                       start_from={"work_dir": str(src), "step": 3})
        (export.checkpoint_dir(work) / export.TRACKER).write_text("5")  # the continued run saved step 5, was killed
    assert seen == [3, 5]  # the second job resumes from the run's own save, not from the source's again
    assert [json.loads(x)["step"] for x in (work / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    with pytest.raises(RuntimeError, match="no complete save of step 2"):
        export.fork(src, tmp_path / "other" / "_work", 2)
