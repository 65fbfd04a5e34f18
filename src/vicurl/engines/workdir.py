"""A run's work folder (``runs/.../_work/``): resume an interrupted job, start afresh otherwise.

The train job calls ``prepare`` before training. The folder holds the engine's resume
checkpoints; it is kept when the previous job was interrupted (the engine resumes from its last
checkpoint) and emptied when that job finished and published the run (``mark_published`` is its
last act: a rerun is then a forced retrain, e.g. after a code change) or when it was written with
other training settings (``fingerprint``). Either way the job's log says which.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from vicurl.runtime.io import write_json, write_text

PUBLISHED = "published.json"
FINGERPRINT = "settings.sha256"
PROGRESS = "metrics.jsonl"  # each step's metrics row, appended as the job trains (both engines; `vicurl.status`)
HISTORY = "train.log"  # every job's log lines (`vicurl.runtime.workflow.setup`), kept when the folder is emptied
TRAINING = "training_id"  # one training of the run, from step 0 to its end (its resumes too): W&B's run id
JOB_START = time.time()  # the rows one job (one process) appends share it: `vicurl.status` times steps by it


def fingerprint(settings: Mapping[str, Any]) -> str:
    """A digest of the run's training settings (`vicurl.config.runs.train_settings`)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=list).encode()).hexdigest()


def prepare(work_dir: str | Path, settings: Mapping[str, Any]) -> str:
    """Keep, or empty, the work folder for this job; returns the log line saying which."""
    work = Path(work_dir)
    fp = fingerprint(settings)
    reason = None
    if (work / PUBLISHED).exists():
        reason = "the previous job finished and published this run: training it again from step 0"
    elif (work / FINGERPRINT).exists() and (work / FINGERPRINT).read_text().strip() != fp:
        reason = f"{work} was written with other training settings: training from step 0"
    if reason is not None:
        history = (work / HISTORY).read_bytes() if (work / HISTORY).exists() else None
        shutil.rmtree(work)
        if history is not None:
            work.mkdir(parents=True)
            (work / HISTORY).write_bytes(history)
    fresh = not work.exists() or not any(p.name != HISTORY for p in work.iterdir())
    work.mkdir(parents=True, exist_ok=True)
    write_text(work / FINGERPRINT, fp + "\n")
    if reason is not None:
        return reason
    return "a new run: training from step 0" if fresh else f"resuming from what the interrupted job left in {work}"


def training_id(work_dir: str | Path) -> str:
    """The id of the training the work folder holds: drawn by the first job that asks (a run from step 0 starts
    in a fresh or emptied folder: ``prepare``), the same for every job that resumes it."""
    path = Path(work_dir) / TRAINING
    if not path.exists():
        write_text(path, secrets.token_hex(8) + "\n")
    return path.read_text().strip()


def mark_published(work_dir: str | Path) -> None:
    """The job's last act: its outputs are published (a later job of this run is a retrain)."""
    write_json(Path(work_dir) / PUBLISHED, {"published_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})


def append_progress(path: str | Path, row: Mapping[str, Any]) -> None:
    """Append a finished step's row to a progress file (``PROGRESS``), stamped with its job's start and its own
    time (``time/job``, ``time/finished``: Unix seconds); on a line of its own after a job killed mid-line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**row, "time/job": JOB_START, "time/finished": time.time()}, sort_keys=True) + "\n"
    with open(path, "a+b") as f:
        end = f.seek(0, os.SEEK_END)
        torn = end > 0 and f.seek(end - 1) >= 0 and f.read(1) != b"\n"
        f.write((("\n" if torn else "") + line).encode())


def _records(lines: list[str]) -> list[dict[str, Any]]:
    """The lines that are whole records (a job killed while writing leaves a torn one)."""
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int):
            out.append(rec)
    return out


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """A run's metrics file, its progress file (``PROGRESS``) included, of a possibly resumed run: the last
    record of each step, in step order."""
    p = Path(path)
    rows = _records(p.read_text().splitlines()) if p.exists() else []
    by_step = {int(rec["step"]): rec for rec in rows}
    return [by_step[s] for s in sorted(by_step)]


def last_records(path: str | Path, nbytes: int = 1 << 16) -> list[dict[str, Any]]:
    """The records in the last ``nbytes`` of a progress file, as written (a resumed run's steps repeat): what
    `vicurl.status` needs of a long run without reading it whole."""
    p = Path(path)
    if not p.exists():
        return []
    with open(p, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - nbytes))
        lines = f.read().decode(errors="replace").splitlines()
    return _records(lines[1:] if size > nbytes else lines)  # the first line may be cut
