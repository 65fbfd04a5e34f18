"""Prepare one dataset: load -> normalize -> filter -> (annotate, subset) -> parquet + manifest.

The manifest (``{dataset}.manifest.json`` beside the parquet) says where the rows came from
(Hub id, config, split, requested and resolved revision; or each local file with its sha256),
how many rows came in and went out, and every dropped row counted by reason, so that
``rows_in == rows_out + sum(dropped.values())`` always holds. Reasons are either documented
filters of the source (``no_answer``, ``needs_image``, ``category:Mathematics``,
``unsupported_answer_type:String``, ``not_in_subset``) or malformed rows (``missing_field``,
``malformed_record``, ``duplicate_id``, ...), which ``on_bad_row: fail`` (the default) turns
into an error naming the dataset and the row instead.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from vicurl.data import schema
from vicurl.data.load import Loaded, RawRow, load
from vicurl.data.normalize import BadRow, Context, Skip
from vicurl.data.sources import DatasetSpec, resolve
from vicurl.runtime.errors import InputError
from vicurl.runtime.io import write_json

log = logging.getLogger(__name__)
ID_FIELDS = ("unique_id", "id", "idx", "question_id", "Record ID")
EXAMPLES_PER_REASON = 5


class DataError(InputError):
    """A row or file stops the preparation; the message names the dataset and the row."""


def describe(name: str, raw: RawRow, message: str) -> str:
    """``math500 row 17 (unique_id='test/...', math500.jsonl line 18): missing field 'answer'``."""
    parts = []
    if raw.data is not None:
        key = next((k for k in ID_FIELDS if raw.data.get(k) not in (None, "")), None)
        if key is not None:
            parts.append(f"{key}={raw.data[key]!r}")
    parts.append(raw.where)
    return f"{name} row {raw.index} ({', '.join(parts)}): {message}"


def _normalize_all(spec: DatasetSpec, loaded: Loaded) -> tuple[list[dict], Counter, dict, dict]:
    rows: list[dict] = []
    dropped: Counter = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    rewrites: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for raw in loaded.rows:
        row_rewrites: dict[str, int] = {}  # counted only if the row is kept
        try:
            if raw.data is None:
                raise BadRow("malformed_record", raw.error or "unreadable record")
            row = spec.source.normalizer(raw.data, Context(spec.name, raw.index, spec.options, row_rewrites))
            if row["id"] in first_seen:
                raise BadRow("duplicate_id", f"duplicate id {row['id']!r} (first seen at row {first_seen[row['id']]})")
        except Skip as s:
            dropped[s.reason] += 1
            continue
        except BadRow as b:
            msg = describe(spec.name, raw, str(b))
            if spec.on_bad_row == "fail":
                raise DataError(f"{msg} (set datasets.{spec.name}.on_bad_row: drop to drop and count such rows)") from b
            dropped[b.reason] += 1
            if len(examples[b.reason]) < EXAMPLES_PER_REASON:
                examples[b.reason].append(msg)
            log.warning("dropped: %s", msg)
            continue
        except Exception as e:  # an unexpected value type: stop, naming the row
            raise DataError(describe(spec.name, raw, f"{type(e).__name__}: {e}")) from e
        first_seen[row["id"]] = raw.index
        rows.append(row)
        for kind, n in row_rewrites.items():
            rewrites[kind] = rewrites.get(kind, 0) + n
    return rows, dropped, dict(examples), rewrites


def _problem_key(text: str) -> str:
    return " ".join(str(text).split())


def annotate_adarft(spec: DatasetSpec, rows: list[dict]) -> dict[str, Any]:
    """Add AdaRFT's difficulty (0-100) to metadata ``adarft_difficulty``, joined on the problem text.

    Rows without a match keep no annotation (counted as ``unmatched``), never dropped.
    """
    loaded = load(spec.annotations, f"{spec.name} (adarft_difficulty)")
    table: dict[str, Any] = {}
    for raw in loaded.rows:
        if raw.data is None or not raw.data.get("problem") or raw.data.get("difficulty") is None:
            what = raw.error or "missing field 'problem' or 'difficulty'"
            raise DataError(describe(f"{spec.name} (adarft_difficulty)", raw, what))
        table[_problem_key(raw.data["problem"])] = raw.data["difficulty"]
    matched = 0
    for row in rows:
        d = table.get(_problem_key(row["question"]))
        if d is not None:
            meta = json.loads(row["metadata"])
            meta["adarft_difficulty"] = d
            row["metadata"] = json.dumps(meta, sort_keys=True)
            matched += 1
    return {"source": loaded.info, "rows": len(loaded.rows), "matched": matched, "unmatched": len(rows) - matched}


def take_subset(rows: list[dict], n: int, seed: int) -> list[dict]:
    """``n`` rows drawn without replacement by ``random.Random(seed)``, in source order."""
    if n >= len(rows):
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def prepare(spec: DatasetSpec) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The normalized set and its manifest (nothing is written)."""
    loaded = load(spec.location, spec.name)
    rows, dropped, examples, rewrites = _normalize_all(spec, loaded)
    manifest: dict[str, Any] = {"dataset": spec.name, "source_kind": spec.kind, "source": loaded.info}
    if spec.annotations is not None:
        manifest["adarft_difficulty"] = annotate_adarft(spec, rows)
    if spec.subset is not None:
        kept = take_subset(rows, spec.subset["n"], spec.subset["seed"])
        if len(kept) < len(rows):
            dropped["not_in_subset"] += len(rows) - len(kept)
        rows = kept
    df = schema.to_frame(rows, spec.name)
    if len(df) == 0:  # nothing to train or evaluate on: refused here, not after generation
        where = ", ".join(spec.location.local_paths) or f"{spec.location.hub_id} ({spec.location.split})"
        drops = ", ".join(f"{k}: {v}" for k, v in sorted(dropped.items())) or "none"
        raise DataError(f"{spec.name}: no rows left to write ({len(loaded.rows)} read from {where}; dropped {drops})")
    if len(loaded.rows) != len(df) + sum(dropped.values()):  # the manifest's invariant
        raise AssertionError(f"{spec.name}: {len(loaded.rows)} rows in != {len(df)} out + {sum(dropped.values())} dropped")
    metas = [json.loads(m) for m in df["metadata"]]
    manifest.update(
        settings={"on_bad_row": spec.on_bad_row, "subset": spec.subset, **spec.options},
        rows_in=len(loaded.rows),
        rows_out=len(df),
        dropped=dict(sorted(dropped.items())),
        dropped_examples=examples,
        answers_rewritten=dict(sorted(rewrites.items())),
        answer_types=dict(sorted(Counter(df["answer_type"]).items())),
        source_answer_types=dict(sorted(Counter(m["source_answer_type"] for m in metas if m.get("source_answer_type")).items())),
        written_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )
    return df, manifest


def prepare_dataset(name: str, cfg: Mapping[str, Any], data_path: str | Path, manifest_path: str | Path) -> dict[str, Any]:
    """Prepare ``datasets.{name}`` and write both files atomically (the parquet first, the manifest last)."""
    df, manifest = prepare(resolve(name, cfg))
    schema.write(df, data_path, name=name)
    write_json(manifest_path, manifest)
    return manifest


def summary(manifest: Mapping[str, Any]) -> str:
    """One log line: rows in/out and the drops by reason."""
    drops = ", ".join(f"{k}: {v}" for k, v in manifest["dropped"].items()) or "none"
    return f"{manifest['dataset']}: {manifest['rows_in']} rows in, {manifest['rows_out']} out; dropped {drops}"
