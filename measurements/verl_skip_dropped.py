"""What dropping the curriculum's dropped prompts from verl's batch saves, on verl's own loop on this CPU.

Two verl runs of VI-CuRL (the project's launcher, Ray, FSDP2, vLLM's CPU build; `vicurl.rehearsal.cpu`)
with a constant retention share: beta = 0.2 and beta = 1. With ``train.skip_dropped`` (the default)
the dropped prompts' rows leave the batch after the old-policy pass, so the reference pass and the
update process a fifth of the rows at beta 0.2. Prints the mean time of verl's reference pass and
actor update per step (its own ``timing_s`` metrics, steps after the first) and their ratio.

    .venv-vllm/bin/python measurements/verl_skip_dropped.py [--steps 4] [--batch 16] [--group 4]

About 5 minutes on 2 cores (most of it starting Ray's workers and vLLM, twice).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def run(out: Path, beta: float, a) -> dict[str, float]:
    from vicurl.data import schema, synthetic
    from vicurl.rehearsal import cpu as cpu_rehearsal
    from vicurl.rehearsal import stand_ins

    if not (out.parent / "stand_ins").exists():
        stand_ins.write(out.parent / "stand_ins")
    train = out.parent / "train.parquet"
    if not train.exists():
        schema.write(synthetic.make_set("train", 4 * a.batch, [1, 2, 3, 4, 5, 6], 0), train)
    settings = {"total_steps": a.steps, "batch_size": a.batch, "group_size": a.group, "max_prompt_length": 256,
                "max_response_length": 64, "save_every": a.steps, "reward": "entropy", "curriculum": "vicurl",
                "curriculum_params": {"beta_start": beta, "schedule": "constant"}, "chat_template": True}
    smoke = yaml.safe_load((REPO / "config" / "gpu_smoke.yaml").read_text())["verl"]
    cpu = yaml.safe_load((REPO / "config" / "gpu_smoke_cpu.yaml").read_text())["verl"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "settings.json").write_text(json.dumps(settings))
    (out / "verl.json").write_text(json.dumps({**smoke, **cpu}))
    cmd = [sys.executable, "-m", "vicurl.engines.verl.launch", "--settings", str(out / "settings.json"),
           "--model", str(out.parent / "stand_ins" / "model"), "--train-set", str(train), "--work-dir", str(out / "_work"),
           "--checkpoints", str(out / "checkpoints"), "--metrics", str(out / "metrics.jsonl"),
           "--verl-config", str(out / "verl.json")]
    with open(out / "launch.log", "w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True, env={**os.environ, **cpu_rehearsal.environment()})
    steps = [json.loads(ln) for ln in (out / "_work" / "verl_log.jsonl").read_text().splitlines() if ln.strip()]
    later = [s.get("data", s) for s in steps][1:]  # the first step warms everything up
    mean = {k: sum(float(s[k]) for s in later) / len(later) for k in ("timing_s/ref", "timing_s/update_actor")}
    rows = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    mean["kept"] = sum(r["curriculum/kept"] for r in rows) / len(rows)
    return mean


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--group", type=int, default=4)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        res = {beta: run(Path(tmp) / f"beta{beta}", beta, a) for beta in (0.2, 1.0)}
    print(f"verl on this CPU, {a.batch} prompts x {a.group} rollouts a step, mean over steps 2-{a.steps}:")
    print("| beta | prompts kept | reference pass (s) | actor update (s) | both (s) |")
    print("|---|---|---|---|---|")
    for beta, r in res.items():
        print(f"| {beta} | {r['kept']:.1f} of {a.batch} | {r['timing_s/ref']:.2f} | {r['timing_s/update_actor']:.2f} | "
              f"{r['timing_s/ref'] + r['timing_s/update_actor']:.2f} |")
    lo, hi = (res[b]["timing_s/ref"] + res[b]["timing_s/update_actor"] for b in (0.2, 1.0))
    print(f"ratio beta 0.2 / beta 1: {lo / hi:.2f}")


if __name__ == "__main__":
    main()
