"""Synthetic arithmetic reasoning task with graded difficulty (the CPU demo's dataset).

A problem is a left-to-right chain of additions and subtractions (``Compute 23 + 45 - 7.``); its
solution writes every partial result in the paper's response format::

    <think>23 + 45 = 68. 68 - 7 = 61.</think> The answer is \\boxed{61}.

Partial results never go negative, so the chain is also the conventional value of the expression.
Levels (``LEVELS``) add operations (1 to 4), larger operands and, at 5-6, carries and borrows;
solutions take ~14 (level 1) to ~58 (level 6) tokens of the tiny model. A split may write a share
``unboxed`` of its solutions without the box, as base models often do: a habit RL with an
extractable-answer reward unlearns; which rows is drawn from a stream of its own, so changing
``unboxed`` never changes the problems. Each set draws from its own ``random.Random(seed)``; the
global RNG is never touched.
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
    first_digits: tuple[int, int]  # digit count range (inclusive) of the first operand
    digits: tuple[int, int]  # digit count range (inclusive) of every later operand
    carry: bool  # False: no step ever carries (+) or borrows (-), digit by digit

    @staticmethod
    def operand_range(digits: int) -> tuple[int, int]:
        return (1 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)

    @property
    def max_digits(self) -> int:
        return max(self.first_digits[1], self.digits[1])


# Difficulty grows with the number of operations, the operands' size and whether carries
# and borrows occur (levels 1-4 never carry, so every partial result is digit-wise
# arithmetic; levels 5-6 do). A digit range draws the digit count uniformly per operand.
# Level 1 has over 8,000 distinct questions; later levels far more.
LEVELS: dict[int, Level] = {
    1: Level(ops=1, first_digits=(2, 3), digits=(1, 1), carry=False),
    2: Level(ops=2, first_digits=(2, 3), digits=(1, 1), carry=False),
    3: Level(ops=2, first_digits=(2, 3), digits=(1, 2), carry=False),
    4: Level(ops=3, first_digits=(2, 3), digits=(1, 2), carry=False),
    5: Level(ops=3, first_digits=(2, 3), digits=(1, 2), carry=True),
    6: Level(ops=4, first_digits=(3, 3), digits=(2, 2), carry=True),
}
OPS = ("+", "-")
SOURCE_ANSWER_TYPE = "math"
_MAX_TRIES = 10_000  # fresh draws per row before giving up on finding an unused question


def has_carry(a: int, op: str, b: int) -> bool:
    """Whether column arithmetic of ``a op b`` carries (+) or borrows (-) in any column."""
    while a or b:
        da, db = a % 10, b % 10
        if (op == "+" and da + db > 9) or (op == "-" and da < db):
            return True
        a, b = a // 10, b // 10
    return False


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
        return self.worked_solution(boxed=True)

    def worked_solution(self, boxed: bool = True) -> str:
        think = " ".join(f"{a} {op} {b} = {r}." for a, op, b, r in self.steps())
        answer = f"\\boxed{{{self.answer}}}" if boxed else str(self.answer)
        return f"<think>{think}</think> The answer is {answer}."


def apply_op(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    raise ValueError(f"unknown operator {op!r}")


def _valid_operands(cur: int, op: str, lo: int, hi: int, carry: bool) -> list[int]:
    return [x for x in range(lo, hi + 1) if (op == "+" or x <= cur) and (carry or not has_carry(cur, op, x))]


def sample_problem(level: int, rng: random.Random) -> Problem:
    """One problem of ``level`` drawn from ``rng``.

    Each step draws the operand's digit count, picks an operator uniformly among those that
    have a valid operand of that size (the running total stays non-negative; no carry or
    borrow where the level forbids it), then the operand uniformly among the valid ones.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, got {level!r}")
    spec = LEVELS[level]
    lo, hi = spec.operand_range(rng.randint(*spec.first_digits))
    cur = rng.randint(lo, hi)
    operands, operators = [cur], []
    for _ in range(spec.ops):
        ranges = [spec.operand_range(rng.randint(*spec.digits))]
        ranges.append((spec.operand_range(spec.digits[0])[0], spec.operand_range(spec.digits[1])[1]))
        for lo, hi in ranges:  # the drawn size first; any allowed size if nothing of it fits
            valid = {op: _valid_operands(cur, op, lo, hi, spec.carry) for op in OPS}
            choices = [op for op in OPS if valid[op]]
            if choices:
                break
        else:  # only possible without carries (e.g. 99 - 9x ... ): start the chain again
            return sample_problem(level, rng)
        op = rng.choice(choices)
        x = rng.choice(valid[op])
        cur = apply_op(cur, op, x)
        operands.append(x)
        operators.append(op)
    return Problem(level, tuple(operands), tuple(operators))


def make_set(
    name: str, n: int, levels: list[int], seed: int, exclude: Iterable[str] = (), unboxed: float = 0.0
) -> pd.DataFrame:
    """``n`` distinct problems in the normalized schema, levels spread evenly (round robin).

    ``exclude``: question texts that must not appear (e.g. the evaluation sets' questions).
    Row ``i`` has level ``levels[i % len(levels)]`` and id ``f"{name}-{i:05d}"``.
    ``unboxed``: share of rows whose solution states the answer without ``\\boxed{}``
    (each row independently, metadata ``boxed``); the gold ``answer`` is the same either way.
    """
    levels = [int(lv) for lv in levels]
    if n < 0:
        raise ValueError(f"{name}: n must be >= 0, got {n}")
    if not 0.0 <= unboxed <= 1.0:
        raise ValueError(f"{name}: unboxed must lie in [0, 1], got {unboxed}")
    if not levels:
        raise ValueError(f"{name}: levels must not be empty")
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise ValueError(f"{name}: unknown level(s) {bad}; levels are {sorted(LEVELS)}")
    rng = random.Random(int(seed))
    style_rng = random.Random(derive_seed(seed, f"{name}:style"))  # never shifts the problems
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
        boxed = style_rng.random() >= unboxed
        rows.append(
            make_row(
                id=f"{name}-{i:05d}",
                source=name,
                question=p.question,
                answer=str(p.answer),
                solution=p.worked_solution(boxed),
                answer_type=SOURCE_ANSWER_TYPE,
                metadata={"level": level, "ops": spec.ops, "digits": spec.max_digits, "carry": spec.carry,
                          "boxed": boxed},
            )
        )
    return to_frame(rows, name)


def derive_seed(seed: int, name: str) -> int:
    """A distinct, stable 31-bit seed for split ``name`` (independent of PYTHONHASHSEED)."""
    h = hashlib.sha256(f"vicurl-synthetic:{int(seed)}:{name}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def make_splits(cfg: Mapping[str, Mapping[str, Any]], seed: int) -> dict[str, pd.DataFrame]:
    """All splits of the synthetic task, pairwise disjoint by question text.

    ``cfg`` maps split name -> ``{"n": int, "levels": [int, ...], "unboxed": float (optional)}``. Every split excludes the
    questions of every split drawn before it, so no two splits share a question (whatever
    their names: no evaluation question is ever in an SFT or RL training split). Splits
    whose name starts with ``eval`` are drawn first (so they do not change when the training
    splits are resized), then the others in ``cfg`` order. Each split draws from its own seed
    ``derive_seed(seed, name)``. Returns the splits in ``cfg`` order.
    """
    names = [k for k in cfg if str(k).startswith("eval")] + [k for k in cfg if not str(k).startswith("eval")]
    used: set[str] = set()
    out: dict[str, pd.DataFrame] = {}
    for name in names:
        spec = cfg[name]
        df = make_set(name, int(spec["n"]), list(spec["levels"]), derive_seed(seed, name), exclude=used,
                      unboxed=float(spec.get("unboxed", 0.0)))
        used.update(df["question"])
        out[name] = df
    return {k: out[k] for k in cfg}  # caller's order
