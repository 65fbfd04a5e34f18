"""Prompt-selection curricula (VI-CuRL and the paper's baselines): one interface (``base``), both
engines. The catalog `vicurl.config.methods` names each curriculum, its class and capabilities;
docs/configuration.md ("Curricula") says what each keeps.

``base``          the interface every curriculum implements
``schedules``     retention schedules beta_t (linear annealing, constant)
``threshold``     VI-CuRL's quantile threshold and the kept counts it implies
``share``         curricula that keep a beta_t share and weight it 1/beta_t (VI-CuRL and its ablations)
``vcrl``          VCRL: the prompts whose reward variance is highest
``adarft``        AdaRFT: prompts near a target difficulty that follows the reward
``sent``          SENT: low semantic entropy first, in stages
``prompt_stats``  per-prompt statistics of the initial policy, computed once (AdaRFT's and SENT's)
"""

from __future__ import annotations

from typing import Any

from vicurl.config import methods
from vicurl.curriculum.adarft import AdaRFT
from vicurl.curriculum.base import Batch, Curriculum, Selection, selection_metrics
from vicurl.curriculum.schedules import linear_beta, schedule_beta
from vicurl.curriculum.sent import SENT
from vicurl.curriculum.share import (
    LengthFirst,
    NoCurriculum,
    RandomShare,
    ReverseConfidence,
    SoftConfidence,
    StaticConfidence,
    VICuRL,
)
from vicurl.curriculum.threshold import kept_count, quantile_threshold
from vicurl.curriculum.vcrl import VCRL, normalized_variance


def make_curriculum(name: str, params: dict[str, Any] | None = None) -> Curriculum:
    """The curriculum ``name`` of the catalog (`vicurl.config.methods`), built with its config parameters
    over the schema's defaults (``curricula.<name>``; a key that sets the run rather than the
    curriculum, soft_confidence's ``weight_kl``, stays out)."""
    import inspect

    from vicurl.config.settings import schema_defaults

    cls = methods.load(methods.curriculum(name).implementation)
    try:
        defaults = schema_defaults("curricula", name)
    except KeyError:  # a curriculum the schema does not describe (a test's toy)
        defaults = {}
    accepted = inspect.signature(cls).parameters
    defaults = {k: v for k, v in defaults.items() if k in accepted}
    try:
        return cls(**{**defaults, **(params or {})})
    except TypeError as e:  # an unknown parameter: name it with the config key
        raise ValueError(f"curricula.{name}: {e}") from e


__all__ = [
    "Batch", "Curriculum", "Selection", "make_curriculum", "selection_metrics",
    "linear_beta", "schedule_beta", "quantile_threshold", "kept_count", "normalized_variance",
    "NoCurriculum", "VICuRL", "ReverseConfidence", "RandomShare", "LengthFirst", "StaticConfidence",
    "SoftConfidence", "VCRL", "AdaRFT", "SENT",
]
