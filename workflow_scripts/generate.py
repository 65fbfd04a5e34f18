"""Rule generate: n samples per problem from one checkpoint (transformers on CPU)."""
from vicurl.data import schema
from vicurl.evaluation.generate import generate_records, write_records
from vicurl.workflow import setup

log = setup(snakemake)
ev = snakemake.params.eval
w = snakemake.wildcards
# the sampling seed follows the run's seed and the step, so reruns reproduce the samples
seed = int(w.seed) * 1_000_003 + int(w.step)
records = generate_records(
    snakemake.params.model_dir,
    schema.read(snakemake.input.problems),
    n=ev["n_samples"],
    temperature=ev["temperature"],
    top_p=ev["top_p"],
    max_new_tokens=ev["max_new_tokens"],
    seed=seed,
    batch_size=ev["batch_size"],
    prompt_order=snakemake.params.prompt_order,
    chat_template=snakemake.params.chat_template,
    threads=snakemake.threads,
)
write_records(records, snakemake.output[0])
log.info("%d samples -> %s", len(records), snakemake.output[0])
