"""`vicurl.models.rope`: a model cast to bf16 keeps its rotary frequencies in float32."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from vicurl.models import rope

SIZES = dict(vocab_size=50, hidden_size=256, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=4096)


def qwen2():
    """Qwen2.5-Math's rotary embedding: the default type, base 10,000, head dimension 128."""
    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(**SIZES, rope_theta=10_000.0))


def llama3():
    """Llama 3.2's: the llama3 type (its own init function), base 500,000."""
    torch.manual_seed(0)
    scaling = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    return LlamaForCausalLM(LlamaConfig(**SIZES, rope_theta=500_000.0, rope_scaling=scaling))


@pytest.mark.parametrize("build", [qwen2, llama3])
def test_a_cast_model_attends_as_from_pretrained_in_bf16(build, tmp_path):
    """``rope.cast`` to bf16 gives the model ``from_pretrained`` loads in bf16 (float32 frequencies): the same
    logits bit for bit at positions 3,000-3,015; ``.to(bf16)`` alone rounds the frequencies, by up to 4.3
    radians of angle at position 3,500 (base 10,000), and the logits differ."""
    model = build()
    model.save_pretrained(tmp_path)
    ids = torch.randint(0, SIZES["vocab_size"], (1, 16), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(3000, 3016)[None]

    def logits(m):
        with torch.no_grad():
            return m(input_ids=ids, position_ids=positions, use_cache=False).logits

    want = logits(AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16))
    rotary = model.model.rotary_emb
    assert rotary.inv_freq.dtype == torch.float32

    rounded = copy.deepcopy(model).to(torch.bfloat16)
    assert rounded.model.rotary_emb.inv_freq.dtype == torch.bfloat16
    angle_error = (rounded.model.rotary_emb.inv_freq.float() - rotary.inv_freq).abs().max() * 3500
    assert angle_error > 0.5, angle_error
    assert not torch.equal(logits(rounded), want)

    cast = rope.cast(copy.deepcopy(model), torch.bfloat16)
    assert next(cast.parameters()).dtype == torch.bfloat16
    for name in ("inv_freq", "original_inv_freq"):
        buffer = getattr(cast.model.rotary_emb, name)
        assert buffer.dtype == torch.float32 and torch.equal(buffer, getattr(rotary, name)), name
    assert "inv_freq" not in cast.state_dict()  # still not saved with the weights
    assert torch.equal(logits(cast), want)
    assert rope.restore_fp32(cast) == 0 and rope.restore_fp32(model) == 0  # float32 already: left as they are


def test_frequencies_it_cannot_recompute_are_refused():
    """A rotary type without an init function, or frequencies that are not the config's (a dynamic RoPE
    updates them as it goes), raise naming the module rather than being replaced by something else."""
    model = qwen2().to(torch.bfloat16)
    model.model.rotary_emb.inv_freq[3] *= 2
    with pytest.raises(ValueError, match="model.rotary_emb.inv_freq is not its config's frequencies"):
        rope.restore_fp32(model)

    model = qwen2().to(torch.bfloat16)
    model.model.rotary_emb.rope_type = "made_up"
    with pytest.raises(ValueError, match="Qwen2RotaryEmbedding: cannot recompute its rotary frequencies"):
        rope.restore_fp32(model)
