import pandas as pd
import pytest
import torch

from vicurl.data.schema import make_row, to_frame
from vicurl.evaluation.generate import RECORD_COLUMNS, generate_records, read_records, write_records
from vicurl.prompts import build_prompt


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("tiny_model")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = [build_prompt("What is 2 + 3?"), "\\boxed{5} <think> 0 1 2 3 4 5 6 7 8 9 + - * = </think>"]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "<eos>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id,
                      bos_token_id=fast.eos_token_id, tie_word_embeddings=True)
    Qwen2ForCausalLM(cfg).save_pretrained(d)
    return str(d)


def problems():
    return to_frame([make_row(id=f"q{i}", source="t", question=f"What is {i} + 3?", answer=str(i + 3))
                     for i in range(3)])


def gen(model_dir, seed=1):
    return generate_records(model_dir, problems(), n=2, temperature=1.0, top_p=1.0, max_new_tokens=6,
                            seed=seed, batch_size=4)


def test_records_shape_and_determinism(tiny_model_dir, tmp_path):
    a = gen(tiny_model_dir)
    assert list(a.columns) == RECORD_COLUMNS
    assert len(a) == 6
    assert a["problem_id"].tolist() == ["q0", "q0", "q1", "q1", "q2", "q2"]
    assert a["sample_idx"].tolist() == [0, 1] * 3
    assert a["n_tokens"].between(1, 6).all()
    assert a["truncated"].dtype == bool
    assert (a.loc[a["truncated"], "n_tokens"] == 6).all()
    pd.testing.assert_frame_equal(a, gen(tiny_model_dir))
    path = tmp_path / "out" / "records.parquet"
    write_records(a, path)
    pd.testing.assert_frame_equal(read_records(path), a, check_dtype=False)
    assert [p.name for p in path.parent.iterdir()] == ["records.parquet"]
