"""Aggregate per-seed benchmark scores across seeds, the way the paper reports them: "mean $\\pm$
std" is ACROSS TRAINING SEEDS (each seed's run scored on its own, pass@k averaged over problems),
not across samples.

``std`` is ddof = 1, and 0.0 for a single seed (``n_seeds`` tells it from a real 0.0); ``min`` /
``max`` are kept for figure bands; NaN values are dropped, never filled. The average (benchmark
``AVERAGE``) is taken per seed first, over every benchmark any seed of the group has (or
``average_over``), and a seed enters it only when it has all of them (a group where no seed is
complete gets no average row). Its std (``average_std``): ``"benchmarks"``, the mean of the
benchmarks' stds (the paper's convention, in 100 of its 103 such cells: stds 1.7, 0.7, 3.0, 0.2,
0.5, 0.3 -> 1.1), or ``"seeds"``, the std of the per-seed averages. See docs/evaluation.md.
"""

from __future__ import annotations

import json
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from vicurl.config.runs import setting_of

ID_KEYS = ("study", "model", "reward", "curriculum", "seed", "step", "benchmark")
GROUP_KEYS = ("study", "model", "reward", "curriculum", "step", "benchmark")
AVERAGE = "average"
SUMMARY_COLUMNS = [*GROUP_KEYS, "metric", "mean", "std", "min", "max", "n_seeds"]
AVERAGE_STD = ("benchmarks", "seeds")  # the Average's std: mean of the benchmarks' stds (default), or std of the per-seed averages


def collect(records: Iterable[Mapping]) -> pd.DataFrame:
    """Long per-seed table from score dicts that carry the identifying keys.

    Each record holds ``study, model, reward, curriculum, seed, step, benchmark`` plus metric
    entries (``pass@1``, ``pass@8``, ``mean_length``, ...). One row per record; the identifying
    columns come first. A record missing an identifying key, or two records with the same
    identity, raise ValueError.
    """
    rows = []
    for i, r in enumerate(records):
        missing = [k for k in ID_KEYS if k not in r]
        if missing:
            raise ValueError(f"score record {i} lacks identifying key(s) {missing}: {dict(r)}")
        rows.append(dict(r))
    if not rows:
        return pd.DataFrame(columns=list(ID_KEYS))
    df = pd.DataFrame(rows)
    dup = df.duplicated(list(ID_KEYS), keep=False)
    if dup.any():
        first = df.loc[dup, list(ID_KEYS)].iloc[0].to_dict()
        raise ValueError(f"two score records share the same identity {first}")
    if (df["benchmark"] == AVERAGE).any():
        raise ValueError(f"benchmark name {AVERAGE!r} is reserved for the average column")
    df["seed"] = df["seed"].astype("int64")
    df["step"] = df["step"].astype("int64")
    others = [c for c in df.columns if c not in ID_KEYS]
    return df[[*ID_KEYS, *others]].reset_index(drop=True)


def read_scores(paths: Iterable[str], keep: Iterable[Sequence] | None = None) -> list[dict]:
    """The score records of the runs' score files (``scores.json``: a JSON list, one record per
    step and benchmark), in file order; with ``keep``, only the records whose (study, model, setting,
    seed, step, benchmark) is listed (setting ``reward-curriculum``, or ``base`` for Base)."""
    wanted = None if keep is None else {(str(st), str(m), str(se), int(sd), int(sp), str(b)) for st, m, se, sd, sp, b in keep}
    out = []
    for path in paths:
        with open(path) as f:
            records = json.load(f)
        if not isinstance(records, list):
            raise ValueError(f"{path}: expected a list of score records, got {type(records).__name__}")
        for r in records:
            lacking = [k for k in ID_KEYS if k not in r]
            if lacking:
                raise ValueError(f"{path}: a score record lacks identifying key(s) {lacking}: {r}")
            setting = setting_of(r["reward"], r["curriculum"])
            if wanted is None or (r["study"], r["model"], setting, int(r["seed"]), int(r["step"]), r["benchmark"]) in wanted:
                out.append(r)
    return out


def read_metrics(paths: Iterable[str], runs: Iterable[Sequence]) -> pd.DataFrame:
    """The runs' per-step training metrics (``metrics.jsonl``) in one frame, each row tagged with
    its run's ``reward, curriculum, seed`` (``runs``: one such triple per path, in order)."""
    return pd.concat([pd.read_json(path, lines=True).assign(reward=r, curriculum=c, seed=int(s))
                      for path, (r, c, s) in zip(paths, runs, strict=True)], ignore_index=True)


def _summary(values: pd.Series) -> dict:
    v = values.dropna().to_numpy(dtype=np.float64)
    n = len(v)
    return {
        "mean": float(v.mean()) if n else np.nan,
        "std": float(v.std(ddof=1)) if n > 1 else (0.0 if n == 1 else np.nan),
        "min": float(v.min()) if n else np.nan,
        "max": float(v.max()) if n else np.nan,
        "n_seeds": int(n),
    }


def across_seeds(
    df: pd.DataFrame,
    metrics: Sequence[str] = ("pass@1", "pass@8"),
    *,
    average: bool = True,
    average_over: Sequence[str] | None = None,
    average_std: str = AVERAGE_STD[0],
) -> pd.DataFrame:
    """Mean, std (ddof=1; 0.0 for one seed), min, max and n_seeds across seeds.

    Returns one row per (study, model, reward, curriculum, step, benchmark, metric), with an
    extra ``benchmark == "average"`` row per (study, model, reward, curriculum, step, metric)
    when ``average`` (see the module docstring for the rule and ``average_std``). ``average_over``
    restricts the benchmarks that the average covers.
    """
    if average_std not in AVERAGE_STD:
        raise ValueError(f"average_std must be one of {AVERAGE_STD}, got {average_std!r}")
    missing = [k for k in ID_KEYS if k not in df.columns]
    if missing:
        raise ValueError(f"per-seed table lacks column(s) {missing}")
    absent = [m for m in metrics if m not in df.columns]
    if absent:
        raise ValueError(f"metric(s) {absent} not in the per-seed table (columns: {list(df.columns)})")
    if (df["benchmark"] == AVERAGE).any():
        raise ValueError(f"benchmark name {AVERAGE!r} is reserved for the average column")
    out = []
    run_keys = [k for k in GROUP_KEYS if k != "benchmark"]
    for metric in metrics:
        for key, g in df.groupby(list(GROUP_KEYS), dropna=False, sort=True):
            out.append({**dict(zip(GROUP_KEYS, key)), "metric": metric, **_summary(g[metric])})
        if not average:
            continue
        for key, g in df.groupby(run_keys, dropna=False, sort=True):
            wanted = sorted(set(average_over) if average_over is not None
                            else set(g.loc[g[metric].notna(), "benchmark"]))
            if not wanted:
                continue
            per_seed = []
            for _, s in g.groupby("seed", sort=True):
                vals = s.set_index("benchmark")[metric].dropna()
                if all(b in vals.index for b in wanted):
                    per_seed.append(float(vals.loc[wanted].mean()))
            if not per_seed:
                continue
            summary = _summary(pd.Series(per_seed, dtype=np.float64))
            if average_std == "benchmarks" and summary["n_seeds"] > 1:
                summary["std"] = float(np.mean([_summary(g.loc[g["benchmark"] == b, metric])["std"] for b in wanted]))
            out.append({**dict(zip(run_keys, key)), "benchmark": AVERAGE, "metric": metric, **summary})
    res = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    res = res[res["n_seeds"] > 0].reset_index(drop=True)
    return res.astype({"n_seeds": "int64"})
