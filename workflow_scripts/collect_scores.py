"""Rules study_scores and table_scores: the per-seed score records they list (params.keep),
read from the runs' ``scores.json``, in one CSV."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report.aggregate import collect, read_scores
from vicurl.runtime.io import atomic_path
from vicurl.runtime.workflow import setup

log = setup(snakemake)
per_seed = collect(read_scores(snakemake.input.scores, keep=snakemake.params.keep))
with atomic_path(snakemake.output[0]) as tmp:
    per_seed.to_csv(tmp, index=False)
log.info("%d score records -> %s", len(per_seed), snakemake.output[0])
