"""The training passes' attention routes on one packed micro-batch at the 1.5B shape: time, agreement, memory.

verl packs a micro-batch's responses into one row (position ids restarting at each sequence, no mask).
Three ways to attend over it, each timed forward (the old-policy and reference passes) and forward +
backward with and without gradient checkpointing (the update):

* ``sdpa_pack``: transformers' sdpa, which builds a dense block-causal mask of the whole pack from the
  position ids: every one of the T^2 pairs computed, SDPA's flash kernel lost (today's route until the
  launcher took ``varlen``)
* ``one_at_a_time``: sdpa on each sequence alone, causal, no mask (micro-batches of one sequence; its
  backward runs over the whole pack at once, so its peak memory is the pack's, not one sequence's)
* ``varlen``: the launcher's route, ``vicurl.engines.verl.varlen_attention``: each sequence attends to itself
  through torch's variable-length flash kernel, one call for the pack

A randomly initialised model of DeepSeek-R1-Distill-Qwen-1.5B's architecture (Qwen2, untied head; no
download) in bf16, a pack of 5 sequences of about 3.3k tokens (16,384 in all, verl.max_token_len_per_gpu's
default). Printed per route: seconds (the median of ``--reps``), the decoder's FLOP/s by the useful count
(2N a token forward, 6N forward + backward, N the decoder's parameters without the LM head, which the timed
passes leave out; attention over each token's own sequence), the max |log-prob
difference| of each route against sdpa_pack and against the same weights in fp32 one sequence at a time
(log-probs of the next tokens from the last hidden states, in fp32; sdpa_pack's own difference from fp32 is
the bf16 rounding any route carries; the script fails when a route is further from fp32 than 4 times that,
plus 1e-3), the peak memory a token above the weights and gradients (the update),
and for varlen the update in micro-batches of one sequence each (what a budget under two sequences gives; the
6,144-token budget the 1.5B models had before config/paper.yaml's 8,704 held one ~3.5k-token sequence). The LM head's loss is left
out of the timing (the same on every route; measurements/logprob_route.py times it).

    python measurements/attention_route.py --out /tmp/attention_route              # an H200: about a minute
    .venv/bin/python measurements/attention_route.py --out /tmp/attention_route --cpu  # the script on a CPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from vicurl.planning.cost import ARCHS, arch_of, model_classes

REPO = Path(__file__).resolve().parents[1]

HUB_ID = "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
ROUTES = ("sdpa_pack", "one_at_a_time", "varlen")


def build(device: str, dtype: torch.dtype, small: bool):
    import vicurl.engines.verl.varlen_attention  # noqa: F401 (registers the launcher's attention)
    from vicurl.models import rope

    kind, kw = ARCHS[HUB_ID]
    if small:  # the CPU's rehearsal of the script
        kw = {**kw, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 4096}
    cfg_cls, model_cls = model_classes(kind)
    torch.manual_seed(0)
    with torch.device(device):
        model = rope.cast(model_cls(cfg_cls(**kw, attn_implementation="sdpa", use_cache=False)), dtype)
    return model, arch_of(kind, kw)


def pack(lengths: list[int], vocab: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (1, sum(lengths)), generator=g).to(device)
    pos = torch.cat([torch.arange(n) for n in lengths])[None].to(device)
    return ids, pos


def forward(model, route: str, ids, pos, lengths) -> torch.Tensor:
    """The last hidden states of the pack, (T, hidden), through ``route``'s attention."""
    model.config._attn_implementation = "vicurl_varlen" if route == "varlen" else "sdpa"
    if route != "one_at_a_time":
        return model.model(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state[0]
    out, start = [], 0
    for n in lengths:
        out.append(model.model(input_ids=ids[:, start:start + n], use_cache=False).last_hidden_state[0])
        start += n
    return torch.cat(out)


def log_probs(model, hidden: torch.Tensor, ids: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """log p(next token) from the hidden states, in fp32, ``chunk`` tokens at a time (no full logits tensor)."""
    labels = torch.roll(ids[0], -1)
    out = []
    for h, y in zip(hidden.split(chunk), labels.split(chunk)):
        logits = model.lm_head(h).float()
        out.append(torch.log_softmax(logits, -1).gather(-1, y[:, None])[:, 0])
    return torch.cat(out)


def fp32_log_probs(model, ids: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The pack's log-probs from the same weights in fp32, one sequence at a time: the exact figure each
    route's bf16 result is compared with."""
    import copy

    exact = copy.deepcopy(model).float()
    try:
        return log_probs(exact, forward(exact, "one_at_a_time", ids, None, lengths), ids)
    finally:
        del exact
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def timed(fn, reps: int, sync) -> float:
    fn()  # warm-up (kernels chosen, allocator filled)
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="a folder for the figures (attention_route.json)")
    ap.add_argument("--cpu", action="store_true", help="a small model and pack on the CPU, fp32 (a check of the script)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--lengths", type=int, nargs="+", help="the packed sequences' lengths (default: 5 filling 16,384)")
    ap.add_argument("--routes", nargs="+", default=list(ROUTES), choices=ROUTES)
    a = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not a.cpu
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    lengths = a.lengths or ([3500, 3300, 3100, 3400, 3084] if cuda else [120, 200, 90, 160])
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    model, arch = build(device, dtype, small=not cuda)
    ids, pos = pack(lengths, model.config.vocab_size, device)
    tokens = sum(lengths)
    # useful FLOPs: 2N a token forward, attention over the token's own sequence (half of it on average); the
    # timed passes stop at the last hidden states, so the LM head's matmul is not counted
    fwd_flops = sum(n * (arch.fwd_flops(n / 2) - 2 * arch.head) for n in lengths)
    card = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"{card}; {HUB_ID}'s shape{' (reduced)' if not cuda else ''}, {dtype}, a pack of {len(lengths)} sequences, "
          f"{tokens:,} tokens ({lengths}); torch {torch.__version__}", flush=True)

    results: dict = {"card": card, "dtype": str(dtype), "lengths": lengths, "torch": torch.__version__, "routes": {}}
    with torch.no_grad():
        reference = log_probs(model, forward(model, "sdpa_pack", ids, pos, lengths), ids)
        exact = fp32_log_probs(model, ids, lengths)
    for route in a.routes:
        r: dict = {}
        with torch.no_grad():
            r["forward_s"] = timed(lambda: forward(model, route, ids, pos, lengths), a.reps, sync)
            lp = log_probs(model, forward(model, route, ids, pos, lengths), ids)
        r["max_abs_logprob_diff_vs_sdpa_pack"] = float((lp - reference).abs().max())
        # against the same weights in fp32: sdpa_pack's own figure is the bf16 rounding every route carries
        r["max_abs_logprob_diff_vs_fp32"] = float((lp - exact).abs().max())
        for ckpt in (True, False):
            model.gradient_checkpointing_enable() if ckpt else model.gradient_checkpointing_disable()
            model.train()

            def step():
                model.zero_grad(set_to_none=False)
                forward(model, route, ids, pos, lengths).float().pow(2).mean().backward()

            if cuda:
                step()  # the gradients allocated before the peak is read
                held = torch.cuda.memory_allocated()  # the weights and their gradients
                torch.cuda.reset_peak_memory_stats()
            key = "checkpointing" if ckpt else "no_checkpointing"
            r[f"train_s_{key}"] = timed(step, a.reps, sync)
            if cuda:
                r[f"peak_mb_a_token_{key}"] = (torch.cuda.max_memory_allocated() - held) / tokens / 2**20
            model.eval()
        if route == "varlen":  # the update's micro-batches under a budget of less than two sequences: one each
            model.train()

            def per_sequence():
                model.zero_grad(set_to_none=False)
                start = 0
                for n in lengths:
                    forward(model, route, ids[:, start:start + n], pos[:, start:start + n], [n]).float().pow(2).mean().backward()
                    start += n

            r["train_s_no_checkpointing_one_sequence_a_micro_batch"] = timed(per_sequence, a.reps, sync)
            model.eval()
        model.gradient_checkpointing_disable()
        r["forward_tflops"] = fwd_flops / r["forward_s"] / 1e12
        r["train_tflops_no_checkpointing"] = 3 * fwd_flops / r["train_s_no_checkpointing"] / 1e12
        results["routes"][route] = r
        print(f"{route:>14}: forward {r['forward_s']:.3f} s ({r['forward_tflops']:.0f} TFLOP/s); forward + backward "
              f"{r['train_s_checkpointing']:.3f} s with checkpointing, {r['train_s_no_checkpointing']:.3f} s without "
              f"({r['train_tflops_no_checkpointing']:.0f} TFLOP/s); max |log-prob - sdpa_pack's| "
              f"{r['max_abs_logprob_diff_vs_sdpa_pack']:.2e}, fp32's {r['max_abs_logprob_diff_vs_fp32']:.2e}"
              + (f"; one sequence a micro-batch {r['train_s_no_checkpointing_one_sequence_a_micro_batch']:.3f} s"
                 if route == "varlen" else "")
              + (f"; peak {r['peak_mb_a_token_checkpointing']:.2f} / {r['peak_mb_a_token_no_checkpointing']:.2f} MB "
                 f"a token (with / without checkpointing)" if cuda else ""), flush=True)
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "attention_route.json").write_text(json.dumps(results, indent=2))  # as it goes
    if "sdpa_pack" in results["routes"] and "varlen" in results["routes"]:
        s, v = results["routes"]["sdpa_pack"], results["routes"]["varlen"]
        print(f"varlen against sdpa_pack: forward x{s['forward_s'] / v['forward_s']:.2f}, the update x"
              f"{s['train_s_checkpointing'] / v['train_s_no_checkpointing']:.2f} (checkpointing on -> off), x"
              f"{s['train_s_checkpointing'] / v['train_s_checkpointing']:.2f} (both on)")
    if "sdpa_pack" in results["routes"]:
        wrong = disagree(results)
        (a.out / "attention_route.json").write_text(json.dumps(results, indent=2))
        if wrong:
            sys.exit(f"attention_route: {', '.join(wrong)} further from the fp32 log-probs than "
                     f"{results['limit_vs_fp32']:.3g} (4 x sdpa_pack's own difference, the rounding every route "
                     f"carries, + 1e-3): a route that attends otherwise (a sequence seeing another?)")
        print(f"every route within {results['limit_vs_fp32']:.3g} of the fp32 log-probs", flush=True)


def disagree(results: dict) -> list[str]:
    """The routes whose log-probs are further from fp32's than 4 times sdpa_pack's own distance (the bf16
    rounding every route carries; an exact route's differs by a like amount, one that lets a sequence see
    another by far more) plus 1e-3 (in fp32 both distances are rounding of 1e-6); the limit goes into
    ``results``."""
    limit = 4 * results["routes"]["sdpa_pack"]["max_abs_logprob_diff_vs_fp32"] + 1e-3
    results["limit_vs_fp32"] = limit
    return [name for name, r in results["routes"].items() if r["max_abs_logprob_diff_vs_fp32"] > limit]


if __name__ == "__main__":
    main()
