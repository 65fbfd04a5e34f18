"""Rule table: one table of the config's `tables:` as LaTeX in the paper's style, and its cells as CSV."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import pandas as pd

from vicurl.report.cells import table_cells
from vicurl.report.latex import render
from vicurl.report.layouts import table_spec
from vicurl.report.notes import table_notes
from vicurl.runtime.io import atomic_path, write_text
from vicurl.runtime.workflow import setup

log = setup(snakemake)
t = snakemake.params.table
scores = pd.read_csv(snakemake.input.scores)
cells = table_cells(t, scores)
write_text(snakemake.output.tex, render(table_spec(t), cells, table_notes(t, scores)))
with atomic_path(snakemake.output.cells) as tmp:
    cells.to_csv(tmp, index=False)
log.info("table %s (%s): %d cells", t["name"], t["type"], len(cells))
