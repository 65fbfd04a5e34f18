"""Rule grade: per-sample correctness of generated records (never regenerates), and their
pass@k and length statistics."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.records import read_records
from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score
from vicurl.io import atomic_path, write_json
from vicurl.runs import BASE
from vicurl.workflow import setup

log = setup(snakemake)
w = snakemake.wildcards
# a checkpoint's file (`eval.per_checkpoint`) holds every benchmark's samples: read this one's
samples = read_records(snakemake.input.samples, benchmark=w.bench if snakemake.params.per_checkpoint else None)
graded = grade_records(samples, schema.read(snakemake.input.problems))
result = score(graded, ks=snakemake.params.ks)
reward, curriculum = (BASE, BASE) if w.setting == BASE else w.setting.split("-", 1)
result.update(study=w.study, model=w.model, reward=reward, curriculum=curriculum, seed=int(w.seed), step=int(w.step), benchmark=w.bench)
with atomic_path(snakemake.output.graded) as tmp:
    graded.to_parquet(tmp, index=False)
write_json(snakemake.output.score, result)
log.info("graded %d samples: %.3f correct, %.3f no answer; %s", len(graded), graded["correct"].mean(),
         graded["no_answer"].mean(), {k: v for k, v in result.items() if k.startswith("pass@")})
