"""The findings table (vicurl.report.findings): the verdict rule, each claim's per-seed statistic,
the base model's misleading majorities, and the rendering."""

import math
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vicurl.grading.classes import majority_class
from vicurl.report import findings as F
from vicurl.report.latex import standalone_document

from harness import REPO

# ---------------------------------------------------------------- the verdict rule


def _one(values, side="<", threshold=1.0, **kw):
    return F.Finding("k", "c", "p", tuple(values), tuple(range(len(values))), threshold, side, "ratio", **kw)


@pytest.mark.parametrize("values,side,expected", [
    ([0.5, 0.6, 0.55], "<", "holds"),
    ([1.5, 1.6, 1.4], "<", "opposite"),
    ([0.9, 1.1, 1.0], "<", "inconclusive"),
    ([0.5], "<", "inconclusive"),  # one seed has no spread
    ([0.5, math.nan, 0.6, 0.55], "<", "holds"),  # a seed without a value does not count
    ([1.5, 1.6, 1.4], ">", "holds"),
])
def test_verdict_cases(values, side, expected):
    assert F.verdicts([_one(values, side)]) == [expected]


def test_one_finding_is_scipys_t_test_by_enumeration():
    """One claim (Holm leaves alpha as it is): holds where scipy's one-sided t test rejects at alpha, opposite
    where the other side's does, over a grid of 3-seed samples."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        v = rng.normal(rng.uniform(-1, 1), rng.uniform(0.01, 1), size=3)
        up = stats.ttest_1samp(v, 0.0, alternative="greater").pvalue
        want = "holds" if up < 0.05 else "opposite" if 1 - up < 0.05 else "inconclusive"
        assert F.verdicts([_one(v, ">", 0.0)]) == [want]
    with pytest.raises(ValueError, match="side"):
        F.verdicts([_one([1, 2], "<=")])


def test_two_arms_are_welchs_test_and_holm_corrects_across_the_table():
    a, b = (0.50, 0.52, 0.55), (0.40, 0.47, 0.41)
    f = F.Finding("g", "c", "p", a, (0, 1, 2), 0.0, ">", "pp", versus=b)
    p = stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    assert f.test().p_claim == pytest.approx(p) and f.mean == pytest.approx(np.mean(a) - np.mean(b))
    assert 0.01 < p < 0.05  # alone it holds; beside four claims Holm's first level is 0.01
    nulls = [_one([0.9, 1.1, 1.0]) for _ in range(4)]
    assert F.verdicts([f]) == ["holds"] and F.verdicts([f, *nulls])[0] == "inconclusive"
    got = F.to_frame([f, *nulls])
    assert set(got.columns) >= {"p_claim", "p_opposite", "p_smaller", "per_seed_b"}
    assert got.loc[0, "ours"] == "+9.7 pp (52.3 ± 2.5 vs 42.7 ± 3.8; n=3 vs 3)"


def test_the_papers_gap_is_refuted_only_where_given():
    gain = dict(values=(0.30, 0.31, 0.32), seeds=(0, 1, 2), threshold=0.0, side=">", unit="pp",
                versus=(0.0, 0.01, 0.0))
    assert F.verdicts([F.Finding("g", "c", "p", **gain)]) == ["holds"]
    assert F.verdicts([F.Finding("g", "c", "p", **gain, gap=0.5)]) == ["smaller than the paper's gap"]
    assert F.verdicts([F.Finding("g", "c", "p", **gain, gap=0.31)]) == ["holds"]  # the paper's number is not rejected


def test_margins_are_statsmodels_tests():
    from statsmodels.stats.weightstats import ttost_ind

    a, b = (0.50, 0.51, 0.49, 0.50), (0.505, 0.50, 0.495, 0.51)
    ni = F.Finding("n", "c", "p", a, (0, 1, 2, 3), 0.0, ">", "pp", versus=b, kind="non_inferiority", margin=0.02)
    assert ni.test().p_claim == pytest.approx(stats.ttest_ind(np.add(a, 0.02), b, equal_var=False,
                                                               alternative="greater").pvalue)
    eq = F.Finding("e", "c", "p", a, (0, 1, 2, 3), 0.0, ">", "pp", versus=b, kind="equivalence", margin=0.02)
    assert eq.test().p_claim == pytest.approx(ttost_ind(np.array(a), np.array(b), -0.02, 0.02, usevar="unequal")[0])
    assert F.verdicts([ni, eq]) == ["holds", "holds"]
    far = F.Finding("n", "c", "p", a, (0, 1, 2, 3), 0.0, ">", "pp", versus=np.add(b, 0.1), kind="non_inferiority",
                    margin=0.02)
    assert F.verdicts([far]) == ["opposite"]  # below b by more than the margin


def test_a_collapse_counts_its_seeds_below_base():
    f = F.Finding("c", "c", "p", (0.1, 0.12, 0.3), (0, 1, 2), 0.0, "<", "pp", versus=(0.25, 0.25, 0.25),
                  collapse=True)
    low = stats.binomtest(2, 3).proportion_ci(0.9, method="exact").low  # the one-sided 95 % bound
    assert f"2 of 3 seeds below Base (95 % lower bound {low:.0%})" in F.ours_text(f)


# ---------------------------------------------------------------- Section 5.3


def _probes(rows, study="s"):
    """Probe records with scalar estimates only (no per-prompt quantities: no bootstrap), every
    prompt informative; rows: (seed, step, beta, sigma2_kept, sigma2_full, vprob_kept, vprob_full)."""
    out = []
    for seed, step, beta, sk, sf, vk, vf in rows:
        est = {"sigma2_kept": sk, "sigma2_full": sf, "vprob_kept": vk, "vprob_full": vf}
        est.update({f"{k}_inf": v for k, v in est.items()})
        out.append({"study": study, "model": "tiny", "reward": "oracle", "curriculum": "vicurl", "seed": seed,
                    "step": step, "beta_t": beta, "rollouts": 8, "n_prompts": 32, "n_kept": 16, "n_informative": 32,
                    "n_kept_informative": 16, **est})
    return out


def test_variance_findings_per_condition_and_seed():
    rows = [
        (0, 0, 0.2, 1.0, 2.0, 0.3, 1.0), (0, 5, 0.6, 1.5, 2.0, 0.6, 1.0), (0, 8, 0.8, 1.8, 2.0, 0.9, 1.0),
        (0, 10, 1.0, 2.0, 2.0, 1.0, 1.0),  # beta = 1: kept = full, left out of every statistic
        (1, 0, 0.2, 0.8, 2.0, 0.5, 1.0), (1, 5, 0.6, 1.6, 2.0, 0.4, 1.0), (1, 8, 0.8, 1.9, 2.0, 0.8, 1.0),
    ]
    p = _probes(rows) + _probes(rows[:3], study="t")
    found = F.variance_findings(p, "tiny")
    out = {f.key: f for f in found}
    assert [f.key for f in found][:4] == ["s/variance_ratio/sigma2", "s/variance_early/sigma2",
                                          "s/variance_to_one/sigma2", "s/variance_informative/sigma2"]
    assert "t/variance_ratio/vprob" in out and out["t/variance_ratio/vprob"].seeds == (0,)  # one row set per condition
    ratio = out["s/variance_ratio/sigma2"]
    assert ratio.seeds == (0, 1) and ratio.side == "<" and ratio.threshold == 1.0 and ratio.claim.startswith("[s] ")
    assert ratio.values == pytest.approx([np.mean([0.5, 0.75, 0.9]), np.mean([0.4, 0.8, 0.95])])
    assert out["s/variance_early/vprob"].values == pytest.approx([0.3, 0.5])  # beta <= 0.25 only
    to_one = out["s/variance_to_one/vprob"]
    assert to_one.values == pytest.approx([np.polyfit([0.2, 0.6, 0.8], np.abs(np.log([0.3, 0.6, 0.9])), 1)[0],
                                           np.polyfit([0.2, 0.6, 0.8], np.abs(np.log([0.5, 0.4, 0.8])), 1)[0]])
    assert to_one.side == "<" and math.isnan(to_one.se_extra)  # no per-prompt quantities: no bootstrap
    assert out["s/zero_gradient_share"].values == pytest.approx([0.0, 0.0])
    assert F.variance_findings(p, "other") == []  # no probes of that model: no claim


def test_the_bootstrap_is_shown_beside_the_seeds_standard_error():
    f = _one((0.5, 0.51, 0.49), se_extra=0.3)
    assert f.se == pytest.approx(0.01 / math.sqrt(3)) and "bootstrap se 0.300" in F.ours_text(f)


def test_multiplicity_and_departures():
    table = F.to_frame([_one((0.5, 0.6, 0.7)) for i in range(10)])
    text = F.multiplicity(table)
    assert "10 claims" in text and "Holm" in text and "0.005" in text
    ours = {"model": "Tiny", "total_steps": 120, "lr": 1e-4, "group_size": 8}
    paper = {"model": "Qwen", "total_steps": 313, "lr": 3e-6, "group_size": 8}
    assert F.departures(ours, paper, keys=("model", "total_steps", "lr", "group_size")) == [
        "model: Tiny (paper: Qwen)", "total_steps: 120 (paper: 313)", "lr: 0.0001 (paper: 3e-06)"]


# ---------------------------------------------------------------- Tables 1-2


def _scores():
    rows = []
    for seed in (0, 1, 2):
        for bench in ("easy", "hard"):
            rows.append(("base", "base", seed, 0, bench, 0.40))
            for step in (10, 20):
                rows += [("majority_vote", "none", seed, step, bench, 0.30 - 0.01 * seed),
                         ("majority_vote", "vicurl", seed, step, bench, 0.50 + (0.1 if step == 20 else 0)),
                         ("oracle", "none", seed, step, bench, 0.6 + (0.05 if bench == "hard" else 0))]
    return pd.DataFrame(rows, columns=["reward", "curriculum", "seed", "step", "benchmark", "pass@1"])


def _paper():
    return pd.DataFrame({"table": "main_results_part1", "model": "m", "benchmark": "average", "metric": "pass@1",
                         "reward": ["base", "majority_vote", "majority_vote"],
                         "curriculum": ["base", "none", "vicurl"], "mean": [0.203, 0.001, 0.342]})


def test_curve_scores_average_every_evaluated_step_after_the_base():
    c = F.curve_scores(_scores(), "pass@1", ["easy", "hard"]).set_index(["reward", "curriculum", "seed"])["score"]
    assert c[("majority_vote", "vicurl", 0)] == pytest.approx(0.55)  # steps 10 and 20: 0.5 and 0.6
    assert ("base", "base", 0) not in c.index


def test_curve_claim_quotes_the_papers_aulc_ratio():
    paper = pd.concat([_paper(), pd.DataFrame({
        "table": "mechanism", "model": "m", "benchmark": "average", "metric": "aulc",
        "reward": "majority_vote", "curriculum": ["none", "vicurl"], "mean": [1.0, 13.0]})])
    out = {f.key: f for f in F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=paper)}
    curve = out["curve_gain/majority_vote"]
    assert np.subtract(curve.values, curve.versus) == pytest.approx([0.25, 0.26, 0.27]) and curve.paper == "AULC 13.0x TTRL's (mechanism, m)"
    assert out["vicurl_gain/majority_vote"].paper == "+34.1 pp (main_results_part1, m)"  # the main table, not mechanism


def test_final_scores_average_the_last_step_over_benchmarks():
    f = F.final_scores(_scores(), "pass@1", ["easy", "hard"]).set_index(["reward", "curriculum", "seed"])["score"]
    assert f[("oracle", "none", 0)] == pytest.approx(0.625)
    assert f[("majority_vote", "vicurl", 1)] == pytest.approx(0.6)  # step 20, not 10
    assert f[("base", "base", 2)] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="every benchmark"):
        F.final_scores(_scores(), "pass@1", ["easy", "hard", "missing"])


def test_verifier_free_findings_compare_the_arms_and_quote_the_paper():
    out = {f.key: f for f in F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=_paper())}
    gain = out["vicurl_gain/majority_vote"]
    assert gain.seeds == (0, 1, 2) and gain.values == pytest.approx([0.6, 0.6, 0.6])
    assert gain.versus == pytest.approx([0.3, 0.29, 0.28]) and gain.mean == pytest.approx(0.31)
    assert F.verdicts([gain]) == ["holds"] and gain.paper == "+34.1 pp (main_results_part1, m)"
    assert math.isnan(gain.gap)  # not the paper's setting: its number is quoted, not tested
    collapse = out["collapse/majority_vote"]
    assert collapse.side == "<" and collapse.versus == pytest.approx([0.4, 0.4, 0.4]) and collapse.collapse
    assert collapse.paper == "-20.2 pp (main_results_part1, m)"
    assert "vicurl_gain/oracle" not in out and "collapse/oracle" not in out  # no oracle VI-CuRL run; oracle cannot collapse
    assert "TTRL" in gain.claim and "MajVote" in gain.claim
    same = {f.key: f for f in F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=_paper(),
                                                        refute=True)}
    assert same["vicurl_gain/majority_vote"].gap == pytest.approx(0.341)
    assert F.verdicts([same["vicurl_gain/majority_vote"]]) == ["smaller than the paper's gap"]


def test_training_accuracy_over_the_last_tenth_of_steps():
    rows = [{"reward": "entropy", "curriculum": c, "seed": s, "step": t,
             "reward/oracle_acc": (0.5 if c == "vicurl" else (0.4 if t <= 90 else 0.0)) + 0.01 * s}
            for c in ("none", "vicurl") for s in (0, 1, 2) for t in range(1, 101)]
    acc = F.train_accuracy(pd.DataFrame(rows))
    assert acc[acc["curriculum"] == "none"]["score"].tolist() == pytest.approx([0.0, 0.01, 0.02])  # steps 91-100
    scores = pd.DataFrame([("entropy", c, s, 10, "b", 0.1) for c in ("none", "vicurl") for s in (0, 1, 2)],
                          columns=["reward", "curriculum", "seed", "step", "benchmark", "pass@1"])
    out = {f.key: f for f in F.verifier_free_findings(scores, benchmarks=["b"], train_metrics=pd.DataFrame(rows))}
    assert np.subtract(out["train_accuracy/entropy"].values, out["train_accuracy/entropy"].versus) == \
        pytest.approx([0.5, 0.5, 0.5])
    assert out["train_accuracy/entropy"].paper.startswith("collapse")
    assert out["vicurl_gain/entropy"].paper == "--"  # no paper numbers given


# ---------------------------------------------------------------- the base model's majorities


def test_majority_class_ties_go_to_the_first_seen():
    assert majority_class([1, 0, 0, 1, None]) == (1, {1: 2, 0: 2})
    assert majority_class([None, None]) == (None, {})


def test_majority_wrong_counts_problems_whose_vote_is_wrong():
    rows = []
    for pid, answers, gold in [("p1", ["5", "5", "3"], "3"), ("p2", ["3", "3", None], "3"),
                               ("p3", [None, None, None], "3"), ("p4", ["7", "3", None], "3")]:  # p4: a tie, 7 first
        rows += [{"benchmark": "b", "problem_id": pid, "sample_idx": i, "extracted": a, "correct": a == gold}
                 for i, a in enumerate(answers)]
    mw = F.majority_wrong(pd.DataFrame(rows), {"b": "math"}).iloc[0]
    assert mw["n_problems"] == 4 and mw["no_answer"] == pytest.approx(0.25)
    assert mw["majority_wrong"] == pytest.approx(2 / 3)  # p1 and p4 of the three answered


# ---------------------------------------------------------------- rendering


def test_tables_carry_every_finding_and_the_rule():
    found = F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=_paper())
    table = F.to_frame(found)
    assert list(table["key"]) == [f.key for f in found]
    assert table.loc[0, "ours"] == "+31.0 pp (60.0 ± 0.0 vs 29.0 ± 1.0; n=3 vs 3)"
    assert table.loc[0, "per_seed"] == "0.6 0.6 0.6" and table.loc[0, "per_seed_b"] == "0.3 0.29 0.28"
    md = F.render_markdown(table, ["a setting line"], "Title", "demo", ["lr: 1 (paper: 2)"])
    assert F.RULE in md and "- a setting line" in md and md.count("\n| ") == len(found) + 1
    assert "- lr: 1 (paper: 2)" in md and "Multiplicity: " in md
    assert "| Claim | Paper | Demo (mean ± std across seeds) | Verdict |" in md and "Mini" not in md  # the scenario's name
    tex = F.render_latex(table, "Caption 50%", "mini")
    assert r"\begin{tabular}" in tex and r"50\%" in tex and r"$\pm$" in tex and tex.count(r"\\") == len(found) + 1
    assert r"\textbf{Mini (mean $\pm$ std)}" in tex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed")
def test_latex_compiles(tmp_path):
    found = F.variance_findings(_probes([(0, 0, 0.2, 1.0, 2.0, 0.3, 1.0), (1, 0, 0.2, 0.8, 2.0, 0.5, 1.0)]), "tiny")
    found += F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=_paper())
    tex = F.render_latex(F.to_frame(found), "Findings: " + F.RULE, "demo")
    (tmp_path / "t.tex").write_text(standalone_document(tex))
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-3000:]


def _seeds(text) -> list[float]:
    return [] if not isinstance(text, str) or not text.strip() else [float(x) for x in text.split()]


def test_the_mini_studys_verdicts_follow_from_its_seeds_and_are_the_docs():
    """docs/mini.md's findings table is the mini run's findings.csv (tests/data/mini_findings.csv): every verdict
    is the rule's on the per-seed values the file holds, Holm across its 29 claims, and the page says the same."""
    table = pd.read_csv(REPO / "tests/data/mini_findings.csv")
    tests = [F.stats.test(r.type, _seeds(r.per_seed), _seeds(r.per_seed_b) or None, side=r.side, gap=r.gap,
                          margin=r.margin, threshold=r.threshold) for r in table.itertuples()]
    assert F.stats.verdicts(tests, 0.05) == list(table["verdict"])
    for t, r in zip(tests, table.itertuples()):  # the p-values of 6-digit seeds: as the run's
        assert t.p_claim == pytest.approx(r.p_claim, rel=1e-3, abs=1e-6)
    cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
             for line in (REPO / "docs/mini.md").read_text().splitlines() if line.startswith("|")]
    in_docs = {row[0]: row[-1] for row in cells}
    assert {r.claim: r.verdict for r in table.itertuples()} == {c: in_docs.get(c) for c in table["claim"]}
