"""Math answer equivalence: fast string and number paths, then math-verify in worker processes.

    is_equiv(pred, gold)        one pair
    equiv_many([(pred, gold)])  many pairs; the undecided ones go to the worker pool in parallel

Checks in order: normalized strings (``normalize``); plain numbers, decided here with math-verify's
own rule so both paths agree (exact rational equality, or after rounding to 6 decimals when a side
is a decimal); else math-verify in a worker (``vicurl.grading.symbolic``), whose verdict may be
``TIMEOUT`` (``vicurl.grading.verdicts``: the item's CPU budget ran out; falsy). Answers longer than
``MAX_SYMBOLIC_CHARS`` are not sent (no benchmark gold is longer than 200 characters). Verdicts are
cached per (pred, gold), timeouts included, so a pathological answer costs its budget once.
Nothing here evaluates model text. See docs/evaluation.md ("Grading and rewards").
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Iterable, Sequence

from vicurl.grading import symbolic
from vicurl.grading.extract import strip_outer_braces, strip_text_commands
from vicurl.grading.verdicts import Verdict

MAX_SYMBOLIC_CHARS = 2000
_CACHE_MAX = 500_000
_cache: dict[tuple[str, str], Verdict] = {}

_SPACES = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "\\quad", "\\qquad", "~", "\\$", "$")


def normalize(ans: str) -> str:
    """Canonical string form, the same for both sides; a conservative subset of the MATH normalizer."""
    s = strip_text_commands((ans or "").strip())
    for tok in _SPACES:
        s = s.replace(tok, "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("−", "-")
    s = re.sub(r"\^\s*+\{\s*+\\circ\s*+\}|\^\s*+\\circ|°", "", s)  # degrees: 90^\circ == 90
    s = s.replace("\\%", "").replace("%", "")
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)  # \frac12
    s = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)  # \frac{1}2
    s = re.sub(r"\\sqrt(\d+)", r"\\sqrt{\1}", s)  # \sqrt2
    s = re.sub(r"^[A-Za-z]=(?!=)", "", s)  # "x=5" -> "5" (a single-letter left side only)
    s = strip_outer_braces(s)
    m = re.fullmatch(r"\(([A-Za-z]|\d+)\)", s)  # "(C)" -> "C", AoPS's "(073)" -> "073"
    return m.group(1) if m else s


_NUM = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)")
_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}")
_SLASH = re.compile(r"([+-]?\d+)/([+-]?\d+)")


def to_number(s: str) -> Fraction | None:
    """Exact value of a plain number, ``a/b`` or ``\\frac{a}{b}`` (thousands commas allowed)."""
    s = normalize(s)
    if len(s) > 4000:  # int() refuses more than 4300 digits; such an answer is not a plain number
        return None
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?", s):
        s = s.replace(",", "")
    if _NUM.fullmatch(s):
        return Fraction(s)
    m = _FRAC.fullmatch(s)
    if m and int(m.group(3)) != 0:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return -v if m.group(1) == "-" else v
    m = _SLASH.fullmatch(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def _is_decimal(s: str) -> bool:
    return "." in normalize(s)


def fast_equiv(pred: str | None, gold: str) -> bool | None:
    """True / False when the fast paths can decide, None when sympy has to."""
    if pred is None or not pred.strip():
        return False
    a, b = normalize(pred), normalize(gold)
    if a == b:
        return bool(a)
    x, y = to_number(a), to_number(b)
    if x is not None and y is not None:
        if x == y:
            return True
        if _is_decimal(a) or _is_decimal(b):  # math-verify: floats compare after rounding to 6 places
            return round(x, 6) == round(y, 6)
        return False
    if not a or not b or len(pred) > MAX_SYMBOLIC_CHARS or len(gold) > MAX_SYMBOLIC_CHARS:
        return False
    return None


def _key(pred: str, gold: str) -> tuple[str, str]:
    return (pred.strip(), gold.strip())


def equiv_many(pairs: Iterable[tuple[str | None, str]]) -> list[Verdict]:
    """Equivalence of each (pred, gold); undecided pairs run in parallel in the worker pool."""
    pairs = list(pairs)
    out: list[Verdict | None] = [None] * len(pairs)
    todo: dict[tuple[str, str], list[int]] = {}
    for i, (pred, gold) in enumerate(pairs):
        if pred is None:
            out[i] = False
            continue
        key = _key(pred, str(gold))
        if key in _cache:
            out[i] = _cache[key]
            continue
        fast = fast_equiv(*key)
        if fast is not None:
            out[i] = fast
            _remember(key, fast)
        else:
            todo.setdefault(key, []).append(i)
    if todo:
        keys = list(todo)
        results = symbolic.pool().equiv([(p, g) for p, g in keys])
        for key, ok in zip(keys, results):
            _remember(key, ok)
            for i in todo[key]:
                out[i] = ok
    return out  # type: ignore[return-value]


def is_equiv(pred: str | None, gold: str) -> Verdict:
    """Whether ``pred`` is equivalent to ``gold`` (see the module docstring for the order of checks)."""
    return equiv_many([(pred, gold)])[0]


def _remember(key: tuple[str, str], value: Verdict) -> None:
    if len(_cache) >= _CACHE_MAX:
        _cache.clear()
    _cache[key] = value


def cache_clear() -> None:
    _cache.clear()


def cache_size() -> int:
    return len(_cache)


def distinct(answers: Sequence[str | None]) -> list[str]:
    """Distinct non-empty answers in order of first appearance (by stripped text)."""
    seen: dict[str, None] = {}
    for a in answers:
        if a is not None and a.strip() and a.strip() not in seen:
            seen[a.strip()] = None
    return list(seen)
