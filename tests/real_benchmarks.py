"""Problems tables from the real benchmark files, through the project's own dataset preparation.

For the grader checks (tests/unit/test_real_benchmarks.py, measurements/grading.py): each file is
prepared exactly as the workflow's ``prepare_dataset`` rule would (``vicurl.data.prepare``), so
the graders see the gold answers, answer types and options the evaluation will see. The
multiple-choice sets and WebInstruct have no real copy here; their schema fixtures
(``tests/data/fixtures``) are checked the same way.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures"


def find_benchmarks() -> Path | None:
    """The real benchmark files: $VICURL_BENCHMARKS, else the nearest shared/data/benchmarks above the repo."""
    env = os.environ.get("VICURL_BENCHMARKS")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data" / "benchmarks"
        if cand.is_dir():
            return cand
    return None


BENCH_DIR = find_benchmarks() or Path("/nonexistent")

# file -> (source of vicurl.data.sources, extra settings)
SOURCES = {
    "math500.jsonl": ("math500", {}),
    "aime24.jsonl": ("aime24", {}),
    "aime25.jsonl": ("aime25", {}),
    "amc23.jsonl": ("amc23", {}),
    "minerva_math.sample.jsonl": ("minerva_math", {}),
    "olympiadbench.sample.jsonl": ("olympiadbench", {}),
    "deepscaler_train_aime.json": ("deepscaler", {}),
    "deepscaler_train_math.sample.json": ("deepscaler", {}),
    "theoremqa.json": ("theoremqa", {}),
}
FIXTURE_SOURCES = {
    "mmlu_pro.jsonl": ("mmlu_pro", {}),
    "gpqa_synthetic.jsonl": ("gpqa_diamond", {}),
    "webinstruct_verified.jsonl": ("webinstruct_val", {"unsupported_answer_types": "keep", "exclude_categories": []}),
}


def load(name: str) -> list[dict]:
    """The prepared rows (schema columns) of one real file, or of one fixture."""
    from vicurl.data.prepare import prepare
    from vicurl.data.sources import resolve

    if name in FIXTURE_SOURCES:
        source, extra = FIXTURE_SOURCES[name]
        path = FIXTURES / name
    else:
        source, extra = SOURCES[name]
        path = BENCH_DIR / name
    df, _ = prepare(resolve(source, {"source": source, "local_path": str(path), **extra}))
    return df.to_dict("records")


def available() -> list[str]:
    return [f for f in SOURCES if (BENCH_DIR / f).exists()]


def fixtures() -> list[str]:
    return [f for f in FIXTURE_SOURCES if (FIXTURES / f).exists()]


def as_model_would(answer: str) -> str:
    """A response that ends with the gold answer in a box, as the prompt asks."""
    return f"Let me work through it step by step.\n\nSo the final answer is $\\boxed{{{answer}}}$."


def rewritten(answer: str, answer_type: str) -> str:
    """A response with the same answer written differently, as another model might write it.

    multiple_choice: "The answer is (B)." without a box; otherwise boxed, with
    math: ``\\frac{a}{b}`` -> ``(a)/(b)``, ``\\dfrac`` -> ``\\frac``, ``\\left`` / ``\\right`` dropped,
    an integer gets ".0"; float: "x = 1.42"; integer: "5.0"; bool: "\\text{Yes}" / "no";
    option: "(C)" upper case; list: round brackets; text: upper case.
    """
    a = answer.strip()
    if answer_type == "multiple_choice":
        return f"Let me work through it step by step.\n\nThe answer is ({a})."
    return as_model_would(_rewrite(a, answer_type))


def _rewrite(a: str, answer_type: str) -> str:
    if answer_type == "math":
        if re.fullmatch(r"-?\d+", a):
            return a + ".0"
        m = re.fullmatch(r"(\d+)\s*\\[dt]?frac\{(\d+)\}\{(\d+)\}", a)  # a mixed number: 1\frac{4}{5}
        if m:
            whole, num, den = map(int, m.groups())
            return f"\\frac{{{whole * den + num}}}{{{den}}}"
        b = re.sub(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}", r"(\1)/(\2)", a)
        return b.replace("\\left", "").replace("\\right", "").replace("\\dfrac", "\\frac")
    if answer_type == "float":
        return f"x = {a}"
    if answer_type == "integer":
        return f"{a}.0"
    if answer_type == "bool":
        return "\\text{Yes}" if a == "True" else "no"
    if answer_type == "option":
        return a.upper()
    if answer_type == "list":
        return "(" + a.strip("[]") + ")" if a.startswith("[") else a
    if answer_type == "text":
        return a.upper()
    return a
