"""The per-sample records of an evaluation, as stored between generation and grading.

problem_id  str   the problem's ``id`` in the normalized schema
sample_idx  int   0 .. n-1 within the problem
text        str   decoded response (special tokens removed)
n_tokens    int   response tokens up to and including the first EOS (max_new_tokens if truncated)
truncated   bool  no EOS within ``max_new_tokens``

Both generation paths (transformers on CPU, vLLM on GPUs) write these columns. A checkpoint's file
(`eval.per_checkpoint`) holds every benchmark's records, with a ``benchmark`` column in front. This module
imports neither torch nor transformers, so grading jobs start fast.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from vicurl.io import atomic_path

RECORD_COLUMNS = ["problem_id", "sample_idx", "text", "n_tokens", "truncated"]
DTYPES = {"problem_id": str, "sample_idx": "int64", "text": str, "n_tokens": "int64", "truncated": bool}


def empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=DTYPES[c]) for c in RECORD_COLUMNS})


def write_records(df: pd.DataFrame, path: str | Path) -> None:
    """Write records as parquet atomically (a killed job leaves no partial file)."""
    missing = [c for c in RECORD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"records lack column(s) {missing}")
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def combine(records: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Several benchmarks' records in one frame (a checkpoint's file), with a ``benchmark`` column."""
    frames = [df.assign(benchmark=name) for name, df in records.items()]
    if not frames:
        raise ValueError("no records to combine")
    return pd.concat(frames, ignore_index=True)[["benchmark", *RECORD_COLUMNS]]


def read_records(path: str | Path, benchmark: str | None = None) -> pd.DataFrame:
    """The records in ``path``; from a checkpoint's file, those of ``benchmark``."""
    df = pd.read_parquet(path)
    missing = [c for c in RECORD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: records lack column(s) {missing}")
    if benchmark is None:
        return df
    if "benchmark" not in df.columns:
        raise ValueError(f"{path}: not a checkpoint's records (no `benchmark` column) but benchmark {benchmark!r} was asked for")
    if benchmark not in set(df["benchmark"]):
        raise ValueError(f"{path}: no records of benchmark {benchmark!r} (has {sorted(set(df['benchmark']))})")
    return df[df["benchmark"] == benchmark].drop(columns="benchmark").reset_index(drop=True)
