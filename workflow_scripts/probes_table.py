"""Rule probes_table: every probe in one CSV (report/probes.csv), sorted by run and step."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import json

import pandas as pd

from vicurl.runtime.io import atomic_path
from vicurl.runtime.workflow import setup

log = setup(snakemake)
keys = ["study", "model", "reward", "curriculum", "seed", "step"]
df = pd.DataFrame([json.loads(open(p).read()) for p in snakemake.input.probes]).drop(columns="per_prompt", errors="ignore")
df = df[keys + [c for c in df.columns if c not in keys]].sort_values(keys)
with atomic_path(snakemake.output[0]) as tmp:
    df.to_csv(tmp, index=False)
log.info("%d probes -> %s", len(df), snakemake.output[0])
