"""Learning curves: Pass@k against training step, VI-CuRL vs No Curriculum.

``learning_curves(df_long, out, metric="pass@1")`` draws one panel per benchmark (columns),
one line per curriculum (the hue), the mean across seeds as the line and a band across
seeds (``band="minmax"``: min to max; ``band="std"``: mean +- sample std; ``None``: no band).
``df_long`` is the per-seed table of ``aggregate.collect`` (columns ``benchmark, curriculum,
seed, step`` and the metric), already filtered to one (study, model, reward); step 0 is the
base model and the caller includes it (for every curriculum that should start from it).
Values are fractions and are plotted in percent.

``out`` is a path or a list of paths; each is written atomically in the format its suffix
names (``.png``, ``.pdf``, ...). Matplotlib runs with the Agg backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from vicurl.io import atomic_path  # noqa: E402

PALETTE = {"vicurl": "#1f5fbf", "none": "#d95f02"}
FALLBACK = ["#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"]


def _paths(out) -> list[Path]:
    return [Path(out)] if isinstance(out, (str, Path)) else [Path(p) for p in out]


def learning_curves(
    df_long: pd.DataFrame,
    out_png,
    *,
    metric: str = "pass@1",
    hue: str = "curriculum",
    hue_label: str = "Curriculum",
    hue_order: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    benchmarks: Sequence[str] | None = None,
    titles: Mapping[str, str] | None = None,
    band: str | None = "minmax",
    scale: float = 100.0,
    title: str | None = None,
    panel_size: tuple[float, float] = (3.0, 2.6),
    dpi: int = 150,
) -> list[Path]:
    """Draw the learning-curve panels and save them; returns the written paths."""
    need = ["benchmark", hue, "seed", "step", metric]
    missing = [c for c in need if c not in df_long.columns]
    if missing:
        raise ValueError(f"learning curves need column(s) {missing}")
    if band not in ("minmax", "std", None):
        raise ValueError(f"band must be 'minmax', 'std' or None, got {band!r}")
    df = df_long[need].dropna(subset=[metric])
    if df.empty:
        raise ValueError(f"no data to plot for metric {metric!r}")
    dup = df.duplicated(["benchmark", hue, "seed", "step"])
    if dup.any():
        first = df.loc[dup, ["benchmark", hue, "seed", "step"]].iloc[0].to_dict()
        raise ValueError(f"several rows for {first}: filter to one study/model/reward first")
    benchmarks = list(benchmarks) if benchmarks is not None else sorted(df["benchmark"].unique())
    hues = list(hue_order) if hue_order is not None else sorted(df[hue].unique())
    labels = dict(labels or {})
    titles = dict(titles or {})
    colors, spare = {}, iter(FALLBACK * (len(hues) // len(FALLBACK) + 1))
    for h in hues:
        colors[h] = PALETTE.get(str(h)) or next(spare)

    agg = (df.groupby(["benchmark", hue, "step"])[metric]
             .agg(mean="mean", std=lambda v: float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                  lo="min", hi="max")
             .reset_index())
    w, h_ = panel_size
    fig, axes = plt.subplots(1, len(benchmarks), figsize=(w * len(benchmarks), h_), squeeze=False)
    for ax, b in zip(axes[0], benchmarks):
        for hv in hues:
            g = agg[(agg["benchmark"] == b) & (agg[hue] == hv)].sort_values("step")
            if g.empty:
                continue
            x = g["step"].to_numpy()
            m = g["mean"].to_numpy() * scale
            ax.plot(x, m, marker="o", ms=3, lw=1.6, color=colors[hv], label=labels.get(hv, str(hv)))
            if band == "minmax":
                ax.fill_between(x, g["lo"].to_numpy() * scale, g["hi"].to_numpy() * scale,
                                color=colors[hv], alpha=0.2, lw=0)
            elif band == "std":
                s = g["std"].to_numpy() * scale
                ax.fill_between(x, m - s, m + s, color=colors[hv], alpha=0.2, lw=0)
        ax.set_title(titles.get(b, str(b)), fontsize=10)
        ax.set_xlabel("Training step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(f"{metric.replace('pass', 'Pass')} (%)" if scale == 100 else metric)
    handles, lbls = axes[0][0].get_legend_handles_labels()
    if not handles:
        for ax in axes[0]:
            handles, lbls = ax.get_legend_handles_labels()
            if handles:
                break
    if handles:
        fig.legend(handles, lbls, title=hue_label, loc="upper center", ncol=len(handles),
                   bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=9)
    if title:
        fig.suptitle(title, y=1.08)
    fig.tight_layout(rect=(0, 0, 1, 0.85))
    written = []
    try:
        for p in _paths(out_png):
            with atomic_path(p) as tmp:
                fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=p.suffix.lstrip(".") or "png")
            written.append(p)
    finally:
        plt.close(fig)
    return written
