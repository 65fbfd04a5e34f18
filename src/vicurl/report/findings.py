r"""The findings of a (mini) reproduction: each claim of the paper its runs test, the paper's
number, ours (mean and std across seeds) and a verdict computed from the numbers by one rule.

The rule (``RULE``, ``verdict``): a claim says a per-seed statistic lies on one side of a
threshold. With n >= 2 seeds it *holds* when the mean is on the claimed side by more than 2 se,
*does not hold* when on the other side by as much, else (or with one seed) it is *inconclusive at
this scale*; se = std / sqrt(n), or the bootstrap standard error over the probes' prompts where
larger (``probe_stats.bootstrap_se``). The claims, their statistics and what 2 se means at 3 seeds
(``multiplicity``): docs/mini.md. A claim whose runs the scenario lacks is left out; the paper's
number comes from ``config/paper_numbers.csv`` (``vicurl.report.paper``) or, for Section 5.3, its text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from vicurl.grading.classes import clusters, majority_class
from vicurl.report import labels as L
from vicurl.report import probe_stats as PS
from vicurl.report.latex import at_most

RULE = ("holds: the mean across seeds is on the claimed side of the threshold by more than two "
        "standard errors (std / sqrt(n), or the bootstrap standard error over the probes' prompts where "
        "larger); does not hold: on the other side by more than two standard errors; inconclusive at "
        "this scale: otherwise, or with fewer than two seeds")
VERDICTS = ("holds", "does not hold", "inconclusive at this scale")
TRAIN_TAIL = 0.1  # the share of the last training steps whose oracle accuracy a run is judged by
VARIANCE_TEXT = "below 1 while beta_t < 1 (Sec. 5.3)"
EARLY_TEXT = "0.55-0.80 at beta~0.2 (Sec. 5.3)"
RISE_TEXT = "rise monotonically to 1 (Sec. 5.3)"
PREMISE_TEXT = "confident prompts are the solved ones (Sec. 4)"
ESTIMATORS = {"sigma2": "action variance sigma^2_g", "vprob": "problem variance V_prob"}


@dataclass(frozen=True)
class Finding:
    key: str  # a short id, e.g. "vicurl_gain/majority_vote"
    claim: str  # the paper's claim, in words
    paper: str  # the paper's number (or its words where it gives none)
    values: tuple[float, ...]  # the statistic per seed (NaN: not measurable for that seed)
    seeds: tuple[int, ...]
    threshold: float
    side: str  # "<" or ">": where the claim puts the statistic
    unit: str  # "pp" (percentage points of a fraction), "ratio", "corr", "slope"
    se_extra: float = math.nan  # another standard error of the mean (the probes' bootstrap); the larger is used

    @property
    def finite(self) -> np.ndarray:
        v = np.asarray(self.values, dtype=float)
        return v[np.isfinite(v)]

    @property
    def mean(self) -> float:
        return float(self.finite.mean()) if len(self.finite) else math.nan

    @property
    def std(self) -> float:
        return float(self.finite.std(ddof=1)) if len(self.finite) >= 2 else math.nan

    @property
    def se(self) -> float:
        """The standard error the verdict uses: across seeds, or ``se_extra`` where larger."""
        return standard_error(self.finite, self.se_extra)

    @property
    def verdict(self) -> str:
        return verdict(self.finite, self.threshold, self.side, self.se_extra)


def standard_error(values: Sequence[float], se_extra: float = math.nan) -> float:
    """std / sqrt(n) of the finite ``values`` (NaN below two), or ``se_extra`` where larger."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) >= 2 else math.nan
    return max(se, se_extra) if math.isfinite(se_extra) and math.isfinite(se) else se


def verdict(values: Sequence[float], threshold: float, side: str, se_extra: float = math.nan) -> str:
    """The rule of the module docstring, for the per-seed values of one statistic (``se_extra``:
    another standard error of their mean, used where larger than the seeds')."""
    if side not in ("<", ">"):
        raise ValueError(f"side must be '<' or '>', got {side!r}")
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return VERDICTS[2]
    margin = (v.mean() - threshold) * (1 if side == ">" else -1)  # > 0: on the claimed side
    two_se = 2 * standard_error(v, se_extra)
    if margin > two_se:
        return VERDICTS[0]
    if -margin > two_se:
        return VERDICTS[1]
    return VERDICTS[2]


# ---------------------------------------------------------------- Section 5.3: variance


# one row per (statistic, estimator): key, claim (with {name} the estimator's), paper, threshold, side, unit
VARIANCE_ROWS = (
    ("mean_{est}", "variance_ratio", "ratio kept/full of the {name} < 1 while beta_t < 1 (mean over the probes)",
     VARIANCE_TEXT, 1.0, "<", "ratio"),
    ("early_{est}", "variance_early", "ratio kept/full of the {name} < 1 at beta_t <= 0.25", EARLY_TEXT, 1.0, "<",
     "ratio"),
    ("to_one_{est}", "variance_to_one", "ratio kept/full of the {name} approaches 1 as beta_t grows "
     "(slope of |log ratio| on beta_t, beta_t < 1)", RISE_TEXT, 0.0, "<", "slope"),
    ("inf_{est}", "variance_informative", "among informative prompts (unequal rewards), ratio kept/full of the "
     "{name} < 1 while beta_t < 1", "--", 1.0, "<", "ratio"),
)
MECHANISM_ROWS = (
    ("vprob_adj", "variance_adjusted/vprob", "ratio kept/full of V_prob - sigma^2_g / K (V_prob without its "
     "action noise; means over the probes with beta_t < 1) < 1", "--", 1.0, "<", "ratio"),
    ("zero_share_diff", "zero_gradient_share", "the kept prompts hold more zero-gradient groups (equal rewards) "
     "than the full batch while beta_t < 1 (share kept minus full)", PREMISE_TEXT, 0.0, ">", "pp"),
)


def _conditions(records: Sequence[Mapping], model: str):
    """(study, its probe records of ``model``'s oracle VI-CuRL runs) per probed study that has any."""
    for study in dict.fromkeys(r["study"] for r in records):
        recs = [r for r in records if r["study"] == study and r["model"] == model and r["reward"] == "oracle"
                and r["curriculum"] == "vicurl"]
        if recs:
            yield study, recs


def variance_findings(records: Sequence[Mapping], model: str, bootstrap: int = PS.BOOTSTRAP) -> list[Finding]:
    """The variance claims per condition (probed study) from the probe records (the probe JSONs)
    of VI-CuRL runs with the oracle reward."""
    out = []
    for study, recs in _conditions(records, model):
        seeds = PS.by_seed(recs)
        stats = {s: PS.seed_statistics([PS.probe_quantities(r) for r in rs]) for s, rs in seeds.items()}
        se = PS.bootstrap_se(recs, n=bootstrap) if bootstrap else {}
        rows = [(stat.format(est=est), f"{key}/{est}", claim.format(name=name), paper, th, side, unit)
                for stat, key, claim, paper, th, side, unit in VARIANCE_ROWS for est, name in ESTIMATORS.items()]
        for stat, key, claim, paper, th, side, unit in sorted(rows, key=lambda r: r[1].split("/")[1] != "sigma2") + \
                list(MECHANISM_ROWS):
            out.append(Finding(f"{study}/{key}", f"[{study}] {claim}", paper,
                               tuple(stats[s][stat] for s in seeds), tuple(seeds), th, side, unit,
                               se.get(stat, math.nan)))
    return out


def decomposition(records: Sequence[Mapping], model: str) -> pd.DataFrame:
    """Per condition: the action-variance ratio kept/full and its decomposition
    (``probe_stats.decompose``), and the share of the full batch's V_prob that is action noise
    (sigma^2_g / K), means over the oracle VI-CuRL probes with beta_t < 1 (all seeds); and the base
    model's Spearman(confidence, mean reward) over the probe prompts."""
    rows = []
    for study, recs in _conditions(records, model):
        during = [r for r in recs if r["beta_t"] < 1]
        parts = pd.DataFrame([{**PS.decompose(r), "noise_share_full": PS.probe_quantities(r)["noise_share_full"]}
                              for r in during])
        if parts.empty:
            continue
        rows.append({"condition": study, "probes": len(parts), **parts.mean().to_dict(),
                     "base_conf_reward_spearman": PS.confidence_vs_reward(recs)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- Tables 1-2: without a verifier


def final_scores(scores: pd.DataFrame, metric: str, benchmarks: Sequence[str]) -> pd.DataFrame:
    """Each run's ``metric`` at its last evaluated step, averaged over ``benchmarks``: columns
    reward, curriculum, seed, score (Base rows: reward and curriculum ``base``, step 0)."""
    s = scores[scores["benchmark"].isin(benchmarks)]
    last = s.groupby(["reward", "curriculum", "seed"])["step"].transform("max")
    s = s[s["step"] == last]
    n = s.groupby(["reward", "curriculum", "seed"])["benchmark"].nunique()
    incomplete = n[n < len(benchmarks)]
    if len(incomplete):
        raise ValueError(f"runs without a score on every benchmark {list(benchmarks)} at their last step: "
                         f"{[dict(zip(n.index.names, k)) for k in incomplete.index]}")
    return s.groupby(["reward", "curriculum", "seed"], as_index=False)[metric].mean().rename(columns={metric: "score"})


def curve_scores(scores: pd.DataFrame, metric: str, benchmarks: Sequence[str]) -> pd.DataFrame:
    """Each run's ``metric`` (averaged over ``benchmarks``) averaged over all its evaluated steps
    after 0: the area under its learning curve per step, as the paper's AULC compares runs.
    Columns reward, curriculum, seed, score; Base rows left out."""
    s = scores[scores["benchmark"].isin(benchmarks) & (scores["step"] > 0)]
    per_step = s.groupby(["reward", "curriculum", "seed", "step"], as_index=False)[metric].mean()
    return per_step.groupby(["reward", "curriculum", "seed"], as_index=False)[metric].mean().rename(
        columns={metric: "score"})


def train_accuracy(metrics: pd.DataFrame, tail: float = TRAIN_TAIL) -> pd.DataFrame:
    """Each run's training accuracy under the oracle checker (``reward/oracle_acc``) averaged over
    the last ``tail`` share of its steps: columns reward, curriculum, seed, score."""
    rows = []
    for (reward, curriculum, seed), m in metrics.groupby(["reward", "curriculum", "seed"]):
        last = m["step"].max()
        tail_rows = m[m["step"] > last * (1 - tail)]
        rows.append({"reward": reward, "curriculum": curriculum, "seed": seed,
                     "score": float(tail_rows["reward/oracle_acc"].mean())})
    return pd.DataFrame(rows, columns=["reward", "curriculum", "seed", "score"])


def _paired(a: pd.DataFrame, b: pd.DataFrame) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """a - b per seed, over the seeds both have."""
    j = a.set_index("seed")["score"].sub(b.set_index("seed")["score"]).dropna().sort_index()
    return tuple(int(s) for s in j.index), tuple(float(v) for v in j.values)


def _paper_diff(paper: pd.DataFrame | None, a: tuple[str, str], b: tuple[str, str], metric: str) -> str:
    """The paper's a - b (reward, curriculum) in percentage points, from its numbers' Average column."""
    if paper is None or paper.empty:
        return "--"
    avg = paper[(paper["benchmark"] == "average") & (paper["metric"] == metric)]
    if avg.empty:
        return "--"

    def one(key):
        v = avg[(avg["reward"] == key[0]) & (avg["curriculum"] == key[1])]["mean"]
        return float(v.iloc[0]) if len(v) else math.nan

    d = one(a) - one(b)
    if not math.isfinite(d):
        return "--"
    t, m = avg["table"].iloc[0], avg["model"].iloc[0]
    return f"{100 * d:+.1f} pp ({t}, {m})"


def _paper_aulc(paper: pd.DataFrame | None, reward: str) -> str:
    """The paper's AULC of VI-CuRL relative to No Curriculum for a reward (its mechanism table)."""
    if paper is None or paper.empty:
        return "--"
    rows = paper[(paper["table"] == "mechanism") & (paper["metric"] == "aulc") & (paper["reward"] == reward)]
    v = {c: float(rows.loc[rows["curriculum"] == c, "mean"].iloc[0]) for c in ("none", "vicurl")
         if (rows["curriculum"] == c).any()}
    if len(v) < 2:
        return "--"
    return f"AULC {v['vicurl'] / v['none']:.1f}x {L.row_label(reward, 'none')}'s (mechanism, {rows['model'].iloc[0]})"


def verifier_free_findings(scores: pd.DataFrame, *, benchmarks: Sequence[str], metric: str = "pass@1",
                           train_metrics: pd.DataFrame | None = None, paper: pd.DataFrame | None = None,
                           paper_table: str = "main_results_part1") -> list[Finding]:
    """The stability claims from one study's per-seed scores (with its Base rows) and its runs'
    training metrics; ``paper``: the paper's numbers of one model, whose ``paper_table`` is quoted
    for the last-step claims and whose mechanism table for the curve claims."""
    final = final_scores(scores, metric, benchmarks)
    curve = curve_scores(scores, metric, benchmarks)
    main = None if paper is None else paper[paper["table"] == paper_table]
    train = train_accuracy(train_metrics) if train_metrics is not None and len(train_metrics) else None

    def run(reward, curriculum, table=final):
        return table[(table["reward"] == reward) & (table["curriculum"] == curriculum)]

    mp = metric.replace("pass@", "Pass@")
    out = []

    def versus(table, key, claim, paper_of, a, b, side, skip=("base",)):
        """A finding per reward with runs a and b (curricula, or ``base``) in ``table``: a - b per seed."""
        for reward in dict.fromkeys(table["reward"]):
            ra, rb = (run("base", "base", table) if c == "base" else run(reward, c, table) for c in (a, b))
            if reward in skip or ra.empty or rb.empty:
                continue
            seeds, vals = _paired(ra, rb)
            out.append(Finding(f"{key}/{reward}", claim(reward), paper_of(reward), vals, seeds, 0.0, side, "pp"))

    def baseline(reward):
        return L.row_label(reward, "none")

    versus(final, "vicurl_gain",
           lambda r: f"{L.reward_label(r)} reward: VI-CuRL beats {baseline(r)} ({mp}, last step)",
           lambda r: _paper_diff(main, (r, "vicurl"), (r, "none"), metric), "vicurl", "none", ">")
    versus(curve, "curve_gain",
           lambda r: f"{L.reward_label(r)} reward: VI-CuRL keeps a higher {mp} than {baseline(r)} across training "
                     f"(mean over the evaluated checkpoints)",
           lambda r: _paper_aulc(paper, r), "vicurl", "none", ">", skip=("oracle",))
    versus(final, "collapse",
           lambda r: f"{L.reward_label(r)} reward: {baseline(r)} ends below the base model ({mp})",
           lambda r: _paper_diff(main, (r, "none"), ("base", "base"), metric), "none", "base", "<",
           skip=("base", "oracle"))
    if train is not None:
        versus(train, "train_accuracy",
               lambda r: f"{L.reward_label(r)} reward: VI-CuRL ends with a higher training accuracy than "
                         f"{baseline(r)} (oracle-checked, last {TRAIN_TAIL:.0%} of steps)",
               lambda r: "collapse of the baselines (Sec. 1, 5.2), no number", "vicurl", "none", ">",
               skip=("oracle",))
    return out


# ---------------------------------------------------------------- the setting: misleading majorities


def majority_wrong(graded: pd.DataFrame, answer_types: Mapping[str, str]) -> pd.DataFrame:
    """How often the majority answer of a model's samples is wrong, per benchmark: the share of
    problems with at least one answer whose majority class (``majority_class`` over the
    classes of ``vicurl.grading.classes.clusters``: TTRL's vote) is not the gold answer, and the share of problems
    with no answer at all. ``graded``: the grader's rows (benchmark, problem_id, sample_idx,
    extracted, correct) of one or more seeds (column ``seed``, else one)."""
    g = graded if "seed" in graded.columns else graded.assign(seed=0)
    rows = []
    for (bench, seed), b in g.groupby(["benchmark", "seed"], sort=True):
        at = answer_types[bench]
        wrong = answered = 0
        for _, p in b.sort_values("sample_idx").groupby("problem_id", sort=False):
            answers = [None if pd.isna(a) else str(a) for a in p["extracted"]]
            classes = clusters(answers, at, {"answer": "", "answer_type": at, "options": []})
            major, _ = majority_class(classes)
            if major is None:
                continue
            answered += 1
            wrong += not bool(p["correct"].iloc[classes.index(major)])  # the class shares one verdict
        n = b["problem_id"].nunique()
        rows.append({"benchmark": bench, "seed": int(seed), "n_problems": n, "no_answer": 1 - answered / n,
                     "majority_wrong": wrong / answered if answered else math.nan})
    return pd.DataFrame(rows, columns=["benchmark", "seed", "n_problems", "no_answer", "majority_wrong"])


# ---------------------------------------------------------------- rendering


def ours_text(f: Finding) -> str:
    """"mean ± std unit (n=seeds)": percentage points and correlations signed, ratios plain."""
    n = len(f.finite)
    if n == 0:
        return "--"
    scale, unit, digits = {"pp": (100, " pp", 1), "corr": (1, "", 2)}.get(f.unit, (1, "", 3))
    text = f"{f.mean * scale:{'' if f.unit == 'ratio' else '+'}.{digits}f}"
    if n >= 2:
        text += f" ± {f.std * scale:.{digits}f}"
    boot = f"; bootstrap se {f.se_extra * scale:.{digits}f}" if math.isfinite(f.se_extra) else ""
    return f"{text}{unit} (n={n}{boot})"


def to_frame(found: Iterable[Finding]) -> pd.DataFrame:
    """One row per finding: the claim, the paper's number, ours per seed and summarized, the verdict."""
    return pd.DataFrame([{
        "key": f.key, "claim": f.claim, "paper": f.paper, "ours": ours_text(f), "verdict": f.verdict,
        "mean": f.mean, "std": f.std, "se_bootstrap": f.se_extra, "se": f.se, "n_seeds": len(f.finite),
        "threshold": f.threshold, "side": f.side, "unit": f.unit, "seeds": " ".join(map(str, f.seeds)),
        "per_seed": " ".join("nan" if not math.isfinite(v) else f"{v:.6g}" for v in f.values),
    } for f in found], columns=["key", "claim", "paper", "ours", "verdict", "mean", "std", "se_bootstrap", "se",
                                "n_seeds", "threshold", "side", "unit", "seeds", "per_seed"])


def multiplicity(table: pd.DataFrame) -> str:
    """What the rule means for this many claims: the one-sided p of a 2-se margin at the table's
    usual number of seeds, and the verdicts expected by chance alone."""
    n_claims = len(table)
    n = int(table["n_seeds"].max()) if n_claims else 0
    if n < 2:
        return f"{n_claims} claims, fewer than two seeds each: every verdict is inconclusive."
    p = PS.t_sf(2.0, n - 1)
    return (f"{n_claims} claims tested. With {n} seeds a margin of 2 standard errors is a one-sided t-test at "
            f"p = {p:.3f} ({n - 1} degrees of freedom), not corrected for the {n_claims} tests: were every "
            f"statistic exactly at its threshold, about {n_claims * p:.1f} verdicts would read \"holds\" and as "
            f"many \"does not hold\" by chance; the claims are not independent (rows of one condition share "
            f"their probes).")


DEPARTURE_KEYS = ("model", "train_set", "total_steps", "batch_size", "group_size", "lr", "max_response_length",
                  "temperature", "kl_coef", "curriculum_params")


def departures(ours: Mapping, paper: Mapping, keys: Sequence[str] = DEPARTURE_KEYS) -> list[str]:
    """The settings in which the scenario's compared runs differ from the paper's, one line each."""
    return [f"{k}: {ours.get(k)} (paper: {paper.get(k)})" for k in keys if ours.get(k) != paper.get(k)]


def setting_lines(mw: pd.DataFrame, titles: Mapping[str, str]) -> list[str]:
    """The base model's misleading majorities, one line per benchmark (mean over seeds)."""
    out = []
    for bench, b in mw.groupby("benchmark", sort=False):
        out.append(f"{titles.get(bench, bench)}: the base model's majority answer is wrong on "
                   f"{100 * b['majority_wrong'].mean():.0f} % of the problems it answers "
                   f"(no answer at all: {100 * b['no_answer'].mean():.0f} %; {len(b)} seed(s), "
                   f"{int(b['n_problems'].iloc[0])} problems)")
    return out


def timeout_line(scores: pd.DataFrame) -> str:
    """How many of the graded samples behind the findings ran out of the grader's CPU budget (scored incorrect)."""
    n = int(scores["n_timeouts"].fillna(0).sum()) if "n_timeouts" in scores.columns else 0
    total = int((scores["n_problems"] * scores["n_samples"]).sum()) if len(scores) else 0
    return (f"Grading: {n:,} of {total:,} graded samples ran out of the grader's CPU budget before a verdict "
            f"(scored incorrect)")


def ours_heading(scenario: str) -> str:
    """The column of our numbers, named after the scenario (config ``scenario``) that produced them."""
    return f"{scenario[:1].upper()}{scenario[1:]} (mean ± std across seeds)"


DECOMPOSITION_COLUMNS = {
    "condition": "condition", "probes": "probes", "ratio": "ratio sigma^2 kept/full",
    "informative_kept": "informative share, kept", "informative_full": "informative share, full",
    "share_ratio": "share ratio", "ratio_inf": "ratio among informative", "zero_factor": "zero groups' factor",
    "product": "product", "noise_share_full": "action noise's share of V_prob, full",
    "base_conf_reward_spearman": "base model: Spearman(confidence, reward)",
}


def render_decomposition(dec: pd.DataFrame) -> list[str]:
    """The decomposition table (``decomposition``) as Markdown lines."""
    if dec.empty:
        return []
    cols = [c for c in DECOMPOSITION_COLUMNS if c in dec.columns]
    lines = ["Why (the action-variance ratio decomposed, means over the probes with beta_t < 1; "
             "ratio = share ratio x ratio among informative x zero groups' factor):", "",
             "| " + " | ".join(DECOMPOSITION_COLUMNS[c] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in dec.itertuples(index=False):
        lines.append("| " + " | ".join(v if isinstance(v, str) else (f"{v:d}" if isinstance(v, int) else f"{v:.3f}")
                                       for v in (getattr(r, c) for c in cols)) + " |")
    return lines + [""]


def render_markdown(table: pd.DataFrame, setting: Sequence[str], title: str, scenario: str,
                    departed: Sequence[str] = (), decomposition_lines: Sequence[str] = ()) -> str:
    lines = [f"# {title}", "", "Verdict rule: " + RULE + ".", "", "Multiplicity: " + multiplicity(table), ""]
    if departed:
        lines += ["Departures from the paper's settings (the compared runs vs the paper's):", "",
                  *[f"- {d}" for d in departed], ""]
    if setting:
        lines += ["Setting:", "", *[f"- {s}" for s in setting], ""]
    lines += [f"| Claim | Paper | {ours_heading(scenario)} | Verdict |", "|---|---|---|---|"]
    lines += [f"| {r.claim} | {r.paper} | {r.ours} | {r.verdict} |" for r in table.itertuples()]
    if decomposition_lines:
        lines += ["", *decomposition_lines]
    return "\n".join(lines).rstrip("\n") + "\n"


def _tex(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"),
                 ("±", r"$\pm$"), ("~", r"$\approx$"), ("^2", r"$^2$"), ("[", "{[}"), ("]", "{]}")):
        s = s.replace(a, b)
    return s


def render_latex(table: pd.DataFrame, caption: str, scenario: str, label: str = "tab:findings") -> str:
    ours = _tex(ours_heading(scenario).replace(" across seeds", ""))
    body = [r"\begin{table*}[t]", r"\centering", rf"\caption{{{_tex(caption)}}}", rf"\label{{{label}}}",
            r"\resizebox{" + at_most(r"\linewidth") + "}{!}{", r"\begin{tabular}{p{7cm}p{4.2cm}p{3.6cm}l}",
            r"\toprule",
            rf"\textbf{{Claim}} & \textbf{{Paper}} & \textbf{{{ours}}} & \textbf{{Verdict}} \\", r"\midrule"]
    body += [f"{_tex(r.claim)} & {_tex(r.paper)} & {_tex(r.ours)} & {_tex(r.verdict)} \\\\" for r in table.itertuples()]
    body += [r"\bottomrule", r"\end{tabular}}", r"\end{table*}"]
    return "\n".join(body) + "\n"
