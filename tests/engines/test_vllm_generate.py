"""The vLLM generation path's own logic, with vLLM replaced at its API boundary: the prompts and
request parameters it builds, the records it makes of vLLM's outputs, the checks before an engine
starts. What vLLM itself does with them (samples, log-probs, seeds, token prompts, long prompts) is
tested on the real engine, vLLM's CPU build: tests/gpu_path/test_vllm_engine.py.
"""

import dataclasses
import os
import sys
import types
from dataclasses import dataclass

import pandas as pd
import pytest

from vicurl.config.settings import SamplingSettings
from vicurl.curriculum.prompt_stats import COLUMNS, offline_statistics
from vicurl.data.prompts import build_prompt, prompt_token_ids
from vicurl.evaluation.generate import RECORD_COLUMNS
from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score
from vicurl.evaluation.vllm_generate import generate_records_vllm, generate_sets_vllm, request_seed
from vicurl.models.sampling import sample


@dataclass
class Completion:
    text: str
    token_ids: list
    finish_reason: str


@pytest.fixture
def fake_vllm(monkeypatch):
    calls = {}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LLM:
        def __init__(self, model, **kw):
            calls["model"], calls["llm"] = model, kw
            calls["batch_invariant"] = os.environ.get("VLLM_BATCH_INVARIANT")
            calls["start_method"] = os.environ.get("VLLM_WORKER_MULTIPROC_METHOD")
            calls["engines"] = calls.get("engines", 0) + 1

        def generate(self, prompts, params, use_tqdm=True):
            calls["prompts"], calls["params"] = prompts, [p.kw for p in params]
            calls["generate_calls"] = calls.get("generate_calls", 0) + 1
            outs = []
            for i, (prompt, p) in enumerate(zip(prompts, params)):
                comps = [Completion(f"<think>.</think> \\boxed{{{i + j % 2}}}", [7] * (3 + j), "stop" if j else "length")
                         for j in range(p.kw["n"])]
                outs.append(types.SimpleNamespace(prompt=prompt, outputs=comps))
            return outs

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams))
    return calls


def test_vllm_records_match_the_cpu_schema(fake_vllm, char_model_dir):
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 0 + 1."],
                             "answer": ["0", "1"], "answer_type": ["math", "math"]})
    df = generate_records_vllm(str(char_model_dir), problems,
                               SamplingSettings(n=4, temperature=0.6, top_p=0.95, max_new_tokens=32, seed=100,
                                                reproducible=True),
                               engine_args={"tensor_parallel_size": 2})
    assert list(df.columns) == RECORD_COLUMNS
    assert list(df["problem_id"]) == ["a"] * 4 + ["b"] * 4 and list(df["sample_idx"]) == [0, 1, 2, 3] * 2
    assert list(df["n_tokens"]) == [3, 4, 5, 6] * 2
    assert list(df["truncated"]) == [True, False, False, False] * 2  # finish reason "length"
    # the engine serves what the job needs: its longest prompt plus the response budget
    longest = max(len(p["prompt_token_ids"]) for p in fake_vllm["prompts"])
    assert fake_vllm["llm"] == {"seed": 100, "tensor_parallel_size": 2, "max_model_len": longest + 32}
    seeds = [request_seed(100, "", pid) for pid in ("a", "b")]  # a seed per problem, from its id
    assert [p["seed"] for p in fake_vllm["params"]] == seeds and len(set(seeds)) == 2
    assert fake_vllm["params"][0] == {"n": 4, "temperature": 0.6, "top_p": 0.95, "max_tokens": 32, "seed": seeds[0]}
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(char_model_dir))
    # the training template, as token ids (vLLM's TokensPrompt)
    assert fake_vllm["prompts"][0] == {"prompt_token_ids": prompt_token_ids(tok, build_prompt("Compute 1 + 1."))}
    graded = grade_records(df, problems)
    s = score(graded, ks=(1, 4))
    assert s["pass@1"] == pytest.approx(0.5) and s["truncated_rate"] == 0.25


def test_unless_asked_requests_go_unseeded_and_the_engine_as_it_is(fake_vllm, char_model_dir, monkeypatch):
    """Without ``reproducible`` (the default) no request carries a seed: vLLM keeps its batched sampler
    (a seeded request takes it to a per-request loop); the engine is seeded. Asked, the requests are
    seeded and, on a GPU only, the engine is batch-invariant (vLLM's CPU build fails with that mode)."""
    from vicurl.evaluation import vllm_generate

    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "0")  # so that the test's end unsets it again
    monkeypatch.delenv("VLLM_BATCH_INVARIANT")
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 0 + 1."]})
    s = SamplingSettings(n=2, temperature=0.6, top_p=0.95, max_new_tokens=8, seed=3)
    generate_sets_vllm(str(char_model_dir), {"x": problems}, s)
    assert [p["seed"] for p in fake_vllm["params"]] == [None, None] and fake_vllm["llm"]["seed"] == 3
    assert fake_vllm["batch_invariant"] is None
    generate_sets_vllm(str(char_model_dir), {"x": problems}, dataclasses.replace(s, reproducible=True))
    assert [p["seed"] for p in fake_vllm["params"]] == [request_seed(3, "x", "a"), request_seed(3, "x", "b")]
    assert fake_vllm["batch_invariant"] is None  # no GPU here
    monkeypatch.setattr(vllm_generate, "batch_invariance", lambda reproducible: {"VLLM_BATCH_INVARIANT": "1"})
    generate_sets_vllm(str(char_model_dir), {"x": problems}, dataclasses.replace(s, reproducible=True))
    assert fake_vllm["batch_invariant"] == "1"
    monkeypatch.undo()
    assert vllm_generate.batch_invariance(True, cuda=True) == {"VLLM_BATCH_INVARIANT": "1"}
    assert vllm_generate.batch_invariance(True, cuda=False) == vllm_generate.batch_invariance(False, cuda=True) == {}
    assert "VLLM_BATCH_INVARIANT" not in os.environ


def test_the_evaluations_engine_starts_with_spawn_set_and_the_train_jobs_vllm_chooses(fake_vllm, char_model_dir,
                                                                                         monkeypatch):
    """The evaluation's engine starts in an environment that asks vLLM to spawn (vLLM's CPU build spawns whatever
    it says, so its effect shows on a GPU only); a value already set wins. The train job's processes leave the
    method to vLLM: in verl's Ray actors it spawns and passes the run's Ray address on, which it skips where the
    variable is set."""
    from vicurl.engines.verl import launch

    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    problems = pd.DataFrame({"id": ["a"], "question": ["Compute 1 + 1."]})
    generate_sets_vllm(str(char_model_dir), {"x": problems}, SamplingSettings(n=1, temperature=0.6, top_p=0.95, max_new_tokens=4, seed=0))
    assert fake_vllm["start_method"] == "spawn"
    env = launch.verl_environment({})
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in env and env["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert launch.verl_environment({"VLLM_WORKER_MULTIPROC_METHOD": "fork"}).get("VLLM_WORKER_MULTIPROC_METHOD") is None


def test_the_default_evaluation_leaves_cuda_alone_before_vllm_forks(monkeypatch):
    """Not reproducible (the default), the evaluation asks nothing of CUDA before vLLM starts its engine
    process: a driver touched before the fork can leave that process without a usable CUDA."""
    import torch

    from vicurl.evaluation import vllm_generate

    def touched():
        raise AssertionError("CUDA asked before vLLM forks")

    for name in ("is_available", "device_count", "init", "current_device", "_lazy_init"):
        monkeypatch.setattr(torch.cuda, name, touched)
    assert vllm_generate.batch_invariance(False) == {}


def test_the_reproducible_evaluation_counts_gpus_without_starting_cuda(monkeypatch):
    """Reproducible, the evaluation asks whether there is a GPU (for vLLM's batch-invariant kernels) through
    NVML, which leaves the driver alone: CUDA's own count (``cudaGetDeviceCount``, behind
    ``torch.cuda.is_available``) would poison the fork of vLLM's engine process."""
    import torch

    from vicurl.evaluation import vllm_generate

    def touched(*_):
        raise AssertionError("CUDA initialized before vLLM forks")

    monkeypatch.setattr(torch.cuda, "is_available", touched)
    monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", touched, raising=False)
    monkeypatch.setattr(torch.cuda, "_is_compiled", lambda: True)  # a CUDA build of torch, on a GPU node
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 1)
    assert vllm_generate.batch_invariance(True) == {"VLLM_BATCH_INVARIANT": "1"}
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 0)  # no GPU
    assert vllm_generate.batch_invariance(True) == {}


def test_vllm_several_benchmarks_one_engine_one_call(fake_vllm, char_model_dir):
    """eval.generate_per: checkpoint: one engine and one batched call; each benchmark's records and request
    seeds are those of a job on that benchmark alone."""
    a = pd.DataFrame({"id": ["a0", "a1"], "question": ["Compute 1 + 1.", "Compute 2 + 1."]})
    b = pd.DataFrame({"id": ["b0"], "question": ["Compute 5 + 1."]})
    kw = dict(sampling=SamplingSettings(n=2, temperature=0.6, top_p=0.95, max_new_tokens=8, seed=50, reproducible=True))
    sets = generate_sets_vllm(str(char_model_dir), {"a": a, "b": b}, **kw)
    assert fake_vllm["engines"] == 1 and fake_vllm["generate_calls"] == 1
    seeds = [request_seed(50, "a", "a0"), request_seed(50, "a", "a1"), request_seed(50, "b", "b0")]
    assert [p["seed"] for p in fake_vllm["params"]] == seeds
    assert list(sets["a"]["problem_id"]) == ["a0", "a0", "a1", "a1"] and list(sets["b"]["problem_id"]) == ["b0", "b0"]
    alone = generate_sets_vllm(str(char_model_dir), {"b": b}, **kw)["b"]
    assert [p["seed"] for p in fake_vllm["params"]] == seeds[2:]
    assert list(sets["b"]["n_tokens"]) == list(alone["n_tokens"]) and list(sets["b"].columns) == RECORD_COLUMNS


def test_vllm_wrong_completion_count_is_an_error(fake_vllm, char_model_dir, monkeypatch):
    problems = pd.DataFrame({"id": ["a"], "question": ["q"]})
    real = sys.modules["vllm"].LLM.generate

    def short(self, prompts, params, **kw):
        outs = real(self, prompts, params, **kw)
        outs[0].outputs = outs[0].outputs[:1]
        return outs

    monkeypatch.setattr(sys.modules["vllm"].LLM, "generate", short)
    with pytest.raises(RuntimeError, match="expected 2"):
        generate_records_vllm(str(char_model_dir), problems,
                              SamplingSettings(n=2, temperature=1, top_p=1, max_new_tokens=4, seed=0))


def test_vllm_gets_the_cpu_samplers_ids_with_the_chat_templates_bos_only(fake_vllm, bos_model_dir):
    """A chat-template model: vLLM is given exactly one BOS (the template's), the ids the CPU
    sampler conditions on. A string prompt would have got two (vLLM adds special tokens)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bos_model_dir)
    bos = tok.bos_token_id
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 2 + 3."]})
    generate_records_vllm(bos_model_dir, problems, SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=4, seed=0,
                                                            chat_template=True))
    texts = [build_prompt(q, tokenizer=tok, chat_template=True) for q in problems["question"]]
    assert all(t.startswith(tok.bos_token) for t in texts)  # the template renders the BOS
    assert [tok(t)["input_ids"].count(bos) for t in texts] == [2, 2]  # what string prompts got
    model = AutoModelForCausalLM.from_pretrained(bos_model_dir)
    ro = sample(model, tok, texts, 2, temperature=1.0, max_new_tokens=3, seed=0)
    for j, req in enumerate(fake_vllm["prompts"]):
        ids = req["prompt_token_ids"]
        assert set(req) == {"prompt_token_ids"} and ids.count(bos) == 1 and ids[0] == bos
        for row in (2 * j, 2 * j + 1):  # both samples of prompt j
            assert ro.prompt_ids[row][ro.prompt_mask[row].bool()].tolist() == ids


def test_prompt_stats_sample_with_vllm_when_the_eval_engine_is_vllm(fake_vllm, char_model_dir):
    """Rule prompt_stats goes through eval.engine's generator: vLLM's requests carry k, the
    prompt_stats sampling settings and eval.vllm's engine arguments; the statistics follow."""
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 0 + 1."],
                             "answer": ["0", "1"], "answer_type": ["math", "math"]})
    settings = {"k": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "batch_size": 64, "seed": 7}
    stats = offline_statistics(str(char_model_dir), problems, settings, engine="vllm",
                               vllm_args={"gpu_memory_utilization": 0.8}, reproducible=True)
    longest = max(len(p["prompt_token_ids"]) for p in fake_vllm["prompts"])
    assert fake_vllm["engines"] == 1
    assert fake_vllm["llm"] == {"seed": 7, "gpu_memory_utilization": 0.8, "max_model_len": longest + 16}
    assert fake_vllm["params"] == [{"n": 4, "temperature": 1.0, "top_p": 1.0, "max_tokens": 16,
                                    "seed": request_seed(7, "", pid)} for pid in ("a", "b")]
    # the fake answers 0 or 1 alternately for "a" and 1 or 2 for "b": half right each
    assert list(stats.columns) == COLUMNS and list(stats["id"]) == ["a", "b"]
    assert list(stats["pass_rate"]) == [0.5, 0.5] and list(stats["n_clusters"]) == [2, 2]


def test_prompt_stats_transformers_engine_never_imports_vllm(char_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # an import of vllm would fail
    problems = pd.DataFrame({"id": ["a"], "question": ["Compute 1 + 1."], "answer": ["2"], "answer_type": ["math"]})
    settings = {"k": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 4, "batch_size": 4, "seed": 0}
    stats = offline_statistics(str(char_model_dir), problems, settings, engine="transformers", device="cpu")
    assert list(stats["k"]) == [2]
    with pytest.raises(ValueError, match="eval.engine must be one of"):
        offline_statistics(str(char_model_dir), problems, settings, engine="hf")


def test_vllm_refuses_a_prompt_longer_than_the_context_it_serves(fake_vllm, char_model_dir):
    """The context is eval.vllm's max_model_len where it is set (else the model's): a prompt that
    cannot get its whole response budget is refused naming set and row, before an engine starts;
    dropped first where the dataset says so, rule prompt_stats included."""
    long = "What is " + "1+" * 60 + "1?"
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", long], "answer": ["2", "2"],
                             "answer_type": ["math", "math"]})
    kw = dict(sampling=SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=16, seed=0))
    generate_records_vllm(str(char_model_dir), problems, **kw)  # the model's 512 positions hold both
    with pytest.raises(ValueError, match=r"gsm: 1 prompt\(s\) longer than 240 tokens \(the model's context of 256 tokens "
                                         r"minus eval.max_new_tokens=16\): 'b' .*datasets.gsm.on_bad_row: drop"):
        generate_sets_vllm(str(char_model_dir), {"gsm": problems}, engine_args={"max_model_len": 256}, **kw)
    assert fake_vllm["engines"] == 1  # only the first call's
    settings = {"k": 2, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "batch_size": 4, "seed": 0}
    stats = offline_statistics(str(char_model_dir), problems, settings, engine="vllm", vllm_args={"max_model_len": 256},
                               dataset="train", on_bad_row="drop")
    assert list(stats["id"]) == ["a"] and len(fake_vllm["prompts"]) == 1
    with pytest.raises(ValueError, match=r"train: 1 prompt\(s\) longer than 240 tokens \(the model's context of 256 "
                                         r"tokens minus prompt_stats.max_new_tokens=16\): 'b'"):
        offline_statistics(str(char_model_dir), problems, settings, engine="vllm", vllm_args={"max_model_len": 256},
                           dataset="train")


def test_the_engine_serves_the_jobs_longest_prompt_plus_the_budget():
    """Unset, ``max_model_len`` is the longest prompt plus the response budget, within the model's
    context; a configured one stays."""
    from vicurl.evaluation.vllm_generate import serving_args

    prompts = [{"prompt_token_ids": [1] * 30}, {"prompt_token_ids": [1] * 70}]
    assert serving_args({"dtype": "bfloat16"}, prompts, 100, 131072) == {"dtype": "bfloat16", "max_model_len": 170}
    assert serving_args(None, prompts, 100, 150) == {"max_model_len": 150}
    assert serving_args({"max_model_len": 4096}, prompts, 100, 131072) == {"max_model_len": 4096}
    assert serving_args(None, [], 100, 131072) == {}
