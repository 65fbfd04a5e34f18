"""The evaluation's jobs as functions of paths and settings (the rules `generate_checkpoint`,
`generate_run` and `grade` call them; so can a Python session), and the one owner of the samples
files' layout: a checkpoint's file holds every benchmark (a ``benchmark`` column), a run's file
every checkpoint the run owns (and a ``step`` column; `vicurl.evaluation.records`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pandas as pd

from vicurl.data import schema
from vicurl.evaluation.records import combine, combine_steps, dropped_problems, read_meta, read_records, write_records
from vicurl.runtime.io import atomic_path, write_json

log = logging.getLogger(__name__)

LAYOUTS = ("checkpoint", "run")  # `eval.generate_per`


def sampling_seed(run_seed: int, step: int) -> int:
    """The evaluation's sampling seed: it follows the run's seed and the step. A rerun reproduces the samples
    on the transformers path, and through vLLM where ``reproducible`` seeds every request (on a GPU with
    batch-invariant kernels); by default vLLM's engine stream alone is seeded (docs/gpu.md, "Reproducibility")."""
    return int(run_seed) * 1_000_003 + int(step)


def generate(model_dir: str | Mapping[int, str], problems: Mapping[str, str | Path], out: str | Path, *,
             eval: Mapping[str, Any], run_seed: int, step: int | None = None,
             on_bad_row: Mapping[str, str] | str = "fail", prompt_order: str = "question_first",
             chat_template: bool | str = "auto", device: str = "auto", threads: int = 1,
             reproducible: bool = False) -> None:
    """Samples of one checkpoint (``model_dir`` a path, at ``step``) on every benchmark of ``problems``
    (name -> problems file), or of every checkpoint of a run (``model_dir``: step -> path), written
    to ``out`` in that layout. A problem whose prompt the model's context cannot hold with the
    response budget is dropped and counted (the file's metadata) or refuses the job, as its
    ``on_bad_row`` says (`vicurl.data.long_prompts.fit_sets`). ``eval``: the config's `eval` settings;
    ``reproducible``: the config key (`vicurl.config.settings.SamplingSettings`)."""
    sets = {b: schema.read(path) for b, path in problems.items()}
    sources = {b: f"{b} ({path})" for b, path in problems.items()}
    kw = dict(eval=eval, run_seed=run_seed, on_bad_row=on_bad_row, prompt_order=prompt_order,
              chat_template=chat_template, device=device, threads=threads, sources=sources, reproducible=reproducible)
    if isinstance(model_dir, Mapping):  # a run's file
        by_step = {int(s): _generate_checkpoint(d, sets, step=int(s), **kw) for s, d in model_dir.items()}
        write_records(combine_steps({s: combine(records) for s, (records, _) in by_step.items()}), out,
                      meta={"steps": {str(s): {"long_prompts": dropped} for s, (_, dropped) in by_step.items()}})
    else:  # a checkpoint's file
        records, long_prompts = _generate_checkpoint(model_dir, sets, step=int(step), **kw)
        write_records(combine(records), out, meta={"long_prompts": long_prompts})
    log.info("-> %s", out)


def _generate_checkpoint(model_dir, sets, *, step, eval, run_seed, on_bad_row, prompt_order, chat_template,
                         device, threads, sources, reproducible):
    """Every benchmark's records of one checkpoint, and what was left out as too long for it."""
    from vicurl.config.settings import SamplingSettings
    from vicurl.data.long_prompts import fit_sets
    from vicurl.evaluation.engines import generate_sets_with

    problem_sets, long_prompts = fit_sets(
        model_dir, sets, max_new_tokens=eval["max_new_tokens"], policies=on_bad_row,
        prompt_order=prompt_order, chat_template=chat_template,
        max_model_len=(eval["vllm"] or {}).get("max_model_len") if eval["engine"] == "vllm" else None,
        sources=sources,
    )
    sampling = SamplingSettings(n=eval["n_samples"], temperature=eval["temperature"], top_p=eval["top_p"],
                                max_new_tokens=eval["max_new_tokens"], seed=sampling_seed(run_seed, step),
                                prompt_order=prompt_order, chat_template=chat_template, reproducible=reproducible)
    records = generate_sets_with(eval["engine"], model_dir, problem_sets, sampling, batch_size=eval["batch_size"],
                                 threads=threads, device=device, vllm_args=eval["vllm"])
    log.info("step %d: %s samples (%s) of %s", step, {b: len(r) for b, r in records.items()}, eval["engine"], model_dir)
    return records, long_prompts


def checkpoints(step_files: Sequence[str | Path], steps: Sequence[int], benchmarks: Sequence[str],
                layout: str) -> Iterator[tuple[int, dict[str, pd.DataFrame]]]:
    """(step, benchmark -> samples) of each evaluated step, read one checkpoint at a time from the
    file holding it (``step_files[i]``: step ``steps[i]``'s file, a checkpoint's or its run's)."""
    by_run = _by_run(layout)
    for step, path in zip(steps, step_files, strict=True):
        yield int(step), {b: read_records(path, benchmark=b, step=step if by_run else None) for b in benchmarks}


def dropped(step_files: Sequence[str | Path], steps: Sequence[int], layout: str) -> dict[int, dict[str, int]]:
    """step -> benchmark -> problems generation dropped as too long for the model (the files' metadata)."""
    by_run = _by_run(layout)
    return {int(step): dropped_problems(read_meta(path), step if by_run else None)
            for step, path in zip(steps, step_files, strict=True)}


def _by_run(layout: str) -> bool:
    if layout not in LAYOUTS:
        raise ValueError(f"eval.generate_per: {layout!r} is not one of {list(LAYOUTS)}")
    return layout == "run"


def grade(step_files: Sequence[str | Path], steps: Sequence[int], problems: Mapping[str, str | Path], *,
          ks: Sequence[int], identity: Mapping[str, Any], layout: str, graded: str | Path,
          scores: str | Path) -> list[dict]:
    """Grade and score a run's evaluated checkpoints (`vicurl.evaluation.checkpoint.grade_run`): the
    verdicts to ``graded`` (parquet; the texts stay in the sample files), one score record per step
    and benchmark to ``scores`` (JSON). Problems generation dropped are counted, not scored."""
    from vicurl.evaluation.checkpoint import grade_run

    sets = {b: schema.read(path) for b, path in problems.items()}
    verdicts, records = grade_run(checkpoints(step_files, steps, list(problems), layout), sets, ks=ks,
                                  identity=identity, dropped=dropped(step_files, steps, layout))
    with atomic_path(graded) as tmp:
        verdicts.to_parquet(tmp, index=False)
    write_json(scores, records)
    for s in records:
        log.info("step %d, %s: %d samples graded, %s", s["step"], s["benchmark"], s["n_problems"] * s["n_samples"],
                 {k: round(v, 4) for k, v in s.items() if k.startswith("pass@") or k == "no_answer_rate"})
        if s["n_long_prompts_dropped"]:
            log.warning("step %d, %s: %d problems not scored: generation dropped them as too long for the model "
                        "(the generate job's log names them)", s["step"], s["benchmark"], s["n_long_prompts_dropped"])
    return records
