# Evaluation: generate -> grade. Generation is one job per (run, step, benchmark), or with
# `eval.per_checkpoint` one job per (run, step) that loads the model once and writes every
# benchmark's samples into one file. Grading is one job per (run, step, benchmark) either way, its
# own rule so that a grader change regrades without regenerating; it also writes the pass@k score
# (cheap), which saves a job per evaluation.


rule generate:
    input:
        model=eval_model_input,
        problems=lambda w: [dataset_path(w.bench)],
    output:
        f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.samples.parquet",
    params:
        benchmarks=lambda w: [w.bench],
        model_dir=eval_model_dir,
        eval=lambda w: runs_lib.eval_settings(config, w.study),  # `eval` with the study's `eval` over it
        prompt_order=config["prompt"]["order"],
        chat_template=lambda w: bool(config["models"][w.model].get("chat_template", False)),
        device=DEVICE,
    threads: config["threads"]
    resources:
        gpu=1 if VLLM_EVAL else 0,
    log:
        f"{R}/logs/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.generate.log",
    benchmark:
        f"{R}/benchmarks/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.generate.tsv"
    conda:
        "../envs/vllm.yaml" if VLLM_EVAL else "../envs/cpu.yaml"
    script:
        "../workflow_scripts/generate.py"


# `eval.per_checkpoint`: the same job for all the checkpoint's benchmarks at once
use rule generate as generate_checkpoint with:
    input:
        model=eval_model_input,
        problems=lambda w: [dataset_path(b) for b in checkpoint_benchmarks(w)],
    output:
        f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/samples.parquet",
    params:
        benchmarks=checkpoint_benchmarks,  # a changed list regenerates the checkpoint
    log:
        f"{R}/logs/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/generate.log",
    benchmark:
        f"{R}/benchmarks/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/generate.tsv"


rule grade:
    input:
        samples=eval_samples,
        problems=lambda w: dataset_path(w.bench),
    output:
        graded=f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.graded.parquet",
        score=f"{R}/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.score.json",
    params:
        ks=config["eval"]["ks"],
        # bump `grading.version` after a grader change: every sample file is regraded, none regenerated
        grader_version=config["grading"]["version"],
        per_checkpoint=config["eval"]["per_checkpoint"],
    log:
        f"{R}/logs/eval/{{study}}/{{model}}/{{setting}}/seed{{seed}}/step{{step}}/{{bench}}.grade.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/grade.py"
