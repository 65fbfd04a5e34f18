"""Every check of a config, in the order it is read: the JSON schema (one line naming the key),
its defaults, then what the schema cannot express (datasets, models, studies and their training,
continuations, evaluation, the engine, probes, findings). The workflow calls ``read`` once when the
Snakefile is parsed; errors name the config key. The report's tables check their own keys when
they resolve (`vicurl.report.tableconfig`)."""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from vicurl.config import methods
from vicurl.config import runs as R
from vicurl.config.settings import SCHEMA, TrainSettings
from vicurl.config.targets import nearest
from vicurl.data import sources
from vicurl.runtime.errors import ConfigError


def with_defaults(config: dict[str, Any], schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """``config`` with the schema's defaults filled in (in place), checking nothing (Snakemake's
    ``validate(set_default=True)`` fills the same, in the same order, but stops at the first error):
    what every function of `vicurl.config.runs` reads; tests build partial configs with it."""
    from jsonschema import Draft202012Validator, validators

    def fill(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from Draft202012Validator.VALIDATORS["properties"](validator, properties, instance, schema)

    Filler = validators.extend(Draft202012Validator, {"properties": fill})
    for _ in Filler(load_schema(schema_path)).iter_errors(config):
        pass
    return config


@functools.lru_cache(maxsize=8)
def _schema(path: str, mtime: float) -> dict[str, Any]:
    return yaml.safe_load(Path(path).read_text())


def load_schema(schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """The schema, read once a process (again where the file changed); a copy, for callers that fill it."""
    return copy.deepcopy(_schema(str(schema_path), Path(schema_path).stat().st_mtime))


def read(config: dict[str, Any], schema_path: str | Path = SCHEMA) -> dict[str, Any]:
    """Read the values the schema types (in place), check ``config`` against it, fill in its defaults and
    check the rest."""
    schema = load_schema(schema_path)
    typed(config, schema)
    check_schema(config, schema_path)
    with_defaults(config, schema_path)
    check(config)
    return config


_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_READERS = {
    "integer": lambda s: int(s) if re.fullmatch(r"[+-]?\d+", s) else None,
    "number": lambda s: float(s) if _NUMBER.fullmatch(s) else None,
    "boolean": lambda s: {"true": True, "false": False}.get(s.lower()),
}


def typed(config: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Strings read as the numbers or booleans the schema asks for, in place: YAML 1.1 reads ``1e-6`` (no
    dot) as a string, and Snakemake's ``--config key='{...}'`` gives every nested value as one. A string the
    schema's type cannot read stays, and the schema check names it."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    for _ in range(100):  # a value fixed can reveal others below it (a list's items)
        changed = False
        for err in validator.iter_errors(config):
            if err.validator != "type" or not isinstance(err.instance, str) or not err.absolute_path:
                continue
            wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
            text = err.instance.strip()
            if "null" in wanted and text in ("null", "~", ""):
                value, found = None, True
            else:
                found = False
                for t in ("integer", "number", "boolean"):
                    value = _READERS[t](text) if t in wanted else None
                    if value is not None:
                        found = True
                        break
            if found:
                *parents, last = err.absolute_path
                node = config
                for k in parents:
                    node = node[k]
                node[last] = value
                changed = True
        if not changed:
            break
    return config


def read_file(*paths: str | Path) -> dict[str, Any]:
    """The config of these files, merged in order key by key as Snakemake merges ``--configfile``s, and ``read``."""
    merged: dict[str, Any] = {}
    for path in paths:
        merge(merged, yaml.safe_load(Path(path).read_text()) or {})
    return read(merged)


def merge(into: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``layer`` laid over ``into`` (in place): mappings merged key by key, anything else replaced (Snakemake's rule)."""
    for k, v in layer.items():
        if isinstance(v, Mapping) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)
    return into


def schema_error(config: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """The most relevant violation of ``schema`` in ``config`` as one line, or None: ``key: what``, an
    unknown key with the nearest known one."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    err = best_match(Draft202012Validator(schema).iter_errors(dict(config)))
    if err is None:
        return None
    path = [str(p) for p in err.absolute_path]
    if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
        known = list((err.schema.get("properties") or {}))
        unknown = [k for k in err.instance if k not in known]
        if unknown:
            where = ".".join(path) or "the config"
            return (f"{'.'.join([*path, str(unknown[0])])}: not a key of {where}{nearest(unknown[0], known)}; "
                    f"its keys: {', '.join(known)}")
    return f"{'.'.join(path) or '(top level)'}: {err.message}"


def check_schema(config: Mapping[str, Any], schema_path: str | Path) -> None:
    msg = schema_error(config, load_schema(schema_path))
    if msg is not None:
        raise ConfigError(f"{msg} (config/schema.yaml describes every key)")


_KEY = re.compile(r"[A-Za-z_][\w\-]*(?:\.[\w\-]+)*")


def leading_key(message: str) -> str | None:
    """The config key an error message starts with (``studies.x.models: ...``), or None."""
    m = _KEY.match(message)
    return m.group(0) if m and message[m.end():m.end() + 1] in (":", "=") else None


def key_source(key: str, files: Sequence[str | Path], overrides: Mapping[str, Any] | None = None) -> str:
    """Where a merged config's ``key`` (dotted) was set: ``--config`` where an override sets it, else the last
    of the layered ``files`` whose keys reach deepest along it (a later file wins, key by key), else the
    schema's defaults."""
    parts = key.split(".")

    def depth(tree: Any) -> int:
        d = 0
        for k in parts:
            if not isinstance(tree, Mapping) or k not in tree:
                break
            tree, d = tree[k], d + 1
        return d

    best, where = 0, None
    for f in files:
        try:
            d = depth(yaml.safe_load(Path(f).read_text()) or {})
        except (OSError, yaml.YAMLError):
            continue
        if d and d >= best:
            best, where = d, _shown(f)
    if overrides and depth(overrides) and depth(overrides) >= best:
        return "--config"
    return where or "config/schema.yaml (a default)"


def _shown(path: str | Path) -> str:
    p = Path(path)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


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
    if "claims" in f:
        if "study" in f or "model" in f:
            raise ValueError("findings: either `claims` (a claims file) or `study` and `model`, not both")
        return
    if "study" not in f or "model" not in f:
        raise ValueError("findings: `study` and `model` (one study's claims), or `claims` (a claims file)")
    if f["study"] not in config["studies"]:
        raise ValueError(f"findings.study: study {f['study']!r} is not defined under `studies`"
                         f"{nearest(f['study'], config['studies'])}")
    if f["model"] not in config["studies"][f["study"]]["models"]:
        raise ValueError(f"findings.model: model {f['model']!r} is not a model of study {f['study']!r}"
                         f"{nearest(f['model'], config['studies'][f['study']]['models'])}")
    metric = f["metric"]
    if metric not in [f"pass@{k}" for k in config["eval"]["ks"]]:
        raise ValueError(f"findings.metric: {metric!r} is not computed (eval.ks: {config['eval']['ks']})")


def _check_references(config: dict[str, Any], name: str, s: dict[str, Any]) -> None:
    """A study's datasets, models, rewards and curricula are defined in their sections."""
    where = f"studies.{name}"
    for key, value in [("train_set", s["train_set"]), *(("benchmarks", b) for b in s["benchmarks"])]:
        if value not in config["datasets"]:
            raise ValueError(f"{where}.{key}: dataset {value!r} is not defined under `datasets`"
                             f"{nearest(value, config['datasets'])}")
    for model in s["models"]:
        if model not in config["models"]:
            raise ValueError(f"{where}.models: model {model!r} is not defined under `models`"
                             f"{nearest(model, config['models'])}")
    for reward, curricula in s["settings"].items():
        if reward not in config["rewards"]:
            raise ValueError(f"{where}.settings: reward {reward!r} is not defined under `rewards`"
                             f"{nearest(reward, config['rewards'])}")
        for c in curricula:
            if c not in config["curricula"]:
                raise ValueError(f"{where}.settings.{reward}: curriculum {c!r} is not defined under `curricula`"
                                 f"{nearest(c, config['curricula'])}")
    seeds = list(s["seeds"])
    twice = sorted({x for x in seeds if seeds.count(x) > 1})
    if twice:
        raise ValueError(f"{where}.seeds: seed {twice[0]} is listed {seeds.count(twice[0])} times (each seed is one "
                         f"run of every setting)")


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
    """Every block of `probes` names defined studies (not continuing ones), models and rewards, and curricula a
    probe can replay (the catalog's ``stateless``)."""
    blocks = R.probe_blocks(config)
    for i, probes in enumerate(blocks):
        key = "probes" if not isinstance(config.get("probes"), list) else f"probes[{i}]"
        for study in probes.get("studies", []):
            if study not in config["studies"]:
                raise ValueError(f"{key}.studies: study {study!r} is not defined under `studies`"
                                 f"{nearest(study, config['studies'])}")
            if R.source_study(config, study) is not None:
                raise ValueError(f"{key}.studies: study {study!r} continues study {R.source_study(config, study)!r}; "
                                 f"probe that study's runs")
        for k, defined in (("models", "models"), ("rewards", "rewards")):
            for v in probes.get(k) or []:
                if v not in config[defined]:
                    raise ValueError(f"{key}.{k}: {v!r} is not defined under `{defined}`{nearest(v, config[defined])}")
        for c in probes.get("curricula", []):
            if c not in methods.probeable():
                raise ValueError(f"{key}.curricula: {c!r} keeps state across steps; probe one of {methods.probeable()}")
        for study in probes.get("studies", []):
            late = [s for s in probes.get("steps") or [] if s >= R.total_steps(config, study)]
            if late:
                raise ValueError(f"{key}.steps: {late} are not before the last step of study {study!r} "
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
        raise ValueError(f"{where}.continues: {src!r} is not another study under `studies`"
                         f"{nearest(src, [k for k in config['studies'] if k != name])}")
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
    hook asks again at launch. (How verl runs adarft, sent and vcrl: docs/engine.md.)"""
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
