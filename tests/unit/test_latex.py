"""The LaTeX renderer: layout, cells, the bold rule, dashes, formats; it compiles with pdflatex."""

import math
import re
import shutil
import subprocess

import pandas as pd
import pytest

from vicurl.report.latex import render, standalone_document
from vicurl.report.spec import Block, Column, Part, Row, TableSpec, fmt_value


def cells():
    rows = []

    def add(model, reward, cur, bench, mean, std, metric="pass@1"):
        rows.append(dict(model=model, reward=reward, curriculum=cur, variant="", benchmark=bench,
                         metric=metric, mean=mean, std=std))

    add("m1", "base", "base", "aime24", 0.060, 0.019)
    add("m1", "base", "base", "average", 0.203, 0.006)
    add("m1", "oracle", "none", "aime24", 0.155, 0.017)
    add("m1", "oracle", "none", "math500", 0.702, 0.002)
    add("m1", "oracle", "none", "average", 0.321, 0.011)
    add("m1", "oracle", "vicurl", "aime24", 0.159, 0.012)
    add("m1", "oracle", "vicurl", "math500", 0.701, 0.015)
    add("m1", "oracle", "vicurl", "average", 0.330, math.nan)  # no std (one seed): the mean alone
    add("m1", "oracle", "vicurl", "aime24", 0.999, 0.0, metric="pass@8")
    add("m1", "oracle", "none", "aime24", 0.5, 0.0, metric="pass@8")
    add("m2", "oracle", "none", "aime24", 0.100, 0.010)
    add("m2", "oracle", "vicurl", "aime24", 0.1004, 0.020)  # tie at 1 decimal: 10.0 vs 10.0
    return pd.DataFrame(rows)


def keys(model, reward, cur):
    return {"model": model, "reward": reward, "curriculum": cur, "variant": ""}


def spec(parts=(Part("pass@1"),), **kw):
    blocks = []
    for m, name in (("m1", "Model-One"), ("m2", "Model-Two")):
        blocks.append(Block(None, (Row(("Base (No RL)",), keys(m, "base", "base")),), group=name))
        blocks.append(Block("Oracle Reward (w. Verifier)",
                            (Row(("No Curriculum",), keys(m, "oracle", "none")),
                             Row(("VI-CuRL",), keys(m, "oracle", "vicurl"), highlight=True)), group=name))
    cols = (Column("aime24", ("AIME", "2024"), parts), Column("math500", ("Math500",), parts),
            Column("average", ("Average",), parts, rule_before=True))
    return TableSpec(name="t", caption="Pass@1 results.", label="tab:test", corner=("Dataset",),
                     columns=cols, blocks=tuple(blocks), **kw)


def body_rows(tex):
    return [ln.strip() for ln in tex.splitlines() if ln.strip().endswith("\\\\")]


def find(tex, label, nth=0):
    hits = [r for r in body_rows(tex) if re.sub(r"^\\rowcolor\{[^}]*\} ", "", r).startswith(label + " &")]
    return hits[nth]


def test_structure():
    tex = render(spec(), cells())
    assert "\\begin{tabular}{lrr|r}" in tex and "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{" in tex
    assert tex.count("\\toprule") == 1 and tex.count("\\bottomrule") == 1
    assert "\\multicolumn{4}{c}{\\cellcolor{gray!5}\\textbf{Model-One}} \\\\" in tex
    assert tex.count("\\cellcolor{gray!5}") == 2  # one header per model
    assert tex.count("\\multicolumn{4}{l}{\\textit{Oracle Reward (w. Verifier)}}") == 2
    heads = [r for r in body_rows(tex) if r.startswith("\\rowcolor{gray!15}")]
    assert heads[0] == "\\rowcolor{gray!15} \\textbf{Dataset} & \\textbf{AIME} & \\textbf{Math500} & \\textbf{Average} \\\\"
    assert heads[1] == "\\rowcolor{gray!15}  & \\textbf{2024} &  &  \\\\"
    for r in body_rows(tex):
        if not r.startswith("\\multicolumn"):
            assert r.count("&") == 3, r
    assert tex.count("{") == tex.count("}")
    assert tex.count("\\begin{") == tex.count("\\end{")


def test_cells_bold_dash_highlight():
    tex = render(spec(), cells())
    # single-row block: no bold; missing Math500 -> "--"
    assert find(tex, "Base (No RL)") == "Base (No RL) & 6.0 $\\pm$ 1.9 & -- & 20.3 $\\pm$ 0.6 \\\\"
    assert find(tex, "No Curriculum") == "No Curriculum & 15.5 $\\pm$ 1.7 & \\textbf{70.2 $\\pm$ 0.2} & 32.1 $\\pm$ 1.1 \\\\"
    assert find(tex, "VI-CuRL") == ("\\rowcolor{blue!10} VI-CuRL & \\textbf{15.9 $\\pm$ 1.2} & 70.1 $\\pm$ 1.5 & "
                                    "\\textbf{33.0} \\\\")
    # model 2: tie at the displayed precision -> both bold; its Base row has no data at all
    assert find(tex, "Base (No RL)", 1) == "Base (No RL) & -- & -- & -- \\\\"
    assert find(tex, "No Curriculum", 1).split(" & ")[1] == "\\textbf{10.0 $\\pm$ 1.0}"
    assert find(tex, "VI-CuRL", 1).split(" & ")[1] == "\\textbf{10.0 $\\pm$ 2.0}"
    # a column where only one row has data gets no bold
    assert "\\textbf" not in find(tex, "VI-CuRL", 1).split(" & ")[2]


def test_style_options():
    tex = render(spec(show_std=False, bold=False, width=0.95, digits=2), cells())
    assert find(tex, "No Curriculum") == "No Curriculum & 15.50 & 70.20 & 32.10 \\\\"
    assert "\\resizebox{\\ifdim\\width>0.95\\linewidth0.95\\linewidth\\else\\width\\fi}{!}{" in tex


def test_two_part_cells_bold_per_part():
    tex = render(spec(parts=(Part("pass@1"), Part("pass@8"))), cells())
    # pass@1: No Curriculum 15.5 < VI-CuRL 15.9; pass@8: 50.0 < 99.9 -> VI-CuRL bold whole
    assert find(tex, "VI-CuRL").split(" & ")[1] == "\\textbf{15.9 $\\pm$ 1.2 / 99.9 $\\pm$ 0.0}"
    assert find(tex, "No Curriculum").split(" & ")[1] == "15.5 $\\pm$ 1.7 / 50.0 $\\pm$ 0.0"
    # Math500: pass@1 best is No Curriculum, pass@8 missing everywhere -> one bold part
    assert find(tex, "No Curriculum").split(" & ")[2] == "\\textbf{70.2 $\\pm$ 0.2} / --"


def test_lower_is_better_and_ambiguous_cells():
    lower = spec(parts=(Part("pass@1", best="min"),))
    assert find(render(lower, cells()), "No Curriculum").split(" & ")[1] == "\\textbf{15.5 $\\pm$ 1.7}"
    dup = pd.concat([cells(), cells().iloc[:1]])
    with pytest.raises(ValueError, match="several cells"):
        render(spec(), dup)


@pytest.mark.parametrize("x, fmt, text", [
    (0.155, "pct", "15.5"), (-0.0001, "pct", "0.0"), (0.008, "signed", "$+$0.8"), (-0.022, "signed", "$-$2.2"),
    (0.0, "signed", "0.0"), (0.039, "percent", "3.9\\%"), (13.0, "ratio", "13.0"), (1895.4, "int", "1895"),
])
def test_formats(x, fmt, text):
    assert fmt_value(x, fmt, 1) == text


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_compiles(tmp_path):
    (tmp_path / "t.tex").write_text(standalone_document(render(spec(), cells())))
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_a_wide_table_is_shrunk_to_the_line_and_a_narrow_one_left_as_it_is(tmp_path):
    """The rendered \\resizebox, typeset by pdflatex: a 30-column table comes out as wide as the line, the
    3-column one at its natural width (narrower than the line: never enlarged)."""
    wide_cols = tuple(Column(f"b{i}", (f"Bench{i}",), (Part("pass@1"),)) for i in range(30))
    wide = TableSpec(name="w", caption="Wide.", label="tab:w", corner=("Dataset",), columns=wide_cols,
                     blocks=spec().blocks)
    boxes = []
    for s in (spec(), wide):
        tex = render(s, cells())
        box = tex[tex.index("\\resizebox"): tex.index("\\end{tabular}") + len("\\end{tabular}")] + "}"
        boxes.append(box)
    body = "".join(f"\\setbox0=\\hbox{{{box}}}\\typeout{{WIDTH={{\\the\\wd0}}}}\n" for box in boxes)
    body += "\\typeout{LINE={\\the\\linewidth}}\n"
    (tmp_path / "w.tex").write_text(standalone_document(body))
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "w.tex"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]
    narrow, wide_w = (float(x) for x in re.findall(r"WIDTH=\{?([\d.]+)pt", r.stdout))
    line = float(re.search(r"LINE=\{?([\d.]+)pt", r.stdout).group(1))
    assert wide_w == pytest.approx(line, abs=0.01) and narrow < 0.8 * line
