# Config validation, the run table, path helpers. Everything here is cheap and pure.
import dataclasses
import os
import sys

sys.path.insert(0, os.path.join(workflow.basedir, "src"))  # this checkout's package, installed or not
import vicurl.config.checks as checks_lib
import vicurl.data.sources as sources_lib
import vicurl.models.fetch as fetch_lib
import vicurl.report.claimed as claimed_lib
import vicurl.report.tableconfig as tables_lib
import vicurl.config.runs as runs_lib
import vicurl.config.targets as targets_lib
from snakemake.logging import logger


def fail(message):
    """Stop with one line: an exception here would print its traceback through this file and vicurl's."""
    print(f"Error: {message}", file=sys.stderr)
    raise SystemExit(1)


def config_error(error):
    """A config check's error (``key: what``), led by the file of the layered configs that set that key."""
    message = str(error)
    key = checks_lib.leading_key(message)
    if key is None:
        fail(message)
    fail(f"{checks_lib.key_source(key, workflow.configfiles, workflow.config_settings.config)}: {message}")


try:
    checks_lib.read(config, os.path.join(workflow.basedir, "config", "schema.yaml"))  # every check; fills in defaults
except ValueError as e:
    config_error(e)

R = runs_lib.results_dir(config)
# a report target (tables, table_<name>, figures, report) plans report jobs alone (vicurl.config.targets; Snakefile)
TARGETS = targets_lib.requested()
REPORT_ONLY = targets_lib.report_only(TARGETS, f"{R}/report")
RUNS = runs_lib.runs(config)
STUDIES = list(config["studies"])
SETTINGS = sorted({r.setting for r in RUNS} | {runs_lib.BASE})
RUN = runs_lib.PATH  # a run's folder as wildcards: {study}/{model}/{setting}/seed{seed}


def _alt(values):
    """A regex matching exactly these values (one that matches nothing when there are none)."""
    if not values:
        return r"(?!x)x"
    return "|".join(re.escape(str(v)) for v in sorted(set(values)))


PREPARED = sources_lib.prepared(config["datasets"])  # real sets: one prepare_dataset job each


def dataset_path(name):
    return f"{R}/data/{name}.parquet"


for _name in [] if REPORT_ONLY else PREPARED:  # a local file a set still needs: named by its key
    for _key, _path in sources_lib.local_files(config["datasets"][_name]):
        if not os.path.exists(_path) and not os.path.exists(dataset_path(_name)):
            config_error(
                f"datasets.{_name}.{_key}: {_path} does not exist (a relative path is read from the "
                f"folder Snakemake runs in, {os.getcwd()})"
            )


def manifest_path(name):
    return f"{R}/data/{name}.manifest.json"


def on_bad_row(names):
    """Each dataset's `on_bad_row`; it also says what becomes of a problem whose prompt is too long
    for the model generating from it: dropped and counted, or the job refused (vicurl.data.long_prompts)."""
    return {n: config["datasets"][n].get("on_bad_row", "fail") for n in names}


def all_datasets():
    return [dataset_path(d) for d in config["datasets"]] + [manifest_path(d) for d in PREPARED]


# models from the Hub: one fetch_model job each (a local folder as hub_id is read where it is)
HUB_MODELS = [n for n, m in config["models"].items() if "hub_id" in m and fetch_lib.is_hub_id(m["hub_id"])]
# the commit each Hub model was first fetched at (vicurl.models.fetch), from the kept commits' file and the
# fetched folders' manifests: what a fetch asks for follows from it
HUB_COMMITS = (
    fetch_lib.with_manifests(
        fetch_lib.read_commits(config["hub_commits"]),
        [(config["models"][n]["hub_id"], f"{R}/models/{n}/hub.json") for n in HUB_MODELS],
    )
    if HUB_MODELS
    else {}
)


onstart:
    # a real run (not a dry run) whose profile still holds a placeholder stops before its first job: the local
    # jobs (the models' downloads) would run, and the cluster refuse every other
    for _placeholder in targets_lib.profile_placeholders():
        fail(f"{_placeholder}, a placeholder: fill in your cluster's value (docs/slurm.md); nothing has run")
    # a manifest's commit into the file before any job runs: a fetch's job starts without its old manifest
    fetch_lib.keep_missing(config["hub_commits"], HUB_COMMITS)


def base_model_dir(model):
    """Where rules load the initial policy from: a built model's folder, a Hub model's fetched folder, or
    the local folder `hub_id` names."""
    if "build" in config["models"][model]:
        return f"{R}/models/{model}/base"
    return f"{R}/models/{model}/hub" if model in HUB_MODELS else config["models"][model]["hub_id"]


def base_model_input(model):
    """The base model as an input file: built and fetched models are files of this workflow."""
    return [base_model_dir(model)] if "build" in config["models"][model] or model in HUB_MODELS else []


VERL_ENGINE = config["engine"] == "verl"
VLLM_EVAL = config["eval"]["engine"] == "vllm"
# where prompt_stats, probe and transformers generation run (vicurl.runtime.devices.resolve, in the job:
# auto = CUDA when the job has a GPU, else the CPU; config key `device`)
DEVICE = config["device"]


def train_resources():
    """The train rule's resources, all from the config's `verl` section for the run's model (the one
    place: the profile adds only the cluster's partition and GPU type): none for the local engine."""
    if not VERL_ENGINE:
        return {}

    def of(key):
        return lambda wildcards: getattr(runs_lib.verl_settings(config, wildcards.model), key)

    def runtime(wildcards, attempt):
        return runs_lib.train_runtime(config, run_of(wildcards), attempt)

    # nodes: the GPUs per node on each node; without it the SLURM plugin asks for --gpus in total, which
    # SLURM may spread over nodes while Ray sees only the batch host's
    return {
        "nodes": of("nnodes"),
        "gpu": of("n_gpus_per_node"),
        "cpus_per_gpu": of("cpus_per_gpu"),
        "mem_mb": of("mem_mb"),
        "runtime": runtime,
    }


def run_dir(w):
    return f"{R}/runs/{run_of(w).path}"


def work_dir(run_path):
    """A run's undeclared work folder (resume checkpoints; vicurl.engines.workdir)."""
    return f"{R}/runs/{run_path}/_work"


def source_run_input(w):
    """A continued run's source run, trained: its metrics (vicurl.config.runs.source_run)."""
    src = runs_lib.source_run(config, run_of(w))
    return [] if src is None else [f"{R}/runs/{src.path}/metrics.jsonl"]


def start_from(w):
    """Where a continued run starts: its source run, that run's work folder and last step (else None)."""
    src = runs_lib.source_run(config, run_of(w))
    if src is None:
        return None
    return {"run": src.path, "work_dir": work_dir(src.path), "step": runs_lib.total_steps(config, src.study)}


def all_runs():
    return [f"{R}/runs/{r.path}/metrics.jsonl" for r in RUNS]


# A run's evaluations: one folder per evaluated checkpoint (its samples: one file, or one per
# benchmark), and the verdicts and scores of all of them (one grading job per run).
RUN_EVAL_DIR = f"{R}/eval/{RUN}"
GENERATE_PER = config["eval"]["generate_per"]  # how generation jobs are cut (rules/eval.smk)
EVAL_DIR = f"{RUN_EVAL_DIR}/step{{step}}"


def eval_dir(run, step):
    return f"{R}/eval/{run.path}/step{step}"


def checkpoint_benchmarks(w):
    """The benchmarks one checkpoint is evaluated on (generated per checkpoint or run, graded)."""
    return runs_lib.checkpoint_benchmarks(config, w.study, w.model, int(w.seed))


def owned_steps(w):
    """The evaluated steps whose checkpoints are the run's own (a continued run's early ones are its
    source run's; a Base pseudo-run owns step 0)."""
    run = run_of(w)
    return [s for s in runs_lib.evaluated_steps(config, w.study) if runs_lib.checkpoint_owner(config, run, s) == run]


def step_sample_files(w):
    """Per evaluated step of a run, the samples file its grading job reads, as `eval.generate_per`
    cuts them (`vicurl.evaluation.jobs`): the checkpoint's file, or the run's file holding every
    step it owns. A continued run's checkpoints up to its source's last step are the source run's:
    their samples are read from there, never regenerated."""
    out = []
    for step in runs_lib.evaluated_steps(config, w.study):
        owner = runs_lib.checkpoint_owner(config, run_of(w), step)  # a Base pseudo-run owns its own
        if GENERATE_PER == "run":
            out.append(f"{R}/eval/{owner.path}/samples.parquet")
        else:
            out.append(f"{eval_dir(owner, step)}/samples.parquet")
    return out


def eval_samples(w):
    """Every samples file a run's grading job reads, once each (``step_sample_files``)."""
    return list(dict.fromkeys(step_sample_files(w)))


def score_files(evaluations):
    """The runs' score files holding these (study, model, setting, seed, step, benchmark)."""
    return list(
        dict.fromkeys(
            f"{R}/eval/{runs_lib.Run.of(st, m, se, sd).path}/scores.json" for st, m, se, sd, *_ in evaluations
        )
    )


def all_scores(study=None):
    return score_files(runs_lib.evaluations(config, study))


# Finished training outputs are write-protected when `protect_outputs` is on (the paper config):
# a rerun that would delete them stops with Snakemake's "Write-protected output files" error.
def maybe_protected(path):
    return protected(path) if config["protect_outputs"] else path


def run_of(w):
    return runs_lib.Run.from_wildcards(w)


def prompt_stats_input(w):
    """The offline per-prompt statistics, for runs whose curriculum needs them (AdaRFT, SENT)."""
    run = run_of(w)
    if runs_lib.needs_prompt_stats(config, run):
        return [f"{R}/prompt_stats/{w.model}/{config['studies'][w.study]['train_set']}.parquet"]
    return []


def probe_path(run, step):
    return f"{R}/probes/{run.path}/step{step}.json"


def all_probes(study=None, setting=None):
    return [
        probe_path(run, step)
        for run, step in runs_lib.probes(config)
        if (study is None or run.study == study) and (setting is None or run.setting == setting)
    ]


def probed_models(study, setting):
    """The models of a study whose runs of this setting are probed (the variance figure's panels)."""
    found = {run.model for run, _ in runs_lib.probes(config) if run.study == study and run.setting == setting}
    return [m for m in config["studies"][study]["models"] if m in found]


def probe_model_input(w):
    """Step 0 probes the base model; later steps the run's exported checkpoints."""
    return base_model_input(w.model) if int(w.step) == 0 else [f"{run_dir(w)}/checkpoints"]


def probe_model_dir(w):
    return base_model_dir(w.model) if int(w.step) == 0 else f"{run_dir(w)}/checkpoints/step{w.step}"


def eval_model_input(w):
    """Files the evaluated model depends on: the run's checkpoints, or a built base model."""
    if w.setting == runs_lib.BASE:
        return base_model_input(w.model)
    return [f"{run_dir(w)}/checkpoints"]


def eval_model_dir(w):
    return eval_model_dir_at(w, w.step)


def eval_model_dir_at(w, step):
    if w.setting == runs_lib.BASE:
        return base_model_dir(w.model)
    return f"{run_dir(w)}/checkpoints/step{step}"


# Report: the resolved tables (tableconfig.resolve warns about rows without runs) and figure lists.
try:
    TABLES, _table_warnings = tables_lib.resolve(config)
except ValueError as e:
    config_error(e)
for _w in _table_warnings:
    logger.warning(f"config: {_w}")


def base_config():
    """The first of the layered config files alone (checked), or None where there is one file or it is no whole
    config: what the overrides laid over it change is said (`runs_lib.override_effects`)."""
    import yaml

    if len(workflow.configfiles) < 2 and not workflow.config_settings.config:
        return None
    try:
        return checks_lib.read(yaml.safe_load(open(workflow.configfiles[0])))
    except (ValueError, OSError):
        return None


_base = None if REPORT_ONLY else base_config()
for _note in runs_lib.override_effects(_base, config, TABLES) if _base is not None else []:
    logger.warning(f"config: {_note}")
PAPER_TABLES = [n for n, t in TABLES.items() if t["paper"]]
PAPER_NUMBERS = f"{workflow.basedir}/config/paper_numbers.csv"
CAPTIONS = f"{workflow.basedir}/rules/captions"


def table_definition(name, caption=True):
    """A resolved table (``TABLES``); without its caption for the jobs that do not print it."""
    return TABLES[name] if caption else {**TABLES[name], "caption": ""}


# A report job's settings as a file among its inputs (`settings_file`), rewritten when the DAG is built and the
# settings differ from the file's: a changed caption, style or report.version makes it newer than the job's
# outputs, which reruns exactly the report jobs it touches, with or without Snakemake's records of each job's
# params (a copied results folder has no .snakemake/). These files are made by no rule, since Snakemake would not make a
# missing input of a job whose outputs look up to date.
SETTINGS_DIR = f"{R}/report/.settings"


def settings_text(rule_name, wildcards):
    """The params a report rule's job takes, as canonical JSON (each params function called on the wildcards)."""
    import json

    values = {k: (v(wildcards) if callable(v) else v) for k, v in workflow.get_rule(rule_name).params.items()}
    return json.dumps({"rule": rule_name, "params": values}, sort_keys=True, default=str) + "\n"


def settings_file(rule_name):
    """The input function of a report rule's settings file, ``<rule>/<wildcard>=<value>/....json``: rewritten
    where its settings changed. A dry run leaves the results as they are: a changed file goes to a temp folder
    instead, new, so that the dry run shows the job."""
    from vicurl.runtime.io import write_text

    def path(w):
        text = settings_text(rule_name, w)
        out = os.path.join(SETTINGS_DIR, rule_name, *(f"{k}={v}" for k, v in w.items())) + ".json"
        if os.path.exists(out) and open(out).read() == text:
            return out
        if workflow.dryrun:
            out = os.path.join(dry_run_folder(), os.path.relpath(out, SETTINGS_DIR))
        write_text(out, text)
        return out

    return path


_dry_run = []


def dry_run_folder():
    """A temp folder of this process for a dry run's changed settings files, removed at its exit."""
    if not _dry_run:
        import atexit
        import shutil
        import tempfile

        _dry_run.append(tempfile.mkdtemp(prefix="vicurl-settings-"))
        atexit.register(shutil.rmtree, _dry_run[0], True)
    return _dry_run[0]


def table_outputs(name):
    """The files of one table: the LaTeX, its cells, and the comparison with the paper if any."""
    out = [f"{R}/report/tables/{name}.tex", f"{R}/report/tables/{name}.cells.csv"]
    if TABLES[name]["paper"]:
        out += [f"{R}/report/tables/{name}.vs_paper.tex", f"{R}/report/tables/{name}.vs_paper.csv"]
    return out


def table_score_inputs(name):
    """The score files a table reads (runs_lib.table_evaluations): a table builds only what it shows."""
    return score_files(runs_lib.table_evaluations(config, TABLES[name]))


def _studies(study):
    return {s: st for s, st in config["studies"].items() if study is None or s == study}


def curve_figures(study=None):
    """One learning-curves grid per study and model, where the study trains a curriculum of report.curve_curricula."""
    wanted = set(config["report"]["curve_curricula"])
    return [
        f"{R}/report/figures/learning_curves/{s}/{m}.png"
        for s, st in _studies(study).items()
        for m in st["models"]
        if wanted & {c for curs in st["settings"].values() for c in curs}
    ]


FINDINGS = config.get("findings")  # the findings table's settings, or None (no table)
STUDY_FINDINGS = bool(FINDINGS and FINDINGS.get("study"))  # one study against its model, else a claims file's


def _read_claims():
    """The claims file's (or pre-registration's) claims the config trains, and the pre-registration's header."""
    if not FINDINGS or STUDY_FINDINGS:
        return [], {}
    path = FINDINGS["claims"]
    if not os.path.isabs(path) and not os.path.exists(path):
        path = os.path.join(workflow.basedir, path)  # config/claims.yaml of this checkout
    try:
        return claimed_lib.read_claims(path, {(r.study, r.model, r.setting) for r in RUNS})
    except ValueError as e:
        config_error(e)


CLAIMS, PREREGISTRATION = _read_claims()


def findings_runs():
    """The runs the findings table compares (with their training metrics): a study's findings."""
    if not STUDY_FINDINGS:
        return []
    return [r for r in runs_lib.runs(config, FINDINGS["study"]) if r.model == FINDINGS["model"]]


def findings_base():
    """The Base evaluations of the findings study's seeds: its misleading majorities."""
    if not STUDY_FINDINGS:
        return []
    return [
        runs_lib.Run.of(runs_lib.BASE, FINDINGS["model"], runs_lib.BASE, s)
        for s in config["studies"][FINDINGS["study"]]["seeds"]
    ]


def findings_probes():
    """The probes behind the findings' variance rows: a study's, the oracle VI-CuRL runs' of the findings model;
    a claims file's, those of the arms its variance claims compare."""
    if not FINDINGS:
        return []
    if STUDY_FINDINGS:
        keep = lambda run: run.model == FINDINGS["model"] and run.reward == "oracle" and run.curriculum == "vicurl"
    else:
        arms = claimed_lib.probed_arms(CLAIMS)
        keep = lambda run: (run.study, run.model, run.setting) in arms
    return [f"{R}/probes/{run.path}/step{step}.json" for run, step in runs_lib.probes(config) if keep(run)]


def findings_scores():
    """The scores files a claims file's findings read: those of the studies its claims name."""
    return [f"{R}/report/scores/{s}.csv" for s in claimed_lib.studies_of(CLAIMS)]


def claim_departures():
    """A claims file's findings: the settings of each compared run that differ from the paper's same run, the
    plan's departures, and whether the config is the one pre-registered."""
    import vicurl.report.findings as findings_lib

    paper = paper_config()
    lines = list(PREREGISTRATION.get("departures", []))
    seen = set()
    for c in CLAIMS:
        for arm in (c["a"], c["b"]):
            if arm is None or arm["study"] == "base":
                continue
            key = (arm["study"], arm["model"], arm["paper_study"] if "paper_study" in arm else arm["study"])
            if key in seen or key[2] not in paper["studies"] or arm["model"] not in paper["models"]:
                continue
            seen.add(key)
            ours, theirs = (
                findings_settings(cfg, study, arm["model"], arm["setting"])
                for cfg, study in ((config, key[0]), (paper, key[2]))
            )
            lines += [f"{key[0]}/{key[1]}: {d}" for d in findings_lib.departures(ours, theirs)]
    hashed = claimed_lib.config_hash_line(PREREGISTRATION, workflow.configfiles)
    return list(dict.fromkeys(lines)) + ([hashed] if hashed else [])


def paper_config():
    """config/paper.yaml with its defaults: the findings' departures compare against it."""
    import yaml

    with open(f"{workflow.basedir}/config/paper.yaml") as f:
        paper = yaml.safe_load(f)
    return checks_lib.read(paper, f"{workflow.basedir}/config/schema.yaml")


def findings_settings(cfg, study, model, setting="oracle-vicurl"):
    """The settings of a run of ``study``, ``model`` and ``setting`` (default oracle VI-CuRL) in ``cfg`` that the
    findings' departures compare, with the model's label and the training set."""
    from vicurl.config.settings import TrainSettings

    reward, curriculum = runs_lib.split_setting(setting)
    settings = TrainSettings.from_dict(runs_lib.train_settings(cfg, runs_lib.Run(study, model, reward, curriculum, 0)))
    return {
        **dataclasses.asdict(settings),
        "model": cfg["models"][model].get("label", model),
        "train_set": cfg["studies"][study]["train_set"],
    }  # with the settings' defaults


def curve_runs(study, model):
    """The runs a learning-curves figure draws: the study's runs of this model and of report.curve_curricula."""
    wanted = set(config["report"]["curve_curricula"])
    return [r for r in runs_lib.runs(config, study) if r.model == model and r.curriculum in wanted]


def variance_figures(study=None):
    """The variance figures of every probed (study, setting)."""
    settings = sorted(
        {(run.study, run.setting) for run, _ in runs_lib.probes(config) if study is None or run.study == study}
    )
    return [
        f"{R}/report/figures/variance/{s}/{setting}_{kind}.png"
        for s, setting in settings
        for kind in ("ratio", "absolute")
    ]


def schedule_figures(study=None):
    """The beta_t / tau_t schedule of every setting whose curriculum is in report.schedule_curricula."""
    wanted = config["report"]["schedule_curricula"]
    return [
        f"{R}/report/figures/schedule/{s}/{m}/{runs_lib.setting_of(r, c)}.png"
        for s, st in _studies(study).items()
        for m in st["models"]
        for r, curs in st["settings"].items()
        for c in curs
        if c in wanted
    ]


def study_outputs(study):
    """Target study_{name}: the study's runs (and their provenance), evaluations (with the Base
    evaluations of its models, seeds and benchmarks), probes, figures, and the tables whose
    `study` it is. A table row that reads another study (e.g. the ablation tables' rows from
    `main`) pulls in only the runs that row shows."""
    runs = runs_lib.runs(config, study)
    return (
        [f"{R}/runs/{r.path}/metrics.jsonl" for r in runs]
        + [f"{R}/runs/{r.path}/provenance.json" for r in runs]
        + all_scores(study)
        + all_probes(study)
        + curve_figures(study)
        + schedule_figures(study)
        + variance_figures(study)
        + [p for name, t in TABLES.items() if t["study"] == study for p in table_outputs(name)]
    )


def report_outputs():
    """Every report file: the tables, the figures, the probes' table, the scores across seeds, the findings."""
    return (
        [p for name in TABLES for p in table_outputs(name)]
        + curve_figures()
        + schedule_figures()
        + variance_figures()
        + ([f"{R}/report/probes.csv"] if runs_lib.probes(config) else [])
        + [f"{R}/report/scores_across_seeds.csv"]
        + ([f"{R}/report/findings.md"] if FINDINGS else [])
    )


def figure_results(study=None):
    """The results the figures read: the studies' scores and training metrics, the probes."""
    curves = [s for s in _studies(study) if curve_figures(s)]
    return (
        [f for s in curves for f in all_scores(s)]
        + [
            f"{R}/runs/{r.path}/metrics.jsonl"
            for s in curves
            for m in config["studies"][s]["models"]
            for r in curve_runs(s, m)
        ]
        + [f"{R}/runs/{r.path}/metrics.jsonl" for r in RUNS if r.curriculum in config["report"]["schedule_curricula"]]
        + [p for s in _studies(study) for p in all_probes(s) if variance_figures(s)]
    )


def table_results(name):
    """The results a table needs: none where its scores file is there already (copied, or made from other numbers)."""
    return [] if os.path.exists(f"{R}/report/tables/{name}.scores.csv") else table_score_inputs(name)


def report_results(target):
    """The results (files the report rules read and do not make) a report target needs."""
    if target == "tables":
        return [f for name in TABLES for f in table_results(name)]
    if target.startswith("table_") and target[len("table_") :] in TABLES:
        return table_results(target[len("table_") :])
    if target == "figures":
        return figure_results()
    if target == "report":
        findings = (
            findings_probes()
            + [f"{R}/runs/{r.path}/metrics.jsonl" for r in findings_runs()]
            + [f"{R}/eval/{r.path}/graded.parquet" for r in findings_base()]
            + ([dataset_path(b) for b in config["studies"][FINDINGS["study"]]["benchmarks"]] if STUDY_FINDINGS else [])
        )
        return all_scores() + figure_results() + all_probes() + findings
    return []  # a report file by its path: Snakemake names what it lacks


def check_targets():
    """Called once all rules are defined. An unknown target is named with the targets there are, and a report
    target whose results are missing names them (in one line) instead of planning their jobs."""
    targets = ["all", "data", "models", "train_all", "eval_all", "probes", *targets_lib.REPORT_TARGETS]
    targets += [f"study_{s}" for s in STUDIES] + [f"table_{t}" for t in TABLES]
    rules = [r.name for r in workflow.rules if not r.has_wildcards()]
    unknown = targets_lib.unknown_target([t for t in TARGETS or [] if t not in rules], targets)
    if unknown:
        fail(unknown)
    if not REPORT_ONLY:
        return
    missing = list(dict.fromkeys(f for t in TARGETS for f in report_results(t) if not os.path.exists(f)))
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        fail(
            f"{' '.join(TARGETS)} reads results only, and {len(missing)} are missing: {shown} "
            f"(`snakemake all`, or a study's target `study_<name>`, makes them)"
        )
