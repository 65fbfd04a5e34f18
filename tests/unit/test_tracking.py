"""A run's learning curves while it trains (`vicurl.runtime.tracking`): the trackers' files, and what the verl
launcher hands verl. The demo's and the CPU rehearsal's runs write them for real: tests/workflow/test_workflow.py,
tests/gpu_path (verl's own tracker)."""

from __future__ import annotations

import time

import pytest
import yaml

from vicurl.engines.verl import launch
from vicurl.runtime import tracking

from harness import LAUNCHER_RUN, settings_for, tensorboard_scalars


def test_the_local_trackers_write_tensorboard_events_and_an_offline_wandb_run(tmp_path, monkeypatch):
    """verl's own Tracking, as the local engine uses it: the event files hold every numeric column of each
    step's row, and W&B writes an offline run (nothing leaves the machine) in the run's folder. A resumed job
    of the same training continues that W&B run (`wandb sync` uploads one run, the jobs' folders in turn); a
    training from step 0 again (a retrain) is a run of its own."""
    import wandb

    from vicurl.engines import workdir

    monkeypatch.chdir(tmp_path)
    folders = tracking.folders({"scenario": "paper", "loggers": ["tensorboard", "wandb"]}, "main/qwen/oracle-vicurl/seed0")
    work = tmp_path / "_work"
    workdir.prepare(work, {"lr": 1e-3})
    tracker = tracking.Tracker(folders, "oracle-vicurl-seed0", {"lr": 1e-3}, training=workdir.training_id(work))
    for step in (1, 2, 3):
        tracker.log({"step": step, "curriculum/beta_target": 0.2 * step, "reward/mean": 0.5, "label": "x"}, step)
    # the seeds of a setting are one group in W&B (a run's name, <setting>-seed<k>, is the same in every study)
    assert (wandb.run.name, wandb.run.project, wandb.run.group) == (
        "oracle-vicurl-seed0", "vicurl", "paper/main/qwen/oracle-vicurl")
    assert set(wandb.run.tags) == {"paper", "main", "qwen", "oracle-vicurl"}
    tracker.close()
    curves = tensorboard_scalars(folders["tensorboard"])
    assert curves["curriculum/beta_target"] == pytest.approx([0.2, 0.4, 0.6]) and "label" not in curves
    assert list((folders["wandb"] / "wandb").glob("offline-run-*/run-*.wandb"))

    def wandb_runs():
        return sorted(r.name.rsplit("-", 1)[1] for r in (folders["wandb"] / "wandb").glob("offline-run-*"))

    time.sleep(1.1)  # W&B names an offline run's folder by the second it started
    assert workdir.prepare(work, {"lr": 1e-3}).startswith("resuming")  # the run's next job
    tracker = tracking.Tracker({"wandb": folders["wandb"]}, "oracle-vicurl-seed0", {"lr": 1e-3},
                               training=workdir.training_id(work))
    tracker.log({"step": 4, "reward/mean": 0.6}, 4)
    tracker.close()
    ids = wandb_runs()
    assert len(ids) == 2 and set(ids) == {workdir.training_id(work)}, ids
    workdir.mark_published(work)  # the run trained again from step 0 (W&B reads the id once a process: the id here)
    assert "training it again from step 0" in workdir.prepare(work, {"lr": 1e-3})
    assert tracking.environment({"wandb": folders["wandb"]}, workdir.training_id(work))["WANDB_RUN_ID"] not in ids


def test_the_launcher_hands_verl_the_trackers_and_their_folders(tmp_path):
    """The config's trackers reach verl's composed config (``trainer.logger``, after its console and file
    loggers) and their folders the job's environment (verl's TensorBoard adapter reads TENSORBOARD_DIR)."""
    settings = settings_for("oracle", "vicurl", run=LAUNCHER_RUN, params_from=None)
    folders = {"tensorboard": tmp_path / "tb"}
    ov = launch.overrides(settings, model_path="m", train_files="t.parquet", work_dir=str(tmp_path), settings_path="s",
                          train_set="ts.parquet", vocab_size=100, n_train=8, verl={"n_gpus_per_node": 1}, tracking=folders)
    assert list(launch.compose(ov).trainer.logger) == ["console", "file", "tensorboard"]
    assert tracking.environment(folders, "abc") == {"TENSORBOARD_DIR": str((tmp_path / "tb").resolve())}
    composed = yaml.safe_load(launch.CONFIG.read_text())
    assert composed["trainer"]["project_name"] == tracking.PROJECT  # W&B's project, the local engine's too


def test_each_run_has_a_folder_per_tracker_under_the_studys_results():
    config = {"scenario": "paper", "loggers": ["tensorboard", "wandb"]}
    assert {k: str(v) for k, v in tracking.folders(config, "main/qwen/oracle-vicurl/seed0").items()} == {
        "tensorboard": "results/paper/tensorboard/main/qwen/oracle-vicurl/seed0",
        "wandb": "results/paper/wandb/main/qwen/oracle-vicurl/seed0"}


def test_a_trackers_folder_that_cannot_be_made_stops_the_job_naming_it(tmp_path):
    """W&B falls back to the temp folder when it cannot write its own, and a job's temp folder is removed with
    the job: the job stops first, naming the folder."""
    (tmp_path / "results").write_text("a file where the folder should be")
    folders = {"wandb": tmp_path / "results" / "wandb" / "main"}
    with pytest.raises(RuntimeError, match=r"wandb's folder .*results/wandb/main cannot be created"):
        launch.job_environment({}, tmp_path / "work", folders)
    ok = {"wandb": tmp_path / "w" / "wandb" / "main"}
    assert launch.job_environment({}, tmp_path / "work", ok)["WANDB_DIR"] == str(ok["wandb"]) and ok["wandb"].is_dir()
