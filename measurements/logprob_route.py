"""Time of the log-prob routes verl can take, one micro-batch at the paper models' LM head.

Every verl pass (old policy, reference, update) turns the last hidden states of a micro-batch of
packed tokens into each token's log-prob (and, in the old-policy pass, its entropy). Three routes:

* ``loop``: the logits, then ``verl.utils.torch_functional.logprobs_from_logits``, what verl 0.9.1 does
  without fused kernels. Without flash-attn (the GPU environment installs none) it is
  ``logprobs_from_logits_v2``, which for bf16 logits runs ``log_softmax`` one token row at a time.
* ``fused``: verl's fused kernels, torch backend (``FusedLinearForPPO``), what
  ``vicurl_ppo_trainer.yaml`` selects (``actor_rollout_ref.model.use_fused_kernels``): log-probs and
  entropies from the hidden states 512 tokens at a time, vectorised, no full logits tensor.
* ``cross_entropy``: the logits, then torch's vectorised ``cross_entropy``: a floor for comparison.

Each is timed forward + backward (the update) and forward alone (the old-policy and reference
passes), bf16 hidden states and weights as FSDP's mixed precision gives them, random values at the
shape of Qwen2.5-Math-1.5B (hidden 1536, vocabulary 151,936); the model's layers are the same for all
three and left out. On CUDA also the peak memory above the inputs.

    python measurements/logprob_route.py                  # CUDA if present (16,384 tokens), else CPU (2,048)
    python measurements/logprob_route.py --tokens 4096 --routes fused cross_entropy
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

HIDDEN, VOCAB = 1536, 151936  # Qwen2.5-Math-1.5B and DeepSeek-R1-Distill-Qwen-1.5B


def route(name: str):
    """fn(hidden, weight, labels) -> (log-probs, entropy or None), as verl computes them on that route."""
    from verl.utils import torch_functional as verl_F
    from verl.utils.experimental.torch_functional import FusedLinearForPPO

    if name == "loop":
        return lambda h, w, y: (verl_F.logprobs_from_logits(h @ w.t(), y), None)
    if name == "fused":
        fused = FusedLinearForPPO(impl_backend="torch")
        return lambda h, w, y: fused(h, w, y, temperature=1.0)
    if name == "cross_entropy":
        return lambda h, w, y: (-torch.nn.functional.cross_entropy((h @ w.t()).float(), y, reduction="none"), None)
    raise ValueError(f"unknown route {name!r}: loop, fused or cross_entropy")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_route(fn, h, w, y, backward: bool, repeats: int) -> tuple[float, float]:
    """(median seconds, peak GiB above the inputs on CUDA else nan) of one micro-batch."""
    device = h.device
    times, peak = [], float("nan")
    for i in range(repeats + 1):  # the first call warms up (allocator, kernels' first launch)
        h.grad = w.grad = None
        sync(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        with torch.set_grad_enabled(backward):
            lp, ent = fn(h, w, y)
            if backward:
                lp.sum().backward()
        sync(device)
        if i:
            times.append(time.perf_counter() - t0)
        if device.type == "cuda":
            peak = (torch.cuda.max_memory_allocated() - base) / 2**30
        del lp, ent
    return statistics.median(times), peak


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, help="tokens in the micro-batch (default 16,384 on CUDA, 2,048 on a CPU)")
    ap.add_argument("--routes", nargs="+", default=["loop", "fused", "cross_entropy"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n = args.tokens or (16384 if device.type == "cuda" else 2048)
    from verl.utils import torch_functional as verl_F

    card = torch.cuda.get_device_name() if device.type == "cuda" else f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    print(f"{card}; torch {torch.__version__}; {n} tokens, hidden {HIDDEN}, vocabulary {VOCAB}, bf16; "
          f"verl's flash-attn cross entropy: {'yes' if verl_F.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE else 'no (loop route = per-row log_softmax)'}")
    g = torch.Generator(device=device).manual_seed(0)
    h = (torch.randn(n, HIDDEN, device=device, generator=g) * 0.5).to(torch.bfloat16).requires_grad_()
    w = (torch.randn(VOCAB, HIDDEN, device=device, generator=g) * 0.02).to(torch.bfloat16).requires_grad_()
    y = torch.randint(0, VOCAB, (n,), device=device, generator=g)

    ref = None
    print(f"{'route':<15}{'fwd+bwd s':>11}{'fwd s':>9}{'peak GiB':>10}  max |log-prob - fused|")
    results = {}
    for name in args.routes:
        fn = route(name)
        fb, peak = time_route(fn, h, w, y, backward=True, repeats=args.repeats)
        f, _ = time_route(fn, h, w, y, backward=False, repeats=args.repeats)
        with torch.no_grad():
            lp = fn(h, w, y)[0].float()
        if name == "fused":
            ref = lp
        results[name] = (fb, f, peak, lp)
    for name, (fb, f, peak, lp) in results.items():
        diff = f"{(lp - ref).abs().max().item():.3g}" if ref is not None else "-"
        print(f"{name:<15}{fb:>11.3f}{f:>9.3f}{peak:>10.2f}  {diff}")
    if "loop" in results and "fused" in results:
        print(f"loop / fused: {results['loop'][0] / results['fused'][0]:.1f}x forward + backward, "
              f"{results['loop'][1] / results['fused'][1]:.1f}x forward")


if __name__ == "__main__":
    main()
