"""Rule generate: n samples per problem from one checkpoint (vLLM on GPUs, transformers on CPU)."""
from vicurl.data import schema
from vicurl.evaluation.records import write_records
from vicurl.workflow import setup

log = setup(snakemake)
ev = snakemake.params.eval
w = snakemake.wildcards
# the sampling seed follows the run's seed and the step, so reruns reproduce the samples
seed = int(w.seed) * 1_000_003 + int(w.step)
common = dict(
    n=ev["n_samples"],
    temperature=ev["temperature"],
    top_p=ev["top_p"],
    max_new_tokens=ev["max_new_tokens"],
    seed=seed,
    prompt_order=snakemake.params.prompt_order,
    chat_template=snakemake.params.chat_template,
)
problems = schema.read(snakemake.input.problems)
if ev["engine"] == "vllm":
    from vicurl.evaluation.vllm_generate import generate_records_vllm

    records = generate_records_vllm(snakemake.params.model_dir, problems, engine_args=ev["vllm"], **common)
else:
    from vicurl.evaluation.generate import generate_records

    records = generate_records(snakemake.params.model_dir, problems, batch_size=ev["batch_size"],
                               threads=snakemake.threads, **common)
write_records(records, snakemake.output[0])
log.info("%d samples (%s) -> %s", len(records), ev["engine"], snakemake.output[0])
