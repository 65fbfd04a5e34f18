# Evaluation: generate -> grade, one job each per (run, step, benchmark).
# Grading is its own rule so that a grader change regrades without regenerating; it also
# writes the pass@k score (cheap), which saves a job per evaluation.


rule generate:
    input:
        model=eval_model_input,
        problems=lambda w: dataset_path(w.bench),
    output:
        f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.samples.parquet",
    params:
        model_dir=eval_model_dir,
        eval=lambda w: runs_lib.eval_settings(config, w.study),  # `eval` with the study's `eval` over it
        prompt_order=config["prompt"]["order"],
        chat_template=lambda w: bool(config["models"][w.model].get("chat_template", False)),
    threads: config["threads"]
    resources:
        gpu=1 if config["eval"]["engine"] == "vllm" else 0,
    log:
        f"{R}/logs/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.generate.log",
    benchmark:
        f"{R}/benchmarks/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.generate.tsv"
    conda:
        "../envs/vllm.yaml" if config["eval"]["engine"] == "vllm" else "../envs/cpu.yaml"
    script:
        "../workflow_scripts/generate.py"


rule grade:
    input:
        samples=f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.samples.parquet",
        problems=lambda w: dataset_path(w.bench),
    output:
        graded=f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.graded.parquet",
        score=f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.score.json",
    params:
        ks=config["eval"]["ks"],
        # bump `grading.version` after a grader change: every sample file is regraded, none regenerated
        grader_version=config["grading"]["version"],
    log:
        f"{R}/logs/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.grade.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/grade.py"
