"""Rule learning_curves: the grid of Pass@1 / Pass@8 curves of one study and model (step 0 = base model),
and the training curves of the same runs (training reward and oracle accuracy per step)."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

import pandas as pd

from vicurl.report.aggregate import read_metrics
from vicurl.report.curves import learning_curves_grid, training_curves_grid
from vicurl.runs import BASE
from vicurl.workflow import setup

log = setup(snakemake)
w, p = snakemake.wildcards, snakemake.params
study = p.study
scores = pd.read_csv(snakemake.input.scores)
runs = scores[(scores["study"] == w.study) & (scores["model"] == w.model)]
base = scores[(scores["study"] == BASE) & (scores["model"] == w.model) & scores["benchmark"].isin(study["benchmarks"])]
if base["seed"].isin(study["seeds"]).any():  # the base evaluations of this study's seeds
    base = base[base["seed"].isin(study["seeds"])]
starts = [base.assign(reward=r, curriculum=c) for r, cs in study["settings"].items() for c in cs if c in p.curricula]
data = pd.concat([*starts, runs], ignore_index=True)
metrics = [m for m in p.metrics if m in data.columns]
band = None if p.band == "none" else p.band
rewards = [r for r, cs in study["settings"].items() if set(cs) & set(p.curricula)]
learning_curves_grid(
    data, [snakemake.output.png, snakemake.output.pdf], metrics=metrics, rewards=rewards, curricula=p.curricula,
    benchmarks=study["benchmarks"], band=band, titles=p.titles, title=f"{p.model_label} ({w.study})",
)
metrics_rows = read_metrics(snakemake.input.metrics, p.runs)
training_curves_grid(metrics_rows, [snakemake.output.train_png, snakemake.output.train_pdf], rewards=rewards,
                     curricula=p.curricula, band=band, title=f"{p.model_label} ({w.study}), training")
log.info("learning curves of %s / %s: %d score rows, %d training steps", w.study, w.model, len(runs), len(metrics_rows))
