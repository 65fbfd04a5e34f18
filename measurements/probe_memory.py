"""Peak memory of one variance probe (the paper's method, streaming) at a paper model's shape, through the
probe's own functions (`vicurl.probes.probe.rollout_gradient`, `.estimate`): random weights from the
model's published configuration (vicurl.planning.cost.ARCHS), float32 as the probe keeps them, one sequence
of ``--tokens`` (prompt + response: 512 + 2,760 for the paper's probes) per pass, and four distinct
subsets (full, kept, and each's informative prompts: the normal case, which holds four subset means).

The memory does not grow with the number of prompts or rollouts: the defaults (4 prompts x 2 rollouts,
16 backward passes) suffice. On CUDA the figures are the allocator's peaks (what a 40 GB A100 must
hold); on a CPU, the process's peak resident memory (weights, gradients, means and activations
together: a check that the script runs, with --layers to shrink the model).

    .venv/bin/python measurements/probe_memory.py [--model Qwen/Qwen2.5-Math-1.5B] [--tokens 3272] [--layers N]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from vicurl.config.settings import TrainSettings
from vicurl.models.sampling import Rollouts
from vicurl.planning.cost import ARCHS, model_classes
from vicurl.probes.probe import ProbeConfig, estimate, rollout_gradient, trainable_shapes

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen/Qwen2.5-Math-1.5B", choices=sorted(ARCHS))
    ap.add_argument("--tokens", type=int, default=3272, help="prompt + response tokens of each sequence")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--layers", type=int, help="fewer layers than the published model (a CPU check)")
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--rollouts", type=int, default=2)
    a = ap.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kind, kw = ARCHS[a.model]
    cfg_cls, model_cls = model_classes(kind)
    cfg = cfg_cls(**{**kw, **({"num_hidden_layers": a.layers} if a.layers else {})}, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        policy = model_cls(cfg)
    n, p, r = a.prompts * a.rollouts, a.prompt_tokens, a.tokens - a.prompt_tokens
    gen = torch.Generator().manual_seed(0)
    rollouts = Rollouts(torch.randint(0, cfg.vocab_size, (n, p), generator=gen), torch.ones(n, p, dtype=torch.long),
                        torch.randint(0, cfg.vocab_size, (n, r), generator=gen), torch.ones(n, r, dtype=torch.long),
                        [""] * n, torch.zeros(n, dtype=torch.bool))
    # the rollouts and their log-probs stay on the CPU, as the probe keeps them (sequence_logprobs takes a
    # micro-batch's rows to the model's device and returns its log-probs on the CPU)
    advantages = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)[:, None].expand(n, r)
    part = SimpleNamespace(rollouts=rollouts, old_lp=torch.full((n, r), -12.0),
                           scored=SimpleNamespace(advantages=advantages))
    settings = TrainSettings(total_steps=1, max_response_length=r, max_prompt_length=p, micro_batch_size=1, kl_coef=0.001)
    # four distinct subsets: kept {0, 1}, informative {0, 2} (and 3 more prompts in full)
    kept = torch.tensor([j < a.prompts // 2 for j in range(a.prompts)])
    informative = torch.tensor([j % 2 == 0 for j in range(a.prompts)])
    mean_grad = rollout_gradient(policy, part, torch.full((n, r), -12.0), settings)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    estimate(mean_grad, trainable_shapes(policy), ProbeConfig(rollouts=a.rollouts, method="streaming"), a.prompts,
             kept, informative)
    seconds = time.perf_counter() - t0
    params = sum(x.numel() for x in policy.parameters())
    print(f"{a.model}{f' ({a.layers} layers)' if a.layers else ''}: {params / 1e9:.2f}B parameters, "
          f"{a.tokens} tokens a sequence, {a.prompts} prompts x {a.rollouts} rollouts, on {device}")
    if device.type == "cuda":
        print(f"peak allocated {torch.cuda.max_memory_allocated() / 1e9:.1f} GB, reserved "
              f"{torch.cuda.max_memory_reserved() / 1e9:.1f} GB ({torch.cuda.get_device_name()}), {seconds:.0f} s; "
              f"host: peak resident {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.1f} GB (the subset "
              f"means: {4 * params * 4 / 1e9:.1f} GB)")
    else:
        print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.1f} GB, {seconds:.0f} s")


if __name__ == "__main__":
    main()
