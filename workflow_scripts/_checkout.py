"""Puts this checkout's ``src/`` first on ``sys.path``: a rule job imports the project from the
repository it runs in, whatever environment runs it (the conda envs in envs/ hold third-party
packages only, so they build anywhere; an installed copy of the package is never picked up).
Snakemake puts a local script's folder on the path, so ``import _checkout`` finds this file."""

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
if sys.path[:1] != [SRC]:
    sys.path.insert(0, SRC)
