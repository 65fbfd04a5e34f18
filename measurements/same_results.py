"""Whether two results folders hold the same results: a change meant to keep behaviour (a refactor) runs the
demo before and after it, and this says which files differ beyond what every run writes afresh (times, dates,
the commit, an attempt's id, a PDF's creation date). Prints each file that differs and exits 1 if any does.

    .venv/bin/python measurements/same_results.py BEFORE/results/demo AFTER/results/demo
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

import pandas as pd
import torch

FRESH_KEY = re.compile(r"time|seconds|_at$|^commit$|tokens_per_s")  # a key whose value each run writes anew
SKIPPED = ("logs", "timings", "tensorboard")  # per-run records, not results
FRESH_FILES = ("training_id", ".log")  # an attempt's random id, a log's timestamps


def kept(x):
    """``x`` without the values each run writes afresh; NaN as a string so that NaN equals NaN."""
    if isinstance(x, dict):
        return {k: kept(v) for k, v in x.items() if not FRESH_KEY.search(str(k))}
    if isinstance(x, (list, tuple)):
        return [kept(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, torch.Tensor):
        return (x.dtype, tuple(x.shape), hashlib.sha256(x.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest())
    return x


def same(a: Path, b: Path) -> bool:
    if a.read_bytes() == b.read_bytes():
        return True
    name = a.name
    if name.endswith(".pdf"):
        date = re.compile(rb"/CreationDate \(.*?\)")
        return date.sub(b"", a.read_bytes()) == date.sub(b"", b.read_bytes())
    if name.endswith(".jsonl"):
        return [kept(json.loads(x)) for x in a.read_text().splitlines()] == \
            [kept(json.loads(x)) for x in b.read_text().splitlines()]
    if name.endswith(".json"):
        return kept(json.loads(a.read_text())) == kept(json.loads(b.read_text()))
    if name.endswith(".pt"):
        return kept(torch.load(a, weights_only=False)) == kept(torch.load(b, weights_only=False))
    if name.endswith(".csv"):
        x, y = pd.read_csv(a), pd.read_csv(b)
        fresh = [c for c in x.columns if FRESH_KEY.search(c)]
        return x.drop(columns=fresh).equals(y.drop(columns=fresh, errors="ignore"))
    return False


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            and p.relative_to(root).parts[0] not in SKIPPED and not p.name.endswith(FRESH_FILES)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    a, b = files(args.before), files(args.after)
    only = sorted(a ^ b)
    differ = sorted(rel for rel in a & b if not same(args.before / rel, args.after / rel))
    for rel in only:
        print(f"only in {'before' if rel in a else 'after'}: {rel}")
    for rel in differ:
        print(f"differs: {rel}")
    print(f"{len(a & b)} files in both, {len(differ)} differ, {len(only)} in one only")
    return 1 if only or differ else 0


if __name__ == "__main__":
    sys.exit(main())
