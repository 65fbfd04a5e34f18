"""A verl checkpoint step -> the Hugging Face folder the workflow evaluates (``<work>/exports/step{N}``).

verl's resume checkpoints (``global_step_N/actor``) hold FSDP shards of the model and optimizer;
the launcher leaves ``hf_model`` out of verl's ``checkpoint.save_contents``, so a resume save
costs no full-model write. At the steps the workflow evaluates, ``export_step`` merges the
shards with verl's own model merger (``verl.model_merger``, CPU, bf16 as verl's ``hf_model``)
and gives the folder the *base model's* tokenizer: the tokenizer verl saves next to the shards
carries the launcher's pass-through chat template (`vicurl.engines.verl.data.VERBATIM_TEMPLATE`),
which would make evaluation render instruct models' prompts without their chat format.

Plain CPU code (no Ray, no GPU): the launcher calls it to repair an export a killed job left
undone and to start a continued run from its source run's last save (``fork``),
``VICuRLTrainer._save_checkpoint`` after each save of an evaluated step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from vicurl.engines.workdir import PROGRESS, read_metrics
from vicurl.runtime.io import atomic_path, link_or_copy

TRACKER = "latest_checkpointed_iteration.txt"  # verl's record of its last complete save

# what a tokenizer's save_pretrained may write (transformers 5): removed before the base's is saved,
# so no file of verl's tokenizer (its chat_template.jinja above all) survives beside the base's
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "chat_template.jinja", "chat_template.json", "vocab.json", "merges.txt", "tokenizer.model")


def step_dir(checkpoint_dir: str | Path, step: int) -> Path:
    """verl's folder of the save at ``step`` (``trainer.default_local_dir``/global_step_N)."""
    return Path(checkpoint_dir) / f"global_step_{int(step)}"


def export_dir(work_dir: str | Path, step: int) -> Path:
    """The Hugging Face export of ``step`` in the run's work folder (``<work>/exports/step{N}``)."""
    return Path(work_dir) / "exports" / f"step{int(step)}"


def last_saved_step(checkpoint_dir: str | Path) -> int:
    """The step of verl's last complete save (its tracker file), 0 when there is none."""
    p = Path(checkpoint_dir) / TRACKER
    if not p.exists():
        return 0
    text = p.read_text().strip()
    if not text.isdigit():
        raise RuntimeError(f"{p}: {text!r} is not a step number; delete {p.parent} to restart the run")
    return int(text)


def use_base_tokenizer(model_dir: str | Path, base_model: str | Path) -> None:
    """Replace the tokenizer files of ``model_dir`` with the base model's tokenizer, as loaded."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(base_model))
    for name in TOKENIZER_FILES:
        (Path(model_dir) / name).unlink(missing_ok=True)
    tokenizer.save_pretrained(str(model_dir))


def export_step(actor_dir: str | Path, dest: str | Path, base_model: str | Path) -> None:
    """``global_step_N/actor`` (FSDP shards, ``huggingface/`` config) -> a whole HF model at ``dest``
    (atomically: a killed export leaves no folder, and the launcher redoes it)."""
    from verl.model_merger.base_model_merger import ModelMergerConfig
    from verl.model_merger.fsdp_model_merger import FSDPModelMerger

    from vicurl.engines.verl import varlen_attention  # the saved config names it: the merger builds the model

    actor_dir = Path(actor_dir)
    if not (actor_dir / "fsdp_config.json").exists():
        raise RuntimeError(f"{actor_dir} is not a complete verl FSDP checkpoint (no fsdp_config.json)")
    with atomic_path(dest) as tmp:
        cfg = ModelMergerConfig(operation="merge", backend="fsdp", local_dir=str(actor_dir), target_dir=str(tmp),
                                hf_model_config_path=str(actor_dir / "huggingface"))
        FSDPModelMerger(cfg).merge_and_save()
        plain_attention(tmp / "config.json", varlen_attention.NAME)
        use_base_tokenizer(tmp, base_model)


def plain_attention(config_json: Path, name: str) -> None:
    """An export is a plain Hugging Face model: the training's attention (verl saves it in the config, and only
    a process that imported `varlen_attention` knows it) is left out, and whoever loads the export picks its own."""
    config = json.loads(config_json.read_text())
    if config.get("attn_implementation") == name:
        del config["attn_implementation"]
        config_json.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def missing_exports(work_dir: str | Path, export_steps, checkpoint_dir: str | Path) -> list[int]:
    """Evaluated steps up to verl's last save whose export is missing (a job killed while exporting)."""
    last = last_saved_step(checkpoint_dir)
    return [int(s) for s in export_steps if int(s) <= last and not export_dir(work_dir, s).exists()]


def repair_exports(work_dir: str | Path, export_steps, checkpoint_dir: str | Path, base_model: str | Path) -> list[int]:
    """Redo the missing exports whose checkpoint is still on disk; the ones verl already rotated
    away cannot be redone: an error naming them (the run must restart). The half-written folders a
    killed export left (`vicurl.runtime.io.atomic_path`'s, a whole model each) go first: a job that starts owns
    its work folder, so no export of its is under way."""
    for stale in (Path(work_dir) / "exports").glob(".step*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
    missing = missing_exports(work_dir, export_steps, checkpoint_dir)
    lost = [s for s in missing if not (step_dir(checkpoint_dir, s) / "actor" / "fsdp_config.json").exists()]
    if lost:
        raise RuntimeError(f"the exports of steps {lost} are missing and their checkpoints are gone; delete "
                           f"{Path(work_dir)} to retrain the run")
    for s in missing:
        export_step(step_dir(checkpoint_dir, s) / "actor", export_dir(work_dir, s), base_model)
    return missing


def prune_shards(checkpoint_dir: str | Path, keep: int) -> list[int]:
    """Delete the model and optimizer shards (``global_step_N/actor``) of every save but the newest
    ``keep`` up to verl's tracker; returns the steps pruned. verl rotates its saves from a list it
    keeps in memory, so a resumed run would never delete the saves made before the resume (one
    orphaned checkpoint a retry: 18 GB for a 1.5B model, 90 GB for 7B): this reads the disk instead.
    The small files stay (the dataloader's and the curriculum's state)."""
    last = last_saved_step(checkpoint_dir)
    saved = sorted(int(d.name.rsplit("_", 1)[1]) for d in Path(checkpoint_dir).glob("global_step_*")
                   if d.name.rsplit("_", 1)[1].isdigit() and (d / "actor").is_dir())
    older = [s for s in saved if s <= last][: -max(int(keep), 1)]
    for s in older:
        shutil.rmtree(step_dir(checkpoint_dir, s) / "actor")
    return older


def copy_export(src: str | Path, dest: str | Path) -> None:
    """Copy a finished export (publishing it as a declared output), atomically."""
    with atomic_path(dest) as tmp:
        shutil.copytree(src, tmp)


def checkpoint_dir(work_dir: str | Path) -> Path:
    """verl's resume checkpoints of a run (``trainer.default_local_dir``)."""
    return Path(work_dir) / "verl_checkpoints"


def fork(source_work_dir: str | Path, work_dir: str | Path, step: int) -> None:
    """Start a run from the final save (step ``step``) of the run it continues (`vicurl.config.runs`):
    verl's ``global_step_N`` folder (model and optimizer shards, dataloader state, the
    curriculum's state) hard-linked into this run's checkpoints (copied across file systems), the
    per-step metrics copied, and verl's tracker written last, naming step N: verl's
    ``resume_mode: auto`` then resumes from it as from the run's own save. A no-op once the run
    has a save of its own. Every file verl or the hook writes later is a new file (or, for the
    tracker and the metrics, this run's own copy), so the source run is never modified."""
    src_ckpt, ckpt = checkpoint_dir(source_work_dir), checkpoint_dir(work_dir)
    if last_saved_step(ckpt) > 0:
        return
    if last_saved_step(src_ckpt) != int(step) or not step_dir(src_ckpt, step).is_dir():
        raise RuntimeError(f"{src_ckpt} has no complete save of step {step} (its last: {last_saved_step(src_ckpt)}): "
                           f"the run this one continues lost its final training state; retrain it to continue from it")
    with atomic_path(step_dir(ckpt, step)) as tmp:
        shutil.copytree(step_dir(src_ckpt, step), tmp, copy_function=link_or_copy)
    rows = [r for r in read_metrics(Path(source_work_dir) / PROGRESS) if r["step"] <= int(step)]
    with atomic_path(Path(work_dir) / PROGRESS) as tmp:
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    with atomic_path(ckpt / TRACKER) as tmp:
        tmp.write_text(str(int(step)))
