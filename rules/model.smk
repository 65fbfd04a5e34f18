# The demo's base model: tokenizer and a tiny Qwen2 model, supervised on worked solutions.


rule build_tiny_model:
    input:
        sft=lambda w: dataset_path(config["models"][w.model]["build"]["sft_split"]),
    output:
        directory(f"{R}/models/{{model}}/base"),
    params:
        build=lambda w: config["models"][w.model]["build"],
        prompt_order=config["prompt"]["order"],
    threads: config["threads"]
    log:
        f"{R}/logs/models/{{model}}.log",
    benchmark:
        f"{R}/benchmarks/models/{{model}}.tsv"
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/build_tiny_model.py"
