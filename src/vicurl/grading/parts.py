"""Answers in several parts: ``1, -2``, ``(1, 2), (2, 1)``, ``k = 45, n = 2``, ``2, 3, \\text{ and } 4``.

    split_parts(s)          the top-level parts of an answer (one part for "(1, 2)" or "10,\\!080")
    several_parts(gold)     whether a gold answer has more than one part
    answers_equiv(pairs)    equivalence of (answer, reference) pairs, part-wise where the reference
                            has several parts, else ``equiv.equiv_many``

A several-part reference is a set of solutions (each part covered both ways, repeats allowed), a
list (the list answer type, or a reference that repeats a part: a bijection), or labeled parts
(grouped by label, each label's values compared as above); docs/evaluation.md ("Several parts")
has the rules with examples. Each part is compared by ``equiv``, and all part comparisons of a
batch go to the worker pool at once.
"""

from __future__ import annotations

import re
from typing import Sequence

from vicurl.grading.equiv import equiv_many
from vicurl.grading.verdicts import Verdict, combined

MAX_PARTS = 64  # an answer with more parts is compared as one string

# at depth 0: a comma or semicolon, "and" / "or" (bare or in \text{}), \quad
_TOKENS = re.compile(r"\\[{}]|[([{]|[)\]}]|,|;|\\text\{\s*+(?:and|or)\s*+\}|\s(?:and|or)\s|\\q?quad")
_SPACING = re.compile(r"\\left|\\right|\\!\s*+|\{,\}\s*+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
_SET = re.compile(r"\\\{(.*)\\\}", re.DOTALL)
_LEAD = re.compile(r"^(?:\\text\{\s*+(?:and|or)\s*+\}|and\s|or\s)\s*+")
# a label: a letter (with a subscript) or a function of a few arguments, then "=", then the value
_LABEL = re.compile(r"\s*+([A-Za-z](?:_\{?[A-Za-z0-9]++\}?)?(?:\([^()=]*+\))?)\s*+=(?!=)(.+)", re.DOTALL)


def split_parts(s: str) -> list[str]:
    """The parts of ``s`` at bracket depth 0, in order (linear in the length).

    ``10,\\!080``, ``\\$32,\\! 348`` and ``58,500`` are one number; ``\\{1, 2\\}`` splits into its elements; brackets
    keep tuples, intervals and function arguments whole: ``(1, 2)``, ``[0, 1)``, ``f(1, 2)``.
    """
    t = _SPACING.sub("", s or "").strip()
    if _THOUSANDS.fullmatch(t.replace("\\$", "").replace("$", "")):
        return [s.strip()]
    m = _SET.fullmatch(t)
    if m and _balanced(m.group(1)):
        t = m.group(1)
    parts, depth, pos = [], 0, 0
    for tok in _TOKENS.finditer(t):
        c = tok.group(0)
        if c in ("\\{", "(", "[", "{"):
            depth += 1
        elif c in ("\\}", ")", "]", "}"):
            depth -= 1
        elif depth == 0:
            parts.append(t[pos : tok.start()])
            pos = tok.end()
            if len(parts) > MAX_PARTS:
                return [s.strip()]
    parts.append(t[pos:])
    parts = [_LEAD.sub("", p.strip()).strip() for p in parts]
    parts = [p for p in parts if p]
    return parts if len(parts) > 1 else [s.strip()]


def _balanced(s: str) -> bool:
    depth = 0
    for tok in re.finditer(r"\\[{}]", s):
        depth += 1 if tok.group(0) == "\\{" else -1
        if depth < 0:
            return False
    return depth == 0


def several_parts(gold: str) -> bool:
    return len(split_parts(gold)) > 1


def label_of(part: str) -> tuple[str | None, str]:
    """(label, value) of ``name = value``; (None, part) when the part is not labeled."""
    m = _LABEL.fullmatch(part)
    value = m.group(2).strip() if m else ""
    if not value or "=" in value:
        return None, part
    return re.sub(r"\s+", "", m.group(1)), value


def _matching(ok: list[list[bool]]) -> bool:
    """Whether every row can be matched to a different column with ok[row][col] (Kuhn's algorithm)."""
    k = len(ok)
    owner = [-1] * k

    def augment(r: int, seen: list[bool]) -> bool:
        for c in range(k):
            if ok[r][c] and not seen[c]:
                seen[c] = True
                if owner[c] < 0 or augment(owner[c], seen):
                    owner[c] = r
                    return True
        return False

    return all(augment(r, [False] * k) for r in range(k))


def _values(p_vals: list[str], g_vals: list[str], as_set: bool):
    """The comparisons of answer values against reference values, and how to combine their verdicts:
    a bijection (a list) or a cover both ways (a set of solutions). None: wrong without comparing."""
    k, m = len(g_vals), len(p_vals)
    if m > MAX_PARTS or (not as_set and m != k):
        return None
    pairs = [(p, g) for g in g_vals for p in p_vals]  # row = reference part, column = answer part

    def combine(verdicts) -> bool:
        ok = [list(verdicts[r * m : (r + 1) * m]) for r in range(k)]
        if as_set:
            return all(any(row) for row in ok) and all(any(col) for col in zip(*ok))
        return _matching(ok)

    return pairs, combine


def _all(plans):
    """One plan of several: their comparisons in a row, true when every one's verdict is."""
    if any(p is None for p in plans):
        return None
    sizes = [len(pairs) for pairs, _ in plans]

    def combine(verdicts) -> bool:
        at, ok = 0, True
        for (pairs, sub), n in zip(plans, sizes):
            ok = sub(verdicts[at : at + n]) and ok
            at += n
        return ok

    return [pq for pairs, _ in plans for pq in pairs], combine


def _by_label(labeled: list[tuple[str, str]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for lab, v in labeled:
        groups.setdefault(lab, []).append(v)
    return groups


def _plan(pred: str, gold: str, as_set: bool = True):
    """The part comparisons a several-part reference needs, and how to combine their verdicts.

    Returns None when the answer is wrong without comparing (too many parts, other labels), else
    (pairs, combine) where combine(verdicts of pairs) -> bool. A reference that repeats a part is a
    list whatever ``as_set`` says: its multiplicity is part of the answer.
    """
    g_parts, p_parts = split_parts(gold), split_parts(pred)
    normalized = [re.sub(r"\s+", "", p) for p in g_parts]
    as_set = as_set and len(set(normalized)) == len(normalized)
    g_lab = [label_of(p) for p in g_parts]
    p_lab = [label_of(p) for p in p_parts]
    if all(lab for lab, _ in g_lab):
        g_groups = _by_label(g_lab)
        if all(lab for lab, _ in p_lab):  # label to label, each label's values as a set or list
            p_groups = _by_label(p_lab)
            if set(p_groups) != set(g_groups):
                return None
            return _all([_values(p_groups[lab], g_groups[lab], as_set) for lab in g_groups])
        if not any(lab for lab, _ in p_lab):
            if len(g_groups) == 1:  # the values of the reference's one label
                return _values(p_parts, next(iter(g_groups.values())), as_set)
            if len(p_parts) != len(g_parts):  # several labels: read in the reference's order
                return None
            return [(p, v) for p, (_, v) in zip(p_parts, g_lab)], all
        return None
    return _values([v for _, v in p_lab], [v for _, v in g_lab], as_set)


def answers_equiv(pairs: Sequence[tuple[str | None, str]], as_set: bool = True) -> list[Verdict]:
    """Equivalence of each (answer, reference): part-wise for a several-part reference (a set of
    solutions, or a list with ``as_set=False``), else equiv. A part-wise verdict that does not hold is
    TIMEOUT where one of its comparisons timed out."""
    out: list[Verdict] = [False] * len(pairs)
    single: list[int] = []
    plans: dict[int, tuple[list[tuple[str, str]], object]] = {}
    for i, (pred, gold) in enumerate(pairs):
        if pred is None or not str(pred).strip():
            continue
        if several_parts(gold):
            plan = _plan(str(pred), str(gold), as_set)
            if plan is not None:
                plans[i] = plan
        else:
            single.append(i)
    todo = [pairs[i] for i in single] + [pq for i in plans for pq in plans[i][0]]
    verdicts = equiv_many(todo) if todo else []
    for i, v in zip(single, verdicts):
        out[i] = v
    at = len(single)
    for i, (part_pairs, combine) in plans.items():
        part_verdicts = verdicts[at : at + len(part_pairs)]
        out[i] = combined(bool(combine(part_verdicts)), part_verdicts)
        at += len(part_pairs)
    return out
