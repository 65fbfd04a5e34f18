"""The vLLM generation path with vLLM replaced at its API boundary (vLLM runs only on GPUs).

Everything else is the real code: prompts, request parameters, records, and grading/scoring
downstream read them like the CPU path's records.
"""

import sys
import types
from dataclasses import dataclass

import pandas as pd
import pytest

from vicurl.evaluation.generate import RECORD_COLUMNS
from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score
from vicurl.evaluation.vllm_generate import generate_records_vllm, generate_sets_vllm
from vicurl.prompts import build_prompt


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
            calls["engines"] = calls.get("engines", 0) + 1

        def generate(self, prompts, params):
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
    df = generate_records_vllm(str(char_model_dir), problems, n=4, temperature=0.6, top_p=0.95, max_new_tokens=32,
                               seed=100, engine_args={"tensor_parallel_size": 2})
    assert list(df.columns) == RECORD_COLUMNS
    assert list(df["problem_id"]) == ["a"] * 4 + ["b"] * 4 and list(df["sample_idx"]) == [0, 1, 2, 3] * 2
    assert list(df["n_tokens"]) == [3, 4, 5, 6] * 2
    assert list(df["truncated"]) == [True, False, False, False] * 2  # finish reason "length"
    assert fake_vllm["llm"] == {"seed": 100, "tensor_parallel_size": 2}
    assert [p["seed"] for p in fake_vllm["params"]] == [100, 101]  # a seed per problem
    assert fake_vllm["params"][0] == {"n": 4, "temperature": 0.6, "top_p": 0.95, "max_tokens": 32, "seed": 100}
    assert fake_vllm["prompts"][0] == build_prompt("Compute 1 + 1.")  # the training template
    graded = grade_records(df, problems)
    s = score(graded, ks=(1, 4))
    assert s["pass@1"] == pytest.approx(0.5) and s["truncated_rate"] == 0.25


def test_vllm_several_benchmarks_one_engine_one_call(fake_vllm, char_model_dir):
    """eval.per_checkpoint: one engine and one batched call; each benchmark's records and request
    seeds are those of a job on that benchmark alone."""
    a = pd.DataFrame({"id": ["a0", "a1"], "question": ["Compute 1 + 1.", "Compute 2 + 1."]})
    b = pd.DataFrame({"id": ["b0"], "question": ["Compute 5 + 1."]})
    kw = dict(n=2, temperature=0.6, top_p=0.95, max_new_tokens=8, seed=50)
    sets = generate_sets_vllm(str(char_model_dir), {"a": a, "b": b}, **kw)
    assert fake_vllm["engines"] == 1 and fake_vllm["generate_calls"] == 1
    assert [p["seed"] for p in fake_vllm["params"]] == [50, 51, 50]
    assert list(sets["a"]["problem_id"]) == ["a0", "a0", "a1", "a1"] and list(sets["b"]["problem_id"]) == ["b0", "b0"]
    alone = generate_records_vllm(str(char_model_dir), b, **kw)
    assert [p["seed"] for p in fake_vllm["params"]] == [50]
    assert list(sets["b"]["n_tokens"]) == list(alone["n_tokens"]) and list(sets["b"].columns) == RECORD_COLUMNS


def test_vllm_wrong_completion_count_is_an_error(fake_vllm, char_model_dir, monkeypatch):
    problems = pd.DataFrame({"id": ["a"], "question": ["q"]})
    real = sys.modules["vllm"].LLM.generate

    def short(self, prompts, params):
        outs = real(self, prompts, params)
        outs[0].outputs = outs[0].outputs[:1]
        return outs

    monkeypatch.setattr(sys.modules["vllm"].LLM, "generate", short)
    with pytest.raises(RuntimeError, match="expected 2"):
        generate_records_vllm(str(char_model_dir), problems, n=2, temperature=1, top_p=1, max_new_tokens=4, seed=0)
