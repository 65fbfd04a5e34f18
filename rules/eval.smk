# Evaluation: generate -> grade. `eval.generate_per` cuts generation into jobs: one per checkpoint
# that loads the model once for all its benchmarks (rule generate_checkpoint, the default), or one
# per run for every checkpoint it owns (rule generate_run: the imports paid once a run, for CPU
# runs of small models). The same samples both ways. Grading is one CPU job per run for all its
# evaluated checkpoints, its own rule so that a grader change regrades without regenerating; it
# also writes the pass@k scores (cheap). Per run rather than per checkpoint: half as many jobs
# for Snakemake to plan.


rule generate_checkpoint:
    input:
        model=eval_model_input,
        problems=lambda w: [dataset_path(b) for b in checkpoint_benchmarks(w)],
    output:
        f"{EVAL_DIR}/samples.parquet",
    log:
        f"{R}/logs/eval/{RUN}/step{{step}}/generate.log",
    benchmark:
        f"{R}/timings/eval/{RUN}/step{{step}}/generate.tsv"
    conda:
        "../envs/gpu.yaml" if VLLM_EVAL else "../envs/cpu.yaml"
    threads: config["threads"]
    resources:
        gpu=1 if VLLM_EVAL else 0,
    params:
        benchmarks=checkpoint_benchmarks,  # a changed list regenerates the checkpoint
        model_dir=eval_model_dir,
        eval=lambda w: runs_lib.eval_settings(config, w.study),  # `eval` with the study's `eval` over it
        prompt_order=config["prompt"]["order"],
        chat_template=lambda w: runs_lib.chat_template(config, w.model),
        device=DEVICE,
        on_bad_row=lambda w: on_bad_row(checkpoint_benchmarks(w)),  # a prompt too long for the model: dropped and counted, or refused
        reproducible=config["reproducible"],  # vLLM's requests seeded, batch-invariant on a GPU
    script:
        "../workflow_scripts/generate.py"


# `eval.generate_per: run`: the same job for every checkpoint the run owns, one file with a `step` column
use rule generate_checkpoint as generate_run with:
    input:
        model=eval_model_input,
        problems=lambda w: [dataset_path(b) for b in checkpoint_benchmarks(w)],
    output:
        f"{RUN_EVAL_DIR}/samples.parquet",
    log:
        f"{R}/logs/eval/{RUN}/generate.log",
    benchmark:
        f"{R}/timings/eval/{RUN}/generate.tsv"
    params:
        benchmarks=checkpoint_benchmarks,
        on_bad_row=lambda w: on_bad_row(checkpoint_benchmarks(w)),
        model_dir=lambda w: {step: eval_model_dir_at(w, step) for step in owned_steps(w)},


rule grade:
    input:
        samples=eval_samples,
        problems=lambda w: [dataset_path(b) for b in checkpoint_benchmarks(w)],
    output:
        graded=f"{RUN_EVAL_DIR}/graded.parquet",
        scores=f"{RUN_EVAL_DIR}/scores.json",
    log:
        f"{R}/logs/eval/{RUN}/grade.log",
    conda:
        "../envs/cpu.yaml"
    params:
        benchmarks=checkpoint_benchmarks,
        steps=lambda w: runs_lib.evaluated_steps(config, w.study),
        ks=config["eval"]["ks"],
        # bump `grading.version` after a grader change: every run is regraded, nothing regenerated
        grader_version=config["grading"]["version"],
        step_files=step_sample_files,  # per step: the files holding its samples
        generate_per=GENERATE_PER,
    script:
        "../workflow_scripts/grade.py"
