"""Prompts too long for the model a set is prepared for: measured in tokens, then dropped and
counted, or refused. Never cut, never passed on.

Why: a cut question is another question (its gold answer may no longer follow from it), and a
prompt a generator cannot hold fails deep inside it (a 10 MB question passed the data preparation,
which knows no model, and crashed generation naming neither the set nor the row). So wherever a set
meets a model every prompt is measured: training against ``train.max_prompt_length`` (policy
``train.long_prompts``), generation against the context less the response budget (policy
``datasets.<name>.on_bad_row``). A set of which no row fits is refused either way. A prompt's length
is its token ids as the model is conditioned on them (``vicurl.data.prompts.prompt_token_ids``), what
the CPU sampler, vLLM's token prompts and verl's rollout (its pass-through template adds no token)
all feed it. See docs/configuration.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from vicurl.config.settings import TrainSettings
from vicurl.data.prompts import build_prompts, prompt_token_ids

log = logging.getLogger(__name__)

POLICIES = ("drop", "fail")  # train.long_prompts; datasets.<name>.on_bad_row
REPORT = "long_prompts.json"  # in a training run's work folder (both engines)
SHOWN = 5  # rows named in a refusal
# where a model's config states its context (most architectures; GPT-2's; some remote-code models)
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


@dataclass(frozen=True)
class Limit:
    """The most tokens a prompt may have, and what says so (for reports and errors)."""

    tokens: int
    what: str  # "train.max_prompt_length=512 tokens", "1024 tokens (the model's context of 4096 ...)"
    policy_key: str  # the setting that chooses drop or fail, named in a refusal


def training_limit(max_prompt_length: int) -> Limit:
    """Training's limit: verl's rollout buffer for prompts, and the same number on the CPU engine."""
    n = int(max_prompt_length)
    return Limit(n, f"train.max_prompt_length={n} tokens", "train.long_prompts")


def model_context(config, max_model_len: int | None = None) -> int | None:
    """The longest sequence (prompt + response) a model is built for: vLLM's ``max_model_len`` when
    it is set (what vLLM serves), else the model config's context (``max_position_embeddings`` for
    Llama, Qwen and the tiny demo model). None when the config states none."""
    if max_model_len:
        return int(max_model_len)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key in CONTEXT_KEYS:
        value = getattr(text, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def generation_limit(context: int | None, max_new_tokens: int, policy_key: str,
                     budget_key: str = "eval.max_new_tokens") -> Limit | None:
    """Generation's limit: the context less the response budget, so that every kept prompt gets its
    whole budget (a longer one would get a shorter response, or fail). None: no context is known."""
    if context is None:
        return None
    room = int(context) - int(max_new_tokens)
    if room < 1:
        raise ValueError(f"{budget_key}={max_new_tokens} leaves no room for a prompt in the model's context "
                         f"of {context} tokens")
    return Limit(room, f"{room} tokens (the model's context of {context} tokens minus {budget_key}={max_new_tokens})",
                 policy_key)


def prompt_lengths(tokenizer, prompts: Sequence[str]) -> list[int]:
    """Tokens of each prompt as the model is conditioned on it."""
    return [len(prompt_token_ids(tokenizer, p)) for p in prompts]


def fit(df: pd.DataFrame, prompts: Sequence[str], tokenizer, limit: Limit | None, policy: str = "drop",
        source: str = "the set") -> tuple[pd.DataFrame, list[str], dict[str, Any]]:
    """The rows of ``df`` whose prompt (``prompts[i]``, row i's) fits ``limit``, their prompts and a
    report (``max_prompt_length``, ``limit``, ``rows``, ``dropped``, ``longest``, ``dropped_ids``).
    ``policy`` ``fail`` refuses a set with a longer prompt; ``source`` names the set in errors.
    Rows keep their order: a set without long prompts comes back unchanged (same samples)."""
    if policy not in POLICIES:
        key = limit.policy_key if limit is not None else "the long-prompt policy"
        raise ValueError(f"{key} must be one of {list(POLICIES)}, got {policy!r}")
    if len(prompts) != len(df):
        raise ValueError(f"{source}: {len(prompts)} prompts for {len(df)} rows")
    df = df.reset_index(drop=True)
    prompts = list(prompts)
    if limit is None:  # the model states no context: nothing to measure against
        return df, prompts, {"max_prompt_length": None, "limit": "none known", "rows": len(df), "dropped": 0,
                             "longest": None, "dropped_ids": []}
    lengths = prompt_lengths(tokenizer, prompts)
    long = [i for i, n in enumerate(lengths) if n > limit.tokens]
    ids = [str(x) for x in df["id"]] if "id" in df else [str(i) for i in range(len(df))]
    report = {"max_prompt_length": limit.tokens, "limit": limit.what, "rows": len(df), "dropped": len(long),
              "longest": max(lengths, default=0), "dropped_ids": [ids[i] for i in long]}
    if not long:
        return df, prompts, report
    shown = ", ".join(f"{ids[i]!r} ({lengths[i]} tokens)" for i in long[:SHOWN])
    more = f" and {len(long) - SHOWN} more" if len(long) > SHOWN else ""
    if policy == "fail":
        raise ValueError(f"{source}: {len(long)} prompt(s) longer than {limit.what}: {shown}{more}; "
                         f"set {limit.policy_key}: drop to drop and count them")
    if len(long) == len(df):
        raise ValueError(f"{source}: all {len(df)} prompts are longer than {limit.what} (e.g. {shown}{more}): "
                         f"nothing left once they are dropped")
    keep = [i for i, n in enumerate(lengths) if n <= limit.tokens]
    return df.iloc[keep].reset_index(drop=True), [prompts[i] for i in keep], report


def fit_training_set(df: pd.DataFrame, tokenizer, settings: TrainSettings,
                     source: str = "the training set") -> tuple[pd.DataFrame, list[str], dict[str, Any]]:
    """A training set's rows and prompts as both engines (and the probes) train on them (``fit``
    against ``train.max_prompt_length``, policy ``train.long_prompts``), refused when fewer than a
    batch remain. ``source`` names the set in errors."""
    prompts = build_prompts(df, settings.prompt_order, tokenizer, settings.chat_template)
    df, prompts, report = fit(df, prompts, tokenizer, training_limit(settings.max_prompt_length),
                              settings.long_prompts, source)
    if len(df) < settings.batch_size:
        dropped = report["dropped"]
        why = f" once {dropped} longer than {report['limit']} are dropped" if dropped else ""
        raise ValueError(f"{source} has {len(df)} rows{why}, fewer than train.batch_size={settings.batch_size}")
    return df, prompts, report


def generation_prompts(problems: pd.DataFrame, tokenizer, context: int | None, max_new_tokens: int, *,
                       prompt_order: str, chat_template: bool | str, name: str = "") -> list[str]:
    """The prompts of a problem set for a generator whose model holds ``context`` tokens: refused,
    naming the set (``name``) and the row, when one leaves less than ``max_new_tokens`` for its
    response (the caller drops such problems first where their dataset says so: ``fit_sets``)."""
    prompts = build_prompts(problems, prompt_order, tokenizer, chat_template)
    # a prompt the context cannot hold with its response budget would fail an allocation inside
    # the generator (a 10 MB question), naming neither the set nor the row
    limit = generation_limit(context, max_new_tokens, f"datasets.{name or '<name>'}.on_bad_row")
    fit(problems, prompts, tokenizer, limit, "fail", source=name or "the problem set")
    return prompts


def write_report(work_dir: str | Path, report: Mapping[str, Any], source: str) -> Path:
    """A training run's report (``<work>/long_prompts.json``, both engines), its drops said in the log."""
    from vicurl.runtime.io import write_json

    path = Path(work_dir) / REPORT
    if report["dropped"]:
        log.warning("%s: dropped %d of %d prompts longer than %s (ids in %s)", source, report["dropped"],
                    report["rows"], report["limit"], path)
    write_json(path, dict(report))
    return path


def fit_sets(model_dir: str | Path, problem_sets: Mapping[str, pd.DataFrame], *, max_new_tokens: int,
             policies: Mapping[str, str] | str = "fail", prompt_order: str = "question_first",
             chat_template: bool | str = "auto", max_model_len: int | None = None,
             budget_key: str = "eval.max_new_tokens", sources: Mapping[str, str] | None = None,
             ) -> tuple[dict[str, pd.DataFrame], dict[str, dict[str, Any]]]:
    """The problems of each set (a dataset, by name) that a model can answer in full: its prompt
    fits the model's context (``max_model_len``: vLLM's, when the config sets it) less
    ``max_new_tokens``. ``policies``: each set's ``datasets.<name>.on_bad_row`` (or one for all).
    Returns the kept problems and a report per set; drops are said in the log."""
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    context = model_context(AutoConfig.from_pretrained(str(model_dir)), max_model_len)
    kept, reports = {}, {}
    for name, problems in problem_sets.items():
        policy = policies if isinstance(policies, str) else policies.get(name, "fail")
        source = (sources or {}).get(name) or name or "the problem set"
        limit = generation_limit(context, max_new_tokens, f"datasets.{name or '<name>'}.on_bad_row", budget_key)
        prompts = build_prompts(problems, prompt_order, tokenizer, chat_template)
        kept[name], _, reports[name] = fit(problems, prompts, tokenizer, limit, policy, source)
        if reports[name]["dropped"]:
            log.warning("%s: dropped %d of %d problems whose prompt is longer than %s: %s", source,
                        reports[name]["dropped"], len(problems), reports[name]["limit"],
                        reports[name]["dropped_ids"][:SHOWN])
    return kept, reports
