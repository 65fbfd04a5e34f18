r"""Paper vs reproduction: for every cell of a table, our value, the paper's and the difference, so a
user who runs the paper's configuration sees at a glance where the reproduction departs from it.

Both sides are cells of the same ``TableSpec`` (``cells.table_cells``, ``paper.paper_cells``),
matched by row keys, column and metric, never by position. ``compare_cells``: per (row, column,
part), in display units, ``ours``, ``ours_std``, ``paper``, ``paper_std``, ``diff = ours - paper``
and our ``n_seeds`` (a missing side: NaN, no difference). ``render_comparison`` prints the table's
layout with ``ours (paper; $\Delta$ diff)`` in each part (``--`` for a missing side), without bold:
the comparison shows departures, not winners.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from vicurl.report.latex import cell_index, lookup, render_rows, wrap
from vicurl.report.spec import TableSpec, fmt_value

_SCALE = {"pct": 100.0, "signed": 100.0, "percent": 100.0, "ratio": 1.0, "int": 1.0}


def _n_seeds(ours: pd.DataFrame) -> dict:
    """Cell keys -> our number of seeds (0 when the cells table does not say)."""
    if "n_seeds" not in ours.columns or ours.empty:
        return {}
    idx = cell_index(ours.assign(mean=ours["n_seeds"].astype(float)))
    return {k: int(v[0]) for k, v in idx.items()}


def _diff_text(d: float, fmt: str, digits: int) -> str:
    if fmt == "int":
        return f"{int(round(d)):+d}"
    if fmt == "ratio":
        return f"{d:+.{digits}f}"
    return fmt_value(d, "signed", digits)


def compare_cells(spec: TableSpec, ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Every (row, column, part) of the spec with our value, the paper's and the difference."""
    io, ip = cell_index(ours), cell_index(paper)
    seeds = _n_seeds(ours)
    out = []
    for block in spec.blocks:
        for row in block.rows:
            for col in spec.columns:
                for part in col.parts:
                    s = _SCALE[part.fmt]
                    o, p = lookup(io, row.keys, col.key, part.metric), lookup(ip, row.keys, col.key, part.metric)
                    k = tuple(str(x) for x in (row.keys["model"], row.keys["reward"], row.keys["curriculum"],
                                               row.keys.get("variant", ""), col.key, part.metric))
                    ov = o[0] * s if o else math.nan
                    pv = p[0] * s if p else math.nan
                    out.append({
                        "table": spec.name, "group": block.group, "block": block.title, "row": " | ".join(row.lead),
                        **row.keys, "column": " ".join(col.header), "benchmark": col.key, "metric": part.metric,
                        "ours": ov, "ours_std": o[1] * s if o else math.nan,
                        "paper": pv, "paper_std": p[1] * s if p else math.nan,
                        "diff": ov - pv, "n_seeds": seeds.get(k, 0),
                    })
    return pd.DataFrame(out)


def render_comparison(spec: TableSpec, ours: pd.DataFrame, paper: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """The table's layout with "ours (paper; $\\Delta$ diff)" in every part."""
    io, ip = cell_index(ours), cell_index(paper)

    def part_text(o, p, part):
        ot = fmt_value(o[0], part.fmt, spec.digits) if o else "--"
        pt = fmt_value(p[0], part.fmt, spec.digits) if p else "--"
        d = _diff_text(o[0] - p[0], part.fmt, spec.digits) if o and p else "--"
        return f"{ot} ({pt}; $\\Delta$ {d})"

    def cell(bi, ri, row, ci, col):
        return " / ".join(part_text(lookup(io, row.keys, col.key, p.metric), lookup(ip, row.keys, col.key, p.metric), p)
                          for p in col.parts)

    caption = (f"Reproduction vs paper, {spec.label.replace('tab:', '').replace('_', chr(92) + '_')}: "
               f"each cell is ours (the paper's; $\\Delta$ = ours $-$ paper); -- where a side has no value.")
    return wrap(spec, render_rows(spec, cell), caption=caption, label=f"{spec.label}:vs_paper", notes=notes)
