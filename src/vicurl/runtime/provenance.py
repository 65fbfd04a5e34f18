"""Provenance of a training run: what produced it, written beside its outputs (``provenance.json``).

Records the run's own settings (the train rule's resolved ``train_settings``), the full resolved
workflow config (after schema defaults and every ``--configfile`` merge), the versions of the
packages that shape the numbers, the git commit of the workflow (``"unknown"`` outside a git
checkout, plus whether the checkout had uncommitted changes), and where and when it ran.
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

#: distributions whose versions are recorded (None when not installed in the job's environment)
PACKAGES = ("vicurl", "torch", "transformers", "verl", "vllm", "tokenizers", "numpy", "datasets",
            "math-verify", "sympy", "snakemake")


def package_versions(packages=PACKAGES) -> dict[str, str | None]:
    out = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def cpu_info() -> dict[str, Any]:
    """The CPU and the instruction set torch's kernels use on it (``ATEN_CPU_CAPABILITY`` overrides it):
    the demo's numbers move with the latter (docs/demo.md, "Across CPUs")."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), None)
    except OSError:
        model = None
    try:
        import torch

        kernels = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        kernels = None
    return {"model": model or platform.processor() or None, "torch_kernels": kernels}


def git_state(path: str | Path) -> dict[str, Any]:
    """The commit checked out at ``path`` and whether tracked files differ from it."""
    def git(*args: str) -> str | None:
        try:
            # a hang guard only (a stuck network file system): a busy node's slow git must not record "unknown"
            res = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return {"commit": "unknown", "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _plain(obj: Any) -> Any:
    """Config objects (Snakemake's Namedlist / dict subclasses) as plain JSON values."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def provenance(run: Mapping[str, Any], settings: Mapping[str, Any], config: Mapping[str, Any],
               repo: str | Path, engine: str, data: Mapping[str, Any] | None = None,
               prompt: Mapping[str, Any] | None = None, model: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``data``: what the engine reports of the run's inputs (either engine: prompts dropped as too
    long, `vicurl.data.long_prompts`); ``prompt``: one training prompt as the model saw it (``prompts.rendered_example``);
    ``model``: the initial policy's folder and, fetched from the Hub, its id and commit (`vicurl.models.fetch`)."""
    return {
        "run": _plain(run),
        "engine": engine,
        "model": _plain(model or {}),
        "settings": _plain(settings),
        "data": _plain(data or {}),
        "prompt": _plain(prompt or {}),
        "config": _plain(config),
        "packages": package_versions(),
        "git": git_state(repo),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "host": socket.gethostname(),
        "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
