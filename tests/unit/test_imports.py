"""A rule's job imports what it uses and no more: on a CPU torch, transformers and verl cost a job
seconds before it does anything (docs/demo.md, "Time"), and the demo runs about a hundred jobs."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import REPO

SCRIPTS = REPO / "workflow_scripts"
HEAVY = ("torch", "transformers", "verl", "ray", "vllm", "matplotlib")
# the heavy libraries each script may import at its top; the others are imported where used
ALLOWED = {
    "train.py": set(),  # the engine (local or verl) is imported once the job knows which
    "generate.py": set(),  # the generator (transformers or vLLM), likewise
    "probe.py": {"torch", "transformers", "verl", "ray"},
    "build_tiny_model.py": {"torch"},
    "prompt_stats.py": {"torch", "transformers"},
    "findings.py": {"torch"},  # the probes' bootstrap (vicurl.probes.variance)
    "learning_curves.py": {"matplotlib"},
    "schedule_figure.py": {"matplotlib"},
    "variance_figures.py": {"matplotlib"},
}


def imported(modules: list[str]) -> set[str]:
    """The heavy top-level packages a fresh interpreter holds after importing ``modules``."""
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            f"print(json.dumps(sorted(h for h in {HEAVY!r} if h in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, out.stderr[-2000:]
    return set(json.loads(out.stdout))


def top_imports(script: Path) -> list[str]:
    """The modules a rule script imports at its top level (what every job of the rule pays)."""
    names = []
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name != "_checkout"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module != "__future__":
            names.append(node.module)
    return names


@pytest.mark.parametrize("script", sorted(p.name for p in SCRIPTS.glob("[!_]*.py")))
def test_a_rule_script_imports_no_heavy_library_it_does_not_use(script):
    extra = imported(top_imports(SCRIPTS / script)) - ALLOWED.get(script, set())
    assert not extra, f"workflow_scripts/{script} imports {sorted(extra)} at its top"


def test_the_cpu_generator_does_without_verl():
    """A generation job on the CPU samples with transformers; verl (and Ray under it) is the trainer's."""
    assert imported(["vicurl.evaluation.generate"]) == {"torch", "transformers"}
