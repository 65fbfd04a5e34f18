"""Grade and score one checkpoint: every benchmark it is evaluated on, in one job.

``grade_checkpoint(samples, problems, ks, identity)`` takes each benchmark's sample records and
its problems table and returns the graded samples of all of them in one frame (``benchmark``
column first) and one score record per benchmark (``score.score`` plus ``identity`` and the
benchmark). The numbers are those of grading each benchmark alone: a benchmark's samples meet
only its own problems.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score


def grade_checkpoint(samples: Mapping[str, pd.DataFrame], problems: Mapping[str, pd.DataFrame],
                     ks: Iterable[int], identity: Mapping[str, Any]) -> tuple[pd.DataFrame, list[dict]]:
    if not samples:
        raise ValueError("a checkpoint with no benchmarks to grade")
    missing = [b for b in samples if b not in problems]
    if missing:
        raise ValueError(f"no problems table for benchmark(s) {missing}")
    graded, records = [], []
    for bench, df in samples.items():
        g = grade_records(df, problems[bench])
        records.append({**score(g, ks=ks), **identity, "benchmark": bench})
        graded.append(g.assign(benchmark=bench))
    out = pd.concat(graded, ignore_index=True)
    return out[["benchmark", *[c for c in out.columns if c != "benchmark"]]], records
