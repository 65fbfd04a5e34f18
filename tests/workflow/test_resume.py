"""Resume through the workflow: a training job killed by a signal mid-run is restarted by Snakemake,
continues from its last checkpoint in `_work/`, and ends with the metrics of an uninterrupted run.
Finished training outputs are write-protected with `protect_outputs: true`; every run folder has
its provenance."""

import json
import os
import re
import signal
import stat
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from harness import DEMO_CONFIG, REPO, SMOKE_CONFIG, snakemake, snakemake_cmd

RUN = "results/smoke/runs/main/tiny/oracle-vicurl/seed0"


def _metrics(path: Path) -> pd.DataFrame:
    df = pd.read_json(path, lines=True)
    return df[[c for c in df.columns if not c.startswith("time/")]]  # wall-clock timings differ


@pytest.mark.slow
def test_killed_training_resumes_from_its_checkpoint_with_identical_metrics(tmp_path):
    over = tmp_path / "resume.yaml"
    over.write_text("studies: {main: {train: {total_steps: 16, save_every: 2}}, mechanism: {continues: null}}\n"
                    "protect_outputs: true\n")  # (the mechanism study: its own runs, not main's longer ones)
    configs = [DEMO_CONFIG, SMOKE_CONFIG, over]
    target = f"{RUN}/metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    built = snakemake(tmp_path, "--cores", "1", "results/smoke/models/tiny/base", "results/smoke/data/arith_train.parquet",
                      configs=configs, env=env, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]

    # 1. start the training job, kill Snakemake and the job (SIGKILL, the whole process group) once a checkpoint exists
    work = tmp_path / RUN / "_work"
    proc = subprocess.Popen(snakemake_cmd(tmp_path, "--cores", "1", target, configs=configs), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    deadline = time.time() + 300
    while not list(work.glob("ckpt_step*.pt")) and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "training finished before it could be killed; raise total_steps"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = max(int(p.stem.removeprefix("ckpt_step")) for p in work.glob("ckpt_step*.pt"))
    assert 0 < killed_at < 16 and not (tmp_path / target).exists()

    # 2. rerun the workflow (after --unlock: Snakemake itself was killed): the job restarts and resumes
    unlock = snakemake(tmp_path, "--unlock", configs=configs, env=env, timeout=300)
    assert unlock.returncode == 0, unlock.stderr[-3000:]
    again = snakemake(tmp_path, "--cores", "1", "--rerun-incomplete", target, configs=configs, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    log = (tmp_path / "results/smoke/logs/train/main/tiny/oracle-vicurl/seed0.log").read_text()
    resumed = [int(s) for s in re.findall(r"resumed from \S+ \(step (\d+)\)", log)]
    assert resumed and resumed[0] >= killed_at, log[-2000:]
    # the killed job's lines stay in the run's log, above a line marking the rerun
    killed, _, rerun = log.partition("a new job of this run starts")
    assert "a new run: training from step 0" in killed and "resuming from what the interrupted job left" in rerun
    resumed_metrics = _metrics(tmp_path / target)
    assert list(resumed_metrics["step"]) == list(range(1, 17))

    # 3. provenance of the run: its settings, the resolved config, package versions, the commit
    prov = json.loads((tmp_path / RUN / "provenance.json").read_text())
    assert prov["run"] == {"study": "main", "model": "tiny", "setting": "oracle-vicurl", "seed": 0}
    assert prov["settings"]["total_steps"] == 16 and prov["config"]["scenario"] == "smoke"
    assert prov["config"]["grading"]["version"] == 2  # schema defaults resolved
    assert prov["packages"]["torch"] and prov["git"]["commit"]
    assert prov["model"] == {"dir": "results/smoke/models/tiny/base"}  # built here: no Hub commit
    # one training prompt as the model saw it (the smoke model's tokenizer has no chat template: raw text)
    assert prov["prompt"]["chat_template"] is False and prov["prompt"]["text"].endswith("\\boxed{}.\n")

    # 4. finished outputs are write-protected: a forced retrain stops instead of deleting them
    #    (Snakemake tests os.access(W_OK), which is always true for root: then only the mode bits are checked)
    assert not os.stat(tmp_path / target).st_mode & stat.S_IWUSR
    assert not os.stat(tmp_path / RUN / "checkpoints").st_mode & stat.S_IWUSR
    if os.geteuid() != 0:
        forced = snakemake(tmp_path, "--cores", "1", "--forcerun", "train", "--", target, configs=configs, env=env,
                           timeout=600)
        assert forced.returncode != 0 and "protected" in (forced.stdout + forced.stderr).lower()
        assert (tmp_path / target).exists()

    # 5. the same run uninterrupted (after unprotecting and removing it): the same metrics
    for root, dirs, files in os.walk(tmp_path / RUN):
        for name in dirs + files:
            p = Path(root) / name
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    (tmp_path / RUN).chmod(0o755)
    subprocess.run(["rm", "-rf", str(tmp_path / RUN)], check=True)
    fresh = snakemake(tmp_path, "--cores", "1", target, configs=configs, env=env, timeout=600)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "resumed from" not in (tmp_path / "results/smoke/logs/train/main/tiny/oracle-vicurl/seed0.log").read_text()
    pd.testing.assert_frame_equal(_metrics(tmp_path / target), resumed_metrics)


@pytest.mark.slow
def test_a_forced_retrain_trains_again_and_the_log_keeps_every_job(tmp_path):
    """`--forcerun train` after a finished run trains it again from step 0 (a code change is picked
    up), with the same numbers; the run's log keeps the earlier job's lines, marked."""
    configs = [DEMO_CONFIG, SMOKE_CONFIG]
    target = f"{RUN}/metrics.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    first = snakemake(tmp_path, "--cores", "1", target, configs=configs, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    before = _metrics(tmp_path / target)
    forced = snakemake(tmp_path, "--cores", "1", "--forcerun", "train", "--", target, configs=configs, env=env,
                       timeout=600)
    assert forced.returncode == 0, forced.stderr[-3000:]
    log = (tmp_path / "results/smoke/logs/train/main/tiny/oracle-vicurl/seed0.log").read_text()
    earlier, _, now = log.partition("a new job of this run starts")
    assert "a new run: training from step 0" in earlier and now
    assert "finished and published this run: training it again from step 0" in now and "resumed from" not in now
    pd.testing.assert_frame_equal(_metrics(tmp_path / target), before)
