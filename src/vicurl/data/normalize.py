"""Per-source normalizers: one raw row of a source -> one row of the normalized schema.

A normalizer is a pure function ``fn(raw, ctx) -> row`` (``schema.make_row``) that never evaluates
dataset text: it renames fields, canonicalizes gold answers and moves everything else into
``metadata``. A row leaves the set in one of two ways: ``Skip(reason)``, a documented filter of the
source (always dropped, counted in the manifest under ``reason``), or ``BadRow(reason, message)``,
a malformed row (dropped and counted, or fatal, by ``datasets.{name}.on_bad_row``; the message
names the field). Choices the sources leave open are made, and documented, at each function; the
per-source table: docs/datasets.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from vicurl.data.schema import LETTERS, make_row
from vicurl.grading import extract_boxed


class Skip(Exception):
    """A row a documented filter of the source removes (always dropped, counted under ``reason``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class BadRow(ValueError):
    """A malformed row: dropped and counted under ``reason`` or fatal (``on_bad_row``)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Context:
    """What a normalizer knows besides the raw row."""

    name: str  # dataset name in the config (written to the ``source`` column)
    index: int  # 0-based position of the row in the loaded source (all files / configs in order)
    options: Mapping[str, Any] = field(default_factory=dict)  # resolved per-source settings
    rewrites: dict[str, int] = field(default_factory=dict)  # gold answers rewritten in this row, by kind

    def rewrote(self, kind: str) -> None:
        self.rewrites[kind] = self.rewrites.get(kind, 0) + 1


Normalizer = Callable[[Mapping[str, Any], Context], dict]

# ----------------------------------------------------------------------------- helpers


def _present(v: Any) -> bool:
    """A value that is there: not None, not NaN (pandas' empty cell), not blank text."""
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and math.isnan(v):
        return False
    return v is not None and not (isinstance(v, str) and not v.strip())


def get(raw: Mapping[str, Any], *names: str, required: bool = True, default: Any = None) -> Any:
    """The first of ``names`` present in ``raw`` with a non-empty value."""
    for n in names:
        if n in raw and _present(raw[n]):
            return raw[n]
    if required:
        shown = " or ".join(repr(n) for n in names)
        absent = [n for n in names if n not in raw]
        what = "missing field" if len(absent) == len(names) else "empty field"
        raise BadRow("missing_field" if what == "missing field" else "empty_field", f"{what} {shown}")
    return default


def number_text(v: Any) -> str:
    """A gold answer (or id) as text; floats holding an integer lose the ``.0`` (AMC stores 27 as
    27.0). A value that is neither text nor a number (a list, a mapping, NaN, inf) is a malformed
    row, never the text of its Python repr."""
    if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and not math.isfinite(v):
        raise BadRow("malformed_answer", f"the value {v!r} is not an answer")
    if not isinstance(v, (str, numbers.Real)):
        raise BadRow("malformed_answer", f"a {type(v).__name__} ({str(v)[:60]!r}) where text or a number is expected")
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


def _source_id(raw: Mapping[str, Any], ctx: Context, *names: str) -> str:
    v = get(raw, *names, required=False)
    return number_text(v) if v is not None else str(ctx.index)


def _question(raw: Mapping[str, Any], *names: str) -> str:
    q = get(raw, *names)
    if not isinstance(q, str):
        raise BadRow("bad_field", f"field {names[0]!r} is {type(q).__name__}, expected text")
    return q.strip()


def _meta(raw: Mapping[str, Any], used: set[str]) -> dict[str, Any]:
    """Every raw field not mapped to a column, JSON-safe (bytes and images are dropped)."""
    out = {}
    for k, v in raw.items():
        if k in used or k.startswith("_") or isinstance(v, (bytes, bytearray)):
            continue
        try:
            json.dumps(v)
        except TypeError:
            continue
        out[k] = v
    return out


# ----------------------------------------------------------------------------- math sets


def math_answer(raw: Mapping[str, Any], ctx: Context, id_fields=("id",), question_fields=("problem", "question")) -> dict:
    """A competition-math row with a gold ``answer`` (MATH500, DeepScaleR, AMC)."""
    q = _question(raw, *question_fields)
    ans = number_text(get(raw, "answer"))
    if isinstance(raw.get("answer"), float):
        ctx.rewrote("float_answer_as_text")
    return make_row(
        id=_source_id(raw, ctx, *id_fields),
        source=ctx.name,
        question=q,
        answer=ans,
        solution=str(get(raw, "solution", required=False, default="")),
        answer_type="math",
        metadata=_meta(raw, {*question_fields, "answer", "solution", *id_fields}),
    )


def math500(raw: Mapping[str, Any], ctx: Context) -> dict:
    """HuggingFaceH4/MATH-500: id = ``unique_id`` (e.g. ``test/precalculus/807.json``); subject, level in metadata."""
    return math_answer(raw, ctx, id_fields=("unique_id", "id"))


def deepscaler(raw: Mapping[str, Any], ctx: Context) -> dict:
    """DeepScaleR (``problem, answer, solution``); rows without an answer are a documented filter."""
    if not _present(raw.get("answer")):
        get(raw, "problem", "question")  # a row without a question is malformed, not merely unanswered
        raise Skip("no_answer")
    return math_answer(raw, ctx)


_DEGREE = re.compile(r"\^\s*\{?\\circ\}?|\\circ|°|\\degree")


def aime(raw: Mapping[str, Any], ctx: Context) -> dict:
    """AIME 2024 / 2025: the gold answer is an integer 0-999, written canonically ("025" -> "25").

    Some copies of AIME 2025 write one answer as ``336^\\circ``: the degree sign is removed.
    The raw answer is kept in metadata ``answer_raw`` whenever it changed.
    """
    row = math_answer(raw, ctx)
    raw_ans = row["answer"]
    ans = _DEGREE.sub("", raw_ans).strip()
    if ans != raw_ans:
        ctx.rewrote("degree_sign_removed")
    if not re.fullmatch(r"\d{1,3}", ans):
        raise BadRow("answer_not_integer", f"AIME answer {raw_ans!r} is not an integer 0-999")
    if ans != str(int(ans)):
        ctx.rewrote("leading_zeros_removed")
        ans = str(int(ans))
    if ans != raw_ans:
        meta = json.loads(row["metadata"])
        meta["answer_raw"] = raw_ans
        row["metadata"] = json.dumps(meta, sort_keys=True)
        row["answer"] = ans
    return row


def minerva_math(raw: Mapping[str, Any], ctx: Context) -> dict:
    """Minerva Math: gold = the last ``\\boxed{}`` of the solution (the ``answer`` field where there is no solution)."""
    q = _question(raw, "problem", "question")
    solution = get(raw, "solution", required=False, default="")
    if solution:
        ans = extract_boxed(str(solution))
        if ans is None or not ans.strip():
            raise BadRow("no_boxed_answer", "the solution has no \\boxed{} answer")
    else:
        ans = number_text(get(raw, "answer", "solution"))
    return make_row(
        id=_source_id(raw, ctx, "idx", "id"),
        source=ctx.name,
        question=q,
        answer=ans.strip(),
        solution=str(solution),
        answer_type="math",
        metadata=_meta(raw, {"problem", "question", "solution", "idx", "id"}),
    )


_DOLLAR = re.compile(r"(?<!\\)\$")


def strip_dollars(s: str) -> str:
    """Remove math delimiters ``$`` (not ``\\$``): ``'$69$,$84$'`` -> ``'69,84'``."""
    return _DOLLAR.sub("", s).strip()


def olympiadbench(raw: Mapping[str, Any], ctx: Context) -> dict:
    """OlympiadBench (OE_TO_maths_en_COMP): ``final_answer`` is a list of ``$...$`` strings.

    Gold = the elements without ``$`` delimiters joined with ", " (one element in almost every
    row; a multi-answer element such as ``$69$,$84$`` becomes ``69,84``); the cleaned list is
    kept in metadata ``final_answers``. answer_type ``list`` when ``is_multiple_answer``.
    A ``context`` (a preamble some rows carry) is put before the question.
    """
    q = _question(raw, "question", "problem")
    ctxt = raw.get("context")
    if isinstance(ctxt, str) and ctxt.strip():
        q = f"{ctxt.strip()}\n{q}"
    final = get(raw, "final_answer", "answer")
    items = final if isinstance(final, (list, tuple)) else [final]
    answers = [strip_dollars(number_text(a)) for a in items if _present(a)]
    if not answers or not all(answers):
        raise BadRow("empty_field", f"field 'final_answer' has no answer: {final!r}")
    if any("$" in number_text(a) for a in items):
        ctx.rewrote("dollar_delimiters_removed")
    multiple = bool(raw.get("is_multiple_answer"))
    meta = _meta(raw, {"question", "problem", "context", "final_answer", "answer", "solution", "id"})
    meta["final_answers"] = answers
    meta["source_answer_type"] = meta.pop("answer_type", None)
    sol = raw.get("solution")
    return make_row(
        id=_source_id(raw, ctx, "id"),
        source=ctx.name,
        question=q,
        answer=", ".join(answers),
        solution="\n\n".join(sol) if isinstance(sol, (list, tuple)) else str(sol or ""),
        answer_type="list" if multiple else "math",
        metadata=meta,
    )


# ----------------------------------------------------------------------------- general sets


def _exclude_category(raw: Mapping[str, Any], ctx: Context) -> None:
    """The documented category filter (``exclude_categories``), counted as ``category:<name>``."""
    excluded = ctx.options.get("exclude_categories") or ()
    if excluded:
        category = str(get(raw, "category")).strip()
        if category in excluded:
            raise Skip(f"category:{category}")


def _letter_options(options: list[str], where: str) -> list[str]:
    if len(options) < 2 or len(options) > len(LETTERS):
        raise BadRow("bad_options", f"{where} has {len(options)} options, expected 2 to {len(LETTERS)}")
    return options


def mmlu_pro(raw: Mapping[str, Any], ctx: Context) -> dict:
    """TIGER-Lab/MMLU-Pro: up to 10 ``options``; gold = the ``answer`` letter (checked against ``answer_index``)."""
    _exclude_category(raw, ctx)
    q = _question(raw, "question")
    opts = get(raw, "options")
    if not isinstance(opts, (list, tuple)):
        raise BadRow("bad_options", f"field 'options' is {type(opts).__name__}, expected a list")
    opts = _letter_options([str(o).strip() for o in opts], "field 'options'")
    letter = str(get(raw, "answer")).strip().upper()
    if len(letter) != 1 or letter not in LETTERS[: len(opts)]:
        raise BadRow("bad_answer", f"answer {letter!r} is not one of the {len(opts)} option letters")
    idx = raw.get("answer_index")
    if idx is not None and int(idx) != LETTERS.index(letter):
        raise BadRow("bad_answer", f"answer {letter!r} disagrees with answer_index {idx}")
    return make_row(
        id=_source_id(raw, ctx, "question_id", "id"),
        source=ctx.name,
        question=q,
        answer=letter,
        solution=str(raw.get("cot_content") or ""),
        answer_type="multiple_choice",
        options=opts,
        metadata=_meta(raw, {"question", "options", "answer", "question_id", "id", "cot_content"}),
    )


def _row_seed(seed: int, row_id: str) -> int:
    """A per-row seed that depends only on (seed, id): the order of the file never changes a shuffle."""
    return int.from_bytes(hashlib.sha256(f"vicurl-options:{int(seed)}:{row_id}".encode()).digest()[:8], "little")


def gpqa(raw: Mapping[str, Any], ctx: Context) -> dict:
    """GPQA (Diamond): the correct and three incorrect answers shuffled with a fixed seed per row.

    The order is ``random.Random(sha256(shuffle_seed, id))``: deterministic, independent of
    row order and of the global RNG. Gold = the letter where the correct answer landed.
    """
    q = _question(raw, "Question", "question")
    correct = str(get(raw, "Correct Answer")).strip()
    wrong = [str(get(raw, f"Incorrect Answer {k}")).strip() for k in (1, 2, 3)]
    rid = _source_id(raw, ctx, "Record ID", "id")
    opts = [correct, *wrong]
    random.Random(_row_seed(ctx.options.get("shuffle_seed", 0), rid)).shuffle(opts)
    meta = {k: raw[k] for k in ("Subdomain", "High-level domain") if _present(raw.get(k))}
    return make_row(
        id=rid,
        source=ctx.name,
        question=q,
        answer=LETTERS[opts.index(correct)],
        solution=str(raw.get("Explanation") or ""),
        answer_type="multiple_choice",
        options=opts,
        metadata=meta,
    )


# TheoremQA's Answer_type -> ours
THEOREMQA_TYPES = {
    "float": "float",
    "integer": "integer",
    "bool": "bool",
    "list of integer": "list",
    "list of float": "list",
    "option": "option",
}


def _has_picture(v: Any) -> bool:
    if isinstance(v, Mapping):  # a Hub Image column read raw: {"bytes": ..., "path": ...}
        return any(_present(x) for x in v.values())
    return _present(v)


def theoremqa(raw: Mapping[str, Any], ctx: Context) -> dict:
    """TheoremQA: questions that need a picture are skipped; answer types mapped to ours.

    Answers are written as text: lists as JSON (``[0.333, 0.25]``), booleans ``True``/``False``,
    options as given (``(c)``); the source type stays in metadata ``source_answer_type``.
    """
    if _has_picture(raw.get("Picture")):
        raise Skip("needs_image")
    q = _question(raw, "Question", "question")
    src_type = str(get(raw, "Answer_type")).strip()
    if src_type not in THEOREMQA_TYPES:
        raise BadRow("unknown_answer_type", f"Answer_type {src_type!r} is not one of {sorted(THEOREMQA_TYPES)}")
    ans = get(raw, "Answer")
    text = json.dumps(ans) if isinstance(ans, (list, tuple)) else str(ans).strip()
    meta = _meta(raw, {"Question", "question", "Answer", "Answer_type", "Picture", "id", "explanation"})
    meta["source_answer_type"] = src_type
    return make_row(
        id=_source_id(raw, ctx, "id"),
        source=ctx.name,
        question=q,
        answer=text,
        solution="" if raw.get("explanation") in (None, "NONE") else str(raw["explanation"]),
        answer_type=THEOREMQA_TYPES[src_type],
        metadata=meta,
    )


# WebInstruct-verified's answer_type (lower-cased) -> ours. Types a rule-based grader cannot
# check (free text) map to None: reported, and dropped unless `unsupported_answer_types: keep`.
WEBINSTRUCT_TYPES: dict[str, str | None] = {
    "float": "float",
    "integer": "integer",
    "boolean": "bool",
    "list": "list",
    "multiple choice": "option",  # options are written inside the question text
    "expression": "math",
    "fraction": "math",
    "percentage": "math",
    "matrix": "math",
    "string": None,
    "other": None,
}


def webinstruct(raw: Mapping[str, Any], ctx: Context) -> dict:
    """TIGER-Lab/WebInstruct-verified (``id, question, answer, answer_type, category, difficulty``).

    Categories in ``exclude_categories`` (default Mathematics for the training set, the paper's
    general study; none for the validation set) are a documented filter, counted as ``category:<name>``. Answer types without a rule-based grader
    (String, Other, or any type not in ``WEBINSTRUCT_TYPES``) are counted as
    ``unsupported_answer_type:<type>`` and dropped, or kept as answer_type ``text``.
    """
    _exclude_category(raw, ctx)
    src_type = str(get(raw, "answer_type")).strip()
    ours = WEBINSTRUCT_TYPES.get(src_type.lower())
    if ours is None:
        if ctx.options.get("unsupported_answer_types", "drop") != "keep":
            raise Skip(f"unsupported_answer_type:{src_type}")
        ours = "text"
    meta = _meta(raw, {"id", "question", "answer", "answer_type"})
    meta["source_answer_type"] = src_type
    return make_row(
        id=_source_id(raw, ctx, "id"),
        source=ctx.name,
        question=_question(raw, "question"),
        answer=number_text(get(raw, "answer")),
        answer_type=ours,
        metadata=meta,
    )
