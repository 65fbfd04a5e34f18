"""Where a test suite's CPU goes: the machine's busy CPU-seconds during each test (a pytest plugin).

CI runs the two suites side by side on 2 cores, busy throughout, so its length follows the CPU-seconds the
tests spend more than any test's own wall time. A test's processes (Snakemake's jobs, Ray's workers, vLLM's
engines, a SLURM job run by slurmd) are not all the test process's children, so the figure is the machine's:
the busy time in /proc/stat (all but idle and I/O wait) from a test's setup to its teardown. A module's
fixture counts to its first test. Run one suite alone, on a machine otherwise idle:

    PYTHONPATH=measurements .venv/bin/python -m pytest --ignore=tests/gpu_path -p suite_cpu
    PYTHONPATH=measurements .venv-vllm/bin/python -m pytest tests/gpu_path -p suite_cpu

At the end it prints the tests that took most (``SUITE_CPU_TOP``, 15) and the suite's total; with
``SUITE_CPU_OUT=<file>`` every test's row is written there too (tab-separated: CPU-s, wall s, test).
"""

from __future__ import annotations

import os
import time

import pytest

ROWS: list[tuple[float, float, str]] = []


def busy_seconds() -> float:
    """The machine's busy CPU time since boot: /proc/stat's first line less idle and I/O wait."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = busy_seconds(), time.time()
    yield
    ROWS.append((busy_seconds() - cpu, time.time() - wall, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    if os.environ.get("SUITE_CPU_OUT"):
        with open(os.environ["SUITE_CPU_OUT"], "w") as f:
            f.writelines(f"{cpu:.1f}\t{wall:.1f}\t{name}\n" for cpu, wall, name in ROWS)
    write = terminalreporter.write_line
    write(f"the machine's busy CPU-seconds per test ({os.cpu_count()} CPUs):")
    for cpu, wall, name in sorted(ROWS, reverse=True)[: int(os.environ.get("SUITE_CPU_TOP", 15))]:
        write(f"{cpu:8.1f} CPU-s {wall:7.1f} s  {name}")
    cpu, wall = sum(r[0] for r in ROWS), sum(r[1] for r in ROWS)
    write(f"{cpu:8.1f} CPU-s {wall:7.1f} s  all {len(ROWS)} tests ({cpu / max(wall, 1e-9):.2f} CPUs busy on average)")
