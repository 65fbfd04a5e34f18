"""Sampling G responses per prompt with transformers ``generate`` (CPU engine and CPU evaluation).

Rows are prompt-major: the samples of prompt j are rows ``j*n .. j*n + n - 1``. The layout
matches verl's: left-padded prompts, right-padded responses, a response mask that covers
the tokens up to and including the first EOS.

Sampling runs on the model's device; the returned tensors are always on the CPU, so scoring,
rewards and curricula never see a device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import GenerationConfig

from vicurl.data.prompts import prompt_token_ids


@dataclass
class Rollouts:
    prompt_ids: torch.Tensor  # (N, P) left-padded
    prompt_mask: torch.Tensor  # (N, P) 1 on prompt tokens
    response_ids: torch.Tensor  # (N, R) right-padded with pad_token_id
    response_mask: torch.Tensor  # (N, R) 1 up to and including the first EOS
    texts: list[str]  # decoded responses, special tokens removed
    truncated: torch.Tensor  # (N,) bool: no EOS within max_new_tokens

    @property
    def lengths(self) -> torch.Tensor:
        return self.response_mask.sum(-1)

    def concat(self, other: "Rollouts", pad_token_id: int) -> "Rollouts":
        """Rows of ``self`` then ``other``, re-padded to common widths (prompts left, responses right)."""
        p, r = max(self.prompt_ids.shape[1], other.prompt_ids.shape[1]), max(self.response_ids.shape[1], other.response_ids.shape[1])

        def left(x, width, value):
            return torch.nn.functional.pad(x, (width - x.shape[1], 0), value=value)

        def right(x, width, value):
            return torch.nn.functional.pad(x, (0, width - x.shape[1]), value=value)

        return Rollouts(
            torch.cat([left(self.prompt_ids, p, pad_token_id), left(other.prompt_ids, p, pad_token_id)]),
            torch.cat([left(self.prompt_mask, p, 0), left(other.prompt_mask, p, 0)]),
            torch.cat([right(self.response_ids, r, pad_token_id), right(other.response_ids, r, pad_token_id)]),
            torch.cat([right(self.response_mask, r, 0), right(other.response_mask, r, 0)]),
            self.texts + other.texts,
            torch.cat([self.truncated, other.truncated]),
        )


def left_padded(ids: list[list[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists as one left-padded (N, P) batch and its attention mask (as the tokenizer pads)."""
    width = max((len(x) for x in ids), default=0)
    input_ids = torch.full((len(ids), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        if x:
            input_ids[i, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[i, width - len(x) :] = 1
    return input_ids, mask


def response_mask_from_ids(response_ids: torch.Tensor, eos_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask of tokens up to and including the first EOS; and whether no EOS was produced."""
    is_eos = response_ids == eos_token_id
    # number of EOS tokens strictly before position t
    eos_before = torch.cumsum(is_eos.long(), dim=-1) - is_eos.long()
    mask = (eos_before == 0).long()
    truncated = ~is_eos.any(dim=-1)
    return mask, truncated


def decode_responses(tokenizer, response_ids: torch.Tensor, response_mask: torch.Tensor) -> list[str]:
    """Response texts: the tokens under the mask, special tokens removed (both engines)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    ids = torch.where(response_mask.bool(), response_ids, torch.full_like(response_ids, pad))
    return tokenizer.batch_decode(ids, skip_special_tokens=True)


@torch.no_grad()
def sample(
    model,
    tokenizer,
    prompts: list[str],
    n: int,
    *,
    temperature: float,
    top_p: float = 1.0,
    max_new_tokens: int,
    seed: int,
    batch_size: int = 64,
) -> Rollouts:
    """Draw ``n`` samples for each prompt; deterministic given ``seed`` and ``batch_size``.

    ``top_k`` is disabled so temperature 1.0 samples from the full distribution, as vLLM does
    in the paper's rollouts.
    """
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise ValueError("tokenizer needs pad and eos tokens")
    was_training = model.training
    model.eval()
    gen_cfg = GenerationConfig(
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_p=top_p if temperature > 0 else None,
        top_k=0 if temperature > 0 else None,
        max_new_tokens=max_new_tokens,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    encoded = [prompt_token_ids(tokenizer, p) for p in prompts]
    prompt_ids, prompt_mask = left_padded([ids for ids in encoded for _ in range(n)], tokenizer.pad_token_id)
    device = model.device
    gen = torch.Generator().manual_seed(int(seed))
    chunks = []
    for start in range(0, len(prompt_ids), batch_size):
        # a fresh seed per chunk drawn from one generator: results depend only on (seed, batch_size);
        # torch.manual_seed seeds the CUDA generators too
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        ids = prompt_ids[start : start + batch_size]
        out = model.generate(
            input_ids=ids.to(device),
            attention_mask=prompt_mask[start : start + batch_size].to(device),
            generation_config=gen_cfg,
        )
        chunks.append(out[:, ids.shape[1] :].cpu())  # no copy on the CPU
    width = max(max(c.shape[1] for c in chunks), 1)
    pad = tokenizer.pad_token_id
    response_ids = torch.cat(
        [torch.nn.functional.pad(c, (0, width - c.shape[1]), value=pad) for c in chunks], dim=0
    )
    response_mask, truncated = response_mask_from_ids(response_ids, tokenizer.eos_token_id)
    response_ids = torch.where(response_mask.bool(), response_ids, torch.full_like(response_ids, pad))
    texts = decode_responses(tokenizer, response_ids, response_mask)
    model.train(was_training)
    return Rollouts(prompt_ids, prompt_mask, response_ids, response_mask, texts, truncated)
