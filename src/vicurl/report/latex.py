r"""Render a ``TableSpec`` with a table of cells as LaTeX in the paper's style (its source's layout:
a ``table*`` with caption and label above a ``\resizebox``-scaled ``tabular``, gray header lines,
a gray model header whenever the block's group changes, italic block titles, highlighted rows in
``\rowcolor{blue!10}``; packages booktabs, xcolor with ``table``, graphicx).

Cells: each part in its format (``spec.fmt_value``), plus `` $\pm$ std`` when the table shows the
std and it is known (a single seed: the mean alone), parts joined by `` / ``; a part without data
prints ``--``, nothing is filled in. Bold rule (the only one): within a block, per column and part
whose ``best`` is set, the best value as printed (so what is bold agrees with what is read) is
bold, ties included, when at least two rows of the block have a value; ``spec.bold = False`` turns
it off. See docs/evaluation.md for where the paper's bolding departs from it.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import pandas as pd

from vicurl.report.spec import CELL_KEYS, TableSpec, fmt_spread, fmt_value
from vicurl.report.texparse import parse_number


def cell_index(cells: pd.DataFrame) -> dict[tuple, tuple[float, float]]:
    """(model, reward, curriculum, variant, benchmark, metric) -> (mean, std); NaN means are dropped."""
    missing = [c for c in (*CELL_KEYS, "mean") if c not in cells.columns and c != "variant"]
    if missing:
        raise ValueError(f"cells table lacks column(s) {missing} (has {list(cells.columns)})")
    df = cells.copy()
    if "variant" not in df.columns:
        df["variant"] = ""
    if "std" not in df.columns:
        df["std"] = math.nan
    df["variant"] = df["variant"].fillna("").astype(str)
    df = df[df["mean"].notna()]
    keys = list(CELL_KEYS)
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        first = df.loc[dup, keys].iloc[0].to_dict()
        raise ValueError(f"several cells share the keys {first}")
    return {tuple(str(v) for v in k): (float(m), float(s) if pd.notna(s) else math.nan)
            for k, m, s in zip(df[keys].itertuples(index=False, name=None), df["mean"], df["std"])}


def lookup(index: Mapping[tuple, tuple[float, float]], row_keys: Mapping[str, str], column: str, metric: str):
    k = (row_keys["model"], row_keys["reward"], row_keys["curriculum"], row_keys.get("variant", ""), column, metric)
    return index.get(tuple(str(x) for x in k))


def _shown(value: float, fmt: str, digits: int) -> float:
    return parse_number(fmt_value(value, fmt, digits))[0]


def bold_marks(spec: TableSpec, index) -> dict[tuple[int, int, int, int], bool]:
    """(block, row, column, part) -> whether that part is bold under the bold rule."""
    marks = {}
    if not spec.bold:
        return marks
    for bi, block in enumerate(spec.blocks):
        for ci, col in enumerate(spec.columns):
            for pi, part in enumerate(col.parts):
                if part.best is None:
                    continue
                shown = {}
                for ri, row in enumerate(block.rows):
                    v = lookup(index, row.keys, col.key, part.metric)
                    if v is not None:
                        shown[ri] = _shown(v[0], part.fmt, spec.digits)
                if len(shown) < 2:
                    continue
                best = (max if part.best == "max" else min)(shown.values())
                for ri, s in shown.items():
                    marks[bi, ri, ci, pi] = s == best
    return marks


def cell_text(spec: TableSpec, col, values, bold) -> str:
    """The printed cell: parts joined by " / ", bold whole when every part is bold."""
    texts = []
    for part, v in zip(col.parts, values):
        if v is None:
            texts.append("--")
            continue
        t = fmt_value(v[0], part.fmt, spec.digits)
        if spec.show_std and not math.isnan(v[1]):
            t += f" $\\pm$ {fmt_spread(v[1], part.fmt, spec.digits)}"
        texts.append(t)
    if bold and all(bold) and any(v is not None for v in values):
        return f"\\textbf{{{' / '.join(texts)}}}"
    return " / ".join(f"\\textbf{{{t}}}" if b else t for t, b in zip(texts, bold))


def header_lines(spec: TableSpec) -> list[str]:
    cols = [c.header for c in spec.columns]
    n = max([1, *map(len, cols)])
    out = []
    for li in range(n):
        parts = [f"\\textbf{{{h}}}" if li == 0 and h else "" for h in spec.corner]
        parts += [f"\\textbf{{{h[li]}}}" if li < len(h) and h[li] else "" for h in cols]
        out.append("\\rowcolor{gray!15} " + " & ".join(parts) + " \\\\")
    return out


def colspec(spec: TableSpec) -> str:
    return "l" * len(spec.corner) + "".join(("|" if c.rule_before else "") + c.align for c in spec.columns)


def render_rows(spec: TableSpec, cell_fn) -> list[str]:
    """The body lines from toprule to bottomrule; ``cell_fn(bi, ri, row, ci, col)`` prints a cell."""
    ncols = len(spec.corner) + len(spec.columns)
    out = ["\\toprule", *header_lines(spec)]
    prev_group = None
    for bi, block in enumerate(spec.blocks):
        out.append("\\midrule")
        if block.group is not None and block.group != prev_group:
            out.append(f"\\multicolumn{{{ncols}}}{{c}}{{\\cellcolor{{gray!5}}\\textbf{{{block.group}}}}} \\\\")
            out.append("\\midrule")
        prev_group = block.group
        if block.title:
            out.append(f"\\multicolumn{{{ncols}}}{{l}}{{\\textit{{{block.title}}}}} \\\\")
        for ri, row in enumerate(block.rows):
            parts = list(row.lead) + [cell_fn(bi, ri, row, ci, col) for ci, col in enumerate(spec.columns)]
            prefix = "\\rowcolor{blue!10} " if row.highlight else ""
            out.append(prefix + " & ".join(parts) + " \\\\")
    out.append("\\bottomrule")
    return out


def at_most(width: str) -> str:
    """``\\resizebox``'s width for a table shrunk to ``width`` when wider and left at its own width when not
    (``\\width`` is the box's natural width inside ``\\resizebox``'s first argument)."""
    return f"\\ifdim\\width>{width}{width}\\else\\width\\fi"


def wrap(spec: TableSpec, body: list[str], caption: str | None = None, label: str | None = None,
         notes: Sequence[str] = ()) -> str:
    """The float around the tabular: caption, label, a resizebox that shrinks a table wider than the page
    (``spec.width`` of the line width) and never enlarges a narrower one, and the notes under it
    (``vicurl.report.notes``)."""
    width = "\\linewidth" if spec.width == 1 else f"{spec.width:g}\\linewidth"
    fit = at_most(width)
    out = [f"\\begin{{{spec.env}}}[t]", "  \\centering", "  \\small",
           f"  \\caption{{{caption if caption is not None else spec.caption}}}",
           f"  \\label{{{label if label is not None else spec.label}}}",
           f"  \\resizebox{{{fit}}}{{!}}{{", f"    \\begin{{tabular}}{{{colspec(spec)}}}"]
    out += ["      " + line for line in body]
    out += ["    \\end{tabular}", "  }"]
    if notes:
        out += ["  \\par\\smallskip", f"  {{\\footnotesize\\raggedright Note. {' '.join(notes)}\\par}}"]
    out += [f"\\end{{{spec.env}}}"]
    return "\n".join(out) + "\n"


def render(spec: TableSpec, cells: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """The table as LaTeX; see the module docstring for the cell and bold rules."""
    index = cell_index(cells)
    marks = bold_marks(spec, index)

    def cell(bi, ri, row, ci, col):
        values = [lookup(index, row.keys, col.key, p.metric) for p in col.parts]
        bold = [marks.get((bi, ri, ci, pi), False) for pi in range(len(col.parts))]
        return cell_text(spec, col, values, bold)

    return wrap(spec, render_rows(spec, cell), notes=notes)


def standalone_document(body: str) -> str:
    """Wrap rendered tables in a minimal document with the paper's table packages (compile checks, previews)."""
    return ("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage[table]{xcolor}\n"
            "\\usepackage{graphicx}\n\\begin{document}\n" + body + "\\end{document}\n")
