"""Score one run's graded samples on one benchmark.

``score(graded, ks=(1, 8))`` returns a JSON-ready dict:

n_problems       int    problems in the benchmark
n_samples        int    samples per problem (every problem must have the same n)
pass@k           float  for each k: mean over problems of the unbiased pass@k, a fraction in [0, 1]
no_answer_rate   float  fraction of samples with nothing extractable
n_timeouts       int    samples whose comparison ran out of its CPU budget (scored incorrect)
truncated_rate   float  fraction of samples that hit max_new_tokens without EOS
mean_length      float  mean response length in tokens (``n_tokens``)
p90_length       float  90th percentile of response length (linear interpolation)
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from vicurl.evaluation.passk import pass_at_k_array

REQUIRED = ("problem_id", "correct", "no_answer", "truncated", "n_tokens")


def score(graded: pd.DataFrame, ks: Iterable[int] = (1, 8)) -> dict:
    missing = [c for c in REQUIRED if c not in graded.columns]
    if missing:
        raise ValueError(f"graded records lack column(s) {missing}")
    if len(graded) == 0:
        raise ValueError("cannot score an empty set of graded records")
    if "sample_idx" in graded.columns:
        dup = graded.duplicated(["problem_id", "sample_idx"])
        if dup.any():
            first = graded.loc[dup, ["problem_id", "sample_idx"]].iloc[0].tolist()
            raise ValueError(f"duplicate (problem_id, sample_idx) record(s), e.g. {first}")
    g = graded.groupby(graded["problem_id"].astype(str), sort=True)["correct"]
    n = g.size()
    c = g.sum().astype(np.int64)
    if n.nunique() != 1:
        counts = n.value_counts().sort_index().to_dict()
        raise ValueError(f"problems have different sample counts {counts} (n -> number of problems); "
                         f"every problem needs the same n")
    n_samples = int(n.iloc[0])
    out: dict = {"n_problems": int(len(n)), "n_samples": n_samples}
    for k in ks:
        out[f"pass@{int(k)}"] = float(pass_at_k_array(n.to_numpy(np.int64), c.to_numpy(), int(k)).mean())
    lengths = graded["n_tokens"].to_numpy(dtype=np.float64)
    out["no_answer_rate"] = float(graded["no_answer"].astype(bool).mean())
    out["n_timeouts"] = int(graded["timeout"].astype(bool).sum()) if "timeout" in graded.columns else 0
    out["truncated_rate"] = float(graded["truncated"].astype(bool).mean())
    out["mean_length"] = float(lengths.mean())
    out["p90_length"] = float(np.percentile(lengths, 90))
    return out
