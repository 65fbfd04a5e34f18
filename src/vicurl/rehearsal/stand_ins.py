"""Stand-ins for what config/gpu_smoke.yaml downloads from the Hub, for its rehearsal without the Hub.

``write(out)`` writes into ``out``:

model/            a tiny randomly initialized Llama with Qwen2.5-Instruct's chat format: a
                  ChatML template, ``<|im_end|>`` as EOS, ``<|endoftext|>`` as padding (byte-level
                  BPE, digits split; head size 32, the smallest vLLM's CPU attention serves)
deepscaler.jsonl  synthetic arithmetic problems in DeepScaleR's layout (problem, answer, solution)
amc23.jsonl       synthetic problems in math-ai/amc23's layout (id, problem, answer as a float)

The rehearsal checks the plumbing, not learning: the model is untrained (it scores 0), the data are
made up (no rows of the real sets are copied), and both go through the workflow's real code paths
(``prepare_dataset`` from ``local_path``, the model from a local path as from the Hub).
"""

from __future__ import annotations

import json
from pathlib import Path

from vicurl.data import synthetic
from vicurl.runtime.io import atomic_path

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
ARCH = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 256, "max_position_embeddings": 4096}
SPLITS = {"train": {"n": 64, "levels": [1, 2, 3, 4, 5, 6]}, "eval": {"n": 40, "levels": [1, 2, 3, 4, 5, 6]}}


def write(out: str | Path, seed: int = 0) -> dict[str, str]:
    """The model folder and the two data files under ``out`` (each written whole or not at all)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    splits = synthetic.make_splits(SPLITS, seed)
    paths = {"model": out / "model", "deepscaler": out / "deepscaler.jsonl", "amc23": out / "amc23.jsonl"}
    _jsonl(paths["deepscaler"], [{"problem": r.question, "answer": r.answer, "solution": r.solution}
                                 for r in splits["train"].itertuples()])
    _jsonl(paths["amc23"], [{"id": i, "problem": r.question, "answer": float(r.answer), "url": ""}
                            for i, r in enumerate(splits["eval"].itertuples())])
    write_model(paths["model"], [*splits["train"]["question"], *splits["train"]["solution"]], seed)
    return {k: str(v) for k, v in paths.items()}


def write_model(out: Path, texts: list[str], seed: int) -> None:
    from vicurl.models import tiny

    tok = tiny.build_tokenizer(texts, vocab_size=384, model_max_length=ARCH["max_position_embeddings"])
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"  # Qwen2.5-Instruct's: a turn ends the response
    tok.chat_template = CHATML
    model = tiny.build_model(tok, ARCH, seed)
    with atomic_path(out) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)


def _jsonl(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text("".join(json.dumps(r) + "\n" for r in rows))
