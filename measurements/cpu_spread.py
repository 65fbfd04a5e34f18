"""How much the demo's numbers move with the CPU's vector instructions, and why.

Two runs of the demo on one machine are identical (tested). Across machines they are not: the base
model's SFT (rule ``build_tiny_model``) sums in the order its kernels vectorize, so its weights,
and everything trained and sampled from them, depend on the instruction set torch's kernels use
(``ATEN_CPU_CAPABILITY``), on MKL's code path (``MKL_CBWR``) and on oneDNN's (``ONEDNN_MAX_CPU_ISA``).
This script builds the base model once per setting in a fresh clone of HEAD and prints its final SFT
loss and a hash of its weights; with ``--demo`` it runs the whole demo per setting and prints the
rows the README quotes (average Pass@1 of the base model and of the oracle runs at step 10).

    .venv/bin/python measurements/cpu_spread.py                  # the base model under each setting
    .venv/bin/python measurements/cpu_spread.py --demo --keep /tmp/spread

Settings that this CPU cannot run (``avx512`` on an AVX2-only one) are skipped, saying so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from vicurl.runtime.provenance import cpu_info

REPO = Path(__file__).resolve().parents[1]

MODEL = "results/demo/models/tiny/base"
SCORES = "results/demo/report/scores_across_seeds.csv"
# name -> environment; "native" is what a user gets
SETTINGS: dict[str, dict[str, str]] = {
    "native": {},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "aten-avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "aten-avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
    "avx2-pinned": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "default-pinned": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
}


def snakemake(workdir: Path, env: dict[str, str], python: str, *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([python, "-m", "snakemake", "--cores", "2", *args], cwd=workdir, check=True,
                   env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def model_figures(workdir: Path) -> dict:
    metrics = json.loads((workdir / MODEL / "build_metrics.json").read_text())
    weights = hashlib.sha256((workdir / MODEL / "model.safetensors").read_bytes()).hexdigest()[:12]
    return {"final_sft_loss": round(metrics["final_loss"], 4), "weights": weights,
            "sft_s": round(metrics["seconds"], 1)}


def demo_figures(workdir: Path) -> dict:
    """Average Pass@1 (%, mean ± std over seeds) of the base model and of main's oracle runs at step 10."""
    df = pd.read_csv(workdir / SCORES)
    df = df[(df["benchmark"] == "average") & (df["metric"] == "pass@1")]
    rows = {"base": (df["study"] == "base"),
            "oracle-none@10": (df["study"] == "main") & (df["reward"] == "oracle") & (df["curriculum"] == "none"),
            "oracle-vicurl@10": (df["study"] == "main") & (df["reward"] == "oracle") & (df["curriculum"] == "vicurl")}
    out = {}
    for name, sel in rows.items():
        cell = df[sel & (df["step"] == (0 if name == "base" else 10))].iloc[0]
        out[name] = f"{100 * cell['mean']:.1f}±{100 * cell['std']:.1f}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--demo", action="store_true", help="run the whole demo per setting (about 5-10 min each)")
    ap.add_argument("--keep", type=Path, help="work in this (new) folder and keep it")
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    info = cpu_info()
    native = info["torch_kernels"]
    print(f"CPU: {info['model']}; torch's kernels: {native}")
    supported = {"default", "avx2"} | ({"avx512"} if native.startswith("AVX512") else set())
    with tempfile.TemporaryDirectory() as tmp:
        root = a.keep or Path(tmp)
        for setting in a.settings:
            env = SETTINGS[setting]
            if env.get("ATEN_CPU_CAPABILITY", "default") not in supported:
                print(f"{setting:15s} skipped: this CPU has no {env['ATEN_CPU_CAPABILITY']}")
                continue
            workdir = root / setting
            subprocess.run(["git", "clone", "-q", str(REPO), str(workdir)], check=True)
            seconds = snakemake(workdir, env, a.python, "all" if a.demo else MODEL)
            figures = {**model_figures(workdir), **(demo_figures(workdir) if a.demo else {}),
                       "wall_s": round(seconds, 1)}
            print(f"{setting:15s} {' '.join(f'{k}={v}' for k, v in figures.items())}  {env or ''}", flush=True)


if __name__ == "__main__":
    main()
