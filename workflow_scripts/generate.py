"""Rules generate / generate_checkpoint: n samples per problem of one checkpoint on one benchmark,
or on each of its benchmarks from one model load (vLLM on GPUs, transformers on CPU).

A problem whose prompt the model's context cannot hold with the whole response budget is dropped
and counted (in the samples file's metadata; grading records the count) or refuses the job,
naming the dataset and the row, as its dataset's `on_bad_row` says (vicurl.long_prompts)."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.engines import generate_sets_with
from vicurl.evaluation.records import combine, write_records
from vicurl.long_prompts import fit_sets
from vicurl.settings import SamplingSettings
from vicurl.workflow import setup

log = setup(snakemake)
ev = snakemake.params.eval
w = snakemake.wildcards
# the sampling seed follows the run's seed and the step, so reruns reproduce the samples
seed = int(w.seed) * 1_000_003 + int(w.step)
paths = dict(zip(snakemake.params.benchmarks, snakemake.input.problems, strict=True))
problem_sets, long_prompts = fit_sets(
    snakemake.params.model_dir,
    {b: schema.read(path) for b, path in paths.items()},
    max_new_tokens=ev["max_new_tokens"],
    policies=snakemake.params.on_bad_row,
    prompt_order=snakemake.params.prompt_order,
    chat_template=snakemake.params.chat_template,
    max_model_len=(ev["vllm"] or {}).get("max_model_len") if ev["engine"] == "vllm" else None,
    sources={b: f"{b} ({path})" for b, path in paths.items()},
)
records = generate_sets_with(
    ev["engine"],
    snakemake.params.model_dir,
    problem_sets,
    SamplingSettings(n=ev["n_samples"], temperature=ev["temperature"], top_p=ev["top_p"],
                     max_new_tokens=ev["max_new_tokens"], seed=seed, prompt_order=snakemake.params.prompt_order,
                     chat_template=snakemake.params.chat_template),
    batch_size=ev["batch_size"],
    threads=snakemake.threads,
    device=snakemake.params.device,
    vllm_args=ev["vllm"],
)
if snakemake.rule == "generate":  # one benchmark's file
    write_records(records[w.bench], snakemake.output[0], meta={"long_prompts": {w.bench: long_prompts[w.bench]}})
else:  # the checkpoint's file: every benchmark, with a `benchmark` column
    write_records(combine(records), snakemake.output[0], meta={"long_prompts": long_prompts})
log.info("%s samples (%s) -> %s", {b: len(r) for b, r in records.items()}, ev["engine"], snakemake.output[0])
