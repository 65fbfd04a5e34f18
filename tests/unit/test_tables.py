"""Table definitions (tableconfig.resolve) and our results as table cells (cells.table_cells)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from vicurl.report import layouts
from vicurl.report.cells import table_cells
from vicurl.report.latex import render
from vicurl.report.tableconfig import resolve

BENCH = ["a", "b"]


def config(tables=None, **study_kw):
    c = {
        "datasets": {"train": {"source": "synthetic"}, "a": {"source": "synthetic", "label": "A"},
                     "b": {"source": "synthetic"}, "c": {"source": "synthetic"}},
        "models": {"m": {"label": "Model-M"}, "n": {}},
        "rewards": {"oracle": {}},
        "curricula": {"none": {}, "vicurl": {}, "static_confidence": {}},
        "train": {"total_steps": 20, "max_response_length": 64},
        "eval": {"every": 10, "ks": [1, 8], "checkpoint": "last"},
        "studies": {
            "s": {"train_set": "train", "benchmarks": BENCH, "models": ["m"],
                  "settings": {"oracle": ["none", "vicurl"]}, "seeds": [0, 1], **study_kw},
            "long": {"train_set": "train", "benchmarks": BENCH, "models": ["m"],
                     "settings": {"oracle": ["none"]}, "seeds": [0], "train": {"max_response_length": 128}},
        },
    }
    if tables is not None:
        c["tables"] = tables
    return c


def one(table, **kw):
    resolved, warnings = resolve(config({"t": table}, **kw))
    return resolved["t"], warnings


# ---- resolution -------------------------------------------------------------------------------

def test_default_tables_and_main_blocks():
    resolved, warnings = resolve(config())
    assert sorted(resolved) == ["long_pass1", "long_pass8", "s_pass1", "s_pass8"] and not warnings
    t = resolved["s_pass1"]
    assert t["label"] == "tab:s_pass1" and t["headers"] == {"a": ["A"], "b": ["b"]}
    base, oracle = t["blocks"]
    assert base["rows"][0]["label"] == "Base (No RL)" and base["rows"][0]["step"] == 0 and base["group"] is None
    assert [(r["label"], r["step"], r["highlight"]) for r in oracle["rows"]] == [("No Curriculum", 20, False), ("VI-CuRL", 20, True)]
    assert oracle["title"] == "Oracle Reward (w. Verifier)"


def test_group_headers_only_with_several_models():
    t, _ = one({"type": "main", "study": "s", "models": ["m", "n"]})
    assert [b["group"] for b in t["blocks"]] == ["Model-M", "Model-M", "n", "n"]


def test_missing_studies_and_settings_warn_and_print_dashes():
    t, w = one({"type": "main", "study": "nope", "models": ["m"], "benchmarks": ["a"],
                "blocks": [{"title": None, "rows": [{"reward": "entropy", "curriculum": "vicurl"}]}]})
    assert len(w) == 1 and "study 'nope'" in w[0] and "tables.t" in w[0]
    assert t["blocks"][1]["rows"][0]["step"] is None
    tex = render(layouts.table_spec(t), table_cells(t, scores()))
    assert "VI-CuRL & -- & -- \\\\" in tex
    _, w = one({"type": "main", "study": "s", "blocks": [{"rows": [{"reward": "entropy", "curriculum": "none"}]}]})
    assert len(w) == 1 and "1 row(s) name a setting their study does not train" in w[0]


@pytest.mark.parametrize("table, named", [
    ({"type": "mian", "study": "s"}, "tables.t.type"),
    ({"type": "main", "study": "s", "t_ref": 1}, "tables.t.t_ref"),
    ({"type": "main", "study": "s", "models": ["x"]}, "tables.t.models"),
    ({"type": "main", "study": "s", "benchmarks": ["zz"]}, "tables.t.benchmarks"),
    ({"type": "main", "study": "s", "headers": {"c": "C"}}, "tables.t.headers.c"),
    ({"type": "main", "study": "s", "step": 15}, "tables.t.step"),
    ({"type": "main", "study": "s", "paper": "nope"}, "tables.t.paper"),
    ({"type": "main", "study": "nope"}, "tables.t.benchmarks"),
    ({"type": "ablation", "study": "s", "rows": [{"reward": "orcle", "curriculum": "none"}]}, "tables.t.rows[0].reward"),
    ({"type": "ablation", "study": "s", "rows": [{"reward": "oracle", "curriculum": "vicrl"}]}, "tables.t.rows[0].curriculum"),
    ({"type": "ablation", "study": "s", "rows": [{"reward": "oracle", "curriculum": "none", "max_tokens": 9}]}, "max_tokens"),
    ({"type": "mechanism", "study": "s", "t_ref": 20, "t_long": 10}, "tables.t.t_long"),
    ({"type": "mechanism", "study": "s", "t_ref": 5, "t_long": 20}, "tables.t.t_ref"),
    ({"type": "mechanism", "study": "s", "t_long": 20}, "tables.t.t_ref"),
    ({"type": "long_output", "study": "long", "rows": [{"reward": "oracle", "curriculum": "none", "max_tokens": 64}]}, "max_tokens"),
    ({"type": "ablation", "study": "s", "rows": [{"reward": "oracle", "curriculum": "none"},
                                                  {"reward": "oracle", "curriculum": "none", "study": "long"}]}, "two rows"),
])
def test_errors_name_the_key(table, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        one(table)


def test_long_output_budget_from_the_study():
    t, _ = one({"type": "long_output", "study": "long", "rows": [
        {"reward": "oracle", "curriculum": "none", "study": "s"}, {"reward": "oracle", "curriculum": "none"}]})
    assert [(r["variant"], r["lead"]) for r in t["blocks"][0]["rows"]] == [("64", ["64"]), ("128", ["128"])]


# ---- cells from results ---------------------------------------------------------------------

def rec(study, cur, seed, step, bench, p1, reward="oracle", **kw):
    stats = dict(n_problems=10, n_samples=4, no_answer_rate=0.1, truncated_rate=0.0, mean_length=10.0, p90_length=20.0)
    return dict(study=study, model="m", reward=reward, curriculum=cur, seed=seed, step=step, benchmark=bench,
                **{"pass@1": p1, "pass@8": min(1.0, 2 * p1)}, **{**stats, **kw})


def scores(extra=()):
    recs = []
    for seed in (0, 1):
        for b, v in (("a", 0.2), ("b", 0.4), ("c", 0.9)):  # the base model is also scored on c
            recs.append(rec("base", "base", seed, 0, b, v + 0.01 * seed, reward="base"))
        for cur, bonus in (("none", 0.0), ("vicurl", 0.1)):
            for step in (10, 20):
                for b, v in (("a", 0.3), ("b", 0.5)):
                    recs.append(rec("s", cur, seed, step, b, v + bonus + 0.02 * seed + 0.01 * step / 10))
    return pd.DataFrame(recs + list(extra))


def cell(cells, cur, bench, metric="pass@1"):
    hit = cells[(cells["curriculum"] == cur) & (cells["benchmark"] == bench) & (cells["metric"] == metric)]
    assert len(hit) == 1, (cur, bench, metric)
    return hit.iloc[0]


def test_main_cells_average_over_the_tables_benchmarks():
    t, _ = one({"type": "main", "study": "s"})
    cells = table_cells(t, scores())
    base = cell(cells, "base", "average")
    assert base["mean"] == pytest.approx(np.mean([(0.2 + 0.4) / 2, (0.21 + 0.41) / 2]))  # not over c
    vi = cell(cells, "vicurl", "a")
    assert vi["mean"] == pytest.approx(0.3 + 0.1 + 0.01 + 0.02 * 0.5 + 0.01)  # step 20, mean of seeds 0 and 1
    assert vi["std"] == pytest.approx(np.std([0.42, 0.44], ddof=1)) and vi["n_seeds"] == 2
    tex = render(layouts.table_spec(t), cells)
    assert "\\textbf{43.0 $\\pm$ 1.4}" in tex


def test_base_row_reads_the_seeds_of_the_tables_study():
    c = config({"t": {"type": "main", "study": "s"}}, seeds=[1])
    t = resolve(c)[0]["t"]
    cells = table_cells(t, scores())
    base = cell(cells, "base", "a")
    assert base["n_seeds"] == 1 and base["mean"] == pytest.approx(0.21)


def test_single_seed_cells_have_no_std():
    t, _ = one({"type": "main", "study": "s"})
    cells = table_cells(t, scores()[lambda d: d["seed"] == 0])
    assert cells["std"].isna().all() and (cells["n_seeds"] == 1).all()
    tex = render(layouts.table_spec(t), cells)
    assert "\\pm" not in tex.split("\\toprule")[1]


def test_ablation_cells_have_both_metrics():
    t, _ = one({"type": "ablation", "study": "s"})
    cells = table_cells(t, scores())
    assert set(cells["metric"]) == {"pass@1", "pass@8"}
    tex = render(layouts.table_spec(t), cells)
    assert "\\textbf{43.0 / 86.0}" in tex and "33.0 / 66.0" in tex


def test_long_output_pools_samples():
    extra = [rec("long", "none", 0, 20, "a", 0.3, no_answer_rate=0.5, mean_length=100.0, truncated_rate=0.2),
             rec("long", "none", 0, 20, "b", 0.5, no_answer_rate=0.0, mean_length=40.0, truncated_rate=0.0,
                 n_problems=30)]
    t, _ = one({"type": "long_output", "study": "long", "rows": [
        {"reward": "oracle", "curriculum": "none", "study": "s"}, {"reward": "oracle", "curriculum": "none"}]})
    cells = table_cells(t, scores(extra))
    long = cells[cells["variant"] == "128"].set_index("metric")
    assert long.loc["no_answer_rate", "mean"] == pytest.approx(0.5 * 10 / 40)  # sample-weighted
    assert long.loc["mean_length", "mean"] == pytest.approx((100 * 10 + 40 * 30) / 40)
    tex = render(layouts.table_spec(t), cells)
    assert "No Curriculum & 128 & 30.0 & 50.0 & 40.0 & 5.0\\% & 12.5\\% & 55 & 20 \\\\" in tex


def test_mechanism_cells():
    recs = []
    curves = {"none": [0.3, 0.1, 0.1, 0.1], "vicurl": [0.3, 0.4, 0.5, 0.5]}
    for cur, ys in curves.items():
        for step, y in zip((10, 20, 30, 40), ys):
            for b in BENCH:
                recs.append(rec("s", cur, 0, step, b, y))
    c = config({"t": {"type": "mechanism", "study": "s", "t_ref": 20, "t_long": 40,
                      "rows": [{"reward": "oracle", "curriculum": cur} for cur in curves]}})
    c["train"]["total_steps"] = 40
    t = resolve(c)[0]["t"]
    cells = table_cells(t, pd.DataFrame(recs)).set_index(["curriculum", "metric"])["mean"]
    assert cells["none", "avg_t_ref"] == pytest.approx(0.1) and cells["vicurl", "avg_t_long"] == pytest.approx(0.5)
    assert cells["none", "best_avg"] == pytest.approx(0.3)
    assert cells["vicurl", "upgration"] == pytest.approx(0.1) and cells["none", "upgration"] == pytest.approx(0.0)
    area_none = np.trapezoid(curves["none"], [10, 20, 30, 40])
    assert cells["none", "aulc"] == 1.0
    assert cells["vicurl", "aulc"] == pytest.approx(np.trapezoid(curves["vicurl"], [10, 20, 30, 40]) / area_none)
    tex = render(layouts.table_spec(t), table_cells(t, pd.DataFrame(recs)))
    assert "\\textbf{$+$10.0}" in tex and "No Curriculum & 10.0 & 10.0 & 30.0 & 0.0 & 1.0 \\\\" in tex
    # a reference curve with other steps gives no AULC
    partial = pd.DataFrame([r for r in recs if not (r["curriculum"] == "none" and r["step"] == 30)])
    cells = table_cells(t, partial).set_index(["curriculum", "metric"])["mean"]
    assert ("vicurl", "aulc") not in cells.index and cells["none", "aulc"] == 1.0


def test_breakdown_and_no_data():
    t, _ = one({"type": "breakdown", "study": "s", "step": 10})
    cells = table_cells(t, scores())
    assert cell(cells, "none", "a")["mean"] == pytest.approx(0.3 + 0.01 + 0.01)
    empty = table_cells(t, scores().iloc[:0])
    assert empty.empty
    assert render(layouts.table_spec(t), empty).count("--") == 4


# ---- notes under a table ------------------------------------------------------------------------

def test_notes_count_timeouts_and_name_rows_with_other_seed_counts():
    from vicurl.report.notes import table_notes

    t, _ = one({"type": "main", "study": "s"})
    assert table_notes(t, scores()) == []  # every row 2 seeds, nothing timed out
    timed_out = scores().assign(n_timeouts=0)
    timed_out.loc[(timed_out["curriculum"] == "vicurl") & (timed_out["step"] == 20), "n_timeouts"] = 3
    timed_out.loc[(timed_out["curriculum"] == "vicurl") & (timed_out["step"] == 10), "n_timeouts"] = 100  # not read
    [note] = table_notes(t, timed_out)
    # 2 seeds x 2 benchmarks of the VI-CuRL row at step 20; every row read: 3 rows x 2 seeds x 2 benchmarks x 40 samples
    assert note.startswith("12 graded samples of 480 ran out of the grader's CPU budget")
    one_seed = scores()[lambda d: ~((d["curriculum"] == "vicurl") & (d["seed"] == 1))]
    [note] = table_notes(t, one_seed)
    assert note == "Rows differ in their numbers of seeds: 2 seeds each, but VI-CuRL: 1 seed."
    tex = render(layouts.table_spec(t), table_cells(t, one_seed), table_notes(t, one_seed))
    assert tex.index("\\end{tabular}") < tex.index("Note. Rows differ") < tex.index("\\end{table*}")
