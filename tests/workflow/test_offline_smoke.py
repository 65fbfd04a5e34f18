"""config/gpu_smoke.yaml without the Hub (`vicurl.rehearsal`): on a GPU it runs the smoke config's own
settings on the stand-ins; what the CPU needs besides lives in config/gpu_smoke_cpu.yaml alone. The
CPU rehearsal runs whole in tests/gpu_path/test_gpu_smoke_on_cpu.py; here the GPU one is planned."""

from __future__ import annotations

import copy
import json
import os
import shutil

import yaml
from omegaconf import OmegaConf

from vicurl.config import checks, runs
from vicurl.engines.verl import launch
from vicurl.models import fetch as fetch_lib
from vicurl.rehearsal import command, config_files

from harness import REPO, bounded, job_counts, snakemake


def merged(device: str) -> dict:
    """The rehearsal's config as Snakemake builds it from its config files (nested keys merged, the
    later file's values over the earlier's), read as the workflow reads it."""
    from snakemake.utils import update_config

    config: dict = {}
    for path in config_files(device):
        update_config(config, yaml.safe_load(path.read_text()))
    return checks.read(config)


def what_a_run_trains_with(config: dict) -> dict:
    """Everything of the smoke config's run that the train, generation and prompt-statistics jobs take,
    the model and the data aside; verl's whole composed config included."""
    (run,) = runs.runs(config)
    settings = runs.train_settings(config, run)
    verl = runs.verl_settings(config, run.model)
    composed = launch.compose(launch.overrides(settings, model_path="MODEL", train_files="T", work_dir="W",
                                               settings_path="S", train_set="TS", vocab_size=1000, n_train=64,
                                               verl=verl))
    return {"settings": settings, "verl": verl, "composed": OmegaConf.to_yaml(composed), "eval": config["eval"],
            "prompt_stats": config["prompt_stats"], "resources": {k: getattr(verl, k) for k in runs.VERL_JOB_KEYS}}


def test_the_gpu_rehearsal_changes_the_model_and_the_data_only():
    """On a GPU the rehearsal trains, generates and evaluates with config/gpu_smoke.yaml's settings (sleep
    mode, CUDA graphs, chunked prefill, the bf16 actor, NCCL, verl's 8 agent-loop workers); the CPU's
    settings come from config/gpu_smoke_cpu.yaml only."""
    from snakemake.utils import update_config

    smoke = {}
    update_config(smoke, yaml.safe_load(config_files("gpu")[0].read_text()))
    smoke = checks.with_defaults(copy.deepcopy(smoke))
    offline, cpu = merged("gpu"), merged("cpu")
    assert what_a_run_trains_with(offline) == what_a_run_trains_with(smoke)
    assert offline["models"]["qwen_0.5b_instruct"]["hub_id"] == "results/stand_ins/model"
    assert {d["local_path"] for d in offline["datasets"].values()} == {"results/stand_ins/deepscaler.jsonl",
                                                                        "results/stand_ins/amc23.jsonl"}
    cpu_only = what_a_run_trains_with(cpu)
    assert cpu_only["eval"]["vllm"]["enforce_eager"] and "actor_rollout_ref.rollout.agent.num_workers=1" in \
        cpu_only["verl"].overrides
    assert offline["scenario"] == "gpu_smoke_offline" and cpu["scenario"] == "gpu_smoke_cpu"


def test_the_gpu_rehearsal_plans_the_smoke_dags_jobs(tmp_path):
    """`make rehearse-gpu`'s command, planned: the stand-ins written where missing, the jobs of the smoke
    config's own plan, one GPU job at a time, and no CPU setting in its environment."""
    cmd, env = command("gpu", tmp_path / "offline", ["all", "-n", "--cores", "8"])
    assert env == dict(os.environ) and "gpu=1" in cmd
    assert (tmp_path / "offline" / "results" / "stand_ins" / "model" / "config.json").exists()
    out = bounded(cmd, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    smoke = snakemake(tmp_path / "smoke", "all", "-n", configs=config_files("gpu")[:1], timeout=600)
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    counts = job_counts(out.stdout + out.stderr)
    # the same jobs, but the stand-in is a local folder: nothing to fetch from the Hub
    assert {**counts, "fetch_model": 1} == job_counts(smoke.stdout + smoke.stderr) and counts["train"] == 1, counts


def test_the_smoke_configs_model_is_fetched_once_and_every_job_loads_the_folder(tmp_path):
    """config/gpu_smoke.yaml's Qwen/Qwen2.5-0.5B-Instruct through the target `models` (rule fetch_model), from a local stand-in for
    the Hub (HF_ENDPOINT; tests/fake_hub.py) serving the rehearsal's model under that id: the folder and its
    manifest at the Hub's commit; then the plan fetches nothing more, and the training and the base model's
    evaluation take the folder as their input. The commit is kept (hub_commits.yaml): the config's revision set
    to it plans nothing new, nor does it without the file (the folder's manifest holds it); after the Hub's main
    branch moved, the deleted folder is fetched at the kept commit; another revision plans the fetch again."""
    from fake_hub import SHA, FakeHub

    from vicurl.rehearsal import stand_ins

    model = tmp_path / "repo"
    stand_ins.write_model(model, ["1+2=3"], seed=0)
    hub = FakeHub({"Qwen/Qwen2.5-0.5B-Instruct": model})
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    folder = "results/gpu_smoke/models/qwen_0.5b_instruct/hub"
    try:
        out = snakemake(tmp_path / "w", "models", "--cores", "1", configs=config_files("gpu")[:1], env=env, timeout=600)
    finally:
        hub.server.shutdown()
    assert out.returncode == 0, out.stderr[-3000:]
    manifest = json.loads((tmp_path / "w" / f"{folder}.json").read_text())
    assert manifest["commit"] == SHA and manifest["hub_id"] == "Qwen/Qwen2.5-0.5B-Instruct"
    files = sorted(p.name for p in (tmp_path / "w" / folder).iterdir() if p.name != ".snakemake_timestamp")
    assert files == sorted(manifest["files"])
    plan = snakemake(tmp_path / "w", "all", "-n", configs=config_files("gpu")[:1], timeout=600)
    assert plan.returncode == 0, plan.stderr[-3000:]
    counts = job_counts(plan.stdout + plan.stderr)
    assert "fetch_model" not in counts and counts["train"] == 1, counts
    for rule in ("train", "generate_checkpoint"):
        block = plan.stdout.split(f"rule {rule}:")[1].split("\n\n")[0]
        assert f"input: {folder}" in block or f"{folder}," in block, block
    # the commit is kept (hub_commits.yaml in the working folder); pinning it in the config plans the same jobs
    assert fetch_lib.read_commits(tmp_path / "w" / "hub_commits.yaml") == {
        "Qwen/Qwen2.5-0.5B-Instruct": {"main": SHA}}
    pins = {}
    for name, revision in (("pin", SHA), ("main", "main"), ("move", "v2")):
        pins[name] = tmp_path / f"{name}.yaml"
        pins[name].write_text(yaml.safe_dump({"models": {"qwen_0.5b_instruct": {"revision": revision}}}))
    for name in ("pin", "main"):  # the kept commit, or the branch written out: the same plan
        pinned = snakemake(tmp_path / "w", "all", "-n", configs=[*config_files("gpu")[:1], pins[name]], timeout=600)
        assert pinned.returncode == 0 and job_counts(pinned.stdout + pinned.stderr) == counts, pinned.stderr[-3000:]
    # without the file (a checkout or results copied without it) the folder's manifest holds the commit: the same
    (tmp_path / "w" / "hub_commits.yaml").unlink()
    pinned = snakemake(tmp_path / "w", "all", "-n", configs=[*config_files("gpu")[:1], pins["pin"]], timeout=600)
    assert pinned.returncode == 0 and job_counts(pinned.stdout + pinned.stderr) == counts, pinned.stderr[-3000:]
    # main moves on the Hub: a deleted folder is fetched again at the kept commit; another revision is a move
    hub = FakeHub({"Qwen/Qwen2.5-0.5B-Instruct": model})
    hub.revisions["Qwen/Qwen2.5-0.5B-Instruct"] = {"main": "f" * 40, "v2": "e" * 40}
    env["HF_ENDPOINT"] = hub.url
    shutil.rmtree(tmp_path / "w" / folder)
    try:
        again = snakemake(tmp_path / "w", "models", "--cores", "1", configs=config_files("gpu")[:1], env=env, timeout=600)
    finally:
        hub.server.shutdown()
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "w" / f"{folder}.json").read_text())["commit"] == SHA
    assert fetch_lib.read_commits(tmp_path / "w" / "hub_commits.yaml") == {"Qwen/Qwen2.5-0.5B-Instruct": {"main": SHA}}
    moved = snakemake(tmp_path / "w", "models", "-n", configs=[*config_files("gpu")[:1], pins["move"]], timeout=600)
    assert moved.returncode == 0 and job_counts(moved.stdout + moved.stderr) == {"fetch_model": 1, "models": 1}, \
        moved.stdout[-3000:]
    # the fetch's code edited after the folder was fetched (a `git pull`): Snakemake's default triggers would
    # fetch again, and every job of the model would rerun from the new folder; the workflow profile's, which
    # Snakemake loads by itself, do not
    script = REPO / "workflow_scripts" / "fetch_model.py"
    older = script.stat().st_mtime - 3600
    work = tmp_path / "w"
    for path in (work / folder / ".snakemake_timestamp", work / folder, work / f"{folder}.json"):
        os.utime(path, (older, older))
    for args, fetches in ((("--workflow-profile", "none"), 1), ((), 0)):
        plan = snakemake(tmp_path / "w", "models", "-n", *args, configs=config_files("gpu")[:1], timeout=600)
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert job_counts(plan.stdout + plan.stderr).get("fetch_model", 0) == fetches, (args, plan.stdout[-3000:])
