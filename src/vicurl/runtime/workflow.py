"""Glue for the thin `script:` entry points in workflow_scripts/."""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
from datetime import datetime, timezone
from pathlib import Path


def setup(snakemake, history: str | Path | None = None) -> logging.Logger:
    """Send logging (and warnings) to the rule's log file; pin torch threads to the rule's.

    ``history``: a file that keeps every attempt's lines (Snakemake deletes a job's log before
    it reruns it), each job's after a line marking its start (``NEW_JOB``, which `vicurl.status` splits
    the jobs by); the rule's log starts with the earlier attempts' lines, and this job's lines go to both."""
    log_path = Path(snakemake.log[0]) if snakemake.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    earlier = ""
    if history is not None:
        history = Path(history)
        earlier = history.read_text() if history.exists() else ""
        history.parent.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        if earlier:  # the first job's lines start the history
            with open(history, "a") as f:
                f.write(("" if earlier.endswith("\n") else "\n") + f"==== {stamp}: {NEW_JOB} ====\n")
            earlier = history.read_text()
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(earlier)
        # appending: a handler in mode "w" stays shut once closed, and a library that configures logging
        # closes every handler (vLLM's import calls logging.config.dictConfig); this one reopens its file
        handlers.append(logging.FileHandler(log_path, mode="a"))
    if history is not None:
        handlers.append(logging.FileHandler(history, mode="a"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", handlers=handlers, force=True)
    logging.captureWarnings(True)
    sys.excepthook = _log_failure  # the traceback of a failing job in its log, where Snakemake points
    if os.environ.get("SLURM_JOB_ID"):  # which SLURM job this is (vicurl.status reads it back: SLURM_JOB)
        logging.getLogger("vicurl").info("SLURM job %s", os.environ["SLURM_JOB_ID"])
    n = int(getattr(snakemake, "threads", 1) or 1)
    # cheap rules never import torch; for the others, pin the threads whether torch is loaded yet or not
    os.environ["OMP_NUM_THREADS"] = str(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    if os.environ.get(IMPORTS_LOG):
        atexit.register(_record_job, Path(os.environ[IMPORTS_LOG]), snakemake.rule)
    return logging.getLogger(f"vicurl.{snakemake.rule}")


#: the line between two jobs' lines in a run's history and log (above it: the earlier jobs')
NEW_JOB = "a new job of this run starts (above: the earlier jobs' log)"


def _log_failure(exc_type, exc, tb) -> None:
    """Bad input (`vicurl.runtime.errors.InputError`: its message names the file, row or key) in one line; anything
    else with its traceback."""
    from vicurl.runtime.errors import InputError

    if isinstance(exc, InputError):
        logging.getLogger("vicurl").error("the job failed: %s", exc)
    else:
        logging.getLogger("vicurl").error("the job failed", exc_info=(exc_type, exc, tb))


#: set to a folder, every job writes there at exit how long its process lived and the modules it
#: imported, in order (measurements/demo_time.py replays them to measure a job's fixed cost)
IMPORTS_LOG = "VICURL_IMPORTS_LOG"


def _record_job(folder: Path, rule: str) -> None:
    with open("/proc/self/stat") as f:  # Linux: the process's start, in clock ticks after boot
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        seconds = float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{rule}-{os.getpid()}.json").write_text(json.dumps(
        {"rule": rule, "seconds": seconds, "modules": [m for m in list(sys.modules) if not m.startswith("__")]}))
