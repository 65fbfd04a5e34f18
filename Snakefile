# VI-CuRL reproduction workflow. Targets only; the rules live in rules/*.smk.
#   snakemake --cores all all                        # the CPU demo (config/demo.yaml)
#   snakemake all --cores all --configfile config/mini.yaml  # another config (the whole config)
#   snakemake --cores all tables                     # the tables from the results there are (table_{name}: one)
#   snakemake --cores all study_main                 # one study: its runs, evaluations, figures, tables
#   snakemake --profile slurm-a100 all               # the paper on a SLURM cluster (slurm-a100/config.yaml)
#   snakemake --report report.html                   # an HTML report of the tables and figures
from snakemake.utils import min_version

min_version("9.10")


# The demo when no --configfile is given; given ones are the whole config (layer them:
# --configfile config/demo.yaml my_overrides.yaml).
if not workflow.overwrite_configfiles:

    configfile: "config/demo.yaml"


report: "rules/captions/workflow.rst"


include: "rules/common.smk"


wildcard_constraints:
    study=_alt(STUDIES + [runs_lib.BASE]),
    model=_alt(config["models"]),
    setting=_alt(SETTINGS),
    reward=_alt(config["rewards"]),
    curriculum=_alt(config["curricula"]),
    dataset=_alt(config["datasets"]),
    bench=_alt(config["datasets"]),
    seed=r"\d+",
    step=r"\d+",


# a report target (tables, table_<name>, figures, report) reads the results there are: the report rules alone
if not REPORT_ONLY:

    include: "rules/data.smk"
    include: "rules/model.smk"
    include: "rules/train.smk"
    include: "rules/eval.smk"
    include: "rules/probe.smk"


include: "rules/report.smk"


localrules:
    all,
    data,
    models,
    train_all,
    eval_all,
    probes,
    tables,
    figures,
    report,


rule probes:
    input:
        [f"{R}/report/probes.csv"] if runs_lib.probes(config) else [],


rule all:
    default_target: True
    input:
        report_outputs(),


rule data:
    input:
        all_datasets(),


rule models:
    input:
        [base_model_dir(m) for m in config["models"] if base_model_input(m)],


rule train_all:
    input:
        all_runs(),


rule eval_all:
    input:
        all_scores(),


check_targets()  # rules/common.smk: unknown targets, a report target's missing results
