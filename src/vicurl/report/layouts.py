r"""One layout per table type: a resolved table definition -> ``TableSpec`` (columns, blocks, rows),
with the columns and headers of the paper's tables of that type (docs/evaluation.md, "Tables and
figures"; ``breakdown`` has no average unless ``style.average``).

The metric names are the ones ``cells.table_cells`` computes and the paper's numbers file uses:
``pass@k`` per benchmark and for ``average``; ``truncated_rate``, ``no_answer_rate``,
``mean_length``, ``p90_length`` under benchmark ``all`` (long-output columns); ``avg_t_ref``,
``avg_t_long``, ``best_avg``, ``upgration``, ``aulc`` under benchmark ``average`` (mechanism).
"""

from __future__ import annotations

from vicurl.report.spec import Block, Column, Part, Row, TableSpec

AVERAGE = "average"
ALL = "all"
LENGTH_METRICS = ("truncated_rate", "no_answer_rate", "mean_length", "p90_length")


def _blocks(t: dict) -> tuple[Block, ...]:
    out = []
    for b in t["blocks"]:
        rows = tuple(Row(lead=(r["label"], *r["lead"]),
                         keys={k: r[k] for k in ("model", "reward", "curriculum", "variant")},
                         highlight=r["highlight"]) for r in b["rows"])
        out.append(Block(b["title"], rows, group=b.get("group")))
    return tuple(out)


def _bench_columns(t: dict, parts: tuple[Part, ...]) -> list[Column]:
    return [Column(b, tuple(t["headers"][b]), parts) for b in t["benchmarks"]]


def table_spec(t: dict) -> TableSpec:
    """The spec of a resolved table definition (``tableconfig.resolve``)."""
    typ, style = t["type"], t["style"]
    metric = t.get("metric", "pass@1")
    corner: tuple[str, ...] = (style["corner"],)
    if typ in ("main", "breakdown"):
        parts = (Part(metric),)
        cols = _bench_columns(t, parts)
        if style["average"]:
            cols.append(Column(AVERAGE, ("Average",), parts, rule_before=True))
    elif typ == "ablation":
        parts = tuple(Part(m) for m in t["metrics"])
        cols = _bench_columns(t, parts)
        if style["average"]:
            cols.append(Column(AVERAGE, ("Average",), parts, rule_before=True))
    elif typ == "long_output":
        corner = (style["corner"], "Max tokens")  # the response budget (the paper prints verl's key, max\\_tokens)
        parts = (Part(metric),)
        cols = _bench_columns(t, parts)
        if style["average"]:
            cols.append(Column(AVERAGE, ("Avg",), parts, rule_before=True))
        cols += [
            Column(ALL, ("Cap-hit",), (Part("truncated_rate", "percent", None),), align="c"),
            Column(ALL, ("No-boxed",), (Part("no_answer_rate", "percent", None),), align="c"),
            Column(ALL, ("Mean len",), (Part("mean_length", "int", None),), align="c"),
            Column(ALL, ("P90 len",), (Part("p90_length", "int", None),), align="r"),
        ]
    elif typ == "mechanism":
        k = metric.split("@")[-1]
        cols = [
            Column(AVERAGE, (f"Avg P@{k} @ $T_\\mathrm{{ref}}$",), (Part("avg_t_ref"),), align="c"),
            Column(AVERAGE, (f"Avg P@{k} @ $T_\\mathrm{{long}}$",), (Part("avg_t_long"),), align="c"),
            Column(AVERAGE, (f"Best Avg P@{k}",), (Part("best_avg"),), align="c"),
            Column(AVERAGE, ("Upgration",), (Part("upgration", "signed"),), align="c"),
            Column(AVERAGE, ("AULC",), (Part("aulc", "ratio"),), align="c", rule_before=True),
        ]
    else:
        raise ValueError(f"table {t['name']}: unknown type {typ!r}")
    return TableSpec(
        name=t["name"], caption=t["caption"], label=t["label"], corner=corner, columns=tuple(cols),
        blocks=_blocks(t), digits=int(style["digits"]), show_std=bool(style["std"]),
        bold=bool(style["bold"]), width=float(style["width"]), meta={"type": typ, "paper": t.get("paper")},
    )
