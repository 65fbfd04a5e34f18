"""The synthetic arithmetic task: determinism, schema, correct gold answers, graded difficulty."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from vicurl.data import schema
from vicurl.data.synthetic import LEVELS, derive_seed, make_set, make_splits, sample_problem
from vicurl.grading import extract_boxed

ALL = sorted(LEVELS)
SPLITS = {
    "sft": {"n": 600, "levels": ALL},
    "train": {"n": 120, "levels": ALL},
    "eval_easy": {"n": 30, "levels": [1, 2, 3]},
    "eval_hard": {"n": 30, "levels": [4, 5, 6]},
}

_STEP = re.compile(r"^(\d+) ([+\-*]) (\d+) = (\d+)$")
_QUESTION = re.compile(r"^Compute (\d+(?: [+\-] \d+)+)\.$")


def _apply(a: int, op: str, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def _tokens(expr: str) -> tuple[list[int], list[str]]:
    parts = expr.split(" ")
    return [int(x) for x in parts[0::2]], parts[1::2]


def _level(row) -> int:
    return json.loads(row["metadata"])["level"]


@pytest.fixture(scope="module")
def splits():
    return make_splits(SPLITS, seed=7)


def test_same_seed_same_frame_and_different_seed_differs():
    a = make_set("s", 60, ALL, seed=3)
    b = make_set("s", 60, ALL, seed=3)
    c = make_set("s", 60, ALL, seed=4)
    pd.testing.assert_frame_equal(a, b)
    assert list(a["question"]) != list(c["question"])
    sa, sb = make_splits(SPLITS, 1), make_splits(SPLITS, 1)
    for k in SPLITS:
        pd.testing.assert_frame_equal(sa[k], sb[k])
    assert list(make_splits(SPLITS, 2)["train"]["question"]) != list(sa["train"]["question"])


def test_global_rng_untouched():
    import random

    random.seed(123)
    before = random.random()
    random.seed(123)
    make_set("s", 20, ALL, seed=0)
    assert random.random() == before


def test_schema_ids_and_levels():
    df = make_set("arith_train", 61, [2, 4, 6], seed=0)
    assert list(df.columns) == schema.COLUMNS
    schema.validate(df, "arith_train")
    assert list(df["id"]) == [f"arith_train-{i:05d}" for i in range(61)]
    assert set(df["source"]) == {"arith_train"}
    assert set(df["answer_type"]) == {"math"}
    assert all(list(o) == [] for o in df["options"])
    levels = [_level(r) for _, r in df.iterrows()]
    assert levels == [[2, 4, 6][i % 3] for i in range(61)]  # spread evenly, round robin
    counts = pd.Series(levels).value_counts()
    assert counts.max() - counts.min() <= 1
    assert df["question"].is_unique


def test_roundtrip_parquet(tmp_path):
    df = make_set("s", 24, ALL, seed=0)
    schema.write(df, tmp_path / "s.parquet")
    pd.testing.assert_frame_equal(schema.read(tmp_path / "s.parquet"), df)


def test_gold_answers_recomputed_from_question_and_steps(splits):
    for df in splits.values():
        for _, row in df.iterrows():
            m = _QUESTION.match(row["question"])
            assert m, row["question"]
            operands, operators = _tokens(m.group(1))
            # the question's left-to-right value (only + and -, so this is the usual value)
            value = operands[0]
            for op, x in zip(operators, operands[1:]):
                value = _apply(value, op, x)
            assert str(value) == row["answer"]

            sol = row["solution"]
            think = re.fullmatch(r"<think>(.*)</think> The answer is \\boxed\{(-?\d+)\}\.", sol)
            assert think, sol
            steps = [s for s in think.group(1).split(". ") if s]
            steps[-1] = steps[-1].rstrip(".")
            assert len(steps) == len(operators)
            cur = operands[0]
            for k, step in enumerate(steps):
                sm = _STEP.match(step)
                assert sm, step
                a, op, b, r = int(sm.group(1)), sm.group(2), int(sm.group(3)), int(sm.group(4))
                assert (a, op, b) == (cur, operators[k], operands[k + 1])  # chains the partial result
                assert _apply(a, op, b) == r
                assert r >= 0
                cur = r
            assert str(cur) == row["answer"]
            assert extract_boxed(sol) == row["answer"]


def test_solution_format(splits):
    for _, row in splits["sft"].iterrows():
        sol = row["solution"]
        assert sol.startswith("<think>") and sol.count("<think>") == 1 and sol.count("</think>") == 1
        assert sol.index("</think>") < sol.rindex("\\boxed{")
        assert extract_boxed(sol) == row["answer"]


def test_splits_are_disjoint_and_sized(splits):
    for name, spec in SPLITS.items():
        df = splits[name]
        assert len(df) == spec["n"]
        assert {_level(r) for _, r in df.iterrows()} == set(spec["levels"])
        assert set(df["source"]) == {name}
        assert df["question"].is_unique
    names = list(SPLITS)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not set(splits[a]["question"]) & set(splits[b]["question"]), (a, b)
    assert len({derive_seed(7, k) for k in SPLITS}) == len(SPLITS)


def test_eval_disjoint_even_when_levels_space_is_crowded():
    # level 1 is the smallest space; ask for a large share of it
    cfg = {"eval": {"n": 300, "levels": [1]}, "sft": {"n": 3000, "levels": [1]}}
    s = make_splits(cfg, 0)
    assert not set(s["eval"]["question"]) & set(s["sft"]["question"])
    assert s["sft"]["question"].is_unique


def test_too_many_rows_for_a_level_raises():
    with pytest.raises(ValueError, match="level-1"):
        make_set("s", 20000, [1], seed=0)
    with pytest.raises(ValueError, match="unknown level"):
        make_set("s", 5, [0, 7], seed=0)


def _column_carry(a: int, op: str, b: int) -> bool:
    """Independent re-implementation: does column arithmetic carry/borrow anywhere?"""
    da, db = str(a)[::-1], str(b)[::-1]
    for k in range(max(len(da), len(db))):
        x = int(da[k]) if k < len(da) else 0
        y = int(db[k]) if k < len(db) else 0
        if (op == "+" and x + y > 9) or (op == "-" and x < y):
            return True
    return False


def test_difficulty_increases_with_level():
    import random

    rng = random.Random(0)
    stats = {}
    for level in ALL:
        probs = [sample_problem(level, rng) for _ in range(400)]
        steps = [st for p in probs for st in p.steps()]
        ops = sum(len(p.operators) for p in probs) / len(probs)
        digits = sum(sum(len(str(x)) for x in p.operands) for p in probs) / len(probs)
        carry = sum(_column_carry(a, op, b) for a, op, b, _ in steps) / len(steps)
        length = sum(len(p.solution) for p in probs) / len(probs)
        stats[level] = (ops, digits, carry, length)
        if not LEVELS[level].carry:
            assert carry == 0.0, level
    for lo, hi in zip(ALL, ALL[1:]):
        (o1, d1, c1, _), (o2, d2, c2, _) = stats[lo], stats[hi]
        # never easier on any axis (ops, operand digits, carries), strictly harder on one
        assert o2 >= o1 and d2 >= d1 - 0.1 and c2 >= c1 - 0.05, (lo, hi, stats[lo], stats[hi])
        assert o2 > o1 or d2 > d1 + 0.3 or c2 > c1 + 0.2, (lo, hi, stats[lo], stats[hi])
    assert stats[ALL[0]][0] == 1 and stats[ALL[-1]][0] == 4
    assert stats[ALL[-1]][3] > 1.5 * stats[ALL[0]][3]  # much longer solutions
    df = make_set("s", 60, ALL, seed=1)
    meta = [json.loads(m) for m in df["metadata"]]
    assert all(m["ops"] == LEVELS[m["level"]].ops and m["carry"] == LEVELS[m["level"]].carry for m in meta)


def test_unboxed_share_changes_only_the_answer_format():
    plain = make_set("sft", 600, ALL, seed=5)
    mixed = make_set("sft", 600, ALL, seed=5, unboxed=0.4)
    pd.testing.assert_series_equal(plain["question"], mixed["question"])  # same problems
    pd.testing.assert_series_equal(plain["answer"], mixed["answer"])
    boxed = [json.loads(m)["boxed"] for m in mixed["metadata"]]
    assert 0.34 < 1 - sum(boxed) / len(boxed) < 0.46  # Binomial(600, 0.4): sd 0.02
    for b, p, m in zip(boxed, plain["solution"], mixed["solution"]):
        if b:
            assert m == p
        else:
            answer = extract_boxed(p)
            assert extract_boxed(m) is None
            assert m == p.replace(f"\\boxed{{{answer}}}", answer)
    pd.testing.assert_frame_equal(mixed, make_set("sft", 600, ALL, seed=5, unboxed=0.4))  # deterministic
    assert all(json.loads(m)["boxed"] for m in plain["metadata"])
    assert not any(json.loads(m)["boxed"] for m in make_set("s", 20, ALL, seed=5, unboxed=1.0)["metadata"])


def test_unboxed_out_of_range_is_named():
    with pytest.raises(ValueError, match="unboxed"):
        make_set("s", 5, ALL, seed=0, unboxed=1.5)
