"""verl's fused log-prob route in bf16: does it change which prompts VI-CuRL keeps, and the LM head's gradient?

1. Confidences. verl 0.9.1's fused kernels (``FusedLinearForPPO``, the launcher's log-prob route) compute each token's
entropy in float32 and return it cast to bf16 (8 bits of mantissa: up to 0.2 % off). The curriculum averages
them over a response and over a prompt's G responses (`vicurl.algos.confidence.prompt_confidence`) and keeps
the most confident beta_t share of the batch (`vicurl.curriculum.threshold.quantile_threshold`). Here both, at
the paper's batch shape (128 prompts x G 8, responses of up to 3,072 tokens, vocabulary 151,936), from float32
entropies and from the same entropies rounded to bf16, over many batches: how many kept prompts differ, and
how the rounding compares with the gap between neighbouring confidences.

Synthetic entropies: a prompt's responses draw each token's entropy from an exponential distribution of the
prompt's own mean (0.05 to 1.5 nats, uniform), response lengths uniform in 64-3,072 tokens (no model here:
the rounding is relative, so what matters is the spread of the prompts' means against it).

2. The LM head's gradient. The fused backward computes the head's gradient 512 tokens at a time, each chunk's
in bf16, and sums the chunks in bf16 (``dvocab_weights += v``). Here its relative error against the same
computation in float32, beside one bf16 matmul over the whole micro-batch (what the logits route does: one
rounding), at the 1.5B models' head (hidden 1,536, vocabulary 151,936) and ``--tokens`` tokens.

    .venv/bin/python measurements/fused_bf16.py [--batches 200] [--tokens 16384]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vicurl.algos.confidence import prompt_confidence  # noqa: E402
from vicurl.curriculum.threshold import quantile_threshold  # noqa: E402

B, G, L, V = 128, 8, 3072, 151936


def batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Token entropies (B*G, L), their response mask, the prompt index of each row."""
    means = 0.05 + 1.45 * torch.rand(B, generator=gen)
    rows = means.repeat_interleave(G)
    ent = -torch.log1p(-torch.rand(B * G, L, generator=gen)) * rows[:, None]  # exponential, never infinite
    lengths = torch.randint(64, L + 1, (B * G,), generator=gen)
    mask = (torch.arange(L)[None, :] < lengths[:, None]).float()
    return ent, mask, np.repeat(np.arange(B), G)


def head_gradient_errors(tokens: int, hidden: int = 1536, vocab: int = V) -> tuple[float, float]:
    """Relative Frobenius errors of the LM head's gradient against float32: the fused route in bf16, and one
    bf16 matmul of the logits' gradient (the unfused route's backward)."""
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    gen = torch.Generator().manual_seed(1)
    h = torch.randn(tokens, hidden, generator=gen)
    w = torch.randn(vocab, hidden, generator=gen) * 0.02
    labels = torch.randint(0, vocab, (tokens,), generator=gen)
    upstream = torch.randn(tokens, generator=gen)  # d loss / d log-prob of each token

    def fused(dtype: torch.dtype) -> torch.Tensor:
        weight = w.detach().to(dtype).clone().requires_grad_(True)
        log_probs, _ = FusedLinearForPPO(chunk_size=512)(h.to(dtype), weight, labels)
        (log_probs * upstream).sum().backward()
        return weight.grad.float()

    exact = fused(torch.float32)
    # one bf16 matmul over the micro-batch: bf16 inputs, float32 accumulation (as a GPU's matmul has it), built
    # from slices of the tokens so that no (tokens x vocabulary) tensor is held (16,384 tokens: 10 GB in float32)
    once = torch.zeros_like(w)
    for i in range(0, tokens, 512):
        sl = slice(i, i + 512)
        probs = (h[sl] @ w.t()).softmax(-1)
        dlogits = -(probs - torch.zeros_like(probs).scatter_(-1, labels[sl, None], 1.0)) * upstream[sl, None]
        once += (dlogits.to(torch.bfloat16).t() @ h[sl].to(torch.bfloat16)).float()
    rel = lambda g: float((g - exact).norm() / exact.norm())  # noqa: E731
    return rel(fused(torch.bfloat16)), rel(once)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=16384,
                    help="tokens of the micro-batch for the head's gradient (default: verl.max_token_len_per_gpu's)")
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    betas = (0.2, 0.47, 0.73)
    changed = {b: 0 for b in betas}
    worst_shift, gaps = 0.0, []
    for _ in range(a.batches):
        ent, mask, index = batch(gen)
        c32 = prompt_confidence(ent, mask, index, V)
        c16 = prompt_confidence(ent.to(torch.bfloat16).float(), mask, index, V)
        worst_shift = max(worst_shift, float((c32 - c16).abs().max()))
        gaps.append(float(torch.diff(torch.sort(c32).values).min()))
        for b in betas:
            keep32, _ = quantile_threshold(c32, b)
            keep16, _ = quantile_threshold(c16, b)
            changed[b] += int((keep32 != keep16).sum())
    print(f"{a.batches} batches of {B} prompts x G {G}, up to {L} tokens; confidences from float32 vs bf16 entropies")
    print(f"largest change of a prompt's confidence: {worst_shift:.2e}; smallest gap between two prompts' "
          f"confidences: median {np.median(gaps):.2e}, least {min(gaps):.2e}")
    for b in betas:
        print(f"beta {b}: {changed[b]} kept/dropped decisions differ of {a.batches * B}")
    fused, once = head_gradient_errors(a.tokens)
    print(f"LM head gradient, {a.tokens} tokens, relative error against float32: fused route (bf16 chunks summed "
          f"in bf16) {fused:.2e}; one bf16 matmul {once:.2e}")


if __name__ == "__main__":
    main()
