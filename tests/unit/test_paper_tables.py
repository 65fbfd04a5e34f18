r"""The paper's tables, regenerated: the paper config's table definitions + the transcribed numbers
(config/paper_numbers.csv) must render into the paper's own tables (tests/data/paper_tables.tex,
verbatim from the paper's source): the same caption, label, columns, header, blocks, rows and
printed values. Bold follows one rule (best displayed value per block, column and part); the cells
where the paper's own bolding departs from it are listed in BOLD_EXCEPTIONS.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from vicurl.report import latex, layouts, paper, tableconfig, texparse
from vicurl.report.latex import render, standalone_document

from harness import REPO

FIXTURE = REPO / "tests" / "data" / "paper_tables.tex"
NUMBERS = REPO / "config" / "paper_numbers.csv"

#: (paper table, model group, block, row, column header): who is bold in the paper vs under the rule.
#: Everywhere else the paper's bold cells are exactly the rule's.
BOLD_EXCEPTIONS = {
    # Qwen2.5-Math-1.5B, oracle block: the paper bolds VI-CuRL, but No Curriculum (8.5) beats its 8.3
    ("main_results_part1", "Qwen2.5-Math-1.5B", "Oracle Reward (w. Verifier)", "VI-CuRL", "AIME 2025"): "paper",
    ("main_results_part1", "Qwen2.5-Math-1.5B", "Oracle Reward (w. Verifier)", "No Curriculum", "AIME 2025"): "rule",
    # ... and on Minerva MATH VI-CuRL (16.1) is below VCRL (18.7) and AdaRFT (20.1)
    ("main_results_part1", "Qwen2.5-Math-1.5B", "Oracle Reward (w. Verifier)", "VI-CuRL", "Minerva MATH"): "paper",
    ("main_results_part1", "Qwen2.5-Math-1.5B", "Oracle Reward (w. Verifier)", "AdaRFT", "Minerva MATH"): "rule",
    # Pass@8, Qwen2.5-Math-1.5B, Math500: the paper bolds SENT (71.4), AdaRFT has 72.4
    ("main_results_oracle_pass@8", "Qwen2.5-Math-1.5B", "Oracle (w. Verifier)", "SENT", "Math500"): "paper",
    ("main_results_oracle_pass@8", "Qwen2.5-Math-1.5B", "Oracle (w. Verifier)", "AdaRFT", "Math500"): "rule",
}


def find_paper() -> Path | None:
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "paper" / "vi-curl.tex"
        if cand.is_file():
            return cand
    return None


@pytest.fixture(scope="module")
def paper_tex() -> str:
    return FIXTURE.read_text()


@pytest.fixture(scope="module")
def tables():
    config = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    resolved, _ = tableconfig.resolve(config)
    return {t["paper"]: t for t in resolved.values() if t["paper"]}


@pytest.fixture(scope="module")
def numbers():
    return paper.load_paper_numbers(NUMBERS)


def test_fixture_is_the_papers_source(paper_tex):
    """The fixture holds the paper's tables verbatim (checked when the paper's source is at hand)."""
    src = find_paper()
    if src is None:
        pytest.skip("the paper's source (shared/paper/vi-curl.tex) is not above the repo")
    full = src.read_text()
    for name in tableconfig.PAPER_TABLES:
        at = full.index(f"\\label{{tab:{name}}}")
        env = full[full.rfind("\\begin{table*}", 0, at):full.index("\\end{table*}", at) + len("\\end{table*}")]
        assert env in paper_tex, name


def test_the_paper_config_defines_every_paper_table(tables):
    assert sorted(tables) == sorted(tableconfig.PAPER_TABLES)


def test_every_number_of_the_paper_is_transcribed(paper_tex, tables, numbers):
    """Re-parse the .tex along each table's rows and columns: the data file holds exactly these values."""
    assert sorted(numbers["table"].unique()) == sorted(tableconfig.PAPER_TABLES)
    for name, t in tables.items():
        parsed = paper.cells_from_parsed(layouts.table_spec(t), texparse.parse_table(paper_tex, f"tab:{name}"), name)
        ours = paper.paper_cells(numbers, name)
        assert len(parsed) == len(ours), name
        key = ["model", "reward", "curriculum", "variant", "benchmark", "metric"]
        m = parsed.merge(ours, on=key, how="outer", suffixes=("_tex", "_file"), indicator=True)
        assert (m["_merge"] == "both").all(), m[m["_merge"] != "both"].head()
        for r in m.itertuples():
            assert math.isclose(r.mean_tex, r.mean_file, abs_tol=1e-9), (name, r)
            both_nan = pd.isna(r.std_tex) and pd.isna(r.std_file)
            assert both_nan or math.isclose(r.std_tex, r.std_file, abs_tol=1e-9), (name, r)
    # spot checks against the paper, in its own units
    one = numbers[(numbers["table"] == "main_results_part1") & (numbers["model"] == "qwen_math_1.5b")
                  & (numbers["reward"] == "oracle") & (numbers["curriculum"] == "none") & (numbers["benchmark"] == "aime24")]
    assert one[["mean", "std"]].values.tolist() == [[0.155, 0.017]]
    aulc = numbers[(numbers["table"] == "mechanism") & (numbers["curriculum"] == "vicurl") & (numbers["metric"] == "aulc")]
    assert aulc["mean"].tolist() == [13.0]
    p90 = numbers[(numbers["table"] == "long_output") & (numbers["variant"] == "8192") & (numbers["metric"] == "p90_length")]
    assert sorted(p90["mean"]) == [4251, 4511]


#: the paper's headers that print a config key, and the label ours print instead
HEADER_LABELS = {"max\\_tokens": "Max tokens"}


def _canonical(t: texparse.ParsedTable) -> list:
    """The table's lines without bold: what the reader sees, for an exact comparison (the paper's headers that
    print a config key read as our label)."""
    out = []
    for ln in t.lines:
        if ln.kind == "row":
            out.append(("row", ln.highlight, tuple(c if isinstance(c, str) else c.parts for c in ln.cells)))
        elif ln.kind == "header":
            out.append((ln.kind, ln.text.replace("max\\_tokens", HEADER_LABELS["max\\_tokens"]),
                        tuple(HEADER_LABELS.get(c, c) for c in ln.cells)))
        else:
            out.append((ln.kind, ln.text, ln.cells))
    return out


def _bold(t: texparse.ParsedTable, name: str) -> set:
    headers = [ln.cells for ln in t.lines if ln.kind == "header"]
    cols = [" ".join(h[j] for h in headers if h[j]).strip() for j in range(len(headers[0]))]
    out = set()
    for group, title, ln in t.data_rows():
        for j, cell in enumerate(ln.cells):
            if isinstance(cell, texparse.Cell) and any(cell.bold):
                out.add((name, group, title, ln.cells[0], cols[j]))
    return out


def _caption_label(tex: str, label: str) -> tuple[str, str]:
    at = tex.index(f"\\label{{{label}}}")
    env = tex[tex.rfind("\\begin{table", 0, at):at]
    cap = re.search(r"\\caption\{(.*)\}\s*$", env, re.S).group(1)
    return " ".join(cap.split()), label


@pytest.mark.parametrize("name", tableconfig.PAPER_TABLES)
def test_rendering_the_papers_numbers_reproduces_the_papers_table(name, paper_tex, tables, numbers):
    t = tables[name]
    ours_tex = render(layouts.table_spec(t), paper.paper_cells(numbers, name))
    label = f"tab:{name}"
    assert t["label"] == label
    theirs, ours = texparse.parse_table(paper_tex, label), texparse.parse_table(ours_tex, label)
    assert ours.colspec == theirs.colspec
    assert _canonical(ours) == _canonical(theirs)
    # the paper's caption, plus the sentence saying which std the Average prints (where it prints one)
    note = tableconfig.AVERAGE_STD_NOTE["benchmarks"] if t["style"]["std"] and t["style"]["average"] else ""
    paper_caption, _ = _caption_label(paper_tex, label)
    assert _caption_label(ours_tex, label) == (f"{paper_caption} {note}".strip(), label)
    width = re.search(r"\\resizebox\{([^}]*)\}", paper_tex[paper_tex.index(f"\\label{{{label}}}"):]).group(1)
    assert f"\\resizebox{{{latex.at_most(width)}}}" in ours_tex  # the paper's width, never enlarged
    # bold: the rule's cells, except the listed departures of the paper's own bolding
    paper_only = _bold(theirs, name) - _bold(ours, name)
    rule_only = _bold(ours, name) - _bold(theirs, name)
    expected = {k for k, v in BOLD_EXCEPTIONS.items() if k[0] == name}
    assert paper_only == {k for k in expected if BOLD_EXCEPTIONS[k] == "paper"}
    assert rule_only == {k for k in expected if BOLD_EXCEPTIONS[k] == "rule"}


def test_the_long_output_table_has_no_bold_as_in_the_paper(tables, numbers):
    tex = render(layouts.table_spec(tables["long_output"]), paper.paper_cells(numbers, "long_output"))
    assert "\\textbf{3" not in tex and "\\textbf{2" not in tex  # headers only
    on = dict(tables["long_output"], style={**tables["long_output"]["style"], "bold": True})
    tex = render(layouts.table_spec(on), paper.paper_cells(numbers, "long_output"))
    assert "\\textbf{20.3}" in tex and "\\textbf{38.6}" in tex  # the rule, when asked for


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_every_paper_table_compiles(tmp_path, tables, numbers):
    from vicurl.report.compare import render_comparison

    body = ""
    for name, t in tables.items():
        spec = layouts.table_spec(t)
        cells = paper.paper_cells(numbers, name)
        body += render(spec, cells) + "\n" + render_comparison(spec, cells.iloc[::2], cells) + "\n"
    (tmp_path / "t.tex").write_text(standalone_document(body))
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (tmp_path / "t.pdf").stat().st_size > 10_000
