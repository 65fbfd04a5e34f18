"""What a table's reader must know that its cells do not show, as sentences printed under it.

``table_notes(t, scores)`` (``t``: a resolved table definition, ``scores``: the per-seed scores it reads):
- how many graded samples ran out of the grader's CPU budget (``n_timeouts``; scored incorrect, as the
  paper's checker would), when any did;
- which rows have another number of seeds than the rest, when they differ (a cut study beside a
  borrowed one, a seed that has not finished), since a mean of 1 seed and a mean of 5 read alike.
"""

from __future__ import annotations

import pandas as pd

from vicurl.report.cells import table_scores


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def seed_note(t: dict, scores: pd.DataFrame) -> str | None:
    """A sentence naming the rows whose numbers of seeds differ from the most common one; None when all agree."""
    counts: dict[str, int] = {}
    for block in t["blocks"]:
        for row in block["rows"]:
            read = table_scores(t, scores, [row])
            if not read.empty:
                counts.setdefault(row["label"] + (f" ({block['group']})" if block.get("group") else ""),
                                  int(read["seed"].nunique()))
    if len(set(counts.values())) < 2:
        return None
    usual = pd.Series(list(counts.values())).mode().max()
    others = {label: n for label, n in counts.items() if n != usual}
    listed = "; ".join(f"{label}: {_plural(n, 'seed')}" for label, n in others.items())
    return f"Rows differ in their numbers of seeds: {_plural(int(usual), 'seed')} each, but {listed}."


def timeout_note(t: dict, scores: pd.DataFrame) -> str | None:
    """A sentence counting the samples whose grading ran out of its CPU budget; None when none did."""
    read = table_scores(t, scores, [row for block in t["blocks"] for row in block["rows"]])
    if "n_timeouts" not in read.columns:
        return None
    n = int(read["n_timeouts"].fillna(0).sum())
    if n == 0:
        return None
    total = int((read["n_problems"] * read["n_samples"]).sum()) if {"n_problems", "n_samples"} <= set(read.columns) else None
    of = f" of {total:,}" if total else ""
    return (f"{_plural(n, 'graded sample')}{of} ran out of the grader's CPU budget before a verdict and "
            f"count as incorrect.")


def table_notes(t: dict, scores: pd.DataFrame) -> list[str]:
    return [n for n in (seed_note(t, scores), timeout_note(t, scores)) if n]
