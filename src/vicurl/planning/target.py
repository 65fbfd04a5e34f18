"""One Snakemake target's plan, on one screen: what it builds and what it costs.

Snakemake's own dry run of the target (the real DAG: the runs it borrows from other studies, every
evaluation of them, what is done already left out) gives its jobs; the cost model
(`vicurl.planning.cost`) prices each of them by its rule and wildcards. The plan counts the jobs per
rule, those that a cluster profile sends to the cluster (every rule but the workflow's local rules),
and the estimated A100 hours of the GPU jobs, split into the target's own studies and what it borrows.
``python -m vicurl.status TARGET --configfile ...`` prints it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from vicurl.planning import cost

_JOB = re.compile(r"^(local)?rule (\w+):\n((?:    .*\n)+)", re.M)


@dataclass(frozen=True)
class Planned:
    rule: str
    local: bool
    wildcards: Mapping[str, str]

    @property
    def key(self) -> tuple:
        """The cost model's key of the job (``cost.Job.key``)."""
        w = self.wildcards
        if self.rule == "prompt_stats":
            return (self.rule, w.get("model"), w.get("dataset"))
        seed = int(w["seed"]) if "seed" in w else None
        step = int(w["step"]) if "step" in w else None
        return (self.rule, w.get("study", ""), w.get("model", ""), w.get("setting", ""), seed, step)


def parse_dry_run(text: str, local: set[str] | None = None) -> list[Planned]:
    """Every job of a Snakemake dry run's output (rule, whether it is one of the ``local`` rules, wildcards)."""
    local = local_rules() if local is None else local
    out = []
    for m in _JOB.finditer(text):
        w = re.search(r"^    wildcards: (.*)$", m.group(3), re.M)
        wildcards = dict(kv.split("=", 1) for kv in w.group(1).split(", ")) if w else {}
        rule = m.group(2)
        out.append(Planned(rule, rule in local or rule.startswith(tuple(p for p in local if p.endswith("_"))),
                           wildcards))
    return out


REPO = Path(__file__).resolve().parents[3]


def local_rules(repo: Path = REPO) -> set[str]:
    """The rules Snakemake runs where it runs, never on a cluster: those of the workflow's ``localrules:``
    directives, and the name prefix (``study_``, ``table_``) of the rules made in a loop with ``localrule: True``
    (a Snakemake dry run does not say which jobs are local; tests/workflow/test_local_rules.py checks these
    against the workflow's own)."""
    out: set[str] = set()
    for f in [repo / "Snakefile", *sorted((repo / "rules").glob("*.smk"))]:
        text = f.read_text()
        for block in re.finditer(r"^( *)localrules:\n((?:\1    \w+,\n)+)", text, re.M):  # indented: under an if
            out |= set(re.findall(r"(\w+),", block.group(2)))
        for rule in re.finditer(r'name:\s*\n\s*f"(\w+_)\{\w+\}"\n(?:.*\n)*?\s*localrule: True', text):
            out.add(rule.group(1))
    return out


class DryRunFailed(RuntimeError):
    pass


def dry_run(targets: Sequence[str], configfiles: Sequence[str | Path], config_args: Sequence[str] = (),
            workdir: str | Path = ".", snakefile: str | Path | None = None) -> list[Planned]:
    """Snakemake's dry run of ``targets`` with these configs, in ``workdir``: its jobs (``parse_dry_run``)."""
    snakefile = snakefile or Path(__file__).resolve().parents[3] / "Snakefile"
    cmd = [sys.executable, "-m", "snakemake", "-n", *targets, "-s", str(snakefile)]
    if configfiles:
        cmd += ["--configfile", *map(str, configfiles)]
    if config_args:
        cmd += ["--config", *config_args]
    out = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if out.returncode != 0:
        errors = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("Error")]
        raise DryRunFailed(errors[0] if errors else (out.stdout + out.stderr).strip().splitlines()[-1])
    return parse_dry_run(out.stdout)


@dataclass
class RulePlan:
    jobs: int = 0
    cluster: int = 0  # jobs a cluster profile sends to the cluster (the rule is not local)
    a100_hours: float = 0.0
    own_hours: float = 0.0  # of these, the jobs of the target's own studies
    unpriced: int = 0  # GPU jobs the cost model has no price for


@dataclass
class TargetPlan:
    targets: list[str]
    studies: list[str]  # the target's own studies ([] where it names none)
    rules: dict[str, RulePlan] = field(default_factory=dict)
    borrowed: dict[str, float] = field(default_factory=dict)  # A100 hours of jobs of other studies, by study
    estimate_missing: str = ""  # why some GPU jobs are not priced (an unknown model or set), else ""

    @property
    def a100_hours(self) -> float:
        return sum(r.a100_hours for r in self.rules.values())


def plan(targets: Sequence[str], cfg: Mapping[str, Any], jobs: Sequence[Planned], workdir: str | Path = ".",
         A: cost.Assumptions | None = None) -> TargetPlan:
    """The target's jobs per rule, priced (``cost.jobs`` of the same config)."""
    own = [t[len("study_"):] for t in targets if t.startswith("study_")]
    result = TargetPlan(list(targets), own)
    prices = {j.key: j for j in cost.jobs(cfg, A, workdir=workdir)}
    result.estimate_missing = "; ".join(cost.unknown(cfg, workdir).values())
    for job in jobs:
        r = result.rules.setdefault(job.rule, RulePlan())
        r.jobs += 1
        r.cluster += not job.local
        if job.rule not in cost.GPU_RULES:
            continue
        priced = prices.get(job.key)
        if priced is None:
            r.unpriced += 1
            continue
        r.a100_hours += priced.gpu_hours
        study = job.wildcards.get("study", "")
        if study in own:
            r.own_hours += priced.gpu_hours
        else:
            result.borrowed[study or "(no study: prompt_stats)"] = \
                result.borrowed.get(study or "(no study: prompt_stats)", 0.0) + priced.gpu_hours
    return result


def render(p: TargetPlan) -> list[str]:
    """The plan as lines of text: a table of rules, then the totals."""
    lines = [f"{' '.join(p.targets)}: {sum(r.jobs for r in p.rules.values()):,} jobs to run, "
             f"{sum(r.cluster for r in p.rules.values()):,} of them sent to the cluster by a cluster profile "
             f"(the others run where Snakemake runs)", ""]
    width = max([22, *(len(name) + 2 for name in p.rules)])
    lines.append(f"{'rule':<{width}}{'jobs':>7}{'cluster':>9}{'A100 h':>11}")
    for name, r in sorted(p.rules.items(), key=lambda kv: (-kv[1].a100_hours, kv[0])):
        hours = f"{r.a100_hours:,.0f}" if r.a100_hours else ("?" if r.unpriced else "-")
        lines.append(f"{name:<{width}}{r.jobs:>7,}{r.cluster:>9,}{hours:>11}")
    lines.append("")
    own = sum(r.own_hours for r in p.rules.values())
    lines.append(f"estimated A100 hours of everything it builds: {p.a100_hours:,.0f}"
                 + (f" ({own:,.0f} of its own studies' jobs, {p.a100_hours - own:,.0f} borrowed)" if p.studies else ""))
    if p.borrowed and p.studies:
        lines.append("borrowed (runs and evaluations of other studies it reads): "
                     + ", ".join(f"{s} {h:,.0f}" for s, h in sorted(p.borrowed.items(), key=lambda kv: -kv[1])))
    unpriced = sum(r.unpriced for r in p.rules.values())
    if unpriced:
        lines.append(f"{unpriced} GPU job(s) not priced" + (f": {p.estimate_missing}" if p.estimate_missing else ""))
    lines.append("(an estimate: docs/paper.md, \"GPU time at paper scale\", states its assumptions)")
    return lines
