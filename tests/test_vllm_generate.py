"""The vLLM generation path with vLLM replaced at its API boundary (vLLM runs only on GPUs).

Everything else is the real code: prompts, request parameters, records, and grading/scoring
downstream read them like the CPU path's records. Prompts reach vLLM as token ids built as the
CPU sampler builds them; where vLLM itself imports (its `vllm` env, or a CPU machine with the
wheel on PYTHONPATH) its own prompt parser and renderer check that they are taken as is.
"""

import sys
import types
from dataclasses import dataclass

import pandas as pd
import pytest
import torch

from vicurl.curriculum.prompt_stats import COLUMNS, offline_statistics
from vicurl.evaluation.generate import RECORD_COLUMNS
from vicurl.evaluation.grade import grade_records
from vicurl.evaluation.score import score
from vicurl.evaluation.vllm_generate import generate_records_vllm, generate_sets_vllm, tokens_prompt
from vicurl.sampling import sample
from vicurl.prompts import build_prompt, prompt_token_ids
from vicurl.settings import SamplingSettings

BOS = "<s>"
# Llama 3's chat template renders its own BOS: a tokenizer that also adds one doubles it
BOS_CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
                     "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def make_bos_model(path):
    """A tiny Llama whose tokenizer adds a BOS (a TemplateProcessing post-processor, as Llama's and
    R1-Distill's do) and whose chat template renders one too; character-level, built offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", BOS, "<|user|>", "<|assistant|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for c in "0123456789+-*=. ()<>/\\{}abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'\n,$:?":
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tk.add_special_tokens(specials)  # matched whole in text, before the character split
    tk.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token=BOS)
    tok.chat_template = BOS_CHAT_TEMPLATE
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=vocab[BOS])
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def bos_model_dir(tmp_path_factory):
    return str(make_bos_model(tmp_path_factory.mktemp("bos_model") / "model"))


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
    df = generate_records_vllm(str(char_model_dir), problems,
                               SamplingSettings(n=4, temperature=0.6, top_p=0.95, max_new_tokens=32, seed=100),
                               engine_args={"tensor_parallel_size": 2})
    assert list(df.columns) == RECORD_COLUMNS
    assert list(df["problem_id"]) == ["a"] * 4 + ["b"] * 4 and list(df["sample_idx"]) == [0, 1, 2, 3] * 2
    assert list(df["n_tokens"]) == [3, 4, 5, 6] * 2
    assert list(df["truncated"]) == [True, False, False, False] * 2  # finish reason "length"
    assert fake_vllm["llm"] == {"seed": 100, "tensor_parallel_size": 2}
    assert [p["seed"] for p in fake_vllm["params"]] == [100, 101]  # a seed per problem
    assert fake_vllm["params"][0] == {"n": 4, "temperature": 0.6, "top_p": 0.95, "max_tokens": 32, "seed": 100}
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(char_model_dir))
    # the training template, as token ids (vLLM's TokensPrompt)
    assert fake_vllm["prompts"][0] == {"prompt_token_ids": prompt_token_ids(tok, build_prompt("Compute 1 + 1."))}
    graded = grade_records(df, problems)
    s = score(graded, ks=(1, 4))
    assert s["pass@1"] == pytest.approx(0.5) and s["truncated_rate"] == 0.25


def test_vllm_several_benchmarks_one_engine_one_call(fake_vllm, char_model_dir):
    """eval.generate_per: checkpoint: one engine and one batched call; each benchmark's records and request
    seeds are those of a job on that benchmark alone."""
    a = pd.DataFrame({"id": ["a0", "a1"], "question": ["Compute 1 + 1.", "Compute 2 + 1."]})
    b = pd.DataFrame({"id": ["b0"], "question": ["Compute 5 + 1."]})
    kw = dict(sampling=SamplingSettings(n=2, temperature=0.6, top_p=0.95, max_new_tokens=8, seed=50))
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
    assert all(t.startswith(BOS) for t in texts)  # the template renders the BOS
    assert [tok(t)["input_ids"].count(bos) for t in texts] == [2, 2]  # what string prompts got
    model = AutoModelForCausalLM.from_pretrained(bos_model_dir)
    ro = sample(model, tok, texts, 2, temperature=1.0, max_new_tokens=3, seed=0)
    for j, req in enumerate(fake_vllm["prompts"]):
        ids = req["prompt_token_ids"]
        assert set(req) == {"prompt_token_ids"} and ids.count(bos) == 1 and ids[0] == bos
        for row in (2 * j, 2 * j + 1):  # both samples of prompt j
            assert ro.prompt_ids[row][ro.prompt_mask[row].bool()].tolist() == ids


def _vllm_renderer():
    """vLLM's own prompt parser and renderer, or a skip saying why they are not importable."""
    try:
        from vllm.renderers.hf import HfRenderer
        from vllm.renderers.inputs.preprocess import parse_model_prompt
    except Exception as e:  # noqa: BLE001 (not installed, or a partial install that fails to import)
        pytest.skip(f"vLLM's renderer is not importable here ({type(e).__name__}: {e}); it is in the `vllm` "
                    "env, or on a CPU machine: pip install --no-deps --target DIR vllm==0.24.0 (+ a few of its "
                    "deps) and PYTHONPATH=DIR")
    return HfRenderer, parse_model_prompt


def test_real_vllm_takes_our_prompt_as_tokens(bos_model_dir):
    """vLLM 0.24's own code path of ``LLM.generate`` for a prompt (``LLM._preprocess_cmpl``: parse the
    prompt, the completion tokenize params, ``render_cmpl``) keeps our ids as they are, where a string
    prompt gets the tokenizer's BOS in front of the template's. The engine is not started."""
    HfRenderer, parse_model_prompt = _vllm_renderer()
    from vllm.config import ModelConfig
    from vllm.tokenizers import get_tokenizer

    model_config = ModelConfig(model=bos_model_dir, tokenizer=bos_model_dir, dtype="float32", max_model_len=256)
    tokenizer = get_tokenizer(bos_model_dir)
    # the two fields a renderer reads of a VllmConfig (a full one needs a GPU platform to build)
    config = types.SimpleNamespace(model_config=model_config, parallel_config=types.SimpleNamespace(_api_process_rank=0))
    renderer = HfRenderer(config, tokenizer)
    params = renderer.default_cmpl_tok_params.with_kwargs()
    assert params.add_special_tokens  # why string prompts get a second BOS

    text = build_prompt("Compute 1 + 1.", tokenizer=tokenizer, chat_template=True)
    ours = tokens_prompt(tokenizer, text)
    (engine_input,) = renderer.render_cmpl([parse_model_prompt(model_config, dict(ours))], params)
    assert engine_input["type"] == "token" and engine_input["prompt_token_ids"] == ours["prompt_token_ids"]
    assert engine_input["prompt_token_ids"].count(tokenizer.bos_token_id) == 1
    (from_text,) = renderer.render_cmpl([parse_model_prompt(model_config, text)], params)
    assert from_text["prompt_token_ids"] == [tokenizer.bos_token_id] + ours["prompt_token_ids"]


def test_prompt_stats_sample_with_vllm_when_the_eval_engine_is_vllm(fake_vllm, char_model_dir):
    """Rule prompt_stats goes through eval.engine's generator: vLLM's requests carry k, the
    prompt_stats sampling settings and eval.vllm's engine arguments; the statistics follow."""
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 0 + 1."],
                             "answer": ["0", "1"], "answer_type": ["math", "math"]})
    settings = {"k": 4, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 16, "batch_size": 64, "seed": 7}
    stats = offline_statistics(str(char_model_dir), problems, settings, engine="vllm",
                               vllm_args={"gpu_memory_utilization": 0.8})
    assert fake_vllm["engines"] == 1 and fake_vllm["llm"] == {"seed": 7, "gpu_memory_utilization": 0.8}
    assert fake_vllm["params"] == [{"n": 4, "temperature": 1.0, "top_p": 1.0, "max_tokens": 16, "seed": 7 + i}
                                   for i in range(2)]
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
