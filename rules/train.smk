# One job per run. In-progress checkpoints live in the undeclared `_work/` folder beside the
# outputs (Snakemake deletes declared outputs before a rerun), so a killed or preempted job
# resumes from its last checkpoint; only the finished exports and metrics are declared.


rule train:
    input:
        model=lambda w: base_model_input(w.model),
        train_set=lambda w: dataset_path(config["studies"][w.study]["train_set"]),
    output:
        checkpoints=directory(f"{R}/runs/{{study}}/{{model}}/{{setting}}/seed{{seed}}/checkpoints"),
        metrics=f"{R}/runs/{{study}}/{{model}}/{{setting}}/seed{{seed}}/metrics.jsonl",
        settings=f"{R}/runs/{{study}}/{{model}}/{{setting}}/seed{{seed}}/train_config.json",
    params:
        model_dir=lambda w: base_model_dir(w.model),
        work_dir=lambda w: f"{run_dir(w)}/_work",
        settings=lambda w: runs_lib.train_settings(config, run_of(w)),
        engine=config["engine"],
    threads: config["threads"]
    log:
        f"{R}/logs/train/{{study}}/{{model}}/{{setting}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{study}}/{{model}}/{{setting}}/seed{{seed}}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/train.py"
