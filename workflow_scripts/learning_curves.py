"""Rule learning_curves: `vicurl.report.jobs.learning_curves`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report import jobs
from vicurl.runtime.workflow import setup

setup(snakemake)
w, p, inp, out = snakemake.wildcards, snakemake.params, snakemake.input, snakemake.output
jobs.learning_curves(scores=inp.scores, metrics=inp.metrics, runs=p.runs, study_name=w.study, study=p.study,
                     model=w.model, curricula=p.curricula, ks_metrics=p.metrics, band=p.band, titles=p.titles,
                     model_label=p.model_label, png=out.png, pdf=out.pdf, train_png=out.train_png,
                     train_pdf=out.train_pdf)
