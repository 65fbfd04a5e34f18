"""Shared figure plumbing: headless matplotlib, the paper's colors, atomic saving in several formats.

Every figure function takes ``out``: one path or a list of paths; each is written atomically
(``vicurl.runtime.io.atomic_path``) in the format its suffix names (``.png``, ``.pdf``), so a killed job
never leaves half a figure that a rerun would trust.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from vicurl.runtime.io import atomic_path

#: the paper's colors: learning curves (Figure "learning_curves_grid"), variance (Figures
#: "variance_ratio" and "variance_absolute")
CURRICULUM_COLORS = {"vicurl": "#2E86AB", "none": "#E84855"}
# ColorBrewer Dark2, then two of tab10: ten curricula besides the paper's two before a color repeats
FALLBACK_COLORS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666", "#17becf", "#bcbd22"]
SIGMA_COLOR, VPROB_COLOR, BETA_COLOR = "#1f77b4", "#ff7f0e", "#00441b"
KEPT_COLOR, FULL_COLOR = "#1f77b4", "#d62728"


def paths(out) -> list[Path]:
    return [Path(out)] if isinstance(out, (str, Path)) else [Path(p) for p in out]


def colors_for(names) -> dict:
    """A color per curriculum: the paper's where it has one, then a fixed fallback cycle."""
    spare = iter(FALLBACK_COLORS * (len(list(names)) // len(FALLBACK_COLORS) + 1))
    return {n: CURRICULUM_COLORS.get(str(n)) or next(spare) for n in names}


def save(fig, out, dpi: int = 150) -> list[Path]:
    """Write the figure to every path of ``out`` atomically, close it, return the paths."""
    written = []
    try:
        for p in paths(out):
            with atomic_path(p) as tmp:
                fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format=p.suffix.lstrip(".") or "png")
            written.append(p)
    finally:
        plt.close(fig)
    return written
