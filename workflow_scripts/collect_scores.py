"""Rules study_scores and table_scores: per-seed score records (``.score.json``) in one CSV."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
import json

import pandas as pd

from vicurl.io import atomic_path
from vicurl.report.aggregate import collect
from vicurl.workflow import setup

log = setup(snakemake)
per_seed = collect(json.loads(open(p).read()) for p in snakemake.input)
with atomic_path(snakemake.output[0]) as tmp:
    per_seed.to_csv(tmp, index=False)
log.info("%d score records -> %s", len(per_seed), snakemake.output[0])
