"""Attention over verl's packed micro-batches without a dense mask (``attn_implementation: vicurl_varlen``).

verl packs a micro-batch's responses into one row, their positions restarting at 0 at each sequence, with
no attention mask (``use_remove_padding``). Under SDPA, transformers sees the packing in the position ids
and builds a dense block-causal T x T mask (``masking_utils.create_causal_mask``): SDPA then loses its
causal flash kernel and computes every one of the T^2 pairs, about 9 times the useful attention work for a
16k pack of 4-5 responses. The flash-attn package would take the packed route, but it is sources only on
the package index (an nvcc build on every cluster).

Here each sequence attends causally to itself alone: a sequence starts at each row's first token and
wherever a position does not follow the one before (transformers' reading of packed position ids,
``find_packed_sequence_indices``; verl's packs restart at 0), and

    on a GPU (bf16 / fp16)   torch's own ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention's
                             variable-length kernel inside torch: no extra package), causal,
                             grouped-query heads as they are (no copy at the queries' width)
    on the CPU               ``scaled_dot_product_attention`` one segment at a time, causal

On a GPU another dtype is refused, at the run's start (``check_config``, from verl's composed config) and
in every pass: SDPA one segment at a time would stop the host twice a layer, and in fp32 with grouped heads
take SDPA's math kernel, which may run out of memory, with no word of it.

The boundaries are computed on the host once per forward pass (every layer, and checkpointing's recompute,
gets the same position-ids tensor): on a GPU each computation there would stop the host until the GPU
caught up, once a layer. A padded batch (a 2D attention mask, which verl's packed route never passes) is read the same way, each
row's unmasked tokens a segment. Registered with transformers' attention and mask interfaces at import;
verl imports this module in every process of a run (``VERL_USE_EXTERNAL_MODULES``, the launcher's
``VERL_MODULES``), before it builds a model.
"""

from __future__ import annotations

import functools
import inspect
import weakref

import torch
import torch.nn.functional as F

NAME = "vicurl_varlen"


def segments(position_ids: torch.Tensor) -> torch.Tensor:
    """The cumulative sequence boundaries (int32, starting 0, ending at the token count) of the sequences
    packed in ``position_ids`` ((B, T), or (T,) for one row), read row by row: one starts at each row's first
    token and wherever a position is not the previous one's plus 1."""
    rows = position_ids.reshape(-1, position_ids.shape[-1])
    start = torch.ones_like(rows, dtype=torch.bool)
    start[:, 1:] = rows.diff(dim=-1) != 1
    starts = start.reshape(-1).nonzero().view(-1)
    return torch.cat([starts, starts.new_tensor([start.numel()])]).to(torch.int32)


_last: tuple = (None, None, None)  # (weak reference to a position-ids tensor, its key, its boundaries)


def boundaries(position_ids: torch.Tensor, b: int, t: int) -> tuple[torch.Tensor, int]:
    """``segments`` of the (b, t) tokens whose positions are ``position_ids`` (one row for all rows, or one
    per row), on the positions' device, and the longest sequence; for the same tensor, unchanged, the last
    answer again (a forward pass asks once a layer)."""
    global _last
    ref, key, value = _last
    try:
        version = position_ids._version  # an in-place change to the positions moves it
    except RuntimeError:  # an inference-mode tensor has none: nothing cached
        version = None
    new_key = (b, t, version)
    if version is not None and ref is not None and ref() is position_ids and key == new_key:
        return value
    _refuse_sequence_parallel()
    cu = segments(position_ids.expand(b, t).cpu())  # one copy to the host; the rest of the work there
    value = cu.to(position_ids.device), int((cu[1:] - cu[:-1]).max())
    _last = (weakref.ref(position_ids), new_key, value) if version is not None else (None, None, None)
    return value


def _refuse_sequence_parallel() -> None:
    """verl's Ulysses sequence parallelism splits each sequence over ranks and patches only the flash-attn
    path to gather them: here each rank would attend to its own slice alone."""
    try:
        from verl.utils.ulysses import get_ulysses_sequence_parallel_world_size
    except ImportError:
        return
    if get_ulysses_sequence_parallel_world_size() > 1:
        raise ValueError(f"{NAME}: verl's ulysses_sequence_parallel_size > 1 needs attn_implementation "
                         "flash_attention_2 (the flash-attn package)")


def attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
              sliding_window: int | None = None, position_ids: torch.Tensor | None = None,
              softcap: float | None = None, s_aux: torch.Tensor | None = None, is_causal: bool | None = None,
              cu_seq_lens_q: torch.Tensor | None = None, cu_seq_lens_k: torch.Tensor | None = None,
              max_length_q: int | None = None, max_length_k: int | None = None, **kwargs):
    """transformers' attention interface: ``query`` (B, H, T, D), ``key``/``value`` (B, H_kv, T, D) ->
    (B, T, H, D), no attention weights. Boundaries a caller computed (flash attention's ``cu_seq_lens_*``)
    are taken as given; what this attention cannot compute is refused, never ignored."""
    for name, unsupported in (("attention dropout", dropout), ("logit soft-capping", softcap is not None),
                              ("attention sinks", s_aux is not None),
                              ("non-causal attention", not (getattr(module, "is_causal", True) if is_causal is None
                                                            else is_causal))):
        if unsupported:
            raise ValueError(f"{NAME}: {name} is not supported (the paper's models use none); set "
                             "attn_implementation: sdpa")
    if sliding_window is not None:
        raise ValueError(f"{NAME}: sliding-window attention is not supported; set attn_implementation: sdpa")
    b, h, t, d = query.shape
    if key.shape[2] != t or (cu_seq_lens_q is None) != (cu_seq_lens_k is None) or \
            (cu_seq_lens_q is not None and not torch.equal(cu_seq_lens_k, cu_seq_lens_q)):
        raise ValueError(f"{NAME}: keys and queries of different lengths (a KV cache): training passes only")
    q, k, v = (x.transpose(1, 2).reshape(b * t, x.shape[1], d) for x in (query, key, value))
    if cu_seq_lens_q is not None:
        cu = cu_seq_lens_q.to(device=query.device, dtype=torch.int32)
        longest = int(max_length_q) if max_length_q is not None else int((cu[1:] - cu[:-1]).max())
        out = packed(q, k, v, cu, longest, scaling)
    elif attention_mask is None and position_ids is not None:
        # a batch's rows each start a sequence; transformers passes one row of positions for all of them
        out = packed(q, k, v, *boundaries(position_ids, b, t), scaling)
    elif attention_mask is None:  # whole rows
        out = packed(q, k, v, torch.arange(0, b * t + 1, t, dtype=torch.int32, device=query.device), t, scaling)
    elif attention_mask.dim() == 2:  # a padded batch: each row's unmasked tokens are a sequence
        keep = attention_mask.reshape(-1).bool()
        lengths = attention_mask.bool().sum(-1).to(torch.int32)
        cu = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        out = q.new_zeros(q.shape)
        out[keep] = packed(q[keep], k[keep], v[keep], cu, int(lengths.max()), scaling)
    else:
        raise ValueError(f"{NAME}: takes a 2D padding mask or none, not a {attention_mask.dim()}D mask")
    return out.view(b, t, h, d), None


KERNEL_DTYPES = (torch.bfloat16, torch.float16)  # what torch's flash varlen kernel takes


def unsupported_dtype(dtype, where: str = "a forward pass") -> str:
    return (f"{NAME} on a GPU takes bf16 or fp16 (torch's flash varlen kernel), and {where} computes in {dtype}: "
            "keep the compute dtype bf16 (verl's actor_rollout_ref.{actor,ref}.fsdp_config.mixed_precision.param_dtype "
            "in verl.overrides) or set verl.attn_implementation: sdpa")


def check_config(config, cuda: bool | None = None) -> None:
    """On a GPU (``cuda``; default: whether this process sees one, as verl asks), the actor and the reference
    compute in a dtype the kernel takes where they use this attention: their FSDP ``mixed_precision.param_dtype``,
    bf16 where none is set (verl 0.9.1's FSDP engine, ``_build_fsdp_module``). Called before any model is built."""
    from verl.utils.device import is_cuda_available
    from verl.utils.torch_dtypes import PrecisionType

    arr = config.actor_rollout_ref
    cuda = is_cuda_available if cuda is None else cuda
    if str((arr.model.get("override_config") or {}).get("attn_implementation")) != NAME or not cuda:
        return
    for role in ("actor", "ref"):
        mixed = arr[role].fsdp_config.get("mixed_precision") or {}
        dtype = PrecisionType.to_dtype(mixed.get("param_dtype", "bf16"))
        if dtype not in KERNEL_DTYPES:
            raise ValueError(unsupported_dtype(dtype, f"the {role} (fsdp_config.mixed_precision.param_dtype)"))


def packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor, longest: int,
           scale: float | None) -> torch.Tensor:
    """Causal attention of each segment ``cu[i]:cu[i+1]`` (the longest ``longest`` tokens) of the packed
    (T, H, D) tensors to itself."""
    if q.is_cuda:
        if q.dtype not in KERNEL_DTYPES:
            raise ValueError(unsupported_dtype(q.dtype))
        return varlen_kernel(q, k, v, cu, longest, scale)
    return by_segment(q, k, v, cu, scale)


def by_segment(q, k, v, cu, scale):
    """The CPU's route: SDPA, causal, one segment at a time."""
    out = []
    for start, end in zip(cu[:-1].tolist(), cu[1:].tolist()):
        seg = [x[start:end].transpose(0, 1).unsqueeze(0) for x in (q, k, v)]  # (1, H, L, D)
        o = F.scaled_dot_product_attention(*seg, is_causal=True, scale=scale, enable_gqa=seg[0].shape[1] != seg[1].shape[1])
        out.append(o[0].transpose(0, 1))
    return torch.cat(out) if out else q.new_zeros(q.shape)


def varlen_kernel(q, k, v, cu, max_len, scale):
    """torch's variable-length flash attention, causal, by the keywords its version takes (its signature
    has changed between releases): causal as ``window_size=(-1, 0)``, else ``is_causal``; the scale as
    ``scale``, else folded into the queries (the kernel's own is 1/sqrt(head dim)). Grouped-query heads go
    in as they are: every release calls ATen's flash kernel, which takes fewer key/value heads than query
    heads (their gradients at their width); the later ones ask ``enable_gqa=True`` before they pass them
    on. Repeated heads would cost a copy of the keys and values at the queries' width in every layer, kept
    for the backward."""
    from torch.nn.attention.varlen import varlen_attn

    params = _varlen_parameters()
    kwargs = {"window_size": (-1, 0)} if "window_size" in params else {"is_causal": True}
    if "scale" in params:
        kwargs["scale"] = scale
    elif scale is not None:
        q = q * (scale * q.shape[-1] ** 0.5)
    if k.shape[1] != q.shape[1] and "enable_gqa" in params:
        kwargs["enable_gqa"] = True  # where the flag exists it only lifts a check: the kernel is the same
    return varlen_attn(q, k, v, cu, cu, max_len, max_len, **kwargs)


@functools.lru_cache(maxsize=1)
def _varlen_parameters() -> frozenset[str]:
    from torch.nn.attention.varlen import varlen_attn

    return frozenset(inspect.signature(varlen_attn).parameters)


def register() -> None:
    """``NAME`` as transformers' attention implementation, with flash attention's mask function: no mask
    where nothing is padded (verl's packed micro-batches), the 2D padding mask otherwise."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    AttentionInterface.register(NAME, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, flash_attention_mask)


register()
