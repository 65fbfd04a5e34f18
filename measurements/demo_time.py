"""Where the demo's time goes: the measured total, and the share of it that is fixed cost.

Runs the demo (``snakemake all --cores N``) in a fresh clone of this repository's HEAD, with every
job recording at exit how long its process lived and which modules it imported, in order
(``VICURL_IMPORTS_LOG``, ``vicurl.runtime.workflow.setup``). Then prints:

- the total: the wall time of the Snakemake run;
- per rule: its jobs, their summed process time, and the fixed cost of one job: a fresh
  interpreter importing exactly the modules such a job imported (Python's start-up, the
  Snakemake preamble, pandas, torch, transformers, ...; the median of ``--repeats`` replays);
- the fixed cost in all (jobs x fixed cost per rule) as a share of the jobs' time and of the
  machine's time (total x cores).

A job's work is the rest of its time: sampling, training, grading, plotting. The replay pays
what the job paid before doing anything of its own, so the share is what fewer, larger jobs or
lighter imports could save at most.

    .venv/bin/python measurements/demo_time.py                    # 2 cores, the demo config
    .venv/bin/python measurements/demo_time.py --cores 4 --keep /tmp/demo-run
    .venv/bin/python measurements/demo_time.py --workdir /tmp/demo-run   # analyse a kept run again
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from vicurl.runtime.workflow import IMPORTS_LOG

REPO = Path(__file__).resolve().parents[1]

LOG_DIR = ".imports"  # in the run's working directory

REPLAY = """
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:  # a module that only its parent can import (or a platform-specific one)
        pass
"""


def run_demo(workdir: Path, cores: int, python: str) -> float:
    """Clone HEAD into ``workdir`` and run the demo there; returns its wall time in seconds."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(workdir)], check=True)
    env = {**os.environ, IMPORTS_LOG: str(workdir / LOG_DIR)}
    t0 = time.perf_counter()
    subprocess.run([python, "-m", "snakemake", "all", "--cores", str(cores)], cwd=workdir, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    (workdir / LOG_DIR / "total.json").write_text(json.dumps({"seconds": seconds, "cores": cores}))
    return seconds


def replay_seconds(modules: list[str], python: str, repeats: int) -> float:
    """The median wall time of a fresh interpreter importing ``modules`` in order."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", REPLAY, *modules], check=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def analyse(workdir: Path, python: str, repeats: int) -> None:
    folder = workdir / LOG_DIR
    total = json.loads((folder / "total.json").read_text())
    jobs = [json.loads(p.read_text()) for p in sorted(folder.glob("*-*.json"))]
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for j in jobs:
        by_rule[j["rule"]].append(j)
    print(f"demo: {total['seconds']:.1f} s wall ({total['seconds'] / 60:.2f} min) on {total['cores']} cores, "
          f"{len(jobs)} jobs that ran a script")
    print(f"{'rule':22s} {'jobs':>5s} {'job s':>8s} {'fixed s/job':>12s} {'fixed s':>8s}")
    fixed_total = job_total = 0.0
    for rule, js in sorted(by_rule.items(), key=lambda kv: -sum(j["seconds"] for j in kv[1])):
        # the modules of the job that imported the most: every job of a rule runs the same script
        modules = max((j["modules"] for j in js), key=len)
        fixed = replay_seconds(modules, python, repeats)
        secs = sum(j["seconds"] for j in js)
        fixed_total += fixed * len(js)
        job_total += secs
        print(f"{rule:22s} {len(js):5d} {secs:8.1f} {fixed:12.2f} {fixed * len(js):8.1f}")
    machine = total["seconds"] * total["cores"]
    print(f"{'all':22s} {len(jobs):5d} {job_total:8.1f} {'':12s} {fixed_total:8.1f}")
    print(f"fixed cost: {fixed_total:.0f} s = {100 * fixed_total / job_total:.0f} % of the jobs' time, "
          f"{100 * fixed_total / machine:.0f} % of the machine's ({total['seconds']:.0f} s x {total['cores']} cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="replays per rule (the median is taken)")
    ap.add_argument("--keep", type=Path, help="run the demo in this (new) folder and keep it")
    ap.add_argument("--workdir", type=Path, help="analyse an earlier run kept with --keep; run nothing")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    if a.workdir:
        analyse(a.workdir, a.python, a.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        workdir = a.keep or Path(tmp) / "demo"
        run_demo(workdir, a.cores, a.python)
        analyse(workdir, a.python, a.repeats)


if __name__ == "__main__":
    main()
