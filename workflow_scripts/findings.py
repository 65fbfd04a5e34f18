"""Rule findings: `vicurl.report.jobs.findings`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report import jobs
from vicurl.runtime.workflow import setup

setup(snakemake)
p, inp, out = snakemake.params, snakemake.input, snakemake.output
jobs.findings(scores=inp.scores, paper=inp.paper, metrics=inp.metrics, runs=p.runs, probes=inp.probes,
              benchmark_files=inp.benchmarks, base=inp.base, settings=p.findings, benchmarks=p.benchmarks,
              titles=p.titles, scenario=p.scenario, compared_settings=p.compared_settings,
              paper_settings=p.paper_settings, markdown=out.markdown, tex=out.tex, csv=out.csv)
