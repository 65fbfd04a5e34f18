r"""Variance figures: does the curriculum-kept subset have lower gradient variance (paper, Figs. 2 and 5)?

Input: ``report/probes.csv`` (one row per study, model, reward, curriculum, seed, step, with
``beta_t`` and ``sigma2_*`` / ``vprob_*`` per subset), filtered to one reward and curriculum first.
``variance_ratio``: Ratio_sigma (blue) and Ratio_V (orange) against step with beta_t on a right
axis; ratios are taken per seed, then averaged (min-max band), and a zero or missing full-batch
variance gives no ratio at that step. Where the probes record the informative prompts, their ratios
are dashed and a second row shows the zero-gradient share, kept vs full: the mechanism behind the
ratios. ``variance_absolute``: sigma^2 and V_prob, kept (blue) vs full (red). See
docs/evaluation.md ("Tables and figures").
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from vicurl.report.plotting import BETA_COLOR, FULL_COLOR, KEPT_COLOR, SIGMA_COLOR, VPROB_COLOR, plt, save

COLUMNS = ["model", "seed", "step", "beta_t", "sigma2_full", "sigma2_kept", "vprob_full", "vprob_kept"]
MECHANISM_COLUMNS = ["sigma2_full_inf", "sigma2_kept_inf", "vprob_full_inf", "vprob_kept_inf", "n_prompts", "n_kept",
                     "n_informative", "n_kept_informative"]


def _check(probes: pd.DataFrame) -> None:
    missing = [c for c in COLUMNS if c not in probes.columns]
    if missing:
        raise ValueError(f"variance probes lack column(s) {missing}")
    if probes.empty:
        raise ValueError("no variance probes to plot")
    dup = probes.duplicated(["model", "seed", "step"])
    if dup.any():
        raise ValueError(f"several probes for {probes.loc[dup, ['model', 'seed', 'step']].iloc[0].to_dict()}: "
                         f"filter to one study, reward and curriculum first")


def _line(ax, df: pd.DataFrame, col: str, color: str, label: str, style: str = "-") -> None:
    g = df.dropna(subset=[col]).groupby("step")[col].agg(["mean", "min", "max"]).reset_index()
    if g.empty:
        return
    ax.plot(g["step"], g["mean"], style, color=color, lw=1.6, marker="o", ms=2.5, label=label)
    if df["seed"].nunique() > 1:
        ax.fill_between(g["step"], g["min"], g["max"], color=color, alpha=0.2, lw=0)


def _models(probes: pd.DataFrame, models: Sequence[str] | None) -> list[str]:
    return list(models) if models is not None else list(dict.fromkeys(probes["model"]))


def variance_ratio(probes: pd.DataFrame, out, *, models: Sequence[str] | None = None,
                   titles: Mapping[str, str] | None = None, dpi: int = 150):
    """Ratios kept/full of both variances with beta_t on a right axis; one panel per model."""
    _check(probes)
    models, titles = _models(probes, models), dict(titles or {})
    df = probes.copy()
    for v in ("sigma2", "vprob"):
        full = df[f"{v}_full"].astype(float)
        df[f"ratio_{v}"] = np.where(full > 0, df[f"{v}_kept"].astype(float) / full.where(full > 0), np.nan)
    mechanism = all(c in df.columns for c in MECHANISM_COLUMNS)
    if mechanism:
        for v in ("sigma2", "vprob"):
            full = df[f"{v}_full_inf"].astype(float)
            df[f"ratio_inf_{v}"] = np.where(full > 0, df[f"{v}_kept_inf"].astype(float) / full.where(full > 0), np.nan)
        df["zero_kept"] = 1 - df["n_kept_informative"] / df["n_kept"].where(df["n_kept"] > 0)
        df["zero_full"] = 1 - df["n_informative"] / df["n_prompts"]
    rows = 2 if mechanism else 1
    fig, axes = plt.subplots(rows, len(models), figsize=(5.2 * len(models), 3.4 * rows), squeeze=False)
    for i, m in enumerate(models):
        ax, d = axes[0][i], df[df["model"] == m]
        _line(ax, d, "ratio_sigma2", SIGMA_COLOR, "$\\sigma^2_{g,t}$ kept/full")
        _line(ax, d, "ratio_vprob", VPROB_COLOR, "$V_{\\mathrm{prob},t}$ kept/full")
        if mechanism:
            _line(ax, d, "ratio_inf_sigma2", SIGMA_COLOR, "$\\sigma^2_{g,t}$, informative prompts", style="--")
            _line(ax, d, "ratio_inf_vprob", VPROB_COLOR, "$V_{\\mathrm{prob},t}$, informative prompts", style="--")
            low = axes[1][i]
            _line(low, d, "zero_kept", KEPT_COLOR, "kept")
            _line(low, d, "zero_full", FULL_COLOR, "full batch")
            low.set_ylim(0, 1.02)
            low.set_xlabel("Training step")
            low.set_ylabel("Zero-gradient share\n(equal rewards)")
            low.xaxis.set_major_locator(MaxNLocator(integer=True))
            low.grid(True, alpha=0.3)
            low.legend(fontsize=8, frameon=False)
        ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
        ax.set_xlabel("Training step")
        ax.set_ylabel("Variance ratio (kept / full)")
        ax.set_title(titles.get(m, m), fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        right = ax.twinx()
        _line(right, d, "beta_t", BETA_COLOR, "$\\beta_t$", style="--")
        right.set_ylim(0, 1.05)
        right.set_ylabel("$\\beta_t$", color=BETA_COLOR)
        right.tick_params(axis="y", colors=BETA_COLOR)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = right.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, framealpha=0.85, loc="best")
    fig.tight_layout()
    return save(fig, out, dpi)


def variance_absolute(probes: pd.DataFrame, out, *, models: Sequence[str] | None = None,
                      titles: Mapping[str, str] | None = None, log: bool = False, dpi: int = 150):
    """Kept vs full, for sigma^2 and V_prob; two panels per model."""
    _check(probes)
    models, titles = _models(probes, models), dict(titles or {})
    panels = [(m, v) for m in models for v in ("sigma2", "vprob")]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.0), squeeze=False)
    names = {"sigma2": "$\\sigma^2_{g,t}$", "vprob": "$V_{\\mathrm{prob},t}$"}
    for ax, (m, v) in zip(axes[0], panels):
        d = probes[probes["model"] == m]
        _line(ax, d, f"{v}_kept", KEPT_COLOR, "kept")
        _line(ax, d, f"{v}_full", FULL_COLOR, "full")
        ax.set_title(f"{titles.get(m, m)}: {names[v]}", fontsize=9)
        ax.set_xlabel("Training step")
        if log:
            ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return save(fig, out, dpi)
