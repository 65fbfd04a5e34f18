"""Rule train: `vicurl.engines.job.train`, resumable from `_work/`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import dataclasses
from pathlib import Path

from vicurl.config import runs
from vicurl.engines import job, workdir
from vicurl.runtime import tracking
from vicurl.runtime.workflow import setup

p, w, out = snakemake.params, snakemake.wildcards, snakemake.output
# resume an interrupted job; after a finished one (a forced retrain) or changed settings, start afresh
status = workdir.prepare(p.work_dir, dict(p.settings))
setup(snakemake, history=Path(p.work_dir) / workdir.HISTORY).info(status)
job.train(p.settings, engine=p.engine, model_dir=p.model_dir, train_set=snakemake.input.train_set,
          work_dir=p.work_dir, checkpoints=out.checkpoints, metrics=out.metrics, settings_out=out.settings,
          provenance_out=out.provenance, run=dict(study=w.study, model=w.model, setting=w.setting, seed=int(w.seed)),
          config=snakemake.config, repo=Path(snakemake.scriptdir or ".").parent,
          verl=dataclasses.asdict(runs.verl_settings(snakemake.config, w.model)) if p.verl is not None else None,
          prompt_stats=snakemake.input.prompt_stats[0] if snakemake.input.prompt_stats else None,
          start_from=p.start_from, exit_with_parent=True,  # Snakemake gone: nobody would record the outputs
          failure_logs=Path(snakemake.log[0]).with_suffix(".failed"),  # a failed verl run's Ray and vLLM logs
          # the config's `loggers`, read here: which trackers a run writes to changes nothing it trains
          tracking=tracking.folders(snakemake.config, runs.Run.of(w.study, w.model, w.setting, int(w.seed)).path))
