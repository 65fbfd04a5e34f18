"""The harness of the GPU path's tests: vLLM (its CPU build) and verl run for real on the CPU.

They need the environment `make test` creates for them, .venv-vllm (`make test-gpu-path`); in any
other environment they skip, saying so. The CPU-only settings come from `vicurl.rehearsal.cpu`,
set before vLLM is imported. The models are built here once per session: the demo's tiny base
model (the demo's synthetic SFT) and its benchmark sets.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from vicurl.rehearsal import cpu as cpu_rehearsal

cpu_rehearsal.apply()

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())
# the engine arguments (config `eval.vllm`) of the CPU tests: the CPU rehearsal's (what vLLM's CPU build
# needs), float32 as the transformers path on the CPU, a context the demo's tiny model holds
REHEARSAL = yaml.safe_load((ROOT / "config" / "gpu_smoke_cpu.yaml").read_text())
ENGINE_ARGS = {**REHEARSAL["eval"]["vllm"], "dtype": "float32", "max_model_len": 256}


@pytest.fixture(scope="session")
def vllm():
    """vLLM, or a skip saying why it is not importable here."""
    try:
        import vllm
    except Exception as e:  # not installed, or an install that does not load
        pytest.skip(f"vLLM is not importable here ({type(e).__name__}: {e}); these tests run in .venv-vllm, "
                    "vLLM's CPU build: make test-gpu-path")
    return vllm


@pytest.fixture(scope="session")
def engine_args():
    return dict(ENGINE_ARGS)


@pytest.fixture(scope="session")
def demo_config():
    return DEMO


@pytest.fixture(scope="session")
def demo_splits():
    """The demo's synthetic splits (config/demo.yaml), as the workflow's data rule makes them."""
    from vicurl.data import synthetic

    return synthetic.make_splits(DEMO["synthetic"]["splits"], int(DEMO["synthetic"]["seed"]))


@pytest.fixture(scope="session")
def tiny_model_dir(vllm, tmp_path_factory, demo_splits):
    """The demo's base model: its tokenizer, architecture and SFT recipe on the demo's SFT split."""
    from vicurl.models import tiny

    out = tmp_path_factory.mktemp("tiny") / "model"
    tiny.build_base_model(demo_splits["sft"], out, {"prompt_order": DEMO["prompt"]["order"]}, seed=0)
    return str(out)


@pytest.fixture(scope="session")
def untied_model_dir(tiny_model_dir, tmp_path_factory):
    """The demo's base model with its LM head untied from the embedding (the same function, its own copy of
    the matrix), as R1-Distill-Qwen-1.5B and the 7B models are: verl wraps an untied head as an FSDP2 unit
    of its own (`vicurl.engines.verl.patches.fsdp_wrap`)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
    out = tmp_path_factory.mktemp("untied") / "model"
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return str(out)


# ---------------------------------------------------------------- verl's loop, run by the project's launcher


def verl_section() -> dict:
    """The `verl` section the CPU rehearsal runs with: config/gpu_smoke.yaml's, config/gpu_smoke_cpu.yaml's
    laid over it (Snakemake merges nested keys; lists replace)."""
    smoke = yaml.safe_load((ROOT / "config" / "gpu_smoke.yaml").read_text())
    return {**smoke.get("verl", {}), **REHEARSAL.get("verl", {})}


def launch_verl(run_dir: Path, settings: dict, model: str, train_set: str, *, prompt_stats: str | None = None,
                stop_in_export: int | None = None, verl: dict | None = None, env: dict | None = None,
                ranks: int = 1, timeout: int = 900):
    """One training run through the project's launcher (`python -m vicurl.engines.verl.launch`) in its
    own process, verl's `fit()` with vLLM's CPU build as the rollout, every step recorded
    (tests/gpu_path/verl_recorder.py) into ``run_dir/recorded``. ``ranks``: logical GPUs of the node (FSDP2
    over that many gloo ranks, one vLLM replica each). ``verl``: keys laid over the rehearsal's
    `verl` section (its ``overrides`` after the rehearsal's, replacing those of the same keys); ``env``: more environment variables. ``stop_in_export``: the run holds in that step's export
    (after verl's save; the recorder's ``VICURL_RECORD_HOLD_EXPORT``) and the launcher (the train job) gets SIGTERM
    there, as SLURM or a user stops a job. Past
    ``timeout`` seconds every process of the run is ended and the test fails (a cap for a hung run: VCRL's 4
    ranks took 163-411 s on the Intel kind with AMX under CI's load, and the AVX2 kind runs about half as
    fast). Returns the exit code, the log, and what the run had when it was stopped (empty when it was not):
    ``processes`` (pid: command line) and ``shared_memory`` (the /dev/shm files they mapped, by inode)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    from vicurl.runtime.processes import shared_memory_of
    from vicurl.runtime.supervise import end_session

    from harness import cmdline

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "settings.json").write_text(json.dumps(settings))
    section, extra = verl_section(), dict(verl or {})
    keys = {o.split("=")[0].lstrip("+") for o in extra.get("overrides", [])}  # Hydra refuses a key given twice
    kept = [o for o in section.get("overrides", []) if o.split("=")[0].lstrip("+") not in keys]
    section = {**section, "n_gpus_per_node": ranks, **extra, "overrides": kept + extra.get("overrides", [])}
    (run_dir / "verl.json").write_text(json.dumps(section))
    env = {**os.environ, **cpu_rehearsal.environment(), "VICURL_RECORD_DIR": str(run_dir / "recorded"), **(env or {})}
    env["VERL_USE_EXTERNAL_MODULES"] += ",verl_recorder"
    if stop_in_export is not None:
        env["VICURL_RECORD_HOLD_EXPORT"] = str(stop_in_export)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "vicurl.engines.verl.launch", "--settings", str(run_dir / "settings.json"),
           "--model", model, "--train-set", train_set, "--work-dir", str(run_dir / "_work"),
           "--checkpoints", str(run_dir / "checkpoints"), "--metrics", str(run_dir / "metrics.jsonl"),
           "--verl-config", str(run_dir / "verl.json"), "--exit-with-parent",  # pytest killed: the run ends too
           "--tracking", f"tensorboard={run_dir / 'tensorboard'}",
           *(["--prompt-stats", prompt_stats] if prompt_stats else [])]
    log = open(run_dir / "launch.log", "a")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    held = run_dir / "recorded" / "held"
    held.unlink(missing_ok=True)
    start, stopped = time.time(), SimpleNamespace(processes={}, shared_memory=set())
    while proc.poll() is None:
        if time.time() - start > timeout:
            end_session(proc, grace=30)
            pytest.fail(f"the run took over {timeout} s; its log: {run_dir / 'launch.log'}")
        if stop_in_export is not None and not stopped.processes and held.exists():
            stopped.processes = {p.pid: " ".join(cmdline(p)) for p in psutil.Process(proc.pid).children(recursive=True)}
            stopped.shared_memory = shared_memory_of(stopped.processes)
            proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
    log.close()
    return proc.returncode, (run_dir / "launch.log").read_text(), stopped


@pytest.fixture(scope="session")
def verl_launch():
    return launch_verl


@pytest.fixture(scope="session")
def demo_train_set(tmp_path_factory, demo_splits):
    """64 rows of the demo's training split, prepared (the schema the launcher reads)."""
    from vicurl.data import schema

    path = tmp_path_factory.mktemp("data") / "arith_train.parquet"
    schema.write(demo_splits["arith_train"].head(64), path)
    return str(path)
