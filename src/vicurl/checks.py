"""The config's schema check with a short error: the offending key's path and what is wrong.

Snakemake's ``validate`` reports a violation with the whole schema attached (two thousand lines
for a top-level typo). ``check_schema`` runs the same JSON-schema validation first and raises
one line naming the key; Snakemake's ``validate`` then only fills in the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml


class ConfigError(ValueError):
    """The config is wrong (its schema, or a dataset entry: `vicurl.data.sources`); the message names the key."""


def schema_error(config: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """The most relevant violation of ``schema`` in ``config`` as one line, or None."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    err = best_match(Draft202012Validator(schema).iter_errors(dict(config)))
    if err is None:
        return None
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    return f"config key {where}: {err.message}"


def check_schema(config: Mapping[str, Any], schema_path: str | Path) -> None:
    msg = schema_error(config, yaml.safe_load(Path(schema_path).read_text()))
    if msg is not None:
        raise ConfigError(f"{msg} (config/schema.yaml describes every key)")
