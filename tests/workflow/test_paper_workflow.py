"""The paper's DAG: the SLURM profile plans the whole study with per-rule job counts that follow
from config/paper.yaml (formulas below, also in docs/paper.md); each study target
plans only its own jobs; a grader version bump regrades without regenerating."""

import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from harness import DEMO_CONFIG, PAPER_CONFIG, PROFILE, REPO, SMOKE_CONFIG, job_counts, link_demo_config, snakemake

PAPER = yaml.safe_load(PAPER_CONFIG.read_text())


def jobs_with_wildcards(text: str) -> list[tuple[str, dict]]:
    out = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", text, re.M):
        w = re.search(r"^    wildcards: (.*)$", m.group(2), re.M)
        out.append((m.group(1), dict(kv.split("=", 1) for kv in w.group(1).split(", ")) if w else {}))
    return out


# ---------------------------------------------------------------- the formulas, from the config alone

def _train(cfg, s):
    return {**cfg["train"], **cfg["studies"][s].get("train", {})}


def eval_steps(cfg, s):
    st, t = cfg["studies"][s], _train(cfg, s)["total_steps"]
    every = st.get("eval_every", cfg["eval"]["every"])
    return set(range(every, t + 1, every)) | set(st.get("eval_steps", [])) | {t}


def settings(st):
    return [(r, c) for r, cs in st["settings"].items() for c in cs]


def n_runs(st):
    return len(st["models"]) * len(settings(st)) * len(st["seeds"])


def generated_steps(cfg, s):
    """Per run of study s, the number of checkpoints it generates: its evaluated steps, those up to
    the source's last step excepted for a run continuing one of the source study's (they are the
    source run's, generated once)."""
    st = cfg["studies"][s]
    out = []
    for m in st["models"]:
        for r, c in settings(st):
            for seed in st["seeds"]:
                steps = eval_steps(cfg, s)
                src = cfg["studies"].get(st.get("continues"))
                if src and m in src["models"] and c in src["settings"].get(r, []) and seed in src["seeds"]:
                    steps = {x for x in steps if x > _train(cfg, st["continues"])["total_steps"]}
                out.append(len(steps))
    return out


def expected_jobs(cfg) -> dict[str, int]:
    """Jobs per rule: one generation job per checkpoint (`eval.generate_per: checkpoint`, the default);
    one grading job per run."""
    S = cfg["studies"]
    base = {(m, seed, b) for st in S.values() for m in st["models"] for seed in st["seeds"] for b in st["benchmarks"]}
    p = cfg["probes"]
    probed = [(s, m, r, c, seed) for s, st in S.items() if s in p["studies"] for m in st["models"] if m in p["models"]
              for r, c in settings(st) if r in p["rewards"] and c in p["curricula"] for seed in st["seeds"] if seed in p["seeds"]]
    curve = [s for s, st in S.items() if {"none", "vicurl"} & {c for _, c in settings(st)}]
    # per run, its evaluated steps; plus the Base model once per (model, seed)
    checkpoints = sum(sum(generated_steps(cfg, s)) for s in S) + len({(m, seed) for m, seed, _ in base})
    return {
        "generate_checkpoint": checkpoints,
        "prepare_dataset": len(cfg["datasets"]),
        "fetch_model": sum("hub_id" in m for m in cfg["models"].values()),
        "prompt_stats": len({(m, st["train_set"]) for st in S.values() for m in st["models"]
                             if {"sent", "adarft"} & {c for _, c in settings(st)}}),
        "train": sum(n_runs(st) for st in S.values()),
        "grade": sum(n_runs(st) for st in S.values()) + len({(m, seed) for m, seed, _ in base}),  # per run, Base too
        "probe": sum(len(range(0, _train(cfg, s)["total_steps"], p["every"])) for s, *_ in probed),
        "probes_table": 1,
        "variance_figures": len({(s, r, c) for s, _, r, c, _ in probed}),
        "study_scores": len(curve),
        "learning_curves": sum(len(S[s]["models"]) for s in curve),
        "schedule_figure": sum(len(st["models"]) * sum(c == "vicurl" for _, c in settings(st)) for st in S.values()),
        "table_scores": len(cfg["tables"]), "table": len(cfg["tables"]),
        "table_vs_paper": sum("paper" in t for t in cfg["tables"].values()),
        "aggregate": 1, "all": 1,
    }


def test_the_paper_formulas_give_the_readme_numbers():
    e = expected_jobs(PAPER)  # docs/paper.md
    assert e["train"] == 295 and e["generate_checkpoint"] == 2005 and e["grade"] == 315 and e["probe"] == 26
    assert sum(e.values()) == 2724


# ---------------------------------------------------------------- the profile

def test_profile_shape():
    p = PROFILE
    assert p["executor"] == "slurm" and p["retries"] >= 1 and p["rerun-incomplete"] is True
    assert p["configfile"] == "config/paper.yaml" and "replace-workflow-config" not in p
    assert "software-deployment-method" not in p  # the plan and the jobs need no conda (--sdm conda adds it)
    assert {"slurm_account", "slurm_partition", "runtime", "mem_mb"} <= set(p["default-resources"])
    r = p["set-resources"]
    # the train rule's sizes come from the config alone (one place); the profile names the cluster's
    assert set(r["train"]) == {"slurm_partition", "gpu_model"}
    assert r["generate_checkpoint"]["gpu"] == 1 and "generate" not in r and r["probe"]["gpu"] == 1
    assert all("tasks" not in v for v in r.values())  # single-process GPU jobs
    from types import SimpleNamespace

    for model, minutes in (("qwen_math_1.5b", 480), ("llama_3b_instruct", 1440)):  # grows with attempt
        for attempt in (1, 3):
            ns = {"attempt": attempt, "wildcards": SimpleNamespace(model=model)}
            assert eval(str(r["generate_checkpoint"]["runtime"]), ns) == attempt * minutes
    assert "groups" not in p  # every job is a SLURM job of its own
    assert "slurm_partition" not in r["grade"] and "gpu" not in r["grade"]  # a CPU job: the default partition


def planned_resources(text: str, rule: str, study: str | None = None) -> list[dict[str, str]]:
    """The ``resources:`` line of every planned job of ``rule`` (of ``study``) in a dry run's output."""
    out = []
    for m in re.finditer(r"^(?:local)?rule (\w+):\n((?:    .*\n)+)", text, re.M):
        res = re.search(r"^    resources: (.*)$", m.group(2), re.M)
        if m.group(1) == rule and res and (study is None or f"study={study}," in m.group(2)):
            out.append(dict(kv.split("=", 1) for kv in res.group(1).split(", ")))
    return out


@pytest.mark.parametrize("study, model, setting, runtime", [
    ("main", "qwen_math_1.5b", "entropy-vicurl", 1440), ("main", "qwen_math_7b", "entropy-vicurl", 2880),
    ("mechanism", "qwen_math_1.5b", "entropy-vicurl", 1440),  # main's run continued: 313 steps of its own
    ("mechanism", "qwen_math_1.5b", "entropy-soft_confidence", 2880)])  # 626 steps
def test_train_jobs_get_the_configs_resources_through_the_profile_without_conda(tmp_path, study, model, setting, runtime):
    """`snakemake --profile slurm-a100 -n <a run>` where no conda is installed: the train job's GPUs,
    CPUs, memory and runtime are the config's `verl` section (the runtime per 313 steps trained), the
    partition the profile's."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    link_demo_config(tmp_path)
    target = f"results/paper/runs/{study}/{model}/{setting}/seed0/metrics.jsonl"
    env = {**os.environ, "PATH": os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                                 if not (Path(p) / "conda").exists())}
    out = snakemake(tmp_path, "--profile", "slurm-a100", "-n", target, cwd=REPO, timeout=600, env=env)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    (res,) = planned_resources(out.stdout, "train", study)  # (a continued run's plan has its source run's job too)
    v = PAPER["verl"]
    assert res["gpu"] == str(v["n_gpus_per_node"]) and res["cpus_per_gpu"] == str(v["cpus_per_gpu"])
    assert res["mem_mb"] == str(v["mem_mb"]) and res["runtime"] == str(runtime)
    assert res["slurm_partition"] == "YOUR_GPU_PARTITION" and res["gpu_model"] == "a100"


@pytest.mark.slow
def test_profile_plans_the_full_study(tmp_path):
    """`snakemake --profile slurm-a100 -n all` (the slurm executor plugin installed; no cluster needed)."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    link_demo_config(tmp_path)
    # the repo's profile, found by name from the repo root; no conda needed
    out = snakemake(tmp_path, "--profile", "slurm-a100", "-n", "all", "--quiet", "rules", cwd=REPO, timeout=1200)
    assert re.search(r"Using profiles? slurm-a100\b", out.stdout + out.stderr)  # beside the workflow profile
    assert out.returncode == 0, out.stderr[-3000:]
    assert job_counts(out.stdout) == expected_jobs(PAPER)


# ---------------------------------------------------------------- study targets

def borrowed_rows(cfg, study):
    """(study, model, setting) rows of this study's tables that another study trains, and the
    source runs of a continuing study (the mechanism study: main's runs it continues)."""
    st = cfg["studies"][study]
    src = cfg["studies"].get(st.get("continues"))
    out = {(st["continues"], m, f"{r}-{c}") for m in st["models"] for r, c in settings(st)
           if src and m in src["models"] and c in src["settings"].get(r, [])}
    for t in cfg["tables"].values():
        if t.get("study") != study:
            continue
        for row in t.get("rows", []):
            s = row.get("study", study)
            if s != study:
                out.add((s, t["model"], f"{row['reward']}-{row['curriculum']}"))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("study", list(PAPER["studies"]))
def test_each_study_target_plans_only_its_own_jobs(tmp_path, study):
    """The paper config with one seed per study (the counts scale with the seeds; a smaller plan)."""
    link_demo_config(tmp_path)
    one_seed = tmp_path / "one_seed.yaml"
    one_seed.write_text(yaml.safe_dump({"studies": {s: {"seeds": [0]} for s in PAPER["studies"]}, "probes": {"seeds": [0]}}))
    out = snakemake(tmp_path, "-n", f"study_{study}", configs=[PAPER_CONFIG, one_seed], timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    st = {**PAPER["studies"][study], "seeds": [0]}
    borrowed = borrowed_rows(PAPER, study)
    jobs = jobs_with_wildcards(out.stdout)
    for rule, w in jobs:  # every job of a study, model or setting is this study's (or a row its tables borrow)
        if "study" in w and w["study"] not in (study, "base"):
            assert (w["study"], w["model"], w["setting"]) in borrowed, (rule, w)
        if "model" in w:
            assert w["model"] in st["models"], (rule, w)
    trained = {(w["study"], w["model"], w["setting"]) for r, w in jobs if r == "train"}
    own = {(study, m, f"{r}-{c}") for m in st["models"] for r, c in settings(st)}
    assert trained == own | borrowed
    counts = job_counts(out.stdout)
    own_checkpoints = sum(generated_steps({**PAPER, "studies": {**PAPER["studies"], study: st}}, study))
    assert sum(1 for r, w in jobs if r == "generate_checkpoint" and w["study"] == study) == own_checkpoints
    assert sum(1 for r, w in jobs if r == "grade" and w["study"] == study) == n_runs(st)
    assert counts["train"] == n_runs(st) + len(borrowed)
    assert f"study_{study}" in counts and "all" not in counts and "aggregate" not in counts
    tables = [n for n, t in PAPER["tables"].items() if t.get("study") == study]
    assert counts.get("table", 0) == len(tables)


# ---------------------------------------------------------------- grader version

@pytest.mark.slow
def test_grader_version_bump_regrades_without_regenerating(tmp_path):
    smoke = [DEMO_CONFIG, SMOKE_CONFIG]
    target = "results/smoke/eval/base/tiny/base/seed0/scores.json"

    built = snakemake(tmp_path, "--cores", "1", target, configs=smoke)
    assert built.returncode == 0, built.stderr[-3000:]
    again = snakemake(tmp_path, "-n", target, configs=smoke)
    assert "Nothing to be done" in again.stdout + again.stderr
    bump = tmp_path / "grader_v3.yaml"
    bump.write_text("grading: {version: 3}\n")
    plan = snakemake(tmp_path, "-n", target, configs=[*smoke, bump])
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert job_counts(plan.stdout) == {"grade": 1}, plan.stdout[-3000:]  # no generate job
    assert "Params have changed" in plan.stdout


def test_a_training_job_asks_slurm_for_its_gpus_on_one_node(tmp_path):
    """The train rule's resources, as the profile plans them, through the SLURM plugin's own submit
    line: every GPU on one node (--nodes=1 --gpus=a100:8). Without `nodes` the plugin's --gpus is a
    total that SLURM may spread over nodes, and verl's Ray would see only the batch host's GPUs."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    from types import SimpleNamespace

    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    from vicurl.config.runs import runs

    link_demo_config(tmp_path)
    target = f"results/paper/runs/{runs(PAPER)[0].path}/metrics.jsonl"
    out = snakemake(tmp_path, "--profile", "slurm-a100", "-n", target, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    block = re.search(r"^rule train:\n((?:    .*\n)+)", out.stdout, re.M).group(1)
    line = re.search(r"^    resources: (.*)$", block, re.M).group(1)
    values = {}
    for kv in line.split(", "):
        k, v = kv.split("=", 1)
        values[k] = int(v) if v.isdigit() else v

    class Resources(dict):
        __getattr__ = dict.get

    job = SimpleNamespace(resources=Resources(values), threads=1, is_group=lambda: False)
    params = {"run_uuid": "u", "slurm_logfile": "log", "comment_str": "c", "account": "", "partition": "",
              "workdir": str(tmp_path)}
    submit = get_submit_command(job, params) + set_gres_string(job)
    assert " --nodes=1" in submit and " --gpus=a100:8" in submit, submit
    assert f" --cpus-per-gpu={PAPER['verl']['cpus_per_gpu']}" in submit and f" --mem {PAPER['verl']['mem_mb']}" in submit


def test_a_placeholder_in_the_profile_stops_a_real_run_before_its_first_job(tmp_path):
    """The profile as it comes (YOUR_SLURM_ACCOUNT, ...): its dry run plans, and a real run stops before its first
    job (the models' downloads would run on the submit host, then sbatch refuse every job), naming file and key."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    shutil.copytree(REPO / "slurm-a100", tmp_path / "slurm-a100")
    plan = snakemake(tmp_path, "--profile", "slurm-a100", "-n", "models", configs=[DEMO_CONFIG], cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr[-3000:]
    out = snakemake(tmp_path, "--profile", "slurm-a100", "models", configs=[DEMO_CONFIG], cwd=tmp_path)
    assert out.returncode != 0
    errors = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("Error")]
    assert errors == ["Error: slurm-a100/config.yaml: default-resources.slurm_account is YOUR_SLURM_ACCOUNT, a "
                      "placeholder: fill in your cluster's value (docs/slurm.md); nothing has run"], out.stderr[-3000:]
    assert not (tmp_path / "results").exists()


def test_an_override_that_changes_what_other_studies_read_says_so(tmp_path):
    """Cutting `main` to one seed: the mechanism study's runs of the other seeds train from step 0 instead of
    continuing main's, and two tables read main's runs in rows of their own; the dry run says so."""
    cut = tmp_path / "cut.yaml"
    cut.write_text("studies: {main: {seeds: [0]}}\n")
    out = snakemake(tmp_path, "-n", "study_mechanism", "--quiet", "rules", configs=[PAPER_CONFIG, cut], timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    [note] = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("config: studies.main")]
    assert "the overrides change its runs (200 -> 40)" in note and "8 of study mechanism's runs" in note, note
    assert "table(s) curriculum_ablation, long_output read its runs" in note
    plain = snakemake(tmp_path, "-n", "study_mechanism", "--quiet", "rules", configs=[PAPER_CONFIG], timeout=600)
    assert "config: studies." not in plain.stdout + plain.stderr
