"""config/gpu_smoke.yaml through Snakemake on the CPU, as `make rehearse` runs it (config/gpu_smoke_offline.yaml
and config/gpu_smoke_cpu.yaml laid over it): the rules, their resources and the engine arguments as a cluster
user runs them, vLLM's CPU build generating, stand-ins for the Hub's model and data (`vicurl.rehearsal.stand_ins`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from vicurl.rehearsal import command
from vicurl.runtime.processes import shared_memory_of
from vicurl.runtime.supervise import end_session

from harness import alive, bounded, cmdline, shared_memory_left, tensorboard_scalars, title

RESULTS = Path("results") / "gpu_smoke_cpu"


def run_states(workdir: Path) -> list:
    """`vicurl.status` of the rehearsal's runs in ``workdir`` (its config files, as `make rehearse` gives them)."""
    from vicurl import status
    from vicurl.rehearsal import config_files

    return status.status(status.load_config(config_files("cpu")), workdir, with_estimate=False)["runs"]


def run(workdir: Path, *args: str, over: Path | None = None) -> subprocess.CompletedProcess:
    """`make rehearse`'s command in ``workdir``, 2 cores (``over``: one more config file, laid over the
    rehearsal's); past 25 minutes every process it started ends."""
    cmd, env = command("cpu", workdir, [*args, "--cores", "2"])
    return bounded(cmd + ([str(over)] if over else []), env=env, timeout=1500)  # the command ends in its config files


def maps_queue(pid: int) -> bool:
    """Whether process ``pid`` maps a vLLM message queue (POSIX shared memory, /dev/shm/psm_*)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("/dev/shm/psm_" in line for line in f)
    except OSError:
        return False


def ctrl_c_while_vllm_serves_verl(workdir: Path) -> tuple[int, dict[int, str], set[int]]:
    """`make rehearse`'s command in ``workdir``, in a process group of its own as a terminal's foreground
    job, interrupted as Ctrl-C does (SIGINT to the group: Snakemake and its jobs) once the train job's vLLM
    engine runs (its message queue made, and noted by the job). Returns Snakemake's exit code, every process
    it had then (pid: title) and the shared memory they mapped (inodes)."""
    cmd, env = command("cpu", workdir, ["all", "--cores", "2"])
    with open(workdir / "interrupted.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 900
        while True:
            assert proc.poll() is None and time.time() < deadline, (workdir / "interrupted.log").read_text()[-4000:]
            loops = [p for p in psutil.Process(proc.pid).children(recursive=True) if "vicurl.engines.verl.fit" in cmdline(p)]
            engines = [p.pid for loop in loops for p in loop.children(recursive=True)
                       if title(p).startswith("VLLM::EngineCore")]
            if any(maps_queue(pid) for pid in engines):  # its message queue made: the job's notes see it within
                time.sleep(6)  # 2 s, three times over here (a loaded machine's thread may be late)
                break
            time.sleep(1)
        tree = {p.pid: title(p) for p in psutil.Process(proc.pid).children(recursive=True)}
        shared = shared_memory_of(tree)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(timeout=300), tree, shared
    finally:
        if proc.poll() is None:  # the test failed: nothing it started outlives it
            end_session(proc, grace=30)


@pytest.mark.vllm
@pytest.mark.verl_fit
def test_the_gpu_smoke_dag_runs_end_to_end_on_the_cpu(vllm, tmp_path):
    """The first cluster run, rehearsed whole: data from local files -> 4 steps of verl's own loop
    (Ray, FSDP2, vLLM's CPU build as the rollout; majority vote, VI-CuRL) -> the exports of steps 2 and 4
    -> one vLLM generation job per checkpoint (Base, steps 2 and 4) on the `gpu` resource -> grading
    -> the table; then rule prompt_stats through vLLM. Before that, Ctrl-C while verl trains: the train job
    ends verl's loop, Ray's processes and vLLM's before Snakemake exits, and the shared memory they mapped
    (vLLM's message queues) is gone; the rerun trains afresh."""
    rc, tree, shared = ctrl_c_while_vllm_serves_verl(tmp_path)
    assert rc != 0 and any(title.endswith("raylet") for title in tree.values()), tree
    deadline = time.time() + 30  # what SIGKILL ended, its parent may not have reaped yet
    while alive(tree) and time.time() < deadline:
        time.sleep(1)
    assert not alive(tree), {pid: tree[pid] for pid in alive(tree)}
    assert shared and not shared_memory_left(shared), shared_memory_left(shared)
    train_log = tmp_path / RESULTS / "logs" / "train" / "main" / "qwen_0.5b_instruct" / "majority_vote-vicurl" / "seed0.log"
    assert "SIGINT: ended verl's loop" in train_log.read_text()
    # where the study stands now (python -m vicurl.status): the run stopped by the signal, the base model's
    # evaluation done or waiting, nothing running
    (stopped,) = run_states(tmp_path)
    assert stopped.state == "stopped" and stopped.steps == 4, stopped

    out = run(tmp_path, "all")
    assert out.returncode == 0, out.stderr[-4000:]
    run_dir = tmp_path / RESULTS / "runs" / "main" / "qwen_0.5b_instruct" / "majority_vote-vicurl" / "seed0"
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (done,) = run_states(tmp_path)
    assert (done.state, done.step, done.steps) == ("done", 4, 4) and done.gpu_hours > 0, done  # 1 logical GPU
    # the run's TensorBoard curves (config `loggers`, default), written by verl's tracker through the launcher
    curves = tensorboard_scalars(tmp_path / RESULTS / "tensorboard" / "main" / "qwen_0.5b_instruct" / "majority_vote-vicurl" / "seed0")
    assert curves["curriculum/beta_target"] == pytest.approx([r["curriculum/beta_target"] for r in rows])
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
    # the job's bound on a step and its resources change nothing it trains: no rerun
    over = tmp_path / "bounds.yaml"
    over.write_text("verl: {step_timeout: 30, runtime: 99, mem_mb: 1000}\n")
    bounds = run(tmp_path, "all", "-n", over=over)
    assert "Nothing to be done" in bounds.stdout + bounds.stderr, (bounds.stdout + bounds.stderr)[-4000:]

    # rule prompt_stats samples through vLLM too (AdaRFT's and SENT's table; no curriculum here asks for it)
    stats = RESULTS / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.parquet"
    out = run(tmp_path, str(stats))
    assert out.returncode == 0, out.stderr[-4000:]
    assert len(pd.read_parquet(tmp_path / stats)) == 64
    assert "(vllm)" in (results / "logs" / "prompt_stats" / "qwen_0.5b_instruct" / "deepscaler.log").read_text()
