"""The per-sample records of an evaluation, as stored between generation and grading.

problem_id  str   the problem's ``id`` in the normalized schema
sample_idx  int   0 .. n-1 within the problem
text        str   decoded response (special tokens removed)
n_tokens    int   response tokens up to and including the first EOS (max_new_tokens if truncated)
truncated   bool  no EOS within ``max_new_tokens``

Both generation paths write these columns; a checkpoint's file (``eval.generate_per``) adds a
``benchmark`` column in front, a run's file a ``step`` column before that. A file's metadata
(``read_meta``) keeps, per benchmark, the `vicurl.data.long_prompts.fit_sets` report of the problems
dropped for a prompt too long (a run's file: one entry per step under ``steps``). This module
imports neither torch nor transformers, so grading jobs start fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from vicurl.runtime.io import atomic_path

RECORD_COLUMNS = ["problem_id", "sample_idx", "text", "n_tokens", "truncated"]
DTYPES = {"problem_id": str, "sample_idx": "int64", "text": str, "n_tokens": "int64", "truncated": bool}
META_KEY = b"vicurl"  # the parquet schema's key-value metadata entry holding ``meta`` (JSON)


def empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=DTYPES[c]) for c in RECORD_COLUMNS})


def write_records(df: pd.DataFrame, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
    """Write records as parquet atomically (a killed job leaves no partial file), with ``meta`` (JSON)
    in the file's metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    missing = [c for c in RECORD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"records lack column(s) {missing}")
    table = pa.Table.from_pandas(df, preserve_index=False)
    if meta is not None:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               META_KEY: json.dumps(meta, sort_keys=True).encode()})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta`` a records file was written with (``{}`` for none: files of earlier versions)."""
    import pyarrow.parquet as pq

    raw = (pq.read_schema(path).metadata or {}).get(META_KEY)
    return json.loads(raw) if raw else {}


def dropped_problems(meta: Mapping[str, Any], step: int | None = None) -> dict[str, int]:
    """Problems left out of each benchmark's records because their prompt was too long for the model
    (``step``: of that checkpoint, from a run's file)."""
    if step is not None:
        meta = meta["steps"][str(int(step))]
    return {bench: int(report["dropped"]) for bench, report in (meta.get("long_prompts") or {}).items()}


def combine(records: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Several benchmarks' records in one frame (a checkpoint's file), with a ``benchmark`` column."""
    frames = [df.assign(benchmark=name) for name, df in records.items()]
    if not frames:
        raise ValueError("no records to combine")
    return pd.concat(frames, ignore_index=True)[["benchmark", *RECORD_COLUMNS]]


def combine_steps(records: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Several checkpoints' files (``combine``) in one frame (a run's file), with a ``step`` column."""
    frames = [df.assign(step=int(step)) for step, df in records.items()]
    if not frames:
        raise ValueError("no records to combine")
    return pd.concat(frames, ignore_index=True)[["step", "benchmark", *RECORD_COLUMNS]]


def read_records(path: str | Path, benchmark: str | None = None, step: int | None = None) -> pd.DataFrame:
    """The records in ``path``; from a checkpoint's file, those of ``benchmark``; from a run's file,
    those of ``benchmark`` at ``step``."""
    df = pd.read_parquet(path)
    missing = [c for c in RECORD_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: records lack column(s) {missing}")
    if step is not None:
        if "step" not in df.columns:
            raise ValueError(f"{path}: not a run's records (no `step` column) but step {step} was asked for")
        if int(step) not in set(df["step"]):
            raise ValueError(f"{path}: no records of step {step} (has {sorted(set(df['step']))})")
        df = df[df["step"] == int(step)].drop(columns="step")
    if benchmark is None:
        return df
    if "benchmark" not in df.columns:
        raise ValueError(f"{path}: not a checkpoint's records (no `benchmark` column) but benchmark {benchmark!r} was asked for")
    if benchmark not in set(df["benchmark"]):
        raise ValueError(f"{path}: no records of benchmark {benchmark!r} (has {sorted(set(df['benchmark']))})")
    return df[df["benchmark"] == benchmark].drop(columns="benchmark").reset_index(drop=True)
