"""Rule prepare_dataset: one real dataset -> normalized parquet + manifest."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.data.prepare import prepare_dataset, summary
from vicurl.runtime.workflow import setup

log = setup(snakemake)
name = snakemake.wildcards.dataset
manifest = prepare_dataset(name, dict(snakemake.params.cfg), snakemake.output.data, snakemake.output.manifest)
log.info(summary(manifest))
