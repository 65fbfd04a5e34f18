"""Rule schedule_figure: beta_t (target and kept share) and tau_t against step, across the setting's seeds."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import pandas as pd

from vicurl.report.schedule import schedule_figure
from vicurl.runtime.workflow import setup

log = setup(snakemake)
frames = [pd.read_json(path, lines=True).assign(seed=seed) for path, seed in zip(snakemake.input.metrics, snakemake.params.seeds)]
schedule_figure(pd.concat(frames, ignore_index=True), [snakemake.output.png, snakemake.output.pdf],
                title=snakemake.params.title)
log.info("schedule of %d run(s)", len(frames))
