"""A run's learning curves while it trains, in the tools researchers already use.

The config key ``loggers`` (default ``[tensorboard]``) names the trackers every training job writes to, each
step, the metrics row it also appends to ``metrics.jsonl`` (the reward's, the curriculum's beta, kept share
and weight, the actor's): TensorBoard's event files, and Weights & Biases in its offline mode (``wandb``;
``wandb sync`` uploads a run later). Both engines log through verl's own ``Tracking``: verl's loop from its
``trainer.logger``, the local engine (the CPU demo) through the same class. One folder per run under the
study's results, on the cluster's shared disk, the only thing a tracker needs:

    results/<scenario>/tensorboard/<study>/<model>/<setting>/seed<k>/     tensorboard --logdir results/<scenario>/tensorboard
    results/<scenario>/wandb/<study>/<model>/<setting>/seed<k>/wandb/     wandb sync results/<scenario>/wandb/.../wandb/offline-run-*

In W&B a run is named ``<setting>-seed<k>`` (verl's ``trainer.experiment_name``) in the project ``vicurl``, grouped by
``<scenario>/<study>/<model>/<setting>`` (its seeds together) and tagged with each of the four.

A resumed job logs the steps after its run's last save again: TensorBoard shows the latest value of a step.
Which trackers a run writes to changes nothing it trains: a changed ``loggers`` reruns no job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

LOGGERS = ("tensorboard", "wandb")  # config/schema.yaml's `loggers` enum
PROJECT = "vicurl"  # verl's trainer.project_name (vicurl_ppo_trainer.yaml), W&B's project


def folders(config: Mapping[str, Any], run_path: str) -> dict[str, Path]:
    """Each configured tracker's folder of the run at ``run_path`` (`vicurl.config.runs.Run.path`)."""
    from vicurl.config.runs import results_dir

    return {name: Path(results_dir(config), name, run_path) for name in config.get("loggers", ["tensorboard"])}


def environment(folders: Mapping[str, str | Path], training: str = "") -> dict[str, str]:
    """The variables that send verl's trackers to ``folders`` (its TensorBoard adapter reads TENSORBOARD_DIR;
    W&B runs offline, in WANDB_DIR, as the run ``training`` names: `vicurl.engines.workdir.training_id`, in the
    group and with the tags its folder's place says: `wandb_group`)."""
    env = {}
    if "tensorboard" in folders:
        env["TENSORBOARD_DIR"] = str(Path(folders["tensorboard"]).resolve())
    if "wandb" in folders:
        env.update(WANDB_MODE="offline", WANDB_DIR=str(Path(folders["wandb"]).resolve()), WANDB_SILENT="true")
        if training:  # one W&B run per training, whichever job of it logs (a resumed job continues it)
            env.update(WANDB_RUN_ID=training, WANDB_RESUME="allow")
        env.update(wandb_group(folders["wandb"]))
    return env


def make_folders(folders: Mapping[str, str | Path]) -> None:
    """Create each tracker's folder; one that cannot be written is an error naming it. (W&B would log into
    the temp folder instead, which is the job's private one, removed with the job: the run's data would go.)"""
    import os

    for name, path in folders.items():
        try:
            Path(path).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RuntimeError(f"{name}'s folder {path} cannot be created: {e}") from e
        if not os.access(path, os.W_OK | os.X_OK):
            raise RuntimeError(f"{name}'s folder {path} is not writable: the run's {name} logs would be lost")


def wandb_group(folder: str | Path) -> dict[str, str]:
    """W&B's group and tags (verl's ``wandb.init`` passes neither; W&B reads them from these variables) of a run
    whose folder `folders` made: ``<results>/wandb/<study>/<model>/<setting>/seed<k>``, ``<results>`` ending in the
    scenario. Nothing for a folder laid out otherwise (the launcher run by hand)."""
    parts = Path(folder).resolve().parts
    if len(parts) < 7 or parts[-5] != "wandb":
        return {}
    scenario, study, model, setting = parts[-6], *parts[-4:-1]
    return {"WANDB_RUN_GROUP": "/".join((scenario, study, model, setting)),
            "WANDB_TAGS": ",".join((scenario, study, model, setting))}


def verl_loggers(folders: Mapping[str, str | Path]) -> list[str]:
    """verl's ``trainer.logger``: its console and file loggers (the train log, ``_work/verl_log.jsonl``),
    then the configured trackers."""
    return ["console", "file", *folders]


class Tracker:
    """verl's ``Tracking`` over ``folders`` (the local engine's; verl's loop makes its own)."""

    def __init__(self, folders: Mapping[str, str | Path], run_name: str, settings: Mapping[str, Any],
                 training: str = ""):
        import os

        make_folders(folders)
        os.environ.update(environment(folders, training))
        self._tracking = None
        if folders:
            from verl.utils.tracking import Tracking

            # the run's config as W&B records it, in the layout verl's Tracking reads (its `trainer` section)
            config = {"trainer": {"project_name": PROJECT, "experiment_name": run_name}, "vicurl": dict(settings)}
            self._tracking = Tracking(project_name=PROJECT, experiment_name=run_name, default_backend=list(folders),
                                      config=config)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        if self._tracking is not None:
            self._tracking.log(data={k: v for k, v in metrics.items() if isinstance(v, (int, float))}, step=step)

    def close(self) -> None:
        if self._tracking is not None:
            self._tracking.finish()
