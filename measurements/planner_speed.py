"""How long the study planner takes on the paper's config: ``python -m vicurl.plan`` for 500, 5,000 and
20,000 A100 hours (and any --budget given), each in a fresh process, its wall and CPU time, the claims it
chose and its cost. The target: under 10 s each on 2 cores.

    .venv/bin/python measurements/planner_speed.py [--budget 500 5000 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, nargs="+", default=[500, 5000, 20000])
    args = ap.parse_args()
    print(f"{cpu_name()}, {os.cpu_count()} cores")
    print(f"{'budget':>8} {'wall s':>8} {'CPU s':>7}  result")
    for budget in args.budget:
        with tempfile.TemporaryDirectory() as tmp:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "vicurl.plan", "--budget", f"{budget:g}", "--out",
                                  str(Path(tmp) / "plan")], cwd=REPO, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            result = (out.stdout or out.stderr).strip().splitlines()[-1]
            if out.returncode == 0:
                md = (Path(tmp) / "plan" / "plan.md").read_text().splitlines()
                result = next(ln for ln in md if ln.startswith("- Cost")) + " " + result.split(": ", 1)[1]
            print(f"{budget:>8,.0f} {wall:>8.1f} {cpu:>7.1f}  {result}")


if __name__ == "__main__":
    main()
