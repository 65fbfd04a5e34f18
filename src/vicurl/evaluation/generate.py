"""Sample ``n`` responses per benchmark problem from a saved Hugging Face model with transformers.

One output row per sample (``vicurl.evaluation.records``), stored as parquet so grading can be
redone without regenerating. Runs on ``device`` (``vicurl.runtime.devices``: CUDA when present, in bf16;
the CPU in float32). GPU clusters usually generate with vLLM instead (``vicurl.evaluation.engines``);
it writes the same columns.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from vicurl.config.settings import SamplingSettings
from vicurl.data.long_prompts import generation_prompts, model_context
from vicurl.evaluation.records import DTYPES, RECORD_COLUMNS, empty, read_records, write_records  # noqa: F401 (re-exported)
from vicurl.models.sampling import sample
from vicurl.runtime import devices


def load_model(model_dir: str | Path, device: str | torch.device = "auto"):
    """Model (eval mode, on ``device``: float32 on the CPU, bf16 on CUDA) and tokenizer from a
    Hugging Face directory. The model only samples, so bf16 weights are safe (the paper's vLLM
    rollouts and evaluations are bf16 too)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is None:
            raise ValueError(f"{model_dir}: tokenizer has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    device = devices.resolve(device)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=devices.sampling_dtype(device))
    model.to(device).eval()
    return model, tokenizer


def check_problems(problems: pd.DataFrame, n: int) -> None:
    """The problems table a generator needs (``id``, ``question``; unique ids) and n >= 1."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    for col in ("id", "question"):
        if col not in problems.columns:
            raise ValueError(f"problems table lacks column {col!r}")
    if problems["id"].duplicated().any():
        dup = problems["id"][problems["id"].duplicated()].tolist()[:5]
        raise ValueError(f"duplicate problem id(s) {dup}")


def generate_records(model_dir: str, problems: pd.DataFrame, sampling: SamplingSettings, **kw) -> pd.DataFrame:
    """Draw ``sampling.n`` samples for every problem (columns ``id``, ``question``, optional ``options``)
    and return the records; keywords as ``generate_sets``."""
    return generate_sets(model_dir, {"": problems}, sampling, **kw)[""]


def generate_sets(
    model_dir: str,
    problem_sets: dict[str, pd.DataFrame],
    sampling: SamplingSettings,
    *,
    batch_size: int,
    threads: int = 1,
    device: str | torch.device = "auto",
) -> dict[str, pd.DataFrame]:
    """The records of several problem sets (benchmarks) from one model load, by name.

    Each set is sampled as if alone (its own ``sampling.seed``), so a set's records are those of
    ``generate_records`` on it: one job per checkpoint and one per benchmark write the same samples.
    Deterministic for a fixed (model, problems order, seed, batch_size, threads, device). Rows are
    problem-major in the order of the set's ``problems``. ``device``: ``vicurl.runtime.devices.resolve``.
    A prompt longer than the model's context minus ``max_new_tokens`` is refused, naming the set and
    the row: the caller drops such problems first where their dataset says so (``vicurl.data.long_prompts.fit_sets``).
    """
    for problems in problem_sets.values():
        check_problems(problems, sampling.n)
    torch.set_num_threads(int(threads))
    if all(len(p) == 0 for p in problem_sets.values()):
        return {name: empty() for name in problem_sets}
    model, tokenizer = load_model(model_dir, device)
    return {
        name: sample_records(model, tokenizer, problems, sampling, batch_size=batch_size, name=name)
        for name, problems in problem_sets.items()
    }


def sample_records(model, tokenizer, problems: pd.DataFrame, sampling: SamplingSettings, *, batch_size: int,
                   name: str = "") -> pd.DataFrame:
    """``sampling.n`` samples per problem from a loaded model, as records (``name``: the set's, for errors)."""
    if len(problems) == 0:
        return empty()
    prompts = generation_prompts(problems, tokenizer, model_context(model.config), sampling.max_new_tokens,
                                 prompt_order=sampling.prompt_order, chat_template=sampling.chat_template, name=name)
    n = sampling.n
    ro = sample(model, tokenizer, prompts, n, temperature=sampling.temperature, top_p=sampling.top_p,
                max_new_tokens=sampling.max_new_tokens, seed=sampling.seed, batch_size=batch_size)
    ids = problems["id"].astype(str).tolist()
    df = pd.DataFrame(
        {
            "problem_id": [pid for pid in ids for _ in range(n)],
            "sample_idx": [j for _ in ids for j in range(n)],
            "text": list(ro.texts),
            "n_tokens": ro.lengths.to(torch.int64).tolist(),
            "truncated": ro.truncated.to(torch.bool).tolist(),
        },
        columns=RECORD_COLUMNS,
    )
    return df.astype(DTYPES)
