"""The bf16 reference keeps its rotary frequencies in float32.

verl 0.9.1 builds each model with ``module.to(torch_dtype)`` after ``from_pretrained``
(``FSDPEngine._build_module``, workers/engine/fsdp/transformer_impl.py). For the reference, whose
``ref.fsdp_config.model_dtype`` the launcher sets to bf16 (``vicurl_ppo_trainer.yaml``), that cast also
rounds the rotary embeddings' float32 frequencies (`vicurl.models.rope`): the reference would compute
its log-probs with other rotations than the actor (float32 weights under FSDP's mixed precision, which
casts parameters only) and vLLM, and the KL term would be non-zero at step 1, growing with the position.
Here the built module gets its float32 frequencies back, on every rank alike (verl then broadcasts the
buffers from rank 0). A float32 model (the actor) is left as it is.

verl imports this module in every process of a run (the launcher names it in ``VERL_USE_EXTERNAL_MODULES``:
`vicurl.engines.verl.launch.VERL_MODULES`). ``PATCHES`` names the verl line this answers
(`vicurl.rehearsal.cpu.stale_patches` checks it).
"""

from __future__ import annotations

import functools

from verl.workers.engine.fsdp import transformer_impl

from vicurl.models import rope

# (module, function, the line of verl 0.9.1 this answers)
PATCHES = (
    ("verl.workers.engine.fsdp.transformer_impl", "FSDPEngine._build_module", "module.to(torch_dtype)"),
)


def _rope_in_fp32(build):
    @functools.wraps(build)
    def _build_module(self):
        module = build(self)
        rope.restore_fp32(module)
        return module

    _build_module.vicurl_rope_fp32 = True
    return _build_module


if not getattr(transformer_impl.FSDPEngine._build_module, "vicurl_rope_fp32", False):
    transformer_impl.FSDPEngine._build_module = _rope_in_fp32(transformer_impl.FSDPEngine._build_module)
