# Report: scores across seeds, LaTeX tables, figures. Reads results only; never trains.

localrules:
    aggregate,
    table,
    learning_curves,


rule aggregate:
    input:
        all_scores(),
    output:
        per_seed=f"{R}/report/scores.csv",
        across_seeds=f"{R}/report/scores_across_seeds.csv",
    params:
        metrics=[f"pass@{k}" for k in config["eval"]["ks"]],
    log:
        f"{R}/logs/report/aggregate.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/aggregate.py"


rule table:
    input:
        f"{R}/report/scores_across_seeds.csv",
    output:
        f"{R}/report/tables/{{study}}_pass{{k}}.tex",
    wildcard_constraints:
        k=r"\d+",
    params:
        study=lambda w: config["studies"][w.study],
        step=lambda w: runs_lib.report_step(config, w.study),
        models=config["models"],
        datasets=config["datasets"],
    log:
        f"{R}/logs/report/{{study}}_pass{{k}}.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/table.py"


rule learning_curves:
    input:
        f"{R}/report/scores.csv",
    output:
        png=f"{R}/report/figures/{{study}}_learning_curves.png",
        pdf=f"{R}/report/figures/{{study}}_learning_curves.pdf",
    params:
        study=lambda w: config["studies"][w.study],
        datasets=config["datasets"],
    log:
        f"{R}/logs/report/{{study}}_learning_curves.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/learning_curves.py"


rule tables:
    input:
        expand(f"{R}/report/tables/{{study}}_pass{{k}}.tex", study=STUDIES, k=config["eval"]["ks"]),


rule figures:
    input:
        expand(f"{R}/report/figures/{{study}}_learning_curves.png", study=STUDIES),
