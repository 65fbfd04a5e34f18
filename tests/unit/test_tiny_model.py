"""The tiny base model: tokenizer round trips, HF save/reload, SFT, determinism."""

from __future__ import annotations

import json

import pytest
import torch

from vicurl.data.prompts import build_prompt
from vicurl.data.synthetic import make_set
from vicurl.models.tiny import (
    DEFAULT_CFG,
    build_base_model,
    build_model,
    build_tokenizer,
    encode_sft,
    load_base_model,
    merge_cfg,
    sft,
    tokenizer_texts,
)

TINY = {
    "vocab_size": 384,
    "arch": {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "max_position_embeddings": 128,
    },
    "sft": {"steps": 12, "batch_size": 8, "lr": 3e-3, "warmup": 2},
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def df():
    return make_set("sft", 120, [1, 2, 3, 4, 5, 6], seed=0)


@pytest.fixture(scope="module")
def tok(df):
    return build_tokenizer(tokenizer_texts(df), 384)


@pytest.fixture(scope="module")
def built(df, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "base"
    metrics = build_base_model(df, out, TINY, seed=5)
    return out, metrics


def test_tokenizer_round_trips(df, tok):
    texts = tokenizer_texts(df) + [
        build_prompt(q) + s for q, s in zip(df["question"][:10], df["solution"][:10])
    ] + [
        "<think>23 + 45 = 68. 68 - 7 = 61.</think> The answer is \\boxed{61}.",
        "  two  spaces\n\nnewlines\tand tab ",
        "unseen: é ∑ 😀 {}[]()$",
        "\\boxed{-12}",
    ]
    for t in texts:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == t
    # digits are always single tokens
    ids = tok("1234567890", add_special_tokens=False)["input_ids"]
    assert [tok.decode([i]) for i in ids] == list("1234567890")
    assert tok.pad_token_id is not None and tok.eos_token_id is not None
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.model_max_length == 128
    assert len(tok) == 384
    # no special tokens sneak in on plain encoding
    assert tok("Compute 1 + 2.")["input_ids"] == tok("Compute 1 + 2.", add_special_tokens=False)["input_ids"]


def test_tokenizer_is_deterministic(df, tok):
    tok2 = build_tokenizer(tokenizer_texts(df), 384)
    assert tok2.get_vocab() == tok.get_vocab()


def test_sft_labels_mask_the_prompt(df, tok):
    ids, labels = encode_sft(tok, df["question"][:5], df["solution"][:5])
    for q, s, x, y in zip(df["question"], df["solution"], ids, labels):
        n_prompt = len(tok(build_prompt(q), add_special_tokens=False)["input_ids"])
        assert all(v == -100 for v in y[:n_prompt])
        assert y[n_prompt:] == x[n_prompt:]
        assert x[-1] == tok.eos_token_id
        assert tok.decode(x[n_prompt:-1]) == s


def test_sft_lowers_the_loss(df, tok):
    model = build_model(tok, TINY["arch"], seed=0)
    ids, labels = encode_sft(tok, df["question"][:32], df["solution"][:32])

    def loss():
        from vicurl.models.tiny import _collate

        inp, att, lab = _collate(ids, labels, tok.pad_token_id)
        with torch.no_grad():
            return float(model(input_ids=inp, attention_mask=att, labels=lab).loss)

    before = loss()
    m = sft(model, tok, df, steps=40, batch_size=8, lr=3e-3, seed=0, warmup=4)
    after = loss()
    assert after < before - 1.0
    assert m["final_loss"] < m["first_loss"]
    assert m["steps"] == 40 and m["tokens"] > 0 and m["tokens_per_s"] > 0


def test_build_saves_and_reloads_in_hf_format(built, df):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, metrics = built
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
              "generation_config.json", "build_metrics.json"):
        assert (out / f).exists(), f
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp left over
    assert metrics["steps"] == TINY["sft"]["steps"] and metrics["vocab_size"] == 384
    assert json.loads((out / "build_metrics.json").read_text())["final_loss"] == pytest.approx(metrics["final_loss"])

    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.tie_word_embeddings
    assert model.config.eos_token_id == tok.eos_token_id and model.config.pad_token_id == tok.pad_token_id
    assert model.generation_config.eos_token_id == tok.eos_token_id
    # the reloaded tokenizer tokenizes exactly like the raw tokenizers pipeline that was saved
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(out / "tokenizer.json"))
    for t in tokenizer_texts(df.head(6)):
        assert tok(t, add_special_tokens=False)["input_ids"] == raw.encode(t).ids
        assert tok.decode(raw.encode(t).ids) == t


def test_reload_gives_identical_logits_and_generation(df, tok, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = build_model(tok, TINY["arch"], seed=1)
    sft(model, tok, df, steps=5, batch_size=8, lr=3e-3, seed=0, warmup=1)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    model2 = AutoModelForCausalLM.from_pretrained(tmp_path)
    model.eval(), model2.eval()

    prompts = [build_prompt(q) for q in df["question"][:4]]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    enc2 = tok2(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    assert torch.equal(enc["input_ids"], enc2["input_ids"])
    with torch.no_grad():
        a = model(**enc).logits
        b = model2(**enc2).logits
    assert torch.equal(a, b)

    from vicurl.models.sampling import sample

    r1 = sample(model, tok, prompts, 2, temperature=1.0, max_new_tokens=12, seed=3)
    r2 = sample(model2, tok2, prompts, 2, temperature=1.0, max_new_tokens=12, seed=3)
    assert r1.texts == r2.texts and torch.equal(r1.response_ids, r2.response_ids)


def test_build_is_deterministic(built, df, tmp_path):
    from safetensors.torch import load_file

    out, metrics = built
    out2 = tmp_path / "again"
    metrics2 = build_base_model(df, out2, TINY, seed=5)
    a, b = load_file(str(out / "model.safetensors")), load_file(str(out2 / "model.safetensors"))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert metrics2["final_loss"] == metrics["final_loss"]
    assert (out / "tokenizer.json").read_text() == (out2 / "tokenizer.json").read_text()

    out3 = tmp_path / "other_seed"
    build_base_model(df, out3, TINY, seed=6)
    c = load_file(str(out3 / "model.safetensors"))
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_load_base_model_and_defaults(built):
    out, _ = built
    model, tok = load_base_model(out)
    assert not model.training
    assert type(tok).__name__ not in {"Qwen2Tokenizer", "LlamaTokenizer"}  # our pipeline, not a re-created one
    cfg = merge_cfg({"arch": {"hidden_size": 8}, "sft": {"steps": 1}})
    assert cfg["arch"]["hidden_size"] == 8 and cfg["arch"]["num_hidden_layers"] == DEFAULT_CFG["arch"]["num_hidden_layers"]
    assert cfg["sft"]["steps"] == 1 and cfg["sft"]["lr"] == DEFAULT_CFG["sft"]["lr"]
    assert DEFAULT_CFG["sft"]["steps"] != 1  # merge did not mutate the defaults


def test_packed_and_example_mean_losses_match_unpacked(df, tok):
    from vicurl.models.tiny import _collate, _example_mean_loss, _pack

    model = build_model(tok, {**TINY["arch"], "initializer_range": 0.2}, seed=0)
    ids, labels = encode_sft(tok, df["question"][:12], df["solution"][:12])
    inp, att, lab = _collate(ids, labels, tok.pad_token_id)
    pinp, pos, plab = _pack(ids, labels, tok.pad_token_id, 128)
    assert pinp.shape[0] < inp.shape[0] and pinp.numel() < inp.numel()  # packing saves compute
    with torch.no_grad():
        padded = model(input_ids=inp, attention_mask=att, labels=lab, use_cache=False).loss
        packed = model(input_ids=pinp, position_ids=pos, labels=plab, use_cache=False).loss
        assert packed == pytest.approx(float(padded), abs=1e-5)  # no attention across examples
        per_example = torch.stack([
            model(input_ids=torch.tensor([x]), labels=torch.tensor([y]), use_cache=False).loss
            for x, y in zip(ids, labels)
        ]).mean()
        em_padded = _example_mean_loss(model(input_ids=inp, attention_mask=att, use_cache=False).logits, lab)
        em_packed = _example_mean_loss(model(input_ids=pinp, position_ids=pos, use_cache=False).logits, plab, pos)
    assert float(em_padded) == pytest.approx(float(per_example), abs=1e-5)
    assert float(em_packed) == pytest.approx(float(per_example), abs=1e-5)


def test_curriculum_pool_share():
    from vicurl.models.tiny import pool_share

    assert pool_share(0, 100, 0.0, 0.3) == 1.0  # no curriculum
    assert pool_share(0, 100, 0.75, 0.34, hold=0.4) == 0.34
    assert pool_share(39, 100, 0.75, 0.34, hold=0.4) == 0.34
    assert 0.34 < pool_share(60, 100, 0.75, 0.34, hold=0.4) < 1.0
    assert pool_share(75, 100, 0.75, 0.34, hold=0.4) == 1.0
    shares = [pool_share(s, 100, 0.75, 0.34, hold=0.4) for s in range(100)]
    assert shares == sorted(shares)


def test_evaluate_levels_report(built, df):
    from vicurl.models.tiny import evaluate_levels

    out, _ = built
    model, tok = load_base_model(out)
    rep = evaluate_levels(model, tok, df.head(6), n=2, temperature=1.0, max_new_tokens=8, seed=0)
    assert set(rep) == {"1", "2", "3", "4", "5", "6", "all"}
    assert rep["all"]["prompts"] == 6
    for d in rep.values():
        assert 0.0 <= d["pass@1"] <= 1.0 and 0.0 <= d["eos"] <= 1.0 and d["entropy"] >= 0.0


def test_small_vocab_still_builds(df, tmp_path):
    # too few merges to compress the instruction: examples exceed max_length, rows grow to fit
    cfg = {**TINY, "vocab_size": 300, "sft": {"steps": 2, "batch_size": 8}}
    with pytest.warns(UserWarning, match="model_max_length"):
        m = build_base_model(df.head(40), tmp_path / "m", cfg, seed=0)
    assert m["vocab_size"] == 300 and (tmp_path / "m" / "model.safetensors").exists()
