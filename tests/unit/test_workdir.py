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
