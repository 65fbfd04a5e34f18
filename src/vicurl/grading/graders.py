"""One grader per answer type of the normalized schema (``vicurl.data.schema.ANSWER_TYPES``).

An ``AnswerType`` gives ``extract(text, problem)`` (the answer string, or None: "no answer", scores
0), ``gold(problem)`` and ``same(pairs, problems)``, used alike by evaluation (answer vs gold) and by
the verifier-free rewards (answer vs answer). Math reads the last ``\\boxed{}`` (the paper's oracle;
every box of the final answer for a several-part gold, ``parts``) and compares with ``equiv``;
multiple_choice / option a letter (box, "answer is (C)", a lone letter; option case-insensitive);
bool, integer, float, list, text the box or "answer is". Float within 4 % and sorted lists are
TheoremQA's official ``compare_answer_with_groundtruth`` [orig]; integers must match exactly [ours,
``close_number``]. A gold that is not numeric falls back to the math comparison, so loaders of other
sets (WebInstruct) can use these types; ``text`` compares words only, never math equivalence (sympy
would read "ab" and "ba" as equal products). A verdict is True, False or ``TIMEOUT``
(``vicurl.grading.verdicts``). See docs/evaluation.md ("Grading and rewards").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from vicurl.grading import symbolic
from vicurl.grading.extract import (
    clean,
    extract_boxed,
    extract_choice,
    final_answer,
    final_boxes,
    is_integer_text,
    letter_of,
    parse_bool,
    parse_list,
    parse_number,
    split_top_level,
    unwrap_text,
)
from vicurl.grading.parts import answers_equiv, several_parts
from vicurl.grading.verdicts import TIMEOUT, Verdict

Problem = Mapping[str, Any]
THEOREMQA_REL_TOL = 0.04  # TheoremQA's within_eps [orig]


@dataclass(frozen=True)
class AnswerType:
    extract: Callable[[str, Problem], "str | None"]
    gold: Callable[[Problem], str]
    same: Callable[[Sequence[tuple[str, str]], Sequence[Problem]], list[Verdict]]


def options_of(problem: Problem) -> list[str]:
    """The option texts (a list, a numpy array from parquet, or missing)."""
    opts = problem.get("options")
    return [] if opts is None else [str(o) for o in opts]


def n_options(problem: Problem) -> int:
    """Letters a choice may use: as many as the options, or A-J when the options are not listed."""
    return len(options_of(problem)) or 10


# ---------------------------------------------------------------- math


def _joined_boxes(text: str) -> str | None:
    """Every box of the final answer, joined by ", " (``\\boxed{1}, \\boxed{2}`` -> ``1, 2``)."""
    boxes = [b for b in (clean(x) for x in final_boxes(text or "") or []) if b]
    return ", ".join(boxes) or None


def _math_extract(text: str, problem: Problem) -> str | None:
    """The last box; every box of the final answer when the gold has several parts (only its
    shape is read, never its value, so the verifier-free rewards extract alike)."""
    if several_parts(_math_gold(problem)):
        return _joined_boxes(text)
    return clean(extract_boxed(text or ""))


def _math_gold(problem: Problem) -> str:
    return clean(str(problem["answer"])) or ""


def _math_same(pairs, problems) -> list[Verdict]:
    return answers_equiv(pairs)


# ---------------------------------------------------------------- choices and booleans


def _choice_extract(text: str, problem: Problem) -> str | None:
    return extract_choice(text, n_options(problem), options_of(problem))


def _choice_gold(problem: Problem) -> str:
    g = str(problem["answer"]).strip().strip("'\"")
    return letter_of(g) or g.upper()


def _equal(pairs, problems) -> list[bool]:
    return [a == b for a, b in pairs]


def _bool_extract(text: str, problem: Problem) -> str | None:
    v = parse_bool(final_answer(text))
    return None if v is None else str(v)


def _bool_gold(problem: Problem) -> str:
    v = parse_bool(str(problem["answer"]))
    return str(problem["answer"]) if v is None else str(v)


# ---------------------------------------------------------------- numbers (TheoremQA)


def _final_extract(text: str, problem: Problem) -> str | None:
    return final_answer(text)


def _list_extract(text: str, problem: Problem) -> str | None:
    """A list may be boxed as one (``\\boxed{[1, 2]}``) or part by part (``\\boxed{69}, \\boxed{84}``)."""
    boxes = final_boxes(text or "")
    return _joined_boxes(text) if boxes and len(boxes) > 1 else final_answer(text)


def _plain_gold(problem: Problem) -> str:
    return clean(str(problem["answer"])) or ""


def numbers_of(texts: Sequence[str]) -> list[float | None | Verdict]:
    """``parse_number`` of each; what it cannot read is evaluated by sympy in the worker pool (TIMEOUT
    where its budget ran out)."""
    values = [parse_number(t) for t in texts]
    hard = sorted({t for t, v in zip(texts, values) if v is None and t and len(t) <= 500})
    if hard:
        found = dict(zip(hard, _to_float(hard)))
        values = [found.get(t) if v is None else v for t, v in zip(texts, values)]
    return values


_float_cache: dict[str, float | None | Verdict] = {}


def _to_float(exprs: list[str]) -> list[float | None | Verdict]:
    todo = [e for e in exprs if e not in _float_cache]
    if todo:
        for e, v in zip(todo, symbolic.pool().to_float(todo)):
            _float_cache[e] = v if v is None or v is TIMEOUT or math.isfinite(v) else None
    return [_float_cache[e] for e in exprs]


def close_number(pred: float, gold: float, integer: bool) -> bool:
    """Integer gold: the same integer; otherwise within 4 % of the gold (TheoremQA's within_eps).

    [ours] TheoremQA's own rule for an integer gold is round(pred) == gold, which grades 4.32
    (or 0.098 against 0) correct; here the prediction must be that integer (4, 4.0, 4.0000001).
    """
    if integer:
        return abs(pred - gold) <= 1e-6 * max(1.0, abs(gold))
    return abs(pred - gold) <= THEOREMQA_REL_TOL * abs(gold)


def _numeric_same(integer: bool):
    def same(pairs, problems) -> list[Verdict]:
        golds = numbers_of([g for _, g in pairs])
        preds = numbers_of([p for p, _ in pairs])
        out: list[Verdict | None] = []
        fallback = []
        for k, ((p, g), pv, gv) in enumerate(zip(pairs, preds, golds)):
            if gv is None:  # a gold that is not a number: compare as math
                out.append(None)
                fallback.append(k)
            elif pv is TIMEOUT or gv is TIMEOUT:
                out.append(TIMEOUT)
            else:
                out.append(pv is not None and close_number(pv, gv, integer and is_integer_text(g)))
        if fallback:
            for k, ok in zip(fallback, answers_equiv([pairs[k] for k in fallback])):
                out[k] = ok
        return out  # type: ignore[return-value]

    return same


def _list_same(pairs, problems) -> list[Verdict]:
    out: list[Verdict | None] = []
    fallback = []
    for k, (p, g) in enumerate(pairs):
        gv, pv = parse_list(g), parse_list(p)
        if gv is None:
            out.append(None)
            fallback.append(k)
            continue
        if pv is None or len(pv) != len(gv):
            out.append(False)
            continue
        g_items = split_top_level(g.strip().strip("[]()"))
        ints = [is_integer_text(t) for t in g_items] if len(g_items) == len(gv) else [False] * len(gv)
        gs = sorted(zip(gv, ints))
        out.append(all(close_number(a, b, i) for a, (b, i) in zip(sorted(pv), gs)))
    if fallback:  # not a list of numbers (OlympiadBench's multiple answers): a list, multiplicity and all
        for k, ok in zip(fallback, answers_equiv([pairs[k] for k in fallback], as_set=False)):
            out[k] = ok
    return out  # type: ignore[return-value]


def _words(s: str) -> str:
    s = unwrap_text(s).lower()
    s = re.sub(r"[\s~]+", " ", s).strip().strip(".;:!?,").strip()
    return s


def _text_same(pairs, problems) -> list[bool]:
    return [bool(_words(a)) and _words(a) == _words(b) for a, b in pairs]


ANSWER_TYPES: dict[str, AnswerType] = {
    "math": AnswerType(_math_extract, _math_gold, _math_same),
    "multiple_choice": AnswerType(_choice_extract, _choice_gold, _equal),
    "option": AnswerType(_choice_extract, _choice_gold, _equal),
    "bool": AnswerType(_bool_extract, _bool_gold, _equal),
    "integer": AnswerType(_final_extract, _plain_gold, _numeric_same(integer=True)),
    "float": AnswerType(_final_extract, _plain_gold, _numeric_same(integer=False)),
    "list": AnswerType(_list_extract, _plain_gold, _list_same),
    "text": AnswerType(_final_extract, _plain_gold, _text_same),
}


def answer_type(name: str) -> AnswerType:
    if name not in ANSWER_TYPES:
        raise ValueError(f"no grader for answer_type {name!r}; known types: {sorted(ANSWER_TYPES)}")
    return ANSWER_TYPES[name]


def grade_batch(texts: Sequence[str], problems: Sequence[Problem]) -> list[tuple[str | None, Verdict]]:
    """(extracted answer, verdict) for each response; problems may mix answer types."""
    extracted = [answer_type(p["answer_type"]).extract(t or "", p) for t, p in zip(texts, problems)]
    correct: list[Verdict] = [False] * len(texts)
    by_type: dict[str, list[int]] = {}
    for i, (ex, p) in enumerate(zip(extracted, problems)):
        if ex is not None:
            by_type.setdefault(p["answer_type"], []).append(i)
    for name, idx in by_type.items():
        at = ANSWER_TYPES[name]
        verdicts = at.same([(extracted[i], at.gold(problems[i])) for i in idx], [problems[i] for i in idx])
        for i, ok in zip(idx, verdicts):
            correct[i] = ok if ok is TIMEOUT else bool(ok)
    return list(zip(extracted, correct))


def grader_for(name: str):
    """A batch grader ``fn(texts, problems)`` for one answer type (``evaluation.grade.GRADERS``)."""
    answer_type(name)

    def grade(texts: Sequence[str], problems: Sequence[Problem]) -> list[tuple[str | None, Verdict]]:
        return grade_batch(texts, [{**p, "answer_type": name} for p in problems])

    grade.__name__ = f"grade_{name}"
    return grade
