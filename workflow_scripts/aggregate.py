"""Rule aggregate: all per-seed scores in one table, and mean / std across seeds."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report.aggregate import across_seeds, collect, read_scores
from vicurl.runtime.io import atomic_path
from vicurl.runtime.workflow import setup

log = setup(snakemake)
per_seed = collect(read_scores(snakemake.input.scores, keep=snakemake.params.keep))
summary = across_seeds(per_seed, metrics=tuple(snakemake.params.metrics))
for df, out in ((per_seed, snakemake.output.per_seed), (summary, snakemake.output.across_seeds)):
    with atomic_path(out) as tmp:
        df.to_csv(tmp, index=False)
log.info("%d score records, %d summary rows", len(per_seed), len(summary))
