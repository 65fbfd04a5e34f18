"""A run's work folder: an interrupted job's checkpoints are resumed from, a finished run or
changed settings start afresh (vicurl.engines.workdir)."""

from vicurl.engines import workdir


def test_interrupted_resumes_finished_or_changed_starts_afresh(tmp_path):
    work, settings = tmp_path / "_work", {"total_steps": 4, "lr": 1e-3}
    assert workdir.prepare(work, settings) == "a new run: training from step 0"
    (work / "ckpt_step000002.pt").write_text("state")  # the job is killed here
    assert workdir.prepare(work, settings).startswith("resuming from what the interrupted job left")
    assert (work / "ckpt_step000002.pt").exists()

    (work / workdir.HISTORY).write_text("the first job's log\n")
    workdir.mark_published(work)  # the job finished; a later job of this run is a retrain
    assert "finished and published" in workdir.prepare(work, settings)
    assert not (work / "ckpt_step000002.pt").exists() and not (work / workdir.PUBLISHED).exists()
    assert (work / workdir.HISTORY).read_text() == "the first job's log\n"  # the log of every job stays

    (work / "ckpt_step000002.pt").write_text("state")
    assert "other training settings" in workdir.prepare(work, {**settings, "lr": 2e-3})
    assert not (work / "ckpt_step000002.pt").exists()
    assert workdir.prepare(work, {**settings, "lr": 2e-3}).startswith("resuming")  # same settings again


def test_progress_rows_survive_a_job_killed_mid_line(tmp_path):
    """A job killed while appending leaves a torn line: the readers skip it, and the next job's rows start on a
    line of their own (appended after the fragment, they would be lost too). Each row carries its job's start
    and its own time (`vicurl.status` times steps by them)."""
    import json
    import time

    p = tmp_path / workdir.PROGRESS
    before = time.time()
    workdir.append_progress(p, {"step": 1, "a": 1.0})
    with open(p, "a") as f:
        f.write('{"step": 2, "a": 2')  # killed here
    workdir.append_progress(p, {"step": 2, "a": 3.0})
    lines = p.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[2])["a"] == 3.0
    rows = workdir.read_metrics(p)
    assert [(r["step"], r["a"]) for r in rows] == [(1, 1.0), (2, 3.0)]
    assert rows[0]["time/job"] == rows[1]["time/job"] == workdir.JOB_START
    assert before <= rows[0]["time/finished"] <= rows[1]["time/finished"] <= time.time()
    assert [r["step"] for r in workdir.last_records(p)] == [1, 2]


def test_the_last_records_of_a_long_progress_file_are_read_from_its_end(tmp_path):
    import json

    p = tmp_path / workdir.PROGRESS
    p.write_text("".join(json.dumps({"step": s, "pad": "x" * 100}) + "\n" for s in range(1, 1001)))
    rows = workdir.last_records(p, nbytes=4096)
    assert rows[-1]["step"] == 1000 and len(rows) < 40
    assert [r["step"] for r in rows] == list(range(rows[0]["step"], 1001))  # no cut line read as a record
