# Dataset preparation: every set is written in the normalized schema (vicurl.data.schema).


# prepare_dataset downloads from the Hub (unless `local_path` is set): it runs on the host that
# runs Snakemake, where cluster compute nodes without internet are no obstacle.
localrules:
    prepare_dataset,


rule synthetic_data:
    """All splits of the synthetic task at once (they are generated jointly to stay disjoint)."""
    output:
        [dataset_path(s) for s in config.get("synthetic", {}).get("splits", {})],
    log:
        f"{R}/logs/data/synthetic.log",
    conda:
        "../envs/cpu.yaml"
    params:
        splits=config.get("synthetic", {}).get("splits", {}),
        seed=config.get("synthetic", {}).get("seed", 0),
    script:
        "../workflow_scripts/synthetic_data.py"


rule prepare_dataset:
    """One real set (Hub or `local_path`) -> normalized parquet + manifest (vicurl.data.prepare)."""
    input:
        lambda w: sources_lib.local_inputs(config["datasets"][w.dataset]),
    output:
        data=f"{R}/data/{{dataset}}.parquet",
        manifest=f"{R}/data/{{dataset}}.manifest.json",
    log:
        f"{R}/logs/data/{{dataset}}.log",
    wildcard_constraints:
        dataset=_alt(PREPARED),
    conda:
        "../envs/cpu.yaml"
    params:
        cfg=lambda w: config["datasets"][w.dataset],
    script:
        "../workflow_scripts/prepare_dataset.py"
