"""The paper's claims as data: config/claims.yaml's families expanded, each with the paper's number and the
spread a plan assumes.

``load()`` reads the file (checked against config/claims.schema.yaml), expands every family over its models
(and rewards, ``against``, estimators), and gives each claim:

- its arms: ``a`` and ``b`` (``Arm``: a study's model and setting; ``base``: the initial policy's evaluation),
  or ``a`` alone compared with 0 (an upgration, a variance ratio's log);
- ``gap``: the paper's a - b (or a's value), from config/paper_numbers.csv (the first of the family's
  tables that holds the model's rows) or config/paper_text_numbers.csv; the claimed direction's sign
  (``side``); ``contradicted``: why the paper's own numbers go against the claim, where they do;
- ``spread_a``, ``spread_b``: the seed-to-seed spread of each arm's statistic a plan assumes, by the family's
  rule (the printed ± of the Average column, at least the floor, or a rule where the table prints none),
  and the rule's words.

A family whose paper key is missing from the numbers is an error naming the claim and the key.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import yaml

from vicurl.runtime.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
CLAIMS = REPO / "config" / "claims.yaml"
SCHEMA = REPO / "config" / "claims.schema.yaml"
NUMBERS = REPO / "config" / "paper_numbers.csv"
TEXT_NUMBERS = REPO / "config" / "paper_text_numbers.csv"
MAIN_TABLES = ("main_results_part1", "main_results_part2")
BASE = "base"


@dataclass(frozen=True)
class Arm:
    study: str  # "base" for the initial policy's evaluations
    model: str
    setting: str  # reward-curriculum, or "base"

    @property
    def reward(self) -> str:
        return self.setting.split("-", 1)[0]

    @property
    def curriculum(self) -> str:
        return self.setting.split("-", 1)[1] if "-" in self.setting else self.setting

    @property
    def is_base(self) -> bool:
        return self.study == BASE

    def __str__(self) -> str:
        return "base" if self.is_base else f"{self.study}/{self.setting}"


@dataclass(frozen=True)
class Claim:
    id: str
    family: str
    words: str
    kind: str  # superiority, non_inferiority, equivalence (vicurl.planning.stats.TYPES)
    collapse: bool  # a superiority claim below Base, also counted seed by seed
    model: str
    a: Arm
    b: Arm | None
    statistic: str  # last, t_long, upgration, log_variance_ratio, log_variance_ratio_early
    metric: str
    estimator: str  # sigma2 or vprob for the variance claims, else ""
    margin: float
    gap: float  # the paper's a - b (or a's value against 0), signed
    side: str  # ">" or "<": where the claim puts a - b
    spread_a: float
    spread_b: float | None
    spread_rule: str  # the rule's words
    paper_text: str  # the paper's number(s) in words
    contradicted: str = ""  # why the paper's own numbers go against the claim ("" where they do not)
    tags: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def arms(self) -> tuple[Arm, ...]:
        return (self.a,) if self.b is None else (self.a, self.b)

    @property
    def planned_gap(self) -> float:
        """The difference a plan powers the claim for: the paper's, on the claimed side."""
        return self.gap


def read_numbers(path: str | Path = NUMBERS) -> pd.DataFrame:
    from vicurl.report.paper import load_paper_numbers

    return load_paper_numbers(path)


def read_text_numbers(path: str | Path = TEXT_NUMBERS) -> dict[str, tuple[float, str]]:
    df = pd.read_csv(path, comment="#")
    return {str(r.key): (float(r.value), str(r.quote)) for r in df.itertuples()}


def load(path: str | Path = CLAIMS, numbers: pd.DataFrame | None = None,
         text: Mapping[str, tuple[float, str]] | None = None, schema: str | Path = SCHEMA) -> list[Claim]:
    """Every claim of the file, expanded (the module docstring)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    spec = yaml.safe_load(Path(path).read_text())
    err = best_match(Draft202012Validator(yaml.safe_load(Path(schema).read_text())).iter_errors(spec))
    if err is not None:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err.message}")
    numbers = read_numbers() if numbers is None else numbers
    text = read_text_numbers() if text is None else text
    out = []
    for i, fam in enumerate(spec["families"]):
        for claim in _expand(fam):
            out.append(_resolve(claim, fam, spec, numbers, text, f"{path}: families[{i}] ({fam['id']})"))
    ids = [c.id for c in out]
    twice = sorted({x for x in ids if ids.count(x) > 1})
    if twice:
        raise ConfigError(f"{path}: claim id {twice[0]} is made twice")
    return out


def _expand(fam: Mapping[str, Any]):
    """(tags, id) of each claim of a family: one per model x reward x against x estimator it lists."""
    axes = {k: fam[k] for k in ("rewards", "against", "estimators") if k in fam}
    names = {"rewards": "reward", "against": "against", "estimators": "estimator"}
    for model in fam["models"]:
        for combo in itertools.product(*axes.values()):
            tags = {"model": model, **{names[k]: v for k, v in zip(axes, combo)}}
            parts = [fam["id"], *(tags[names[k]] for k in axes), model]
            yield tags, "/".join(parts)


def _arm(spec: Any, fam: Mapping[str, Any], tags: Mapping[str, str]) -> Arm | None:
    if spec is None:
        return None
    if isinstance(spec, str):
        spec = {"setting": spec}
    setting = spec["setting"].format(**tags)
    if setting == BASE:
        return Arm(BASE, tags["model"], BASE)
    return Arm(spec.get("study", fam["study"]), tags["model"], setting)


def _paper_value(numbers: pd.DataFrame, tables, model: str, arm: Arm, metric: str, variant: str,
                 where: str) -> tuple[float, float, str]:
    """(mean, printed std or NaN, table) of an arm's Average row in the first of ``tables`` holding the model."""
    for table in tables:
        rows = numbers[(numbers["table"] == table) & (numbers["model"] == model)]
        if rows.empty:
            continue
        reward, curriculum = (BASE, BASE) if arm.is_base else (arm.reward, arm.curriculum)
        hit = rows[(rows["reward"] == reward) & (rows["curriculum"] == curriculum) & (rows["metric"] == metric)
                   & (rows["benchmark"] == "average") & (rows["variant"].astype(str) == variant)]
        if hit.empty:
            raise ConfigError(f"{where}: config/paper_numbers.csv has no row of table {table}, model {model}, "
                              f"{reward}-{curriculum}{f' ({variant})' if variant else ''}, {metric}, average")
        std = hit["std"].iloc[0]
        return float(hit["mean"].iloc[0]), float(std) if pd.notna(std) and std != "" else math.nan, table
    raise ConfigError(f"{where}: no table of {list(tables)} in config/paper_numbers.csv holds model {model}")


def same_model_spread(numbers: pd.DataFrame, model: str) -> float:
    """The largest printed Average ± of the model's rows in the main tables (Pass@1)."""
    rows = numbers[numbers["table"].isin(MAIN_TABLES) & (numbers["model"] == model)
                   & (numbers["benchmark"] == "average") & (numbers["metric"] == "pass@1")]
    stds = pd.to_numeric(rows["std"], errors="coerce").dropna()
    return float(stds.max()) if len(stds) else math.nan


def _resolve(tagged, fam, spec, numbers, text, where) -> Claim:
    tags, cid = tagged
    model = tags["model"]
    a, b = _arm(fam["a"], fam, tags), _arm(fam.get("b"), fam, tags)
    statistic = fam.get("statistic", "last")
    metric = fam.get("metric", "pass@1")
    kind = "superiority" if fam["type"] == "collapse" else fam["type"]
    collapse = fam["type"] == "collapse"
    side = "<" if collapse or fam.get("direction") == "below" else ">"
    margin = 0.0
    if kind in ("non_inferiority", "equivalence"):
        if fam.get("margin") not in spec["margins"]:
            raise ConfigError(f"{where}: margin {fam.get('margin')!r} is not one of `margins` ({list(spec['margins'])})")
        margin = float(spec["margins"][fam["margin"]])
    paper = fam["paper"]
    rules = spec["spreads"]["rules"]
    if fam["spread"] not in rules:
        raise ConfigError(f"{where}: spread {fam['spread']!r} is not one of `spreads.rules` ({list(rules)})")
    rule = rules[fam["spread"]]
    floor = float(spec["spreads"]["floor"])

    if "text" in paper:
        if paper["text"] not in text:
            raise ConfigError(f"{where}: config/paper_text_numbers.csv has no key {paper['text']!r}")
        value, quote = text[paper["text"]]
        gap = math.log(value) if statistic.startswith("log_") else value
        paper_text = f"{value:g} ({quote})"
        va = vb = math.nan
    else:
        tables = paper.get("tables") or []
        pmetric = paper.get("metric", metric)
        variant = str(paper.get("variant", ""))
        va, sa_printed, table = _paper_value(numbers, tables, model, a, pmetric, variant, where)
        if b is not None:
            vb, sb_printed, _ = _paper_value(numbers, tables, model, b, pmetric, variant, where)
            gap = va - vb
            paper_text = f"{100 * gap:+.1f} pp ({100 * va:.1f} vs {100 * vb:.1f}, {table})"
        else:
            vb, sb_printed = math.nan, math.nan
            gap = va
            paper_text = f"{100 * va:+.1f} pp ({table})"

    def spread(printed: float) -> tuple[float, str]:
        name = fam["spread"]
        if "value" in rule:
            return float(rule["value"]), rule["words"]
        if name == "printed" and math.isfinite(printed):
            return max(floor, printed), rule["words"]
        base = same_model_spread(numbers, model)
        if name == "same_model_difference":
            base *= math.sqrt(2)
        words = rule["words"] if name != "printed" else rules["same_model"]["words"] + " (no ± printed for this row)"
        return max(floor, base), words

    sa, words = spread(locals().get("sa_printed", math.nan))
    sb, _ = (spread(locals().get("sb_printed", math.nan)) if b is not None else (None, ""))
    contradicted = ""
    if kind == "superiority" and gap * (1 if side == ">" else -1) <= 0:
        contradicted = f"the paper's own numbers put a - b at {_pp(gap, statistic)}, not {'above' if side == '>' else 'below'} 0"
    elif kind == "non_inferiority" and gap < -margin:
        contradicted = f"the paper's own a - b is {_pp(gap, statistic)}, beyond the margin {_pp(-margin, statistic)}"
    elif kind == "equivalence" and abs(gap) > margin:
        contradicted = f"the paper's own a - b is {_pp(gap, statistic)}, outside ±{_pp(margin, statistic, sign=False)}"
    words_text = fam["words"].format(**{**tags, "reward": tags.get("reward", ""), "against": tags.get("against", ""),
                                         "estimator": {"sigma2": "action variance", "vprob": "problem variance"}
                                         .get(tags.get("estimator", ""), "")})
    return Claim(cid, fam["id"], words_text, kind, collapse, model, a, b, statistic, metric, tags.get("estimator", ""),
                 margin, gap, side, sa, sb, words, paper_text, contradicted, dict(tags))


def _pp(x: float, statistic: str, sign: bool = True) -> str:
    if statistic.startswith("log_"):
        return f"ratio {math.exp(x):.2f}"
    return f"{100 * x:{'+' if sign else ''}.1f} pp"


def with_spreads(claims: list[Claim], spreads: Mapping[tuple[str, str], float], source: str) -> list[Claim]:
    """The claims with the observed spreads (``spreads``: (model, statistic kind) -> spread) in place of the
    planning rule's, where one is given."""
    out = []
    for c in claims:
        key = (c.model, "log" if c.statistic.startswith("log_") else "pp")
        if key in spreads and math.isfinite(spreads[key]):
            s = spreads[key]
            out.append(replace(c, spread_a=s, spread_b=None if c.b is None else s, spread_rule=source))
        else:
            out.append(c)
    return out
