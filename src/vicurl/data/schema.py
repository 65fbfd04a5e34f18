"""The one normalized schema every prepared dataset is written in (one parquet per set).

id          str   stable row id, unique within the set
source      str   dataset name the row came from (e.g. ``arith_train``, ``math500``)
question    str   the problem text, without any prompt template
answer      str   gold answer as text (what the grader compares against)
solution    str   worked solution ("" when the source has none)
answer_type str   how to grade: one of ``ANSWER_TYPES`` (``vicurl.grading.graders``)
options     list[str]  answer options for multiple choice ([] otherwise)
metadata    str   JSON object with anything else (difficulty level, subject, ...)

A ``multiple_choice`` gold is the letter of the correct option (``A`` = ``options[0]``); ``option``
rows (TheoremQA, WebInstruct) have the options inside the question and a gold such as ``(c)``;
``text`` is a free-form answer no rule-based grader checks. See docs/datasets.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from vicurl.runtime.errors import InputError
from vicurl.runtime.io import atomic_path

COLUMNS = ["id", "source", "question", "answer", "solution", "answer_type", "options", "metadata"]
ANSWER_TYPES = {"math", "multiple_choice", "float", "integer", "bool", "list", "option", "text"}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class SchemaError(InputError):
    """A dataset row or file does not follow the normalized schema."""


def make_row(
    *,
    id: str,
    source: str,
    question: str,
    answer: str,
    solution: str = "",
    answer_type: str = "math",
    options: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One row of the normalized schema (metadata is stored as a JSON string)."""
    return {
        "id": str(id),
        "source": str(source),
        "question": str(question),
        "answer": str(answer),
        "solution": str(solution),
        "answer_type": str(answer_type),
        "options": [str(o) for o in options],
        "metadata": json.dumps(dict(metadata or {}), sort_keys=True),
    }


def validate(df: pd.DataFrame, name: str = "<dataset>") -> pd.DataFrame:
    """Check columns, types and ids; raise SchemaError naming the set and the row."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SchemaError(f"{name}: missing column(s) {missing}; expected {COLUMNS}")
    for i, row in enumerate(df.itertuples(index=False)):
        if row.answer_type not in ANSWER_TYPES:
            raise SchemaError(f"{name}: row {i} (id={row.id!r}) has answer_type {row.answer_type!r}, "
                              f"expected one of {sorted(ANSWER_TYPES)}")
        if not str(row.question).strip():
            raise SchemaError(f"{name}: row {i} (id={row.id!r}) has an empty question")
        if row.answer_type == "multiple_choice" and (len(row.answer) != 1 or row.answer not in LETTERS[: len(row.options)]):
            raise SchemaError(f"{name}: row {i} (id={row.id!r}) is multiple choice with answer {row.answer!r}, "
                              f"expected the letter of one of its {len(row.options)} options")
    dup = df["id"][df["id"].duplicated()]
    if len(dup):
        raise SchemaError(f"{name}: duplicate id(s) {list(dup[:5])}")
    return df[COLUMNS]


def to_frame(rows: Iterable[Mapping[str, Any]], name: str = "<dataset>") -> pd.DataFrame:
    return validate(pd.DataFrame(list(rows), columns=COLUMNS), name)


def write(df: pd.DataFrame, path: str | Path, name: str | None = None) -> None:
    """Validate and write a set atomically (a killed job never leaves a partial parquet)."""
    df = validate(df, name or str(path))
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def read(path: str | Path) -> pd.DataFrame:
    try:
        df = pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types; name the file
        raise SchemaError(f"cannot read dataset {path}: {e}") from e
    return validate(df, str(path))


def metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(row["metadata"]) if row["metadata"] else {}
