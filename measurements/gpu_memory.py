"""Per-GPU memory of the paper's training runs on verl (an estimate), by model and phase of a step.

The paper trains on 8 x A100 40GB. verl 0.9.1's FSDP2 actor keeps fp32 weights, fp32 gradients and
AdamW's two fp32 moments, sharded over the node's GPUs; the reference model's weights are offloaded
to the CPU (forward-only FSDP2 models get verl's CPUOffloadPolicy; its weights in bf16, the launcher's
``ref.fsdp_config.model_dtype``). Per GPU, W GPUs, N parameters, T tokens a micro-batch of the update
(``verl.max_token_len_per_gpu``, dynamic batch size), F of the forward-only passes (old-policy pass and
reference, ``verl.forward_token_len_per_gpu``), V the vocabulary:

  resident      4N/W weights + 8N/W Adam moments (+ 4N/W gradients during the update);
                ``param_offload`` / ``optimizer_offload`` move weights / moments to the CPU
  activations   gradient checkpointing (``verl.gradient_checkpointing``, verl's default): each layer's
                input, T * h * L * 2 bytes, and one layer recomputed at a time, T * ``layer_bytes`` (h the
                hidden size, i the MLP's, kv the key/value width); without it every layer's, T * L *
                ``layer_bytes``: what a decoder layer saves for its backward in bf16, counted: the input and the
                two norms' float32 copies, q, k, v, the attention's output and the output projection's input,
                the MLP's four (gate, its SiLU, up, their product): about 22 h + 4 kv + 8 i bytes a token
                (tests/unit/test_gpu_memory.py counts a layer's saved tensors on the CPU against it; a GPU
                measures the whole, measurements/attention_route.py, "peak memory a token")
  logits        the launcher's config has verl compute log-probs and entropies with its fused kernels
                (``use_fused_kernels``, torch backend): 512 tokens at a time from the hidden states,
                so the logits' memory is k * 512 * V * 4 bytes whatever T, k measured below on the
                CPU through verl's own ``FusedLinearForPPO`` (forward and backward: the update; log-
                probs and entropies without grad: the old-policy pass). With fused kernels off
                (verl.overrides) verl's log-softmax materializes the micro-batch's logits: k * T * V * 4
                bytes through ``logprobs_from_logits`` and the entropies chunked and eager
                (``entropy_from_logits_with_chunking``); unchunked and eager, that pass held 34.9 GB
                above the weights at 16,384 tokens of Qwen2.5-Math-1.5B on an H200 (k = 3.5)
  rollout       vLLM's share, ``gpu_memory_utilization`` of the GPU (weights and KV cache), while
                the actor's resident part stays; vLLM sleeps (frees it) during the passes and update

The peak of a step is the larger of the rollout phase (resident without gradients + vLLM's share)
and the update (resident with gradients + activations + logits). Estimates: allocator fragmentation and
CUDA context (about 1 GB) come on top. One GPU run checks them (docs/verl.md, "What has run on a GPU": the
1.5B shape's update within 1 % of the actor's measured peak on an H200).

    .venv/bin/python measurements/gpu_memory.py [--gpu-gb 40] [--no-measure] [--margin 0.2]

The last table gives each model's largest update budget that leaves ``--margin`` of the card free: the
rule config/paper.yaml's ``verl.models.*.max_token_len_per_gpu`` follows (docs/paper.md, "GPU memory").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vicurl.planning.cost import ARCHS, model_classes  # noqa: E402  (the paper's models' published configurations)
from vicurl.settings import VerlSettings  # noqa: E402

GB = 1e9


FUSED_CHUNK = 512  # tokens a chunk of verl's FusedLinearForPPO (its default)


def launcher_config() -> dict:
    return yaml.safe_load((REPO / "src" / "vicurl" / "engines" / "verl" / "vicurl_ppo_trainer.yaml").read_text())


def chunked_entropy() -> bool:
    """Whether the launcher's config has verl compute the old-policy pass's entropies in chunks."""
    return bool(launcher_config()["actor_rollout_ref"]["actor"].get("entropy_from_logits_with_chunking", False))


def fused_kernels() -> bool:
    """Whether the launcher's config has verl compute log-probs and entropies with its fused kernels."""
    return bool(launcher_config()["actor_rollout_ref"]["model"].get("use_fused_kernels", False))


def route() -> str:
    return ("fused kernels, torch backend" if fused_kernels()
            else f"logits, entropies {'chunked' if chunked_entropy() else 'unchunked'}, eager")


def logits_factors(tokens: int = 4096, vocab: int = 151936) -> tuple[float, float]:
    """Peak bytes over P * V * 4 of verl's log-probs of ``tokens`` positions (bf16 hidden states and
    weights, the actor's dtypes) on the route the launcher's config selects, P = 512 (a fused chunk)
    or ``tokens`` (the logits): forward and backward (the update), and log-probs + entropy without
    grad (the old-policy pass); measured on the CPU from a fresh process's peak resident memory."""
    import subprocess

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


def shape(hub_id: str) -> dict:
    import torch

    kind, kw = ARCHS[hub_id]
    cfg_cls, model_cls = model_classes(kind)
    cfg = cfg_cls(**kw)
    with torch.device("meta"):
        n = sum(p.numel() for p in model_cls(cfg).parameters())
    kv = cfg.num_key_value_heads * cfg.hidden_size // cfg.num_attention_heads
    return {"n": float(n), "h": cfg.hidden_size, "i": cfg.intermediate_size, "kv": kv,
            "layers": cfg.num_hidden_layers, "vocab": cfg.vocab_size}


def longest_sequences(paper: dict, model: str) -> dict[str, int]:
    """Prompt and response tokens at most, by study that trains ``model``: the launcher's token budgets are at
    least that (a micro-batch holds one sequence whole)."""
    out = {}
    for study, spec in paper["studies"].items():
        if model in spec.get("models", []):
            train = {**paper["train"], **(spec.get("train") or {})}
            out[study] = int(train["max_prompt_length"]) + int(train["max_response_length"])
    return out


def layer_bytes(h: int, i: int, kv: int) -> int:
    """Bytes a token of what one decoder layer (Qwen2's, Llama's) saves for its backward in bf16: the layer's
    input (2h), the two RMSNorms' float32 copies of their inputs and their bf16 outputs (2 x (4h + 2h)), q and
    the attention kernel's output (2 x 2h), k and v (2 x 2kv), the output projection's input (2h: under sdpa a
    copy of the kernel's output in another layout; on the varlen route the same tensor, so 2h over there), the
    residual (2h), and the MLP's gate, SiLU(gate), up and their product (4 x 2i); the kernel's log-sum-exp (a
    float a head) left out."""
    return 22 * h + 4 * kv + 8 * i


def estimate(m: dict, v: VerlSettings, gpu_gb: float, k: tuple[float, float]) -> dict:
    """GB per GPU of each phase of a step (the module's formulas)."""
    w, n, t, f = v.n_gpus_per_node, m["n"], v.max_token_len_per_gpu, v.forward_token_len_per_gpu
    resident = (0 if v.param_offload else 4 * n / w) + (0 if v.optimizer_offload else 8 * n / w)
    layer = layer_bytes(m["h"], m["i"], m["kv"])  # bytes a token of one layer's activations
    act = t * m["h"] * m["layers"] * 2 + t * layer if v.gradient_checkpointing else t * m["layers"] * layer
    rollout = resident + v.gpu_memory_utilization * gpu_gb * GB
    old_pass = resident + f * layer + k[1] * (FUSED_CHUNK if fused_kernels() else f) * m["vocab"] * 4
    per = FUSED_CHUNK if fused_kernels() else t  # the tokens whose logits are held at once
    update = resident + 4 * n / w + act + k[0] * per * m["vocab"] * 4
    phases = {"rollout": rollout, "old_pass": old_pass, "update": update}
    return {"resident": resident / GB, **{p: b / GB for p, b in phases.items()}, "peak": max(phases.values()) / GB}


def largest_budget(m: dict, v: VerlSettings, gpu_gb: float, k: tuple[float, float], margin: float,
                   step: int = 512) -> int:
    """The largest update budget (tokens a micro-batch, a multiple of ``step``) whose estimated peak leaves
    ``margin`` of the card free (CUDA's context, the allocator's fragmentation, the estimate's own error); 0 when
    none does."""
    t = 0
    while estimate(m, dataclasses.replace(v, max_token_len_per_gpu=t + step), gpu_gb, k)["peak"] <= (1 - margin) * gpu_gb:
        t += step
    return t


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
