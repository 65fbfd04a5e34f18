"""Grade and score a run's evaluated checkpoints: every benchmark of every checkpoint, in one job.

``grade_checkpoint(samples, problems, ks, identity)``: the graded samples of all benchmarks in one
frame (``benchmark`` first) and one score record per benchmark (``score.score`` plus ``identity``),
the numbers of grading each benchmark alone (its samples meet only its own problems). Problems
generation dropped for a too-long prompt (``dropped``, from ``records.read_meta``) are neither
graded nor scored as wrong, and counted (``n_long_prompts_dropped`` beside ``n_problems``).
``grade_run`` does this per (step, samples) of a run, one checkpoint in memory at a time, and
returns the verdicts (``VERDICT_COLUMNS``: without the response text, which stays in the sample
files) and one score record per (step, benchmark).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score

VERDICT_COLUMNS = ["step", "benchmark", "problem_id", "sample_idx", "extracted", "correct", "no_answer",
                   "timeout", "n_tokens", "truncated"]


def grade_checkpoint(samples: Mapping[str, pd.DataFrame], problems: Mapping[str, pd.DataFrame],
                     ks: Iterable[int], identity: Mapping[str, Any],
                     dropped: Mapping[str, int] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """``dropped``: per benchmark, its problems left out for a prompt too long for the model (none
    given: the records carry no count)."""
    if not samples:
        raise ValueError("a checkpoint with no benchmarks to grade")
    missing = [b for b in samples if b not in problems]
    if missing:
        raise ValueError(f"no problems table for benchmark(s) {missing}")
    graded, records = [], []
    for bench, df in samples.items():
        g = grade_records(df, problems[bench])
        counts = {} if dropped is None else {"n_long_prompts_dropped": int(dropped.get(bench, 0))}
        records.append({**score(g, ks=ks), **counts, **identity, "benchmark": bench})
        graded.append(g.assign(benchmark=bench))
    out = pd.concat(graded, ignore_index=True)
    return out[["benchmark", *[c for c in out.columns if c != "benchmark"]]], records


def grade_run(checkpoints: Iterable[tuple[int, Mapping[str, pd.DataFrame]]], problems: Mapping[str, pd.DataFrame],
              ks: Iterable[int], identity: Mapping[str, Any],
              dropped: Mapping[int, Mapping[str, int]] | None = None) -> tuple[pd.DataFrame, list[dict]]:
    """``checkpoints``: (step, benchmark -> samples) pairs, e.g. a generator reading each step's file
    when it is its turn. ``identity``: the run's keys without ``step``. ``dropped``: per step, the
    ``grade_checkpoint`` counts (a step without an entry dropped nothing)."""
    ks = list(ks)
    verdicts, records = [], []
    for step, samples in checkpoints:
        counts = None if dropped is None else dropped.get(int(step), {})
        graded, recs = grade_checkpoint(samples, problems, ks, {**identity, "step": int(step)}, counts)
        verdicts.append(graded.assign(step=int(step))[VERDICT_COLUMNS])
        records += recs
    if not verdicts:
        raise ValueError("a run with no checkpoints to grade")
    return pd.concat(verdicts, ignore_index=True), records
