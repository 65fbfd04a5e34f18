"""The CPU demo's base model: a byte-level BPE tokenizer and a tiny Qwen2 trained from scratch.

``build_base_model`` trains the tokenizer on the SFT prompts and solutions, builds a small
``Qwen2ForCausalLM``, fine-tunes it on ``prompt + solution + EOS`` (loss on the response
only) and saves both in Hugging Face format, so the rest of the pipeline loads it with
``AutoModelForCausalLM`` / ``AutoTokenizer`` exactly like a hub model.

Tokenization: digits are always single tokens (``Digits(individual_digits=True)``); every
other run of characters is byte-level BPE, which may merge across spaces (the fixed
instruction text becomes a handful of tokens, keeping CPU sequences short). Byte-level
encoding makes ``decode(encode(x)) == x`` for any text. Prompt and response are encoded
separately and concatenated, exactly as generation sees them (prompt encoded alone,
response generated token by token).
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import torch

from vicurl.io import atomic_path
from vicurl.prompts import build_prompt

PAD_TOKEN = "<|pad|>"
EOS_TOKEN = "<|endoftext|>"

DEFAULT_CFG: dict[str, Any] = {
    "vocab_size": 384,
    "prompt_order": "question_first",
    "max_length": 128,  # tokenizer.model_max_length: prompt + response
    "arch": {
        "hidden_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 384,
        "max_position_embeddings": 128,
        "rope_theta": 10000.0,
    },
    "sft": {
        "steps": 600,
        "batch_size": 32,
        "lr": 2e-3,
        "warmup": 30,
        "min_lr_ratio": 0.1,  # cosine decay from lr down to lr * min_lr_ratio
        "weight_decay": 0.01,
        "grad_clip": 1.0,
        "length_bucket": 16,  # sort by length within windows of 16 batches (less padding)
    },
}


def merge_cfg(cfg: Mapping[str, Any] | None, base: Mapping[str, Any] = DEFAULT_CFG) -> dict[str, Any]:
    """``base`` updated recursively with ``cfg`` (nested dicts merge, everything else replaces)."""
    out = copy.deepcopy(dict(base))
    for k, v in (cfg or {}).items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_cfg(v, out[k])
        else:
            out[k] = copy.deepcopy(v)
    return out


# ----------------------------------------------------------------------------- tokenizer


def build_tokenizer(texts, vocab_size: int, model_max_length: int = 128):
    """Byte-level BPE trained on ``texts`` with individually split digits.

    Returns a ``transformers`` fast tokenizer with pad and EOS tokens; no BOS, no UNK (every
    byte is in the vocabulary) and no special tokens added on encode.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    special = [PAD_TOKEN, EOS_TOKEN]
    if vocab_size < len(alphabet) + len(special):
        raise ValueError(f"vocab_size must be >= {len(alphabet) + len(special)} (bytes + specials), got {vocab_size}")
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        special_tokens=special,
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        model_max_length=int(model_max_length),
        clean_up_tokenization_spaces=False,
        padding_side="right",
    )


def tokenizer_texts(df: pd.DataFrame, prompt_order: str = "question_first") -> list[str]:
    """What the tokenizer is trained on: every prompt and every solution, as separate texts."""
    prompts = [build_prompt(q, prompt_order) for q in df["question"]]
    return prompts + list(df["solution"])


# ----------------------------------------------------------------------------- model


def build_model(tokenizer, arch: Mapping[str, Any], seed: int):
    """A freshly initialised ``LlamaForCausalLM`` sized by ``arch`` (tied embeddings).

    Llama rather than Qwen2: ``AutoTokenizer`` forces Qwen2's own tokenizer class (and its
    pre-tokenizer) onto any ``model_type: qwen2`` checkpoint, which would silently re-tokenize
    our digit-split BPE differently after a reload; for Llama it keeps the saved tokenizer.
    The architecture (RMSNorm, RoPE, SwiGLU, GQA) is the same as Qwen2's minus the q/k/v biases.
    """
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    arch = dict(arch)
    rope_theta = float(arch.pop("rope_theta", 10000.0))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=int(arch.pop("hidden_size")),
        intermediate_size=int(arch.pop("intermediate_size")),
        num_hidden_layers=int(arch.pop("num_hidden_layers")),
        num_attention_heads=int(arch.pop("num_attention_heads")),
        num_key_value_heads=int(arch.pop("num_key_value_heads")),
        max_position_embeddings=int(arch.pop("max_position_embeddings", 128)),
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **arch,  # anything else LlamaConfig accepts (rms_norm_eps, initializer_range, head_dim, ...)
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model


# ----------------------------------------------------------------------------- SFT


def encode_sft(tokenizer, questions, solutions, prompt_order: str = "question_first"):
    """Token ids and labels of ``prompt + solution + EOS``; prompt labels are -100."""
    prompts = [build_prompt(q, prompt_order) for q in questions]
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    r_ids = tokenizer(list(solutions), add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    ids = [p + r + [eos] for p, r in zip(p_ids, r_ids)]
    labels = [[-100] * len(p) + r + [eos] for p, r in zip(p_ids, r_ids)]
    return ids, labels


def _collate(ids, labels, pad_id: int):
    width = max(len(x) for x in ids)
    inp = torch.full((len(ids), width), pad_id, dtype=torch.long)
    lab = torch.full((len(ids), width), -100, dtype=torch.long)
    att = torch.zeros((len(ids), width), dtype=torch.long)
    for i, (x, y) in enumerate(zip(ids, labels)):
        inp[i, : len(x)] = torch.tensor(x)
        lab[i, : len(y)] = torch.tensor(y)
        att[i, : len(x)] = 1
    return inp, att, lab


def batch_order(lengths: list[int], batch_size: int, gen: torch.Generator, bucket: int = 16) -> list[list[int]]:
    """One epoch of batches: shuffle, sort by length within windows of ``bucket`` batches
    (less padding), then shuffle the batches. ``bucket <= 1`` gives plain random batches."""
    perm = torch.randperm(len(lengths), generator=gen).tolist()
    batches = []
    window = batch_size * max(1, int(bucket))
    for start in range(0, len(perm), window):
        chunk = perm[start : start + window]
        if bucket > 1:
            chunk = sorted(chunk, key=lambda i: lengths[i])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    batches = [b for b in batches if len(b) == batch_size] or batches  # drop ragged tails
    return [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]


def lr_lambda(step: int, steps: int, warmup: int, min_lr_ratio: float) -> float:
    """Linear warmup to 1, then cosine decay to ``min_lr_ratio`` at ``steps``."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def sft(
    model,
    tokenizer,
    df: pd.DataFrame,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    prompt_order: str = "question_first",
    warmup: int = 30,
    min_lr_ratio: float = 0.1,
    weight_decay: float = 0.01,
    grad_clip: float = 1.0,
    length_bucket: int = 16,
    log_every: int = 0,
) -> dict[str, Any]:
    """Supervised fine-tuning on ``build_prompt(question) + solution + EOS`` (response-only loss).

    AdamW with linear warmup and cosine decay; batches are drawn epoch by epoch from a
    permutation seeded by ``seed``, so the run is deterministic for a fixed thread count.
    """
    ids, labels = encode_sft(tokenizer, df["question"], df["solution"], prompt_order)
    too_long = [i for i, x in enumerate(ids) if len(x) > tokenizer.model_max_length]
    if too_long:
        raise ValueError(
            f"{len(too_long)} SFT example(s) exceed model_max_length={tokenizer.model_max_length} tokens "
            f"(first: row {too_long[0]}, {len(ids[too_long[0]])} tokens)"
        )
    gen = torch.Generator().manual_seed(int(seed))
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.98),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_lambda(s, steps, warmup, min_lr_ratio))
    model.train()
    lengths = [len(x) for x in ids]
    queue: list[list[int]] = []
    losses: list[float] = []
    n_tokens = 0
    t0 = time.perf_counter()
    for step in range(int(steps)):
        if not queue:
            queue = batch_order(lengths, batch_size, gen, length_bucket)
        idx = queue.pop(0)
        inp, att, lab = _collate([ids[i] for i in idx], [labels[i] for i in idx], tokenizer.pad_token_id)
        loss = model(input_ids=inp, attention_mask=att, labels=lab).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        n_tokens += int(att.sum())
        if log_every and (step + 1) % log_every == 0:
            print(f"sft step {step + 1}/{steps} loss {sum(losses[-log_every:]) / log_every:.4f} "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
    model.eval()
    seconds = time.perf_counter() - t0
    tail = losses[-min(len(losses), 20):] or [float("nan")]
    return {
        "steps": int(steps),
        "first_loss": losses[0] if losses else float("nan"),
        "final_loss": sum(tail) / len(tail),
        "tokens": n_tokens,
        "seconds": seconds,
        "tokens_per_s": n_tokens / seconds if seconds > 0 else float("nan"),
        "examples": len(ids),
    }


# ----------------------------------------------------------------------------- build


def build_base_model(sft_df: pd.DataFrame, out_dir: str | Path, cfg: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """Tokenizer + tiny Qwen2 + SFT, saved atomically in Hugging Face format into ``out_dir``.

    ``cfg`` overrides ``DEFAULT_CFG`` (nested merge). Returns the build metrics, which are
    also written to ``out_dir/build_metrics.json``.
    """
    cfg = merge_cfg(cfg)
    t0 = time.perf_counter()
    order = cfg["prompt_order"]
    tokenizer = build_tokenizer(tokenizer_texts(sft_df, order), cfg["vocab_size"], cfg["max_length"])
    model = build_model(tokenizer, cfg["arch"], seed)
    sft_cfg = dict(cfg["sft"])
    metrics = sft(
        model,
        tokenizer,
        sft_df,
        steps=int(sft_cfg.pop("steps")),
        batch_size=int(sft_cfg.pop("batch_size")),
        lr=float(sft_cfg.pop("lr")),
        seed=seed,
        prompt_order=order,
        **sft_cfg,
    )
    metrics.update(
        {
            "n_params": sum(p.numel() for p in model.parameters()),
            "vocab_size": len(tokenizer),
            "build_seconds": time.perf_counter() - t0,
            "seed": int(seed),
            "cfg": cfg,
        }
    )
    with atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (Path(tmp) / "build_metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
    return metrics


def load_base_model(path: str | Path):
    """(model, tokenizer) from a directory written by ``build_base_model``, in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model, tokenizer
