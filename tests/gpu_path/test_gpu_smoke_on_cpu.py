"""config/gpu_smoke.yaml through Snakemake on the CPU, as `make rehearse` runs it (config/gpu_smoke_cpu.yaml
laid over it): the rules, their resources and the engine arguments as a cluster user runs them, vLLM's
CPU build generating, stand-ins for the Hub's model and data (`vicurl.cpu_rehearsal.stand_ins`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from vicurl.cpu_rehearsal import rehearse

RESULTS = Path("results") / "gpu_smoke_cpu"


def run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """`make rehearse`'s command in ``workdir``, 2 cores."""
    return rehearse(workdir, [*args, "--cores", "2"], capture_output=True, text=True, timeout=2400)


@pytest.mark.vllm
@pytest.mark.verl_fit
def test_the_gpu_smoke_dag_runs_end_to_end_on_the_cpu(vllm, tmp_path):
    """The first cluster run, rehearsed whole: data from local files -> 4 steps of verl's own loop
    (Ray, FSDP2, vLLM's CPU build as the rollout; majority vote, VI-CuRL) -> the exports of steps 2 and 4
    -> one vLLM generation job per checkpoint (Base, steps 2 and 4) on the `gpu` resource -> grading
    -> the table; then rule prompt_stats through vLLM."""
    out = run(tmp_path, "all")
    assert out.returncode == 0, out.stderr[-4000:]
    run_dir = tmp_path / RESULTS / "runs" / "main" / "qwen_0.5b_instruct" / "majority_vote-vicurl" / "seed0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["curriculum/beta_target"] for r in rows] == pytest.approx([0.2, 0.2 + 0.8 / 3, 0.2 + 1.6 / 3, 1.0])
    assert (run_dir / "_work" / "verl_log.jsonl").exists()  # verl's own logger: the loop was verl's
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step*")) == ["step2", "step4"]
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

    # a changed `verl.overrides` can change what verl trains: the train job's params change, so it reruns
    changed = run(tmp_path, "all", "-n", "--config", "verl={overrides: [trainer.val_before_train=false]}")
    assert changed.returncode == 0, changed.stderr[-4000:]
    plan = changed.stdout + changed.stderr
    assert "rule train:" in plan and "Params have changed since last execution" in plan, plan[-4000:]
    unchanged = run(tmp_path, "all", "-n")
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr

    # rule prompt_stats samples through vLLM too (AdaRFT's and SENT's table; no curriculum here asks for it)
    stats = RESULTS / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.parquet"
    out = run(tmp_path, str(stats))
    assert out.returncode == 0, out.stderr[-4000:]
    assert len(pd.read_parquet(tmp_path / stats)) == 64
    assert "(vllm)" in (results / "logs" / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.log").read_text()
