"""Prepared sets (the normalized schema, `vicurl.data.schema`) in verl's RL dataset format.

verl's ``RLHFDataset`` reads a parquet with ``prompt`` (chat messages), ``data_source``,
``reward_model.ground_truth`` and ``extra_info``. The prompt text is the one the local engine
conditions on (`vicurl.data.prompts.build_prompt`, chat template applied when the model uses one),
carried as a single user message that the launcher's pass-through chat template
(``VERBATIM_TEMPLATE``) renders unchanged: both engines tokenize the same string. The grading
fields (id, answer type, options) ride in ``extra_info`` for the trainer's reward hook. Prompts
over ``train.max_prompt_length`` tokens are dropped or refused before this, as on the CPU engine
(`vicurl.data.long_prompts`).
"""

from __future__ import annotations

from typing import Sequence

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
