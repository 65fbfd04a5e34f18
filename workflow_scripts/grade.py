"""Rule grade: `vicurl.evaluation.jobs.grade` (never regenerates)."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.config.runs import Run
from vicurl.evaluation import jobs
from vicurl.runtime.workflow import setup

setup(snakemake)
p = snakemake.params
jobs.grade(p.step_files, p.steps, dict(zip(p.benchmarks, snakemake.input.problems, strict=True)), ks=p.ks,
           identity=Run.from_wildcards(snakemake.wildcards).identity(), layout=p.generate_per,
           graded=snakemake.output.graded, scores=snakemake.output.scores)
