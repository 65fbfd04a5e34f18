"""What Snakemake was asked to build, and whether that asks for reports only.

Snakemake parses the Snakefile before it hands the DAG its targets, so the workflow reads them from
Snakemake's own command line with Snakemake's own parser (``requested``). Report targets (``tables``,
``table_<name>``, ``figures``, ``report`` or files under the report folder) only regenerate reports from
results that exist: the Snakefile then includes the report rules alone, so no training, generation or
grading job can be planned, and results that are missing are named in one line instead.
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

REPORT_TARGETS = ("tables", "figures", "report")
REPORT_PREFIXES = ("table_",)


def requested(argv: Sequence[str] | None = None) -> list[str] | None:
    """The targets on this process's Snakemake command line ([] for none: the default target), or None where
    the process is not Snakemake's command line (Snakemake's API, a test)."""
    args = _command_line(argv)
    if args is None:
        return None
    if getattr(args, "target_jobs", None):  # a job's process on a cluster node: it names jobs, not targets
        return None
    return [str(t) for t in args.targets or []]


def _command_line(argv: Sequence[str] | None = None):
    argv = list(sys.argv if argv is None else argv)
    parts = os.path.normpath(argv[0]).split(os.sep) if argv else []
    if parts[-1:] != ["snakemake"] and parts[-2:] != ["snakemake", "__main__.py"]:
        return None
    from snakemake.cli import get_argument_parser

    try:
        return get_argument_parser().parse_known_args(argv[1:])[0]
    except SystemExit:  # a command line Snakemake itself refuses: it says so
        return None


PLACEHOLDER = "YOUR_"  # the profiles' values to fill in (slurm-a100/config.yaml)


def profile_placeholders(argv: Sequence[str] | None = None) -> list[str]:
    """``<profile file>: <key> is <value>`` for every value of the profiles on the command line that is still a
    placeholder (``YOUR_...``): a real run stops on them before its first job."""
    import yaml

    args = _command_line(argv)
    out = []
    for name in (getattr(args, "profile", None) or []) if args else []:
        folder = Path(name) if Path(name).is_dir() else Path.home() / ".config" / "snakemake" / str(name)
        for file in (folder / "profile.yaml", folder / "config.yaml"):
            if file.is_file():
                for key, value in _strings(yaml.safe_load(file.read_text()) or {}):
                    if value.startswith(PLACEHOLDER):
                        out.append(f"{file}: {key} is {value}")
                break
    return out


def _strings(tree, prefix: str = ""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _strings(v, f"{prefix}{k}" if not prefix else f"{prefix}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _strings(v, f"{prefix}[{i}]")
    elif isinstance(tree, str):
        yield prefix, tree


def is_report_target(target: str, report_dir: str) -> bool:
    if target in REPORT_TARGETS or target.startswith(REPORT_PREFIXES):
        return True
    path = os.path.normpath(target)
    return path == os.path.normpath(report_dir) or path.startswith(os.path.normpath(report_dir) + os.sep)


def report_only(targets: Sequence[str] | None, report_dir: str) -> bool:
    """Whether every target is a report's: the run then plans report jobs alone."""
    return bool(targets) and all(is_report_target(t, report_dir) for t in targets)


def looks_like_a_file(target: str) -> bool:
    return os.sep in target or "." in target


def unknown_target(targets: Iterable[str], known: Sequence[str]) -> str | None:
    """One line for the first target that is neither one of ``known`` nor a file: the nearest and every known
    target; None when all are known."""
    for t in targets:
        if t in known or looks_like_a_file(t):
            continue
        near = difflib.get_close_matches(t, known, n=2, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
        return f"unknown target {t!r}: {hint}the targets are {', '.join(known)} (and a file's path)"
    return None


def nearest(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or nothing when none is close."""
    near = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""
