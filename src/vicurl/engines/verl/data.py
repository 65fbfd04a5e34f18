"""Prepared sets (the normalized schema, `vicurl.data.schema`) in verl's RL dataset format.

verl's ``RLHFDataset`` reads a parquet with ``prompt`` (chat messages), ``data_source``,
``reward_model.ground_truth`` and ``extra_info``. The prompt text is the one the local engine
conditions on (`vicurl.prompts.build_prompt`, chat template applied when the model uses one),
carried as a single user message that the launcher's pass-through chat template
(``VERBATIM_TEMPLATE``) renders unchanged: both engines tokenize the same string. The grading
fields (id, answer type, options) ride in ``extra_info`` for the trainer's reward hook.
"""

from __future__ import annotations

from typing import Any, Sequence

import pandas as pd

# renders the single user message's text as is: no role markers, no generation prompt
VERBATIM_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


def to_verl_frame(df: pd.DataFrame, prompts: Sequence[str], data_source: str = "vicurl") -> pd.DataFrame:
    """One verl row per problem of ``df`` (normalized schema), ``prompts[i]`` its full prompt text."""
    if len(prompts) != len(df):
        raise ValueError(f"{len(prompts)} prompts for {len(df)} rows")
    df = df.reset_index(drop=True)
    types = df["answer_type"] if "answer_type" in df else ["math"] * len(df)
    options = df["options"] if "options" in df else [[]] * len(df)
    rows = []
    for i, (pid, answer, at, opts, text) in enumerate(zip(df["id"], df["answer"], types, options, prompts)):
        rows.append({
            "data_source": data_source,
            "prompt": [{"role": "user", "content": str(text)}],
            "ability": "math" if at == "math" else str(at),
            "reward_model": {"style": "rule", "ground_truth": str(answer)},
            "extra_info": {"index": i, "id": str(pid), "answer_type": str(at),
                           "options": [str(o) for o in (list(opts) if opts is not None else [])]},
        })
    return pd.DataFrame(rows)


LONG_PROMPTS = ("drop", "fail")  # train.long_prompts


def prompt_lengths(tokenizer, prompts: Sequence[str]) -> list[int]:
    """Tokens of each prompt as verl's rollout builds them: the pass-through template renders the
    text unchanged and adds no special token (a test checks this against verl's own builder)."""
    from vicurl.prompts import prompt_token_ids

    return [len(prompt_token_ids(tokenizer, p)) for p in prompts]


def drop_long_prompts(df: pd.DataFrame, prompts: Sequence[str], tokenizer, max_prompt_length: int,
                      policy: str = "drop", source: str = "the training set") -> tuple[pd.DataFrame, list[str], dict[str, Any]]:
    """The rows whose prompt fits ``max_prompt_length`` tokens. verl 0.9.1 would left-truncate a longer
    prompt with a warning (its ``data.truncation`` is not read on the rollout path): a cut question
    is never trained on. ``policy`` ``drop`` drops and counts such rows, ``fail`` refuses the set.
    Returns the kept rows, their prompts and a report (counts, the dropped ids)."""
    if policy not in LONG_PROMPTS:
        raise ValueError(f"train.long_prompts must be one of {list(LONG_PROMPTS)}, got {policy!r}")
    lengths = prompt_lengths(tokenizer, prompts)
    long = [i for i, n in enumerate(lengths) if n > int(max_prompt_length)]
    ids = [str(x) for x in df["id"]]
    report = {"max_prompt_length": int(max_prompt_length), "rows": len(lengths), "dropped": len(long),
              "longest": max(lengths, default=0), "dropped_ids": [ids[i] for i in long]}
    if long and policy == "fail":
        shown = ", ".join(f"{ids[i]!r} ({lengths[i]} tokens)" for i in long[:5])
        raise ValueError(f"{source}: {len(long)} prompt(s) longer than train.max_prompt_length={max_prompt_length} "
                         f"tokens: {shown}; set train.long_prompts: drop to drop and count them")
    keep = [i for i in range(len(lengths)) if lengths[i] <= int(max_prompt_length)]
    return df.iloc[keep].reset_index(drop=True), [prompts[i] for i in keep], report
