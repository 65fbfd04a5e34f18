"""The parts of `python -m vicurl.status` that read a run's files: its jobs from the log, the seconds a step from
the progress rows, whether a Snakemake runs. The whole command on real runs: tests/workflow/test_status.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from vicurl import status

JOB = textwrap.dedent("""
    import types
    from vicurl.runtime.workflow import setup
    log = setup(types.SimpleNamespace(log=[{log!r}], threads=1, rule="train"), history={history!r})
    log.info("training")
""")


def test_every_job_of_a_run_is_told_apart_in_its_log(tmp_path):
    """Three jobs of one run (SLURM's retries: a killed job, its retry, the one after): each starts its lines
    after a marker in the run's history, so the log the third writes holds three jobs, each with its SLURM id
    (the second's GPU hours were lost when the history kept no marker between the first two)."""
    log, history = tmp_path / "logs" / "train.log", tmp_path / "_work" / "train.log"
    for job in ("101", "102", "103"):
        out = subprocess.run([sys.executable, "-c", JOB.format(log=str(log), history=str(history))],
                             env={**os.environ, "SLURM_JOB_ID": job}, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        time.sleep(1.1)  # the log's time stamps are to the second
    jobs = status.log_jobs(log)
    assert [j.slurm_job for j in jobs] == ["101", "102", "103"], log.read_text()
    assert all(j.seconds < 1 for j in jobs)  # no job spans the wait between two
    assert history.read_text() == log.read_text()


def row(step: int, job: float, finished: float, step_s: float = 1.0) -> dict:
    return {"step": step, "time/job": job, "time/finished": finished, "time/step_s": step_s}


def test_seconds_a_step_are_the_wall_time_between_the_current_jobs_rows():
    """The rows of the latest job with two or more: (its last row's time - its first's) / the steps between,
    generation and saves included (verl's ``time/step_s`` counts from the rewards on); the restart between
    two jobs is not a step's time."""
    first = [row(s, 1000.0, 1000.0 + 60 * s, step_s=30) for s in range(1, 6)]  # 60 s a step
    second = [row(s, 5000.0, 5000.0 + 100 + 50 * (s - 4), step_s=25) for s in range(4, 8)]  # resumed at 4: 50 s
    assert status.seconds_per_step(first) == pytest.approx(60)
    assert status.seconds_per_step(first + second) == pytest.approx(50)
    assert status.seconds_per_step(first + second[:1]) == pytest.approx(60)  # one row of the new job: the last job's
    assert status.seconds_per_step([{"step": 1, "time/step_s": 12.0}]) == 12.0  # rows of before the stamps


def test_a_snakemake_is_told_from_other_processes_that_name_it(tmp_path):
    """`snakemake_started`: a Snakemake (here a script of that name) running in the folder counts, with its start;
    a process whose command line only mentions snakemake (a `tail -f` of its log) does not."""
    (tmp_path / ".snakemake").mkdir()
    (tmp_path / ".snakemake" / "log").write_text("")
    tail = subprocess.Popen(["tail", "-f", ".snakemake/log"], cwd=tmp_path)
    try:
        time.sleep(0.5)
        assert status.snakemake_started(tmp_path) is None
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "snakemake").write_text("import time\ntime.sleep(60)\n")
        before = time.time()
        fake = subprocess.Popen([sys.executable, str(tmp_path / "bin" / "snakemake"), "all"], cwd=tmp_path)
        try:
            time.sleep(0.5)
            started = status.snakemake_started(tmp_path)
            assert started is not None and before - 1 <= started <= time.time()
            assert status.snakemake_started(tmp_path / "bin") is None  # another folder
        finally:
            fake.kill()
            fake.wait()
    finally:
        tail.kill()
        tail.wait()


def test_gpu_hours_count_a_requeued_slurm_job_once():
    """Jobs 7 and 8 ran on SLURM (8 twice: requeued, same id; sacct reports its last run), the first without
    SLURM: SLURM's elapsed time times its GPUs once per id, the log's seconds times the rule's GPUs else."""
    jobs = [status.LogJob(100.0, "", ""), status.LogJob(50.0, "7", "stopped"), status.LogJob(30.0, "8", "stopped"),
            status.LogJob(40.0, "8", "")]
    slurm = {"7": ("TIMEOUT", 60.0, 8), "8": ("RUNNING", 45.0, 8)}
    assert status.gpu_seconds(jobs, slurm, 8) == 100 * 8 + 60 * 8 + 30 * 8 + 45 * 8


def test_a_jobs_gpu_hours_reach_its_last_progress_row_or_now():
    """A verl job writes no log line while it trains: a job killed without a last line (SIGKILL, a reboot) counts
    to its last progress row, a running one to now; each job's rows are the ones stamped with its start."""
    jobs = [status.LogJob(5.0, "", "", start=1000.0), status.LogJob(4.0, "", "", start=2000.0)]
    rows = [row(1, 1002.0, 1100.0), row(2, 1002.0, 1700.0), row(3, 2003.0, 2500.0)]
    assert [j.seconds for j in status.with_progress(jobs, rows)] == [700.0, 500.0]
    assert [j.seconds for j in status.with_progress(jobs, rows, now=2900.0)] == [700.0, 900.0]
    assert [j.seconds for j in status.with_progress(jobs, [])] == [5.0, 4.0]
    assert status.gpu_seconds(status.with_progress(jobs, rows), {}, 8) == (700 + 500) * 8


def test_array_tasks_are_read_by_the_names_snakemake_gives_them():
    """With the SLURM plugin's --slurm-array-jobs Snakemake marks a job `<array id>_<task>`; sacct reports a
    started task under that name (its own job id beside it) and an array's pending tasks in one line."""
    from vicurl.status import sacct_records

    text = ("500_0|501|RUNNING|120|billing=1,cpu=8,gres/gpu=1,mem=64G,node=1\n"
            "500_[1-2,4%2]|500|PENDING|0|billing=1,cpu=8,gres/gpu=1,mem=64G,node=1\n"
            "510|510|COMPLETED|30|cpu=1,mem=4G,node=1\n")
    got = sacct_records(text)
    assert got["500_0"] == got["501"] == ("RUNNING", 120.0, 1)
    assert {k: v[0] for k, v in got.items() if k.startswith("500_")} == {
        "500_0": "RUNNING", "500_1": "PENDING", "500_2": "PENDING", "500_4": "PENDING"}
    assert got["510"] == ("COMPLETED", 30.0, 0)
