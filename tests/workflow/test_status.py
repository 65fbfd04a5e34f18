"""`python -m vicurl.status` on real runs of the smoke config: a run training (running), the same run after
Snakemake was killed with it (stopped), a run whose job failed (failed), the others (waiting); the finished
DAG's runs (done) are read in tests/workflow/test_workflow.py, the CPU rehearsal's verl runs, interrupted and
finished, in tests/gpu_path/test_gpu_smoke_on_cpu.py. The paper's plan: how long the command takes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from vicurl import status

from harness import DEMO_CONFIG, PAPER_CONFIG, SMOKE_CONFIG, snakemake, snakemake_cmd

RUN = "main/tiny/{}/seed0"


def states(config, workdir) -> dict[str, status.RunStatus]:
    return {f"{r.study}/{r.model}/{r.setting}/seed{r.seed}": r for r in status.status(config, workdir, False)["runs"]}


@pytest.mark.slow
def test_running_stopped_failed_and_waiting_runs_are_told_apart(tmp_path):
    longer = tmp_path / "longer.yaml"
    # long enough to be caught training (the mechanism study continues main's runs: longer still)
    longer.write_text("studies: {main: {train: {total_steps: 60}}, mechanism: {train: {total_steps: 62}}}\n")
    configs = [DEMO_CONFIG, SMOKE_CONFIG, longer]
    config = status.load_config(configs)
    res = tmp_path / "results" / "smoke"
    built = snakemake(tmp_path, "--cores", "1", "results/smoke/models/tiny/base", "results/smoke/data/arith_train.parquet",
                      configs=configs)
    assert built.returncode == 0, built.stderr[-3000:]
    assert {r.state for r in states(config, tmp_path).values()} == {"waiting"}

    # a Snakemake training one run, in a process group of its own (as in a terminal)
    target = f"results/smoke/runs/{RUN.format('oracle-vicurl')}/metrics.jsonl"
    with open(tmp_path / "snakemake.log", "w") as log:
        proc = subprocess.Popen(snakemake_cmd(tmp_path, "--cores", "1", target, configs=configs), cwd=tmp_path,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    progress = res / "runs" / RUN.format("oracle-vicurl") / "_work" / "metrics.jsonl"
    deadline = time.time() + 600
    while not (progress.exists() and len(progress.read_text().splitlines()) >= 3):
        assert proc.poll() is None and time.time() < deadline, (tmp_path / "snakemake.log").read_text()[-3000:]
        time.sleep(0.5)
    run = states(config, tmp_path)[RUN.format("oracle-vicurl")]
    assert run.state == "running" and 3 <= run.step < run.steps == 60, run
    assert run.s_per_step > 0 and run.finish and 0 <= run.accuracy <= 1, run

    # Snakemake killed with its job (SIGKILL: nothing cleans up, its locks and the run's mark stay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert list((tmp_path / ".snakemake" / "locks").glob("*.lock"))
    run = states(config, tmp_path)[RUN.format("oracle-vicurl")]
    assert run.state == "stopped" and run.step >= 3, run

    # another run's job fails: its base model's weights are gone
    unlocked = snakemake(tmp_path, "--unlock", configs=configs)
    assert unlocked.returncode == 0, unlocked.stderr[-3000:]
    (res / "models" / "tiny" / "base" / "model.safetensors").unlink()
    failed = snakemake(tmp_path, "--cores", "1", f"results/smoke/runs/{RUN.format('oracle-none')}/metrics.jsonl",
                       configs=configs)
    assert failed.returncode != 0
    now = states(config, tmp_path)
    assert now[RUN.format("oracle-none")].state == "failed"
    assert now[RUN.format("oracle-vicurl")].state == "stopped"
    assert {r.state for k, r in now.items() if k not in (RUN.format("oracle-none"), RUN.format("oracle-vicurl"))} \
        == {"waiting"}


def test_the_papers_plan_is_read_without_running_a_job(tmp_path):
    """The 2,724-job plan of config/paper.yaml, nothing run: every run waiting, every job planned, the
    estimate's A100 hours (cached after the first call); the command's time is measured in
    docs/monitoring.md, not asserted here."""
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "--configfile", str(PAPER_CONFIG)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    total = pd.read_csv(tmp_path / "results" / "paper" / "status_studies.csv").set_index("study").loc["all"]
    assert (total["train_planned"], total["generate_checkpoint_planned"], total["probe_planned"]) == (295, 2005, 26)
    assert sum(total[c] for c in total.index if c.endswith("_done")) == 0
    assert total["estimate_a100_hours"] > 0 and "runs: 295 waiting" in out.stdout
    # Snakemake's --config, and a config error said in one line (the key), no traceback
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "--configfile", str(PAPER_CONFIG), "--no-estimate",
                          "--config", "loggers=[tensorbord]"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "loggers.0:" in out.stderr and "Traceback" not in out.stderr, out.stderr
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "--configfile", "nowhere.yaml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "nowhere.yaml" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_targets_plan_counts_its_jobs_and_prices_what_it_borrows(tmp_path):
    """`python -m vicurl.status study_curriculum_ablation --configfile config/paper.yaml`: Snakemake's own dry run
    of the target (its 15 runs and the 10 `main` runs its table reads, each evaluated at every step), each job
    priced by the cost model, the borrowed ones apart; the jobs a cluster profile submits are those of the
    workflow's non-local rules."""
    from vicurl.config import checks
    from vicurl.planning import cost, target

    cfg = checks.read_file(PAPER_CONFIG)
    jobs = target.dry_run(["study_curriculum_ablation"], [PAPER_CONFIG], workdir=tmp_path)
    plan = target.plan(["study_curriculum_ablation"], cfg, jobs, tmp_path)
    train = plan.rules["train"]
    assert train.jobs == 25 and train.cluster == 25
    assert {w["study"] for j in jobs if j.rule == "train" for w in [j.wildcards]} == {"curriculum_ablation", "main"}
    prices = {j.key: j.gpu_hours for j in cost.jobs(cfg, workdir=tmp_path)}
    own = sum(prices[j.key] for j in jobs if j.rule in cost.GPU_RULES and j.wildcards["study"] == "curriculum_ablation")
    borrowed = sum(prices[j.key] for j in jobs if j.rule in cost.GPU_RULES and j.wildcards["study"] != "curriculum_ablation")
    assert plan.a100_hours == pytest.approx(own + borrowed) and borrowed > 0.3 * own
    assert sum(r.own_hours for r in plan.rules.values()) == pytest.approx(own)
    assert cost.by_study(cost.jobs(cfg))["curriculum_ablation"] == pytest.approx(own)  # the study's own figure
    assert plan.rules["prepare_dataset"].cluster == 0 and plan.rules["grade"].cluster == plan.rules["grade"].jobs
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "study_curriculum_ablation", "--configfile",
                          str(PAPER_CONFIG)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"estimated A100 hours of everything it builds: {plan.a100_hours:,.0f}" in out.stdout
    assert "borrowed (runs and evaluations of other studies it reads): main" in out.stdout
    assert len(out.stdout.splitlines()) < 30  # one screen
    # a model outside the paper's four, priced by the parameter count its config gives
    example = PAPER_CONFIG.parent / "examples" / "your_study.yaml"
    out = subprocess.run([sys.executable, "-m", "vicurl.status", "study_your_study", "--configfile", str(PAPER_CONFIG),
                          str(example)], cwd=PAPER_CONFIG.parents[1], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "not priced" not in out.stdout, out.stdout + out.stderr[-2000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("train "))
    assert line.split()[1:3] == ["6", "6"] and float(line.split()[3].replace(",", "")) > 0
