"""A model cast to bf16 keeps its rotary frequencies in float32.

transformers computes a rotary embedding's inverse frequencies (the buffers ``inv_freq`` and
``original_inv_freq``) in float32, and each position's angle from them in float32: ``from_pretrained``
in bf16 keeps them so. ``module.to(torch.bfloat16)`` casts buffers too: each frequency is rounded to 8
bits of mantissa (a relative error up to 2^-9), and the angle multiplies that error by the position: at
position 3,500 up to 4.3 radians (base 10,000, head dimension 128: Qwen2.5-Math), 4.0 (base 10^6: Qwen2.5-7B)
or 6.3 (500,000: Llama 3.2). A model cast so attends with other rotations than the
same weights in vLLM, in ``from_pretrained``'s bf16 or under FSDP's mixed precision (which casts
parameters, not buffers). verl casts the reference so when ``ref.fsdp_config.model_dtype`` is bf16
(`vicurl.engines.verl.patches.rope_fp32`), the local engine its bf16 sampler.
"""

from __future__ import annotations

import torch


def frequencies(rotary: torch.nn.Module, device) -> torch.Tensor:
    """The float32 inverse frequencies ``rotary`` (a transformers rotary embedding) computed at its
    construction, from its config."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope_type = getattr(rotary, "rope_type", None)
    if rope_type == "default" and hasattr(rotary, "compute_default_rope_parameters"):
        init = rotary.compute_default_rope_parameters
    elif rope_type in ROPE_INIT_FUNCTIONS:
        init = ROPE_INIT_FUNCTIONS[rope_type]
    else:
        raise ValueError(f"{type(rotary).__name__}: cannot recompute its rotary frequencies (rope type "
                         f"{rope_type!r}); keep this model in float32 where verl or the local engine casts it")
    inv_freq, _ = init(rotary.config, device)
    return inv_freq.float()


def restore_fp32(model: torch.nn.Module) -> int:
    """Give every rotary embedding of ``model`` whose frequencies a cast rounded its float32 frequencies
    again (recomputed from its config, checked to round to the cast's values); returns how many."""
    restored = 0
    for name, module in model.named_modules():
        rounded = module._buffers.get("inv_freq")
        if rounded is None or rounded.dtype == torch.float32:
            continue
        fresh = frequencies(module, rounded.device)
        if not rounded.is_meta and not torch.equal(fresh.to(rounded.dtype), rounded):
            raise ValueError(f"{name or type(model).__name__}.inv_freq is not its config's frequencies rounded to "
                             f"{rounded.dtype} (a dynamic RoPE updated them?): cannot restore them")
        module.inv_freq = fresh
        if "original_inv_freq" in module._buffers:
            module.original_inv_freq = fresh.clone()
        restored += 1
    return restored


def cast(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``model.to(dtype)``, its rotary frequencies kept in float32."""
    model = model.to(dtype)
    restore_fp32(model)
    return model
