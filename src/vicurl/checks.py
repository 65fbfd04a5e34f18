"""Every check of a config, in the order it is read: the JSON schema (one line naming the key),
its defaults, then what the schema cannot express (datasets, models, studies and their training,
continuations, evaluation, the engine, probes, findings). The workflow calls ``read`` once when the
Snakefile is parsed; errors name the config key. The report's tables check their own keys when
they resolve (`vicurl.report.tableconfig`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

import yaml

from vicurl import methods
from vicurl import runs as R
from vicurl.data import sources
from vicurl.errors import ConfigError
from vicurl.settings import SCHEMA, TrainSettings


def with_defaults(config: dict[str, Any], schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """``config`` with the schema's defaults filled in (in place), checking nothing (Snakemake's
    ``validate(set_default=True)`` fills the same, in the same order, but stops at the first error):
    what every function of `vicurl.runs` reads; tests build partial configs with it."""
    from jsonschema import Draft202012Validator, validators

    def fill(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from Draft202012Validator.VALIDATORS["properties"](validator, properties, instance, schema)

    Filler = validators.extend(Draft202012Validator, {"properties": fill})
    for _ in Filler(yaml.safe_load(Path(schema_path).read_text())).iter_errors(config):
        pass
    return config


def read(config: dict[str, Any], schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """Check ``config`` against the schema, fill in its defaults (in place) and check the rest."""
    check_schema(config, schema_path)
    with_defaults(config, schema_path)
    check(config)
    return config


def schema_error(config: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """The most relevant violation of ``schema`` in ``config`` as one line, or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    err = best_match(Draft202012Validator(schema).iter_errors(dict(config)))
    if err is None:
        return None
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    return f"config key {where}: {err.message}"


def check_schema(config: Mapping[str, Any], schema_path: str | Path) -> None:
    msg = schema_error(config, yaml.safe_load(Path(schema_path).read_text()))
    if msg is not None:
        raise ConfigError(f"{msg} (config/schema.yaml describes every key)")


def check(config: dict[str, Any]) -> None:
    """What the JSON schema cannot express, section by section in the order a config reads
    (datasets, models, studies, evaluation, engine, probes, findings); errors name the config key."""
    _check_datasets(config)
    _check_models(config)
    for name, s in config["studies"].items():
        _check_references(config, name, s)
        _check_training(config, name, s)
    for name in config["studies"]:
        _check_continuation(config, name)
    _check_eval(config)
    _check_engine(config)
    _check_probes(config)
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
    metric = f["metric"]
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
        ev = config.get("eval", {}) if study is None else R.eval_settings(config, study)
        n, ks = ev["n_samples"], ev["ks"]
        if ks and max(ks) > n:
            key = "eval.n_samples" if study is None or "n_samples" not in (config["studies"][study].get("eval") or {}) \
                else f"studies.{study}.eval.n_samples"
            raise ValueError(f"eval.ks: Pass@{max(ks)} needs at least {max(ks)} samples per problem, {key} is {n}")


def _check_engine(config: dict[str, Any]) -> None:
    """Every run's curriculum runs on the configured engine (the catalog's ``engines``), and the
    verl engine can run its settings exactly (``verl_refusal``)."""
    engine = config["engine"]
    seen = set()
    for run in R.runs(config):
        if (run.study, run.model, run.reward, run.curriculum) in seen:
            continue
        seen.add((run.study, run.model, run.reward, run.curriculum))
        if engine not in methods.curriculum(run.curriculum).engines:
            raise ValueError(f"studies.{run.study}.settings.{run.reward}: {run.curriculum!r} cannot run on "
                             f"engine: {engine} (it runs on {list(methods.curriculum(run.curriculum).engines)})")
        if engine == "verl":
            why = verl_refusal(R.train_settings(config, run))
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
        if R.source_study(config, study) is not None:
            raise ValueError(f"probes.studies: study {study!r} continues study {R.source_study(config, study)!r}; "
                             f"probe that study's runs")
    for key, defined in (("models", "models"), ("rewards", "rewards")):
        for v in probes.get(key) or []:
            if v not in config[defined]:
                raise ValueError(f"probes.{key}: {v!r} is not defined under `{defined}`")
    for c in probes.get("curricula", []):
        if c not in methods.probeable():
            raise ValueError(f"probes.curricula: {c!r} keeps state across steps; probe one of {methods.probeable()}")
    for study in probes.get("studies", []):
        late = [s for s in probes.get("steps") or [] if s >= R.total_steps(config, study)]
        if late:
            raise ValueError(f"probes.steps: {late} are not before the last step of study {study!r} "
                             f"({R.total_steps(config, study)} steps); a probe at step s is the policy of step s + 1")


def _check_models(config: dict[str, Any]) -> None:
    """A built model's warm-up split is a split of `synthetic`; a revision is a Hub model's."""
    from vicurl.models.fetch import is_hub_id

    for name, m in config["models"].items():
        if "revision" in m and not ("hub_id" in m and is_hub_id(m["hub_id"])):
            raise ValueError(f"models.{name}.revision: only a Hub model (hub_id `org/name`) has revisions; "
                             f"{m.get('hub_id', 'a built model')!r} is not one")
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


# settings a continued run may have apart from its source run's: how long it trains, what it exports
_CONTINUATION_KEYS = {"total_steps", "curriculum_steps", "export_steps", "save_every", "keep_checkpoints"}


def _check_continuation(config: dict[str, Any], name: str) -> None:
    """A continuing study must extend its source's runs exactly: the same training settings (its
    ``train`` may change total_steps only), benchmarks and generation settings, and every step
    it evaluates up to the source's end must be one the source evaluates."""
    src = R.source_study(config, name)
    if src is None:
        return
    where = f"studies.{name}"
    if src not in config["studies"] or src == name:
        raise ValueError(f"{where}.continues: {src!r} is not another study under `studies`")
    if R.source_study(config, src) is not None:
        raise ValueError(f"{where}.continues: study {src!r} itself continues {R.source_study(config, src)!r}; "
                         f"continue {R.source_study(config, src)!r}'s runs in one study")
    t_src, t = R.total_steps(config, src), R.total_steps(config, name)
    if t <= t_src:
        raise ValueError(f"{where}.train.total_steps: {t} does not extend study {src!r}'s {t_src} steps")
    if list(config["studies"][name]["benchmarks"]) != list(config["studies"][src]["benchmarks"]):
        raise ValueError(f"{where}.benchmarks: must be study {src!r}'s {config['studies'][src]['benchmarks']} "
                         f"(its checkpoints up to step {t_src} are evaluated once, for both)")
    if R.eval_settings(config, name) != R.eval_settings(config, src):
        raise ValueError(f"{where}.eval: must be study {src!r}'s generation settings (its checkpoints up to "
                         f"step {t_src} are evaluated once, for both)")
    missing = sorted(set(s for s in R.eval_steps(config, name) if s <= t_src) - set(R.eval_steps(config, src)))
    if missing:
        raise ValueError(f"{where}.eval_steps: steps {missing} are up to step {t_src}, where the checkpoints are "
                         f"study {src!r}'s, which does not evaluate them ({R.eval_steps(config, src)})")
    for run in R.runs(config, name):
        source = R.source_run(config, run)
        if source is None:
            continue
        mine, theirs = R.train_settings(config, run), R.train_settings(config, source)
        for key in sorted((set(mine) | set(theirs)) - _CONTINUATION_KEYS):
            if mine.get(key) != theirs.get(key):
                raise ValueError(f"{where}.train.{key}: {mine.get(key)!r} differs from study {src!r}'s "
                                 f"{theirs.get(key)!r}; run {run.path} continues {source.path} and must train "
                                 f"with its settings")


def verl_refusal(settings: TrainSettings | Mapping[str, Any]) -> str | None:
    """Why the verl engine cannot run these training settings exactly (naming the config key), or
    None. Plain Python, so the parse refuses a config before any job reaches a cluster; the verl
    hook asks again at launch. (How verl runs adarft, sent and vcrl: docs/verl.md.)"""
    s = TrainSettings.of(settings)
    cur = s.curriculum
    if cur not in methods.supported_by("verl"):
        return f"curriculum {cur!r} is unknown to the verl engine (known: {methods.supported_by('verl')})"
    n_votes = s.reward_params.get("n_votes")
    if n_votes is not None and int(n_votes) != int(s.group_size):
        return ("rewards.majority_vote.n_votes must be null (vote with the G trained rollouts); TTRL's n_votes > G "
                "needs extra samples per prompt, use engine: local")
    if s.loss_agg_mode != "seq-mean-token-mean":
        return "train.loss_agg_mode must be seq-mean-token-mean"
    if cur == "soft_confidence" and s.weight_kl and float(s.kl_coef) > 0:
        return ("curriculum soft_confidence gives non-uniform weights, and verl's KL loss has no per-sample weight; "
                "set curricula.soft_confidence.weight_kl: false (the policy term stays weighted exactly) or use "
                "engine: local")
    mini = s.mini_batch_size
    if cur == "vcrl" and mini is not None and int(mini) != int(s.batch_size):
        return ("curriculum vcrl: train.mini_batch_size must be unset (one optimizer step per batch): the local "
                "engine splits the batch plus the replayed prompts into mini-batches, verl the batch of fixed size")
    return None
