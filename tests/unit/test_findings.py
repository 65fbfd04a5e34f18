"""The findings table (vicurl.report.findings): the verdict rule, each claim's per-seed statistic,
the base model's misleading majorities, and the rendering."""

import math
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from vicurl.grading.classes import majority_class
from vicurl.report import findings as F
from vicurl.report.latex import standalone_document

# ---------------------------------------------------------------- the verdict rule


@pytest.mark.parametrize("values,side,expected", [
    ([0.5, 0.6, 0.55], "<", "holds"),
    ([1.5, 1.6, 1.4], "<", "does not hold"),
    ([0.9, 1.1, 1.0], "<", "inconclusive at this scale"),
    ([0.5], "<", "inconclusive at this scale"),  # one seed has no spread
    ([0.5, math.nan, 0.6, 0.55], "<", "holds"),  # a seed without a value does not count
    ([1.5, 1.6, 1.4], ">", "holds"),
])
def test_verdict_cases(values, side, expected):
    assert F.verdict(values, 1.0, side) == expected


def test_verdict_is_two_standard_errors_by_enumeration():
    """Against the rule written out: |mean - threshold| vs 2 std/sqrt(n), over a grid of 3-seed samples."""
    rng = np.random.default_rng(0)
    for _ in range(500):
        v = rng.normal(rng.uniform(-1, 1), rng.uniform(0.01, 1), size=3)
        t = v.mean() / (v.std(ddof=1) / np.sqrt(3))  # the t statistic against threshold 0
        want = "holds" if t > 2 else "does not hold" if t < -2 else "inconclusive at this scale"
        assert F.verdict(v, 0.0, ">") == want
        mirrored = {"holds": "does not hold", "does not hold": "holds"}.get(want, want)
        assert F.verdict(v, 0.0, "<") == mirrored
    with pytest.raises(ValueError, match="side"):
        F.verdict([1, 2], 0, "<=")


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


def test_the_verdict_uses_the_larger_standard_error():
    tight = F.Finding("k", "c", "p", (0.5, 0.51, 0.49), (0, 1, 2), 1.0, "<", "ratio")
    assert tight.verdict == "holds" and tight.se == pytest.approx(0.01 / math.sqrt(3))
    wide = F.Finding("k", "c", "p", (0.5, 0.51, 0.49), (0, 1, 2), 1.0, "<", "ratio", se_extra=0.3)
    assert wide.se == 0.3 and wide.verdict == "inconclusive at this scale"
    assert "bootstrap se 0.300" in F.ours_text(wide)
    assert F.verdict([0.5, 0.51, 0.49], 1.0, "<", se_extra=0.001) == "holds"  # smaller: the seeds' se


def test_multiplicity_and_departures():
    table = F.to_frame([F.Finding(f"k{i}", "c", "p", (0.5, 0.6, 0.7), (0, 1, 2), 1.0, "<", "ratio") for i in range(10)])
    text = F.multiplicity(table)
    assert "10 claims" in text and "p = 0.092" in text and "about 0.9 verdicts" in text
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
    assert curve.values == pytest.approx([0.25, 0.26, 0.27]) and curve.paper == "AULC 13.0x TTRL's (mechanism, m)"
    assert out["vicurl_gain/majority_vote"].paper == "+34.1 pp (main_results_part1, m)"  # the main table, not mechanism


def test_final_scores_average_the_last_step_over_benchmarks():
    f = F.final_scores(_scores(), "pass@1", ["easy", "hard"]).set_index(["reward", "curriculum", "seed"])["score"]
    assert f[("oracle", "none", 0)] == pytest.approx(0.625)
    assert f[("majority_vote", "vicurl", 1)] == pytest.approx(0.6)  # step 20, not 10
    assert f[("base", "base", 2)] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="every benchmark"):
        F.final_scores(_scores(), "pass@1", ["easy", "hard", "missing"])


def test_verifier_free_findings_pair_seeds_and_quote_the_paper():
    out = {f.key: f for f in F.verifier_free_findings(_scores(), benchmarks=["easy", "hard"], paper=_paper())}
    gain = out["vicurl_gain/majority_vote"]
    assert gain.seeds == (0, 1, 2) and gain.values == pytest.approx([0.3, 0.31, 0.32])
    assert gain.verdict == "holds" and gain.paper == "+34.1 pp (main_results_part1, m)"
    collapse = out["collapse/majority_vote"]
    assert collapse.side == "<" and collapse.values == pytest.approx([-0.1, -0.11, -0.12])
    assert collapse.paper == "-20.2 pp (main_results_part1, m)"
    assert "vicurl_gain/oracle" not in out and "collapse/oracle" not in out  # no oracle VI-CuRL run; oracle cannot collapse
    assert "TTRL" in gain.claim and "MajVote" in gain.claim


def test_training_accuracy_over_the_last_tenth_of_steps():
    rows = [{"reward": "entropy", "curriculum": c, "seed": s, "step": t,
             "reward/oracle_acc": (0.5 if c == "vicurl" else (0.4 if t <= 90 else 0.0)) + 0.01 * s}
            for c in ("none", "vicurl") for s in (0, 1, 2) for t in range(1, 101)]
    acc = F.train_accuracy(pd.DataFrame(rows))
    assert acc[acc["curriculum"] == "none"]["score"].tolist() == pytest.approx([0.0, 0.01, 0.02])  # steps 91-100
    scores = pd.DataFrame([("entropy", c, s, 10, "b", 0.1) for c in ("none", "vicurl") for s in (0, 1, 2)],
                          columns=["reward", "curriculum", "seed", "step", "benchmark", "pass@1"])
    out = {f.key: f for f in F.verifier_free_findings(scores, benchmarks=["b"], train_metrics=pd.DataFrame(rows))}
    assert out["train_accuracy/entropy"].values == pytest.approx([0.5, 0.5, 0.5])
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
    assert table.loc[0, "ours"] == "+31.0 ± 1.0 pp (n=3)" and table.loc[0, "per_seed"] == "0.3 0.31 0.32"
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
