# The initial policies: the demo's is built here (a tokenizer and a tiny Llama-architecture model, supervised
# on worked solutions); a Hub model is fetched once, at one commit, into the results folder.
# fetch_model runs on the host that runs Snakemake (like prepare_dataset): compute nodes need no internet and
# no Hub token, and the study's jobs all load the same files.
localrules:
    fetch_model,


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


rule fetch_model:
    """A Hub model's files at one commit -> the folder every job loads + manifest (vicurl.models.fetch)."""
    output:
        model=directory(f"{R}/models/{{model}}/hub"),
        manifest=f"{R}/models/{{model}}/hub.json",
    log:
        f"{R}/logs/models/{{model}}.fetch.log",
    wildcard_constraints:
        model=_alt(HUB_MODELS),
    conda:
        "../envs/fetch.yaml"
    params:
        hub_id=lambda w: config["models"][w.model]["hub_id"],
        # the config's revision, or what the kept commit was asked for (a pin of it reruns nothing)
        revision=lambda w: fetch_lib.request(
            config["models"][w.model]["hub_id"], config["models"][w.model].get("revision"), HUB_COMMITS
        ),
    script:
        "../workflow_scripts/fetch_model.py"
