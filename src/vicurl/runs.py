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

import math
from dataclasses import dataclass
from typing import Any, Iterator

from vicurl import methods
from vicurl.data import sources
from vicurl.settings import TrainSettings, VerlSettings

BASE = "base"
# a run's folder below runs/, eval/, probes/, ...: ``Run.path``, and the rules' wildcard pattern
PATH = "{study}/{model}/{setting}/seed{seed}"


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


def check(config: dict[str, Any]) -> None:
    """Cross-references the JSON schema cannot express; errors name the config key."""
    for name, s in config["studies"].items():
        _check_references(config, name, s)
        _check_training(config, name, s)
    for name in config["studies"]:
        _check_continuation(config, name)
    _check_eval(config)
    _check_engine(config)
    _check_probes(config)
    _check_models(config)
    _check_datasets(config)
    _check_findings(config)


def _check_findings(config: dict[str, Any]) -> None:
    """The findings table reads a defined study, one of its models, and a metric the evaluation computes."""
    f = config.get("findings")
    if not f:
        return
    if f["study"] not in config["studies"]:
        raise ValueError(f"findings.study: study {f['study']!r} is not defined under `studies`")
    if f["model"] not in config["studies"][f["study"]]["models"]:
        raise ValueError(f"findings.model: model {f['model']!r} is not a model of study {f['study']!r}")
    metric = f.get("metric", "pass@1")
    if metric not in [f"pass@{k}" for k in config["eval"]["ks"]]:
        raise ValueError(f"findings.metric: {metric!r} is not computed (eval.ks: {config['eval']['ks']})")


def _check_references(config: dict[str, Any], name: str, s: dict[str, Any]) -> None:
    """A study's datasets, models, rewards and curricula are defined in their sections."""
    where = f"studies.{name}"
    for key in [s["train_set"], *s["benchmarks"]]:
        if key not in config["datasets"]:
            raise ValueError(f"{where}: dataset {key!r} is not defined under `datasets`")
    for model in s["models"]:
        if model not in config["models"]:
            raise ValueError(f"{where}.models: model {model!r} is not defined under `models`")
    for reward, curricula in s["settings"].items():
        if reward not in config["rewards"]:
            raise ValueError(f"{where}.settings: reward {reward!r} is not defined under `rewards`")
        for c in curricula:
            if c not in config["curricula"]:
                raise ValueError(f"{where}.settings.{reward}: curriculum {c!r} is not defined under `curricula`")


def _check_training(config: dict[str, Any], name: str, s: dict[str, Any]) -> None:
    """A study's training settings fit together: steps, mini-batches, votes, evaluated steps."""
    where = f"studies.{name}"
    train = {**config.get("train", {}), **s.get("train", {})}
    if "total_steps" not in train:
        raise ValueError(f"{where}: train.total_steps is not set (top-level `train` or the study's `train`)")
    t = TrainSettings.from_dict(train)  # the schema allows only its keys; its defaults fill the rest
    if t.mini_batch_size is not None and t.batch_size % t.mini_batch_size:
        raise ValueError(f"{where}: train.mini_batch_size={t.mini_batch_size} does not divide train.batch_size="
                         f"{t.batch_size} (both engines take equal mini-batches of the batch)")
    n_votes = config["rewards"].get("majority_vote", {}).get("n_votes")
    if "majority_vote" in s["settings"] and n_votes is not None and n_votes < t.group_size:
        raise ValueError(f"rewards.majority_vote.n_votes={n_votes} is below the group size "
                         f"{t.group_size} of study {name!r} (votes must include the trained rollouts)")
    steps_ok = range(1, int(train["total_steps"]) + 1)
    for step in s.get("eval_steps", []) or []:
        if int(step) not in steps_ok:
            raise ValueError(f"{where}.eval_steps: step {step} is outside the study's 1..{train['total_steps']} training steps")


def _check_eval(config: dict[str, Any]) -> None:
    """Pass@k needs k samples per problem, in `eval` and in every study's."""
    for study in [None, *config["studies"]]:
        ev = config.get("eval", {}) if study is None else eval_settings(config, study)
        n, ks = ev.get("n_samples", 16), ev.get("ks", [1, 8])
        if ks and max(ks) > n:
            key = "eval.n_samples" if study is None or "n_samples" not in (config["studies"][study].get("eval") or {}) \
                else f"studies.{study}.eval.n_samples"
            raise ValueError(f"eval.ks: Pass@{max(ks)} needs at least {max(ks)} samples per problem, {key} is {n}")


def _check_engine(config: dict[str, Any]) -> None:
    """Every run's curriculum runs on the configured engine (the catalog's ``engines``), and the
    verl engine can run its settings exactly (`vicurl.engines.verl.support`)."""
    engine = config.get("engine", "local")
    seen = set()
    for run in runs(config):
        if (run.study, run.model, run.reward, run.curriculum) in seen:
            continue
        seen.add((run.study, run.model, run.reward, run.curriculum))
        if engine not in methods.curriculum(run.curriculum).engines:
            raise ValueError(f"studies.{run.study}.settings.{run.reward}: {run.curriculum!r} cannot run on "
                             f"engine: {engine} (it runs on {list(methods.curriculum(run.curriculum).engines)})")
        if engine == "verl":
            from vicurl.engines.verl.support import refusal  # plain Python: no verl or torch import here

            why = refusal(train_settings(config, run))
            if why is not None:
                raise ValueError(f"studies.{run.study}.settings.{run.reward}: {run.curriculum!r} cannot run on "
                                 f"engine: verl: {why}")


def _check_probes(config: dict[str, Any]) -> None:
    """`probes` names defined studies (not continuing ones), models and rewards, and curricula a
    probe can replay (the catalog's ``stateless``)."""
    probes = config.get("probes", {}) or {}
    for study in probes.get("studies", []):
        if study not in config["studies"]:
            raise ValueError(f"probes.studies: study {study!r} is not defined under `studies`")
        if source_study(config, study) is not None:
            raise ValueError(f"probes.studies: study {study!r} continues study {source_study(config, study)!r}; "
                             f"probe that study's runs")
    for key, defined in (("models", "models"), ("rewards", "rewards")):
        for v in probes.get(key) or []:
            if v not in config[defined]:
                raise ValueError(f"probes.{key}: {v!r} is not defined under `{defined}`")
    for c in probes.get("curricula", []):
        if c not in methods.probeable():
            raise ValueError(f"probes.curricula: {c!r} keeps state across steps; probe one of {methods.probeable()}")
    for study in probes.get("studies", []):
        late = [s for s in probes.get("steps") or [] if s >= total_steps(config, study)]
        if late:
            raise ValueError(f"probes.steps: {late} are not before the last step of study {study!r} "
                             f"({total_steps(config, study)} steps); a probe at step s is the policy of step s + 1")


def _check_models(config: dict[str, Any]) -> None:
    """A built model's warm-up split is a split of `synthetic`."""
    for name, m in config["models"].items():
        if "build" in m:
            split = m["build"]["sft_split"]
            if split not in config.get("synthetic", {}).get("splits", {}):
                raise ValueError(f"models.{name}.build.sft_split: {split!r} is not a split under `synthetic.splits`")


def _check_datasets(config: dict[str, Any]) -> None:
    """A synthetic dataset is a split of `synthetic` with no other settings; a real one resolves."""
    for name, d in config["datasets"].items():
        if d["source"] == "synthetic":
            if name not in config.get("synthetic", {}).get("splits", {}):
                raise ValueError(f"datasets.{name}: source synthetic but no split {name!r} under `synthetic.splits`")
            extra = sorted(set(d) - {"source", "label"})
            if extra:
                raise ValueError(f"datasets.{name}.{extra[0]}: not a setting of source synthetic (settings: label)")
        else:
            sources.resolve(name, d)  # raises ConfigError naming the key


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


# settings a continued run may have apart from its source run's: how long it trains, what it exports
_CONTINUATION_KEYS = {"total_steps", "curriculum_steps", "export_steps", "save_every", "keep_checkpoints"}


def _check_continuation(config: dict[str, Any], name: str) -> None:
    """A continuing study must extend its source's runs exactly: the same training settings (its
    ``train`` may change total_steps only), benchmarks and generation settings, and every step
    it evaluates up to the source's end must be one the source evaluates."""
    src = source_study(config, name)
    if src is None:
        return
    where = f"studies.{name}"
    if src not in config["studies"] or src == name:
        raise ValueError(f"{where}.continues: {src!r} is not another study under `studies`")
    if source_study(config, src) is not None:
        raise ValueError(f"{where}.continues: study {src!r} itself continues {source_study(config, src)!r}; "
                         f"continue {source_study(config, src)!r}'s runs in one study")
    t_src, t = total_steps(config, src), total_steps(config, name)
    if t <= t_src:
        raise ValueError(f"{where}.train.total_steps: {t} does not extend study {src!r}'s {t_src} steps")
    if list(config["studies"][name]["benchmarks"]) != list(config["studies"][src]["benchmarks"]):
        raise ValueError(f"{where}.benchmarks: must be study {src!r}'s {config['studies'][src]['benchmarks']} "
                         f"(its checkpoints up to step {t_src} are evaluated once, for both)")
    if eval_settings(config, name) != eval_settings(config, src):
        raise ValueError(f"{where}.eval: must be study {src!r}'s generation settings (its checkpoints up to "
                         f"step {t_src} are evaluated once, for both)")
    missing = sorted(set(s for s in eval_steps(config, name) if s <= t_src) - set(eval_steps(config, src)))
    if missing:
        raise ValueError(f"{where}.eval_steps: steps {missing} are up to step {t_src}, where the checkpoints are "
                         f"study {src!r}'s, which does not evaluate them ({eval_steps(config, src)})")
    for run in runs(config, name):
        source = source_run(config, run)
        if source is None:
            continue
        mine, theirs = train_settings(config, run), train_settings(config, source)
        for key in sorted((set(mine) | set(theirs)) - _CONTINUATION_KEYS):
            if mine.get(key) != theirs.get(key):
                raise ValueError(f"{where}.train.{key}: {mine.get(key)!r} differs from study {src!r}'s "
                                 f"{theirs.get(key)!r}; run {run.path} continues {source.path} and must train "
                                 f"with its settings")


def needs_prompt_stats(config: dict[str, Any], run: Run) -> bool:
    """Whether the run's curriculum reads the offline per-prompt statistics (rule prompt_stats),
    as the catalog says for its configured parameters (`vicurl.methods`)."""
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
        reward=run.reward,
        reward_params=dict(config["rewards"].get(run.reward, {})),
        curriculum=run.curriculum,
        curriculum_params=curriculum_params,
        prompt_order=config.get("prompt", {}).get("order", "question_first"),
        chat_template=chat_template(config, run.model),
        export_steps=sorted(s for s in set(eval_steps(config, run.study)) | set(probe_steps(config, run)) if s > start),
    )
    src = source_study(config, run.study)
    if src is not None:
        settings["curriculum_steps"] = total_steps(config, src)
    return settings


def chat_template(config: dict[str, Any], model: str) -> bool | str:
    """``models.<name>.chat_template``: ``auto`` (default: the tokenizer's chat template where it has
    one, the paper's single-turn conversation), ``true`` or ``false`` (raw text); vicurl.prompts."""
    return config["models"][model].get("chat_template", "auto")


def total_steps(config: dict[str, Any], study: str) -> int:
    return int({**config.get("train", {}), **config["studies"][study].get("train", {})}["total_steps"])


def verl_settings(config: dict[str, Any], model: str) -> VerlSettings:
    """The `verl` section for the runs of ``model`` (its ``verl.models`` entry over the section)."""
    return VerlSettings.from_dict(config.get("verl")).for_model(model)


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
    every = int(s.get("eval_every") or config.get("eval", {}).get("every", 50))
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


def is_probed(config: dict[str, Any], run: Run) -> bool:
    """A run is probed when its study and curriculum are listed under `probes`, and its model,
    reward and seed too where `probes.models` / `.rewards` / `.seeds` narrow the choice."""
    p = config.get("probes", {}) or {}
    if run.study not in p.get("studies", []) or run.curriculum not in p.get("curricula", []):
        return False
    for key, value in (("models", run.model), ("rewards", run.reward), ("seeds", run.seed)):
        if p.get(key) is not None and value not in p[key]:
            return False
    return True


def probe_steps(config: dict[str, Any], run: Run) -> list[int]:
    """Checkpoints a probed run is probed at: `probes.steps`, or else 0 (the base model) and every
    `probes.every` steps before the last."""
    if not is_probed(config, run):
        return []
    t = total_steps(config, run.study)
    if config["probes"].get("steps") is not None:
        return sorted(set(int(s) for s in config["probes"]["steps"]))
    return list(range(0, t, int(config["probes"].get("every", 50))))


def probes(config: dict[str, Any]) -> list[tuple[Run, int]]:
    """Every (run, step) to probe."""
    return [(run, step) for run in runs(config) for step in probe_steps(config, run)]


def report_step(config: dict[str, Any], study: str) -> int:
    """The step the tables report (`eval.checkpoint`), the same for every method."""
    ck = config.get("eval", {}).get("checkpoint", "last")
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
