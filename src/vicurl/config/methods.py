"""The method catalog: every curriculum and reward source, and what the rest of the code asks of it.

Plain Python (no torch import): the Snakefile's parse, the config checks (`vicurl.config.checks.check`),
the verl engine's refusals and the report read it. An implementation is named by its import path
(``module:attribute``) and imported only when a run needs it (`load`).

Adding a curriculum is one module (a `vicurl.curriculum.base.Curriculum` subclass) and one entry
in ``CURRICULA``; adding a reward source is one function (``(group, **params) -> GroupReward``,
`vicurl.algos.rewards`) and one entry in ``REWARDS``. The config schema lists both catalogs' names and
parameters (config/schema.yaml; a test keeps them equal).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

ENGINES = ("local", "verl")


def _no_stats(params: Mapping[str, Any]) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class CurriculumSpec:
    name: str
    implementation: str  # "module:Class", a Curriculum subclass
    label: str  # the paper's printed name (table rows, figure legends)
    # the columns of the offline per-prompt statistics (rule prompt_stats) it reads, given its parameters
    stats: Callable[[Mapping[str, Any]], tuple[str, ...]] = _no_stats
    proposes: bool = False  # chooses each step's prompts (Curriculum.propose), not the engine's data order
    stateless: bool = False  # its selection depends on the batch only, so a probe can replay it
    engines: tuple[str, ...] = ENGINES


@dataclass(frozen=True)
class RewardSpec:
    name: str
    implementation: str  # "module:function", (group, **params) -> GroupReward
    title: str  # block title of the paper's Pass@1 tables
    label: str  # short name (figure rows)
    baseline: str  # the paper's name of this reward trained without a curriculum
    bounded: bool = True  # rewards lie in [0, 1] (VCRL and AdaRFT map unbounded ones)
    # which answer comparisons it makes, batched up front: "gold" (each answer vs the gold),
    # "answers" (the group's answers pairwise, for equivalence classes), or none
    compares: str | None = None


def _adarft_stats(params: Mapping[str, Any]) -> tuple[str, ...]:
    return ("difficulty",) if params.get("difficulty_from", "offline") == "offline" else ()


def _sent_stats(params: Mapping[str, Any]) -> tuple[str, ...]:
    return ("semantic_entropy",)


_SHARE = "vicurl.curriculum.share"
CURRICULA: dict[str, CurriculumSpec] = {c.name: c for c in (
    CurriculumSpec("none", f"{_SHARE}:NoCurriculum", "No Curriculum", stateless=True),
    CurriculumSpec("vicurl", f"{_SHARE}:VICuRL", "VI-CuRL", stateless=True),
    CurriculumSpec("reverse_confidence", f"{_SHARE}:ReverseConfidence", "Reverse Confidence", stateless=True),
    CurriculumSpec("random", f"{_SHARE}:RandomShare", "Random", stateless=True),
    CurriculumSpec("length_first", f"{_SHARE}:LengthFirst", "Length First", stateless=True),
    CurriculumSpec("static_confidence", f"{_SHARE}:StaticConfidence", "Static Confidence", stateless=True),
    CurriculumSpec("soft_confidence", f"{_SHARE}:SoftConfidence", "Soft Confidence", stateless=True),
    CurriculumSpec("vcrl", "vicurl.curriculum.vcrl:VCRL", "VCRL"),
    CurriculumSpec("adarft", "vicurl.curriculum.adarft:AdaRFT", "AdaRFT", stats=_adarft_stats, proposes=True),
    CurriculumSpec("sent", "vicurl.curriculum.sent:SENT", "SENT", stats=_sent_stats, proposes=True),
)}

REWARDS: dict[str, RewardSpec] = {r.name: r for r in (
    RewardSpec("oracle", "vicurl.algos.rewards:oracle", "Oracle Reward (w. Verifier)", "Oracle", "No Curriculum",
               compares="gold"),
    RewardSpec("majority_vote", "vicurl.algos.rewards:majority_vote", "Verifier-Free: Majority Vote", "MajVote", "TTRL",
               compares="answers"),
    RewardSpec("entropy", "vicurl.algos.rewards:entropy", "Verifier-Free: Entropy", "Entropy", "RENT", bounded=False),
    RewardSpec("semantic", "vicurl.algos.rewards:semantic", "Verifier-Free: Semantic Entropy", "Semantic", "EMPO",
               compares="answers"),
)}


def curriculum(name: str) -> CurriculumSpec:
    if name not in CURRICULA:
        raise ValueError(f"unknown curriculum {name!r}; known: {sorted(CURRICULA)}")
    return CURRICULA[name]


def reward(name: str) -> RewardSpec:
    if name not in REWARDS:
        raise ValueError(f"unknown reward {name!r}; known: {sorted(REWARDS)}")
    return REWARDS[name]


def curriculum_name(cls: type) -> str:
    """The catalog's name of a curriculum class (the entry whose implementation it is)."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    for spec in CURRICULA.values():
        if spec.implementation == path:
            return spec.name
    raise LookupError(f"{path} implements no curriculum of vicurl.config.methods.CURRICULA")


def load(implementation: str) -> Any:
    """The object an implementation path names (imports its module)."""
    module, _, attribute = implementation.partition(":")
    return getattr(importlib.import_module(module), attribute)


def probeable() -> list[str]:
    return [n for n, c in CURRICULA.items() if c.stateless]


def proposing() -> list[str]:
    return [n for n, c in CURRICULA.items() if c.proposes]


def supported_by(engine: str) -> list[str]:
    return [n for n, c in CURRICULA.items() if engine in c.engines]
