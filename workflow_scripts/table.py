"""Rule table: the study's Pass@k table in the paper's LaTeX style."""
import pandas as pd

from vicurl.io import write_text
from vicurl.report.tables import study_table
from vicurl.workflow import setup

log = setup(snakemake)
w = snakemake.wildcards
cells = pd.read_csv(snakemake.input[0])
tex = study_table(cells, w.study, snakemake.params.study, snakemake.params.models, snakemake.params.datasets,
                  step=int(snakemake.params.step), metric=f"pass@{w.k}")
write_text(snakemake.output[0], tex)
