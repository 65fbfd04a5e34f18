"""The run table: the config's studies expanded into one row per training run.

A run is (study, model, reward, curriculum, seed); its folder spells the parts out:
``runs/{study}/{model}/{reward}-{curriculum}/seed{seed}/`` (``Run``: the one place that builds
and parses it). The Base (No RL) rows are evaluation-only pseudo-runs with study ``base`` and
setting ``base``.

A study that ``continues`` another trains on from where that study's runs end: its run of
(model, setting, seed) starts from the source run's final training state (weights, optimizer,
curriculum, data order) when the source study trains that run, and trains its own steps only;
its checkpoints up to the source's last step *are* the source run's (``checkpoint_owner``), so
they are evaluated once. Its other runs train from step 0, which is the same thing: the same
settings, and the curriculum schedule spans the source's steps in both (``curriculum_steps``).
The paper's mechanism study is such a study: the main runs (T_ref = 313) continued to T_long = 626.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from vicurl.config import methods
from vicurl.config.settings import VerlSettings

BASE = "base"
# a run's folder below runs/, eval/, probes/, ...: ``Run.path``, and the rules' wildcard pattern
PATH = "{study}/{model}/{setting}/seed{seed}"


def results_dir(config: dict[str, Any]) -> str:
    """The scenario's results folder, relative to the workflow's working directory (the rules' ``R``)."""
    return f"results/{config['scenario']}"


def setting_of(reward: str, curriculum: str) -> str:
    """A run folder's setting, ``{reward}-{curriculum}``; the Base pseudo-run's is ``base``."""
    return BASE if reward == curriculum == BASE else f"{reward}-{curriculum}"


def split_setting(setting: str) -> tuple[str, str]:
    """(reward, curriculum) of a setting (split at its first dash: reward names have none);
    ``base`` is (base, base)."""
    if setting == BASE:
        return BASE, BASE
    reward, curriculum = setting.split("-", 1)
    return reward, curriculum


@dataclass(frozen=True)
class Run:
    """A run's identity, the one place its folder's parts are built and parsed. The Base (No RL)
    evaluations are pseudo-runs: study, reward and curriculum ``base``."""

    study: str
    model: str
    reward: str
    curriculum: str
    seed: int

    @classmethod
    def of(cls, study: str, model: str, setting: str, seed: int | str) -> "Run":
        """The run of a folder's parts."""
        return cls(study, model, *split_setting(setting), int(seed))

    @classmethod
    def from_wildcards(cls, wildcards: Any) -> "Run":
        """The run of a rule's wildcards ``study``, ``model``, ``setting``, ``seed``."""
        return cls.of(wildcards.study, wildcards.model, wildcards.setting, wildcards.seed)

    @property
    def setting(self) -> str:
        return setting_of(self.reward, self.curriculum)

    @property
    def path(self) -> str:
        return PATH.format(study=self.study, model=self.model, setting=self.setting, seed=self.seed)

    def identity(self) -> dict[str, Any]:
        """The keys a run's records carry (scores, probes)."""
        return dict(study=self.study, model=self.model, reward=self.reward, curriculum=self.curriculum, seed=self.seed)


def runs(config: dict[str, Any], study: str | None = None) -> list[Run]:
    out = []
    for name, s in config["studies"].items():
        if study is not None and name != study:
            continue
        for model in s["models"]:
            for reward, curricula in s["settings"].items():
                for curriculum in curricula:
                    for seed in s["seeds"]:
                        out.append(Run(name, model, reward, curriculum, int(seed)))
    return out


def source_study(config: dict[str, Any], study: str) -> str | None:
    """The study whose runs this study continues (``studies.<name>.continues``), or None."""
    return config["studies"][study].get("continues") if study in config["studies"] else None


def source_run(config: dict[str, Any], run: Run) -> Run | None:
    """The run this run continues: the source study's run of the same model, setting and seed,
    when the source study trains it; None for every other run (trained from step 0)."""
    src = source_study(config, run.study)
    if src is None:
        return None
    s = config["studies"][src]
    if run.model in s["models"] and run.curriculum in s["settings"].get(run.reward, []) and run.seed in s["seeds"]:
        return Run(src, run.model, run.reward, run.curriculum, run.seed)
    return None


def start_step(config: dict[str, Any], run: Run) -> int:
    """The step a run starts training from: its source run's last, or 0."""
    src = source_run(config, run)
    return 0 if src is None else total_steps(config, src.study)


def checkpoint_owner(config: dict[str, Any], run: Run, step: int) -> Run:
    """The run whose checkpoint (and evaluation) is ``run``'s at ``step``: the source run for the
    steps a continued run did not train itself, else the run."""
    src = source_run(config, run)
    return src if src is not None and 0 < int(step) <= total_steps(config, src.study) else run


def needs_prompt_stats(config: dict[str, Any], run: Run) -> bool:
    """Whether the run's curriculum reads the offline per-prompt statistics (rule prompt_stats),
    as the catalog says for its configured parameters (`vicurl.config.methods`)."""
    params = config.get("curricula", {}).get(run.curriculum, {}) or {}
    return bool(methods.curriculum(run.curriculum).stats(params))


def train_settings(config: dict[str, Any], run: Run) -> dict[str, Any]:
    """Base `train` + the study's overrides + reward and curriculum parameters + seed.

    A curriculum's ``weight_kl`` (soft_confidence's) overrides ``train.weight_kl`` for its runs. A
    continuing study's runs get ``curriculum_steps``, the source study's steps (the schedule is the
    source's, flat after it ends), and export only the steps they train."""
    settings = {**config.get("train", {}), **config["studies"][run.study].get("train", {})}
    curriculum_params = dict(config["curricula"].get(run.curriculum, {}))
    if curriculum_params.get("weight_kl") is not None:
        settings["weight_kl"] = bool(curriculum_params["weight_kl"])
    curriculum_params.pop("weight_kl", None)
    start = start_step(config, run)
    settings.update(
        seed=run.seed,
        reproducible=bool(config.get("reproducible", False)),
        reward=run.reward,
        reward_params=dict(config["rewards"].get(run.reward, {})),
        curriculum=run.curriculum,
        curriculum_params=curriculum_params,
        prompt_order=config["prompt"]["order"],
        chat_template=chat_template(config, run.model),
        export_steps=sorted(s for s in set(eval_steps(config, run.study)) | set(probe_steps(config, run)) if s > start),
    )
    src = source_study(config, run.study)
    if src is not None:
        settings["curriculum_steps"] = total_steps(config, src)
    return settings


def chat_template(config: dict[str, Any], model: str) -> bool | str:
    """``models.<name>.chat_template``: ``auto`` (default: the tokenizer's chat template where it has
    one, the paper's single-turn conversation), ``true`` or ``false`` (raw text); vicurl.data.prompts."""
    return config["models"][model]["chat_template"]


def total_steps(config: dict[str, Any], study: str) -> int:
    return int({**config.get("train", {}), **config["studies"][study].get("train", {})}["total_steps"])


def verl_settings(config: dict[str, Any], model: str) -> VerlSettings:
    """The `verl` section for the runs of ``model`` (its ``verl.models`` entry over the section)."""
    return VerlSettings.from_dict(config.get("verl")).for_model(model)


# keys of the `verl` section that shape the train job (its resources, its stall bound), not what it trains
VERL_JOB_KEYS = ("cpus_per_gpu", "runtime", "runtime_scale", "mem_mb", "step_timeout", "models")


def verl_training_settings(config: dict[str, Any], model: str) -> dict[str, Any]:
    """The run's verl settings that can change what it trains: the train rule's ``params.verl``, so that
    a change retrains the runs it changes, and a changed resource or ``step_timeout`` retrains none
    (the job reads the whole section, `verl_settings`)."""
    return {k: v for k, v in dataclasses.asdict(verl_settings(config, model)).items() if k not in VERL_JOB_KEYS}


def train_runtime(config: dict[str, Any], run: Run, attempt: int = 1) -> int:
    """The train job's runtime (minutes) on the verl engine: ``verl.runtime`` per attempt for a run
    of ``train.total_steps`` steps, scaled by the steps this run trains (a 626-step run twice, a run
    continuing another its own steps only) and by ``verl.runtime_scale`` of its model and study."""
    v = verl_settings(config, run.model)
    scale = (total_steps(config, run.study) - start_step(config, run)) / int(config["train"]["total_steps"])
    for name in (run.model, run.study):
        scale *= v.runtime_scale.get(name, 1)
    return int(math.ceil(v.runtime * attempt * scale))


def eval_steps(config: dict[str, Any], study: str) -> list[int]:
    """Training steps that are exported and evaluated: every `eval.every` steps (the study's
    `eval_every` if set), the study's `eval_steps` (e.g. the mechanism study's T_ref) and the last."""
    t = total_steps(config, study)
    s = config["studies"][study]
    every = int(s.get("eval_every") or config["eval"]["every"])
    extra = {int(x) for x in s.get("eval_steps", []) or [] if 0 < int(x) <= t}
    return sorted(set(range(every, t + 1, every)) | extra | {t})


def evaluated_steps(config: dict[str, Any], study: str) -> list[int]:
    """The checkpoints of one of the study's runs that are evaluated: ``eval_steps``, or step 0
    for the Base model (study ``base``)."""
    return [0] if study == BASE else eval_steps(config, study)


def eval_settings(config: dict[str, Any], study: str) -> dict[str, Any]:
    """The generation settings of a study's evaluations: `eval` with the study's `eval` merged
    over it (e.g. the long-output study's 8192 new tokens). The Base (No RL) evaluations
    (study ``base``) always use the global `eval`."""
    base = dict(config.get("eval", {}))
    if study == BASE or study not in config["studies"]:
        return base
    return {**base, **(config["studies"][study].get("eval") or {})}


def probe_blocks(config: dict[str, Any]) -> list[dict[str, Any]]:
    """`probes` as its list of blocks (one mapping is one block): each selects runs and the steps to probe them
    at, with its own batch (e.g. the step-0 probes of many seeds beside the trajectory of one)."""
    p = config.get("probes") or {}
    return [b for b in (p if isinstance(p, list) else [p]) if b]


def _selects(block: dict[str, Any], run: Run) -> bool:
    if run.study not in block.get("studies", []) or run.curriculum not in block.get("curricula", ["vicurl"]):
        return False
    for key, value in (("models", run.model), ("rewards", run.reward), ("seeds", run.seed)):
        if block.get(key) is not None and value not in block[key]:
            return False
    return True


def _block_steps(config: dict[str, Any], block: dict[str, Any], run: Run) -> list[int]:
    if not _selects(block, run):
        return []
    if block.get("steps") is not None:
        return sorted(set(int(s) for s in block["steps"]))
    return list(range(0, total_steps(config, run.study), int(block.get("every", 50))))


def is_probed(config: dict[str, Any], run: Run) -> bool:
    """A run is probed when a block of `probes` lists its study and curriculum, and its model, reward and seed
    too where the block's `models` / `rewards` / `seeds` narrow the choice."""
    return any(_selects(b, run) for b in probe_blocks(config))


def probe_steps(config: dict[str, Any], run: Run) -> list[int]:
    """Checkpoints a probed run is probed at, over every block that selects it: a block's `steps`, or else 0
    (the base model) and every `every` steps before the last."""
    return sorted({s for b in probe_blocks(config) for s in _block_steps(config, b, run)})


def probe_settings(config: dict[str, Any], run: Run, step: int) -> dict[str, Any]:
    """The block that probes ``run`` at ``step`` (the first that does): its batch, rollouts and method."""
    for b in probe_blocks(config):
        if int(step) in _block_steps(config, b, run):
            return b
    raise ValueError(f"run {run.path} is not probed at step {step}")


def probes(config: dict[str, Any]) -> list[tuple[Run, int]]:
    """Every (run, step) to probe."""
    return [(run, step) for run in runs(config) for step in probe_steps(config, run)]


def report_step(config: dict[str, Any], study: str) -> int:
    """The step the tables report (`eval.checkpoint`), the same for every method."""
    ck = config["eval"]["checkpoint"]
    steps = eval_steps(config, study)
    if ck == "last":
        return steps[-1]
    if int(ck) not in steps:
        raise ValueError(f"eval.checkpoint: step {ck} is not an evaluated step of study {study!r} ({steps})")
    return int(ck)


def evaluations(config: dict[str, Any], study: str | None = None) -> Iterator[tuple[str, str, str, int, int, str]]:
    """Every (study, model, setting, seed, step, benchmark) to evaluate, base models included."""
    seen = set()
    for run in runs(config, study):
        for step in eval_steps(config, run.study):
            for bench in config["studies"][run.study]["benchmarks"]:
                yield run.study, run.model, run.setting, run.seed, step, bench
        for bench in config["studies"][run.study]["benchmarks"]:
            key = (run.model, run.seed, bench)
            if key not in seen:
                seen.add(key)
                yield BASE, run.model, BASE, run.seed, 0, bench


def checkpoint_benchmarks(config: dict[str, Any], study: str, model: str, seed: int) -> list[str]:
    """The benchmarks a checkpoint of (study, model, seed) is evaluated on, as ``evaluations`` plans
    them: the study's; for the Base model (study ``base``), those of every study that trains the
    model with this seed."""
    if study != BASE:
        return list(config["studies"][study]["benchmarks"])
    out: list[str] = []
    for run in runs(config):
        if run.model == model and run.seed == int(seed):
            out += [b for b in config["studies"][run.study]["benchmarks"] if b not in out]
    return out


def table_evaluations(config: dict[str, Any], table: dict[str, Any]) -> list[tuple[str, str, str, int, int, str]]:
    """The evaluations a resolved table (``vicurl.report.tableconfig.resolve``) reads, among those
    the config plans: its rows' (study, model, setting) at the row's step (a mechanism table: every
    evaluated step up to ``t_long``), on the table's benchmarks, every seed (a Base row: the seeds
    it names). A table builds exactly these, so a table of one study never trains another's runs."""
    benches = set(table["benchmarks"])
    wanted: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # (study, model, setting) -> (steps, seeds)
    for block in table.get("blocks") or [{"rows": table.get("rows") or []}]:
        for row in block["rows"]:
            key = (row["study"], row["model"], setting_of(row["reward"], row["curriculum"]))
            if row["study"] == BASE:
                key = (BASE, row["model"], BASE)
            steps = {0} if row["study"] == BASE else (None if row.get("step") is None else {int(row["step"])})
            seeds = set(row["seeds"]) if row.get("seeds") else None
            old = wanted.get(key)
            if old is not None:  # the same setting twice (e.g. at two steps): read the union
                steps = None if old[0] is None or steps is None else old[0] | steps
                seeds = None if old[1] is None or seeds is None else old[1] | seeds
            wanted[key] = (steps, seeds)
    t_long = table.get("t_long")
    out = []
    for e in evaluations(config):
        study, model, setting, seed, step, bench = e
        hit = wanted.get((study, model, setting))
        if hit is None or bench not in benches:
            continue
        steps, seeds = hit
        if seeds is not None and seed not in seeds:
            continue
        if steps is None:  # mechanism rows: the curve up to t_long
            if t_long is not None and not (0 < step <= t_long):
                continue
        elif step not in steps:
            continue
        out.append(e)
    return out


def override_effects(base: dict[str, Any], config: dict[str, Any], tables: Mapping[str, Mapping[str, Any]] = {}
                     ) -> list[str]:
    """What the overrides laid over ``base`` change in the studies that read another study's runs: for each study
    whose runs the overrides change (seeds, models, settings, steps), the continuing studies whose runs now train
    from step 0, or continue again, and the tables whose rows read it (``tables``: the resolved tables). Said
    when the workflow is parsed, so that a cut study's effect on the others is seen before any job."""
    out = []
    for name in config["studies"]:
        if name not in base["studies"]:
            continue
        mine, theirs = set(runs(config, name)), set(runs(base, name))
        if mine == theirs and total_steps(config, name) == total_steps(base, name):
            continue
        said = []
        for other in config["studies"]:
            if source_study(config, other) != name or other not in base["studies"]:
                continue
            fresh = {r for r in runs(config, other) if source_run(config, r) is None}
            was = {r for r in runs(base, other) if source_run(base, r) is None}
            if fresh - was:
                said.append(f"{len(fresh - was)} of study {other}'s runs no longer continue one of its runs and "
                            f"train from step 0 ({', '.join(sorted(r.path for r in fresh - was)[:2])}"
                            f"{', ...' if len(fresh - was) > 2 else ''})")
            if was - fresh:
                said.append(f"{len(was - fresh)} of study {other}'s runs now continue its runs")
        readers = sorted(t for t, spec in tables.items() if t and spec.get("study") != name
                         and any(row.get("study") == name for b in spec.get("blocks", []) for row in b.get("rows", [])))
        if readers:
            said.append(f"table(s) {', '.join(readers)} read its runs in rows of their own")
        if said:
            out.append(f"studies.{name}: the overrides change its runs ({len(theirs)} -> {len(mine)}); "
                       + "; ".join(said))
    return out
