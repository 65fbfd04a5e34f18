"""Rule grade: per-sample correctness of generated records (never regenerates)."""
from vicurl.data import schema
from vicurl.evaluation.generate import read_records
from vicurl.evaluation.grade import grade_records
from vicurl.io import atomic_path
from vicurl.workflow import setup

log = setup(snakemake)
graded = grade_records(read_records(snakemake.input.samples), schema.read(snakemake.input.problems))
with atomic_path(snakemake.output[0]) as tmp:
    graded.to_parquet(tmp, index=False)
log.info("graded %d samples: %.3f correct, %.3f no answer", len(graded), graded["correct"].mean(), graded["no_answer"].mean())
