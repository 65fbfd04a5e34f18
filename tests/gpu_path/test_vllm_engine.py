"""The evaluation's vLLM path on vLLM's real engine (its CPU build), through the project's own code,
on the demo's tiny base model: what vLLM does with the prompts and requests the project builds.

One engine serves the module (an engine start is about 25 CPU-seconds here), one of the BOS model its two
tests; the samples depend only on the requests' seeds, which a fresh engine checks (``test_prompt_stats_*``).
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from vicurl.config.settings import SamplingSettings
from vicurl.curriculum.prompt_stats import COLUMNS, offline_statistics, prompt_statistics
from vicurl.data.long_prompts import generation_prompts, model_context
from vicurl.data.prompts import build_prompt
from vicurl.engines.rollout import sequence_logprobs
from vicurl.evaluation.generate import generate_sets, load_model
from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.vllm_generate import (
    VLLM_NAMES,
    generate_records_vllm,
    generate_sets_vllm,
    missing_vllm_names,
    start_engine,
    tokens_prompt,
)
from vicurl.models.sampling import Rollouts, left_padded, sample

from harness import long_folder

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
EVAL = yaml.safe_load((ROOT / "config" / "demo.yaml").read_text())["eval"]
Z_MAX = 3.5  # two generators of one distribution: |z| > 3.5 with probability 5e-4


def eval_sampling(n: int = EVAL["n_samples"], seed: int = 0, **kw) -> SamplingSettings:
    """The demo's evaluation sampling (config/demo.yaml `eval`), with seeded requests (``reproducible``)."""
    return SamplingSettings(n=n, temperature=EVAL["temperature"], top_p=EVAL["top_p"],
                            max_new_tokens=EVAL["max_new_tokens"], seed=seed, **{"reproducible": True, **kw})


@pytest.fixture(scope="module")
def engine(vllm, tiny_model_dir, engine_args, tmp_path_factory):
    """The module's engine, started as an evaluation job starts it, under a 100-character TMPDIR (SLURM's
    per-job ones are often long, and vLLM's sockets, <temp folder>/<uuid4>, must fit 107 bytes)."""
    import tempfile

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", long_folder(tmp_path_factory.mktemp("t"), 100))
        mp.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again (and start_engine sets it: restored)
        llm = start_engine(tiny_model_dir, 0, engine_args)
    yield llm
    shut_down(llm)


def shut_down(llm) -> None:
    """The engine's processes ended before the module's end removes its temp folder and shared memory
    (tests/conftest.py), as an evaluation's exit ends them before its own cleanup."""
    llm.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="module")
def benchmarks(demo_splits):
    """The demo's two benchmarks."""
    return {"arith_easy": demo_splits["arith_easy"], "arith_hard": demo_splits["arith_hard"]}


class Recorder:
    """The engine, keeping what it returned to the project's code for the test to read."""

    def __init__(self, llm):
        self.llm, self.outputs = llm, None

    def generate(self, prompts, params, **kw):
        self.outputs = self.llm.generate(prompts, params, **kw)
        return self.outputs


def paired_z(a: pd.Series, b: pd.Series, n_a: int, n_b: int) -> tuple[float, float]:
    """(z, standard error) of the mean over problems of the difference of two pass rates, each from
    n_a / n_b independent samples per problem. If both generators sample one distribution, a problem's
    two rates share a p_i, so Var(a_i - b_i) = p_i (1 - p_i) (1/n_a + 1/n_b), p_i pooled."""
    a, b = a.sort_index(), b.sort_index()
    assert list(a.index) == list(b.index)
    p = (a * n_a + b * n_b) / (n_a + n_b)
    se = math.sqrt(float((p * (1 - p) * (1 / n_a + 1 / n_b)).sum())) / len(a)
    d = float((a - b).mean())
    return (d / se if se > 0 else (0.0 if d == 0 else math.inf)), se


# ---------------------------------------------------------------- the names the project uses


def test_the_engine_starts_with_nothing_to_compile_and_short_sockets(vllm, engine):
    """The evaluation's engine (started under a 100-character TMPDIR, the fixture) read the variables of
    `vicurl.runtime.vllm_env` as vLLM's own settings: its FlashInfer sampler off (no kernel compiled at run time),
    its sockets in a short link to a folder of the temp folder."""
    import os

    import vllm.envs as envs

    assert envs.VLLM_USE_FLASHINFER_SAMPLER is False
    base = envs.VLLM_RPC_BASE_PATH
    assert len(base) + 37 <= 107 and os.path.islink(base), base
    job = Path(os.path.realpath(base)).parent  # its target: a folder of the job's own temp folder in the long TMPDIR
    assert job.name.startswith("vicurl-") and len(str(job.parent)) == 100, base


# the evaluation's engine started by a process whose OpenMP threads exist (a model converted on the CPU first, as
# the evaluation that stalled on an H200 had done); a forked child of it would hang (tests/unit/test_vllm_env.py)
AFTER_PARALLEL_WORK = r"""
import json, sys, torch
from vicurl.rehearsal.cpu import apply


def allocate():  # an engine core's first work, its input batch's buffers: a forked child would wait forever here
    float(torch.zeros((1024, 3300)).sum())


if __name__ == "__main__":  # vLLM's spawned processes import this file again
    apply()
    torch.set_num_threads(2)
    a = torch.randn(1500, 1500)
    float((a @ a).sum())
    from vicurl.runtime import vllm_env
    vllm_env.prepare()
    from vllm.utils.system_utils import get_mp_context
    context = get_mp_context()  # what vLLM starts its engine core with, before its CPU platform's own say
    child = context.Process(target=allocate)
    child.start()
    child.join(60)
    allocated = child.exitcode == 0
    if child.is_alive():
        child.kill()
    from vicurl.evaluation.vllm_generate import start_engine
    import vllm
    llm = start_engine(sys.argv[1], 0, json.loads(sys.argv[2]))
    out = llm.generate([{"prompt_token_ids": [5, 6, 7]}], vllm.SamplingParams(max_tokens=4, seed=0), use_tqdm=False)
    print(json.dumps({"method": context.get_start_method(), "allocated": allocated,
                      "tokens": len(out[0].outputs[0].token_ids)}), flush=True)
"""


def test_the_engine_starts_after_parallel_work_on_the_cpu(vllm, tiny_model_dir, engine_args, tmp_path):
    """A process that ran a parallel torch op, then prepared vLLM's environment (`vicurl.runtime.vllm_env.prepare`):
    vLLM's own process context spawns, not forks (on a GPU it would fork: vLLM's CPU platform spawns later on
    its own), a child it starts allocates an engine core's first buffers (a forked one waits forever there),
    and the engine starts and generates."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "after_parallel.py"
    script.write_text(AFTER_PARALLEL_WORK)
    env = {k: v for k, v in os.environ.items() if k != "VLLM_WORKER_MULTIPROC_METHOD"} | {"OMP_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, str(script), tiny_model_dir, json.dumps(engine_args)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (line,) = [x for x in out.stdout.splitlines() if x.startswith('{"method"')]  # vLLM logs its shutdown after it
    assert json.loads(line) == {"method": "spawn", "allocated": True, "tokens": 4}


def test_the_vllm_names_the_project_uses_exist_with_their_meaning(vllm, engine):
    """Every name in ``VLLM_NAMES`` (the one list; docs/rehearsal.md says which vLLM versions were checked):
    the constructors' and ``generate``'s parameters, the token prompt's key, the outputs' fields, also
    on a real output; and every ``eval.vllm`` key of the repository's configs is an engine argument."""
    from vllm.outputs import CompletionOutput, RequestOutput

    assert missing_vllm_names(sorted((ROOT / "config").glob("*.yaml"))) == {}
    assert any(p.kind is p.VAR_KEYWORD for p in inspect.signature(vllm.LLM.__init__).parameters.values())
    out = engine.generate([{"prompt_token_ids": [5, 6, 7]}], vllm.SamplingParams(n=2, max_tokens=4, seed=0),
                          use_tqdm=False)[0]
    assert isinstance(out, RequestOutput) and isinstance(out.outputs[0], CompletionOutput)
    assert all(hasattr(out, a) for a in VLLM_NAMES["RequestOutput"])
    assert all(hasattr(out.outputs[0], a) for a in VLLM_NAMES["CompletionOutput"])


# ---------------------------------------------------------------- log-probs and records


def test_vllm_logprobs_equal_the_cpu_paths_on_the_same_completions(vllm, engine, tiny_model_dir, benchmarks):
    """The log-prob vLLM reports for each sampled token equals the one the training code computes
    (``vicurl.engines.rollout.sequence_logprobs``, transformers, float32) for the same prompt ids and
    completion: the engine serves the model the trainer trains. vLLM reports log-probs before the
    temperature (its default ``raw_logprobs``), so the samples are drawn at temperature 1. Also the
    records' fields: the text is the completion's ids decoded as the CPU path decodes them, and the
    token count includes the EOS, as the CPU path's response mask does."""
    model, tok = load_model(tiny_model_dir, "cpu")
    problems = pd.concat([benchmarks["arith_easy"].head(10), benchmarks["arith_hard"].head(10)])
    prompts = generation_prompts(problems, tok, model_context(model.config), 64, prompt_order="question_first",
                                 chat_template=False)
    requests = [tokens_prompt(tok, p) for p in prompts]
    outs = engine.generate(requests, vllm.SamplingParams(n=4, temperature=1.0, top_p=1.0, max_tokens=64, seed=3,
                                                         logprobs=0), use_tqdm=False)
    prompt_ids, completions, vllm_lp = [], [], []
    for req, out in zip(requests, outs):
        assert list(out.prompt_token_ids) == req["prompt_token_ids"]
        for c in out.outputs:
            ids = list(c.token_ids)
            prompt_ids.append(req["prompt_token_ids"])
            completions.append(ids)
            vllm_lp.append([pos[t].logprob for pos, t in zip(c.logprobs, ids)])
            assert c.text == tok.decode(ids, skip_special_tokens=True)
            assert (c.finish_reason == "stop") == (ids[-1] == tok.eos_token_id)  # EOS counted in n_tokens
            assert c.finish_reason in ("stop", "length") and (c.finish_reason == "stop" or len(ids) == 64)
    p_ids, p_mask = left_padded(prompt_ids, tok.pad_token_id)
    width = max(len(c) for c in completions)
    r_ids = torch.full((len(completions), width), tok.pad_token_id, dtype=torch.long)
    r_mask = torch.zeros_like(r_ids)
    for i, c in enumerate(completions):
        r_ids[i, : len(c)], r_mask[i, : len(c)] = torch.tensor(c), 1
    ro = Rollouts(p_ids, p_mask, r_ids, r_mask, [""] * len(completions), torch.zeros(len(completions), dtype=torch.bool))
    with torch.no_grad():
        ours, _ = sequence_logprobs(model, ro, slice(None), temperature=1.0, with_entropy=False)
        for w in model.parameters():  # the nearest other model: the same weights rounded to bf16
            w.copy_(w.bfloat16().float())
        rounded, _ = sequence_logprobs(model, ro, slice(None), temperature=1.0, with_entropy=False)
    diffs = torch.cat([(ours[i, : len(lp)] - torch.tensor(lp)).abs() for i, lp in enumerate(vllm_lp)])
    other = torch.cat([(ours[i, : len(lp)] - rounded[i, : len(lp)]).abs() for i, lp in enumerate(vllm_lp)])
    assert len(diffs) > 1000  # 80 completions
    print(f"log-prob agreement: {len(diffs)} tokens, largest difference {float(diffs.max()):.2e}; "
          f"to the bf16-rounded weights' {float(other.max()):.2e}")
    # the two fp32 paths differ by their kernels' rounding: bf16's rounding of the weights moves these tokens'
    # log-probs by ``other``, and fp32's unit is 2^-16 of bf16's; 100 such units for what accumulates over the
    # layers and the vocabulary's sum (12 measured on the Intel kind with AMX: 2.3e-5 against 1.27e-1; the AMD
    # EPYC with AVX2 gave 2.9e-5), a bound from the run's own rounding, not one machine's figure; a wrong model,
    # or one computed in bf16, is thousands of units off
    assert float(diffs.max()) < 100 * 2**-16 * float(other.max()), (float(diffs.max()), float(other.max()))


# ---------------------------------------------------------------- seeds and batches


def test_same_seeds_same_samples_whatever_else_shares_the_batch(engine, tiny_model_dir, benchmarks):
    """``generate_sets_vllm`` on the real engine: a rerun gives the same records; a benchmark's records
    are the same generated with the other benchmark in the batch or alone, and a problem's samples the
    same when other problems are left out (each request is seeded by its benchmark and problem id)."""
    s = eval_sampling(seed=11)
    both = generate_sets_vllm(tiny_model_dir, benchmarks, s, llm=engine)
    again = generate_sets_vllm(tiny_model_dir, benchmarks, s, llm=engine)
    for name in benchmarks:
        pd.testing.assert_frame_equal(both[name], again[name])
    alone = generate_sets_vllm(tiny_model_dir, {"arith_hard": benchmarks["arith_hard"]}, s, llm=engine)
    pd.testing.assert_frame_equal(alone["arith_hard"], both["arith_hard"])
    easy = benchmarks["arith_easy"]
    part = generate_sets_vllm(tiny_model_dir, {"arith_easy": easy.iloc[3:10]}, s, llm=engine)["arith_easy"]
    pd.testing.assert_frame_equal(part, both["arith_easy"].iloc[3 * s.n : 10 * s.n].reset_index(drop=True))
    other_seed = generate_records_vllm(tiny_model_dir, benchmarks["arith_easy"], eval_sampling(seed=12), llm=engine)
    assert list(other_seed["text"]) != list(both["arith_easy"]["text"])


def test_identical_problems_and_benchmarks_get_their_own_samples(vllm, engine, tiny_model_dir, benchmarks):
    """vLLM seeds a request's j-th sample ``seed + j``. With problem i seeded ``seed + i`` (as before),
    two identical problems side by side repeated each other's samples shifted by one, and problem i of
    every benchmark of a job drew the same noise; each (benchmark, problem) now has a seed of its own
    (``request_seed``), and a rerun gives the same records."""
    from transformers import AutoTokenizer

    from vicurl.evaluation.vllm_generate import request_seed

    q = benchmarks["arith_hard"]["question"].iloc[0]  # a problem the model answers many ways
    problems = pd.DataFrame({"id": ["a", "b"], "question": [q, q]})
    s = eval_sampling(n=8, seed=5, chat_template=False)
    sets = generate_sets_vllm(tiny_model_dir, {"x": problems, "y": problems}, s, llm=engine)

    def texts(name, pid):
        return sets[name].query("problem_id == @pid").sort_values("sample_idx")["text"].tolist()

    a, b = texts("x", "a"), texts("x", "b")
    assert len(set(a)) > 1  # the samples vary, so a shift would show
    assert a[1:] != b[:-1] and a != b and texts("y", "a") != a
    # what consecutive seeds gave: the second problem's samples are the first's, shifted by one
    prompt = tokens_prompt(AutoTokenizer.from_pretrained(tiny_model_dir), build_prompt(q, chat_template=False))
    consecutive = [vllm.SamplingParams(n=8, temperature=s.temperature, top_p=s.top_p, max_tokens=s.max_new_tokens,
                                       seed=request_seed(5, "x", "a") + i) for i in range(2)]
    first, second = ([c.text for c in out.outputs] for out in engine.generate([prompt, prompt], consecutive,
                                                                                use_tqdm=False))
    assert first == a and first[1:] == second[:-1]
    again = generate_sets_vllm(tiny_model_dir, {"x": problems, "y": problems}, s, llm=engine)
    assert all(again[k].equals(sets[k]) for k in sets)


# ---------------------------------------------------------------- prompts as token ids


@pytest.fixture(scope="module")
def bos_engine(vllm, bos_model_dir, engine_args):
    """An engine of the BOS model (`bos_model_dir`) that runs a function it is sent in its worker, as verl's
    weight sync has it do: the weights test changes its weights, so it comes last."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # apply_model sends a function to the worker
        mp.syspath_prepend(str(Path(__file__).parent))  # which imports it by name: spawned processes get this sys.path
        llm = start_engine(bos_model_dir, 0, engine_args)
    yield llm
    shut_down(llm)


def test_vllm_takes_the_token_prompts_as_they_are_no_bos_added(vllm, bos_engine, bos_model_dir):
    """A tokenizer that adds a BOS and a chat template that renders one: vLLM's engine conditions on
    exactly the ids the CPU sampler conditions on (one BOS, the template's); a string prompt would
    have got a second one (vLLM tokenizes it with special tokens)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bos_model_dir)
    bos = tok.bos_token_id
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 2 + 3."]})
    s = SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=4, seed=0, chat_template=True)
    llm = Recorder(bos_engine)
    records = generate_records_vllm(bos_model_dir, problems, s, llm=llm)
    assert len(records) == 4
    texts = [build_prompt(q, tokenizer=tok, chat_template=True) for q in problems["question"]]
    ro = sample(AutoModelForCausalLM.from_pretrained(bos_model_dir), tok, texts, 2, temperature=1.0, max_new_tokens=3,
                seed=0)
    for j, out in enumerate(llm.outputs):
        ids = list(out.prompt_token_ids)
        assert ids.count(bos) == 1 and ids[0] == bos
        assert ro.prompt_ids[2 * j][ro.prompt_mask[2 * j].bool()].tolist() == ids
    (from_text,) = llm.llm.generate([texts[0]], _params(n=1), use_tqdm=False)
    assert list(from_text.prompt_token_ids) == [bos] + list(llm.outputs[0].prompt_token_ids)


# ---------------------------------------------------------------- weights updated in place, as verl's sync does


def test_the_engine_computes_with_the_weights_a_sync_loads(vllm, bos_engine, engine_args, monkeypatch):
    """vLLM's CPU build packs its linear weights into oneDNN or AMX kernels and drops the Parameters (in
    float32 on every x86 CPU); verl's sync then failed ("'Parameter' object has no attribute
    'weight_loader'") and the run hung. With `vicurl.rehearsal.vllm_cpu` (a vLLM plugin of the
    rehearsal's environment) the weights stay Parameters: loaded in place, the engine samples from them
    (a zero embedding, tied to the lm_head, makes every next token equally likely: log-prob -log V). On the
    BOS model's engine, its last user."""
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # this process pickles the function (the engine's
    monkeypatch.syspath_prepend(str(Path(__file__).parent))          # processes were started with both: the fixture)
    from weight_sync import load_in_place

    assert engine_args["dtype"] == "float32"
    (result,) = bos_engine.apply_model(load_in_place)
    assert result == (True, 0.0)
    params = vllm.SamplingParams(n=2, max_tokens=8, seed=0, logprobs=0, ignore_eos=True)
    (out,) = bos_engine.generate([{"prompt_token_ids": [5, 6, 7]}], params, use_tqdm=False)
    vocab = bos_engine.llm_engine.model_config.get_vocab_size()
    lps = [pos[t].logprob for c in out.outputs for pos, t in zip(c.logprobs, c.token_ids)]
    assert len(lps) == 16 and lps == pytest.approx([-math.log(vocab)] * 16, abs=1e-5)


def _params(**kw):
    from vllm import SamplingParams

    return SamplingParams(max_tokens=2, seed=0, **kw)


# ---------------------------------------------------------------- prompts too long for the context


def test_a_prompt_too_long_for_the_response_budget_never_reaches_vllm(vllm, engine, tiny_model_dir, engine_args):
    """Left to vLLM, a prompt that leaves less than ``max_new_tokens`` of the context is answered with a
    cut response, without an error; the project refuses it first, naming the set and the row."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = engine_args["max_model_len"]

    def n_prompt(question):
        return len(tokens_prompt(tok, build_prompt(question))["prompt_token_ids"])

    # the shortest sum of ones whose prompt leaves the response 8 to 63 tokens of the context
    long = next(q for q in ("Compute " + " + ".join(["1"] * k) + "." for k in range(1, 200))
                if context - 64 < n_prompt(q) <= context - 8)
    problems = pd.DataFrame({"id": ["short", "long"], "question": ["Compute 1 + 1.", long]})
    budget = context - n_prompt(long)
    (out,) = engine.generate([tokens_prompt(tok, build_prompt(long))],
                             vllm.SamplingParams(n=1, temperature=1.0, max_tokens=64, seed=0, ignore_eos=True),
                             use_tqdm=False)
    assert len(out.outputs[0].token_ids) == budget < 64 and out.outputs[0].finish_reason == "length"
    s = SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=64, seed=0)
    with pytest.raises(ValueError, match=rf"arith: 1 prompt\(s\) longer than {engine_args['max_model_len'] - 64} tokens"
                                         r".*'long'.*datasets.arith.on_bad_row: drop"):
        generate_sets_vllm(tiny_model_dir, {"arith": problems}, s, engine_args=engine_args, llm=engine)


# ---------------------------------------------------------------- the two generators agree


def test_prompt_stats_through_vllm_write_what_the_transformers_path_writes(vllm, engine, tiny_model_dir, demo_splits,
                                                                           engine_args):
    """Rule prompt_stats with ``eval.engine: vllm`` (its own engine, as the rule starts one) against the
    transformers path on the same training prompts: the same columns and prompts (the over-long one
    dropped by both), pass rates within sampling error; and, seeded (``reproducible``), its samples are
    the shared engine's for the same requests (a fresh engine reproduces them)."""
    train = demo_splits["arith_train"].head(64)
    long = train.iloc[[0]].assign(id="too-long", question="Compute " + " + ".join(["1"] * 100) + ".")
    problems = pd.concat([train, long], ignore_index=True)
    settings = {"k": 8, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 64, "batch_size": 256, "seed": 5}
    kw = dict(dataset="arith_train", on_bad_row="drop", reproducible=True)
    with_vllm = offline_statistics(tiny_model_dir, problems, settings, engine="vllm", vllm_args=engine_args, **kw)
    with_hf = offline_statistics(tiny_model_dir, problems, settings, engine="transformers", device="cpu", **kw)
    assert list(with_vllm.columns) == list(with_hf.columns) == COLUMNS
    assert list(with_vllm["id"]) == list(with_hf["id"]) == list(train["id"])
    assert set(with_vllm["k"]) == {8}
    z, se = paired_z(with_vllm.set_index("id")["pass_rate"], with_hf.set_index("id")["pass_rate"], 8, 8)
    print(f"prompt_stats pass rate: vLLM {with_vllm['pass_rate'].mean():.3f}, transformers "
          f"{with_hf['pass_rate'].mean():.3f}, z {z:.2f}, standard error {se:.4f}")
    assert abs(z) < Z_MAX, (z, se, with_vllm["pass_rate"].mean(), with_hf["pass_rate"].mean())
    assert 0.05 < with_vllm["pass_rate"].mean() < 0.95  # the test has something to compare

    s = SamplingSettings(n=8, temperature=1.0, top_p=1.0, max_new_tokens=64, seed=5, reproducible=True)
    shared = generate_sets_vllm(tiny_model_dir, {"arith_train": train}, s, llm=engine)["arith_train"]
    pd.testing.assert_frame_equal(prompt_statistics(grade_records(shared, train)), with_vllm)


def test_pass1_of_the_demo_benchmarks_agrees_between_the_generators(engine, tiny_model_dir, benchmarks):
    """Pass@1 of the base model on the demo's two benchmarks (40 problems each, the demo's evaluation
    sampling, 16 samples per problem) from vLLM and from transformers. The test: the mean per-problem
    difference of the pass rates over its standard error under "one distribution" (``paired_z``),
    |z| < 3.5. Its power: the standard error is about 1.6 points here, so a true difference of
    (3.5 + 0.84) x 1.6, about 7 points, is caught 80 % of the time (the bugs it guards against, a
    doubled BOS, a temperature or top-p not applied, move Pass@1 by more)."""
    s = eval_sampling(n=16, seed=21)
    v = generate_sets_vllm(tiny_model_dir, benchmarks, s, llm=engine)
    t = generate_sets(tiny_model_dir, benchmarks, s, batch_size=512, device="cpu")
    for name, problems in benchmarks.items():
        pv = grade_records(v[name], problems).groupby("problem_id")["correct"].mean()
        pt = grade_records(t[name], problems).groupby("problem_id")["correct"].mean()
        z, se = paired_z(pv, pt, 16, 16)
        print(f"{name}: Pass@1 vLLM {pv.mean():.3f}, transformers {pt.mean():.3f}, z {z:.2f}, standard error {se:.4f}")
        assert se < 0.03, (name, se)
        assert abs(z) < Z_MAX, (name, z, pv.mean(), pt.mean())
