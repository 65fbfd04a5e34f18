r"""Our results as table cells: per-seed scores -> the cells a resolved table definition shows.

Input: the per-seed score table (``report/scores.csv``: one row per study, model, reward,
curriculum, seed, step, benchmark). Output: the long cells table of ``spec`` (``CELL_KEYS`` +
``mean, std, n_seeds``), which ``latex.render`` prints. Every number is a mean across seeds, as the
paper reports them; a cell whose row has no score prints ``--``. The Base row of a ``main`` table
reads the base model's evaluations with the seeds of the table's study; the mechanism curve has
training steps only. The P90 length is the sample-weighted mean of the benchmarks' P90s (a pooled
percentile would need the samples). The rules per cell type (the Average's std, the long-output
rates, the AULC): docs/evaluation.md ("Tables and figures").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from vicurl.report.aggregate import AVERAGE, ID_KEYS, across_seeds
from vicurl.report.layouts import ALL, LENGTH_METRICS
from vicurl.report.spec import CELL_KEYS

OUT_COLUMNS = [*CELL_KEYS, "mean", "std", "n_seeds", "step"]


def _summary(values) -> dict:
    v = np.asarray([x for x in values if not pd.isna(x)], dtype=np.float64)
    n = len(v)
    return {"mean": float(v.mean()) if n else math.nan,
            "std": float(v.std(ddof=1)) if n > 1 else math.nan, "n_seeds": n}


def _row_scores(scores: pd.DataFrame, row: dict, benchmarks, step=None) -> pd.DataFrame:
    m = ((scores["study"] == row["study"]) & (scores["model"] == row["model"])
         & (scores["reward"] == row["reward"]) & (scores["curriculum"] == row["curriculum"])
         & scores["benchmark"].isin(benchmarks))
    if step is not None:
        m &= scores["step"] == int(step)
    if row.get("seeds"):
        m &= scores["seed"].isin(row["seeds"])
    return scores[m]


def _keys(row: dict) -> dict:
    return {k: row[k] for k in ("model", "reward", "curriculum", "variant")}


def _passk_cells(part: pd.DataFrame, row: dict, metrics, benchmarks, average_std: str) -> list[dict]:
    """Pass@k per benchmark and the average, mean and std across seeds (no std for one seed)."""
    metrics = [m for m in metrics if m in part.columns]
    if part.empty or not metrics:
        return []
    agg = across_seeds(part, metrics=metrics, average_over=list(benchmarks), average_std=average_std)
    out = []
    for r in agg.itertuples(index=False):
        std = r.std if r.n_seeds > 1 else math.nan
        out.append({**_keys(row), "benchmark": r.benchmark, "metric": r.metric, "mean": r.mean,
                    "std": std, "n_seeds": r.n_seeds, "step": r.step})
    return out


def _pooled_cells(part: pd.DataFrame, row: dict, benchmarks) -> list[dict]:
    """Long-output rates and lengths over all the row's samples, per seed, then across seeds."""
    need = [*LENGTH_METRICS, "n_problems", "n_samples"]
    if part.empty or any(c not in part.columns for c in need):
        return []
    per_seed = {m: [] for m in LENGTH_METRICS}
    for _, s in part.groupby("seed"):
        if set(s["benchmark"]) != set(benchmarks):
            continue  # a seed enters only with every benchmark, as in the average
        w = (s["n_problems"] * s["n_samples"]).to_numpy(np.float64)
        for m in LENGTH_METRICS:
            per_seed[m].append(float(np.average(s[m].to_numpy(np.float64), weights=w)))
    return [{**_keys(row), "benchmark": ALL, "metric": m, **_summary(v)} for m, v in per_seed.items() if v]


def _curve(scores: pd.DataFrame, row: dict, benchmarks, metric: str, t_long: int) -> pd.DataFrame:
    part = _row_scores(scores, row, benchmarks)
    part = part[(part["step"] > 0) & (part["step"] <= t_long)]
    if part.empty or metric not in part.columns:
        return pd.DataFrame(columns=["step", "mean", "std", "n_seeds"])
    agg = across_seeds(part, metrics=[metric], average_over=list(benchmarks))
    agg = agg[agg["benchmark"] == AVERAGE].sort_values("step")
    return agg[["step", "mean", "std", "n_seeds"]].reset_index(drop=True)


def _area(curve: pd.DataFrame) -> float:
    x, y = curve["step"].to_numpy(np.float64), curve["mean"].to_numpy(np.float64)
    return float(y[0]) if len(x) == 1 else float(np.trapezoid(y, x))


def _mechanism_cells(t: dict, scores: pd.DataFrame) -> list[dict]:
    rows = t["blocks"][0]["rows"]
    curves = {i: _curve(scores, r, t["benchmarks"], t["metric"], t["t_long"]) for i, r in enumerate(rows)}
    ref = [i for i, r in enumerate(rows) if r["curriculum"] == t["aulc_reference"]]
    ref_curve = curves[ref[0]] if ref else None
    out = []
    for i, row in enumerate(rows):
        c = curves[i]
        if c.empty:
            continue
        base = {**_keys(row), "benchmark": AVERAGE}
        at = {}
        for key, step in (("avg_t_ref", t["t_ref"]), ("avg_t_long", t["t_long"])):
            hit = c[c["step"] == step]
            if len(hit):
                n = int(hit["n_seeds"].iloc[0])
                at[key] = float(hit["mean"].iloc[0])
                out.append({**base, "metric": key, "mean": at[key],
                            "std": float(hit["std"].iloc[0]) if n > 1 else math.nan, "n_seeds": n})
        out.append({**base, "metric": "best_avg", "mean": float(c["mean"].max()), "std": math.nan,
                    "n_seeds": int(c["n_seeds"].min())})
        if len(at) == 2:
            out.append({**base, "metric": "upgration", "mean": at["avg_t_long"] - at["avg_t_ref"],
                        "std": math.nan, "n_seeds": int(c["n_seeds"].min())})
        if ref_curve is not None and not ref_curve.empty and list(ref_curve["step"]) == list(c["step"]):
            denom = _area(ref_curve)
            if denom > 0:
                out.append({**base, "metric": "aulc", "mean": _area(c) / denom, "std": math.nan,
                            "n_seeds": int(c["n_seeds"].min())})
    return out


def table_scores(t: dict, scores: pd.DataFrame, rows) -> pd.DataFrame:
    """The per-seed score records that ``rows`` of the resolved table ``t`` read (each once)."""
    parts = []
    for row in rows:
        if t["type"] == "mechanism":
            part = _row_scores(scores, row, t["benchmarks"])
            parts.append(part[(part["step"] > 0) & (part["step"] <= t["t_long"])])
        elif row["step"] is not None:
            parts.append(_row_scores(scores, row, t["benchmarks"], row["step"]))
    if not parts:
        return scores.iloc[:0]
    return pd.concat(parts).drop_duplicates(subset=[c for c in ID_KEYS if c in scores.columns])


def table_cells(t: dict, scores: pd.DataFrame) -> pd.DataFrame:
    """The cells of the resolved table ``t`` (``tableconfig.resolve``) from the per-seed scores."""
    need = ["study", "model", "reward", "curriculum", "seed", "step", "benchmark"]
    missing = [c for c in need if c not in scores.columns]
    if missing:
        raise ValueError(f"per-seed scores lack column(s) {missing}")
    typ, benchmarks = t["type"], t["benchmarks"]
    if typ == "mechanism":
        out = _mechanism_cells(t, scores)
    else:
        metrics = t["metrics"] if typ == "ablation" else [t["metric"]]
        out = []
        for block in t["blocks"]:
            for row in block["rows"]:
                if row["step"] is None:
                    continue
                part = _row_scores(scores, row, benchmarks, row["step"])
                out += _passk_cells(part, row, metrics, benchmarks, t["style"]["average_std"])
                if typ == "long_output":
                    out += _pooled_cells(part, row, benchmarks)
    df = pd.DataFrame(out, columns=OUT_COLUMNS)
    # a row listed twice (the same setting in two blocks) gives the same cells: keep one
    return df.drop_duplicates(subset=list(CELL_KEYS)).reset_index(drop=True)
