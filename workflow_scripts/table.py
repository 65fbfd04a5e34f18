"""Rule table: one table of the config's `tables:`: the per-seed scores it reads (params.keep, from the
runs' ``scores.json``), as LaTeX in the paper's style, and its cells as CSV."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
import pandas as pd

from vicurl.io import atomic_path, write_text
from vicurl.report.aggregate import collect, read_scores
from vicurl.report.cells import table_cells
from vicurl.report.latex import render
from vicurl.report.layouts import table_spec
from vicurl.workflow import setup

log = setup(snakemake)
t = snakemake.params.table
scores = collect(read_scores(snakemake.input, keep=snakemake.params.keep))
with atomic_path(snakemake.output.scores) as tmp:
    scores.to_csv(tmp, index=False)
cells = table_cells(t, pd.read_csv(snakemake.output.scores))  # as table_vs_paper reads them
write_text(snakemake.output.tex, render(table_spec(t), cells))
with atomic_path(snakemake.output.cells) as tmp:
    cells.to_csv(tmp, index=False)
log.info("table %s (%s): %d cells", t["name"], t["type"], len(cells))
