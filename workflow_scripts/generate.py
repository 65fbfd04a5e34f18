"""Rules generate / generate_checkpoint / generate_run: n samples per problem of one checkpoint on
one benchmark, or on each of its benchmarks from one model load, or of every checkpoint a run owns
(one job paying the imports once; `eval.generate_per`). vLLM on GPUs, transformers on CPU.

A problem whose prompt the model's context cannot hold with the whole response budget is dropped
and counted (in the samples file's metadata; grading records the count) or refuses the job,
naming the dataset and the row, as its dataset's `on_bad_row` says (vicurl.long_prompts).

The job runs under `if __name__ == "__main__"`: vLLM starts its engine in a spawned process, which
imports this file again (as `__mp_main__`, without Snakemake's `snakemake` object)."""
import _checkout  # noqa: F401,I001  (this repository's src/ first on sys.path)
from vicurl.data import schema
from vicurl.evaluation.engines import generate_sets_with
from vicurl.evaluation.records import combine, combine_steps, write_records
from vicurl.long_prompts import fit_sets
from vicurl.settings import SamplingSettings
from vicurl.workflow import setup


def generate(snakemake, log, problems: dict, paths: dict, model_dir: str, step: int):
    """Every benchmark's records of one checkpoint, and what was left out as too long for it."""
    ev, p, w = snakemake.params.eval, snakemake.params, snakemake.wildcards
    problem_sets, long_prompts = fit_sets(
        model_dir, problems, max_new_tokens=ev["max_new_tokens"], policies=p.on_bad_row,
        prompt_order=p.prompt_order, chat_template=p.chat_template,
        max_model_len=(ev["vllm"] or {}).get("max_model_len") if ev["engine"] == "vllm" else None,
        sources={b: f"{b} ({path})" for b, path in paths.items()},
    )
    # the sampling seed follows the run's seed and the step, so reruns reproduce the samples
    sampling = SamplingSettings(n=ev["n_samples"], temperature=ev["temperature"], top_p=ev["top_p"],
                                max_new_tokens=ev["max_new_tokens"], seed=int(w.seed) * 1_000_003 + int(step),
                                prompt_order=p.prompt_order, chat_template=p.chat_template)
    records = generate_sets_with(ev["engine"], model_dir, problem_sets, sampling, batch_size=ev["batch_size"],
                                 threads=snakemake.threads, device=p.device, vllm_args=ev["vllm"])
    log.info("step %d: %s samples (%s) of %s", step, {b: len(r) for b, r in records.items()}, ev["engine"], model_dir)
    return records, long_prompts


def main(snakemake):
    log = setup(snakemake)
    p, w = snakemake.params, snakemake.wildcards
    paths = dict(zip(p.benchmarks, snakemake.input.problems, strict=True))
    problems = {b: schema.read(path) for b, path in paths.items()}
    out = snakemake.output[0]
    if snakemake.rule == "generate_run":  # the run's file: every checkpoint it owns, with a `step` column
        by_step = {int(step): generate(snakemake, log, problems, paths, model_dir, int(step))
                   for step, model_dir in p.model_dir.items()}
        write_records(combine_steps({step: combine(records) for step, (records, _) in by_step.items()}), out,
                      meta={"steps": {str(step): {"long_prompts": dropped} for step, (_, dropped) in by_step.items()}})
    else:
        records, long_prompts = generate(snakemake, log, problems, paths, p.model_dir, int(w.step))
        if snakemake.rule == "generate":  # one benchmark's file
            write_records(records[w.bench], out, meta={"long_prompts": {w.bench: long_prompts[w.bench]}})
        else:  # the checkpoint's file: every benchmark, with a `benchmark` column
            write_records(combine(records), out, meta={"long_prompts": long_prompts})
    log.info("-> %s", out)


if __name__ == "__main__":
    main(snakemake)  # noqa: F821 (Snakemake defines it)
