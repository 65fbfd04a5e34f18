# Variance probes (the paper's "Does VI-CuRL Really Reduce Variance?"): per probed run and
# checkpoint, the action and problem variances of real per-rollout gradients, on the prompts
# the curriculum keeps and on the full batch (their table: rules/report.smk, probes_table).


rule probe:
    input:
        model=probe_model_input,
        base=lambda w: base_model_input(w.model),
        train_set=lambda w: dataset_path(config["studies"][w.study]["train_set"]),
    output:
        f"{R}/probes/{RUN}/step{{step}}.json",
    log:
        f"{R}/logs/probes/{RUN}/step{{step}}.log",
    benchmark:
        f"{R}/timings/probes/{RUN}/step{{step}}.tsv"
    conda:
        # GPU clusters: the training environment (CUDA torch, and the torch, transformers and verl
        # loss code that trained the probed checkpoints); the demo: the CPU one
        "../envs/gpu.yaml" if VERL_ENGINE else "../envs/cpu.yaml"
    threads: config["threads"]
    resources:
        gpu=1 if VERL_ENGINE else 0,
    params:
        checkpoint_dir=probe_model_dir,
        base_dir=lambda w: base_model_dir(w.model),
        settings=lambda w: runs_lib.train_settings(config, run_of(w)),
        probe=lambda w: runs_lib.probe_settings(config, run_of(w), int(w.step)),  # its block of `probes`
        device=DEVICE,
    script:
        "../workflow_scripts/probe.py"
