"""Shared fixtures: a tiny random causal LM with a character tokenizer, saved in HF format."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

def _real_benchmarks():
    """tests/real_benchmarks.py (not a package module: pytest runs with --import-mode=importlib)."""
    spec = importlib.util.spec_from_file_location("real_benchmarks", Path(__file__).with_name("real_benchmarks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHARS = list("0123456789+-*=. ()<>/\\{}abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'\n,$:?")


def make_char_model(path, seed: int = 0, hidden: int = 32, layers: int = 1):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>")
    torch.manual_seed(seed)
    # Llama, not Qwen2: transformers 5 reloads any qwen2 checkpoint with Qwen2's own tokenizer class
    cfg = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, tie_word_embeddings=True,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


BOS = "<s>"
# Llama 3's chat template renders its own BOS: a tokenizer that also adds one doubles it
BOS_CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
                     "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def make_bos_model(path):
    """A tiny Llama whose tokenizer adds a BOS (a TemplateProcessing post-processor, as Llama's and
    R1-Distill's do) and whose chat template renders one too; character-level, built offline. Head size
    32: the smallest vLLM's CPU attention serves."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", BOS, "<|user|>", "<|assistant|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for c in "0123456789+-*=. ()<>/\\{}abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'\n,$:?":
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tk.add_special_tokens(specials)  # matched whole in text, before the character split
    tk.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token=BOS)
    tok.chat_template = BOS_CHAT_TEMPLATE
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=vocab[BOS])
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def bos_model_dir(tmp_path_factory):
    return str(make_bos_model(tmp_path_factory.mktemp("bos_model") / "model"))


@pytest.fixture(scope="module")
def small_pool():
    """A 2-worker symbolic grading pool with a 10 s timeout, closed after the module."""
    from vicurl.grading import symbolic

    pool = symbolic.configure(workers=2, timeout=10)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def char_model_dir(tmp_path_factory):
    return make_char_model(tmp_path_factory.mktemp("char_model") / "model")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    d = _real_benchmarks().find_benchmarks()
    if d is None:
        pytest.skip("real benchmark files not found: set VICURL_BENCHMARKS to the shared/data/benchmarks folder")
    assert d.is_dir(), f"VICURL_BENCHMARKS={d} is not a folder"
    return d
