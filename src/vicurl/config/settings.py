"""A run's settings as typed values, each default written once (plain Python: no torch, no verl).

``TrainSettings``  one run's training settings (`vicurl.config.runs.train_settings` gives the dict; the
                   config's ``train`` section, a study's overrides, the run's reward, curriculum
                   and seed); the defaults are the paper's hyperparameter table. Both engines, the
                   verl launcher, the probes and the scripts read these attributes.
``VerlSettings``   the config's ``verl`` section (the hardware of a verl run); config/schema.yaml
                   documents each key; the defaults are written here only (a test keeps the schema
                   free of them).
``SamplingSettings``  what the evaluation generators sample with (``eval``, ``prompt_stats``)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

SCHEMA = Path(__file__).resolve().parents[3] / "config" / "schema.yaml"  # every other default and description


def _from_dict(cls, d: Mapping[str, Any], what: str, key: str):
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"unknown {what} {unknown} (config key {key})")
    return cls(**d)


@dataclass
class TrainSettings:
    """Training settings of one run (defaults: the paper's hyperparameter table)."""

    total_steps: int
    curriculum_steps: int | None = None  # the curriculum schedule's span; None = total_steps (schedules.curriculum_steps)
    batch_size: int = 128  # prompts per step
    group_size: int = 8  # G
    lr: float = 3e-6
    weight_decay: float = 0.01  # verl's AdamW default
    adam_betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0  # verl's actor default
    temperature: float = 1.0  # rollout temperature
    top_p: float = 1.0
    max_prompt_length: int = 512
    long_prompts: str = "drop"  # a longer prompt is dropped and counted, or refuses the set (vicurl.data.long_prompts)
    max_response_length: int = 3072
    mini_batch_size: int | None = None  # prompts per optimizer step; None = the whole batch
    micro_batch_size: int = 64  # sequences per forward/backward
    ppo_epochs: int = 1
    clip_ratio: float = 0.2
    kl_coef: float = 0.001
    kl_type: str = "low_var_kl"
    loss_agg_mode: str = "seq-mean-token-mean"
    weight_kl: bool = True
    skip_dropped: bool = True  # no forward/backward for zero-weight sequences (exact; see LocalTrainer._update)
    rollout_batch_size: int = 256  # sequences per generate call
    save_every: int = 10
    keep_checkpoints: int = 1
    export_steps: list[int] = field(default_factory=list)
    seed: int = 0
    # config key `reproducible`: every vLLM rollout request seeded and, on a GPU, vLLM batch-invariant
    # (verl engine; the local engine's sampling is seeded either way)
    reproducible: bool = False
    prompt_order: str = "question_first"
    chat_template: bool | str = "auto"  # models.<name>.chat_template (vicurl.data.prompts)
    reward: str = "oracle"
    reward_params: dict[str, Any] = field(default_factory=dict)
    curriculum: str = "none"
    curriculum_params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrainSettings":
        d = dict(d)
        if "adam_betas" in d:
            d["adam_betas"] = tuple(d["adam_betas"])
        for key in ("reward_params", "curriculum_params"):  # null in a settings file: none
            if key in d and d[key] is None:
                d[key] = {}
        return _from_dict(cls, d, "training setting(s)", "train")

    @classmethod
    def of(cls, settings: "TrainSettings | Mapping[str, Any]") -> "TrainSettings":
        """``settings`` as ``TrainSettings`` (a dict, e.g. a run's ``train_config.json``, is parsed)."""
        return settings if isinstance(settings, cls) else cls.from_dict(settings)


@dataclass(frozen=True)
class VerlSettings:
    """The config's ``verl`` section (config/schema.yaml describes each key)."""

    attn_implementation: str = "vicurl_varlen"  # vicurl.engines.verl.varlen_attention
    n_gpus_per_node: int = 8
    nnodes: int = 1
    rollout_tensor_parallel: int = 1
    gpu_memory_utilization: float = 0.6
    max_token_len_per_gpu: int = 16384  # the update's micro-batch (it holds the activations for the backward)
    forward_token_len_per_gpu: int = 32768  # the old-policy pass's and the reference's (forward only)
    gradient_checkpointing: bool = True  # the update recomputes each layer's forward in its backward
    cpus_per_gpu: int = 8  # the train rule's resources, from here down
    runtime: int = 1440
    runtime_scale: dict[str, float] = field(default_factory=dict)
    mem_mb: int = 480000
    param_offload: bool = False  # the actor's fp32 weights on the CPU between uses (verl's fsdp_config)
    optimizer_offload: bool = False  # AdamW's moments on the CPU between updates
    step_timeout: float = 60  # minutes a step may take before the train job ends the run as stalled
    overrides: list[str] = field(default_factory=list)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-model values of the keys above

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "VerlSettings":
        return _from_dict(cls, dict(d or {}), "verl setting(s)", "verl")

    def for_model(self, model: str) -> "VerlSettings":
        """The settings of a run of ``model``: the section's, with ``models.<model>`` over them."""
        over = dict(self.models.get(model, {}))
        if "models" in over:
            raise ValueError(f"verl.models.{model} cannot hold `models`")
        base = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "models"}
        return _from_dict(VerlSettings, {**base, **over}, f"verl setting(s) of model {model!r}", f"verl.models.{model}")


@dataclass(frozen=True)
class SamplingSettings:
    """What both evaluation generators (transformers, vLLM) sample with: ``n`` samples per problem
    at ``temperature`` / ``top_p``, at most ``max_new_tokens`` each, seeded by ``seed``; the
    prompts rendered with ``prompt_order`` and ``chat_template`` (`vicurl.data.prompts`). ``reproducible``
    (the config key): vLLM seeds every request, batch-invariant on a GPU (`vicurl.evaluation.vllm_generate`);
    the transformers generator is seeded either way."""

    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    prompt_order: str = "question_first"
    chat_template: bool | str = "auto"
    reproducible: bool = False


@functools.lru_cache(maxsize=None)
def _schema() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(SCHEMA.read_text())


def schema_defaults(*path: str) -> dict[str, Any]:
    """The schema's defaults of the keys of one config object, e.g. ``("curricula", "vicurl")``
    (config/schema.yaml is their one home; the workflow's parse fills them into the config)."""
    schema = _schema()
    node: dict[str, Any] = schema
    for key in path:
        node = node["properties"][key]
        if "$ref" in node:
            node = {**schema["definitions"][node["$ref"].split("/")[-1]], **node}
    return {k: v["default"] for k, v in node.get("properties", {}).items() if "default" in v}
