# One job per run. In-progress checkpoints live in the undeclared `_work/` folder beside the
# outputs (Snakemake deletes declared outputs before a rerun), so a killed or preempted job
# resumes from its last checkpoint; only the finished exports and metrics are declared (and
# write-protected with `protect_outputs: true`), with the run's provenance (provenance.json).
# engine: verl trains on GPUs in the GPU environment (envs/gpu.yaml under --sdm conda; resources
# from the config's `verl` section, common.smk's train_resources); engine: local keeps the CPU env
# and no resources.
# A run of a study that `continues` another (the mechanism study) waits for its source run and
# starts from the source's final state in the source's `_work/` (vicurl.config.runs, "continues").


rule train:
    input:
        model=lambda w: base_model_input(w.model),
        train_set=lambda w: dataset_path(config["studies"][w.study]["train_set"]),
        prompt_stats=prompt_stats_input,
        source=source_run_input,
    output:
        checkpoints=maybe_protected(directory(f"{R}/runs/{RUN}/checkpoints")),
        metrics=maybe_protected(f"{R}/runs/{RUN}/metrics.jsonl"),
        settings=f"{R}/runs/{RUN}/train_config.json",
        provenance=f"{R}/runs/{RUN}/provenance.json",
    log:
        f"{R}/logs/train/{RUN}.log",
    benchmark:
        f"{R}/timings/train/{RUN}.tsv"
    conda:
        "../envs/gpu.yaml" if VERL_ENGINE else "../envs/cpu.yaml"
    threads: config["threads"]
    resources:
        **train_resources(),
    params:
        model_dir=lambda w: base_model_dir(w.model),
        work_dir=lambda w: work_dir(run_of(w).path),
        settings=lambda w: runs_lib.train_settings(config, run_of(w)),
        start_from=start_from,
        engine=config["engine"],
        # the verl settings that can change what the run trains (a change retrains the runs it changes; a
        # changed resource or step_timeout does not); the job reads the whole `verl` section from the config
        verl=lambda w: runs_lib.verl_training_settings(config, w.model) if VERL_ENGINE else None,
    script:
        "../workflow_scripts/train.py"


rule prompt_stats:
    """k samples of the initial policy per training prompt, graded: pass rate and difficulty
    (AdaRFT), semantic entropy (SENT). Only runs whose curriculum needs them depend on it.
    Sampled by the evaluation's generator (`eval.engine`): vLLM on one GPU, like rule generate_checkpoint."""
    input:
        model=lambda w: base_model_input(w.model),
        problems=lambda w: dataset_path(w.dataset),
    output:
        f"{R}/prompt_stats/{{model}}/{{dataset}}.parquet",
    log:
        f"{R}/logs/prompt_stats/{{model}}/{{dataset}}.log",
    benchmark:
        f"{R}/timings/prompt_stats/{{model}}/{{dataset}}.tsv"
    conda:
        "../envs/gpu.yaml" if VLLM_EVAL else "../envs/cpu.yaml"
    threads: config["threads"]
    resources:
        gpu=1 if VLLM_EVAL else 0,
    params:
        model_dir=lambda w: base_model_dir(w.model),
        settings=config["prompt_stats"],
        prompt_order=config["prompt"]["order"],
        chat_template=lambda w: runs_lib.chat_template(config, w.model),
        engine=config["eval"]["engine"],
        vllm=config["eval"]["vllm"],
        device=DEVICE,
        on_bad_row=lambda w: on_bad_row([w.dataset])[w.dataset],  # a prompt too long for the model: dropped or refused
        reproducible=config["reproducible"],
    script:
        "../workflow_scripts/prompt_stats.py"
