"""Rule table_vs_paper: a table's cells next to the paper's reported numbers (LaTeX and CSV)."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import pandas as pd

from vicurl.report.cells import table_cells
from vicurl.report.compare import compare_cells, render_comparison
from vicurl.report.layouts import table_spec
from vicurl.report.notes import table_notes
from vicurl.report.paper import load_paper_numbers, paper_cells
from vicurl.runtime.io import atomic_path, write_text
from vicurl.runtime.workflow import setup

log = setup(snakemake)
t = snakemake.params.table
spec = table_spec(t)
scores = pd.read_csv(snakemake.input.scores)
ours = table_cells(t, scores)
paper = paper_cells(load_paper_numbers(snakemake.input.paper), t["paper"])
if paper.empty:
    raise ValueError(f"{snakemake.input.paper}: no numbers for the paper's table {t['paper']!r}")
write_text(snakemake.output.tex, render_comparison(spec, ours, paper, table_notes(t, scores)))
diff = compare_cells(spec, ours, paper)
with atomic_path(snakemake.output.csv) as tmp:
    diff.to_csv(tmp, index=False)
both = diff.dropna(subset=["diff"])
log.info("table %s vs the paper's %s: %d cells, %d with both values, mean |diff| %.2f",
         t["name"], t["paper"], len(diff), len(both), both["diff"].abs().mean() if len(both) else float("nan"))
