# Dataset preparation: every set is written in the normalized schema (vicurl.data.schema).


rule synthetic_data:
    """All splits of the synthetic task at once (they are generated jointly to stay disjoint)."""
    output:
        [dataset_path(s) for s in config.get("synthetic", {}).get("splits", {})],
    params:
        splits=config.get("synthetic", {}).get("splits", {}),
        seed=config.get("synthetic", {}).get("seed", 0),
    log:
        f"{R}/logs/data/synthetic.log",
    conda:
        "../envs/cpu.yaml"
    script:
        "../workflow_scripts/synthetic_data.py"
