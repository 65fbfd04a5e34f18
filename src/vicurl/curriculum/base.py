"""The one interface every curriculum implements, so both engines call the same code.

A step asks ``propose(step, default_ids)`` which prompts to roll out (AdaRFT and SENT choose their
own from offline statistics, ``setup``), ``select(batch)`` the per-prompt weights after the
rollouts, and ``observe(batch, selection)`` once the step is done (AdaRFT moves its target). A kept
prompt of a beta-share curriculum weighs 1/beta-hat_t (the batch's kept share; ``weight_by:
scheduled``: 1/beta_t), a dropped one 0, so the update estimates the paper's grad L_t: g_hat =
1/|M| sum_j (w_j / beta_t) grad l_j. A selection may ask for ``replay`` prompts (VCRL's memory
bank), rolled out with the current policy and then weighted by ``after_replay``. Weights are
constants in the loss (stop-gradient), as eq. (masked) requires; stateful curricula implement
``state_dict`` / ``load_state_dict`` so a resumed run continues exactly. See docs/configuration.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from vicurl.config import methods


@dataclass
class Batch:
    """What a curriculum may look at: B prompts, G rollouts each, after the rollouts."""

    confidence: torch.Tensor  # (B,) c(x) from pi_old (paper, eq. confidence)
    rewards: torch.Tensor  # (B, G)
    lengths: torch.Tensor  # (B, G) response lengths in tokens
    prompt_ids: list[str]  # (B,)
    step: int  # 1-based training step
    total_steps: int
    seed: int = 0  # the run's seed: random choices are drawn from (seed, step)
    reward_bounded: bool = True  # rewards lie in [0, 1] (False: RENT's negative entropy)

    @property
    def size(self) -> int:
        return int(self.confidence.numel())

    def concat(self, other: "Batch") -> "Batch":
        """This batch followed by ``other`` (e.g. VCRL's replayed prompts); same step and seed."""
        return Batch(
            torch.cat([self.confidence, other.confidence]),
            torch.cat([self.rewards, other.rewards]),
            torch.cat([self.lengths, other.lengths]),
            self.prompt_ids + other.prompt_ids,
            self.step,
            self.total_steps,
            self.seed,
            self.reward_bounded,
        )


@dataclass
class Selection:
    weights: torch.Tensor  # (B,) per-prompt weight in the loss (w_j / beta-hat_t)
    metrics: dict[str, float] = field(default_factory=dict)
    replay: list[str] = field(default_factory=list)  # prompt ids to roll out now and append (VCRL)

    @property
    def mask(self) -> torch.Tensor:
        return (self.weights > 0).float()


def rng_for(seed: int, step: int, stream: int) -> np.random.Generator:
    """A generator seeded from (seed, step, stream): draws survive a resume unchanged."""
    return np.random.default_rng([int(seed), int(step), int(stream)])


def selection_metrics(batch: Batch, mask: torch.Tensor, beta: float, tau: float) -> dict[str, float]:
    """The per-step metrics of the curriculum (names as the authors logged them)."""
    c = batch.confidence.float()
    r = batch.rewards.float().mean(-1)
    kept, dropped = mask > 0, mask == 0

    def mean(x: torch.Tensor) -> float:
        return float(x.mean()) if x.numel() else float("nan")

    if c.numel() > 1 and float(c.std()) > 0 and float(r.std()) > 0:
        corr = float(torch.corrcoef(torch.stack([c, r]))[0, 1])
    else:
        corr = float("nan")
    return {
        "curriculum/beta_target": float(beta),
        "curriculum/beta_actual": float(mask.float().mean()) if mask.numel() else float("nan"),
        "curriculum/tau": float(tau),
        "curriculum/conf_mean": float(c.mean()),
        "curriculum/conf_std": float(c.std()) if c.numel() > 1 else 0.0,
        "curriculum/kept": float(mask.sum()),
        "curriculum/reward_kept": mean(r[kept]),
        "curriculum/reward_dropped": mean(r[dropped]),
        "curriculum/conf_reward_corr": corr,
    }


class Curriculum:
    """Base class: keeps every proposed prompt with weight 1 (plain GRPO)."""

    def __init__(self, **params: Any):
        self.params = params

    @property
    def name(self) -> str:
        """The catalog's name of this class (`vicurl.config.methods.CURRICULA`)."""
        return methods.curriculum_name(type(self))

    @property
    def needs_stats(self) -> tuple[str, ...]:
        """The per-prompt statistics it reads from the offline rule (columns of its table), as the
        catalog says for its parameters."""
        return methods.curriculum(self.name).stats(self.params)

    def setup(self, prompts: pd.DataFrame, *, batch_size: int, total_steps: int, seed: int = 0,
              stats: pd.DataFrame | None = None) -> None:
        """Called once before training: the training set (normalized schema: ``id``, ``metadata``,
        ...), the run's shape and seed and, for curricula that need them, the per-prompt statistics
        of the offline rule (a table with ``id`` and the columns of ``needs_stats``)."""
        self.batch_size, self.total_steps, self.seed = int(batch_size), int(total_steps), int(seed)
        self.ids = [str(i) for i in prompts["id"]]
        if self.needs_stats:
            if stats is None:
                raise ValueError(f"curriculum {self.name!r} needs per-prompt statistics {list(self.needs_stats)} "
                                 f"(the prompt_stats rule's output)")
            missing = [c for c in ("id", *self.needs_stats) if c not in stats.columns]
            if missing:
                raise ValueError(f"curriculum {self.name!r}: prompt statistics lack column(s) {missing}")
            unknown = sorted(set(self.ids) - set(stats["id"].astype(str)))
            if unknown:
                raise ValueError(f"curriculum {self.name!r}: no statistics for {len(unknown)} prompt(s), e.g. {unknown[:3]} "
                                 f"(rule prompt_stats drops a prompt longer than the model's context minus "
                                 f"prompt_stats.max_new_tokens: its log names them)")

    def stat(self, stats: pd.DataFrame, column: str) -> "np.ndarray":
        """``stats[column]`` in training-set order (after ``setup``)."""
        table = stats.assign(id=stats["id"].astype(str)).drop_duplicates("id").set_index("id")[column]
        return table.loc[self.ids].astype(float).to_numpy()

    def propose(self, step: int, default_ids: list[str]) -> list[str]:
        return list(default_ids)

    def select(self, batch: Batch) -> Selection:
        mask = torch.ones(batch.size)
        return Selection(mask, selection_metrics(batch, mask, 1.0, float("-inf")))

    def after_replay(self, selection: Selection, batch: Batch, replayed: Batch) -> Selection:
        raise NotImplementedError(f"curriculum {self.name!r} asked for no replay")

    def observe(self, batch: Batch, selection: Selection) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass
