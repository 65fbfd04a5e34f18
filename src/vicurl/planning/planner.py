"""The study planner: which of the paper's claims a budget decides, with how many seeds, and the config that
runs exactly that.

The unit of a plan is a *group*: one model of one of the paper's studies, trained with some of its settings
(arms) for n seeds; the written config gives each group a study of its own (``main`` with two models becomes
``main_<model>`` twice), so that it trains exactly the arms its claims need. A claim is *decidable* when the
paper's own numbers do not go against it and some number of seeds (at most ``MAX_SEEDS``) gives its test the
target power at the paper's gap; it is then affordable when its groups fit the budget beside the others
chosen. The choice of claims and seeds is an integer program (``scipy.optimize.milp``): most claims, then
least cost, every chosen claim's arms trained for at least the seeds its power needs at the level Holm's first
step gives it (alpha / the number chosen), an arm shared by several claims paid once, a continued study's runs
(the mechanism study's) only beside the runs they continue, AdaRFT's and SENT's offline statistics once per
model. The arms' prices are the cost model's (`vicurl.planning.cost`) for one seed, from the paper's config
with the departures allowed; the plan's cost is the cost model's total for the config it writes.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from vicurl.config import checks
from vicurl.config import runs as runs_lib
from vicurl.planning import claims as claims_lib
from vicurl.planning import cost, stats
from vicurl.planning.claims import Arm, Claim
from vicurl.runtime.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
PAPER = REPO / "config" / "paper.yaml"
MAX_SEEDS = 20
# the A100 40GB hours one hour of each card is worth on these jobs: ASSUMED from the ratios of their bf16
# peaks and memory bandwidths (docs/paper.md, "GPU time at paper scale"), the A100's being the cost model's
GPUS = {"a100-40gb": 1.0, "a100-80gb": 1.15, "h100": 2.6, "h200": 3.1}
DEPARTURES = ("total_steps", "eval_every", "subset")
RULE = stats.RULE


class PlanError(ConfigError):
    """Bad input to the planner: the message names the option, claim or file."""


# ---------------------------------------------------------------- the config a plan may depart from


def paper_raw() -> dict[str, Any]:
    return yaml.safe_load(PAPER.read_text())


def parse_allow(text: str | None) -> dict[str, int]:
    """``--allow total_steps=200,eval_every=100,subset=500`` as a mapping; an unknown key or value is an error."""
    out: dict[str, int] = {}
    for part in [p for p in (text or "").split(",") if p.strip()]:
        key, _, value = part.partition("=")
        key = key.strip()
        if key not in DEPARTURES:
            raise PlanError(f"--allow: {key!r} is not a departure the planner knows ({', '.join(DEPARTURES)})"
                            f"{checks.nearest(key, DEPARTURES)}")
        try:
            out[key] = int(value)
        except ValueError:
            raise PlanError(f"--allow {key}: {value!r} is not a whole number") from None
        if out[key] < 1:
            raise PlanError(f"--allow {key}: {value} is below 1")
    return out


def departed(raw: dict[str, Any], allow: Mapping[str, int]) -> tuple[dict[str, Any], list[str]]:
    """The paper's raw config with the departures applied, and each in words: ``total_steps`` scales every
    study's steps by N / the paper's (the mechanism's T_ref and T_long alike, a study evaluated at its last step
    only still so); ``eval_every`` evaluates every N steps; ``subset`` cuts every benchmark with more rows to N
    (a fixed draw)."""
    cfg = copy.deepcopy(raw)
    words = []
    if "total_steps" in allow:
        old = int(cfg["train"]["total_steps"])
        new = int(allow["total_steps"])
        scale = new / old
        cfg["train"]["total_steps"] = new
        for study in cfg["studies"].values():
            train = study.get("train") or {}
            if "total_steps" in train:
                train["total_steps"] = max(1, round(int(train["total_steps"]) * scale))
            if study.get("eval_every") == old:
                study["eval_every"] = new
            if study.get("eval_steps"):
                study["eval_steps"] = [max(1, round(int(s) * scale)) for s in study["eval_steps"]]
        words.append(f"total_steps: {new} (paper: {old}); every study's steps scaled alike")
    if "eval_every" in allow:
        old = int(cfg["eval"]["every"])
        cfg["eval"]["every"] = int(allow["eval_every"])
        words.append(f"eval.every: {allow['eval_every']} (paper: {old}); the tables' last step is evaluated still")
    if "subset" in allow:
        n = int(allow["subset"])
        benches = {b for s in cfg["studies"].values() for b in s["benchmarks"]}
        checked = checks.read(copy.deepcopy(cfg))
        cut = []
        for b in sorted(benches):
            size = cost.dataset_size(checked, b)[0]
            if size is not None and size > n:
                cfg["datasets"][b]["subset"] = {"n": n, "seed": 0}
                cut.append(f"{b} {size:,}")
        if cut:
            words.append(f"benchmarks cut to {n:,} rows each (a fixed draw): {', '.join(cut)}")
    return cfg, words


# ---------------------------------------------------------------- the groups and their prices


def safe(name: str) -> str:
    return name.replace(".", "p").replace("-", "_")


@dataclass(frozen=True)
class Group:
    study: str  # the paper's study
    model: str

    @property
    def key(self) -> str:
        return f"{self.study}/{self.model}"


def group_of(arm: Arm) -> Group | None:
    return None if arm.is_base else Group(arm.study, arm.model)


@dataclass
class Prices:
    """A100 hours of one seed: each arm's training and evaluation, each group's base evaluation, each model's
    trajectory probes, each (model, training set)'s offline statistics; and which arms need which."""

    arm: dict[Arm, float]
    base: dict[str, float]  # model -> one seed's base evaluations
    probes: dict[str, float]  # model -> one seed's probes of its oracle VI-CuRL run
    stats_job: dict[tuple[str, str], float]  # (model, train set) -> the prompt_stats job
    needs_stats: dict[Arm, tuple[str, str]]
    source: dict[Arm, Arm]  # a continued arm -> the arm it continues


def prices(cfg: Mapping[str, Any], arms: Sequence[Arm], workdir: str | Path = ".") -> Prices:
    """The prices of one seed of each of ``arms`` in ``cfg`` (a checked config with every study), by the cost
    model; an arm whose study continues another's is priced for its own steps, beside its source's."""
    jobs = cost.jobs(cfg, workdir=workdir)
    arm_h: dict[Arm, float] = {a: 0.0 for a in arms}
    base: dict[str, float] = {}
    probes: dict[str, float] = {}
    stats_job = {(j.model, j.dataset): j.gpu_hours for j in jobs if j.rule == "prompt_stats"}
    for j in jobs:
        if j.seed != 0 or not j.gpus:
            continue
        if j.study == runs_lib.BASE:
            base[j.model] = base.get(j.model, 0.0) + j.gpu_hours
        elif j.rule == "probe":
            probes[j.model] = probes.get(j.model, 0.0) + j.gpu_hours
        else:
            a = Arm(j.study, j.model, j.setting)
            if a in arm_h:
                arm_h[a] += j.gpu_hours
    needs, source = {}, {}
    for a in arms:
        if a.is_base:
            continue
        run = runs_lib.Run.of(a.study, a.model, a.setting, 0)
        if runs_lib.needs_prompt_stats(cfg, run):
            needs[a] = (a.model, cfg["studies"][a.study]["train_set"])
        src = runs_lib.source_run(cfg, run)
        if src is not None:
            source[a] = Arm(src.study, src.model, src.setting)
    return Prices(arm_h, base, probes, stats_job, needs, source)


# ---------------------------------------------------------------- the claims a plan may choose


@dataclass
class Candidate:
    claim: Claim
    status: str  # chosen, unaffordable, undecidable
    why: str = ""
    seeds: int | None = None  # seeds an arm needs (chosen: what it gets)
    power: float = math.nan  # to confirm, at alpha
    power_adjusted: float = math.nan  # to confirm, at the Holm level of the plan (alpha / m, its first step)
    power_refute: float = math.nan
    detectable: float = math.nan  # the smallest difference the plan's seeds detect at the target power
    hours: float = math.nan  # its groups' A100 hours at its seeds (chosen: of the seeds it gets)
    alone: float = math.nan  # the budget it needs alone (unaffordable)


@dataclass
class Plan:
    budget_hours: float  # in hours of the GPU kind
    gpu: str
    a100_budget: float
    alpha: float
    target: float
    candidates: list[Candidate]
    groups: dict[Group, int]  # the seeds of every group trained
    arms: dict[Group, list[Arm]]
    probed: dict[str, int]  # model -> seeds whose trajectory is probed
    departures: list[str]
    config: dict[str, Any] = field(default_factory=dict)
    cost: float = 0.0  # the cost model's A100 hours of the written config
    new_cost: float = 0.0  # of its jobs an earlier stage has not run (the whole cost for a first plan)

    @property
    def chosen(self) -> list[Candidate]:
        return [c for c in self.candidates if c.status == "chosen"]


def _needed(c: Claim, alpha: float, target: float, min_seeds: int) -> int | None:
    return stats.seeds_needed(c.kind, c.gap, c.spread_a, c.spread_b, alpha, target, c.margin, lowest=min_seeds,
                              highest=MAX_SEEDS)


def _claim_groups(c: Claim) -> list[Group]:
    return [g for g in (group_of(a) for a in c.arms) if g is not None]


def _needs_probes(c: Claim) -> bool:
    return c.statistic.startswith("log_variance")


def choose(cands: Sequence[Claim], P: Prices, budget: float, alpha: float, target: float, min_seeds: int,
           have: Mapping[Group, int] | None = None) -> tuple[dict[Claim, int], dict[Group, int], dict[str, Any]]:
    """The claims to confirm, the seeds of every group and the models whose trajectory is probed (with seeds):
    the most claims within ``budget`` (A100 hours), then the least cost, each chosen claim powered at Holm's
    first level for the number chosen (``_solve`` for each count, the largest count that it reaches)."""
    best: tuple[dict, dict, dict] = ({}, {}, {})
    lo, hi = 0, len(cands)
    while lo < hi:  # the largest m for which m claims fit with each powered at alpha / m
        m = (lo + hi + 1) // 2
        got = _solve(cands, P, budget, alpha / m, target, min_seeds, m, have or {})
        if len(got[0]) >= m:
            lo, best = m, got
        else:
            hi = m - 1
    return best


def _solve(cands, P: Prices, budget, level, target, min_seeds, at_most, have):
    """One integer program: the claims (at most ``at_most``) each powered at ``level``. Variables: a claim
    chosen (y), an arm trained (z), a group's seeds (N, 0: not trained), an arm's cost (c >= its price x N when
    trained: N's bound times (1 - z) below), a model's probed seeds (Q), a model's offline statistics (s). HiGHS
    solves it to its default relative gap (1e-4: the count exact, the cost within a few hours of the least);
    deterministic, and no time limit decides a plan."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    need = {c: _needed(c, level, target, min_seeds) for c in cands}
    cands = [c for c in cands if need[c] is not None]
    if not cands:
        return {}, {}, {}
    arms = {a for c in cands for a in c.arms if not a.is_base}
    arms |= {P.source[a] for a in arms if a in P.source}
    arms = sorted(arms, key=str)
    groups = sorted({group_of(a) for a in arms}, key=lambda g: g.key)
    models = sorted({c.model for c in cands if _needs_probes(c)})
    stat_keys = sorted({P.needs_stats[a] for a in arms if a in P.needs_stats})
    M = MAX_SEEDS
    names = ([("y", c.id) for c in cands] + [("z", a) for a in arms] + [("N", g.key) for g in groups]
             + [("c", a) for a in arms] + [("Q", m) for m in models] + [("s", k) for k in stat_keys])
    index = {k: i for i, k in enumerate(names)}
    size = len(names)
    lower, upper, integral = np.zeros(size), np.ones(size), np.ones(size)
    cost_vec = np.zeros(size)
    for g in groups:
        upper[index[("N", g.key)]] = M
        lower[index[("N", g.key)]] = min(have.get(g, 0), M)  # seeds run already stay in the plan
        cost_vec[index[("N", g.key)]] = P.base.get(g.model, 0.0)  # the base evaluations of its seeds
    for a in arms:
        upper[index[("c", a)]] = np.inf
        integral[index[("c", a)]] = 0
        cost_vec[index[("c", a)]] = 1.0
    for m in models:
        upper[index[("Q", m)]] = M
        cost_vec[index[("Q", m)]] = P.probes.get(m, 0.0)
    for k in stat_keys:
        cost_vec[index[("s", k)]] = P.stats_job.get(k, 0.0)
    rows, lbs, ubs = [], [], []

    def constraint(coeffs, lb, ub):
        row = np.zeros(size)
        for key, v in coeffs.items():
            row[index[key]] += v
        rows.append(row)
        lbs.append(lb)
        ubs.append(ub)

    for a in arms:
        g, price = group_of(a), P.arm.get(a, 0.0)
        # c_a >= price (N_g - have_g - M (1 - z_a)): the arm's new seeds, when it is trained
        constraint({("c", a): 1, ("N", g.key): -price, ("z", a): -price * M}, -price * (M + have.get(g, 0)), np.inf)
        if a in P.source:  # a continued arm beside its source, which has at least its seeds
            src = P.source[a]
            constraint({("z", a): 1, ("z", src): -1}, -np.inf, 0)
            constraint({("N", g.key): 1, ("N", group_of(src).key): -1, ("z", a): M}, -np.inf, M)
        if a in P.needs_stats:
            constraint({("z", a): 1, ("s", P.needs_stats[a]): -1}, -np.inf, 0)
    for g in groups:  # a group with seeds trains an arm
        constraint({("N", g.key): 1, **{("z", a): -M for a in arms if group_of(a) == g}}, -np.inf, 0)
    for c in cands:
        y = ("y", c.id)
        for a in c.arms:
            if a.is_base:
                continue
            constraint({y: 1, ("z", a): -1}, -np.inf, 0)
            constraint({("N", group_of(a).key): 1, y: -need[c]}, 0, np.inf)
        if _needs_probes(c):
            constraint({("Q", c.model): 1, y: -need[c]}, 0, np.inf)
            constraint({("Q", c.model): 1, ("N", group_of(c.a).key): -1}, -np.inf, 0)  # seeds the arm trains
    constraint({("y", c.id): 1 for c in cands}, 0, at_most)
    spent = sum(P.base.get(g.model, 0.0) * min(have.get(g, 0), M) for g in groups)  # the base evaluations run already
    constraint({names[i]: cost_vec[i] for i in range(size) if cost_vec[i]}, -np.inf, budget + spent)
    objective = 0.5 * cost_vec / (budget + 1.0)  # most claims first (a claim outweighs the whole budget), then least cost
    for c in cands:
        objective[index[("y", c.id)]] = -1.0
    res = milp(objective, constraints=LinearConstraint(np.array(rows), lbs, ubs), integrality=integral,
               bounds=Bounds(lower, upper))
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"the plan's integer program ended without an optimum: {res.message}")
    x = res.x
    chosen = {c: need[c] for c in cands if round(x[index[("y", c.id)]])}
    seeds = {g: int(round(x[index[("N", g.key)]])) for g in groups}
    trained = [a for a in arms if round(x[index[("z", a)]]) and seeds[group_of(a)]]  # z = 1 with N = 0: idle
    seeds = {g: n for g, n in seeds.items() if n and any(group_of(a) == g for a in trained)}
    probed = {m: int(round(x[index[("Q", m)]])) for m in models if round(x[index[("Q", m)]])}
    return chosen, seeds, {"arms": {a: seeds[group_of(a)] for a in trained}, "probed": probed}


# ---------------------------------------------------------------- the plan


def make(budget: float, gpu: str = "a100-40gb", target: float = 0.8, alpha: float = 0.05,
         claim_ids: Sequence[str] | None = None, min_seeds: int = 2, allow: Mapping[str, int] | None = None,
         catalog: Sequence[Claim] | None = None, name: str = "plan", prereg: str = "plan/preregistration.yaml",
         have: Mapping[Group, int] | None = None) -> Plan:
    """The plan for ``budget`` hours of ``gpu`` (the module docstring); ``have``: the seeds each group has run
    already (a second stage), which cost nothing more and which the plan keeps."""
    if gpu not in GPUS:
        raise PlanError(f"--gpu: {gpu!r} is not one of {', '.join(GPUS)}{checks.nearest(gpu, GPUS)}")
    if not (isinstance(budget, (int, float)) and math.isfinite(budget)) or budget <= 0:
        raise PlanError(f"--budget: {budget:g} GPU hours; a plan needs a budget above 0")
    if not 0 < alpha < 0.5 or not 0 < target < 1:
        raise PlanError(f"--alpha {alpha:g}, --power {target:g}: alpha in (0, 0.5), power in (0, 1)")
    if min_seeds < 2 or min_seeds > MAX_SEEDS:
        raise PlanError(f"--min-seeds: {min_seeds}; a test needs 2 seeds an arm, the planner plans up to {MAX_SEEDS}")
    catalog = list(claims_lib.load() if catalog is None else catalog)
    by_id = {c.id: c for c in catalog}
    if claim_ids:
        unknown = [i for i in claim_ids if i not in by_id]
        if unknown:
            raise PlanError(f"--claims: {unknown[0]!r} is not a claim of config/claims.yaml"
                            f"{checks.nearest(unknown[0], by_id)}")
        catalog = [by_id[i] for i in claim_ids]
    raw, words = departed(paper_raw(), allow or {})
    cfg = checks.read(copy.deepcopy(raw))
    a100 = budget * GPUS[gpu]
    arms = sorted({a for c in catalog for a in c.arms} | {Arm("main", c.model, "oracle-vicurl") for c in catalog
                                                           if _needs_probes(c)}, key=str)
    P = prices(cfg, arms)
    cands = []
    decidable = []
    for c in catalog:
        if c.contradicted:
            cands.append(Candidate(c, "undecidable", c.contradicted))
            continue
        n = _needed(c, alpha, target, min_seeds)
        if n is None:
            mde = stats.smallest_detectable(c.spread_a, c.spread_b, MAX_SEEDS, alpha, target)
            cands.append(Candidate(c, "undecidable", f"{MAX_SEEDS} seeds an arm detect {_fmt(mde, c)} with power "
                                   f"{target:.0%}, the paper's gap is {_fmt(c.gap, c)}: no budget up to the paper's decides it"))
            continue
        decidable.append(c)
    have = dict(have or {})
    chosen, seeds, extra = choose(decidable, P, a100, alpha, target, min_seeds, have)
    if not chosen:
        cheapest = min((_cost_alone(c, _needed(c, alpha, target, min_seeds), P, have), c.id) for c in decidable) \
            if decidable else None
        raise PlanError(f"--budget {budget:g} {gpu} hours ({a100:,.0f} A100 hours) decides no claim"
                        + (f": the cheapest, {cheapest[1]}, needs {cheapest[0] / GPUS[gpu]:,.0f} {gpu} hours alone"
                           if cheapest else ": none of the claims asked for is decidable"))
    m = max(1, len(chosen))
    for c in decidable:
        if c in chosen:
            n = min(seeds[g] for g in _claim_groups(c)) if _claim_groups(c) else chosen[c]
            cands.append(_powered(Candidate(c, "chosen", seeds=n), alpha, m, target))
        else:
            n = _needed(c, alpha / (m + 1), target, min_seeds) or _needed(c, alpha, target, min_seeds)
            alone = _cost_alone(c, n, P, have)
            cands.append(_powered(Candidate(c, "unaffordable", seeds=n, alone=alone,
                                            why=f"needs {n} seeds an arm: {alone:,.0f} A100 hours alone"),
                                  alpha, m + 1, target))
    order = {c.id: i for i, c in enumerate(catalog)}
    cands.sort(key=lambda k: order[k.claim.id])
    arm_groups: dict[Group, list[Arm]] = {}
    for a in sorted(extra.get("arms", {}), key=str):
        arm_groups.setdefault(group_of(a), []).append(a)
    plan = Plan(budget, gpu, a100, alpha, target, cands, seeds, arm_groups, extra.get("probed", {}), words)
    plan.config = write_config(plan, raw, name, prereg)
    checked = checks.read(copy.deepcopy(plan.config))
    jobs = cost.jobs(checked)
    plan.cost = cost.gpu_hours(jobs)
    plan.new_cost = cost.gpu_hours([j for j in jobs if not _ran(j, plan, have)])
    for k in plan.candidates:
        if k.status == "chosen":
            k.hours = _cost_alone(k.claim, k.seeds, P, have)
    return plan


def _ran(job: cost.Job, plan: Plan, have: Mapping[Group, int]) -> bool:
    """Whether a job of the written config ran in an earlier stage: a seed below those its group had (the Base
    evaluations: below the most any group of the model had; a model's offline statistics: any seed)."""
    names = {v: g for g, v in study_names(list(plan.arms)).items()}
    if job.study == runs_lib.BASE:
        return job.seed < max((n for g, n in have.items() if g.model == job.model), default=0)
    if job.rule == "prompt_stats":
        return any(n for g, n in have.items() if g.model == job.model)
    g = names.get(job.study)
    return g is not None and job.seed is not None and job.seed < have.get(g, 0)


def _fmt(x: float, c: Claim) -> str:
    return f"ratio {math.exp(x):.2f}" if c.statistic.startswith("log_") else f"{100 * x:+.1f} pp"


def _powered(k: Candidate, alpha: float, m: int, target: float) -> Candidate:
    c, n = k.claim, k.seeds
    k.power = stats.claim_power(c.kind, c.gap, c.gap, c.spread_a, c.spread_b, n, alpha, c.margin)
    k.power_adjusted = stats.claim_power(c.kind, c.gap, c.gap, c.spread_a, c.spread_b, n, alpha / m, c.margin)
    k.power_refute = stats.refute_power(c.kind, c.gap, c.spread_a, c.spread_b, n, alpha, c.margin)
    k.detectable = stats.smallest_detectable(c.spread_a, c.spread_b, n, alpha / m, target)
    return k


def _cost_alone(c: Claim, n: int, P: Prices, have: Mapping[Group, int] | None = None) -> float:
    """A claim's arms (with the runs they continue, their statistics and probes) for ``n`` seeds, beyond the
    seeds ``have`` says each group ran already."""
    have = have or {}
    arms = {a for a in c.arms if not a.is_base}
    arms |= {P.source[a] for a in arms if a in P.source}
    hours = sum(max(0, n - have.get(group_of(a), 0)) * P.arm.get(a, 0.0) for a in arms)
    hours += sum(max(0, n - have.get(g, 0)) * P.base.get(g.model, 0.0) for g in {group_of(a) for a in arms})
    hours += sum(P.stats_job.get(P.needs_stats[a], 0.0) for a in arms if a in P.needs_stats)
    if _needs_probes(c):
        hours += n * P.probes.get(c.model, 0.0)
    return hours


# ---------------------------------------------------------------- the config a plan writes


def study_names(groups: Sequence[Group]) -> dict[Group, str]:
    """Each group's study in the written config: the paper's study and the model (``main_qwen_math_1p5b``), the
    same in every plan, so that a second stage's config continues the first's runs."""
    return {g: f"{g.study}_{safe(g.model)}" for g in groups}


def write_config(plan: Plan, raw: Mapping[str, Any], name: str, prereg: str) -> dict[str, Any]:
    """The whole config that runs exactly the plan: the paper's (with the departures), its studies cut to the
    plan's groups, each with the arms and seeds the plan gives it, the probes of the variance claims' runs, the
    default tables of those studies, and the findings reading the plan's pre-registration."""
    cfg = copy.deepcopy(dict(raw))
    cfg["scenario"] = name
    names = study_names(list(plan.arms))
    studies = {}
    for g, arms in plan.arms.items():
        src = copy.deepcopy(raw["studies"][g.study])
        src["models"] = [g.model]
        settings: dict[str, list[str]] = {}
        for a in arms:
            settings.setdefault(a.reward, []).append(a.curriculum)
        src["settings"] = settings
        src["seeds"] = list(range(plan.groups[g]))
        if src.get("continues"):
            source = Group(src["continues"], g.model)
            if source in names:
                src["continues"] = names[source]
            else:
                src.pop("continues")
        studies[names[g]] = src
    cfg["studies"] = studies
    cfg.pop("tables", None)  # the default tables of the plan's studies
    blocks = []
    for model, n in sorted(plan.probed.items()):
        g = Group("main", model)
        block = {k: v for k, v in (raw.get("probes") or {}).items() if k not in ("studies", "models", "seeds")}
        blocks.append({**block, "studies": [names[g]], "models": [model], "rewards": ["oracle"],
                       "curricula": ["vicurl"], "seeds": list(range(n))})
    cfg["probes"] = blocks or {}
    cfg["findings"] = {"claims": prereg}
    used = {m for s in studies.values() for m in s["models"]}
    cfg["models"] = {m: v for m, v in raw["models"].items() if m in used}
    sets = {s["train_set"] for s in studies.values()} | {b for s in studies.values() for b in s["benchmarks"]}
    cfg["datasets"] = {d: v for d, v in raw["datasets"].items() if d in sets}
    if cfg.get("verl", {}).get("models"):
        cfg["verl"]["models"] = {m: v for m, v in cfg["verl"]["models"].items() if m in used}
    return cfg


def preregistration(plan: Plan, config_text: str) -> dict[str, Any]:
    """What the plan commits to before any run: the confirmatory claims (their arms as the written config names
    them), the rule, alpha and power, the departures, and the written config's hash (its text's sha256)."""
    names = study_names(list(plan.arms))

    def arm(a: Arm | None):
        if a is None:
            return None
        if a.is_base:
            return {"study": "base", "model": a.model, "setting": "base"}
        return {"study": names[group_of(a)], "model": a.model, "setting": a.setting, "paper_study": a.study}

    return {
        "rule": RULE, "alpha": plan.alpha, "power": plan.target,
        "config_sha256": hashlib.sha256(config_text.encode()).hexdigest(),
        "departures": list(plan.departures),
        "claims": [{"id": k.claim.id, "words": k.claim.words, "type": k.claim.kind, "collapse": k.claim.collapse,
                    "side": k.claim.side, "gap": k.claim.gap, "margin": k.claim.margin, "statistic": k.claim.statistic,
                    "metric": k.claim.metric, "estimator": k.claim.estimator, "paper": k.claim.paper_text,
                    "seeds": k.seeds, "a": arm(k.claim.a), "b": arm(k.claim.b)} for k in plan.chosen],
    }
