"""Rule grade: per-sample correctness of one run's evaluated checkpoints on each of their
benchmarks (never regenerates), their pass@k and length statistics (`scores.json`, one record per
step and benchmark) and the verdicts (`graded.parquet`; the texts stay in the sample files). Problems that
generation dropped as too long for the model are not scored; each record counts them (`n_long_prompts_dropped`)."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.checkpoint import grade_run
from vicurl.evaluation.records import dropped_problems, read_meta, read_records
from vicurl.io import atomic_path, write_json
from vicurl.runs import Run
from vicurl.workflow import setup

log = setup(snakemake)
w, p = snakemake.wildcards, snakemake.params
by_run = p.generate_per == "run"  # a run's file holds every step it owns (rules/common.smk step_sample_files)


def checkpoints():
    """(step, benchmark -> samples), one checkpoint read at a time."""
    for step, paths in zip(p.steps, p.step_files, strict=True):
        if p.generate_per == "benchmark":
            yield step, {b: read_records(path) for b, path in zip(p.benchmarks, paths, strict=True)}
        else:  # one file holds every benchmark's samples (and a run's, every step's)
            yield step, {b: read_records(paths[0], benchmark=b, step=step if by_run else None) for b in p.benchmarks}


def dropped():
    """step -> benchmark -> problems generation dropped as too long for the model (the files' metadata)."""
    out = {}
    for step, paths in zip(p.steps, p.step_files, strict=True):
        for path in paths:
            out.setdefault(int(step), {}).update(dropped_problems(read_meta(path), step if by_run else None))
    return out


problems = {b: schema.read(path) for b, path in zip(p.benchmarks, snakemake.input.problems)}
verdicts, scores = grade_run(checkpoints(), problems, ks=p.ks, identity=Run.from_wildcards(w).identity(),
                             dropped=dropped())
with atomic_path(snakemake.output.graded) as tmp:
    verdicts.to_parquet(tmp, index=False)
write_json(snakemake.output.scores, scores)
for s in scores:
    log.info("step %d, %s: %d samples graded, %s", s["step"], s["benchmark"], s["n_problems"] * s["n_samples"],
             {k: round(v, 4) for k, v in s.items() if k.startswith("pass@") or k == "no_answer_rate"})
    if s["n_long_prompts_dropped"]:
        log.warning("step %d, %s: %d problems not scored: generation dropped them as too long for the model "
                    "(the generate job's log names them)", s["step"], s["benchmark"], s["n_long_prompts_dropped"])
