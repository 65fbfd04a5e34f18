import numpy as np
import pandas as pd
import pytest

from vicurl.data.schema import make_row, to_frame
from vicurl.evaluation.grade import GRADERS, grade_records, per_item, register_grader
from vicurl.evaluation.score import score


def problems():
    return to_frame([
        make_row(id="p1", source="t", question="1+1?", answer="2"),
        make_row(id="p2", source="t", question="half?", answer="\\frac{1}{2}"),
    ])


def samples(n=4):
    texts = {
        "p1": ["so \\boxed{2}", "\\boxed{3}", "no idea", "\\boxed{ 2 }"],
        "p2": ["\\boxed{0.5}", "\\boxed{1/2}", "\\boxed{}", "\\boxed{\\frac{1}{3}}"],
    }
    rows = []
    for pid, ts in texts.items():
        for j, t in enumerate(ts[:n]):
            rows.append({"problem_id": pid, "sample_idx": j, "text": t,
                         "n_tokens": 10 * (j + 1), "truncated": j == 2})
    return pd.DataFrame(rows)


def test_grade_math():
    g = grade_records(samples(), problems())
    assert list(g.columns[:5]) == ["problem_id", "sample_idx", "text", "n_tokens", "truncated"]
    assert g["correct"].tolist() == [True, False, False, True, True, True, False, False]
    assert g["no_answer"].tolist() == [False, False, True, False, False, False, True, False]
    assert g["extracted"].iloc[2] is None and g["extracted"].iloc[6] is None
    assert g["extracted"].iloc[1] == "3"
    assert g["correct"].dtype == bool and g["no_answer"].dtype == bool


def test_score():
    s = score(grade_records(samples(), problems()), ks=(1, 2))
    assert s["n_problems"] == 2 and s["n_samples"] == 4
    # p1: c=2 of 4, p2: c=2 of 4
    assert s["pass@1"] == pytest.approx(0.5)
    assert s["pass@2"] == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
    assert s["no_answer_rate"] == pytest.approx(2 / 8)
    assert s["truncated_rate"] == pytest.approx(2 / 8)
    assert s["mean_length"] == pytest.approx(25.0)
    assert s["p90_length"] == pytest.approx(np.percentile([10, 20, 30, 40] * 2, 90))


def test_score_default_k_needs_enough_samples():
    with pytest.raises(ValueError, match="k=8"):
        score(grade_records(samples(), problems()))


def test_unequal_n_errors():
    g = grade_records(samples(), problems())
    with pytest.raises(ValueError, match="same n"):
        score(g.iloc[:-1], ks=(1,))


def test_unknown_answer_type_errors():
    p = problems()
    p.loc[1, "answer_type"] = "essay"  # not a schema type: no grader
    with pytest.raises(ValueError, match=r"'essay'.*'p2'"):
        grade_records(samples(), p)


def test_unknown_problem_id_errors():
    s = samples()
    s.loc[0, "problem_id"] = "zzz"
    with pytest.raises(ValueError, match="zzz"):
        grade_records(s, problems())


def test_register_grader_plugs_in():
    p = problems()
    p.loc[:, "answer_type"] = "bool"

    @per_item
    def always(text, problem):
        return ("x", problem["id"] == "p1")

    before = GRADERS["bool"]
    try:
        register_grader("bool", always)
        g = grade_records(samples(), p)
        assert g["correct"].tolist() == [True] * 4 + [False] * 4
        assert not g["no_answer"].any()
    finally:
        GRADERS["bool"] = before


def test_grade_records_dispatches_every_answer_type(tmp_path):
    """Mixed answer types, with options read back from parquet (numpy arrays), as the loaders write them."""
    from vicurl.data import schema

    rows = [
        make_row(id="mc", source="mmlu_pro", question="q", answer="J", answer_type="multiple_choice",
                 options=[f"opt{k}" for k in range(10)]),
        make_row(id="gp", source="gpqa", question="q", answer="B", answer_type="multiple_choice", options=["w", "x", "y", "z"]),
        make_row(id="tf", source="theoremqa", question="q", answer="True", answer_type="bool"),
        make_row(id="fl", source="theoremqa", question="q", answer="1.42", answer_type="float"),
        make_row(id="in", source="theoremqa", question="q", answer="-36", answer_type="integer"),
        make_row(id="li", source="theoremqa", question="q", answer="[4, 1, 2, 0]", answer_type="list"),
        make_row(id="op", source="theoremqa", question="q", answer="(c)", answer_type="option"),
        make_row(id="ma", source="math500", question="q", answer="\\frac{14}{3}", answer_type="math"),
    ]
    schema.write(to_frame(rows), tmp_path / "p.parquet")
    probs = schema.read(tmp_path / "p.parquet")
    texts = {"mc": ["the answer is (J)", "\\boxed{A}", "hmm"], "gp": ["\\boxed{B}", "\\boxed{E}", "B"],
             "tf": ["\\boxed{True}", "\\boxed{no}", "\\boxed{x}"], "fl": ["\\boxed{1.45}", "\\boxed{1.6}", ""],
             "in": ["\\boxed{-36}", "\\boxed{36}", "\\boxed{-36.5}"], "li": ["\\boxed{[0, 1, 2, 4]}", "\\boxed{[4, 1, 2]}", "[4,1,2,0]"],
             "op": ["\\boxed{(c)}", "The answer is (a).", "\\boxed{}"], "ma": ["\\boxed{4\\frac{2}{3}}", "\\boxed{4.67}", "no"]}
    s = pd.DataFrame([{"problem_id": pid, "sample_idx": j, "text": t} for pid, ts in texts.items() for j, t in enumerate(ts)])
    g = grade_records(s, probs).set_index(["problem_id", "sample_idx"])
    expected_correct = {"mc": [1, 0, 0], "gp": [1, 0, 1], "tf": [1, 0, 0], "fl": [1, 0, 0], "in": [1, 0, 0],
                        "li": [1, 0, 0], "op": [1, 0, 0], "ma": [1, 0, 0]}
    expected_none = {"mc": [0, 0, 1], "gp": [0, 1, 0], "tf": [0, 0, 1], "fl": [0, 0, 1], "in": [0, 0, 0],
                     "li": [0, 0, 1], "op": [0, 0, 1], "ma": [0, 0, 1]}
    for pid in texts:
        assert g.loc[pid, "correct"].astype(int).tolist() == expected_correct[pid], pid
        assert g.loc[pid, "no_answer"].astype(int).tolist() == expected_none[pid], pid


def other_problems():
    # the same ids as problems() with other answers: a checkpoint's benchmarks must not meet
    return to_frame([
        make_row(id="p1", source="u", question="3-1?", answer="3"),
        make_row(id="p2", source="u", question="third?", answer="\\frac{1}{3}"),
    ])


def test_grade_checkpoint_equals_grading_each_benchmark_alone():
    from vicurl.evaluation.checkpoint import grade_checkpoint

    sets = {"a": samples(), "b": samples()}
    probs = {"a": problems(), "b": other_problems()}
    identity = dict(study="main", model="m", reward="oracle", curriculum="vicurl", seed=3, step=50)
    graded, records = grade_checkpoint(sets, probs, ks=(1, 2), identity=identity)
    assert list(graded.columns[:2]) == ["benchmark", "problem_id"]
    for bench, rec in zip(("a", "b"), records):
        alone = grade_records(sets[bench], probs[bench])
        mine = graded[graded["benchmark"] == bench].drop(columns="benchmark").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, alone)
        assert rec == {**score(alone, ks=(1, 2)), **identity, "benchmark": bench}
    # by hand: a's p1 has 2 of 4 right, p2 2 of 4 -> pass@1 1/2; b's p1 ("3") 1 of 4, p2 (1/3) 1 of 4
    assert records[0]["pass@1"] == pytest.approx(0.5) and records[1]["pass@1"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no problems table for benchmark"):
        grade_checkpoint({"c": samples()}, probs, ks=(1,), identity=identity)


def test_grade_run_is_grade_checkpoint_per_step_without_the_texts():
    from vicurl.evaluation.checkpoint import VERDICT_COLUMNS, grade_checkpoint, grade_run

    probs = {"a": problems(), "b": other_problems()}
    later = samples().assign(text=lambda d: d["text"].str.replace("3", "2"))  # step 20: "3" -> "2" in every text
    steps = {10: {"a": samples(), "b": samples()}, 20: {"a": later, "b": samples()}}
    run = dict(study="main", model="m", reward="oracle", curriculum="vicurl", seed=3)
    read = []

    def lazily():
        for step, sets in steps.items():
            read.append(step)
            yield step, sets

    verdicts, records = grade_run(lazily(), probs, ks=(1, 2), identity=run)
    assert read == [10, 20] and list(verdicts.columns) == VERDICT_COLUMNS
    assert [(r["step"], r["benchmark"]) for r in records] == [(10, "a"), (10, "b"), (20, "a"), (20, "b")]
    for step, sets in steps.items():
        graded, recs = grade_checkpoint(sets, probs, ks=(1, 2), identity={**run, "step": step})
        assert recs == [r for r in records if r["step"] == step]
        mine = verdicts[verdicts["step"] == step].drop(columns="step").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, graded[VERDICT_COLUMNS[1:]])
    # by hand: step 20's a: p1 3 of 4 right (\boxed{2} twice, \boxed{ 2 }), p2 3 of 4 (0.5, 1/2, \frac{1}{2})
    assert records[2]["pass@1"] == pytest.approx(6 / 8) and records[0]["pass@1"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no checkpoints"):
        grade_run(iter(()), probs, ks=(1,), identity=run)


def test_a_timeout_is_a_verdict_of_its_own_scored_incorrect(monkeypatch):
    """A comparison whose CPU budget ran out: the record says timeout, it scores as incorrect, the score counts it."""
    from vicurl.grading.verdicts import TIMEOUT

    real = GRADERS["math"]

    def grader(texts, problems):
        graded = real(texts, problems)
        return [(ex, TIMEOUT if "frac{1}{3}" in t else ok) for t, (ex, ok) in zip(texts, graded)]

    monkeypatch.setitem(GRADERS, "math", grader)
    g = grade_records(samples(), problems())
    assert g["timeout"].tolist() == [False] * 7 + [True] and g["timeout"].dtype == bool
    assert g["correct"].tolist() == [True, False, False, True, True, True, False, False]
    s = score(g, ks=(1,))
    assert s["n_timeouts"] == 1 and s["pass@1"] == pytest.approx(0.5)  # 2 of 4 correct on each problem
