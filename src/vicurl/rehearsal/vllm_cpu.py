"""vLLM's CPU build under verl's weight sync: every linear layer computes with its own weight.

vLLM 0.29 on a CPU hands each linear layer's weight, once loaded, to a packed kernel
(``dispatch_cpu_unquantized_gemm``, ``model_executor/layers/utils.py``): the SGL AMX kernel for bf16
weights up to 1 MiB on CPUs with AMX tiles, oneDNN for the rest wherever oneDNN builds the matmul
(fp32 on every x86 CPU, bf16 on AVX-512), and replaces ``layer.weight`` by an empty Parameter. verl
updates the rollout's weights in place through ``model.load_weights`` (each Parameter's
``weight_loader``), so on those CPUs its first sync fails ("'Parameter' object has no attribute
'weight_loader'"), and the lm_head, packed but not replaced, would keep sampling from stale weights.
Only vLLM's torch fallback keeps the Parameters, as vLLM on a GPU does. So here every 2-D linear
weight takes that fallback, ``torch.nn.functional.linear`` on the layer's own Parameter, on every
CPU: AVX2 machines' bf16 layers already did (oneDNN builds no bf16 matmul there).

One more thing differs from that fallback: a row's result must not depend on the rows that share its
batch. A CPU's matmul picks its kernel and blocking by the number of rows (measured on an AMD EPYC:
fp32 rows computed 1, 2, 3, 5 or 7 at a time differ in their last bits from the same rows computed
in a batch of 64; AMX tiles pick their own), so a seeded rollout would sample other tokens when the
engine happened to batch it with other requests, and a run resumed after a stop would not continue
the uninterrupted run's numbers. ``batch_invariant_linear`` computes every call in blocks of exactly
``BLOCK`` rows (the last padded with zeros): each row meets one kernel and one blocking, whatever
shares its batch, as vLLM's batch-invariant mode makes its GPU kernels (``VLLM_BATCH_INVARIANT``,
Triton kernels that vLLM's CPU build cannot start). vLLM's CPU attention splits a sequence's keys
over threads depending on the batch; `vicurl.rehearsal.cpu.VLLM_ENV` turns that split off.

Loaded in every vLLM process of the rehearsal's environment (vLLM's engine core and workers
included) as a vLLM general plugin (entry point group ``vllm.general_plugins``), which
`vicurl.rehearsal.cpu.alias_vllm` declares in the ``vllm`` alias distribution of .venv-vllm; a GPU
environment has neither. ``PATCHES`` names vLLM's line this answers (`vicurl.rehearsal.cpu.stale_patches`).
"""

from __future__ import annotations

ENTRY_POINT = "vicurl_cpu_weights = vicurl.rehearsal.vllm_cpu:register"

_original = None


def register() -> None:
    """vLLM's plugin hook: on the CPU platform, linear layers keep their weights (a no-op elsewhere;
    vLLM may call it more than once in a process)."""
    global _original
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    from vllm.model_executor.layers import utils

    if _original is None:
        _original = utils.dispatch_cpu_unquantized_gemm
        utils.dispatch_cpu_unquantized_gemm = keep_weight


def keep_weight(layer, remove_weight: bool) -> None:
    """``dispatch_cpu_unquantized_gemm`` for verl's sync: a 2-D weight stays the Parameter vLLM loaded
    (its ``weight_loader`` included) and the layer computes with it; other layers as vLLM does."""

    if layer.weight.is_meta or layer.weight.ndim != 2:
        return _original(layer, remove_weight)
    layer.cpu_linear = batch_invariant_linear


BLOCK = 32  # rows a matmul call takes: above a decode step's batch here, a prompt's prefill in a few calls


def batch_invariant_linear(x, weight, bias=None):
    """``torch.nn.functional.linear`` computed in calls of exactly ``BLOCK`` rows (the last padded with
    zeros), so that every row's result is the same whatever other rows share the call."""
    import torch

    rows = x.reshape(-1, x.shape[-1])
    n = rows.shape[0]
    if n % BLOCK:
        rows = torch.cat([rows, rows.new_zeros(BLOCK - n % BLOCK, rows.shape[1])])
    out = torch.cat([torch.nn.functional.linear(block, weight, bias) for block in rows.split(BLOCK)])
    return out[:n].reshape(*x.shape[:-1], out.shape[-1])


# (module, function, the line of vLLM 0.29.0 the patch answers)
PATCHES = (
    ("vllm.model_executor.layers.linear", "UnquantizedLinearMethod.process_weights_after_loading",
     "dispatch_cpu_unquantized_gemm(layer, remove_weight=True)"),
    ("vllm.model_executor.layers.utils", "dispatch_cpu_unquantized_gemm",
     "layer.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)"),
)
