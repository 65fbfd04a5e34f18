"""Per-GPU memory of the paper's training runs on verl (`vicurl.planning.memory`'s estimate), by model and phase
of a step, with the logits factors measured on this CPU through verl's own kernels; and each model's largest update
budget that leaves ``--margin`` of the card free.

    .venv/bin/python measurements/gpu_memory.py [--gpu-gb 40] [--no-measure] [--margin 0.2]
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from pathlib import Path

import yaml

from vicurl.config.settings import VerlSettings
from vicurl.planning.memory import (
    FUSED_CHUNK,
    chunked_entropy,
    estimate,
    fused_kernels,
    largest_budget,
    longest_sequences,
    route,
    shape,
)

REPO = Path(__file__).resolve().parents[1]


def logits_factors(tokens: int = 4096, vocab: int = 151936) -> tuple[float, float]:
    """Peak bytes over P * V * 4 of verl's log-probs of ``tokens`` positions (bf16 hidden states and
    weights, the actor's dtypes) on the route the launcher's config selects, P = 512 (a fused chunk)
    or ``tokens`` (the logits): forward and backward (the update), and log-probs + entropy without
    grad (the old-policy pass); measured on the CPU from a fresh process's peak resident memory."""

    entropy = "entropy_from_logits_with_chunking" if chunked_entropy() else "entropy_from_logits"
    code = f"""
import resource, sys, torch
from verl.utils.experimental.torch_functional import FusedLinearForPPO
from verl.utils.torch_functional import {entropy} as entropy_from_logits, logprobs_from_logits
torch.manual_seed(0)
train = sys.argv[1] == "update"
h = torch.randn({tokens}, 64, dtype=torch.bfloat16, requires_grad=train)
w = (torch.randn({vocab}, 64) * 0.02).to(torch.bfloat16).requires_grad_(train)
labels = torch.randint(0, {vocab}, ({tokens},))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.set_grad_enabled(train):
    if {fused_kernels()}:
        log_probs, entropy = FusedLinearForPPO(chunk_size={FUSED_CHUNK})(h, w, labels)
    else:
        logits = h @ w.t()
        log_probs, entropy = logprobs_from_logits(logits, labels), None if train else entropy_from_logits(logits)
    if train:
        log_probs.sum().backward()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024)
"""
    per = FUSED_CHUNK if fused_kernels() else tokens

    def peak(kind: str) -> float:
        out = subprocess.run([sys.executable, "-c", code, kind], capture_output=True, text=True, check=True)
        return int(out.stdout.strip().splitlines()[-1]) / (per * vocab * 4)

    return max(peak("update") for _ in range(3)), max(peak("old_pass") for _ in range(3))  # RSS: the largest of 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-gb", type=float, default=40.0, help="GPU memory (the paper's A100s: 40)")
    ap.add_argument("--no-measure", action="store_true", help="assume the logits factors instead of measuring them")
    ap.add_argument("--margin", type=float, default=0.2, help="share of the card an update budget leaves free")
    a = ap.parse_args()
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    k = (1.5, 1.0) if a.no_measure else logits_factors()
    per = f"{FUSED_CHUNK}" if fused_kernels() else "T"
    print(f"logits factors over {per} * V * 4 bytes: update {k[0]:.2f}, old-policy pass {k[1]:.2f} "
          f"({'assumed' if a.no_measure else 'measured on this CPU, bf16'}; {route()})\n")
    print(f"| model | verl settings | tokens: update / forward | checkpointing | offload | resident | rollout | "
          f"old-policy pass | update | peak / {a.gpu_gb:.0f} GB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = VerlSettings.from_dict(paper.get("verl"))
    for name, model in paper["models"].items():
        m = shape(model["hub_id"])
        own = base.for_model(name)
        rows = [("config/paper.yaml", own), ("without verl.models", base.for_model(""))]
        for study, longest in longest_sequences(paper, name).items():  # the launcher's micro-batch holds one whole
            if longest > own.max_token_len_per_gpu:
                rows.append((f"config/paper.yaml, study {study}", dataclasses.replace(
                    own, max_token_len_per_gpu=longest,
                    forward_token_len_per_gpu=max(own.forward_token_len_per_gpu, longest))))
        for label, v in rows:
            e = estimate(m, v, a.gpu_gb, k)
            offload = "+".join(x for x, on in (("params", v.param_offload), ("optimizer", v.optimizer_offload)) if on)
            print(f"| {name} | {label} | {v.max_token_len_per_gpu:,} / {v.forward_token_len_per_gpu:,} | "
                  f"{'on' if v.gradient_checkpointing else 'off'} | {offload or '-'} | {e['resident']:.1f} | "
                  f"{e['rollout']:.1f} | {e['old_pass']:.1f} | {e['update']:.1f} | {e['peak']:.1f}"
                  f"{' OVER' if e['peak'] > a.gpu_gb * 0.9 else ''} |")
    print(f"\nthe largest update budget (a multiple of 512 tokens) whose peak leaves {100 * a.margin:.0f} % of the "
          f"{a.gpu_gb:.0f} GB free, at config/paper.yaml's other settings; two sequences at the cap need:\n")
    print("| model | checkpointing | two sequences at the cap | largest budget | its peak | config/paper.yaml |")
    print("|---|---|---|---|---|---|")
    for name, model in paper["models"].items():
        m, own = shape(model["hub_id"]), base.for_model(name)
        two = 2 * (int(paper["train"]["max_prompt_length"]) + int(paper["train"]["max_response_length"]))
        fit = largest_budget(m, own, a.gpu_gb, k, a.margin)
        peak = estimate(m, dataclasses.replace(own, max_token_len_per_gpu=fit), a.gpu_gb, k)["peak"] if fit else 0.0
        print(f"| {name} | {'on' if own.gradient_checkpointing else 'off'} | {two:,} | {fit:,} | {peak:.1f} | "
              f"{own.max_token_len_per_gpu:,} |")


if __name__ == "__main__":
    main()
