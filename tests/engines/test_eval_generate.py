import pandas as pd
import pytest

from vicurl.config.settings import SamplingSettings
from vicurl.data.schema import make_row, to_frame
from vicurl.evaluation.generate import RECORD_COLUMNS, generate_records, generate_sets, read_records, write_records
from vicurl.evaluation.records import combine


@pytest.fixture(scope="module")
def tiny_model_dir(char_model_dir):
    return str(char_model_dir)


def problems():
    return to_frame([make_row(id=f"q{i}", source="t", question=f"What is {i} + 3?", answer=str(i + 3))
                     for i in range(3)])


def gen(model_dir, seed=1):
    return generate_records(model_dir, problems(), SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6,
                                                                    seed=seed), batch_size=4)


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
    """eval.generate_per: checkpoint: a checkpoint's job samples each benchmark as generating it alone does."""
    other = to_frame([make_row(id=f"r{i}", source="t", question=f"What is {i} * 2?", answer=str(2 * i)) for i in range(2)])
    kw = dict(sampling=SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=7), batch_size=4)
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


def test_a_runs_file_holds_each_checkpoints_records_by_step(tmp_path):
    """eval.generate_per: run: one file with a `step` column in front of a checkpoint's; each
    (step, benchmark) reads back as written, and the long-prompt counts per step."""
    from vicurl.evaluation.records import combine_steps, dropped_problems, read_meta

    def records(tag):
        return pd.DataFrame({"problem_id": ["q0", "q1"], "sample_idx": [0, 0], "text": [f"{tag}0", f"{tag}1"],
                             "n_tokens": [1, 2], "truncated": [False, True]})

    steps = {5: {"a": records("5a"), "b": records("5b")}, 10: {"a": records("10a"), "b": records("10b")}}
    report = {"dropped": 2, "dropped_ids": ["x", "y"]}
    path = tmp_path / "samples.parquet"
    write_records(combine_steps({step: combine(sets) for step, sets in steps.items()}), path,
                  meta={"steps": {"5": {"long_prompts": {"a": report}}, "10": {"long_prompts": {}}}})
    assert list(pd.read_parquet(path).columns) == ["step", "benchmark", *RECORD_COLUMNS]
    for step, sets in steps.items():
        for name, df in sets.items():
            pd.testing.assert_frame_equal(read_records(path, benchmark=name, step=step), df, check_dtype=False)
    assert dropped_problems(read_meta(path), 5) == {"a": 2} and dropped_problems(read_meta(path), 10) == {}
    with pytest.raises(ValueError, match="no records of step 15"):
        read_records(path, benchmark="a", step=15)
    write_records(combine(steps[5]), tmp_path / "ckpt.parquet")
    with pytest.raises(ValueError, match="ckpt.parquet: not a run's records"):
        read_records(tmp_path / "ckpt.parquet", benchmark="a", step=5)


# ---------------------------------------------------------------- prompts too long for the model


def with_long(df, ids, size=400):
    """``df`` with the questions of ``ids`` ``size`` characters long (a token a character here)."""
    df = df.copy()
    df.loc[df["id"].isin(ids), "question"] = "What is " + "1+" * (size // 2) + "3?"
    return df


def test_the_models_context_less_the_response_budget_is_the_limit():
    from transformers import GPT2Config, LlamaConfig

    from vicurl.data.long_prompts import generation_limit, model_context

    assert model_context(LlamaConfig(max_position_embeddings=256)) == 256  # the tiny demo model's
    assert model_context(GPT2Config(n_positions=1024)) == 1024
    assert model_context(LlamaConfig(max_position_embeddings=4096), max_model_len=2048) == 2048  # what vLLM serves
    limit = generation_limit(256, 64, "datasets.arith_easy.on_bad_row")
    assert limit.tokens == 192 and "the model's context of 256 tokens minus eval.max_new_tokens=64" in limit.what
    assert generation_limit(None, 64, "x") is None
    with pytest.raises(ValueError, match="eval.max_new_tokens=300 leaves no room for a prompt in the model's context of 256"):
        generation_limit(256, 300, "x")


def test_a_prompt_the_context_cannot_hold_is_refused_naming_set_and_row(tiny_model_dir):
    """The generator itself never starts on a prompt longer than the context (512) less the budget:
    an error names the set, the row and the setting that would drop it."""
    kw = dict(sampling=SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=1), batch_size=4)
    with pytest.raises(ValueError, match=r"math500: 1 prompt\(s\) longer than 506 tokens \(the model's context of 512 "
                                         r"tokens minus eval.max_new_tokens=6\): 'q1' \(\d+ tokens\); "
                                         r"set datasets.math500.on_bad_row: drop"):
        generate_sets(tiny_model_dir, {"math500": with_long(problems(), ["q1"])}, **kw)


def test_long_problems_are_dropped_and_counted_or_refused_per_on_bad_row(tiny_model_dir):
    """A 1 MB question is dropped (``on_bad_row: drop``) before any generator sees it; the others are
    sampled exactly as in a set without it. A set without long prompts is left as it is."""
    from vicurl.data.long_prompts import fit_sets

    kw = dict(sampling=SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=1), batch_size=4)
    huge = with_long(problems(), ["q1"], size=1_000_000)
    kept, reports = fit_sets(tiny_model_dir, {"a": huge, "b": problems()}, max_new_tokens=6,
                             policies={"a": "drop", "b": "fail"})
    assert list(kept["a"]["id"]) == ["q0", "q2"]
    assert reports["a"]["dropped"] == 1 and reports["a"]["dropped_ids"] == ["q1"] and reports["a"]["rows"] == 3
    assert reports["a"]["max_prompt_length"] == 506 and reports["a"]["longest"] > 1_000_000
    pd.testing.assert_frame_equal(kept["b"], problems())  # nothing to drop: the same problems, the same samples
    assert reports["b"]["dropped"] == 0
    sets = generate_sets(tiny_model_dir, kept, **kw)
    pd.testing.assert_frame_equal(sets["b"], gen(tiny_model_dir))
    pd.testing.assert_frame_equal(sets["a"], generate_records(tiny_model_dir, problems().iloc[[0, 2]], **kw))
    with pytest.raises(ValueError, match=r"a \(data/a.parquet\): 1 prompt\(s\) longer than 506 tokens .*'q1' "
                                         r"\(\d+ tokens\); set datasets.a.on_bad_row: drop"):
        fit_sets(tiny_model_dir, {"a": huge}, max_new_tokens=6, policies="fail", sources={"a": "a (data/a.parquet)"})
    with pytest.raises(ValueError, match="a: all 3 prompts are longer than 506 tokens"):
        fit_sets(tiny_model_dir, {"a": with_long(problems(), ["q0", "q1", "q2"])}, max_new_tokens=6, policies="drop")


def test_dropped_problems_are_counted_not_scored(tmp_path):
    """Grading meets only the problems that were generated: a dropped one is not scored as wrong, and
    the score record counts it (from the samples file's metadata, both file layouts)."""
    from vicurl.evaluation.checkpoint import grade_run
    from vicurl.evaluation.records import dropped_problems, read_meta

    samples = pd.DataFrame({"problem_id": ["q0", "q0", "q2", "q2"], "sample_idx": [0, 1, 0, 1],
                            "text": ["\\boxed{3}", "\\boxed{0}", "\\boxed{5}", "\\boxed{5}"], "n_tokens": [3] * 4,
                            "truncated": [False] * 4})
    report = {"max_prompt_length": 506, "rows": 3, "dropped": 1, "dropped_ids": ["q1"], "longest": 900}
    write_records(samples, tmp_path / "a.parquet", meta={"long_prompts": {"a": report}})
    write_records(combine({"a": samples, "b": samples}), tmp_path / "ckpt.parquet",
                  meta={"long_prompts": {"a": report, "b": {**report, "dropped": 0, "dropped_ids": []}}})
    pd.testing.assert_frame_equal(read_records(tmp_path / "a.parquet"), samples, check_dtype=False)
    assert dropped_problems(read_meta(tmp_path / "a.parquet")) == {"a": 1}
    assert dropped_problems(read_meta(tmp_path / "ckpt.parquet")) == {"a": 1, "b": 0}
    write_records(samples, tmp_path / "old.parquet")  # a file written before (or without) the count
    assert read_meta(tmp_path / "old.parquet") == {} and dropped_problems({}) == {}
    run = dict(study="main", model="m", reward="oracle", curriculum="vicurl", seed=0)
    _, scores = grade_run([(10, {"a": read_records(tmp_path / "a.parquet")})], {"a": problems()}, ks=(1,),
                          identity=run, dropped={10: dropped_problems(read_meta(tmp_path / "a.parquet"))})
    (rec,) = scores
    # q0 1 of 2 right, q2 2 of 2: pass@1 0.75 over the 2 problems generated; q1 is counted, not scored
    assert rec["n_problems"] == 2 and rec["n_long_prompts_dropped"] == 1 and rec["pass@1"] == pytest.approx(0.75)


def test_generate_and_grade_jobs_from_a_python_session(tiny_model_dir, tmp_path):
    """The rules' entry points (`vicurl.evaluation.jobs`) run without Snakemake: a run's file holds
    each checkpoint's samples as a checkpoint's file does, and grading reads either layout alike."""
    from vicurl.data import schema
    from vicurl.evaluation import jobs

    schema.write(problems(), tmp_path / "p.parquet")
    ev = dict(engine="transformers", vllm={}, n_samples=2, temperature=1.0, top_p=1.0, max_new_tokens=6, batch_size=4)
    kw = dict(eval=ev, run_seed=1)
    jobs.generate(tiny_model_dir, {"p": tmp_path / "p.parquet"}, tmp_path / "ck.parquet", step=5, **kw)
    jobs.generate({5: tiny_model_dir}, {"p": tmp_path / "p.parquet"}, tmp_path / "run.parquet", **kw)
    assert jobs.sampling_seed(1, 5) == 1_000_008  # the run's seed and the step: reruns reproduce the samples
    pd.testing.assert_frame_equal(read_records(tmp_path / "ck.parquet", benchmark="p"),
                                  read_records(tmp_path / "run.parquet", benchmark="p", step=5))
    scores = [jobs.grade([tmp_path / f], [5], {"p": tmp_path / "p.parquet"}, ks=[1], identity={"run": "r"},
                         layout=layout, graded=tmp_path / f"{layout}.graded.parquet",
                         scores=tmp_path / f"{layout}.scores.json")
              for f, layout in (("ck.parquet", "checkpoint"), ("run.parquet", "run"))]
    assert scores[0] == scores[1] and scores[0][0]["step"] == 5 and scores[0][0]["n_problems"] == 3
    with pytest.raises(ValueError, match="eval.generate_per: 'benchmark'"):
        list(jobs.checkpoints([tmp_path / "ck.parquet"], [5], ["p"], "benchmark"))
