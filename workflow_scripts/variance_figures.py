"""Rule variance_figures: `vicurl.report.jobs.variance_figures`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report import jobs
from vicurl.runtime.workflow import setup

setup(snakemake)
p, o = snakemake.params, snakemake.output
jobs.variance_figures(probes=snakemake.input.probes, study=p.study, reward=p.reward, curriculum=p.curriculum,
                      models=p.models, titles=p.titles, ratio=[o.ratio_png, o.ratio_pdf],
                      absolute=[o.absolute_png, o.absolute_pdf])
