import pandas as pd
import pytest

from vicurl.data.schema import make_row, to_frame
from vicurl.evaluation.generate import RECORD_COLUMNS, generate_records, generate_sets, read_records, write_records
from vicurl.evaluation.records import combine
from vicurl.prompts import build_prompt


@pytest.fixture(scope="module")
def tiny_model_dir(char_model_dir):
    return str(char_model_dir)


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


def test_one_load_for_several_benchmarks_gives_each_benchmarks_own_samples(tiny_model_dir, tmp_path):
    """eval.per_checkpoint: a checkpoint's job samples each benchmark as the per-benchmark job does."""
    other = to_frame([make_row(id=f"r{i}", source="t", question=f"What is {i} * 2?", answer=str(2 * i)) for i in range(2)])
    kw = dict(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=7, batch_size=4)
    sets = generate_sets(tiny_model_dir, {"a": problems(), "b": other}, **kw)
    pd.testing.assert_frame_equal(sets["a"], generate_records(tiny_model_dir, problems(), **kw))
    pd.testing.assert_frame_equal(sets["b"], generate_records(tiny_model_dir, other, **kw))
    path = tmp_path / "samples.parquet"
    write_records(combine(sets), path)
    assert list(pd.read_parquet(path).columns) == ["benchmark", *RECORD_COLUMNS]
    for name in ("a", "b"):
        pd.testing.assert_frame_equal(read_records(path, benchmark=name), sets[name], check_dtype=False)
    with pytest.raises(ValueError, match="no records of benchmark 'c'"):
        read_records(path, benchmark="c")
    write_records(sets["a"], tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="a.parquet: not a checkpoint's records"):
        read_records(tmp_path / "a.parquet", benchmark="a")
