# Report: scores across seeds, the paper's LaTeX tables (and paper-vs-reproduction tables),
# figures, the probes' table, the findings. These rules only read results, and a report target
# (tables, table_<name>, figures, report) includes them alone (the Snakefile). Each job's params are
# also a settings file among its inputs (`settings_file`): a change to a table's definition or style
# reruns only that table's rules, with or without Snakemake's records. Each takes `report.version`:
# bump it after a change to the report's code and every report file is made again, nothing
# upstream (the workflow profile reruns no job for an edited script alone).


localrules:
    aggregate,
    study_scores,
    table_scores,
    table,
    table_vs_paper,
    learning_curves,
    schedule_figure,
    variance_figures,
    probes_table,


rule aggregate:
    input:
        scores=all_scores(),
        settings=settings_file("aggregate"),
    output:
        per_seed=f"{R}/report/scores.csv",
        across_seeds=f"{R}/report/scores_across_seeds.csv",
    log:
        f"{R}/logs/report/aggregate.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        keep=None,  # every record of every evaluated checkpoint
        metrics=[f"pass@{k}" for k in config["eval"]["ks"]],
    script:
        "../workflow_scripts/aggregate.py"


rule study_scores:
    """The per-seed scores of one study's runs and of the Base evaluations they start from."""
    input:
        scores=lambda w: all_scores(w.study),
        settings=settings_file("study_scores"),
    output:
        f"{R}/report/scores/{{study}}.csv",
    log:
        f"{R}/logs/report/scores_{{study}}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        # a Base checkpoint also holds the benchmarks of the model's other studies
        keep=lambda w: list(runs_lib.evaluations(config, w.study)),
    script:
        "../workflow_scripts/collect_scores.py"


rule table_scores:
    """The per-seed scores one table reads, and only those (runs_lib.table_evaluations)."""
    input:
        scores=lambda w: table_score_inputs(w.table),
        settings=settings_file("table_scores"),
    output:
        f"{R}/report/tables/{{table}}.scores.csv",
    log:
        f"{R}/logs/report/table_{{table}}.scores.log",
    wildcard_constraints:
        table=_alt(TABLES),
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        keep=lambda w: runs_lib.table_evaluations(config, TABLES[w.table]),
    script:
        "../workflow_scripts/collect_scores.py"


rule table:
    input:
        scores=f"{R}/report/tables/{{table}}.scores.csv",
        settings=settings_file("table"),
    output:
        tex=report(
            f"{R}/report/tables/{{table}}.tex",
            caption=f"{CAPTIONS}/table.rst",
            category="Tables",
            labels={"table": "{table}", "file": "LaTeX"},
        ),
        cells=report(
            f"{R}/report/tables/{{table}}.cells.csv",
            caption=f"{CAPTIONS}/table_cells.rst",
            category="Tables",
            labels={"table": "{table}", "file": "cells (CSV)"},
        ),
    log:
        f"{R}/logs/report/table_{{table}}.log",
    wildcard_constraints:
        table=_alt(TABLES),
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        table=lambda w: table_definition(w.table),
    script:
        "../workflow_scripts/table.py"


rule table_vs_paper:
    input:
        scores=f"{R}/report/tables/{{table}}.scores.csv",
        paper=PAPER_NUMBERS,
        settings=settings_file("table_vs_paper"),
    output:
        tex=report(
            f"{R}/report/tables/{{table}}.vs_paper.tex",
            caption=f"{CAPTIONS}/table_vs_paper.rst",
            category="Paper vs reproduction",
            labels={"table": "{table}", "file": "LaTeX"},
        ),
        csv=report(
            f"{R}/report/tables/{{table}}.vs_paper.csv",
            caption=f"{CAPTIONS}/table_vs_paper.rst",
            category="Paper vs reproduction",
            labels={"table": "{table}", "file": "CSV"},
        ),
    log:
        f"{R}/logs/report/table_{{table}}.vs_paper.log",
    wildcard_constraints:
        table=_alt(PAPER_TABLES),
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        table=lambda w: table_definition(w.table, caption=False),  # its caption is its own
    script:
        "../workflow_scripts/table_vs_paper.py"


rule learning_curves:
    """Pass@k of the evaluated checkpoints, and the training reward and oracle accuracy of every step."""
    input:
        scores=f"{R}/report/scores/{{study}}.csv",
        metrics=lambda w: [f"{R}/runs/{r.path}/metrics.jsonl" for r in curve_runs(w.study, w.model)],
        settings=settings_file("learning_curves"),
    output:
        png=report(
            f"{R}/report/figures/learning_curves/{{study}}/{{model}}.png",
            caption=f"{CAPTIONS}/learning_curves.rst",
            category="Figures",
            subcategory="Learning curves",
            labels={"study": "{study}", "model": "{model}"},
        ),
        pdf=f"{R}/report/figures/learning_curves/{{study}}/{{model}}.pdf",
        train_png=report(
            f"{R}/report/figures/training_curves/{{study}}/{{model}}.png",
            caption=f"{CAPTIONS}/training_curves.rst",
            category="Figures",
            subcategory="Training curves",
            labels={"study": "{study}", "model": "{model}"},
        ),
        train_pdf=f"{R}/report/figures/training_curves/{{study}}/{{model}}.pdf",
    log:
        f"{R}/logs/report/learning_curves/{{study}}/{{model}}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        runs=lambda w: [(r.reward, r.curriculum, r.seed) for r in curve_runs(w.study, w.model)],
        study=lambda w: config["studies"][w.study],
        curricula=config["report"]["curve_curricula"],
        metrics=[f"pass@{k}" for k in config["eval"]["ks"]],
        band=config["report"]["band"],
        titles={d: v.get("label", d) for d, v in config["datasets"].items()},
        model_label=lambda w: config["models"][w.model].get("label", w.model),
    script:
        "../workflow_scripts/learning_curves.py"


rule schedule_figure:
    input:
        metrics=lambda w: [
            f"{R}/runs/{runs_lib.Run.of(w.study, w.model, w.setting, s).path}/metrics.jsonl"
            for s in config["studies"][w.study]["seeds"]
        ],
        settings=settings_file("schedule_figure"),
    output:
        png=report(
            f"{R}/report/figures/schedule/{{study}}/{{model}}/{{setting}}.png",
            caption=f"{CAPTIONS}/schedule.rst",
            category="Figures",
            subcategory="Curriculum schedule",
            labels={"study": "{study}", "model": "{model}", "setting": "{setting}"},
        ),
        pdf=f"{R}/report/figures/schedule/{{study}}/{{model}}/{{setting}}.pdf",
    log:
        f"{R}/logs/report/schedule/{{study}}/{{model}}/{{setting}}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        seeds=lambda w: config["studies"][w.study]["seeds"],
        title=lambda w: f"{config['models'][w.model].get('label', w.model)}, {w.setting} ({w.study})",
    script:
        "../workflow_scripts/schedule_figure.py"


rule variance_figures:
    """The paper's variance-ratio and absolute-variance figures: one panel per probed model."""
    input:
        probes=lambda w: all_probes(w.study, w.setting),
        settings=settings_file("variance_figures"),
    output:
        ratio_png=report(
            f"{R}/report/figures/variance/{{study}}/{{setting}}_ratio.png",
            caption=f"{CAPTIONS}/variance_ratio.rst",
            category="Figures",
            subcategory="Variance",
            labels={"study": "{study}", "setting": "{setting}", "figure": "ratio kept/full"},
        ),
        ratio_pdf=f"{R}/report/figures/variance/{{study}}/{{setting}}_ratio.pdf",
        absolute_png=report(
            f"{R}/report/figures/variance/{{study}}/{{setting}}_absolute.png",
            caption=f"{CAPTIONS}/variance_absolute.rst",
            category="Figures",
            subcategory="Variance",
            labels={"study": "{study}", "setting": "{setting}", "figure": "absolute"},
        ),
        absolute_pdf=f"{R}/report/figures/variance/{{study}}/{{setting}}_absolute.pdf",
    log:
        f"{R}/logs/report/variance/{{study}}/{{setting}}.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
        study=lambda w: w.study,
        reward=lambda w: runs_lib.split_setting(w.setting)[0],
        curriculum=lambda w: runs_lib.split_setting(w.setting)[1],
        models=lambda w: probed_models(w.study, w.setting),
        titles={m: v.get("label", m) for m, v in config["models"].items()},
    script:
        "../workflow_scripts/variance_figures.py"


if STUDY_FINDINGS:

    rule findings:
        """The findings table: each claim of the paper the study tests, the paper's number, ours and a verdict."""
        input:
            scores=f"{R}/report/scores/{FINDINGS['study']}.csv",
            probes=findings_probes(),
            metrics=[f"{R}/runs/{r.path}/metrics.jsonl" for r in findings_runs()],
            base=[f"{R}/eval/{r.path}/graded.parquet" for r in findings_base()],
            benchmarks=[dataset_path(b) for b in config["studies"][FINDINGS["study"]]["benchmarks"]],
            paper=PAPER_NUMBERS,
            settings=settings_file("findings"),
        output:
            markdown=report(f"{R}/report/findings.md", caption=f"{CAPTIONS}/findings.rst", category="Findings"),
            tex=f"{R}/report/findings.tex",
            csv=f"{R}/report/findings.csv",
        log:
            f"{R}/logs/report/findings.log",
        conda:
            "../envs/cpu.yaml"
        params:
            report_version=config["report"]["version"],
            findings=FINDINGS,
            runs=[(r.reward, r.curriculum, r.seed) for r in findings_runs()],
            benchmarks=config["studies"][FINDINGS["study"]]["benchmarks"],
            titles={d: v.get("label", d) for d, v in config["datasets"].items()},
            scenario=config["scenario"],
            compared_settings=lambda w: findings_settings(config, FINDINGS["study"], FINDINGS["model"]),
            paper_settings=lambda w: findings_settings(paper_config(), "main", FINDINGS["paper_model"]),
        script:
            "../workflow_scripts/findings.py"

elif FINDINGS:

    rule findings:
        """The findings table of a claims file or a study plan's pre-registration: each claim whose arms the config
        trains, the paper's number, ours and a verdict."""
        input:
            scores=findings_scores(),
            probes=findings_probes(),
            claims=FINDINGS["claims"] if os.path.exists(FINDINGS["claims"]) else [],
            settings=settings_file("findings"),
        output:
            markdown=report(f"{R}/report/findings.md", caption=f"{CAPTIONS}/findings.rst", category="Findings"),
            tex=f"{R}/report/findings.tex",
            csv=f"{R}/report/findings.csv",
        log:
            f"{R}/logs/report/findings.log",
        conda:
            "../envs/cpu.yaml"
        params:
            report_version=config["report"]["version"],
            claims=CLAIMS,
            studies=lambda w: claimed_lib.study_info(config, claimed_lib.studies_of(CLAIMS)),
            alpha=PREREGISTRATION.get("alpha", FINDINGS["alpha"]),
            source=FINDINGS["claims"],
            departed=lambda w: claim_departures(),
            scenario=config["scenario"],
        script:
            "../workflow_scripts/claim_findings.py"


if FINDINGS:  # local where it is defined (a localrules entry without its rule is one of Snakemake's warnings)

    localrules:
        findings,


rule probes_table:
    input:
        probes=all_probes(),
        settings=settings_file("probes_table"),
    output:
        f"{R}/report/probes.csv",
    log:
        f"{R}/logs/report/probes_table.log",
    conda:
        "../envs/cpu.yaml"
    params:
        report_version=config["report"]["version"],
    script:
        "../workflow_scripts/probes_table.py"


rule tables:
    input:
        [p for name in TABLES for p in table_outputs(name)],


rule figures:
    input:
        curve_figures(),
        schedule_figures(),
        variance_figures(),


rule report:
    """Every report file from the results there are: tables, figures, scores, the probes' table, the findings."""
    input:
        report_outputs(),


# one target per study: `snakemake study_{name}` (its runs, evaluations, probes, figures, tables)
for _study in STUDIES:

    rule:
        name:
            f"study_{_study}"
        input:
            study_outputs(_study),
        localrule: True


# one target per table: `snakemake table_{name}`
for _name in TABLES:

    rule:
        name:
            f"table_{_name}"
        input:
            table_outputs(_name),
        localrule: True
