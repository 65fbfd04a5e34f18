r"""The findings of a (mini) reproduction: each claim of the paper its runs test, the paper's
number, ours across seeds and a verdict computed from the numbers by one rule.

A finding holds the per-seed values of a statistic in arm a and, for a comparison of two arms, in
arm b (else a threshold): the rule is `vicurl.planning.stats`' (``stats.RULE``), a one-sided Welch test
in the claimed direction, Holm-corrected across the table's findings (``verdicts``). This module builds
one study's findings against its model (``verifier_free_findings``, ``variance_findings``); those of a
claims file or a study plan's pre-registration: `vicurl.report.claimed`. The paper's number comes from
``config/paper_numbers.csv`` (``vicurl.report.paper``) or, for Section 5.3, its text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from vicurl.grading.classes import clusters, majority_class
from vicurl.planning import stats
from vicurl.report import labels as L
from vicurl.report import probe_stats as PS
from vicurl.report.latex import at_most

RULE = stats.RULE
VERDICTS = stats.VERDICTS
ALPHA = 0.05  # the findings' family-wise level where the config gives none (schema: findings.alpha)
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
    values: tuple[float, ...]  # arm a's statistic per seed (NaN: not measurable for that seed)
    seeds: tuple[int, ...]
    threshold: float  # what a is compared with where there is no arm b
    side: str  # "<" or ">": where the claim puts a - b (or a - threshold)
    unit: str  # "pp" (percentage points of a fraction), "ratio", "log", "corr", "slope"
    se_extra: float = math.nan  # the probes' bootstrap standard error of the mean, shown beside ours
    versus: tuple[float, ...] | None = None  # arm b's statistic per seed: the claim compares the arms' means
    kind: str = "superiority"  # stats.TYPES
    margin: float = 0.0  # non-inferiority's or equivalence's, in the statistic's unit
    gap: float = math.nan  # the paper's a - b where our runs reproduce its setting: the refutation's reference
    collapse: bool = False  # also counted seed by seed below b (Base)

    @property
    def finite(self) -> np.ndarray:
        return stats.finite(self.values)

    @property
    def mean(self) -> float:
        """The difference the claim is about: mean(a) - mean(b), or mean(a)."""
        a = self.finite
        if not len(a):
            return math.nan
        if self.versus is None:
            return float(a.mean())
        b = stats.finite(self.versus)
        return float(a.mean() - b.mean()) if len(b) else math.nan

    @property
    def std(self) -> float:
        """The seeds' std of a's statistic (of a - b's standard error's parts: ``ours_text``)."""
        a = self.finite
        return float(a.std(ddof=1)) if len(a) >= 2 else math.nan

    @property
    def se(self) -> float:
        """The standard error of ``mean`` across seeds (Welch's, for two arms)."""
        a, b = self.finite, stats.finite(self.versus)
        if len(a) < 2 or (self.versus is not None and len(b) < 2):
            return math.nan
        var = a.var(ddof=1) / len(a) + (b.var(ddof=1) / len(b) if self.versus is not None else 0.0)
        return float(math.sqrt(var))

    def test(self) -> stats.Test:
        return stats.test(self.kind, self.finite, None if self.versus is None else stats.finite(self.versus),
                          side=self.side, gap=self.gap, margin=self.margin, threshold=self.threshold)


def verdicts(found: Sequence[Finding], alpha: float = ALPHA) -> list[str]:
    """Every finding's verdict by the rule (``stats.RULE``), Holm-corrected across them."""
    return stats.verdicts([f.test() for f in found], alpha)


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


def _arm_values(table: pd.DataFrame) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(seeds, scores) of one arm, by seed."""
    t = table.sort_values("seed")
    return tuple(int(s) for s in t["seed"]), tuple(float(v) for v in t["score"])


def _paper_diff(paper: pd.DataFrame | None, a: tuple[str, str], b: tuple[str, str], metric: str) -> tuple[str, float]:
    """The paper's a - b (reward, curriculum) from its numbers' Average column: in words (percentage points,
    the table and model) and as a fraction (NaN where the paper has no such rows)."""
    if paper is None or paper.empty:
        return "--", math.nan
    avg = paper[(paper["benchmark"] == "average") & (paper["metric"] == metric)]
    if avg.empty:
        return "--", math.nan

    def one(key):
        v = avg[(avg["reward"] == key[0]) & (avg["curriculum"] == key[1])]["mean"]
        return float(v.iloc[0]) if len(v) else math.nan

    d = one(a) - one(b)
    if not math.isfinite(d):
        return "--", math.nan
    t, m = avg["table"].iloc[0], avg["model"].iloc[0]
    return f"{100 * d:+.1f} pp ({t}, {m})", d


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
                           paper_table: str = "main_results_part1", refute: bool = False) -> list[Finding]:
    """The stability claims from one study's per-seed scores (with its Base rows) and its runs'
    training metrics; ``paper``: the paper's numbers of one model, whose ``paper_table`` is quoted
    for the last-step claims and whose mechanism table for the curve claims; ``refute``: our runs
    reproduce the paper's setting, so its differences are tested too (``Finding.gap``)."""
    final = final_scores(scores, metric, benchmarks)
    curve = curve_scores(scores, metric, benchmarks)
    main = None if paper is None else paper[paper["table"] == paper_table]
    train = train_accuracy(train_metrics) if train_metrics is not None and len(train_metrics) else None

    def run(reward, curriculum, table=final):
        return table[(table["reward"] == reward) & (table["curriculum"] == curriculum)]

    mp = metric.replace("pass@", "Pass@")
    out = []

    def versus(table, key, claim, paper_of, a, b, side, skip=("base",), collapse=False):
        """A finding per reward with runs a and b (curricula, or ``base``) in ``table``: the arms' scores."""
        for reward in dict.fromkeys(table["reward"]):
            ra, rb = (run("base", "base", table) if c == "base" else run(reward, c, table) for c in (a, b))
            if reward in skip or ra.empty or rb.empty:
                continue
            (seeds, va), (_, vb) = _arm_values(ra), _arm_values(rb)
            words, gap = paper_of(reward)
            out.append(Finding(f"{key}/{reward}", claim(reward), words, va, seeds, 0.0, side, "pp", versus=vb,
                               gap=gap if refute else math.nan, collapse=collapse))

    def baseline(reward):
        return L.row_label(reward, "none")

    versus(final, "vicurl_gain",
           lambda r: f"{L.reward_label(r)} reward: VI-CuRL beats {baseline(r)} ({mp}, last step)",
           lambda r: _paper_diff(main, (r, "vicurl"), (r, "none"), metric), "vicurl", "none", ">")
    versus(curve, "curve_gain",
           lambda r: f"{L.reward_label(r)} reward: VI-CuRL keeps a higher {mp} than {baseline(r)} across training "
                     f"(mean over the evaluated checkpoints)",
           lambda r: (_paper_aulc(paper, r), math.nan), "vicurl", "none", ">", skip=("oracle",))
    versus(final, "collapse",
           lambda r: f"{L.reward_label(r)} reward: {baseline(r)} ends below the base model ({mp})",
           lambda r: _paper_diff(main, (r, "none"), ("base", "base"), metric), "none", "base", "<",
           skip=("base", "oracle"), collapse=True)
    if train is not None:
        versus(train, "train_accuracy",
               lambda r: f"{L.reward_label(r)} reward: VI-CuRL ends with a higher training accuracy than "
                         f"{baseline(r)} (oracle-checked, last {TRAIN_TAIL:.0%} of steps)",
               lambda r: ("collapse of the baselines (Sec. 1, 5.2), no number", math.nan), "vicurl", "none", ">",
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


def _scaled(f: Finding) -> tuple[float, str, int]:
    return {"pp": (100, " pp", 1), "corr": (1, "", 2)}.get(f.unit, (1, "", 3))


def ours_text(f: Finding) -> str:
    """"mean ± std unit (n=seeds)" of one arm, or the difference of two with each arm's; percentage points and
    correlations signed, ratios plain; a collapse's seeds below Base."""
    n = len(f.finite)
    if n == 0:
        return "--"
    scale, unit, digits = _scaled(f)

    def arm(v: np.ndarray, signed: bool) -> str:
        text = f"{v.mean() * scale:{'+' if signed else ''}.{digits}f}"
        return text + (f" ± {v.std(ddof=1) * scale:.{digits}f}" if len(v) >= 2 else "")

    if f.versus is None:
        boot = f"; bootstrap se {f.se_extra * scale:.{digits}f}" if math.isfinite(f.se_extra) else ""
        return f"{arm(f.finite, f.unit != 'ratio')}{unit} (n={n}{boot})"
    b = stats.finite(f.versus)
    if not len(b):
        return "--"
    text = (f"{f.mean * scale:+.{digits}f}{unit} ({arm(f.finite, False)} vs {arm(b, False)}; "
            f"n={n} vs {len(b)})")
    if f.collapse:
        k, m, low = stats.collapse_seeds(f.finite, float(b.mean()))
        text += f"; {k} of {m} seeds below Base (95 % lower bound {low:.0%})"
    return text


def to_frame(found: Iterable[Finding], alpha: float = ALPHA) -> pd.DataFrame:
    """One row per finding: the claim, the paper's number, ours per seed and summarized, the p-values and the
    verdict (Holm across the rows at ``alpha``)."""
    found = list(found)
    tests = [f.test() for f in found]
    verdict = stats.verdicts(tests, alpha)
    return pd.DataFrame([{
        "key": f.key, "claim": f.claim, "paper": f.paper, "ours": ours_text(f), "verdict": v,
        "mean": f.mean, "std": f.std, "se": f.se, "se_bootstrap": f.se_extra, "n_seeds": len(f.finite),
        "n_seeds_b": len(stats.finite(f.versus)) if f.versus is not None else math.nan, "type": f.kind,
        "threshold": f.threshold, "side": f.side, "margin": f.margin, "gap": f.gap, "unit": f.unit,
        "p_claim": t.p_claim, "p_opposite": t.p_opposite, "p_smaller": t.p_smaller,
        "seeds": " ".join(map(str, f.seeds)),
        "per_seed": " ".join("nan" if not math.isfinite(x) else f"{x:.6g}" for x in f.values),
        "per_seed_b": "" if f.versus is None else " ".join("nan" if not math.isfinite(x) else f"{x:.6g}"
                                                             for x in f.versus),
    } for f, t, v in zip(found, tests, verdict)], columns=COLUMNS)


COLUMNS = ["key", "claim", "paper", "ours", "verdict", "mean", "std", "se", "se_bootstrap", "n_seeds", "n_seeds_b",
           "type", "threshold", "side", "margin", "gap", "unit", "p_claim", "p_opposite", "p_smaller", "seeds",
           "per_seed", "per_seed_b"]


def multiplicity(table: pd.DataFrame, alpha: float = ALPHA) -> str:
    """What the rule means for this table: its family of claims, the Holm levels, the seeds."""
    m = len(table)
    if not m:
        return "no claim tested."
    n = int(table["n_seeds"].max())
    return (f"{m} claims, Holm-corrected together at family-wise alpha = {alpha:g}: the claim tests' levels run "
            f"from {alpha / m:.2g} (the first) to {alpha:g}; the refutations (opposite, smaller than the paper's gap) "
            f"each at {alpha:g}. With {n} seed(s) an arm, a claim holds only with a difference many times its "
            f"seeds' spread (docs/evaluation.md).")


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
                    departed: Sequence[str] = (), decomposition_lines: Sequence[str] = (), alpha: float = ALPHA) -> str:
    lines = [f"# {title}", "", "Verdict rule: " + RULE + ".", "", "Multiplicity: " + multiplicity(table, alpha), ""]
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
