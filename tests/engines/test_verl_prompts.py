"""Prompts longer than the launcher's limit, measured as verl's rollout builds them: dropped and counted, or
refused."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from vicurl.data import schema
from vicurl.data.long_prompts import fit, prompt_lengths, training_limit
from vicurl.data.prompts import build_prompts
from vicurl.engines.verl import launch
from vicurl.engines.verl.data import VERBATIM_TEMPLATE

from verl_support import (
    launch_settings,
    launcher_config,
    train_df,
    verl_model_config,
)

# ---------------------------------------------------------------- 5. prompts over max_prompt_length


def test_prompt_lengths_are_the_tokens_verls_rollout_builds(chat_model_dir, tmp_path):
    """verl's agent loop tokenizes the parquet's message with its Continuous Token builder and the
    launcher's pass-through template: exactly the ids we count (no BOS added)."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    mc = verl_model_config(launcher_config(chat_model_dir, tmp_path))
    tok = mc.tokenizer  # verl set the custom template on it
    assert tok.chat_template == VERBATIM_TEMPLATE
    from transformers import AutoTokenizer

    prompts = build_prompts(train_df(3), "question_first", AutoTokenizer.from_pretrained(chat_model_dir), True)
    for model_type in ("llama", None):  # Llama's builder, the generic one (qwen2's needs Qwen's <|im_end|>)
        builder = create_continuous_token_builder(tok, hf_model_type=model_type)
        built = [builder.build_initial_tokens([{"role": "user", "content": p}]) for p in prompts]
        assert [len(b) for b in built] == prompt_lengths(tok, prompts)
        assert built[0] == tok(prompts[0], add_special_tokens=False)["input_ids"]
        assert built[0].count(tok.bos_token_id) == 1  # the chat template's BOS, and no second one


def test_long_prompts_are_dropped_and_counted_or_refused(chat_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    df = train_df(6, long_every=3)  # p0, p3 are long
    prompts = build_prompts(df, "question_first", tok, True)
    kept, kept_prompts, report = fit(df, prompts, tok, training_limit(220))
    assert report["dropped"] == 2 and report["dropped_ids"] == ["p0", "p3"] and report["rows"] == 6
    assert list(kept["id"]) == ["p1", "p2", "p4", "p5"] and kept_prompts == [prompts[i] for i in (1, 2, 4, 5)]
    assert max(prompt_lengths(tok, kept_prompts)) <= 220 < report["longest"]
    with pytest.raises(ValueError, match=r"train.parquet: 2 prompt\(s\) longer than train.max_prompt_length=220.*'p0'"):
        fit(df, prompts, tok, training_limit(220), "fail", source="train.parquet")


def test_the_launcher_trains_on_the_kept_rows_only(chat_model_dir, tmp_path):
    """The verl parquet and the set the trainer's hook reads hold the same kept rows, in order
    (verl's dataset row i is the hook's row i); the count is in long_prompts.json."""
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(6, long_every=3), train_set)
    work = tmp_path / "_work"
    work.mkdir()
    report = launch.prepare(launch_settings(max_prompt_length=220), str(chat_model_dir), str(train_set), work)
    verl_rows = pd.read_parquet(work / "verl_train.parquet")
    hook_rows = schema.read(work / "train_set.parquet")
    assert [e["id"] for e in verl_rows["extra_info"]] == list(hook_rows["id"]) == ["p1", "p2", "p4", "p5"]
    assert json.loads((work / "long_prompts.json").read_text()) == report and report["dropped"] == 2
