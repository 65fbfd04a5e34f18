"""Rule prompt_stats: k graded samples of the initial policy per training prompt -> per-prompt statistics
(sampled by `eval.engine`'s generator: vLLM on GPU clusters, transformers on the CPU). Under
`if __name__ == "__main__"`: vLLM's engine process imports this file again, without `snakemake`."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.curriculum.prompt_stats import offline_statistics
from vicurl.data import schema
from vicurl.runtime.io import atomic_path
from vicurl.runtime.workflow import setup


def main(snakemake):
    log = setup(snakemake)
    s = snakemake.params.settings
    stats = offline_statistics(
        snakemake.params.model_dir,
        schema.read(snakemake.input.problems),
        s,
        engine=snakemake.params.engine,
        vllm_args=snakemake.params.vllm,
        prompt_order=snakemake.params.prompt_order,
        chat_template=snakemake.params.chat_template,
        threads=snakemake.threads,
        device=snakemake.params.device,
        dataset=snakemake.wildcards.dataset,
        on_bad_row=snakemake.params.on_bad_row,  # a prompt too long for the model: dropped (no statistics) or refused
        reproducible=snakemake.params.reproducible,
    )
    with atomic_path(snakemake.output[0]) as tmp:
        stats.to_parquet(tmp, index=False)
    log.info("%d prompts x %d samples (%s): mean pass rate %.3f, mean semantic entropy %.3f",
             len(stats), s["k"], snakemake.params.engine, stats["pass_rate"].mean(), stats["semantic_entropy"].mean())


if __name__ == "__main__":
    main(snakemake)
