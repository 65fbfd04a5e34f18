"""Learning curves grid: Pass@k against training step, VI-CuRL vs No Curriculum (the paper's Figure 3).
And ``training_curves_grid``: the training reward and the rollouts' oracle accuracy against step.

``learning_curves_grid(df, out, ...)``: one row of panels per (reward setting, metric) -- the
paper's Oracle P@1, Oracle P@8, MajVote P@1, ... -- and one column per benchmark. In each panel a
line per curriculum (the mean across seeds) and a band across seeds (``band="minmax"``: min to
max; ``"std"``: mean +- sample std; ``None``: no band), drawn with seaborn.

``df`` is the per-seed score table (``aggregate.collect``; columns ``reward, curriculum, seed,
step, benchmark`` and the metrics), already filtered to one study and one model; step 0 is the
base model, which the caller adds for every (reward, curriculum) that should start from it.
Values are fractions, plotted in percent. A panel without data says so rather than staying blank.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from vicurl.report import labels as L
from vicurl.report.plotting import colors_for, plt, save

KEYS = ["reward", "curriculum", "seed", "step", "benchmark"]
_ERRORBAR = {"minmax": ("pi", 100), "std": "sd", None: None}


def learning_curves_grid(
    df: pd.DataFrame,
    out,
    *,
    rewards: Sequence[str] | None = None,
    metrics: Sequence[str] = ("pass@1", "pass@8"),
    curricula: Sequence[str] = ("none", "vicurl"),
    benchmarks: Sequence[str] | None = None,
    band: str | None = "minmax",
    titles: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    title: str | None = None,
    panel_size: tuple[float, float] = (2.6, 2.0),
    dpi: int = 150,
):
    """Draw the grid and save it to ``out`` (a path or a list of paths); returns the written paths."""
    metrics = list(metrics)
    data = _scores_to_plot(df, band, metrics, curricula, rewards)
    rewards = list(rewards) if rewards is not None else list(dict.fromkeys(data["reward"]))
    benchmarks = list(benchmarks) if benchmarks is not None else sorted(data["benchmark"].unique())
    titles, labels = dict(titles or {}), dict(labels or {})

    def name(c):
        return labels.get(c, L.curriculum_label(c))

    curricula = [c for c in curricula if c in set(data["curriculum"])]  # the legend names only what is drawn
    palette = {name(c): col for c, col in colors_for(curricula).items()}
    order = [name(c) for c in curricula]
    long = data.assign(Curriculum=data["curriculum"].map(name))

    w, h = panel_size
    nrows = len(rewards) * len(metrics)
    fig, axes = plt.subplots(nrows, len(benchmarks), figsize=(w * len(benchmarks), h * nrows),
                             squeeze=False, sharex=True)
    for i, (reward, metric) in enumerate((r, m) for r in rewards for m in metrics):
        for j, bench in enumerate(benchmarks):
            ax = axes[i][j]
            g = long[(long["reward"] == reward) & (long["benchmark"] == bench)].dropna(subset=[metric])
            _draw_panel(ax, g, metric, order, palette, band)
            # axis labels on the outer panels only, the benchmark above the top row
            ax.set_xlabel("Steps" if i == nrows - 1 else "")
            ax.set_ylabel(_row_label(reward, metric) if j == 0 else "")
            if i == 0:
                ax.set_title(titles.get(bench, bench), fontsize=10)
    _legend_and_title(fig, order, palette, title, (w * len(benchmarks), h * nrows))
    return save(fig, out, dpi)


def _scores_to_plot(df: pd.DataFrame, band, metrics: list[str], curricula, rewards) -> pd.DataFrame:
    """The rows of the curricula (and rewards) to plot, once the arguments and columns are checked."""
    if band not in _ERRORBAR:
        raise ValueError(f"band must be 'minmax', 'std' or None, got {band!r}")
    missing = [c for c in KEYS + metrics if c not in df.columns]
    if missing:
        raise ValueError(f"learning curves need column(s) {missing}")
    data = df[df["curriculum"].isin(curricula)]
    if rewards is not None:
        data = data[data["reward"].isin(rewards)]
    if data.empty:
        raise ValueError(f"no scores of curricula {list(curricula)} to plot")
    dup = data.duplicated(KEYS)
    if dup.any():
        raise ValueError(f"several rows for {data.loc[dup, KEYS].iloc[0].to_dict()}: filter to one study and model first")
    return data


def _row_label(reward: str, metric: str) -> str:
    """The paper's row names: "Oracle P@1 (%)", "MajVote P@8 (%)", ..."""
    return f"{L.reward_label(reward)} {metric.replace('pass@', 'P@')} (%)"


def _draw_panel(ax, g: pd.DataFrame, metric: str, order: list[str], palette: dict, band) -> None:
    """One panel: a line per curriculum (mean across seeds, in percent) and its band, or "no data"."""
    if g.empty:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="0.5")
    else:
        sns.lineplot(data=g.assign(value=g[metric] * 100), x="step", y="value", hue="Curriculum",
                     hue_order=[o for o in order if o in set(g["Curriculum"])], palette=palette,
                     estimator="mean", errorbar=_ERRORBAR[band], marker="o", markersize=3,
                     linewidth=1.4, ax=ax, legend=False)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))  # narrow panels: no overlapping tick labels
    ax.grid(True, alpha=0.3)


def _legend_and_title(fig, order: list[str], palette: dict, title: str | None, size: tuple[float, float]) -> None:
    """The legend above the panels (and the title above it), laid out for a figure of ``size`` inches."""
    width, height = size
    # room above the panels for the legend (rows of entries about 1.4 in wide) and the title,
    # in inches whatever the grid's size
    ncol = max(1, min(len(order), int(width / 1.4)))
    legend_rows = -(-len(order) // ncol)
    legend_h = 0.35 + 0.22 * (legend_rows - 1)
    top = 1 - (legend_h + (0.3 if title else 0)) / height
    fig.tight_layout(rect=(0, 0, 1, top))
    handles = [plt.Line2D([], [], color=palette[o], marker="o", ms=3, lw=1.4) for o in order]
    fig.legend(handles, order, loc="lower center", ncol=ncol, frameon=False, bbox_to_anchor=(0.5, top))
    if title:
        fig.suptitle(title, y=top + legend_h / height, va="bottom")


#: the training metrics drawn by ``training_curves_grid``: the reward the run optimizes and the
#: accuracy of its rollouts under the oracle checker, logged for every reward (reward hacking shows
#: as the first rising while the second falls)
TRAIN_METRICS = {"reward/mean": "training reward", "reward/oracle_acc": "training accuracy (%)"}


def training_curves_grid(metrics: pd.DataFrame, out, *, rewards: Sequence[str] | None = None,
                         curricula: Sequence[str] = ("none", "vicurl"), band: str | None = "minmax",
                         smooth: int | None = None, title: str | None = None,
                         panel_size: tuple[float, float] = (2.8, 2.0),
                         dpi: int = 150):
    """Training reward and oracle accuracy against step: a column per reward, a line per curriculum
    (mean across seeds of each run's moving average over ``smooth`` steps; default: a twentieth of
    the longest run) and its band across seeds.
    ``metrics``: the runs' ``metrics.jsonl`` rows with columns reward, curriculum, seed (and step)."""
    if band not in _ERRORBAR:
        raise ValueError(f"band must be 'minmax', 'std' or None, got {band!r}")
    missing = [c for c in ["reward", "curriculum", "seed", "step", *TRAIN_METRICS] if c not in metrics.columns]
    if missing:
        raise ValueError(f"training curves need column(s) {missing}")
    data = metrics[metrics["curriculum"].isin(curricula)].sort_values("step")
    if data.empty:
        raise ValueError(f"no training metrics of curricula {list(curricula)} to plot")
    rewards = list(rewards) if rewards is not None else list(dict.fromkeys(data["reward"]))
    data = smoothed(data, smooth or max(1, int(data["step"].max()) // 20))
    curricula = [c for c in curricula if c in set(data["curriculum"])]
    palette = {L.curriculum_label(c): col for c, col in colors_for(curricula).items()}
    order = [L.curriculum_label(c) for c in curricula]
    data = data.assign(Curriculum=data["curriculum"].map(L.curriculum_label))
    w, h = panel_size
    fig, axes = plt.subplots(len(TRAIN_METRICS), len(rewards), figsize=(w * len(rewards), h * len(TRAIN_METRICS)),
                             squeeze=False, sharex=True)
    for i, (metric, label) in enumerate(TRAIN_METRICS.items()):
        for j, reward in enumerate(rewards):
            ax = axes[i][j]
            g = data[data["reward"] == reward].dropna(subset=[metric])
            scale = 100 if metric == "reward/oracle_acc" else 1
            if g.empty:
                ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="0.5")
            else:
                sns.lineplot(data=g.assign(value=g[metric] * scale), x="step", y="value", hue="Curriculum",
                             hue_order=[o for o in order if o in set(g["Curriculum"])], palette=palette,
                             estimator="mean", errorbar=_ERRORBAR[band], linewidth=1.2, ax=ax, legend=False)
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("Steps" if i == len(TRAIN_METRICS) - 1 else "")
            ax.set_ylabel(label if j == 0 else "")
            if i == 0:
                ax.set_title(f"{L.reward_label(reward)} reward", fontsize=10)
    _legend_and_title(fig, order, palette, title, (w * len(rewards), h * len(TRAIN_METRICS)))
    return save(fig, out, dpi)


def smoothed(metrics: pd.DataFrame, window: int) -> pd.DataFrame:
    """``TRAIN_METRICS`` as a moving average within each run: a step's value is the mean of that
    run's last ``window`` steps (fewer at the start). Rows sorted by step."""
    data = metrics.sort_values("step")
    runs = data.groupby(["reward", "curriculum", "seed"])
    return data.assign(**{m: runs[m].transform(lambda s: s.rolling(max(1, int(window)), min_periods=1).mean())
                          for m in TRAIN_METRICS})
