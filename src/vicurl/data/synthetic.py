"""Synthetic arithmetic reasoning task with graded difficulty (the CPU demo's dataset).

A problem is a left-to-right chain of additions and subtractions, e.g.
``Compute 23 + 45 - 7.``; its worked solution writes every partial result in the paper's
response format::

    <think>23 + 45 = 68. 68 - 7 = 61.</think> The answer is \\boxed{61}.

Difficulty grows with the level (``LEVELS``): more operations and more operand digits.
Partial results never go negative (a subtraction draws a subtrahend no larger than the
running total), so the left-to-right chain is also the conventional value of the
expression and every intermediate number is a plain non-negative integer.

Everything is deterministic given the seed: each set draws from its own
``random.Random(seed)``; the global RNG is never touched.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import pandas as pd

from vicurl.data.schema import make_row, to_frame


@dataclass(frozen=True)
class Level:
    """How one difficulty level draws problems."""

    ops: int  # number of binary operations (the chain has ops + 1 operands)
    first_digits: int  # digits of the first operand
    digits: int  # digits of every later operand

    def operand_range(self, digits: int) -> tuple[int, int]:
        return (1 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


# level -> (operations, digits of the first operand, digits of the other operands).
# Level 1 has 90*9*2 = 1,620 distinct questions; every later level has far more.
LEVELS: dict[int, Level] = {
    1: Level(ops=1, first_digits=2, digits=1),
    2: Level(ops=2, first_digits=2, digits=1),
    3: Level(ops=2, first_digits=2, digits=2),
    4: Level(ops=3, first_digits=2, digits=2),
    5: Level(ops=3, first_digits=3, digits=2),
    6: Level(ops=4, first_digits=3, digits=2),
}
OPS = ("+", "-")
SOURCE_ANSWER_TYPE = "math"
_MAX_TRIES = 10_000  # fresh draws per row before giving up on finding an unused question


@dataclass(frozen=True)
class Problem:
    level: int
    operands: tuple[int, ...]
    operators: tuple[str, ...]

    @property
    def expression(self) -> str:
        parts = [str(self.operands[0])]
        for op, x in zip(self.operators, self.operands[1:]):
            parts += [op, str(x)]
        return " ".join(parts)

    def steps(self) -> list[tuple[int, str, int, int]]:
        """(left, operator, right, result) for every operation, left to right."""
        out, cur = [], self.operands[0]
        for op, x in zip(self.operators, self.operands[1:]):
            nxt = apply_op(cur, op, x)
            out.append((cur, op, x, nxt))
            cur = nxt
        return out

    @property
    def answer(self) -> int:
        steps = self.steps()
        return steps[-1][3] if steps else self.operands[0]

    @property
    def question(self) -> str:
        return f"Compute {self.expression}."

    @property
    def solution(self) -> str:
        think = " ".join(f"{a} {op} {b} = {r}." for a, op, b, r in self.steps())
        return f"<think>{think}</think> The answer is \\boxed{{{self.answer}}}."


def apply_op(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operator {op!r}")


def sample_problem(level: int, rng: random.Random) -> Problem:
    """One problem of ``level`` drawn from ``rng``."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, got {level!r}")
    spec = LEVELS[level]
    lo, hi = spec.operand_range(spec.first_digits)
    cur = rng.randint(lo, hi)
    operands, operators = [cur], []
    lo, hi = spec.operand_range(spec.digits)
    for _ in range(spec.ops):
        op = rng.choice(OPS)
        if op == "-" and cur < lo:  # no subtrahend fits: keep the running total non-negative
            op = "+"
        x = rng.randint(lo, min(hi, cur)) if op == "-" else rng.randint(lo, hi)
        cur = apply_op(cur, op, x)
        operands.append(x)
        operators.append(op)
    return Problem(level, tuple(operands), tuple(operators))


def make_set(
    name: str, n: int, levels: list[int], seed: int, exclude: Iterable[str] = ()
) -> pd.DataFrame:
    """``n`` distinct problems in the normalized schema, levels spread evenly (round robin).

    ``exclude``: question texts that must not appear (e.g. the evaluation sets' questions).
    Row ``i`` has level ``levels[i % len(levels)]`` and id ``f"{name}-{i:05d}"``.
    """
    levels = [int(lv) for lv in levels]
    if n < 0:
        raise ValueError(f"{name}: n must be >= 0, got {n}")
    if not levels:
        raise ValueError(f"{name}: levels must not be empty")
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise ValueError(f"{name}: unknown level(s) {bad}; levels are {sorted(LEVELS)}")
    rng = random.Random(int(seed))
    seen = set(exclude)
    rows = []
    for i in range(n):
        level = levels[i % len(levels)]
        for _ in range(_MAX_TRIES):
            p = sample_problem(level, rng)
            if p.question not in seen:
                break
        else:
            raise ValueError(
                f"{name}: could not find an unused level-{level} question after {_MAX_TRIES} draws "
                f"(row {i}); ask for fewer rows at this level"
            )
        seen.add(p.question)
        spec = LEVELS[level]
        rows.append(
            make_row(
                id=f"{name}-{i:05d}",
                source=name,
                question=p.question,
                answer=str(p.answer),
                solution=p.solution,
                answer_type=SOURCE_ANSWER_TYPE,
                metadata={"level": level, "ops": spec.ops, "digits": max(spec.first_digits, spec.digits)},
            )
        )
    return to_frame(rows, name)


def derive_seed(seed: int, name: str) -> int:
    """A distinct, stable 31-bit seed for split ``name`` (independent of PYTHONHASHSEED)."""
    h = hashlib.sha256(f"vicurl-synthetic:{int(seed)}:{name}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def make_splits(cfg: Mapping[str, Mapping[str, Any]], seed: int) -> dict[str, pd.DataFrame]:
    """All splits of the synthetic task, pairwise disjoint by question text.

    ``cfg`` maps split name -> ``{"n": int, "levels": [int, ...]}``. Splits whose name starts
    with ``eval`` are drawn first, then the others in ``cfg`` order; each excludes the
    questions of every split drawn before it, so no evaluation question is ever trained on.
    Each split draws from its own seed ``derive_seed(seed, name)``.
    """
    names = [k for k in cfg if str(k).startswith("eval")] + [k for k in cfg if not str(k).startswith("eval")]
    used: set[str] = set()
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        spec = cfg[name]
        df = make_set(name, int(spec["n"]), list(spec["levels"]), derive_seed(seed, name), exclude=used)
        used.update(df["question"])
        out[name] = df
    return {k: out[k] for k in cfg}  # caller's order
