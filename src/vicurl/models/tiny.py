"""The CPU demo's base model: a byte-level BPE tokenizer and a tiny Llama trained from scratch,
saved in Hugging Face format so the pipeline loads it like a hub model (``build_base_model``).

Tokenization: digits are always single tokens; every other run of characters is byte-level BPE,
which may merge across spaces (the fixed instruction text becomes a handful of tokens, keeping CPU
sequences short) and makes ``decode(encode(x)) == x`` for any text. Prompt and response are encoded
separately and concatenated, exactly as generation sees them. SFT recipe (``DEFAULT_CFG``,
calibrated on one CPU thread; ``git show a84f61c:measurements/tiny_calibration.py`` printed the numbers): the loss on
the response only, examples packed into rows, the loss averaged per example (long, hard solutions
do not drown out short ones) and a length curriculum (the shortest third first, then a growing
pool). Without the last two a model this small learns neither easy nor hard problems within the
time budget; with them it gets the easy levels mostly right and the hard ones mostly wrong, which
is what the RL stage needs.
"""

from __future__ import annotations

import copy
import json
import math
import time
import warnings
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
import torch

from vicurl.data.prompts import build_prompt, prompt_token_ids
from vicurl.runtime.io import atomic_path
from vicurl.runtime.provenance import cpu_info

PAD_TOKEN = "<|pad|>"
EOS_TOKEN = "<|endoftext|>"

DEFAULT_CFG: dict[str, Any] = {
    "vocab_size": 384,  # 256 bytes + 2 specials + ~126 merges (the instruction merges into ~5 tokens)
    "prompt_order": "question_first",
    "max_length": 128,  # tokenizer.model_max_length: prompt + response (also the packed row length)
    "arch": {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 512,
        "max_position_embeddings": 256,  # RoPE: headroom only, SFT sequences are <= 128 tokens
        "rope_theta": 200.0,  # short sequences: finer relative positions learn faster than 1e4
    },
    "sft": {
        "steps": 800,
        "batch_size": 32,
        "lr": 3e-3,
        "warmup": 30,
        "min_lr_ratio": 0.1,  # cosine decay from lr down to lr * min_lr_ratio
        "weight_decay": 0.01,
        "grad_clip": 1.0,
        "pack": True,  # pack examples into rows of max_length tokens (no compute on padding)
        "example_mean": True,  # loss: mean over each example's tokens, then over examples
        "curriculum": 0.75,  # all examples in the pool from 75% of the steps on
        "curriculum_start": 0.34,  # the shortest third of the solutions first ...
        "curriculum_hold": 0.4,  # ... for the first 40% of the steps
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
    p_ids = [prompt_token_ids(tokenizer, p) for p in prompts]  # as the samplers condition on them
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


def _pack(ids, labels, pad_id: int, row_len: int):
    """Pack examples into rows of ``row_len`` tokens (first fit, longest first).

    Position ids restart at 0 for every example; with ``attention_mask=None`` transformers
    turns that into a block-diagonal causal mask, so packed examples never see each other and
    the loss equals that of the padded batch, without computing on padding.
    """
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    rows: list[list[int]] = []
    room: list[int] = []
    for i in order:
        if len(ids[i]) > row_len:
            raise ValueError(f"example of {len(ids[i])} tokens does not fit a packed row of {row_len}")
        for r, free in enumerate(room):
            if free >= len(ids[i]):
                rows[r].append(i)
                room[r] -= len(ids[i])
                break
        else:
            rows.append([i])
            room.append(row_len - len(ids[i]))
    width = max(row_len - min(room), 1)
    inp = torch.full((len(rows), width), pad_id, dtype=torch.long)
    lab = torch.full((len(rows), width), -100, dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    for r, members in enumerate(rows):
        at = 0
        for i in members:
            n = len(ids[i])
            inp[r, at : at + n] = torch.tensor(ids[i])
            lab[r, at : at + n] = torch.tensor(labels[i])
            pos[r, at : at + n] = torch.arange(n)
            at += n
        pos[r, at:] = torch.arange(width - at)  # the padding tail is a segment of its own
    return inp, pos, lab


def _example_mean_loss(logits, labels, position_ids=None):
    """Cross-entropy averaged over each example's response tokens, then over examples
    (a packed row holds several examples: they start where ``position_ids`` is 0)."""
    logits, target = logits[:, :-1].float(), labels[:, 1:]
    tok_loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100, reduction="none"
    ).view(target.shape)
    valid = (target != -100).float()
    if position_ids is None:
        seg = torch.zeros_like(target)
    else:
        seg = torch.cumsum((position_ids == 0).long(), dim=-1)[:, 1:]  # example index within its row
    seg = seg + torch.arange(target.shape[0]).unsqueeze(1) * (target.shape[1] + 1)
    _, seg = torch.unique(seg, return_inverse=True)
    n = int(seg.max()) + 1
    sums = torch.zeros(n).index_add_(0, seg.reshape(-1), (tok_loss * valid).reshape(-1))
    counts = torch.zeros(n).index_add_(0, seg.reshape(-1), valid.reshape(-1))
    keep = counts > 0
    return (sums[keep] / counts[keep]).mean()


def pool_share(step: int, steps: int, curriculum: float, start: float, hold: float = 0.0) -> float:
    """Share of the examples (shortest first) a curriculum batch at ``step`` draws from:
    ``start`` until ``hold * steps``, then growing linearly to 1 at ``curriculum * steps``."""
    if curriculum <= 0:
        return 1.0
    t0, t1 = hold * steps, max(curriculum * steps, hold * steps + 1.0)
    if step < t0:
        return start
    return min(1.0, start + (1.0 - start) * (step - t0) / (t1 - t0))


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
    pack: bool = True,
    example_mean: bool = True,
    curriculum: float = 0.75,
    curriculum_start: float = 0.34,
    curriculum_hold: float = 0.4,
    log_every: int = 0,
) -> dict[str, Any]:
    """Supervised fine-tuning on ``build_prompt(question) + solution + EOS`` (response-only loss).

    AdamW with linear warmup and cosine decay. Deterministic given ``seed`` (for a fixed
    thread count).

    Batches: without a curriculum (``curriculum=0``) examples are drawn epoch by epoch from
    seeded permutations. With ``curriculum=f > 0`` (a length-based competence curriculum)
    each batch is drawn uniformly from the pool of the shortest responses: the shortest
    ``curriculum_start`` share until ``curriculum_hold * steps``, then a pool growing linearly
    to all examples at ``f * steps``, then plain epochs. Batches stay mixed within the pool
    (batches of one length, i.e. one level, train much worse). ``pack`` packs a batch into
    rows of ``model_max_length`` tokens; ``example_mean`` averages the loss per example first.
    """
    ids, labels = encode_sft(tokenizer, df["question"], df["solution"], prompt_order)
    row_len = _packed_row_len(ids, tokenizer.model_max_length)
    batches = _batch_indices(labels, steps, batch_size, seed, curriculum, curriculum_start, curriculum_hold)
    opt, sched = _optimizer(model, lr, weight_decay, steps, warmup, min_lr_ratio)
    model.train()
    losses: list[float] = []
    n_tokens = 0
    t0 = time.perf_counter()
    for step, idx in enumerate(batches):
        b_ids, b_labels = [ids[i] for i in idx], [labels[i] for i in idx]
        loss = _batch_loss(model, b_ids, b_labels, tokenizer.pad_token_id, row_len, pack, example_mean)
        _update(model, opt, sched, loss, grad_clip)
        losses.append(float(loss.detach()))
        n_tokens += sum(len(x) for x in b_ids)
        if log_every and (step + 1) % log_every == 0:
            print(f"sft step {step + 1}/{steps} loss {sum(losses[-log_every:]) / log_every:.4f} "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
    model.eval()
    return _sft_metrics(losses, n_tokens, time.perf_counter() - t0, steps, len(ids))


def _packed_row_len(ids, model_max_length: int) -> int:
    """Packed rows are ``model_max_length`` tokens, or the longest example where that is longer."""
    longest = max(len(x) for x in ids)
    if longest > model_max_length:  # e.g. a small vocab_size leaves the instruction unmerged
        warnings.warn(
            f"the longest SFT example has {longest} tokens > model_max_length={model_max_length}; "
            f"packing rows grow to fit it (a larger vocab_size shortens the prompts)",
            stacklevel=3,  # the caller of sft
        )
    return max(int(model_max_length), longest)


def _batch_indices(labels, steps: int, batch_size: int, seed: int, curriculum: float, start: float, hold: float):
    """The example indices of each step's batch (see ``sft``): from the curriculum's pool of the
    shortest responses while ``pool_share`` < 1, then from seeded epoch permutations."""
    gen = torch.Generator().manual_seed(int(seed))
    by_length = sorted(range(len(labels)), key=lambda i: (sum(v != -100 for v in labels[i]), i))
    order: list[int] = []
    for step in range(int(steps)):
        share = pool_share(step, steps, curriculum, start, hold)
        if share < 1.0:
            pool = by_length[: max(batch_size, math.ceil(share * len(labels)))]
            yield [pool[j] for j in torch.randperm(len(pool), generator=gen)[:batch_size].tolist()]
        else:
            if len(order) < batch_size:
                order += torch.randperm(len(labels), generator=gen).tolist()
            idx, order = order[:batch_size], order[batch_size:]
            yield idx


def _optimizer(model, lr: float, weight_decay: float, steps: int, warmup: int, min_lr_ratio: float):
    """AdamW (no weight decay on norms and biases) and its warmup-then-cosine schedule."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.98),
        eps=1e-8,
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_lambda(s, steps, warmup, min_lr_ratio))
    return opt, sched


def _batch_loss(model, b_ids, b_labels, pad_id: int, row_len: int, pack: bool, example_mean: bool):
    """The batch's loss: packed rows or a padded batch; mean per example or per token."""
    if pack:
        inp, pos, lab = _pack(b_ids, b_labels, pad_id, row_len)
        kw = {"position_ids": pos}
    else:
        inp, att, lab = _collate(b_ids, b_labels, pad_id)
        kw = {"attention_mask": att}
    if example_mean:
        return _example_mean_loss(model(input_ids=inp, use_cache=False, **kw).logits, lab, kw.get("position_ids"))
    return model(input_ids=inp, labels=lab, use_cache=False, **kw).loss


def _update(model, opt, sched, loss, grad_clip: float) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    sched.step()


def _sft_metrics(losses: list[float], n_tokens: int, seconds: float, steps: int, examples: int) -> dict[str, Any]:
    """First loss, final loss (mean of the last 20 steps), throughput."""
    tail = losses[-min(len(losses), 20):] or [float("nan")]
    return {
        "steps": int(steps),
        "first_loss": losses[0] if losses else float("nan"),
        "final_loss": sum(tail) / len(tail),
        "tokens": n_tokens,
        "seconds": seconds,
        "tokens_per_s": n_tokens / seconds if seconds > 0 else float("nan"),
        "examples": examples,
    }


# ----------------------------------------------------------------------------- build


def build_base_model(sft_df: pd.DataFrame, out_dir: str | Path, cfg: Mapping[str, Any] | None, seed: int) -> dict[str, Any]:
    """Tokenizer + tiny Llama + SFT, saved atomically in Hugging Face format into ``out_dir``.

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
            "cpu": cpu_info(),  # the weights depend on the kernels' instruction set (docs/demo.md)
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


# ----------------------------------------------------------------------------- calibration report


@torch.no_grad()
def response_entropy(model, rollouts) -> torch.Tensor:
    """Mean token entropy (nats, temperature 1) of each sampled response, over its mask."""
    ids = torch.cat([rollouts.prompt_ids, rollouts.response_ids], dim=1)
    att = torch.cat([rollouts.prompt_mask, rollouts.response_mask], dim=1)
    p = rollouts.prompt_ids.shape[1]
    out = []
    for start in range(0, ids.shape[0], 64):
        logits = model(input_ids=ids[start : start + 64], attention_mask=att[start : start + 64]).logits
        logp = torch.log_softmax(logits[:, p - 1 : -1].float(), dim=-1)
        ent = -(logp.exp() * logp).sum(-1)
        mask = rollouts.response_mask[start : start + 64].float()
        out.append((ent * mask).sum(-1) / mask.sum(-1).clamp(min=1))
    return torch.cat(out)


def evaluate_levels(
    model,
    tokenizer,
    df: pd.DataFrame,
    *,
    n: int = 4,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    prompt_order: str = "question_first",
) -> dict[str, dict[str, float]]:
    """Per level (``metadata.level``; ``all`` too): Pass@1 with ``n`` samples per prompt, the
    share of responses ending in EOS and holding a ``\\boxed{}``, mean length and mean token
    entropy (with its spread over prompts). A sanity/calibration report, not the evaluation."""
    from vicurl.algos.rewards import Group, oracle
    from vicurl.grading import extract_boxed
    from vicurl.models.sampling import sample

    prompts = [build_prompt(q, prompt_order) for q in df["question"]]
    r = sample(model, tokenizer, prompts, n, temperature=temperature, top_p=top_p,
               max_new_tokens=max_new_tokens, seed=seed)
    ent = response_entropy(model, r)
    levels = [json.loads(m).get("level", "all") if m else "all" for m in df["metadata"]]
    rows: dict[Any, dict[str, list[float]]] = {}
    for j, (gold, level) in enumerate(zip(df["answer"], levels)):
        sl = slice(j * n, (j + 1) * n)
        texts = r.texts[sl]
        for key in {level, "all"}:
            d = rows.setdefault(key, {k: [] for k in ("pass", "eos", "boxed", "len", "ent", "prompt_ent")})
            d["pass"] += oracle(Group(list(texts), str(gold))).rewards
            d["eos"] += (~r.truncated[sl]).float().tolist()
            d["boxed"] += [float(extract_boxed(t) is not None) for t in texts]
            d["len"] += r.lengths[sl].float().tolist()
            d["ent"] += ent[sl].tolist()
            d["prompt_ent"].append(float(ent[sl].mean()))

    def mean(x):
        return sum(x) / len(x) if x else float("nan")

    report = {}
    for key in sorted(rows, key=str):
        d = rows[key]
        pe = torch.tensor(d["prompt_ent"])
        report[str(key)] = {
            "prompts": len(d["prompt_ent"]),
            "pass@1": mean(d["pass"]),
            "eos": mean(d["eos"]),
            "boxed": mean(d["boxed"]),
            "mean_len": mean(d["len"]),
            "entropy": mean(d["ent"]),
            "entropy_prompt_std": float(pe.std()) if len(pe) > 1 else 0.0,
        }
    return report
