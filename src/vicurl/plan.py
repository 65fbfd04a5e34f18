"""Which of the paper's claims a budget decides, with how many seeds, and the config that runs exactly that.

    python -m vicurl.plan --budget 5000 --out plans/5k               # A100 40GB hours
        [--gpu a100-40gb|a100-80gb|h100|h200] [--power 0.8] [--alpha 0.05] [--claims ID,...]
        [--min-seeds 2] [--allow total_steps=200,eval_every=100,subset=500]
    python -m vicurl.plan --budget 3000 --from-results results/5k --out plans/5k-more   # a second stage

writes into --out:

  plan.md, plan.csv         per claim: chosen (its seeds an arm, power to confirm and to refute, after Holm,
                            the smallest gap detectable, its GPU hours), unaffordable (the budget it needs) or
                            undecidable (why)
  config.yaml               the config that runs exactly the plan: snakemake --profile slurm-a100 all
                            --configfile <out>/config.yaml
  preregistration.yaml      the claims, the rule, alpha, power, the departures and config.yaml's sha256: the
                            findings rule reads it

A second stage (``--from-results results/NAME``, the first stage's results with its findings made:
snakemake report) takes the spread observed (pooled over the arms of each model), says which claims are
decided, and plans the seeds its undecided claims need (or those --claims names) beside those run, within
--budget (what is left). The planner:
`vicurl.planning.planner`; the claims: config/claims.yaml; how to read a plan: docs/planning.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd
import yaml

from vicurl.planning import claims as claims_lib
from vicurl.planning import planner
from vicurl.planning.planner import GPUS, Group, PlanError
from vicurl.runtime.errors import ConfigError

FILES = ("plan.md", "plan.csv", "config.yaml", "preregistration.yaml")


# ---------------------------------------------------------------- a second stage: what the results say


def observed(results: Path, catalog: Sequence[claims_lib.Claim]):
    """From a first stage's findings (``<results>/report/findings.csv``): the verdict of each claim it tested,
    the seeds each group has, and the spread of each model's statistics pooled over its arms ((model, "pp" or
    "log") -> the pooled standard deviation: sqrt of the sum of (n - 1) s^2 over the sum of (n - 1))."""
    path = results / "report" / "findings.csv"
    if not path.exists():
        raise PlanError(f"--from-results: {path} does not exist (make the first stage's findings: snakemake report "
                        f"--configfile <its config.yaml>)")
    table = pd.read_csv(path, keep_default_na=False)
    by_id = {c.id: c for c in catalog}
    unknown = [k for k in table["key"] if k not in by_id]
    if unknown:
        raise PlanError(f"--from-results: {path}: {unknown[0]!r} is not a claim of config/claims.yaml (a study's "
                        f"findings, not a plan's?)")
    sums: dict[tuple[str, str], list[float]] = {}
    have: dict[Group, int] = {}
    verdicts = {}
    for row in table.itertuples():
        c = by_id[row.key]
        verdicts[c.id] = row.verdict
        kind = "log" if c.statistic.startswith("log_") else "pp"
        for arm, text in ((c.a, row.per_seed), (c.b, row.per_seed_b)):
            if arm is None or arm.is_base:
                continue
            v = pd.to_numeric(pd.Series(str(text).split()), errors="coerce").dropna()
            have[Group(arm.study, arm.model)] = max(have.get(Group(arm.study, arm.model), 0), len(v))
            if len(v) >= 2:
                acc = sums.setdefault((c.model, kind), [0.0, 0.0])
                acc[0] += (len(v) - 1) * float(v.var(ddof=1))
                acc[1] += len(v) - 1
    spreads = {k: math.sqrt(s / n) for k, (s, n) in sums.items() if n}
    return verdicts, have, spreads


# ---------------------------------------------------------------- writing the plan


def _pp(x: float, log: bool) -> str:
    if not math.isfinite(x):
        return "--"
    return f"ratio {math.exp(x):.2f}" if log else f"{100 * x:+.1f} pp"


def rows(plan: planner.Plan, decided: dict[str, str]) -> pd.DataFrame:
    """plan.csv: one row per claim."""
    out = []
    factor = GPUS[plan.gpu]
    for k in plan.candidates:
        c = k.claim
        log = c.statistic.startswith("log_")
        out.append({
            "claim": c.id, "status": k.status, "words": c.words, "type": c.kind, "paper": c.paper_text,
            "paper_gap": c.gap, "margin": c.margin, "spread_a": c.spread_a, "spread_b": c.spread_b,
            "spread_source": c.spread_rule, "seeds_per_arm": k.seeds, "power_confirm": k.power,
            "power_refute": k.power_refute, "power_after_holm": k.power_adjusted, "smallest_detectable": k.detectable,
            "gpu_hours": k.hours / factor if math.isfinite(k.hours) else math.nan,
            "budget_needed": k.alone / factor if math.isfinite(k.alone) else math.nan,
            "why": k.why, "first_stage_verdict": decided.get(c.id, ""), "log_scale": log,
        })
    return pd.DataFrame(out)


def markdown(plan: planner.Plan, table: pd.DataFrame, out: Path, decided: dict[str, str]) -> str:
    gpu, factor = plan.gpu, GPUS[plan.gpu]
    groups = ", ".join(f"{g.study}/{g.model} x {n}" for g, n in plan.groups.items())
    lines = [
        f"# A study plan: {plan.budget_hours:,.0f} {gpu} hours", "",
        f"- Budget: {plan.budget_hours:,.0f} {gpu} hours = {plan.a100_budget:,.0f} A100 40GB hours "
        f"(x {factor:g}, an assumed ratio: docs/planning.md).",
        f"- Cost of the written config: {plan.cost / factor:,.0f} {gpu} hours ({plan.cost:,.0f} A100 hours, the "
        f"cost model's total)" + (f"; {plan.new_cost / factor:,.0f} of them not run yet" if decided else "") + ".",
        f"- Rule: {planner.RULE}; alpha {plan.alpha:g}, power {plan.target:.0%} at the paper's gap.",
        f"- Seeds per group: {groups or 'none'}.",
        f"- Run it: `snakemake --profile slurm-a100 all --configfile {out / 'config.yaml'}`; the findings "
        f"(results/{plan.config['scenario']}/report/findings.md) read {out / 'preregistration.yaml'}.",
    ]
    if plan.departures:
        lines += ["- Departures from the paper (also in the findings):", *[f"  - {d}" for d in plan.departures]]
    if decided:
        lines += ["", "## Decided by the first stage", "", "| Claim | Verdict |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in decided.items() if v != "inconclusive"]

    def pct(x):
        return "--" if not isinstance(x, float) or not math.isfinite(x) else f"{x:.0%}"

    chosen = table[table["status"] == "chosen"]
    lines += ["", f"## Chosen: {len(chosen)} claims", "",
              "| Claim | Paper's gap | Spread (source) | Seeds an arm | Power to confirm | after Holm | to refute "
              "| Smallest detectable | GPU hours |", "|---|---|---|---|---|---|---|---|---|"]
    for r in chosen.itertuples():
        spread = _pp(r.spread_a, r.log_scale).lstrip("+") if not r.log_scale else f"{r.spread_a:.2f} (log)"
        lines.append(f"| {r.claim} | {_pp(r.paper_gap, r.log_scale)} | {spread} ({r.spread_source}) | "
                     f"{int(r.seeds_per_arm)} | {pct(r.power_confirm)} | {pct(r.power_after_holm)} | "
                     f"{pct(r.power_refute)} | {_pp(r.smallest_detectable, r.log_scale).lstrip('+')} | "
                     f"{r.gpu_hours:,.0f} |")
    lines += ["", "A claim's GPU hours are its arms' alone; arms shared by claims are paid once in the total."]
    short = table[table["status"] == "unaffordable"]
    lines += ["", f"## Not affordable at this budget: {len(short)} claims", "",
              "| Claim | Paper's gap | Seeds an arm | Budget it needs alone |", "|---|---|---|---|"]
    lines += [f"| {r.claim} | {_pp(r.paper_gap, r.log_scale)} | {int(r.seeds_per_arm)} | {r.budget_needed:,.0f} "
              f"{gpu} hours |" for r in short.itertuples()]
    never = table[table["status"] == "undecidable"]
    lines += ["", f"## Decided by no budget up to the paper's: {len(never)} claims", "", "| Claim | Why |", "|---|---|"]
    lines += [f"| {r.claim} | {r.why} |" for r in never.itertuples()]
    return "\n".join(lines) + "\n"


def write(out: Path, files: dict[str, str]) -> None:
    """All the plan's files or none: each to a temp name first, then renamed."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = {name: out / f".{name}.tmp" for name in files}
    for name, text in files.items():
        tmp[name].write_text(text)
    for name in files:
        tmp[name].replace(out / name)


def scenario_name(out: Path) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in out.resolve().name) or "plan"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, required=True, help="GPU hours of --gpu")
    ap.add_argument("--gpu", default="a100-40gb", help=f"the GPU kind the hours are of ({', '.join(GPUS)})")
    ap.add_argument("--power", type=float, default=0.8, help="the power each chosen claim gets at the paper's gap")
    ap.add_argument("--alpha", type=float, default=0.05, help="the family-wise level (Holm across the chosen claims)")
    ap.add_argument("--claims-file", type=Path, default=claims_lib.CLAIMS, help="the claims (config/claims.yaml)")
    ap.add_argument("--claims", default="", help="only these claim ids (comma-separated; default: every claim)")
    ap.add_argument("--min-seeds", type=int, default=2, help="the fewest seeds an arm")
    ap.add_argument("--allow", default="", help="departures the plan may take: total_steps=N,eval_every=N,subset=N")
    ap.add_argument("--from-results", type=Path, help="a first stage's results folder: plan the rest")
    ap.add_argument("--out", type=Path, required=True, help="the folder the plan's files go to")
    args = ap.parse_args(argv)
    try:
        text = plan_files(args)
    except (PlanError, ConfigError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    write(args.out, text)
    table = pd.read_csv(args.out / "plan.csv")
    print(f"{args.out}: {int((table['status'] == 'chosen').sum())} claims chosen of {len(table)}; "
          f"{', '.join(FILES)}")
    return 0


def plan_files(args: argparse.Namespace) -> dict[str, str]:
    """The plan's files' texts, or a PlanError naming the option or file; nothing is written here."""
    if args.out.exists() and (args.out / "preregistration.yaml").exists():
        raise PlanError(f"--out: {args.out} holds a pre-registration already; a plan is registered once "
                        f"(another --out, or remove it)")
    if not args.claims_file.exists():
        raise PlanError(f"--claims-file: {args.claims_file} does not exist")
    catalog = claims_lib.load(args.claims_file)
    ids = [c.strip() for c in args.claims.split(",") if c.strip()]
    decided: dict[str, str] = {}
    have: dict[Group, int] = {}
    if args.from_results is not None:
        decided, have, spreads = observed(args.from_results, catalog)
        catalog = claims_lib.with_spreads(catalog, spreads, "observed: the first stage's seeds, pooled over the "
                                                            "model's arms")
        # the first stage's undecided claims, or those --claims names that it did not decide
        ids = [i for i in ids if decided.get(i, "inconclusive") == "inconclusive"] if ids else \
            [i for i, v in decided.items() if v == "inconclusive"]
        if not ids:
            raise PlanError(f"--from-results: {args.from_results} decided every claim asked for")
    if not math.isfinite(args.budget) or args.budget <= 0:
        raise PlanError(f"--budget: {args.budget:g} GPU hours; a plan needs a budget above 0")
    name = scenario_name(args.out)
    prereg_path = str(args.out / "preregistration.yaml")
    plan = planner.make(args.budget, args.gpu, args.power, args.alpha, ids or None, args.min_seeds,
                        planner.parse_allow(args.allow), catalog=catalog, name=name, prereg=prereg_path, have=have)
    config_text = ("# Written by python -m vicurl.plan (docs/planning.md); its sha256 is in preregistration.yaml\n"
                   + yaml.safe_dump(plan.config, sort_keys=False))
    prereg = planner.preregistration(plan, config_text)
    if decided:
        prereg["first_stage"] = {"results": str(args.from_results), "verdicts": decided}
    table = rows(plan, decided)
    return {
        "plan.md": markdown(plan, table, args.out, decided),
        "plan.csv": table.to_csv(index=False),
        "config.yaml": config_text,
        "preregistration.yaml": yaml.safe_dump(prereg, sort_keys=False),
    }


if __name__ == "__main__":
    raise SystemExit(main())

