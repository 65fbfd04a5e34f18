"""A run's learning curves while it trains (`vicurl.tracking`): the trackers' files, and what the verl
launcher hands verl. The demo's and the CPU rehearsal's runs write them for real: tests/workflow/test_workflow.py,
tests/gpu_path (verl's own tracker)."""

from __future__ import annotations

import time

import pytest
import yaml

from vicurl import tracking
from vicurl.engines.verl import launch

from harness import LAUNCHER_RUN, settings_for, tensorboard_scalars


def test_the_local_trackers_write_tensorboard_events_and_an_offline_wandb_run(tmp_path, monkeypatch):
    """verl's own Tracking, as the local engine uses it: the event files hold every numeric column of each
    step's row, and W&B writes an offline run (nothing leaves the machine) in the run's folder."""
    monkeypatch.chdir(tmp_path)
    folders = {"tensorboard": tmp_path / "tb" / "run", "wandb": tmp_path / "wb" / "run"}
    tracker = tracking.Tracker(folders, "oracle-vicurl-seed0", {"lr": 1e-3})
    for step in (1, 2, 3):
        tracker.log({"step": step, "curriculum/beta_target": 0.2 * step, "reward/mean": 0.5, "label": "x"}, step)
    tracker.close()
    curves = tensorboard_scalars(folders["tensorboard"])
    assert curves["curriculum/beta_target"] == pytest.approx([0.2, 0.4, 0.6]) and "label" not in curves
    assert list((folders["wandb"] / "wandb").glob("offline-run-*/run-*.wandb"))
    # the run's next job (a resume) continues the same W&B run: `wandb sync` uploads one run, not one a job
    time.sleep(1.1)  # W&B names an offline run's folder by the second it started
    tracker = tracking.Tracker({"wandb": folders["wandb"]}, "oracle-vicurl-seed0", {"lr": 1e-3})
    tracker.log({"step": 4, "reward/mean": 0.6}, 4)
    tracker.close()
    runs = sorted((folders["wandb"] / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and len({r.name.rsplit("-", 1)[1] for r in runs}) == 1, runs
    other = tracking.environment({"wandb": tmp_path / "wb" / "another_run"})["WANDB_RUN_ID"]
    assert other != runs[0].name.rsplit("-", 1)[1]


def test_the_launcher_hands_verl_the_trackers_and_their_folders(tmp_path):
    """The config's trackers reach verl's composed config (``trainer.logger``, after its console and file
    loggers) and their folders the job's environment (verl's TensorBoard adapter reads TENSORBOARD_DIR)."""
    settings = settings_for("oracle", "vicurl", run=LAUNCHER_RUN, params_from=None)
    folders = {"tensorboard": tmp_path / "tb"}
    ov = launch.overrides(settings, model_path="m", train_files="t.parquet", work_dir=str(tmp_path), settings_path="s",
                          train_set="ts.parquet", vocab_size=100, n_train=8, verl={"n_gpus_per_node": 1}, tracking=folders)
    assert list(launch.compose(ov).trainer.logger) == ["console", "file", "tensorboard"]
    assert tracking.environment(folders) == {"TENSORBOARD_DIR": str((tmp_path / "tb").resolve())}
    composed = yaml.safe_load(launch.CONFIG.read_text())
    assert composed["trainer"]["project_name"] == tracking.PROJECT  # W&B's project, the local engine's too


def test_each_run_has_a_folder_per_tracker_under_the_studys_results():
    config = {"scenario": "paper", "loggers": ["tensorboard", "wandb"]}
    assert {k: str(v) for k, v in tracking.folders(config, "main/qwen/oracle-vicurl/seed0").items()} == {
        "tensorboard": "results/paper/tensorboard/main/qwen/oracle-vicurl/seed0",
        "wandb": "results/paper/wandb/main/qwen/oracle-vicurl/seed0"}
