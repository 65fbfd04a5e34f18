"""The Snakemake workflow: config validation, lint, and a small end-to-end run of the DAG."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vicurl import status

from harness import (
    DEMO_CONFIG,
    PAPER_CONFIG,
    REPO,
    SMOKE_CONFIG,
    job_counts,
    snakemake,
    snakemake_cmd,
    tensorboard_scalars,
)


def write_config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "override.yaml"
    p.write_text(text)
    return p


def test_demo_config_plans(tmp_path):
    out = snakemake(tmp_path, "-n", "--quiet", "rules", configs=[DEMO_CONFIG])
    assert out.returncode == 0, out.stderr
    for rule in ("synthetic_data", "build_tiny_model", "train", "generate_run", "grade", "aggregate", "table",
                 "learning_curves", "schedule_figure", "findings"):
        assert rule in out.stdout


@pytest.mark.parametrize(
    "override, named",
    [
        ("trian: {lr: 1.0}\n", "trian"),  # top-level typo
        ("train: {learning_rate: 1.0}\n", "learning_rate"),  # nested typo
        ("eval: {n_sample: 4}\n", "n_sample"),
        ("curricula: {vicurl: {beta_strat: 0.3}}\n", "beta_strat"),
        ("rewards: {entropy: {format_penalti: true}}\n", "format_penalti"),
        ("studies: {main: {benchmarks: [arith_hardd]}}\n", "arith_hardd"),  # a dangling reference
        ("tables: {main_results: {style: {digts: 2}}}\n", "digts"),
        ("tables: {main_results: {models: [tinyy]}}\n", "tables.main_results.models"),
        ("report: {band: iqr}\n", "iqr"),
        ("findings: {study: mian, model: tiny}\n", "findings.study: study 'mian'"),
        ("findings: {study: rewards, model: tiny, metric: pass@4}\n", "findings.metric"),
        ("eval: {ks: [1, 16]}\n", "eval.ks: Pass@16 needs at least 16 samples per problem, eval.n_samples is 8"),
        ("studies: {rewards: {eval: {n_samples: 4}}}\n", "studies.rewards.eval.n_samples is 4"),
        ("models: {tiny: {build: {arch: {hiden_size: 8}}}}\n", "models.tiny.build.arch"),  # not written into the model
        ("models: {tiny: {build: {sft: {stepz: 1}}}}\n", "models.tiny.build.sft"),  # not a TypeError when building
        ("loggers: [tensorboard, mlflow]\n", "mlflow"),  # an unknown tracker, at parse time
    ],
)
def test_config_typo_fails_with_the_key_named(tmp_path, override, named):
    out = snakemake(tmp_path, "-n", configs=[DEMO_CONFIG, write_config(tmp_path, override)])
    assert out.returncode != 0
    assert named in out.stderr + out.stdout
    assert len((out.stderr + out.stdout).splitlines()) < 15  # the error, not the schema


def error_lines(out) -> list[str]:
    return [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("Error")]


@pytest.mark.parametrize("override, line", [
    # the file of the layered configs that set the key, and the nearest valid name
    ("studis: {}\n", "override.yaml: studis: not a key of the config (did you mean 'studies'?)"),
    ("studies: {main: {benchmarks: [arith_hardd]}}\n",
     "override.yaml: studies.main.benchmarks: dataset 'arith_hardd' is not defined under `datasets` (did you mean "
     "'arith_hard'?)"),
    ("studies: {curricula: {settings: {oracle: [length_frist]}}}\n",
     "override.yaml: studies.curricula.settings.oracle: curriculum 'length_frist' is not defined under `curricula` "
     "(did you mean 'length_first'?)"),
    ("studies: {main: {seeds: [0, 0]}}\n", "override.yaml: studies.main.seeds: seed 0 is listed 2 times"),
    ("datasets: {mine: {source: math500, local_path: nowhere/mine.jsonl}}\n",
     "override.yaml: datasets.mine.local_path: nowhere/mine.jsonl does not exist"),
    ("train: {lr: one}\n", "override.yaml: train.lr: 'one' is not of type 'number'"),
])
def test_a_config_error_is_one_line_naming_the_file_and_key(tmp_path, override, line):
    out = snakemake(tmp_path, "-n", configs=[DEMO_CONFIG, write_config(tmp_path, override)])
    assert out.returncode != 0
    [error] = error_lines(out)
    assert line in error, error
    assert "Traceback" not in out.stderr and 'File "' not in out.stderr, out.stderr[-2000:]


def test_the_values_a_schema_types_are_read_as_such(tmp_path):
    """YAML 1.1 reads `1e-6` (no dot) as a string, and Snakemake's --config gives nested values as strings: both
    are read by the schema's types."""
    out = snakemake(tmp_path, "-n", "--config", "studies={main: {seeds: [0, 1]}}", "train={lr: 1e-6}",
                    configs=[DEMO_CONFIG, write_config(tmp_path, "train: {lr: 1e-6, grad_clip: 1e0}\n")])
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


def test_an_unknown_target_names_the_targets_and_a_bad_row_is_said_once(tmp_path):
    out = snakemake(tmp_path, "-n", "study_ablation", configs=[DEMO_CONFIG])
    [error] = error_lines(out)
    assert error.startswith("Error: unknown target 'study_ablation': did you mean 'study_main'?") and "tables" in error
    (tmp_path / "mine.jsonl").write_text('{"problem": "1 + 1?", "answer": "2"}\n{"problem": "broken"}\n')
    bad = write_config(tmp_path, "datasets: {mine: {source: math500, local_path: mine.jsonl}}\n")
    out = snakemake(tmp_path, "--cores", "1", "results/demo/data/mine.parquet", configs=[DEMO_CONFIG, bad])
    assert out.returncode != 0
    said = "mine row 1 (mine.jsonl line 2): missing field 'answer'"
    assert (out.stdout + out.stderr).count(said) == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]


def test_tables_without_results_refuse_and_name_what_is_missing(tmp_path):
    """A report target on a results folder without runs plans nothing upstream: one line names the results it
    lacks (the paper's config: its tables' 2,000-odd jobs would be planned otherwise)."""
    for configs, target in (([DEMO_CONFIG], "tables"), ([PAPER_CONFIG], "tables"), ([DEMO_CONFIG], "figures"),
                            ([DEMO_CONFIG], "table_main_results"), ([DEMO_CONFIG], "report")):
        out = snakemake(tmp_path, "-n", target, configs=configs, timeout=300)
        assert out.returncode != 0
        errors = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("Error")]
        assert len(errors) == 1 and f"{target} reads results only, and" in errors[0], out.stderr[-2000:]
        assert "scores.json" in errors[0] and "rule train" not in out.stdout


def test_lint_is_clean(tmp_path):
    out = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Lints for" not in out.stdout + out.stderr


def paper_scores(path: Path, table: str) -> None:
    """A scores.csv with 2 seeds per cell whose mean and std are the paper's numbers of one table."""
    from vicurl.report.paper import load_paper_numbers

    n = load_paper_numbers(REPO / "config" / "paper_numbers.csv")
    n = n[(n["table"] == table) & (n["benchmark"] != "average")]
    recs = [dict(study="base" if r.reward == "base" else "main", model=r.model, reward=r.reward, curriculum=r.curriculum,
                 seed=seed, step=0 if r.reward == "base" else 313, benchmark=r.benchmark,
                 **{r.metric: r.mean + sign * r.std / 2 ** 0.5})
            for r in n.itertuples() for seed, sign in ((0, -1), (1, 1))]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(recs).to_csv(path, index=False)


def test_paper_table_from_premade_scores_and_report(tmp_path):
    """The paper config's table rules on a ready per-table scores file (the paper's numbers as two seeds
    per cell): the table, its comparison with the paper (the Average column recomputed per seed agrees
    with the paper's to rounding), and the HTML report. --allowed-rules keeps the rest of the DAG out."""
    paper_scores(tmp_path / "results" / "paper" / "report" / "tables" / "main_results_part1.scores.csv", "main_results_part1")
    allowed = ["--allowed-rules", "table", "table_vs_paper", "table_main_results_part1"]
    out = snakemake(tmp_path, *allowed, "--cores", "1", "table_main_results_part1", configs=[PAPER_CONFIG], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    tables = tmp_path / "results" / "paper" / "report" / "tables"
    tex = (tables / "main_results_part1.tex").read_text()
    assert "\\rowcolor{blue!10} VI-CuRL & \\textbf{15.9 $\\pm$ 1.2} & 8.3 $\\pm$ 0.9" in tex
    diff = pd.read_csv(tables / "main_results_part1.vs_paper.csv")
    assert len(diff) == 2 * 11 * 7 and diff["diff"].abs().max() < 0.051
    assert "$\\Delta$" in (tables / "main_results_part1.vs_paper.tex").read_text()
    rep = snakemake(tmp_path, *allowed, "--report", str(tmp_path / "report.html"), "table_main_results_part1",
                    configs=[PAPER_CONFIG], timeout=300)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "main_results_part1.vs_paper.csv" in (tmp_path / "report.html").read_text()


def test_paper_config_plans_every_paper_table(tmp_path):
    """A paper table's target reads results only: on a fresh folder it names, in one line, the evaluations the
    tables show and plans nothing (the runs they need are `study_<name>`'s or `all`'s to make)."""
    out = snakemake(tmp_path, "-n", "table_mechanism", "table_long_output", configs=[PAPER_CONFIG], timeout=300)
    assert out.returncode == 1 and "is not defined under `studies`" not in out.stderr + out.stdout
    error = [line for line in out.stderr.splitlines() if line.startswith("Error:")]
    # the mechanism study's 4 x 5 runs, the long-output study's 2 x 5 and the 2 x 5 main-study runs of its
    # 3072-token rows: one scores file each (the main-study runs the mechanism continues are not shown)
    assert len(error) == 1 and "reads results only, and 40 are missing" in error[0], out.stderr[-3000:]
    assert "results/paper/eval/mechanism/qwen_math_1.5b/" in error[0] and "rule train" not in out.stdout


@pytest.mark.slow
def test_small_dag_end_to_end(tmp_path):
    smoke = [DEMO_CONFIG, SMOKE_CONFIG]
    out = snakemake(tmp_path, "--cores", "2", "all", configs=smoke)
    assert out.returncode == 0, out.stderr[-5000:]
    res = tmp_path / "results" / "smoke"
    # a target's plan (vicurl.planning.target) reads the jobs Snakemake prints: every job it ran, once (the local
    # executor prints each as a local rule; which rules a cluster leaves local, tests/workflow/test_status.py)
    import re
    from collections import Counter

    from vicurl.planning.target import parse_dry_run

    ran = Counter(re.findall(r"^(?:local)?rule (\w+):", out.stdout + out.stderr, re.M))
    assert ran and ran == Counter(j.rule for j in parse_dry_run(out.stdout + out.stderr))
    tex = (res / "report" / "tables" / "main_results.tex").read_text()
    assert "Base (No RL)" in tex and "VI-CuRL" in tex and "No Curriculum" in tex
    for name in ("main_results_pass8", "curricula", "curriculum_ablation", "long_output", "mechanism",
                 "mechanism_breakdown"):
        assert (res / "report" / "tables" / f"{name}.tex").read_text().count("\\bottomrule") == 1
    # a setting the smoke config does not train: every cell a dash, never a value
    mech = (res / "report" / "tables" / "mechanism.tex").read_text()
    assert "Oracle / Soft Conf.~Weighting & -- & -- & -- & -- & -- \\\\" in mech
    assert "Oracle / No Curriculum & --" not in mech
    # the mechanism study continues main's runs: the same first two steps (trained once), then its own
    for run in ("oracle-none", "oracle-vicurl"):
        main_m = pd.read_json(res / "runs" / "main" / "tiny" / run / "seed0" / "metrics.jsonl", lines=True)
        mech_m = pd.read_json(res / "runs" / "mechanism" / "tiny" / run / "seed0" / "metrics.jsonl", lines=True)
        assert list(mech_m["step"]) == [1, 2, 3, 4]
        pd.testing.assert_frame_equal(mech_m.iloc[:2][main_m.columns], main_m, check_dtype=False)
        assert sorted(p.name for p in (res / "runs" / "mechanism" / "tiny" / run / "seed0" / "checkpoints").glob("step*")) \
            == ["step3", "step4"]
        # one generation job per run (the demo's eval.generate_per): its own steps; 1 and 2 are main's, not regenerated
        samples = pd.read_parquet(res / "eval" / "mechanism" / "tiny" / run / "seed0" / "samples.parquet")
        assert sorted(samples["step"].unique()) == [3, 4]
        assert sorted(pd.read_parquet(res / "eval" / "main" / "tiny" / run / "seed0" / "samples.parquet")["step"].unique()) \
            == [1, 2]
    assert pd.read_json(res / "runs" / "mechanism" / "tiny" / "oracle-vicurl" / "seed0" / "metrics.jsonl",
                        lines=True)["curriculum/beta_target"].tolist()[1:] == [1.0, 1.0, 1.0]
    assert (res / "report" / "figures" / "learning_curves" / "main" / "tiny.png").stat().st_size > 1000
    assert (res / "report" / "figures" / "schedule" / "main" / "tiny" / "oracle-vicurl.pdf").stat().st_size > 1000
    assert (res / "report" / "figures" / "training_curves" / "rewards" / "tiny.png").stat().st_size > 1000
    findings = pd.read_csv(res / "report" / "findings.csv")  # the rewards study, one seed: nothing is decided
    assert {"vicurl_gain/majority_vote", "collapse/semantic", "train_accuracy/entropy",
            "main/variance_ratio/sigma2", "main/zero_gradient_share"} <= set(findings["key"])
    assert set(findings["verdict"]) == {"inconclusive"}
    assert "majority answer is wrong on" in (res / "report/findings.md").read_text()
    scores = pd.read_csv(res / "report" / "scores.csv")
    # base (step 0) + every run at steps {1, 2} (main: 2 runs, curricula: 2, long_output: 1) or {1, ..., 4}
    # (mechanism: 3), on 2 benchmarks; rewards: 5 runs x step 1 on 1 benchmark
    assert len(scores) == 2 * (1 + 2 * (2 + 2 + 1) + 4 * 3) + 5
    key = ["model", "reward", "curriculum", "seed", "step", "benchmark"]
    mech = scores[(scores["study"] == "mechanism") & (scores["step"] <= 2) & (scores["curriculum"] != "static_confidence")]
    same = mech.merge(scores[scores["study"] == "main"], on=key, suffixes=("", "_main"))
    assert len(same) == len(mech) == 8 and (same["pass@1"] == same["pass@1_main"]).all()
    assert (res / "prompt_stats" / "tiny" / "arith_train.parquet").exists()
    assert "SENT" in (res / "report" / "tables" / "curricula.tex").read_text()
    probes = pd.read_csv(res / "report" / "probes.csv")
    assert list(probes["step"]) == [0, 1] and set(probes["curriculum"]) == {"vicurl"}
    assert (probes["sigma2_full"] >= 0).all() and (probes["n_kept"] <= probes["n_prompts"]).all()
    assert scores["pass@1"].between(0, 1).all()
    for run in ("oracle-none", "oracle-vicurl"):
        metrics = pd.read_json(res / "runs" / "main" / "tiny" / run / "seed0" / "metrics.jsonl", lines=True)
        assert list(metrics["step"]) == [1, 2]
    for reward, curricula in {"majority_vote": ("none", "vicurl"), "entropy": ("none", "vicurl"),
                              "semantic": ("none",)}.items():  # EMPO: a baseline only, as in the paper
        for curriculum in curricula:
            metrics = pd.read_json(res / "runs" / "rewards" / "tiny" / f"{reward}-{curriculum}" / "seed0" / "metrics.jsonl", lines=True)
            assert list(metrics["step"]) == [1] and f"reward/{reward}/mean" in metrics.columns
    assert "Majority Vote" in (res / "report" / "tables" / "rewards.tex").read_text()
    # each run's learning curves as TensorBoard event files (config `loggers`), the same rows as metrics.jsonl
    for run in ("main/tiny/oracle-vicurl/seed0", "rewards/tiny/entropy-vicurl/seed0"):
        curves = tensorboard_scalars(res / "tensorboard" / run)
        metrics = pd.read_json(res / "runs" / run / "metrics.jsonl", lines=True)
        for tag in ("curriculum/beta_target", "curriculum/beta_actual", "curriculum/kept", "reward/mean",
                    "reward/oracle_acc"):
            assert curves[tag] == pytest.approx(list(metrics[tag])), tag
    # where the study stands: every run done, every job of the plan done (python -m vicurl.status)
    st = subprocess.run([sys.executable, "-m", "vicurl.status", "--configfile", str(DEMO_CONFIG), str(SMOKE_CONFIG)],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert st.returncode == 0, st.stderr[-3000:]
    table = pd.read_csv(res / "status.csv")
    assert set(table["state"]) == {"done"} and (table["step"] == table["steps"]).all()
    assert len(table) == len(list((res / "runs").glob("*/*/*/seed*")))
    total = pd.read_csv(res / "status_studies.csv").set_index("study").loc["all"]
    rules = [c.removesuffix("_planned") for c in total.index if c.endswith("_planned")]
    assert all(total[f"{r}_done"] == total[f"{r}_planned"] > 0 for r in rules) and total["train_done"] == len(table)
    # the config asks main's runs for more steps now: Snakemake would train them again, and the mechanism study's,
    # which continue them (their curriculum's steps follow)
    longer = tmp_path / "longer.yaml"
    longer.write_text("studies: {main: {train: {total_steps: 3}}}\n")
    now = status.status(status.load_config([DEMO_CONFIG, SMOKE_CONFIG, longer]), tmp_path, False)["runs"]
    assert {(r.study in ("main", "mechanism"), r.state) for r in now} == {(True, "changed"), (False, "done")}
    if shutil.which("pdflatex"):  # every table of the demo compiles with the paper's packages
        from vicurl.report.latex import standalone_document

        body = "".join(p.read_text() for p in sorted((res / "report" / "tables").glob("*.tex")))
        (tmp_path / "tables.tex").write_text(standalone_document(body))
        tex = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "tables.tex"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert tex.returncode == 0, tex.stdout[-3000:]
    # nothing left to do: a second invocation plans no jobs, nor does a table target
    again = snakemake(tmp_path, "-n", "all", configs=smoke)
    assert "Nothing to be done" in again.stdout + again.stderr
    again = snakemake(tmp_path, "-n", "table_main_results", "tables", "figures", configs=smoke)
    assert "Nothing to be done" in again.stdout + again.stderr
    # a table's style changed: only that table's rule reruns (its settings file is new), nothing upstream
    style = write_config(tmp_path, "tables: {main_results: {style: {digits: 2, bold: false}}}\n")
    plan = snakemake(tmp_path, "-n", "all", configs=[*smoke, style])
    assert job_counts(plan.stdout) == {"table": 1, "all": 1}, plan.stdout[-3000:]
    assert "main_results.tex" in plan.stdout
    # the report's code changed (report.version bumped): every report file is made again, nothing upstream
    bump = write_config(tmp_path, "report: {version: 2}\n")
    plan = snakemake(tmp_path, "-n", "all", configs=[*smoke, bump])
    counts = job_counts(plan.stdout)
    report_rules = {"aggregate", "study_scores", "table_scores", "table", "table_vs_paper", "learning_curves",
                    "schedule_figure", "variance_figures", "findings", "probes_table", "all"}
    assert set(counts) <= report_rules and {"aggregate", "table", "learning_curves", "findings", "probes_table"} \
        <= set(counts), plan.stdout[-3000:]
    assert counts["table"] == len(list((res / "report" / "tables").glob("*.cells.csv"))), counts
    # the HTML report of the tables and figures
    rep = snakemake(tmp_path, "--report", str(tmp_path / "report.html"), configs=smoke)
    assert rep.returncode == 0, rep.stderr[-3000:]
    html = (tmp_path / "report.html").read_text()
    assert "main_results.tex" in html and "oracle-vicurl.png" in html
    # a removed table output: the tables target rebuilds it alone
    (res / "report" / "tables" / "curricula.tex").unlink()
    plan = snakemake(tmp_path, "-n", "tables", configs=smoke)
    assert job_counts(plan.stdout) == {"table": 1, "tables": 1}, plan.stdout[-3000:]
    regenerated_tables_journey(tmp_path, res, smoke)


def regenerated_tables_journey(tmp_path, res, smoke):
    """Regenerating the tables from finished results (the finished small DAG's): copied into a fresh folder,
    mtimes kept and no .snakemake/ (a fresh clone), `tables` trains, generates and grades nothing; a touched
    rule script reruns nothing; a caption changed reruns that one table, with or without Snakemake's records."""
    fresh = tmp_path / "fresh"
    (fresh / "results").mkdir(parents=True)
    subprocess.run(["cp", "-a", str(res), str(fresh / "results")], check=True)
    (fresh / "results" / "smoke" / "report" / "tables" / "curricula.tex").unlink(missing_ok=True)
    plan = snakemake(fresh, "-n", "tables", configs=smoke)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert job_counts(plan.stdout) == {"table": 1, "tables": 1}, plan.stdout[-3000:]  # the one removed above
    for folder in (tmp_path, fresh):  # the removed table made again in both
        built = snakemake(folder, "--cores", "1", "tables", configs=smoke)
        assert built.returncode == 0, built.stderr[-3000:]
    for folder in (tmp_path, fresh):
        for target in ("all", "tables", "figures", "report"):
            plan = snakemake(folder, "-n", target, configs=smoke)
            assert "Nothing to be done" in plan.stdout + plan.stderr, (folder, target, plan.stdout[-3000:])
    script = REPO / "workflow_scripts" / "train.py"  # a `git pull` that edits a rule's script
    before = script.stat()
    try:
        os.utime(script)
        for folder in (tmp_path, fresh):
            plan = snakemake(folder, "-n", "all", configs=smoke)
            assert "Nothing to be done" in plan.stdout + plan.stderr, plan.stdout[-3000:]
    finally:
        os.utime(script, ns=(before.st_atime_ns, before.st_mtime_ns))
    caption = write_config(tmp_path, "tables: {main_results: {caption: A caption of the reproduction's own.}}\n")
    for folder in (tmp_path, fresh):
        for target in ("tables", "all"):
            plan = snakemake(folder, "-n", target, configs=[*smoke, caption])
            assert job_counts(plan.stdout) == {"table": 1, target: 1}, plan.stdout[-3000:]
            assert "main_results.tex" in plan.stdout


@pytest.mark.slow
@pytest.mark.parametrize("generate_per", ["checkpoint", "run"])
def test_killed_generation_leaves_no_output_a_rerun_would_trust(tmp_path, generate_per):
    import os
    import signal
    import time

    smoke = SMOKE_CONFIG
    # long enough to be killed mid-way
    big = write_config(tmp_path, f"eval: {{n_samples: 3000, batch_size: 256, generate_per: {generate_per}}}\n")
    run = "results/smoke/eval/base/tiny/base/seed0"
    step = f"{run}/step0"
    target, rule = {"checkpoint": (f"{step}/samples.parquet", "generate_checkpoint"),
                    "run": (f"{run}/samples.parquet", "generate_run")}[generate_per]
    built = snakemake(tmp_path, "--cores", "1", "results/smoke/models/tiny/base", "results/smoke/data/arith_easy.parquet",
                      "results/smoke/data/arith_hard.parquet", configs=[DEMO_CONFIG, smoke, big])
    assert built.returncode == 0, built.stderr[-3000:]
    cmd = snakemake_cmd(tmp_path, "--cores", "1", target, configs=[DEMO_CONFIG, smoke, big])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    log = tmp_path / target.replace("results/smoke/eval", "results/smoke/logs/eval").replace("samples.parquet", "generate.log")
    deadline = time.time() + 120
    while not log.exists() and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # the job is sampling now
    assert proc.poll() is None, "the generation finished before it could be killed; raise n_samples"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / target).exists()  # nothing half-written under the output's name
    assert not list((tmp_path / step).glob("*.parquet")) and not list((tmp_path / run).glob("*.parquet"))
    again = snakemake(tmp_path, "-n", target, configs=[DEMO_CONFIG, smoke, big])
    assert f"rule {rule}:" in again.stdout and "Nothing to be done" not in again.stdout


@pytest.mark.slow
def test_generation_cut_per_checkpoint_or_run_grades_the_same_samples(tmp_path):
    """eval.generate_per switches how generation jobs are cut, not what they sample: the Base
    model's graded samples and scores are equal every way; switching plans no training job."""
    smoke = SMOKE_CONFIG
    run = tmp_path / "results/smoke/eval/base/tiny/base/seed0"  # the Base "run": its one checkpoint, step 0
    step = run / "step0"
    target = str(run.relative_to(tmp_path) / "scores.json")
    out = {}
    for per, jobs in (("checkpoint", None), ("run", {"generate_run": 1})):
        mode = write_config(tmp_path, f"eval: {{generate_per: {per}}}\n")
        if jobs is not None:  # the switch regenerates and regrades, nothing else
            plan = snakemake(tmp_path, "-n", target, configs=[DEMO_CONFIG, smoke, mode])
            assert job_counts(plan.stdout) == {**jobs, "grade": 1}, plan.stdout[-3000:]
        done = snakemake(tmp_path, "--cores", "2", target, configs=[DEMO_CONFIG, smoke, mode])
        assert done.returncode == 0, done.stderr[-3000:]
        out[per] = (pd.read_parquet(run / "graded.parquet"), json.loads((run / "scores.json").read_text()))
    assert (step / "samples.parquet").exists()
    assert pd.read_parquet(run / "samples.parquet")["step"].unique().tolist() == [0]
    pd.testing.assert_frame_equal(out["checkpoint"][0], out["run"][0])
    assert out["checkpoint"][1] == out["run"][1]
    assert [r["benchmark"] for r in out["checkpoint"][1]] == ["arith_easy", "arith_hard"]
