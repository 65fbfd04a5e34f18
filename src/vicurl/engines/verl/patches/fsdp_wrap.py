"""An untied LM head stays in the root FSDP2 unit when verl's fused kernels are on.

verl 0.9.1 wraps an untied ``lm_head`` as an FSDP2 unit of its own (``verl/utils/fsdp_utils.py``,
``_select_fsdp2_wrap_targets``), but the fused forward (``verl/models/transformers/dense_common.py``)
reads ``self.lm_head.weight`` directly, never calling that unit's forward, so the weight is never
unsharded and the matmul meets a sharded DTensor (``aten.mm.default: got mixed torch.Tensor and
DTensor``; verl issue #7520). In the root unit it is unsharded with the root's own parameters for the
whole forward and backward. Two of the paper's four models are untied (R1-Distill-Qwen-1.5B,
Qwen2.5-Math-7B); tied models are wrapped as before.

The cost: the root unit is gathered for the whole forward and the whole backward (it holds the others), so
the head is whole on every rank during both (vocabulary x hidden x 2 bytes: 0.47 GB at the 1.5B shape,
1.09 GB at 7B) where a unit of its own is gathered around its matmul only; between them and after the step it
is sharded as before (verl passes ``reshard_after_forward=True``, workers/engine/fsdp/transformer_impl.py).

verl imports this module in every process of a run (the launcher names it in ``VERL_USE_EXTERNAL_MODULES``:
`vicurl.engines.verl.launch.verl_environment`), on a GPU and a CPU. ``PATCHES`` names the verl line this
answers (`vicurl.rehearsal.cpu.stale_patches` checks it).
"""

from __future__ import annotations

import functools

from verl.utils import fsdp_utils


def fused_untied_head(model) -> bool:
    """Whether ``model``'s forward reads an untied ``lm_head.weight`` directly: verl's
    ``patch_forward_with_backends`` marks a model it gave the fused forward."""
    return (getattr(model, "_verl_fused_kernels_backend", None) is not None
            and not getattr(model.config, "tie_word_embeddings", False))


def _head_in_root(select):
    @functools.wraps(select)
    def wrap_targets(model, fsdp_transformer_layer_cls_to_wrap):
        modules = select(model, fsdp_transformer_layer_cls_to_wrap)
        if not fused_untied_head(model):
            return modules
        head = model.get_output_embeddings()
        return [m for m in modules if m is not head]

    wrap_targets.vicurl_head_in_root = True
    return wrap_targets


# (module, function, the line of verl 0.9.1 this answers)
PATCHES = (
    ("verl.utils.fsdp_utils", "_select_fsdp2_wrap_targets", '_wrap_by_name = set() if _tie else {"embed_tokens", "lm_head"}'),
)

# apply_fsdp2 looks the function up in fsdp_utils' globals at each call: replacing the name suffices
if not getattr(fsdp_utils._select_fsdp2_wrap_targets, "vicurl_head_in_root", False):
    fsdp_utils._select_fsdp2_wrap_targets = _head_in_root(fsdp_utils._select_fsdp2_wrap_targets)
