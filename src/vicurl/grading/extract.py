"""Pulling the final answer out of a model's response (pure string work; nothing is evaluated).

``extract_boxed``   the content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (brace matched)
``final_boxes``     every box of the final answer (``\\boxed{1}, \\boxed{2}``), for several-part answers
``final_answer``    the boxed answer, else the text after the last "answer is" / "Answer:"
``extract_choice``  a multiple-choice letter (A-J), from the box, "the answer is (C)" or a lone letter
``parse_bool``      True / False from "True", "yes", "\\text{False}", ...
``parse_number``    a float from "3.5", "1,200", "\\frac{1}{2}", "4e-05", "2.1 \\times 10^{-3}", "5 m/s"
``parse_list``      a list of floats from "[1, 2]", "(1, 2)" or "1, 2"

Every function returns None when it finds nothing: the graders count that as "no answer" and
score it 0; they never guess.
"""

from __future__ import annotations

import math
import re

_BOX_CMDS = ("\\boxed", "\\fbox")
_BARE_ARG = re.compile(r"\s*([^\s$]+)")


def _box_at(text: str, start: int) -> tuple[str, int] | None:
    """(content, end) of the box whose command starts at ``start``; None when it never closes.

    Braces are matched with escaped ``\\{`` / ``\\}`` skipped, so ``\\boxed{\\{1,2\\}}`` works.
    """
    cmd = next(c for c in _BOX_CMDS if text.startswith(c, start))
    i = start + len(cmd)
    if i < len(text) and text[i] == " ":  # "\boxed 5": the argument runs to the next space or "$"
        m = _BARE_ARG.match(text, i)
        return (m.group(1), m.end()) if m else None
    if i >= len(text) or text[i] != "{":
        return None
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == "\\":
            j += 2  # an escaped character (\{, \}, \\) never opens or closes the box
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j], j + 1
        j += 1
    return None  # unbalanced


def _last_box_start(text: str, end: int) -> int:
    return max(text.rfind(cmd, 0, end) for cmd in _BOX_CMDS)


def last_box(text: str) -> tuple[int, int, str] | None:
    """(start, end, content) of the last box: ``text[start:end]`` is the whole ``\\boxed{...}``;
    None if there is none or it never closes."""
    if not text:
        return None
    start = _last_box_start(text, len(text))
    box = _box_at(text, start) if start >= 0 else None
    return None if box is None else (start, box[1], box[0])


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\boxed 5``); None if there is none or it is unbalanced.

    A last box that never closes (a truncated response) is no answer, even if an earlier box
    exists: the final answer is the last one the model wrote.
    """
    box = last_box(text)
    return None if box is None else box[2]


# what may stand between two boxes of one final answer: "$\boxed{1}$ and $\boxed{2}$", "\boxed{1}, \boxed{2}"
_CONNECTIVE = re.compile(r"(?:\s|\$|\\[()\[\]]|[,;&]|\\\\|\\q?quad|\\text\{\s*+(?:and|or)\s*+\}|\b(?:and|or)\b)*+")
_MAX_GAP = 40
MAX_FINAL_BOXES = 64


def final_boxes(text: str) -> list[str] | None:
    """The boxes of the final answer, in order: the last box and the boxes right before it that only
    a connective separates (``,``, ``;``, "and", "or", ``$``, ``\\quad``); None when there is no box
    or the last one never closes. ``\\boxed{(1, 2)}, \\boxed{(2, 1)}`` -> ``["(1, 2)", "(2, 1)"]``;
    a box earlier in the text, or one enclosing another, is not part of the final answer.

    Linear in the length: the text is searched backwards once, each box is matched once, and at
    most ``MAX_FINAL_BOXES`` boxes are read (the last ones).
    """
    box = last_box(text)
    if box is None:
        return None
    start, _, content = box
    boxes = [content]
    while len(boxes) < MAX_FINAL_BOXES:
        prev = _last_box_start(text, start)
        if prev < 0:
            break
        got = _box_at(text, prev)
        if got is None or got[1] > start:  # unbalanced, or it encloses the box after it
            break
        gap = text[got[1] : start]
        if len(gap) > _MAX_GAP or not _CONNECTIVE.fullmatch(gap):
            break
        boxes.append(got[0])
        start = prev
    return boxes[::-1]


def clean(answer: str | None) -> str | None:
    """Strip whitespace, ``$`` delimiters and a trailing period; an empty answer is no answer."""
    if answer is None:
        return None
    s = answer.strip().strip("$").strip().rstrip(".").strip()
    return s or None


_ANSWER_IS = re.compile(r"(?:final\s++answer|answer)\s*+(?:is|:)\s*+:?\s*+(.+)", re.IGNORECASE)


def final_answer(text: str) -> str | None:
    """The boxed answer; without a box, what follows the last "answer is" / "Answer:" on its line.

    The second rule is for the multiple-choice and TheoremQA graders (their sets' own
    conventions); the free-form math grader uses the box only, as the paper's oracle does.
    """
    boxed = extract_boxed(text or "")
    if boxed is not None:
        return clean(boxed)
    matches = list(_ANSWER_IS.finditer(text or ""))
    if not matches:
        return None
    tail = matches[-1].group(1).split("\n")[0]
    tail = re.split(r"\.(?=\s|$)", tail)[0]  # cut at the end of the sentence, not inside 3.5
    return clean(tail)


# ---------------------------------------------------------------- multiple choice

_LETTERS = "ABCDEFGHIJ"
# LaTeX commands whose argument is plain text: \text{5} reads as 5 (nested ones too)
_TEXT_CMDS = r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*+\{"
_GROUP_TOKENS = re.compile(rf"{_TEXT_CMDS}|[{{}}]")


def strip_text_commands(s: str) -> str:
    """Replace each ``\\text{...}``-style command by its argument when the argument holds no braces
    (after its own inner commands are replaced): ``\\text{\\textbf{C}}`` -> ``C``, ``\\text{{a}}`` kept.

    One left-to-right pass over the braces with a stack of open groups, so the cost is linear in
    the length whatever the nesting (a loop of regex passes costs depth x length).
    """
    if "\\" not in s:
        return s
    out: list[str] = []
    stack: list[list] = []  # per open group: [is_command, index of its opening chunk in out, has_braces]
    pos = 0
    for m in _GROUP_TOKENS.finditer(s):
        out.append(s[pos : m.start()])
        pos = m.end()
        tok = m.group(0)
        if tok == "}":
            if not stack:
                out.append(tok)
                continue
            is_cmd, at, has_braces = stack.pop()
            if is_cmd and not has_braces:
                out[at] = ""  # drop the command's opening and this "}": its argument stays
                continue
            if stack:
                stack[-1][2] = True
            out.append(tok)
            continue
        if tok == "{" and stack:
            stack[-1][2] = True
        stack.append([tok != "{", len(out), False])
        out.append(tok)
    out.append(s[pos:])
    return "".join(out)


def strip_outer_braces(s: str) -> str:
    """``{{5}}`` -> ``5``: drop brace pairs that enclose the whole string (linear: one matching pass)."""
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        return s
    partner: dict[int, int] = {}
    stack: list[int] = []
    for j, c in enumerate(s):
        if c == "{":
            stack.append(j)
        elif c == "}":
            if not stack:
                return s  # unbalanced: leave it alone
            partner[stack.pop()] = j
    k, n = 0, len(s)
    while k < n - 1 - k and s[k] == "{" and partner.get(k) == n - 1 - k:
        k += 1
    return s[k : n - k]


def unwrap_text(s: str) -> str:
    """Drop ``\\text{...}``-style wrappers (nested too) and surrounding ``$``."""
    return strip_text_commands(s).strip().strip("$").strip()


def letter_of(s: str, n_options: int = 10) -> str | None:
    """The letter of an answer written as ``C``, ``(C)``, ``C.``, ``C) text``, ``(c)`` or ``\\text{C}``."""
    letters = _LETTERS[: max(1, min(n_options, 10))]
    s = unwrap_text(s)
    m = re.fullmatch(r"\(?([A-Ja-j])\)?[.):]?(?:\s+.*)?", s, flags=re.DOTALL)
    if not m:
        return None
    letter = m.group(1).upper()
    # "a) text" or "(a)" is a choice; a bare lower-case word start ("a bit") is not
    if m.group(1).islower() and not re.match(r"\(?[a-j]\)?[.):]?\s*$|\([a-j]\)|[a-j]\)", s):
        return None
    return letter if letter in letters else None


_CHOICE_PHRASE = re.compile(
    r"(?:answer|choice|option)\s*+(?:is|:)?\s*+:?\s*+(?:option\s++)?\(?\s*+([A-Ja-j])(?:\s*+\))?(?![A-Za-z0-9])",
    re.IGNORECASE,
)


def extract_choice(text: str, n_options: int = 10, options=()) -> str | None:
    """The chosen letter, or None; never a random guess.

    Order: the last box (a letter, ``\\text{(C)}``, or the exact text of one option); then the last
    "answer is (C)" / "Answer: C" / "option C"; then a response that is nothing but a letter.
    Letters beyond ``n_options`` are rejected (GPQA has 4 options, MMLU-Pro up to 10).
    """
    text = text or ""
    boxed = clean(extract_boxed(text))
    if boxed is not None:
        letter = letter_of(boxed, n_options)
        if letter is not None:
            return letter
        norm = _norm_option(boxed)
        for k, opt in enumerate(list(options)[:n_options]):
            if norm and norm == _norm_option(str(opt)):
                return _LETTERS[k]
        return None  # a box that names no option: the model answered, but no choice
    for m in reversed(list(_CHOICE_PHRASE.finditer(text))):
        raw = m.group(0)
        letter = m.group(1)
        if letter.islower() and "(" not in raw:  # "the answer is a prime" is not choice (a)
            continue
        if letter.upper() in _LETTERS[:n_options]:
            return letter.upper()
    return letter_of(text.strip(), n_options) if len(text.strip()) <= 4 else None


def _norm_option(s: str) -> str:
    return re.sub(r"\s+", " ", unwrap_text(s)).strip().rstrip(".").lower()


# ---------------------------------------------------------------- booleans

_TRUE = {"true", "yes", "t", "y", "correct", "right"}
_FALSE = {"false", "no", "f", "n", "incorrect", "wrong"}


def parse_bool(s: str | None) -> bool | None:
    if s is None:
        return None
    w = unwrap_text(s)
    if len(w) > 40:  # longer than any word below: not a yes / no (and no regex work on a long text)
        return None
    w = re.sub(r"[\s.!]+$", "", w).strip("()").strip().lower()
    if w in _TRUE:
        return True
    if w in _FALSE:
        return False
    return None


# ---------------------------------------------------------------- numbers and lists

_NUMBER = r"[+-]?(?:\d+(?:,\d{3})*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_SCI = re.compile(rf"^({_NUMBER})\s*+(?:\\times|\\cdot|\*|x)\s*+10\s*+\^\s*+\{{?\s*+([+-]?\d+)\s*+\}}?$")
_FRAC = re.compile(r"^([+-]?)\\[dt]?frac\{([+-]?\d+(?:\.\d+)?)\}\{([+-]?\d+(?:\.\d+)?)\}$")
_SLASH = re.compile(r"^([+-]?\d+(?:\.\d+)?)\s*+/\s*+([+-]?\d+(?:\.\d+)?)$")
# a unit after the number: "%", "°", or letters after a space ("5 m/s") or two or more letters ("3.2kg");
# never a single letter glued to the number ("3i", "2e", "5x" are not a number with a unit)
_UNIT_TAIL = re.compile(
    rf"^({_NUMBER})(?:\s*(?:\\%|%|°)|\s+[A-Za-z°µΩ][A-Za-z°µΩ/^\d\s.*·-]*|[A-Za-z°µΩ]{{2,}}[A-Za-z°µΩ/^\d\s.*·-]*)$"
)
_MAX_NUMBER_CHARS = 400  # longer text is not a number a grader should try to read


def _plain_number(s: str) -> float | None:
    if re.fullmatch(_NUMBER, s):
        try:
            return float(s.replace(",", ""))
        except ValueError:
            return None
    return None


def parse_number(s: str | None) -> float | None:
    """A finite float from a short numeric answer, or None (then a grader may ask sympy)."""
    if s is None:
        return None
    s = unwrap_text(s)
    if len(s) > _MAX_NUMBER_CHARS:
        return None
    for tok in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\ ", "~"):
        s = s.replace(tok, "")
    s = s.replace("−", "-").replace("{,}", ",").strip()
    s = re.split(r"=|\\approx|≈", s)[-1].strip()  # "x = 3.5" -> "3.5"
    s = re.sub(r"\^\s*+\{?\\circ\}?", "", s).strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1].strip()
    v = _plain_number(s)
    if v is None and (m := _SCI.match(s)):
        base = _plain_number(m.group(1))
        v = None if base is None else base * 10.0 ** int(m.group(2))
    if v is None and (m := _FRAC.match(s)):
        num, den = float(m.group(2)), float(m.group(3))
        v = None if den == 0 else (-1 if m.group(1) == "-" else 1) * num / den
    if v is None and (m := _SLASH.match(s)):
        num, den = float(m.group(1)), float(m.group(2))
        v = None if den == 0 else num / den
    if v is None and (m := _UNIT_TAIL.match(s)):  # "5 m/s", "12%": the number, units dropped
        v = _plain_number(m.group(1))
    if v is None or not math.isfinite(v):
        return None
    return v


def split_top_level(s: str) -> list[str]:
    """Split on commas that are not inside (), [], {} (so "f(1,2), 3" is two items)."""
    parts, depth, cur = [], 0, []
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_list(s: str | None) -> list[float] | None:
    """Numbers of "[1, 2]", "(1, 2)", "\\left[1, 2\\right]" or "1, 2"; None unless every item is a number."""
    if s is None:
        return None
    s = unwrap_text(s).replace("\\left", "").replace("\\right", "").strip()
    if len(s) > 20 * _MAX_NUMBER_CHARS:
        return None
    if len(s) >= 2 and s[0] in "[(" and s[-1] in ")]":
        s = s[1:-1]
    items = split_top_level(s)
    if any(re.fullmatch(r"\d{3}", it) for it in items[1:]):  # "1,000" is a number, not a list
        one = parse_number(s)
        return None if one is None else [one]
    values = [parse_number(it) for it in items]
    if not values or any(v is None for v in values):
        return None
    return values  # type: ignore[return-value]


def is_integer_text(s: str) -> bool:
    """Whether a gold number is written as an integer (then the prediction must be that integer)."""
    return re.fullmatch(r"[+-]?\d+", s.strip().replace(",", "")) is not None

