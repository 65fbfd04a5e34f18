"""What verl's weight sync does to vLLM's model, for `test_vllm_engine.py` to run in vLLM's worker
(``LLM.apply_model``; the worker imports this module by name, so it is a module of its own)."""

import torch


def load_in_place(model) -> tuple[bool, float]:
    """``model.load_weights`` with Hugging Face names, in place, as verl's sync calls it: the embedding
    (tied to the lm_head) zeroed and one projection doubled. Returns whether every 2-D linear weight
    kept its loader, and how far the projection is from the doubled tensor."""
    params = dict(model.named_parameters())
    proj = params["model.layers.0.self_attn.o_proj.weight"]
    doubled = 2 * proj.detach().clone()
    embedding = model.model.embed_tokens  # vLLM pads its rows to a multiple of 64; verl sends the model's own
    model.load_weights([("model.embed_tokens.weight", torch.zeros(embedding.org_vocab_size, embedding.embedding_dim)),
                        ("model.layers.0.self_attn.o_proj.weight", doubled)])
    loaders = all(hasattr(m.weight, "weight_loader") for m in model.modules()
                  if hasattr(m, "quant_method") and getattr(m, "weight", None) is not None and m.weight.ndim == 2)
    return loaders, float((proj.detach() - doubled).abs().max())
