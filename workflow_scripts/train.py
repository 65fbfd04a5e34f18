"""Rule train: one GRPO run (engine chosen by the config), resumable from `_work/`."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from pathlib import Path

import pandas as pd

from vicurl.data import schema
from vicurl.engines import workdir
from vicurl.io import write_json
from vicurl.prompts import rendered_example
from vicurl.provenance import provenance
from vicurl.workflow import setup

settings = dict(snakemake.params.settings)
# resume an interrupted job; after a finished one (a forced retrain) or changed settings, start afresh
status = workdir.prepare(snakemake.params.work_dir, settings)
log = setup(snakemake, history=Path(snakemake.params.work_dir) / workdir.HISTORY)
log.info(status)
stats_path = snakemake.input.prompt_stats[0] if snakemake.input.prompt_stats else None  # AdaRFT, SENT
start = snakemake.params.start_from  # a continued run: its source run's work folder and last step
data = {}
if snakemake.params.engine == "verl":  # GPU cluster: verl 0.9.1 with the same hooks (vicurl.engines.verl)
    from vicurl.engines.verl.launch import run as run_verl

    data = run_verl(settings, snakemake.params.model_dir, snakemake.input.train_set, snakemake.params.work_dir,
             snakemake.output.checkpoints, snakemake.output.metrics, verl=snakemake.params.verl,
             prompt_stats=stats_path, start_from=start)
else:
    from vicurl.engines.local import LocalTrainer
    from vicurl.settings import TrainSettings

    cfg = TrainSettings.from_dict(settings)
    stats = pd.read_parquet(stats_path) if stats_path else None
    # prompts over train.max_prompt_length tokens dropped (counted in _work/long_prompts.json) or refused, as on verl
    trainer = LocalTrainer(cfg, snakemake.params.model_dir, schema.read(snakemake.input.train_set),
                           snakemake.params.work_dir, prompt_stats=stats, source=str(snakemake.input.train_set))
    data = {"long_prompts": trainer.long_prompts}
    if start:
        trainer.fork(start["work_dir"], start["step"])
    trainer.run()
    out = Path(snakemake.output.checkpoints)
    trainer.publish({s: out / f"step{s}" for s in cfg.export_steps}, snakemake.output.metrics)
write_json(snakemake.output.settings, settings)
rows = schema.read(snakemake.input.train_set)
too_long = set(data.get("long_prompts", {}).get("dropped_ids", []))  # the example is a prompt the run trained on
prompt = rendered_example(snakemake.params.model_dir, rows[~rows["id"].astype(str).isin(too_long)],
                          settings.get("prompt_order", "question_first"), settings.get("chat_template", "auto"))
# the resolved config, package versions and git commit of this run (written last, atomically)
w = snakemake.wildcards
write_json(snakemake.output.provenance, provenance(
    run=dict(study=w.study, model=w.model, setting=w.setting, seed=int(w.seed),
             **({"continues": start["run"], "from_step": start["step"]} if start else {})),
    settings=settings,
    config=snakemake.config, repo=Path(snakemake.scriptdir or ".").parent, engine=snakemake.params.engine,
    data=data, prompt=prompt))
workdir.mark_published(snakemake.params.work_dir)
