"""vicurl.planning.memory's activation count against what a decoder layer saves for its backward."""

from __future__ import annotations

import pytest
import torch

from vicurl.planning.cost import model_classes
from vicurl.planning.memory import layer_bytes

from harness import REPO


def saved_bytes(layer, x: torch.Tensor, position_embeddings) -> int:
    """The bytes of every tensor autograd keeps for the backward of one forward of ``layer``, each storage once,
    the weights aside; the layer's input counted (in a stack it is the previous layer's output, which this
    layer's norm keeps)."""
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x, attention_mask=None, position_ids=None, position_embeddings=position_embeddings)
    kept.setdefault(x.untyped_storage().data_ptr(), x.untyped_storage().nbytes())
    return sum(kept.values())


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_a_layers_saved_activations_are_the_formulas(kind):
    """A decoder layer in bf16 under sdpa (a causal sequence: the flash kernel, which keeps q, k, v, the output
    and the log-sum-exp, as the GPU's flash and varlen kernels do), grouped-query heads: the tensors it keeps for
    its backward come to `layer_bytes` a token, to within the log-sum-exp and the rotary tables (under 3 %):
    the count the estimate of the update without checkpointing multiplies by tokens and layers."""
    h, i, heads, kv_heads, t = 512, 1536, 8, 2, 256
    cfg_cls, model_cls = model_classes(kind)
    cfg = cfg_cls(hidden_size=h, intermediate_size=i, num_hidden_layers=1, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, vocab_size=64, attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    model = model_cls(cfg).to(torch.bfloat16)
    x = torch.randn(1, t, h, dtype=torch.bfloat16, requires_grad=True)
    rope = model.model.rotary_emb(x, torch.arange(t)[None])
    measured = saved_bytes(model.model.layers[0], x, rope) / t
    formula = layer_bytes(h, i, kv_heads * h // heads)
    assert formula <= measured <= 1.03 * formula, (measured, formula)


def test_the_paper_configs_update_budgets_follow_the_margin_rule():
    """config/paper.yaml's update budgets: the 1.5B models' hold two sequences at the cap (verl never packs past a
    budget) and, like the 3B's, leave a fifth of a 40 GB A100 free by the estimate; each is the largest multiple of
    512 that does. The logits factors are those measurements/gpu_memory.py measures (docs/paper.md, "GPU memory"), rounded up:
    measuring them takes a minute and a half."""
    import dataclasses

    import yaml

    from vicurl.config.settings import VerlSettings
    from vicurl.planning.memory import estimate, largest_budget, shape

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    base, factors = VerlSettings.from_dict(paper["verl"]), (5.2, 2.9)
    two = 2 * (paper["train"]["max_prompt_length"] + paper["train"]["max_response_length"])
    for name in ("qwen_math_1.5b", "r1_distill_1.5b", "llama_3b_instruct"):
        m, v = shape(paper["models"][name]["hub_id"]), base.for_model(name)
        assert not v.gradient_checkpointing
        assert estimate(m, v, 40, factors)["peak"] <= 0.8 * 40, name
        assert largest_budget(m, v, 40, factors, margin=0.2) == v.max_token_len_per_gpu, name
        if "1.5b" in name:
            assert v.max_token_len_per_gpu >= two, name
        else:  # two sequences at the cap would not leave the margin
            assert estimate(m, dataclasses.replace(v, max_token_len_per_gpu=two), 40, factors)["peak"] > 0.8 * 40
