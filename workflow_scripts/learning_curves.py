"""Rule learning_curves: the grid of Pass@1 / Pass@8 curves of one study and model (step 0 = base model)."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
import pandas as pd

from vicurl.report.curves import learning_curves_grid
from vicurl.runs import BASE
from vicurl.workflow import setup

log = setup(snakemake)
w, p = snakemake.wildcards, snakemake.params
study = p.study
scores = pd.read_csv(snakemake.input[0])
runs = scores[(scores["study"] == w.study) & (scores["model"] == w.model)]
base = scores[(scores["study"] == BASE) & (scores["model"] == w.model) & scores["benchmark"].isin(study["benchmarks"])]
if base["seed"].isin(study["seeds"]).any():  # the base evaluations of this study's seeds
    base = base[base["seed"].isin(study["seeds"])]
starts = [base.assign(reward=r, curriculum=c) for r, cs in study["settings"].items() for c in cs if c in p.curricula]
data = pd.concat([*starts, runs], ignore_index=True)
metrics = [m for m in p.metrics if m in data.columns]
learning_curves_grid(
    data, [snakemake.output.png, snakemake.output.pdf], metrics=metrics,
    rewards=[r for r, cs in study["settings"].items() if set(cs) & set(p.curricula)],
    curricula=p.curricula, benchmarks=study["benchmarks"], band=None if p.band == "none" else p.band,
    titles=p.titles, title=f"{p.model_label} ({w.study})",
)
log.info("learning curves of %s / %s: %d score rows", w.study, w.model, len(runs))
