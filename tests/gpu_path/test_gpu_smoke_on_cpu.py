"""config/gpu_smoke.yaml through Snakemake on the CPU (config/gpu_smoke_cpu.yaml laid over it): the
rules, their resources and the engine arguments as a cluster user runs them, vLLM's CPU build
generating, stand-ins for the Hub's model and data (`vicurl.cpu_rehearsal.stand_ins`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vicurl import cpu_rehearsal
from vicurl.cpu_rehearsal import stand_ins

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path("results") / "gpu_smoke_cpu"


def rehearse(workdir: Path, targets: list[str], *args: str) -> subprocess.CompletedProcess:
    """The rehearsal's snakemake command (docs/verl.md), in ``workdir``."""
    cmd = [sys.executable, "-m", "snakemake", *targets, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--cores", "2", "--resources", "gpu=1", "--replace-workflow-config",
           "--configfile", str(REPO / "config" / "gpu_smoke.yaml"), str(REPO / "config" / "gpu_smoke_cpu.yaml"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env={**os.environ, **cpu_rehearsal.environment()})


@pytest.mark.vllm
def test_the_gpu_smoke_dags_evaluation_runs_through_vllm_on_the_cpu(vllm, tmp_path):
    """Data from local files, 4 training steps (the local engine), then the evaluation half through
    vLLM: one generation job per checkpoint (Base, steps 2 and 4) on the `gpu` resource, grading,
    the table."""
    stand_ins.write(tmp_path / RESULTS / "stand_ins")
    out = rehearse(tmp_path, ["all"], "--config", "engine=local")
    assert out.returncode == 0, out.stderr[-4000:]
    log = out.stdout + out.stderr
    assert "generate_checkpoint" in log and "gpu=1" in log
    results = tmp_path / RESULTS
    gen_logs = sorted((results / "logs" / "eval").rglob("generate.log"))
    assert len(gen_logs) == 3, gen_logs
    for path in gen_logs:
        assert "samples (vllm)" in path.read_text(), path
    samples = sorted((results / "eval").rglob("samples.parquet"))
    assert len(samples) == 3
    for path in samples:
        df = pd.read_parquet(path)
        assert len(df) == 40 * 4 and set(df["benchmark"]) == {"amc23"}
        assert df["n_tokens"].between(1, 256).all()
    tex = (results / "report" / "tables" / "smoke.tex").read_text()
    assert "Base (No RL)" in tex and "Majority Vote" in tex and "VI-CuRL" in tex and "AMC 2023" in tex

    # rule prompt_stats samples through vLLM too (AdaRFT's and SENT's table; no curriculum here asks for it)
    stats = RESULTS / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.parquet"
    out = rehearse(tmp_path, [str(stats)], "--config", "engine=local")
    assert out.returncode == 0, out.stderr[-4000:]
    assert len(pd.read_parquet(tmp_path / stats)) == 64
    assert "(vllm)" in (results / "logs" / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.log").read_text()
