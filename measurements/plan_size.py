"""The paper's plan on SLURM: jobs per rule, SLURM jobs, and the time a dry run takes.

Runs `snakemake --profile slurm-a100 -n all` (the dry run of docs/slurm.md; no cluster, no conda) in an
empty working directory, `--repeats` times, and prints:

- the jobs of the DAG per rule and in all;
- the jobs sent to SLURM: one per job, local rules (the report) excluded, and one per group job
  where a profile groups rules (`groups:`; slurm-a100 does not);
- the wall time of each dry run (planning and printing the plan), and the median.

    .venv/bin/python measurements/plan_size.py
    .venv/bin/python measurements/plan_size.py --repeats 5 --target study_main
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def job_counts(text: str) -> dict[str, int]:
    block = text.split("Job stats:", 1)[1].split("Reasons:", 1)[0] if "Job stats:" in text else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


def local_rules() -> set[str]:
    """The rules under `localrules:` in the Snakefile and rules/*.smk (run by Snakemake itself)."""
    names: set[str] = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        for block in re.findall(r"^localrules:\n((?:[ \t]+\w+,?\n)+)", path.read_text(), re.M):
            names |= set(re.findall(r"\w+", block))
    return names


def slurm_jobs(text: str) -> tuple[int, int]:
    """(group jobs, jobs outside a group and not local) in a dry run's listing: grouped jobs are
    printed indented under 'Group job ...', the others as 'rule X:' at the line start."""
    local = local_rules()
    single = [r for r in re.findall(r"^rule (\w+):$", text, re.M) if r not in local]
    return len(re.findall(r"Group job \w+", text)), len(single)


def dry_run(workdir: Path, target: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--profile", "slurm-a100", "-n", target]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode != 0:
        sys.exit(f"dry run failed:\n{out.stderr[-3000:]}")
    return seconds, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--target", default="all")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "config").mkdir()
        (work / "config" / "demo.yaml").symlink_to(REPO / "config" / "demo.yaml")  # the Snakefile's default
        runs = [dry_run(work, args.target) for _ in range(args.repeats)]
    text = runs[-1][1]
    counts = job_counts(text)
    total = counts.pop("total")
    groups, single = slurm_jobs(text)
    print(f"snakemake --profile slurm-a100 -n {args.target}")
    for rule, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {rule:<22} {n:>7,}")
    print(f"jobs in the DAG         {total:>7,}")
    grouped = f"{groups:,} group jobs + {single:,} single jobs; " if groups else ""
    print(f"jobs sent to SLURM      {groups + single:>7,}  ({grouped}local rules excluded)")
    times = [t for t, _ in runs]
    print(f"dry run wall time       {statistics.median(times):7.1f} s median of {len(times)} ({', '.join(f'{t:.1f}' for t in times)})")


if __name__ == "__main__":
    main()
