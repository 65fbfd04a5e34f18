"""Sample ``n`` responses per benchmark problem with vLLM (GPU clusters; envs/gpu.yaml under --sdm conda),
writing exactly the records of the CPU path (``records.RECORD_COLUMNS``; ``n_tokens``: vLLM's count
of the completion's ids; ``truncated``: finish reason "length"), so grading never knows which
engine generated.

Prompts are built by the same ``build_prompt`` as training and handed to vLLM as token ids
(``tokens_prompt``), tokenized as training and the CPU sampler tokenize them, without special
tokens: a string prompt would be tokenized by vLLM with them, putting a second BOS in front of
Llama's chat template and an unseen one in front of R1-Distill's prompts. Where the config asks for
reproducible samples (``reproducible``), each problem's request carries its own seed, drawn from
(``seed``, its benchmark, its id) (``request_seed``), so its samples do not depend on which other
problems share the batch (on a GPU with vLLM's batch-invariant kernels: ``batch_invariance``), and a
rerun reproduces them; otherwise the requests go unseeded and vLLM keeps its batched sampler. vLLM seeds a
request's j-th sample ``seed + j``: consecutive seeds (``seed + i`` for problem i) would give problem
i + 1 the samples of problem i shifted by one, and problem i of every benchmark the same noise.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pandas as pd

from vicurl.config.settings import SamplingSettings
from vicurl.data.long_prompts import generation_prompts, model_context
from vicurl.data.prompts import prompt_token_ids
from vicurl.evaluation.generate import check_problems
from vicurl.evaluation.records import DTYPES, RECORD_COLUMNS

# Every name of vLLM the project uses (here and in the tests), with the parameters or attributes it
# relies on: one list, checked against the installed vLLM by tests/gpu_path/test_vllm_engine.py
# (docs/rehearsal.md, "Versions": which versions were checked).
VLLM_NAMES = {
    "LLM": ("model", "seed"),  # vllm.LLM(model, seed, **eval.vllm): the engine arguments pass through
    "LLM.generate": ("prompts", "sampling_params", "use_tqdm"),  # outputs in the prompts' order
    "SamplingParams": ("n", "temperature", "top_p", "max_tokens", "seed"),
    "TokensPrompt": ("prompt_token_ids",),  # a prompt given as token ids, taken as is
    "RequestOutput": ("outputs", "prompt_token_ids"),
    "CompletionOutput": ("text", "token_ids", "finish_reason"),  # finish_reason "length": cut at max_tokens
}


def generate_records_vllm(model_dir: str, problems: pd.DataFrame, sampling: SamplingSettings, **kw) -> pd.DataFrame:
    """The records of one problem set; keywords as ``generate_sets_vllm``."""
    return generate_sets_vllm(model_dir, {"": problems}, sampling, **kw)[""]


def generate_sets_vllm(
    model_dir: str,
    problem_sets: dict[str, pd.DataFrame],
    sampling: SamplingSettings,
    *,
    engine_args: dict[str, Any] | None = None,
    llm=None,
) -> dict[str, pd.DataFrame]:
    """The records of several problem sets (benchmarks), by name, from one engine and one
    ``generate`` call (vLLM batches across sets). With ``sampling.reproducible`` each problem's request is
    seeded by (``sampling.seed``, its set's name, its id) (``request_seed``), as when the set is generated
    alone; without, the requests draw from the engine's stream (seeded by ``sampling.seed``). ``engine_args``: keyword arguments of ``vllm.LLM``
    (tensor_parallel_size, gpu_memory_utilization, max_model_len, dtype, ...). A prompt longer than the
    context vLLM serves minus ``max_new_tokens`` is refused, naming the set and the row, as on the CPU
    path (the caller drops such problems first where their dataset says so: ``vicurl.data.long_prompts.fit_sets``).
    ``llm``: an engine ``start_engine(model_dir, ..., engine_args)`` started, reused (with seeded requests
    the samples depend on their seeds only); by default one is started and shut down."""
    s = sampling
    prompts, params, args = requests(model_dir, problem_sets, s, engine_args)
    if llm is None:
        llm = start_engine(model_dir, s.seed, args, reproducible=s.reproducible)
    outputs = iter(llm.generate(prompts, params, use_tqdm=False))
    return {name: _records(problems, [next(outputs) for _ in range(len(problems))], s.n)
            for name, problems in problem_sets.items()}


def requests(model_dir: str, problem_sets: dict[str, pd.DataFrame], sampling: SamplingSettings,
             engine_args: dict[str, Any] | None = None) -> tuple[list[dict], list, dict[str, Any]]:
    """What ``generate_sets_vllm`` hands vLLM: the prompts as token ids and their ``SamplingParams``, in the
    sets' order, and the engine arguments that serve them (``serving_args``); a caller that starts the engine
    itself (``llm``) starts it with these."""
    from transformers import AutoConfig, AutoTokenizer
    from vllm import SamplingParams  # only in the GPU environment (and vLLM's CPU build)

    s = sampling
    for problems in problem_sets.values():
        check_problems(problems, s.n)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    context = model_context(AutoConfig.from_pretrained(str(model_dir)), (engine_args or {}).get("max_model_len"))
    prompts, params = [], []
    for name, problems in problem_sets.items():
        texts = generation_prompts(problems, tokenizer, context, s.max_new_tokens, prompt_order=s.prompt_order,
                                   chat_template=s.chat_template, name=name)
        prompts += [tokens_prompt(tokenizer, text) for text in texts]
        params += [SamplingParams(n=s.n, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_new_tokens,
                                  seed=request_seed(s.seed, name, pid) if s.reproducible else None)
                   for pid in problems["id"].astype(str)]
    return prompts, params, serving_args(engine_args, prompts, s.max_new_tokens, context)


def request_seed(seed: int, benchmark: str, problem_id: str) -> int:
    """A problem's request seed, 48 bits from (``seed``, ``benchmark``, ``problem_id``), the same on every
    machine and Python (not ``hash``). vLLM gives sample j the seed ``request_seed + j``: two problems'
    seeds fall within n of each other with probability about 2n / 2**48."""
    digest = hashlib.sha256(f"vicurl-eval:{int(seed)}:{benchmark}:{problem_id}".encode()).digest()
    return int.from_bytes(digest[:6], "little")


def serving_args(engine_args: dict[str, Any] | None, prompts: list[dict], max_new_tokens: int,
                 context: int | None) -> dict[str, Any]:
    """``engine_args`` with ``max_model_len`` set, where it is not, to what the job needs: its longest
    prompt plus the response budget (within the model's context). Left unset, vLLM serves the
    model's whole context (131,072 tokens for Llama-3.2-3B and R1-Distill) and must hold a KV cache
    for it; the samples are the same either way."""
    args = dict(engine_args or {})
    if not args.get("max_model_len") and prompts:
        need = max(len(p["prompt_token_ids"]) for p in prompts) + int(max_new_tokens)
        args["max_model_len"] = min(need, context) if context else need
    return args


def start_engine(model_dir: str, seed: int, engine_args: dict[str, Any] | None = None, reproducible: bool = False):
    """``vllm.LLM`` on ``model_dir`` (``engine_args``: the config's ``eval.vllm``), batch-invariant where
    ``reproducible`` asks it on a GPU (``batch_invariance``), with no kernel compiled at run time and its
    sockets' paths short (`vicurl.runtime.vllm_env`)."""
    from vicurl.runtime import vllm_env

    vllm_env.prepare()  # before vLLM's import: a release that reads its variables at import still sees them
    os.environ.update(batch_invariance(reproducible))
    from vllm import LLM

    return LLM(model=str(model_dir), seed=int(seed), **(engine_args or {}))


def batch_invariance(reproducible: bool, cuda: bool | None = None) -> dict[str, str]:
    """The environment that makes vLLM's kernels batch-invariant, so that a seeded request's samples do not
    depend on the requests beside it: asked (``reproducible``) on a GPU. vLLM's batch-invariant kernels are
    Triton (GPU) kernels, its CPU build fails to start with them, and its CPU kernels are batch-invariant as
    they are (tests/gpu_path/test_vllm_engine.py). vLLM's engine process is spawned here
    (`vicurl.runtime.vllm_env`), but a process started otherwise may fork it, and a driver asked before a fork leaves the
    child without a usable CUDA: not asked, CUDA is left untouched; asked, the GPUs are counted through NVML
    (``torch.cuda.device_count``; ``is_available`` would initialize the driver)."""
    if not reproducible:
        return {}
    import torch

    cuda = torch.cuda.device_count() > 0 if cuda is None else cuda
    return {"VLLM_BATCH_INVARIANT": "1"} if cuda else {}


def missing_vllm_names(config_files=()) -> dict[str, list[str]]:
    """The parameters and attributes of ``VLLM_NAMES`` that the importable vLLM lacks, by name, and
    the ``eval.vllm`` keys of ``config_files`` that are not its engine arguments, by file name (empty
    when everything is there). Reads signatures and class fields; starts no engine."""
    import inspect
    from dataclasses import fields
    from pathlib import Path

    import vllm
    import yaml
    from vllm.engine.arg_utils import EngineArgs
    from vllm.inputs import TokensPrompt
    from vllm.outputs import CompletionOutput, RequestOutput

    have = {
        "LLM": inspect.signature(vllm.LLM.__init__).parameters,
        "LLM.generate": inspect.signature(vllm.LLM.generate).parameters,
        "SamplingParams": vllm.SamplingParams.__struct_fields__,
        "TokensPrompt": TokensPrompt.__annotations__,
        "RequestOutput": inspect.signature(RequestOutput.__init__).parameters,
        "CompletionOutput": {f.name for f in fields(CompletionOutput)},
    }
    missing = {name: sorted(set(VLLM_NAMES[name]) - set(have[name])) for name in VLLM_NAMES}
    engine_args = {f.name for f in fields(EngineArgs)}
    for path in map(Path, config_files):
        keys = (((yaml.safe_load(path.read_text()) or {}).get("eval") or {}).get("vllm") or {})
        missing[path.name] = sorted(set(keys) - engine_args)
    return {name: m for name, m in missing.items() if m}


def tokens_prompt(tokenizer, text: str) -> dict[str, list[int]]:
    """vLLM's TokensPrompt (a plain dict) of a prompt text: the ids the CPU sampler conditions on."""
    return {"prompt_token_ids": prompt_token_ids(tokenizer, text)}


def _records(problems: pd.DataFrame, outputs: list, n: int) -> pd.DataFrame:
    rows = []
    for pid, out in zip(problems["id"].astype(str), outputs):
        if len(out.outputs) != n:
            raise RuntimeError(f"vLLM returned {len(out.outputs)} completions for problem {pid!r}, expected {n}")
        for j, c in enumerate(out.outputs):
            rows.append((pid, j, c.text, len(c.token_ids), c.finish_reason == "length"))
    df = pd.DataFrame(rows, columns=RECORD_COLUMNS)
    return df.astype(DTYPES)
