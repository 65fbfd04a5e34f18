"""Rule findings of a claims file or a pre-registration: `vicurl.report.jobs.claim_findings`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.report import jobs
from vicurl.runtime.workflow import setup

setup(snakemake)
p, inp, out = snakemake.params, snakemake.input, snakemake.output
scores = {path.rsplit("/", 1)[-1].removesuffix(".csv"): path for path in inp.scores}
jobs.claim_findings(claims=p.claims, scores=scores, probes=inp.probes, studies=p.studies, alpha=p.alpha,
                    source=p.source, departed=p.departed, scenario=p.scenario, markdown=out.markdown, tex=out.tex,
                    csv=out.csv)
