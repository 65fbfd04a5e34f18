"""The harness of the GPU path's tests: vLLM (its CPU build) and verl run for real on the CPU.

They need the environment `make test` creates for them, .venv-vllm (`make test-gpu-path`); in any
other environment they skip, saying so. The CPU-only settings come from `vicurl.cpu_rehearsal`,
set before vLLM is imported. The models are built here once per session: the demo's tiny base
model (the demo's synthetic SFT) and its benchmark sets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vicurl import cpu_rehearsal

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
    except Exception as e:  # noqa: BLE001 (not installed, or an install that does not load)
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
