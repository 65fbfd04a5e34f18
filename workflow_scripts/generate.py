"""Rules generate_checkpoint / generate_run: `vicurl.evaluation.jobs.generate`.

Under `if __name__ == "__main__"`: vLLM starts its engine in a spawned process, which imports this
file again (as `__mp_main__`, without Snakemake's `snakemake` object)."""
import _checkout  # noqa: F401 (this repository's src/ first on sys.path)

from vicurl.evaluation import jobs
from vicurl.runtime.workflow import setup


def main(snakemake):
    setup(snakemake)
    p, w = snakemake.params, snakemake.wildcards
    jobs.generate(p.model_dir, dict(zip(p.benchmarks, snakemake.input.problems, strict=True)), snakemake.output[0],
                  eval=p.eval, run_seed=int(w.seed), step=getattr(w, "step", None),
                  on_bad_row=p.on_bad_row, prompt_order=p.prompt_order, chat_template=p.chat_template,
                  device=p.device, threads=snakemake.threads, reproducible=p.reproducible)


if __name__ == "__main__":
    main(snakemake)
