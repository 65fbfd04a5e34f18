"""Rule grade: per-sample correctness of one checkpoint's generated records on each of its
benchmarks (never regenerates), and their pass@k and length statistics."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.checkpoint import grade_checkpoint
from vicurl.evaluation.records import read_records
from vicurl.io import atomic_path, write_json
from vicurl.runs import BASE
from vicurl.workflow import setup

log = setup(snakemake)
w, p = snakemake.wildcards, snakemake.params
if p.per_checkpoint:  # the checkpoint's one file holds every benchmark's samples
    samples = {b: read_records(snakemake.input.samples[0], benchmark=b) for b in p.benchmarks}
else:
    samples = {b: read_records(path) for b, path in zip(p.benchmarks, snakemake.input.samples)}
problems = {b: schema.read(path) for b, path in zip(p.benchmarks, snakemake.input.problems)}
reward, curriculum = (BASE, BASE) if w.setting == BASE else w.setting.split("-", 1)
identity = dict(study=w.study, model=w.model, reward=reward, curriculum=curriculum, seed=int(w.seed), step=int(w.step))
graded, scores = grade_checkpoint(samples, problems, ks=p.ks, identity=identity)
with atomic_path(snakemake.output.graded) as tmp:
    graded.to_parquet(tmp, index=False)
write_json(snakemake.output.scores, scores)
for s in scores:
    log.info("%s: %d samples graded, %s", s["benchmark"], s["n_problems"] * s["n_samples"],
             {k: round(v, 4) for k, v in s.items() if k.startswith("pass@") or k == "no_answer_rate"})
