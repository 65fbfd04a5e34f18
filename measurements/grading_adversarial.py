"""Worst-case grading time on adversarial responses (issue: a response must never stall grading).

    .venv/bin/python measurements/grading_adversarial.py [--mb 1.0] [--repeat 3]

Every response below is graded by every answer type's grader (``grade_batch``, the path the
``grade`` rule and the rewards take) against a single-part gold and, for the math grader, a
several-part gold as well (all boxes of the final answer are read then). The time printed is the
work done in the calling process: extraction, normalization, the fast paths. Comparisons that
reach math-verify run in the worker pool, each under its CPU budget (``symbolic.CPU_SECONDS``);
answers longer than ``equiv.MAX_SYMBOLIC_CHARS`` are never sent there. The last column says how
many items a response sent to the pool (short answers left after the whitespace is stripped).
Prints one row per response (its size and the slowest answer type) and the worst case overall.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from vicurl.grading import equiv, symbolic
from vicurl.grading.graders import ANSWER_TYPES, grade_batch

REPO = Path(__file__).resolve().parents[1]


def responses(size: int, seed: int = 0) -> dict[str, str]:
    """Adversarial responses of about ``size`` characters (each a known way to make a parser slow)."""
    rng = random.Random(seed)
    d = size // 2  # nesting depth whose opening and closing halves fill ``size``
    latexish = "{}\\$()[],.= 0123456789abx^_"
    return {
        "nested braces in a box": "\\boxed{" + "{" * d + "2" + "}" * d + "}",
        "nested braces, depth 16,000": "\\boxed{" + "{" * 16_000 + "2" + "}" * 16_000 + "}",
        "nested \\text{} in a box": "\\boxed{" + "\\text{" * (size // 7) + "2" + "}" * (size // 7) + "}",
        "run of \\text{a} in a box": "\\boxed{" + "\\text{a}" * (size // 8) + "}",
        "nested \\frac chain": "\\boxed{" + "\\frac{" * (size // 10) + "1" + "}{2}" * (size // 10) + "}",
        "run of \\frac12": "\\boxed{" + "\\frac12" * (size // 7) + "}",
        "unclosed box": "\\boxed{" + "{" * size,
        "nested boxes": "\\boxed{" * (size // 7) + "2" + "}" * (size // 7),
        "many boxes, one final run": "\\boxed{1}, " * (size // 11),
        "many boxes, prose between": "so \\boxed{1} holds. " * (size // 20),
        "digits in a box": "\\boxed{" + "1" * size + "}",
        "thousands commas in a box": "\\boxed{1" + ",000" * (size // 4) + "}",
        "commas and parentheses in a box": "\\boxed{" + "(1, 2), " * (size // 8) + "}",
        "\\left( runs in a box": "\\boxed{" + "\\left(" * (size // 6) + "}",
        "spaces in a box": "\\boxed{x = " + " " * size + "y, 1}",
        "'^' then spaces in a box": "\\boxed{2^" + " " * size + "}",
        "'\\times 10 ^' then spaces": "\\boxed{2 \\times 10^" + " " * size + "}",
        "'answer is' repeated": "the answer is " * (size // 14),
        "'answer' then spaces": "the answer" + " " * size + "x",
        "'answer is (' then spaces": "answer is (" + " " * size,
        "'option' repeated": "option " * (size // 7),
        "random LaTeX-like text": "".join(rng.choice(latexish) for _ in range(size)),
        "plain prose, no box": "word " * (size // 5),
    }


def golds_for(answer_type: str) -> list[str]:
    return ["2", "1, 2"] if answer_type == "math" else ["2"]


def time_one(text: str, answer_type: str, gold: str) -> float:
    problem = {"answer": gold, "answer_type": answer_type, "options": ["1", "2", "3", "4"]}
    equiv.cache_clear()
    t0 = time.perf_counter()
    grade_batch([text], [problem])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=1.0, help="size of each response in MB (default 1)")
    ap.add_argument("--repeat", type=int, default=1, help="timings per (response, grader); the best is kept")
    args = ap.parse_args()
    size = int(args.mb * 1_000_000)
    pool = symbolic.pool()
    print(f"{'response':34s} {'chars':>10s} {'slowest grader':>22s} {'seconds':>8s} {'to pool':>8s}")
    worst = (0.0, "", "")
    for name, text in responses(size).items():
        before = pool.stats["items"]
        slowest = (0.0, "")
        for at in ANSWER_TYPES:
            for gold in golds_for(at):
                dt = min(time_one(text, at, gold) for _ in range(args.repeat))
                if dt > slowest[0]:
                    slowest = (dt, f"{at} (gold {gold!r})")
        sent = pool.stats["items"] - before
        print(f"{name:34s} {len(text):10,d} {slowest[1]:>22s} {slowest[0]:8.3f} {sent:8d}")
        if slowest[0] > worst[0]:
            worst = (slowest[0], name, slowest[1])
    print(f"\nworst case: {worst[0]:.3f} s ({worst[1]}, {worst[2]} grader)")


if __name__ == "__main__":
    main()
