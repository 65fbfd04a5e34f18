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
                so the logits' memory is k * 512 * V * 4 bytes whatever T, k measured on the
                CPU (measurements/gpu_memory.py) through verl's own ``FusedLinearForPPO`` (forward and backward: the update; log-
                probs and entropies without grad: the old-policy pass). With fused kernels off
                (verl.overrides) verl's log-softmax materializes the micro-batch's logits: k * T * V * 4
                bytes through ``logprobs_from_logits`` and the entropies chunked and eager
                (``entropy_from_logits_with_chunking``)
  rollout       vLLM's share, ``gpu_memory_utilization`` of the GPU (weights and KV cache), while
                the actor's resident part stays; vLLM sleeps (frees it) during the passes and update

The peak of a step is the larger of the rollout phase (resident without gradients + vLLM's share)
and the update (resident with gradients + activations + logits). Estimates: allocator fragmentation and
CUDA context (about 1 GB) come on top. A GPU run checks them (docs/measurements.md).
``largest_budget`` is the rule config/paper.yaml's ``verl.models.*.max_token_len_per_gpu`` follows
(docs/paper.md, "GPU memory"); measurements/gpu_memory.py prints the tables, the logits factors measured.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from vicurl.config.settings import VerlSettings
from vicurl.planning.cost import ARCHS, model_classes  # the paper's models' published configurations

GB = 1e9
FUSED_CHUNK = 512  # tokens a chunk of verl's FusedLinearForPPO (its default)
LAUNCHER_CONFIG = Path(__file__).resolve().parents[1] / "engines" / "verl" / "vicurl_ppo_trainer.yaml"


def launcher_config() -> dict:
    return yaml.safe_load(LAUNCHER_CONFIG.read_text())


def chunked_entropy() -> bool:
    """Whether the launcher's config has verl compute the old-policy pass's entropies in chunks."""
    return bool(launcher_config()["actor_rollout_ref"]["actor"].get("entropy_from_logits_with_chunking", False))


def fused_kernels() -> bool:
    """Whether the launcher's config has verl compute log-probs and entropies with its fused kernels."""
    return bool(launcher_config()["actor_rollout_ref"]["model"].get("use_fused_kernels", False))


def route() -> str:
    return ("fused kernels, torch backend" if fused_kernels()
            else f"logits, entropies {'chunked' if chunked_entropy() else 'unchunked'}, eager")


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
