r"""What a table shows, independent of where its numbers come from: a ``TableSpec``
(``layouts.table_spec``) is rendered with the cells of our results (``cells.table_cells``) or of
the paper's numbers (``paper.paper_cells``), long tables of ``CELL_KEYS`` + ``mean, std`` in which
a cell is found by its row's keys, the column's ``key`` and the part's ``metric``.

Values are in the workflow's units (rates as fractions, lengths in tokens, AULC as a ratio); a
``Part``'s format prints them as the paper does:

``pct``      x100, ``digits`` decimals: ``15.5`` (with the std: ``15.5 $\pm$ 1.7``)
``signed``   x100 with an explicit sign: ``$+$0.8``, ``$-$2.2`` (differences in points)
``percent``  x100 and a percent sign: ``3.9\%``
``ratio``    as is, ``digits`` decimals: ``13.0``
``int``      rounded to an integer: ``1895``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

CELL_KEYS = ("model", "reward", "curriculum", "variant", "benchmark", "metric")
FORMATS = ("pct", "signed", "percent", "ratio", "int")


@dataclass(frozen=True)
class Part:
    """One number of a cell: which metric, how it prints, and which way is best (None: never bold)."""

    metric: str
    fmt: str = "pct"
    best: str | None = "max"


@dataclass(frozen=True)
class Column:
    key: str                               # benchmark name, "average" or "all"
    header: tuple[str, ...]                # header lines (LaTeX)
    parts: tuple[Part, ...]
    align: str = "r"
    rule_before: bool = False              # a "|" before the column (the Average)


@dataclass(frozen=True)
class Row:
    lead: tuple[str, ...]                  # the label cells (LaTeX): the row label, and max_tokens
    keys: Mapping[str, str]                # model, reward, curriculum, variant
    highlight: bool = False


@dataclass(frozen=True)
class Block:
    title: str | None
    rows: tuple[Row, ...]
    group: str | None = None               # model header; printed when it changes


@dataclass(frozen=True)
class TableSpec:
    name: str
    caption: str
    label: str
    corner: tuple[str, ...]                # headers of the label columns
    columns: tuple[Column, ...]
    blocks: tuple[Block, ...]
    digits: int = 1
    show_std: bool = True
    bold: bool = True
    width: float = 1.0
    env: str = "table*"
    meta: Mapping[str, object] = field(default_factory=dict)


def fmt_value(x: float, fmt: str, digits: int) -> str:
    """The printed form of a value (see the module docstring)."""
    if fmt == "int":
        return f"{int(round(x))}"
    v = x if fmt == "ratio" else x * 100
    s = f"{v:.{digits}f}"
    if s.startswith("-") and float(s) == 0:
        s = s[1:]  # no "-0.0"
    if fmt == "signed":
        if float(s) > 0:
            return "$+$" + s
        if float(s) < 0:
            return "$-$" + s[1:]
        return s
    if fmt == "percent":
        return s + "\\%"
    return s


def fmt_spread(x: float, fmt: str, digits: int) -> str:
    """The printed std: in the value's units, without sign or percent sign."""
    if fmt == "int":
        return f"{int(round(x))}"
    return f"{(x if fmt == 'ratio' else x * 100):.{digits}f}"
