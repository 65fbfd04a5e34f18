r"""Read a paper-style LaTeX table back into its lines and cells (``parse_table``, ``parse_number``).

Why: the paper's own tables are the reference the reproduction is checked against. The tests parse
the paper's ``.tex`` source and the tables ``latex.render`` writes with the same function and
compare them line by line; the transcription of the paper's numbers (``config/paper_numbers.csv``)
was made, and is re-checked, with it. It understands exactly the dialect of those tables (one
``tabular`` between ``\toprule`` and ``\bottomrule``; header, model-group, block-title and data
lines, cells separated by ``&``); it is not a LaTeX parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BOLD = re.compile(r"^\\textbf\{(.*)\}$", re.S)
_GROUP = re.compile(r"^\\multicolumn\{(\d+)\}\{c\}\{\\cellcolor\{gray!5\}\\textbf\{(.*)\}\}$", re.S)
_TITLE = re.compile(r"^\\multicolumn\{(\d+)\}\{l\}\{\\textit\{(.*)\}\}$", re.S)
_HIGHLIGHT = re.compile(r"^\\rowcolor\{blue!10\}\s*")
_HEADER = re.compile(r"^\\rowcolor\{gray!15\}\s*")


@dataclass(frozen=True)
class Cell:
    """One data cell: its text without the outer ``\\textbf{}``, and its bold parts.

    ``parts`` are the cell's numbers as printed, split at `` / `` (``"3.0 / 6.6"``), each
    without bold; ``bold`` says, per part, whether it is set in bold (a whole-cell
    ``\\textbf{a / b}`` makes every part bold).
    """

    text: str
    parts: tuple[str, ...]
    bold: tuple[bool, ...]


@dataclass(frozen=True)
class Line:
    """One line of the tabular body: kind is header, group, title, row or midrule."""

    kind: str
    text: str = ""                      # group / title text
    cells: tuple = ()                   # header: strings; row: label strings then Cell objects
    highlight: bool = False


@dataclass
class ParsedTable:
    label: str
    colspec: str
    n_lead: int                         # leading label columns (1, or 2 in the long-output table)
    lines: list[Line] = field(default_factory=list)

    def data_rows(self):
        """(group, title, row line) for every data row, in order."""
        group = title = None
        for ln in self.lines:
            if ln.kind == "group":
                group, title = ln.text, None
            elif ln.kind == "midrule":
                title = None
            elif ln.kind == "title":
                title = ln.text
            elif ln.kind == "row":
                yield group, title, ln


def _strip_bold(s: str) -> tuple[str, bool]:
    m = _BOLD.match(s)
    if m and _balanced(m.group(1)):
        return m.group(1).strip(), True
    return s, False


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def parse_cell(s: str) -> Cell:
    s = " ".join(s.split())
    inner, whole = _strip_bold(s)
    parts, bold = [], []
    for p in inner.split(" / ") if " / " in inner else [inner]:
        text, b = _strip_bold(p.strip())
        parts.append(text)
        bold.append(whole or b)
    return Cell(inner, tuple(parts), tuple(bold))


def parse_number(part: str) -> tuple[float | None, float | None]:
    """``"15.5 $\\pm$ 1.7"`` -> (15.5, 1.7); ``"$-$2.2"`` -> (-2.2, None); ``"--"`` -> (None, None)."""
    s = part.strip()
    if s in ("--", "-", ""):
        return None, None
    mean, _, std = s.partition("$\\pm$")

    def num(x: str) -> float:
        x = x.strip().replace("$-$", "-").replace("$+$", "+").replace("\\%", "").replace("$", "")
        return float(x)

    return num(mean), (num(std) if std.strip() else None)


def _body(tex: str, label: str) -> tuple[str, str]:
    at = tex.find(f"\\label{{{label}}}")
    if at < 0:
        raise ValueError(f"no table with \\label{{{label}}}")
    start = tex.rfind("\\begin{table", 0, at)
    end = tex.find("\\end{table", at)
    env = tex[start:end]
    m = re.search(r"\\begin\{tabular\}\{([^}]*)\}(.*?)\\end\{tabular\}", env, re.S)
    if not m:
        raise ValueError(f"table {label}: no tabular environment")
    return m.group(1), m.group(2)


def parse_table(tex: str, label: str) -> ParsedTable:
    """The table whose ``\\label`` is ``label`` (e.g. ``tab:main_results_part1``)."""
    colspec, body = _body(tex, label)
    n_lead = len(re.match(r"^l*", colspec).group(0))
    out = ParsedTable(label=label, colspec=colspec, n_lead=n_lead)
    body = body.split("\\toprule", 1)[1].split("\\bottomrule", 1)[0]
    # \midrule lines carry no "\\": turn them into lines of their own first
    body = body.replace("\\midrule", "\\midrule\\\\")
    for raw in body.split("\\\\"):
        s = " ".join(raw.split())
        if not s:
            continue
        if s == "\\midrule":
            out.lines.append(Line("midrule"))
        elif _HEADER.match(s):
            cells = [c.strip() for c in _HEADER.sub("", s).split("&")]
            out.lines.append(Line("header", cells=tuple(_strip_bold(c)[0] if c else "" for c in cells)))
        elif m := _GROUP.match(s):
            out.lines.append(Line("group", text=m.group(2)))
        elif m := _TITLE.match(s):
            out.lines.append(Line("title", text=m.group(2)))
        else:
            hl = bool(_HIGHLIGHT.match(s))
            cells = [c.strip() for c in _HIGHLIGHT.sub("", s).split("&")]
            lead = tuple(cells[:n_lead])
            out.lines.append(Line("row", cells=lead + tuple(parse_cell(c) for c in cells[n_lead:]), highlight=hl))
    return out
