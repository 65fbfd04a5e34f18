"""Launch one training run on verl: settings -> Hydra overrides -> ``VICuRLTrainer`` -> exports.

    python -m vicurl.engines.verl.launch --settings train_config.json --model Qwen/Qwen2.5-Math-1.5B \\
        --train-set results/paper/data/deepscaler.parquet --work-dir .../_work \\
        --checkpoints .../checkpoints --metrics .../metrics.jsonl [--verl-config verl.json] \\
        [--continue-from .../main/.../_work:313] [--exit-with-parent] [--tracking tensorboard=DIR]

(the train rule calls ``run`` directly when ``engine: verl``). verl's config is ``CONFIG``
(``vicurl_ppo_trainer.yaml``: verl's ``ppo_trainer`` and what every run sets the same way) with
``overrides``, a pure function of the run's settings (`vicurl.config.runs.train_settings`) and the config's
``verl`` section: the values computed from them, the run's paths, then ``verl.overrides``. A test
composes it (``compose``) for every run of config/paper.yaml.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import secrets
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from vicurl.config.methods import proposing
from vicurl.config.runs import setting_of
from vicurl.config.settings import TrainSettings, VerlSettings
from vicurl.engines import workdir
from vicurl.engines.verl import export
from vicurl.engines.verl.data import VERBATIM_TEMPLATE
from vicurl.engines.verl.patches import colocate_socket, rollout_seeds
from vicurl.runtime import tracking as vicurl_tracking
from vicurl.runtime import vllm_env

log = logging.getLogger(__name__)

# verl's ppo_trainer extended with what every run sets the same way (GRPO, FSDP2, vLLM rollouts, ...)
CONFIG = Path(__file__).with_name("vicurl_ppo_trainer.yaml")


def _q(v: Any) -> str:
    """A Hydra override value: strings quoted (paths and templates contain = , / { })."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_q(x) for x in v) + "]"
    s = str(v).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{s}'"


def save_freq(settings: TrainSettings | dict[str, Any]) -> int:
    """verl saves a resume checkpoint every ``save_every`` steps (and the last); the trainer adds a
    save at each other evaluated step (`VICuRLTrainer._vicurl_extra_saves`)."""
    return int(TrainSettings.of(settings).save_every)


def overrides(settings: TrainSettings | dict[str, Any], *, model_path: str, train_files: str, work_dir: str,
              settings_path: str, train_set: str, vocab_size: int, n_train: int,
              verl: VerlSettings | dict[str, Any] | None = None, prompt_stats: str | None = None,
              start_step: int = 0, tracking: dict[str, Any] | None = None) -> list[str]:
    """verl Hydra overrides of one run's job that starts after step ``start_step`` (the GRPO settings are
    the paper's hyperparameter table); ``tracking``: the trackers it logs to (`vicurl.runtime.tracking`)."""
    s = TrainSettings.of(settings)
    v = verl if isinstance(verl, VerlSettings) else VerlSettings.from_dict(verl)
    b, g, total = int(s.batch_size), int(s.group_size), int(s.total_steps)
    epochs = math.ceil(total / (n_train // b))
    mini = s.mini_batch_size or b
    kl = float(s.kl_coef)
    work = Path(work_dir)
    longest = int(s.max_prompt_length) + int(s.max_response_length)  # a sequence fits a micro-batch whole
    max_tok, forward_tok = (max(int(t), longest) for t in (v.max_token_len_per_gpu, v.forward_token_len_per_gpu))
    # the constant part is the config this composes (vicurl_ppo_trainer.yaml); here what the run sets
    out = {
        # data
        "data.train_files": train_files,
        "data.val_files": train_files,  # verl requires one; validation is off (the workflow evaluates)
        "data.train_batch_size": b,
        "data.max_prompt_length": int(s.max_prompt_length),
        "data.max_response_length": int(s.max_response_length),
        "data.seed": int(s.seed),
        # a curriculum that chooses the prompts (AdaRFT, SENT) must see a step's rewards before the next
        # batch is drawn: no worker processes prefetching batches (vicurl.engines.verl.sampler)
        "data.dataloader_num_workers": 0 if s.curriculum in proposing() else 8,
        # the policy
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.model.custom_chat_template": VERBATIM_TEMPLATE,
        # verl's model config asks transformers for flash_attention_2 unless told otherwise, and the vllm
        # extra does not install flash-attn: the packed sequences' own attention through torch's varlen kernel
        # (varlen_attention, registered in every process: VERL_MODULES; docs/engine.md, "Attention")
        "+actor_rollout_ref.model.override_config.attn_implementation": str(v.attn_implementation),
        "actor_rollout_ref.actor.optim.lr": float(s.lr),
        "actor_rollout_ref.actor.optim.weight_decay": float(s.weight_decay),
        "actor_rollout_ref.actor.optim.betas": [float(x) for x in s.adam_betas],
        "actor_rollout_ref.actor.optim.clip_grad": float(s.grad_clip),
        "actor_rollout_ref.actor.grad_clip": float(s.grad_clip),
        "actor_rollout_ref.actor.ppo_mini_batch_size": int(mini),
        "actor_rollout_ref.actor.ppo_epochs": int(s.ppo_epochs),
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": max_tok,
        "actor_rollout_ref.actor.clip_ratio": float(s.clip_ratio),
        "actor_rollout_ref.actor.clip_ratio_low": float(s.clip_ratio),
        "actor_rollout_ref.actor.clip_ratio_high": float(s.clip_ratio),
        "actor_rollout_ref.actor.use_kl_loss": kl > 0,
        "actor_rollout_ref.actor.kl_loss_coef": kl,
        "actor_rollout_ref.actor.kl_loss_type": s.kl_type,
        "actor_rollout_ref.actor.loss_agg_mode": s.loss_agg_mode,
        # the update's budget and checkpointing; the forward-only passes take larger micro-batches
        "actor_rollout_ref.model.enable_gradient_checkpointing": bool(v.gradient_checkpointing),
        "actor_rollout_ref.actor.fsdp_config.param_offload": bool(v.param_offload),
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": bool(v.optimizer_offload),
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": forward_tok,
        # rollouts
        "actor_rollout_ref.rollout.n": g,
        "actor_rollout_ref.rollout.temperature": float(s.temperature),
        "actor_rollout_ref.rollout.top_p": float(s.top_p),
        # asked for reproducible samples: vLLM's batch-invariant kernels (and the requests seeded: trainer.py)
        "actor_rollout_ref.rollout.full_determinism": bool(s.reproducible),
        # the stream unseeded requests draw from: the run's seed's, and a resumed job's own
        "actor_rollout_ref.rollout.seed": rollout_seeds.engine_seed(s.seed, start_step),
        "actor_rollout_ref.rollout.tensor_model_parallel_size": int(v.rollout_tensor_parallel),
        "actor_rollout_ref.rollout.gpu_memory_utilization": float(v.gpu_memory_utilization),
        # the context vLLM serves: unset, verl takes the model's (131,072 tokens for Llama-3.2-3B and
        # R1-Distill) and vLLM must hold a KV cache that long beside the actor
        "actor_rollout_ref.rollout.max_model_len": int(s.max_prompt_length) + int(s.max_response_length),
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": forward_tok,  # the old-policy pass
        # files of this package: the agent loop that seeds the rollout requests (reproducible), the zero reward
        "actor_rollout_ref.rollout.agent.agent_loop_config_path": str(rollout_seeds.AGENT_LOOPS),
        "reward.custom_reward_function.path": str(Path(__file__).with_name("reward_fn.py")),
        # the loop
        "trainer.total_epochs": epochs,
        "trainer.total_training_steps": total,
        "trainer.n_gpus_per_node": int(v.n_gpus_per_node),
        "trainer.nnodes": int(v.nnodes),
        "trainer.save_freq": save_freq(s),
        "trainer.max_actor_ckpt_to_keep": int(s.keep_checkpoints),
        "trainer.default_local_dir": str(export.checkpoint_dir(work)),
        # verl's profiler (off unless a user's override turns it on) writes into the run's work folder, every
        # role's by interpolation (verl: outputs/profile, relative to wherever each worker runs)
        "global_profiler.save_path": str(work / "profile"),
        "trainer.experiment_name": f"{setting_of(s.reward, s.curriculum)}-seed{s.seed}",
        # verl's console and file loggers, then the config's trackers (their folders: the job's environment)
        "trainer.logger": vicurl_tracking.verl_loggers(tracking or {}),
    }
    lines = [f"{k}={_q(val)}" for k, val in out.items()]
    vicurl = {"settings": settings_path, "train_set": train_set, "work_dir": str(work), "vocab_size": int(vocab_size),
              "base_model": model_path}
    if prompt_stats:
        vicurl["prompt_stats"] = prompt_stats
    lines += [f"+vicurl.{k}={_q(val)}" for k, val in vicurl.items()]
    if int(v.nnodes) == 1:
        # a Ray of the run's own: given no address, ray.init joins the cluster RAY_ADDRESS or a `ray start` on the
        # node (its ray_current_cluster file) names, whose workers lack the run's variables (launch.job_environment:
        # an untied head would meet the DTensor error again, two runs share a socket). Several nodes need the
        # cluster of the job's nodes, which the user starts.
        lines.append("+ray_kwargs.ray_init.address=local")
    return lines + [str(o) for o in v.overrides]


def compose(override_list: list[str]):
    """``CONFIG`` (verl's ``ppo_trainer`` with the constant part) with one run's overrides, through
    Hydra's compose API; verl's config folder is on its search path (``hydra.searchpath`` there)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG.parent), version_base=None):
        return hydra_compose(config_name=CONFIG.stem, overrides=override_list)


def run(settings: TrainSettings | dict[str, Any], model_path: str, train_set: str, work_dir: str, checkpoints: str,
        metrics: str, verl: VerlSettings | dict[str, Any] | None = None, prompt_stats: str | None = None,
        start_from: dict[str, Any] | None = None, exit_with_parent: bool = False,
        tracking: dict[str, str | Path] | None = None, failure_logs: str | Path | None = None) -> dict[str, Any]:
    """Train (resuming from ``work_dir``), then publish the exports and metrics (GPU machine).
    ``start_from`` (``{"work_dir", "step"}``): a run continuing another starts from that run's last
    save (`export.fork`); ``exit_with_parent``: see `train`; ``tracking``: each tracker's folder
    (`vicurl.runtime.tracking`). Returns what the run's provenance records of it (the prompts dropped as too long)."""
    from vicurl.engines.verl.hook import check_settings

    s = check_settings(settings)
    from vicurl.curriculum import make_curriculum

    cur = make_curriculum(s.curriculum, s.curriculum_params)
    if cur.needs_stats and not prompt_stats:
        raise ValueError(f"curriculum {cur.name!r} needs the prompt_stats rule's table ({list(cur.needs_stats)}): "
                         f"pass --prompt-stats")
    # every path verl and Ray get is absolute: the trainer runs in a Ray actor, on a cluster of several nodes
    # in a folder of Ray's choosing
    prompt_stats = str(Path(prompt_stats).resolve()) if prompt_stats else None
    model_path = local_or_hub(model_path)
    work = Path(work_dir).resolve()
    ckpt = export.checkpoint_dir(work)
    total, exports = int(s.total_steps), s.export_steps
    work.mkdir(parents=True, exist_ok=True)
    report = prepare(s, model_path, train_set, work)
    if start_from:
        export.fork(start_from["work_dir"], work, int(start_from["step"]))
    done = export.last_saved_step(ckpt)
    redone = export.repair_exports(work, exports, ckpt, model_path)  # a job killed while exporting
    if redone:
        log.info("exported steps %s that the previous job saved but did not export", redone)
    if done >= total:  # killed after its last save: training again would run step total + 1
        log.info("verl's last save is step %d of %d: the run is trained, only publishing", done, total)
    else:
        log.info("training from %s", f"verl's save of step {done}" if done else "the base model")
        train(s, model_path, work, verl, prompt_stats, n_train=report["rows"] - report["dropped"],
              exit_with_parent=exit_with_parent, start_step=done, tracking=tracking, failure_logs=failure_logs)
    publish(work, exports, checkpoints, metrics)
    return {"long_prompts": report}


def prepare(settings: TrainSettings | dict[str, Any], model_path: str, train_set: str, work: Path) -> dict[str, Any]:
    """The run's training rows in verl's format (``<work>/verl_train.parquet``) and in the schema the
    trainer's hook reads (``<work>/train_set.parquet``), prompts over ``max_prompt_length`` tokens
    dropped (``train.long_prompts: drop``, counted in ``<work>/long_prompts.json`` and the log) or
    refused (``fail``). The settings, defaults included, written to ``<work>/settings.json``."""
    from transformers import AutoTokenizer

    from vicurl.data import schema
    from vicurl.data.long_prompts import fit_training_set, write_report
    from vicurl.engines.verl.data import to_verl_frame
    from vicurl.runtime.io import atomic_path, write_json

    s = TrainSettings.of(settings)
    write_json(work / "settings.json", asdict(s))
    df = schema.read(train_set)
    tok = AutoTokenizer.from_pretrained(model_path)
    # verl 0.9.1 would left-truncate a longer prompt with a warning (its data.truncation is not read on
    # the rollout path): a cut question is never trained on
    df, prompts, report = fit_training_set(df, tok, s, source=str(train_set))
    write_report(work, report, str(train_set))
    schema.write(df, work / "train_set.parquet")
    with atomic_path(work / "verl_train.parquet") as tmp:
        to_verl_frame(df, prompts).to_parquet(tmp)
    return report


def train(settings: TrainSettings, model_path: str, work: Path, verl: VerlSettings | dict[str, Any] | None,
          prompt_stats: str | None, n_train: int, exit_with_parent: bool = False, start_step: int = 0,
          tracking: dict[str, str | Path] | None = None, failure_logs: str | Path | None = None) -> None:
    """verl's GRPO loop with ``VICuRLTrainer`` (resume_mode auto: from verl's last save in ``work``), in a
    process of its own (`vicurl.engines.verl.fit`) that `vicurl.runtime.supervise` ends, with every
    Ray and vLLM process of the run, when a step outlasts ``verl.step_timeout`` minutes, vLLM's engine
    dies, the job is stopped or (``exit_with_parent``) the job's parent ends. The overrides: ``<work>/verl_overrides.json``.
    A failed run's Ray and vLLM logs, which live in the job's temp folder, are copied to
    ``failure_logs/<time>`` (default ``<work>/failed_logs``) first, and its error names them there."""
    from transformers import AutoConfig

    from vicurl.runtime import supervise
    from vicurl.runtime.io import write_json

    v = verl if isinstance(verl, VerlSettings) else VerlSettings.from_dict(verl)
    ov, env = job_overrides(settings, model_path, work, v, prompt_stats, n_train, start_step, tracking,
                            vocab_size=int(AutoConfig.from_pretrained(model_path).vocab_size))
    write_json(work / "verl_overrides.json", ov)
    # the run's temp folder (Ray's session, vLLM's sockets, verl's locks) and socket links: on this node alone, and
    # removed once every process of the run has ended, a stop signal outside `supervise.run` (while the failed
    # run's logs are copied, say) included
    with (supervise.stops_unwind(), vllm_env.private_temp(env) as temp,
          vllm_env.short_sockets({**env, **temp}, ray=True) as sockets):
        try:
            supervise.run([sys.executable, "-m", "vicurl.engines.verl.fit", str(work / "verl_overrides.json")],
                          env={**env, **temp, **sockets}, progress=work / workdir.PROGRESS,
                          step_timeout=60 * float(v.step_timeout), exit_with_parent=exit_with_parent)
        except supervise.LoopFailed as e:
            import time

            dest = Path(failure_logs or work / "failed_logs").resolve() / time.strftime("%Y-%m-%d_%H-%M-%S")
            message = str(e)
            try:
                kept = supervise.keep_logs(temp["TMPDIR"], dest)
            except OSError as copy_failed:  # a full disk, say: the run's own error comes first still
                raise supervise.LoopFailed(f"{message}\nRay's and vLLM's logs of the run could not be copied from "
                                           f"its temp folder to {dest}: {copy_failed}") from None
            for logs, copy in kept.items():  # the error named them in the temp folder, removed next
                message = message.replace(logs, copy)
            if kept:
                where = f"\nRay's and vLLM's logs of the run, copied from its temp folder: {dest}"
            elif int(v.nnodes) > 1 or "RAY_TMPDIR" in env:  # a cluster started by `ray start`, a folder of the user's
                where = ("\nRay's session is outside the run's temp folder (the cluster's, or RAY_TMPDIR): its logs "
                         "stay where it keeps them")
            else:
                where = "\nRay wrote no logs in the run's temp folder (its session never started)"
            raise supervise.LoopFailed(message + where) from None


def job_overrides(settings: TrainSettings, model_path: str, work: Path, verl: VerlSettings, prompt_stats: str | None,
                  n_train: int, start_step: int, tracking: dict[str, str | Path] | None, vocab_size: int,
                  base: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The overrides and environment of verl's process for a job of the run in ``work``: every path in them
    absolute (``work``, a local model folder, the prompt table and the trackers' folders made so), so that
    Ray's workers find them wherever they run."""
    base = dict(os.environ if base is None else base)
    work = Path(work).resolve()
    ov = overrides(settings, model_path=local_or_hub(model_path), train_files=str(work / "verl_train.parquet"),
                   work_dir=str(work), settings_path=str(work / "settings.json"),
                   train_set=str(work / "train_set.parquet"), vocab_size=vocab_size, n_train=n_train, verl=verl,
                   prompt_stats=str(Path(prompt_stats).resolve()) if prompt_stats else None, start_step=start_step,
                   tracking=tracking)
    env = job_environment(base, work, tracking)
    return ov + ray_worker_variables(env, base), env


def local_or_hub(model: str) -> str:
    """A model folder on this machine as an absolute path; a Hub id (no such folder) as it is."""
    return str(Path(model).resolve()) if Path(model).exists() else str(model)


def job_environment(base: dict[str, str], work: Path, tracking: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of verl's process and, inherited, of every process of the run (on one node the run starts
    a Ray of its own: ``overrides``): ``base`` with the project on PYTHONPATH, verl's file logger in ``work``,
    ``verl_environment`` and the trackers' folders."""
    env = dict(base)
    vicurl_tracking.make_folders(tracking or {})  # W&B falls back to the temp folder, the job's own, when it cannot write
    env["PYTHONPATH"] = worker_pythonpath()
    env["VERL_FILE_LOGGER_PATH"] = str(Path(env.get("VERL_FILE_LOGGER_PATH", work / "verl_log.jsonl")).resolve())
    env.update(verl_environment(env))
    env.update(vicurl_tracking.environment(tracking or {}, workdir.training_id(work)))
    return env


def ray_worker_variables(env: Mapping[str, str], base: Mapping[str, str]) -> list[str]:
    """The overrides that hand Ray's workers the variables the launcher set (``env`` less ``base``: the project's
    patches and PYTHONPATH, the run's socket token, vLLM's sampler, the trackers' folders; verl's trainer itself
    runs in a Ray worker) through verl's ``ray_init.runtime_env``. On one node the workers inherit them from the
    run's own Ray (`overrides`); the workers of a user's cluster of several nodes, started by `ray start`, get
    only these. The socket links of `vicurl.runtime.vllm_env.short_sockets`, which exist on the job's node alone, are
    not among them."""
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.{k}={_q(v)}" for k, v in sorted(env.items()) if base.get(k) != v]


# the project's patches of verl, imported by `import verl` in every process of a run (Ray's workers and vLLM's
# worker processes inherit the variable): each answers a line of verl 0.9.1 that a test watches
VERL_MODULES = ("vicurl.engines.verl.patches.fsdp_wrap", "vicurl.engines.verl.patches.colocate_socket",
                "vicurl.engines.verl.varlen_attention", "vicurl.engines.verl.patches.rope_fp32")


def verl_environment(env: dict[str, str]) -> dict[str, str]:
    """The variables a run's processes need besides ``env``: the project's verl patches added to
    VERL_USE_EXTERNAL_MODULES, the run's own weight-sync sockets (`colocate_socket.TOKEN`, fresh for each
    job), vLLM with nothing to compile (`vicurl.runtime.vllm_env.environment`; its start method left to vLLM, which
    spawns in verl's Ray actors and passes them the run's Ray address)."""
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    modules += [m for m in VERL_MODULES if m not in modules]
    return {"VERL_USE_EXTERNAL_MODULES": ",".join(modules), colocate_socket.TOKEN: secrets.token_hex(6),
            **vllm_env.environment(env, ray=True)}


def worker_pythonpath() -> str:
    """PYTHONPATH of the Ray workers: this checkout's src/ first. Only the driver has it on sys.path
    (workflow_scripts/_checkout.py); with `--sdm conda` the env holds third-party packages only, and
    the trainer's actor could not import the project."""
    import vicurl

    src = str(Path(vicurl.__file__).resolve().parents[1])
    inherited = [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join([src, *inherited])  # absolute: the workers of other nodes run elsewhere


def publish(work_dir: str | Path, export_steps, checkpoints: str | Path, metrics: str | Path) -> None:
    """Copy ``<work>/exports/step{N}`` to ``checkpoints/step{N}`` and write ``metrics.jsonl``."""
    from vicurl.engines.workdir import PROGRESS, read_metrics
    from vicurl.runtime.io import write_text

    for step in export_steps:
        src = export.export_dir(work_dir, step)
        if not src.exists():
            raise RuntimeError(f"no export for step {step} in {src}")
        export.copy_export(src, Path(checkpoints) / f"step{step}")
    write_text(metrics, "".join(json.dumps(m, sort_keys=True) + "\n" for m in read_metrics(Path(work_dir) / PROGRESS)))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--settings", required=True, help="the run's train_config.json (vicurl.config.runs.train_settings)")
    p.add_argument("--model", required=True)
    p.add_argument("--train-set", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--checkpoints", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--verl-config", help="JSON of the config's `verl` section")
    p.add_argument("--prompt-stats")
    p.add_argument("--continue-from", metavar="WORK_DIR:STEP", help="the work folder and last step of the run this one continues")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="end the run (verl's loop, Ray, vLLM) when the process that started this one ends")
    p.add_argument("--failure-logs", metavar="DIR",
                   help="where a failed run's Ray and vLLM logs are copied (default: WORK_DIR/failed_logs)")
    p.add_argument("--tracking", nargs="+", default=[], metavar="NAME=DIR",
                   help=f"a tracker ({', '.join(vicurl_tracking.LOGGERS)}) and its folder for this run (vicurl.runtime.tracking)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    verl = json.loads(Path(a.verl_config).read_text()) if a.verl_config else None
    start = None
    if a.continue_from:
        where, _, step = a.continue_from.rpartition(":")
        start = {"work_dir": where, "step": int(step)}
    tracking = dict(t.split("=", 1) for t in a.tracking)
    unknown = sorted(set(tracking) - set(vicurl_tracking.LOGGERS))
    if unknown:
        p.error(f"--tracking: unknown trackers {unknown}; known: {list(vicurl_tracking.LOGGERS)}")
    run(json.loads(Path(a.settings).read_text()), a.model, a.train_set, a.work_dir, a.checkpoints, a.metrics, verl,
        a.prompt_stats, start, exit_with_parent=a.exit_with_parent, tracking=tracking, failure_logs=a.failure_logs)


if __name__ == "__main__":
    main()
