"""Answer extraction, equivalence (fast paths and math-verify in workers) and the per-type graders."""

import pytest

from vicurl.grading import equiv
from vicurl.grading.extract import (
    extract_boxed,
    extract_choice,
    final_answer,
    parse_bool,
    parse_list,
    parse_number,
)
from vicurl.grading.graders import grade_batch

pytestmark = pytest.mark.usefixtures("small_pool")  # conftest.py


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}} and then \\boxed{\\frac{3}{4}} is final", "\\frac{3}{4}"),  # the last box
        ("\\boxed{\\left\\{ x \\mid x^{2} > 1 \\right\\}}", "\\left\\{ x \\mid x^{2} > 1 \\right\\}"),  # nested + escaped
        ("answer: \\boxed 5 apples", "5"),
        ("$\\boxed 5$", "5"),
        ("\\fbox{7} trailing text", "7"),
        ("\\boxed{a{b}c} then some words.", "a{b}c"),
        ("\\boxed{3", None),  # unbalanced (truncated)
        ("\\boxed{2} then \\boxed{3", None),  # the last box is unbalanced: no answer, not the earlier one
        ("no box at all", None),
        ("\\boxed{}", ""),
        ("", None),
    ],
)
def test_extract_boxed(text, expected):
    assert extract_boxed(text) == expected


def test_final_answer_falls_back_to_answer_is():
    assert final_answer("\\boxed{7}") == "7"
    assert final_answer("blah. The answer is 3.5. Done") == "3.5"
    assert final_answer("Answer: True\nmore") == "True"
    assert final_answer("nothing here") is None
    assert final_answer("\\boxed{ }") is None


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ("\\boxed{C}", 4, "C"),
        ("\\boxed{(B)}", 4, "B"),
        ("\\boxed{\\text{(D)}}", 4, "D"),
        ("\\boxed{J}", 10, "J"),  # MMLU-Pro has up to 10 options
        ("\\boxed{E}", 4, None),  # GPQA has 4: E is not an option
        ("Thus the answer is (C).", 4, "C"),
        ("The answer is B because ...", 4, "B"),
        ("Answer: A", 4, "A"),
        ("so the correct option is (d)", 4, "D"),
        ("C", 4, "C"),
        ("(b)", 4, "B"),
        ("the answer is a prime number", 4, None),  # "a" here is a word, not option (a)
        ("I think it might be something", 4, None),  # nothing found: no guess
        ("", 4, None),
    ],
)
def test_extract_choice(text, n, expected):
    assert extract_choice(text, n) == expected


def test_extract_choice_by_option_text():
    opts = ["Paris", "London", "Rome", "Berlin"]
    assert extract_choice("\\boxed{Rome}", 4, opts) == "C"
    assert extract_choice("\\boxed{Madrid}", 4, opts) is None


@pytest.mark.parametrize("s, v", [("True", True), ("\\text{False}", False), ("yes", True), ("No.", False), ("maybe", None), (None, None)])
def test_parse_bool(s, v):
    assert parse_bool(s) is v


@pytest.mark.parametrize(
    "s, v",
    [
        ("3.5", 3.5), ("-1,200", -1200.0), ("\\frac{1}{4}", 0.25), ("-\\dfrac{3}{2}", -1.5), ("3/4", 0.75),
        ("4e-05", 4e-05), ("2.1 \\times 10^{-3}", 2.1e-3), ("x = 7", 7.0), ("5 m/s", 5.0), ("12\\%", 12.0),
        ("90^\\circ", 90.0), ("3.2kg", 3.2), ("\\text{abc}", None), ("2\\pi", None), ("1/0", None), ("9" * 5000, None),
        ("3i", None), ("2e", None), ("5x", None),  # a letter glued to a number is not a unit
    ],
)
def test_parse_number(s, v):
    assert parse_number(s) == (pytest.approx(v) if v is not None else None)


def test_parse_list():
    assert parse_list("[0, 5]") == [0.0, 5.0]
    assert parse_list("(1.5, -2)") == [1.5, -2.0]
    assert parse_list("3, 4, 5") == [3.0, 4.0, 5.0]
    assert parse_list("1,000") == [1000.0]  # a thousands comma, not a list
    assert parse_list("[a, 1]") is None


# ---------------------------------------------------------------- equivalence


@pytest.mark.parametrize(
    "pred, gold, same",
    [
        ("2", "2", True), ("2.0", "2", True), ("27", "27.0", True), ("0.5", "\\frac{1}{2}", True),
        ("1/2", "\\dfrac12", True), ("\\frac{1}{3}", "0.333333", True), ("\\frac{1}{3}", "0.33", False),
        ("1,000", "1000", True), ("336", "336^\\circ", True), ("\\$42409", "42409", True),
        ("x = 5", "5", True), ("\\text{(C)}", "C", True), ("\\text{Evelyn}", "Evelyn", True),
        ("3", "4", False), ("-1", "1", False),
    ],
)
def test_fast_paths(pred, gold, same):
    assert equiv.fast_equiv(pred, gold) is same


@pytest.mark.parametrize(
    "pred, gold, same",
    [
        ("(x+1)^2", "x^2+2x+1", True),
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", True),
        ("1\\frac{4}{5}", "\\frac{9}{5}", True),  # a mixed number
        ("[1, \\infty)", "[1,\\infty)", True),
        ("6-5i", "6 - 5i", True),
        ("\\sqrt{3}", "1.7320508", True),  # a decimal compares after rounding to 6 places
        ("x^2", "x^3", False),
        ("\\pi", "3", False),
    ],
)
def test_symbolic_equivalence(pred, gold, same):
    assert equiv.is_equiv(pred, gold) is same


NUMERIC_PAIRS = [("2", "2.0"), ("0.5", "\\frac{1}{2}"), ("1/3", "0.333333"), ("1/3", "0.3333"), ("-7", "7"),
                 ("12", "12.000"), ("3/6", "1/2"), ("1.25", "\\frac{5}{4}"), ("10", "1,0"), ("0.1", "0.10000001")]


def test_fast_path_agrees_with_math_verify(small_pool):
    """The number fast path decides exactly as math-verify would (so skipping it changes nothing)."""
    decided = [(p, g) for p, g in NUMERIC_PAIRS if equiv.fast_equiv(p, g) is not None]
    assert len(decided) >= 8
    assert [equiv.fast_equiv(p, g) for p, g in decided] == small_pool.equiv(decided)


def test_results_are_cached(small_pool):
    equiv.cache_clear()
    before = small_pool.stats["items"]
    assert equiv.is_equiv("(y+2)^2", "y^2+4y+4")
    assert small_pool.stats["items"] == before + 1
    assert equiv.is_equiv("(y+2)^2", "y^2+4y+4")
    assert small_pool.stats["items"] == before + 1  # the second call never reached a worker
    assert equiv.cache_size() >= 1


# ---------------------------------------------------------------- graders per answer type


def grade(texts, problem):
    return grade_batch(texts, [problem] * len(texts))


def test_grade_math_no_answer_is_not_guessed():
    p = {"answer": "\\frac{1}{2}", "answer_type": "math", "options": []}
    assert grade(["\\boxed{0.5}", "\\boxed{}", "The answer is 1/2", "\\boxed{1/3}"], p) == [
        ("0.5", True), (None, False), (None, False), ("1/3", False)]


def test_grade_multiple_choice_mmlu_pro_and_gpqa():
    mmlu = {"answer": "I", "answer_type": "multiple_choice", "options": [f"o{k}" for k in range(10)]}
    assert grade(["\\boxed{I}", "the answer is (I)", "\\boxed{C}", "no idea"], mmlu) == [
        ("I", True), ("I", True), ("C", False), (None, False)]
    gpqa = {"answer": "B", "answer_type": "multiple_choice", "options": ["w", "x", "y", "z"]}
    assert grade(["\\boxed{B}", "\\boxed{F}"], gpqa) == [("B", True), (None, False)]


def test_grade_theoremqa_types():
    opt = {"answer": "(c)", "answer_type": "option", "options": []}
    assert grade(["\\boxed{(c)}", "\\boxed{C}", "The answer is (b)."], opt) == [("C", True), ("C", True), ("B", False)]
    b = {"answer": "False", "answer_type": "bool", "options": []}
    assert [ok for _, ok in grade(["\\boxed{False}", "\\boxed{\\text{No}}", "\\boxed{True}", "\\boxed{perhaps}"], b)] == [
        True, True, False, False]
    f = {"answer": "1.42", "answer_type": "float", "options": []}  # 4 % relative tolerance [TheoremQA]
    assert [ok for _, ok in grade(["\\boxed{1.42}", "\\boxed{1.47}", "\\boxed{1.48}", "\\boxed{\\frac{71}{50}}",
                                    "\\boxed{1.42 \\text{ m}}", "\\boxed{\\sqrt{2}}"], f)] == [True, True, False, True, True, True]
    i = {"answer": "11760", "answer_type": "integer", "options": []}
    assert [ok for _, ok in grade(["\\boxed{11760}", "\\boxed{11,760}", "\\boxed{11760.0}", "\\boxed{11761}", "\\boxed{11760.4}"], i)] == [
        True, True, True, False, False]
    lst = {"answer": "[0.333, 0.25]", "answer_type": "list", "options": []}
    assert [ok for _, ok in grade(["\\boxed{[0.333, 0.25]}", "\\boxed{(0.25, \\frac{1}{3})}", "\\boxed{[0.333]}", "\\boxed{[0.5, 0.25]}"], lst)] == [
        True, True, False, False]
    ints = {"answer": "[-1, 6]", "answer_type": "list", "options": []}
    assert [ok for _, ok in grade(["\\boxed{[-1, 6]}", "\\boxed{[6, -1]}", "\\boxed{[-1, 7]}"], ints)] == [True, True, False]


def test_non_numeric_gold_falls_back_to_math():
    p = {"answer": "\\frac{\\pi}{2}", "answer_type": "float", "options": []}
    assert [ok for _, ok in grade(["\\boxed{\\frac{\\pi}{2}}", "\\boxed{1.5708}", "\\boxed{1}"], p)] == [True, True, False]
