"""Rules generate / generate_checkpoint: n samples per problem of one checkpoint on one benchmark,
or on each of its benchmarks from one model load (vLLM on GPUs, transformers on CPU)."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.engines import generate_sets_with
from vicurl.evaluation.records import combine, write_records
from vicurl.workflow import setup

log = setup(snakemake)
ev = snakemake.params.eval
w = snakemake.wildcards
# the sampling seed follows the run's seed and the step, so reruns reproduce the samples
seed = int(w.seed) * 1_000_003 + int(w.step)
problem_sets = {b: schema.read(p) for b, p in zip(snakemake.params.benchmarks, snakemake.input.problems, strict=True)}
records = generate_sets_with(
    ev["engine"],
    snakemake.params.model_dir,
    problem_sets,
    n=ev["n_samples"],
    temperature=ev["temperature"],
    top_p=ev["top_p"],
    max_new_tokens=ev["max_new_tokens"],
    seed=seed,
    prompt_order=snakemake.params.prompt_order,
    chat_template=snakemake.params.chat_template,
    batch_size=ev["batch_size"],
    threads=snakemake.threads,
    device=snakemake.params.device,
    vllm_args=ev["vllm"],
)
if snakemake.rule == "generate":  # one benchmark's file
    write_records(records[w.bench], snakemake.output[0])
else:  # the checkpoint's file: every benchmark, with a `benchmark` column
    write_records(combine(records), snakemake.output[0])
log.info("%s samples (%s) -> %s", {b: len(r) for b, r in records.items()}, ev["engine"], snakemake.output[0])
