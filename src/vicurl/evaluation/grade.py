"""Grade sampled responses against the gold answers (no model text is ever evaluated).

``grade_records`` joins the samples (``problem_id``) with the normalized problems (``id``) and adds
``extracted`` (None: nothing found), ``correct``, ``no_answer`` and ``timeout`` (the comparison's CPU
budget ran out before a verdict); no answer and a timeout are scored incorrect.
Grading dispatches on ``answer_type`` through ``GRADERS``: per type a *batch* grader
``fn(texts, problems) -> list[(extracted, verdict)]`` (``vicurl.grading.graders``), so the math
grader can send its undecided pairs to the worker pool at once. ``register_grader`` adds or
replaces one, ``per_item`` wraps a one-response function. An answer type without a grader, or a
sample whose problem id is unknown, is an error naming it. See docs/evaluation.md.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from vicurl.grading.graders import ANSWER_TYPES, grader_for
from vicurl.grading.verdicts import TIMEOUT, Verdict

GradeResult = tuple["str | None", Verdict]
BatchGrader = Callable[[Sequence[str], Sequence[Mapping[str, Any]]], list[GradeResult]]


def per_item(fn: Callable[[str, Mapping[str, Any]], GradeResult]) -> BatchGrader:
    """Turn a grader of one response into a batch grader."""

    def batch(texts: Sequence[str], problems: Sequence[Mapping[str, Any]]) -> list[GradeResult]:
        return [fn(t, p) for t, p in zip(texts, problems)]

    batch.__name__ = getattr(fn, "__name__", "per_item")
    batch.__doc__ = fn.__doc__
    return batch


def _clean(extracted: str | None) -> str | None:
    """An empty ``\\boxed{}`` counts as no answer."""
    if extracted is None or not extracted.strip():
        return None
    return extracted


GRADERS: dict[str, BatchGrader] = {name: grader_for(name) for name in ANSWER_TYPES}


def register_grader(answer_type: str, fn: BatchGrader) -> None:
    """Add or replace the batch grader for ``answer_type``."""
    GRADERS[answer_type] = fn


def grade_records(samples: pd.DataFrame, problems: pd.DataFrame) -> pd.DataFrame:
    """Samples (``problem_id``, ``text``, ...) + problems (normalized schema) -> graded samples.

    Keeps every sample column and row order, and adds ``extracted``, ``correct``, ``no_answer``, ``timeout``.
    """
    for col in ("problem_id", "text"):
        if col not in samples.columns:
            raise ValueError(f"samples lack column {col!r}")
    for col in ("id", "answer", "answer_type"):
        if col not in problems.columns:
            raise ValueError(f"problems lack column {col!r}")
    prob = problems.copy()
    prob["id"] = prob["id"].astype(str)
    if prob["id"].duplicated().any():
        raise ValueError(f"duplicate problem id(s) {prob['id'][prob['id'].duplicated()].tolist()[:5]}")
    by_id = prob.set_index("id", drop=False)
    pids = samples["problem_id"].astype(str)
    unknown = sorted(set(pids) - set(by_id.index))
    if unknown:
        raise ValueError(f"sample(s) refer to problem id(s) not in the problems table: {unknown[:5]}"
                         + (f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""))
    types = by_id.loc[pids.unique(), "answer_type"] if len(pids) else pd.Series([], dtype=str)
    for pid, t in types.items():
        if t not in GRADERS:
            raise ValueError(f"no grader for answer_type {t!r} (problem id {pid!r}); "
                             f"known types: {sorted(GRADERS)}")

    out = samples.copy().reset_index(drop=True)
    pids = pids.reset_index(drop=True)
    extracted: list[str | None] = [None] * len(out)
    correct = [False] * len(out)
    timeout = [False] * len(out)
    row_types = by_id.loc[pids, "answer_type"].to_numpy() if len(out) else []
    texts = out["text"].tolist()
    records = {pid: row for pid, row in zip(by_id.index, by_id.to_dict("records"))}
    for t in sorted(set(row_types)):
        idx = [i for i, rt in enumerate(row_types) if rt == t]
        results = GRADERS[t]([texts[i] if isinstance(texts[i], str) else "" for i in idx],
                             [records[pids[i]] for i in idx])
        if len(results) != len(idx):
            raise RuntimeError(f"grader for {t!r} returned {len(results)} results for {len(idx)} samples")
        for i, (ex, ok) in zip(idx, results):
            extracted[i] = _clean(ex)
            correct[i] = bool(ok) and extracted[i] is not None
            timeout[i] = ok is TIMEOUT and extracted[i] is not None
    out["extracted"] = pd.Series(extracted, dtype=object)
    out["correct"] = pd.Series(correct, dtype=bool)
    out["no_answer"] = out["extracted"].isna().astype(bool)
    out["timeout"] = pd.Series(timeout, dtype=bool)
    return out
