"""Rule fetch_model: a Hub model's files at one commit -> the folder every job loads + manifest."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.models.fetch import fetch
from vicurl.runtime.workflow import setup

log = setup(snakemake)
# the kept commits' file from the config, not a parameter: its path is no reason to fetch again
m = fetch(snakemake.params.hub_id, snakemake.output.model, snakemake.output.manifest,
          revision=snakemake.params.revision, name=snakemake.wildcards.model, commits=snakemake.config["hub_commits"])
log.info("%s at %s: %d files, %.2f GB", m["hub_id"], m["commit"], len(m["files"]), sum(m["files"].values()) / 1e9)
