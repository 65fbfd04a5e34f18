"""Helpers of the verl engine's tests (tests/engines/test_verl_*.py): the launcher's composed config for a model,
verl's model config and loading, gloo ranks that meet in a file, verl's FSDP checkpoint manager on them."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

from vicurl.data import schema
from vicurl.engines.verl import launch

from harness import LAUNCHER_RUN, settings_for


def launch_settings(**kw):
    """The launcher's run: majority vote, VI-CuRL (no parameters given: the settings' defaults)."""
    return settings_for("majority_vote", "vicurl", run=LAUNCHER_RUN, params_from=None, **kw)


def launcher_config(model_dir, work, settings=None, verl=None):
    """verl's composed ``ppo_trainer`` config with the launcher's overrides for this model."""
    ov = launch.overrides(settings or launch_settings(), model_path=str(model_dir), train_files=str(work / "t.parquet"),
                          work_dir=str(work), settings_path=str(work / "s.json"), train_set=str(work / "ts.parquet"),
                          vocab_size=100, n_train=8, verl={"n_gpus_per_node": 1, **(verl or {})})
    return launch.compose(ov)


def verl_model_config(config):
    """What verl's TaskRunner and workers build from ``actor_rollout_ref.model`` (main_ppo_v0)."""
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(config.actor_rollout_ref.model)


def load_like_verls_engine(model_config):
    """The actor's module as verl's FSDP engine builds it (``FSDPEngine._build_module``)."""
    from verl.utils.model import get_hf_auto_model_class

    cls = get_hf_auto_model_class(hf_config=model_config.hf_config)
    return cls.from_pretrained(model_config.local_path, torch_dtype=torch.float32, config=model_config.hf_config)


SAVE_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

model_cfg, out, step, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD_SIZE"]))
mc = omega_conf_to_dataclass(OmegaConf.load(model_cfg))  # the launcher's actor_rollout_ref.model
from verl.utils.model import get_hf_auto_model_class
model = get_hf_auto_model_class(hf_config=mc.hf_config).from_pretrained(mc.local_path, torch_dtype=torch.float32,
                                                                         config=mc.hf_config)
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("fsdp",))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
if mode == "save":
    with torch.no_grad():  # a trained policy differs from the base
        for p in model.parameters():
            p.add_(0.01)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
contents = {"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model", "optimizer", "extra"]}
cm = FSDPCheckpointManager(model=model, optimizer=opt, lr_scheduler=None, processing_class=mc.get_processor(),
                           checkpoint_config=contents)
if mode == "save":
    cm.save_checkpoint(out, None, step, max_ckpt_to_keep=1)
else:  # load the save into the base model's shards, as a resuming worker does: the saved weights
    cm.load_checkpoint(out)
    base = get_hf_auto_model_class(hf_config=mc.hf_config).from_pretrained(mc.local_path, torch_dtype=torch.float32,
                                                                            config=mc.hf_config)
    for (name, p), q in zip(model.named_parameters(), base.parameters()):
        torch.testing.assert_close(p.full_tensor(), q + 0.01, msg=name)
dist.destroy_process_group()
"""


def rendezvous(work: Path) -> dict[str, str]:
    """Where a test's gloo ranks meet: a file of their own (a free port chosen first could be taken by another
    process, Ray's or vLLM's of the other suite, before rank 0 binds it)."""
    return {"RENDEZVOUS": f"file://{work}/rendezvous-{secrets.token_hex(4)}"}


def save_fsdp_checkpoint(config, actor_dir: Path, tmp_path: Path, step: int, world_size: int = 2,
                         mode: str = "save") -> None:
    """verl's ``FSDPCheckpointManager.save_checkpoint`` of an FSDP2 model on ``world_size`` gloo ranks,
    the model and tokenizer built from the launcher's model config as verl's workers build them
    (``mode="load"``: its ``load_checkpoint`` of such a save, checking the weights it loads)."""
    script, model_cfg = tmp_path / "save.py", tmp_path / "model.yaml"
    script.write_text(SAVE_SCRIPT)
    OmegaConf.save(config.actor_rollout_ref.model, model_cfg)
    env = {**os.environ, **rendezvous(tmp_path), "WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": "1"}
    env.update(launch.verl_environment(env))  # the project's modules in verl, as its workers import them
    procs = [subprocess.Popen([sys.executable, str(script), str(model_cfg), str(actor_dir), str(step), mode],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world_size)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)[-3000:]


def train_df(n, long_every=None):
    """``n`` prepared rows, every ``long_every``-th prompt long."""
    q = [("What is " + "1+" * (40 if long_every and i % long_every == 0 else 1) + f"{i}?") for i in range(n)]
    return schema.to_frame([schema.make_row(id=f"p{i}", question=q[i], answer=str(i + 1), source="t") for i in range(n)])
