# The demo's base model: tokenizer and a tiny Llama-architecture model, supervised on worked solutions.


rule build_tiny_model:
    input:
        sft=lambda w: dataset_path(config["models"][w.model]["build"]["sft_split"]),
    output:
        directory(f"{R}/models/{{model}}/base"),
    log:
        f"{R}/logs/models/{{model}}.log",
    benchmark:
        f"{R}/timings/models/{{model}}.tsv"
    conda:
        "../envs/cpu.yaml"
    threads: config["build_threads"]  # fixed: the weights depend on the thread count
    params:
        build=lambda w: config["models"][w.model]["build"],
        prompt_order=config["prompt"]["order"],
    script:
        "../workflow_scripts/build_tiny_model.py"
