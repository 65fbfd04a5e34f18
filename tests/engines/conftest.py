"""Fixtures of the verl engine's tests: the chat model, and a verl resume checkpoint of it (two FSDP2 ranks)."""

from __future__ import annotations

import pytest

from vicurl.engines.verl import export

from harness import CHAT_MODEL, tiny_llama
from verl_support import launcher_config, save_fsdp_checkpoint


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory):
    """A 2-layer Llama and a character tokenizer with BOS ``<s>`` (prepended by the tokenizer's
    post-processor, as Llama's is) and a chat template that renders the BOS itself."""
    return tiny_llama(tmp_path_factory.mktemp("chat_model") / "model", **CHAT_MODEL)


@pytest.fixture(scope="module")
def saved_step(chat_model_dir, tmp_path_factory):
    """A verl resume checkpoint of step 3 (two FSDP2 ranks) from the launcher's config."""
    tmp = tmp_path_factory.mktemp("fsdp")
    config = launcher_config(chat_model_dir, tmp)
    ckpt = tmp / "verl_checkpoints"
    save_fsdp_checkpoint(config, export.step_dir(ckpt, 3) / "actor", tmp, step=3)
    return config, ckpt
