"""The findings of a claims file: config/claims.yaml's claims whose arms the config trains, or the
confirmatory claims a study plan pre-registered (python -m vicurl.plan), across studies and models.

``read_claims`` (at plan time, in the workflow) gives each claim as a record: its id, words, type, side,
the paper's gap and words, margin, statistic, metric, estimator and its arms ``a`` and ``b`` (study, model,
setting; ``base``: the initial policy's evaluations), named as the config names them. ``claim_findings``
reads each arm's statistic per seed from the studies' scores (``scores/<study>.csv``) and the probes,
and gives the findings (`vicurl.report.findings.Finding`) the one rule decides:

``last``, ``t_long``        the metric averaged over the study's benchmarks at each run's last step
``upgration``               that at the last step (T_long) minus that at the study's ``t_ref`` (its first
                            ``eval_steps`` entry: the step the mechanism's runs continue from)
``log_variance_ratio``      the log of the ratio kept/full of the estimator's variance, mean over the
                            seed's probes with beta_t < 1 (``_early``: those with beta_t <= 0.25)
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd
import yaml

from vicurl.config.runs import split_setting
from vicurl.runtime.errors import ConfigError

if TYPE_CHECKING:
    from vicurl.report.findings import Finding

LOG_STATISTICS = ("log_variance_ratio", "log_variance_ratio_early")
STATISTICS = ("last", "t_long", "upgration", *LOG_STATISTICS)


def _arm_record(arm) -> dict[str, str] | None:
    if arm is None:
        return None
    return {"study": arm.study, "model": arm.model, "setting": arm.setting, "paper_study": arm.study}


def read_claims(path: str | Path, trained: set[tuple[str, str, str]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The claims of ``path`` (a pre-registration, or a claims file like config/claims.yaml) as records, and the
    pre-registration's header (empty for a claims file). ``trained``: (study, model, setting) of every run the
    config trains; a claims file's claims are those whose arms it trains all of, a pre-registration's must be
    (an error names the first that is not)."""
    from vicurl.planning import claims as claims_lib

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"findings.claims: {path} does not exist")
    spec = yaml.safe_load(path.read_text()) or {}

    def runs(rec) -> bool:
        return all(arm is None or arm["study"] == "base" or (arm["study"], arm["model"], arm["setting"]) in trained
                   for arm in (rec["a"], rec["b"]))

    if "families" not in spec:  # a pre-registration
        for key in ("claims", "alpha", "rule"):
            if key not in spec:
                raise ConfigError(f"findings.claims: {path} is neither a claims file (`families`) nor a "
                                  f"pre-registration (no `{key}`)")
        for rec in spec["claims"]:
            if not runs(rec):
                raise ConfigError(f"findings.claims: {path}: claim {rec['id']} compares runs the config does not "
                                  f"train ({rec['a']}, {rec['b']})")
        return list(spec["claims"]), {k: v for k, v in spec.items() if k != "claims"}
    out = []
    for c in claims_lib.load(path):
        rec = {"id": c.id, "words": c.words, "type": c.kind, "collapse": c.collapse, "side": c.side, "gap": c.gap,
               "margin": c.margin, "statistic": c.statistic, "metric": c.metric, "estimator": c.estimator,
               "paper": c.paper_text, "a": _arm_record(c.a), "b": _arm_record(c.b)}
        if runs(rec):
            out.append(rec)
    return out, {}


def config_hash_line(prereg: Mapping[str, Any], configfiles: Sequence[str | Path]) -> str:
    """Whether one of the run's config files is the one the plan pre-registered (its sha256), in words."""
    want = prereg.get("config_sha256")
    if not want:
        return ""
    for f in configfiles:
        p = Path(f)
        if p.exists() and hashlib.sha256(p.read_bytes()).hexdigest() == want:
            return f"the config {p.name} is the pre-registered one (sha256 {want[:12]})"
    return (f"no config file of this run is the pre-registered one (sha256 {want[:12]}): the config was changed "
            f"after the plan, and the verdicts are not confirmatory")


# ---------------------------------------------------------------- per-seed statistics


def _run_rows(scores: pd.DataFrame, arm: Mapping[str, str]) -> pd.DataFrame:
    reward, curriculum = split_setting(arm["setting"])
    return scores[(scores["study"] == arm["study"]) & (scores["model"] == arm["model"])
                  & (scores["reward"] == reward) & (scores["curriculum"] == curriculum)]


def _by_seed(table: pd.DataFrame) -> dict[int, float]:
    return {int(s): float(v) for s, v in zip(table["seed"], table["score"])}


def _at_step(rows: pd.DataFrame, step: int, metric: str, benchmarks: Sequence[str]) -> dict[int, float]:
    """Each seed's metric at ``step``, averaged over ``benchmarks`` (seeds with every benchmark there)."""
    s = rows[(rows["step"] == step) & rows["benchmark"].isin(benchmarks)]
    full = s.groupby("seed")["benchmark"].nunique()
    s = s[s["seed"].isin(full[full == len(benchmarks)].index)]
    return {int(k): float(v) for k, v in s.groupby("seed")[metric].mean().items()}


def arm_values(claim: Mapping[str, Any], arm: Mapping[str, str], scores: Mapping[str, pd.DataFrame],
               probes: Sequence[Mapping[str, Any]], studies: Mapping[str, Mapping[str, Any]],
               versus_study: str | None = None) -> dict[int, float]:
    """Seed -> the claim's statistic in ``arm`` (the module docstring); a Base arm reads the Base rows of the scores
    of ``versus_study`` (the compared arm's study) over that study's benchmarks."""
    from vicurl.report import probe_stats as PS
    from vicurl.report.findings import final_scores

    statistic, metric = claim["statistic"], claim["metric"]
    if statistic not in STATISTICS:
        raise ConfigError(f"claim {claim['id']}: statistic {statistic!r} is not one of {STATISTICS}")
    if statistic in LOG_STATISTICS:
        reward, curriculum = split_setting(arm["setting"])
        recs = [r for r in probes if r["study"] == arm["study"] and r["model"] == arm["model"]
                and r["reward"] == reward and r["curriculum"] == curriculum]
        key = ("early_" if statistic.endswith("_early") else "mean_") + claim["estimator"]
        out = {}
        for seed, rs in PS.by_seed(recs).items():
            v = PS.seed_statistics([PS.probe_quantities(r) for r in rs])[key]
            out[int(seed)] = math.log(v) if v > 0 else math.nan
        return out
    study = versus_study if arm["study"] == "base" else arm["study"]
    info = studies[study]
    sc = scores[study]
    if arm["study"] == "base":
        rows = sc[(sc["study"] == "base") & (sc["model"] == arm["model"])]
        return _at_step(rows, 0, metric, info["benchmarks"])
    rows = _run_rows(sc, arm)
    if rows.empty:
        return {}
    last = _by_seed(final_scores(rows, metric, info["benchmarks"]))
    if statistic != "upgration":
        return last
    if info.get("t_ref") is None:
        raise ConfigError(f"claim {claim['id']}: study {study} has no eval_steps entry to read T_ref at")
    ref = _at_step(rows, int(info["t_ref"]), metric, info["benchmarks"])
    return {s: last[s] - ref[s] for s in last if s in ref}


def claim_findings(claims: Sequence[Mapping[str, Any]], scores: Mapping[str, pd.DataFrame],
                   probes: Sequence[Mapping[str, Any]], studies: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """One finding per claim, from its arms' per-seed statistics (a claim none of whose seeds has results yet
    is kept, with no values: inconclusive)."""
    from vicurl.report.findings import Finding

    out = []
    for c in claims:
        a = arm_values(c, c["a"], scores, probes, studies)
        b = None if c["b"] is None else arm_values(c, c["b"], scores, probes, studies, versus_study=c["a"]["study"])
        log = c["statistic"] in LOG_STATISTICS
        out.append(Finding(
            key=c["id"], claim=c["words"], paper=c["paper"], values=tuple(a[s] for s in sorted(a)),
            seeds=tuple(sorted(a)), threshold=0.0, side=c["side"], unit="log" if log else "pp",
            versus=None if b is None else tuple(b[s] for s in sorted(b)), kind=c["type"],
            margin=float(c.get("margin") or 0.0), gap=float(c["gap"]) if c.get("gap") is not None else math.nan,
            collapse=bool(c.get("collapse"))))
    return out


def study_info(cfg: Mapping[str, Any], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What ``arm_values`` reads of each study: its benchmarks and T_ref (its first ``eval_steps`` entry)."""
    out = {}
    for name in names:
        st = cfg["studies"][name]
        steps = st.get("eval_steps") or []
        out[name] = {"benchmarks": list(st["benchmarks"]), "t_ref": int(min(steps)) if steps else None}
    return out


def studies_of(claims: Sequence[Mapping[str, Any]]) -> list[str]:
    """The studies whose scores the claims read (a Base arm reads its compared arm's)."""
    return sorted({c["a"]["study"] for c in claims} | {c["b"]["study"] for c in claims
                                                         if c["b"] is not None and c["b"]["study"] != "base"})


def probed_arms(claims: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """(study, model, setting) of the arms whose probes the claims read."""
    return {(c["a"]["study"], c["a"]["model"], c["a"]["setting"]) for c in claims if c["statistic"] in LOG_STATISTICS}

