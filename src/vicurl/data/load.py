"""Read the raw rows of a dataset: from local files (jsonl, json, parquet) or the Hugging Face Hub.

Both paths return the same thing, a list of ``RawRow`` (the row as a plain dict, where it came
from) and a description of the source for the manifest, so everything after loading is one
code path. Local files are read with the standard library / pyarrow rather than
``datasets``' json builder, which cannot hold a column whose values mix types (TheoremQA's
``Answer`` is a number, a bool or a list). Hub sets are read with ``datasets.load_dataset``
(network, cache and tokens are the library's: ``HF_TOKEN`` for gated sets such as GPQA,
``HF_HOME`` for the cache), at the revision resolved beforehand so the manifest records the
commit that was read. Rows come out raw: a Hub image column is its ``{bytes, path}`` record,
never decoded.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from vicurl.data.sources import Location
from vicurl.runtime.errors import InputError

log = logging.getLogger(__name__)
FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet"}


class LoadError(InputError):
    """A file cannot be read or the Hub cannot serve the set; the message names the dataset and the file."""


@dataclass(frozen=True)
class RawRow:
    index: int  # 0-based position among all rows of the source (files / configs in order)
    where: str  # human-readable origin, e.g. "math500.jsonl line 18"
    data: dict[str, Any] | None  # None: the record could not be parsed
    error: str | None = None  # why it could not be parsed


@dataclass(frozen=True)
class Loaded:
    rows: list[RawRow]
    info: dict[str, Any]  # the manifest's `source` block


def load(loc: Location, name: str) -> Loaded:
    """All raw rows of ``loc`` (local files when given, else the Hub)."""
    loaded = _load_local(loc, name) if loc.is_local else _load_hub(loc, name)
    loaded.info["rows_sha256"] = rows_sha256(r.data for r in loaded.rows)
    return loaded


# ----------------------------------------------------------------------------- local files


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load_local(loc: Location, name: str) -> Loaded:
    rows: list[RawRow] = []
    files = []
    for p in loc.local_paths:
        path = Path(p)
        fmt = FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise LoadError(f"{name}: cannot read {p}: unknown file type {path.suffix!r} (expected {sorted(FORMATS)})")
        if not path.is_file():
            raise LoadError(f"{name}: cannot read {p}: no such file (datasets.{name}.local_path)")
        try:
            records = list(_read(path, fmt))
        except LoadError:
            raise
        except Exception as e:  # OSError, pyarrow errors: name the file
            raise LoadError(f"{name}: cannot read {p}: {e}") from e
        for where, data, error in records:
            rows.append(RawRow(len(rows), f"{path.name} {where}", data, error))
        files.append({"path": str(p), "sha256": sha256_file(path), "bytes": path.stat().st_size, "rows": len(records)})
    return Loaded(rows, {"type": "local", "files": files})


def _read(path: Path, fmt: str) -> Iterator[tuple[str, dict | None, str | None]]:
    """(where, row, error) per record; a record that is not a JSON object is an error row."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        for i, rec in enumerate(pq.read_table(path).to_pylist()):
            yield f"row {i}", rec, None
        return
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # "Extra data": JSON lines in a .json file; read them as such
                raise LoadError(f"cannot read {path}: not valid JSON ({e})") from e
        else:
            if not isinstance(data, list):
                raise LoadError(f"cannot read {path}: expected a JSON list of objects, got {type(data).__name__}")
            for i, rec in enumerate(data):
                yield (f"item {i}", rec, None) if isinstance(rec, dict) else (f"item {i}", None, "not a JSON object")
            return
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            yield f"line {lineno}", None, f"malformed JSON ({e.msg})"
            continue
        yield (f"line {lineno}", rec, None) if isinstance(rec, dict) else (f"line {lineno}", None, "not a JSON object")


# ----------------------------------------------------------------------------- the Hub


def resolve_revision(hub_id: str, revision: str | None) -> str | None:
    """The commit a branch/tag points to now (None when the Hub cannot be asked, e.g. offline with a cache)."""
    try:
        import huggingface_hub

        return huggingface_hub.HfApi().dataset_info(hub_id, revision=revision).sha
    except Exception as e:  # offline, gated without token, ...: load_dataset reports the real problem
        log.warning("could not resolve the revision of %s (%s); the manifest records it as unknown", hub_id, e)
        return None


def _load_hub(loc: Location, name: str) -> Loaded:
    import datasets

    resolved = resolve_revision(loc.hub_id, loc.revision)
    rows: list[RawRow] = []
    parts = []
    for config in loc.hub_configs:
        what = f"{loc.hub_id}" + (f" config {config}" if config else "") + f" split {loc.split}"
        try:
            ds = datasets.load_dataset(loc.hub_id, name=config, split=loc.split, revision=resolved or loc.revision)
        except Exception as e:
            raise LoadError(
                f"{name}: cannot load {what} from the Hugging Face Hub: {e}. On a cluster without internet, "
                f"point datasets.{name}.local_path at a copy of the set (jsonl, json or parquet)"
            ) from e
        n = 0
        for batch in ds.with_format("arrow").iter(batch_size=4096):
            for rec in batch.to_pylist():
                rows.append(RawRow(len(rows), f"{what} row {n}", rec))
                n += 1
        parts.append({"config": config, "rows": n})
    info = {"type": "hub", "hub_id": loc.hub_id, "split": loc.split, "configs": parts,
            "revision": loc.revision, "resolved_revision": resolved}
    return Loaded(rows, info)


# ----------------------------------------------------------------------------- content identity


def _json_default(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray)):
        return "sha256:" + hashlib.sha256(v).hexdigest()
    return str(v)


def rows_sha256(rows) -> str:
    """A checksum of the raw rows as read (identifies Hub content even without a resolved revision)."""
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, default=_json_default, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()
