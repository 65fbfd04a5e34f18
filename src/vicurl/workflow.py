"""Glue for the thin `script:` entry points in workflow_scripts/."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path


def setup(snakemake, threads: int | None = None) -> logging.Logger:
    """Send logging (and warnings) to the rule's log file; pin torch threads to the rule's."""
    log_path = Path(snakemake.log[0]) if snakemake.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", handlers=handlers, force=True)
    logging.captureWarnings(True)
    n = int(threads or getattr(snakemake, "threads", 1) or 1)
    # cheap rules never import torch; for the others, pin the threads whether torch is loaded yet or not
    os.environ["OMP_NUM_THREADS"] = str(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    return logging.getLogger(f"vicurl.{snakemake.rule}")
