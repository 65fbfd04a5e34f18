"""Answer extraction and equivalence (the fast paths; no model text is ever evaluated).

``extract_boxed`` finds the last ``\\boxed{...}`` / ``\\fbox{...}`` with brace matching.
``is_equiv`` compares a prediction with a gold answer by normalized string, then by exact
rational value when both sides parse as plain numbers or simple fractions. Symbolic
equivalence (math-verify in worker processes) extends this in the grader module.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOX_CMDS = ("\\boxed", "\\fbox")


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\boxed 5``); None if there is none or it is unbalanced."""
    if not text:
        return None
    start = max(text.rfind(cmd) for cmd in _BOX_CMDS)
    if start < 0:
        return None
    cmd = next(c for c in _BOX_CMDS if text.startswith(c, start))
    i = start + len(cmd)
    if i < len(text) and text[i] == " ":  # "\boxed 5": the argument runs to the next space or "$"
        m = re.match(r"\s*([^\s$]+)", text[i:])
        return m.group(1) if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None  # unbalanced


_TEXT_CMD = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")


def normalize(ans: str) -> str:
    """Canonical string form: no spaces, dollars, \\left/\\right, \\text{} wrappers, trailing dot."""
    s = ans.strip()
    s = _TEXT_CMD.sub(r"\1", s)
    for tok in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\ ", "$"):
        s = s.replace(tok, "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    s = re.sub(r"^\{(.*)\}$", r"\1", s)
    return s


_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)$")
_FRAC = re.compile(r"^([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}$")
_SLASH = re.compile(r"^([+-]?\d+)/([+-]?\d+)$")


def to_number(s: str) -> Fraction | None:
    """Exact value of a plain number, ``a/b`` or ``\\frac{a}{b}`` (thousands commas allowed)."""
    s = normalize(s)
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?", s):
        s = s.replace(",", "")
    if _NUM.match(s):
        return Fraction(s)
    m = _FRAC.match(s)
    if m and int(m.group(3)) != 0:
        v = Fraction(int(m.group(2)), int(m.group(3)))
        return -v if m.group(1) == "-" else v
    m = _SLASH.match(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def is_equiv(pred: str | None, gold: str) -> bool:
    if pred is None:
        return False
    a, b = normalize(pred), normalize(gold)
    if a == b:
        return True
    x, y = to_number(a), to_number(b)
    return x is not None and y is not None and x == y
