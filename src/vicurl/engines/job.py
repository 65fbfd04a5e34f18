"""The training job as a function of paths and settings (rule `train` calls it; so can a Python
session): one GRPO run on the configured engine, its exports, settings and provenance. The run's
work folder must be prepared first (`vicurl.engines.workdir.prepare`: resume or start afresh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from vicurl.config.settings import TrainSettings
from vicurl.data import schema
from vicurl.data.prompts import rendered_example
from vicurl.engines import workdir
from vicurl.models.fetch import fetched
from vicurl.runtime.io import write_json
from vicurl.runtime.provenance import provenance


def train(settings: Mapping[str, Any], *, engine: str, model_dir: str, train_set: str | Path, work_dir: str | Path,
          checkpoints: str | Path, metrics: str | Path, settings_out: str | Path, provenance_out: str | Path,
          run: Mapping[str, Any], config: Mapping[str, Any], repo: str | Path, verl: Mapping[str, Any] | None = None,
          prompt_stats: str | None = None, start_from: Mapping[str, Any] | None = None,
          exit_with_parent: bool = False, tracking: Mapping[str, str | Path] | None = None,
          failure_logs: str | Path | None = None) -> None:
    """Train ``settings`` (`vicurl.config.runs.train_settings`) from ``model_dir`` on ``train_set`` with
    ``engine`` (``local``: one CPU process; ``verl``: verl 0.9.1 on GPUs, ``verl`` its section),
    exporting the checkpoints and metrics; ``start_from``: a continued run's source work folder and
    step; ``run``: the run's identity for the provenance, ``config`` the resolved config;
    ``exit_with_parent``: verl's loop ends when the process that started this one does (Snakemake's job);
    ``tracking``: each tracker's folder (`vicurl.runtime.tracking.folders`), where every step's metrics go too;
    ``failure_logs``: where a failed verl run's Ray and vLLM logs are copied (beside the job's log)."""
    settings = dict(settings)
    s = TrainSettings.from_dict(settings)
    data: dict[str, Any] = {}
    if engine == "verl":
        from vicurl.engines.verl.launch import run as run_verl

        data = run_verl(settings, model_dir, train_set, work_dir, checkpoints, metrics, verl=verl,
                        prompt_stats=prompt_stats, start_from=start_from, exit_with_parent=exit_with_parent,
                        tracking=tracking, failure_logs=failure_logs)
    else:
        import pandas as pd

        from vicurl.engines.local import LocalTrainer

        stats = pd.read_parquet(prompt_stats) if prompt_stats else None
        # prompts over train.max_prompt_length tokens dropped (counted in _work/long_prompts.json) or refused, as on verl
        trainer = LocalTrainer(s, model_dir, schema.read(train_set), work_dir, prompt_stats=stats,
                               source=str(train_set))
        data = {"long_prompts": trainer.long_prompts}
        if start_from:
            trainer.fork(start_from["work_dir"], start_from["step"])
        from vicurl.config.runs import setting_of
        from vicurl.runtime.tracking import Tracker

        tracker = Tracker(tracking or {}, f"{setting_of(s.reward, s.curriculum)}-seed{s.seed}", settings,
                          training=workdir.training_id(work_dir))
        try:
            trainer.run(tracker=tracker)
        finally:
            tracker.close()
        trainer.publish({step: Path(checkpoints) / f"step{step}" for step in s.export_steps}, metrics)
    write_json(settings_out, settings)
    rows = schema.read(train_set)
    too_long = set(data.get("long_prompts", {}).get("dropped_ids", []))  # the example is a prompt the run trained on
    prompt = rendered_example(model_dir, rows[~rows["id"].astype(str).isin(too_long)],
                              s.prompt_order, s.chat_template)
    if start_from:
        run = {**run, "continues": start_from["run"], "from_step": start_from["step"]}
    # the resolved config, package versions and git commit of this run (written last, atomically)
    write_json(provenance_out, provenance(run=run, settings=settings, config=config, repo=repo, engine=engine,
                                          data=data, prompt=prompt, model=fetched(model_dir)))
    workdir.mark_published(work_dir)
