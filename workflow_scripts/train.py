"""Rule train: one GRPO run (engine chosen by the config), resumable from `_work/`."""
from pathlib import Path

import pandas as pd

from vicurl.data import schema
from vicurl.io import write_json
from vicurl.provenance import provenance
from vicurl.workflow import setup

log = setup(snakemake)
settings = dict(snakemake.params.settings)
if snakemake.params.engine != "local":
    raise SystemExit(f"engine {snakemake.params.engine!r} is not available in this build; use engine: local")

from vicurl.engines.local import LocalTrainer, TrainConfig  # noqa: E402  (after logging is set up)

cfg = TrainConfig.from_dict(settings)
stats = pd.read_parquet(snakemake.input.prompt_stats[0]) if snakemake.input.prompt_stats else None  # AdaRFT, SENT
trainer = LocalTrainer(cfg, snakemake.params.model_dir, schema.read(snakemake.input.train_set), snakemake.params.work_dir,
                       prompt_stats=stats)
trainer.run()
out = Path(snakemake.output.checkpoints)
trainer.publish({s: out / f"step{s}" for s in cfg.export_steps}, snakemake.output.metrics)
write_json(snakemake.output.settings, settings)
# the resolved config, package versions and git commit of this run (written last, atomically)
w = snakemake.wildcards
write_json(snakemake.output.provenance, provenance(
    run=dict(study=w.study, model=w.model, setting=w.setting, seed=int(w.seed)), settings=settings,
    config=snakemake.config, repo=Path(snakemake.scriptdir or ".").parent, engine=snakemake.params.engine))
