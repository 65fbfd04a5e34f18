"""Rule synthetic_data: write every split of the synthetic arithmetic task."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from pathlib import Path

from vicurl.data import schema, synthetic
from vicurl.runtime.workflow import setup

log = setup(snakemake)
splits = synthetic.make_splits(dict(snakemake.params.splits), seed=int(snakemake.params.seed))
for out in snakemake.output:
    name = Path(out).stem
    schema.write(splits[name], out, name=name)
    log.info("%s: %d rows -> %s", name, len(splits[name]), out)
