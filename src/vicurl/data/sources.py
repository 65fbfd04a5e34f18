"""The registry of real datasets and the resolution of a config entry into a load plan.

``SOURCES`` maps a config ``datasets.{name}.source`` kind to where the set lives on the
Hugging Face Hub (id, config(s), split), its normalizer, and the
per-source settings it accepts with their defaults. ``resolve(name, cfg)`` merges a config
entry over the registry: ``hub_id``/``hub_config``/``split``/``revision`` override the
defaults; ``local_path`` (one file or a list, jsonl/json/parquet) replaces the Hub for
clusters without internet. Keys that do not apply to a source fail, naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from vicurl.data import normalize as nz
from vicurl.runtime.errors import ConfigError

SYNTHETIC = "synthetic"
ON_BAD_ROW = ("fail", "drop")
# keys every real source accepts (besides `source` and `label`)
GENERIC_KEYS = {"hub_id", "hub_config", "split", "revision", "local_path", "on_bad_row", "subset"}


@dataclass(frozen=True)
class Source:
    """A known dataset: where it lives on the Hub and how its rows are normalized."""

    normalizer: nz.Normalizer
    hub_id: str
    split: str
    hub_configs: tuple[str | None, ...] = (None,)  # several: loaded in order and concatenated
    options: Mapping[str, Any] = field(default_factory=dict)  # source-specific keys and defaults
    role: str = "eval"  # "train" or "eval" (documentation)


# The paper filters Mathematics out of its WebInstruct *training* prompts ("we filter out
# mathematics prompts"); WebInstruct-Validation it describes as the split of the same data family,
# unfiltered: the evaluation set keeps every category.
_WEBINSTRUCT_OPTS = {"exclude_categories": ["Mathematics"], "unsupported_answer_types": "drop"}
_WEBINSTRUCT_VAL_OPTS = {**_WEBINSTRUCT_OPTS, "exclude_categories": []}

SOURCES: dict[str, Source] = {
    "deepscaler": Source(nz.deepscaler, "agentica-org/DeepScaleR-Preview-Dataset", "train",
                         options={"adarft_difficulty": False}, role="train"),
    "webinstruct_verified": Source(nz.webinstruct, "TIGER-Lab/WebInstruct-verified", "train",
                                   options=_WEBINSTRUCT_OPTS, role="train"),
    "webinstruct_val": Source(nz.webinstruct, "TIGER-Lab/WebInstruct-verified", "test", options=_WEBINSTRUCT_VAL_OPTS),
    "math500": Source(nz.math500, "HuggingFaceH4/MATH-500", "test"),
    "aime24": Source(nz.aime, "HuggingFaceH4/aime_2024", "train"),
    "aime25": Source(nz.aime, "opencompass/AIME2025", "test", hub_configs=("AIME2025-I", "AIME2025-II")),
    "amc23": Source(nz.math_answer, "math-ai/amc23", "test"),
    "minerva_math": Source(nz.minerva_math, "math-ai/minervamath", "test"),
    "olympiadbench": Source(nz.olympiadbench, "Hothan/OlympiadBench", "train", hub_configs=("OE_TO_maths_en_COMP",)),
    "mmlu_pro": Source(nz.mmlu_pro, "TIGER-Lab/MMLU-Pro", "test", options={"exclude_categories": []}),
    "gpqa_diamond": Source(nz.gpqa, "Idavidrein/gpqa", "train", hub_configs=("gpqa_diamond",),
                           options={"shuffle_seed": 0}),
    "theoremqa": Source(nz.theoremqa, "TIGER-Lab/TheoremQA", "test"),
}

# AdaRFT's difficulty annotations of DeepScaleR (optional; `adarft_difficulty: true` or a location)
ADARFT = {"hub_id": "lime-nlp/DeepScaleR_Difficulty", "split": "train"}




@dataclass(frozen=True)
class Location:
    """Where rows are read from: local files (when given) or the Hub."""

    hub_id: str
    split: str
    hub_configs: tuple[str | None, ...] = (None,)
    revision: str | None = None
    local_paths: tuple[str, ...] = ()

    @property
    def is_local(self) -> bool:
        return bool(self.local_paths)


@dataclass(frozen=True)
class DatasetSpec:
    """A config entry resolved against the registry: everything `prepare` needs."""

    name: str
    kind: str
    location: Location
    on_bad_row: str = "fail"
    subset: Mapping[str, int] | None = None  # {"n": rows kept, "seed": ...}
    options: Mapping[str, Any] = field(default_factory=dict)
    annotations: Location | None = None  # AdaRFT difficulty (deepscaler only)

    @property
    def source(self) -> Source:
        return SOURCES[self.kind]


def _paths(value: Any, where: str) -> tuple[str, ...]:
    paths = [value] if isinstance(value, str) else list(value or [])
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise ConfigError(f"{where}: expected a file path or a non-empty list of paths, got {value!r}")
    return tuple(paths)


def _configs(value: Any) -> tuple[str | None, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _location(cfg: Mapping[str, Any], hub_id: str, split: str, configs: tuple, where: str) -> Location:
    return Location(
        hub_id=cfg.get("hub_id", hub_id),
        split=cfg.get("split", split),
        hub_configs=_configs(cfg["hub_config"]) if "hub_config" in cfg else configs,
        revision=cfg.get("revision"),
        local_paths=_paths(cfg["local_path"], f"{where}.local_path") if "local_path" in cfg else (),
    )


def resolve(name: str, cfg: Mapping[str, Any]) -> DatasetSpec:
    """The load plan of ``datasets.{name}``; errors name the offending key."""
    where = f"datasets.{name}"
    kind = cfg.get("source")
    if kind not in SOURCES:
        known = sorted([SYNTHETIC, *SOURCES])
        raise ConfigError(f"{where}.source: unknown dataset source {kind!r}; known: {known}")
    src = SOURCES[kind]
    allowed = {"source", "label"} | GENERIC_KEYS | set(src.options)
    extra = sorted(set(cfg) - allowed)
    if extra:
        raise ConfigError(f"{where}.{extra[0]}: not a setting of source {kind!r} (settings: {sorted(allowed)})")
    on_bad_row = cfg.get("on_bad_row", "fail")
    if on_bad_row not in ON_BAD_ROW:
        raise ConfigError(f"{where}.on_bad_row: {on_bad_row!r} is not one of {list(ON_BAD_ROW)}")
    subset = None
    if "subset" in cfg:
        subset = {"n": int(cfg["subset"]["n"]), "seed": int(cfg["subset"].get("seed", 0))}
    options = {k: cfg.get(k, default) for k, default in src.options.items()}
    if options.get("unsupported_answer_types", "drop") not in ("drop", "keep"):
        raise ConfigError(f"{where}.unsupported_answer_types: expected drop or keep")
    annotations = None
    ada = options.pop("adarft_difficulty", False)
    if ada:
        ada_cfg = ada if isinstance(ada, Mapping) else {}
        annotations = _location(ada_cfg, ADARFT["hub_id"], ADARFT["split"], (None,), f"{where}.adarft_difficulty")
    return DatasetSpec(
        name=name,
        kind=kind,
        location=_location(cfg, src.hub_id, src.split, src.hub_configs, where),
        on_bad_row=on_bad_row,
        subset=subset,
        options=options,
        annotations=annotations,
    )


def prepared(datasets_cfg: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Names of the datasets the `prepare_dataset` rule builds (every non-synthetic one)."""
    return [n for n, d in datasets_cfg.items() if d.get("source") != SYNTHETIC]


def local_inputs(cfg: Mapping[str, Any]) -> list[str]:
    """Local files a dataset entry reads (its own and its annotations'), for the rule's input."""
    return [path for _, path in local_files(cfg)]


def local_files(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key under the dataset's entry, path) of every local file the entry reads."""
    out = [("local_path", p) for p in _paths(cfg["local_path"], "local_path")] if "local_path" in cfg else []
    ada = cfg.get("adarft_difficulty")
    if isinstance(ada, Mapping) and "local_path" in ada:
        out += [("adarft_difficulty.local_path", p) for p in _paths(ada["local_path"], "adarft_difficulty.local_path")]
    return out
