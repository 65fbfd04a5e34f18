"""VCRL (variance-based curriculum RL), the paper's oracle-reward baseline: keeps the prompts whose
group rewards vary most, relative to the largest population variance G rewards in [0, 1] can have,

    p = Var(R_1..G) / Var_max(G),   Var_max = 1/4 (G even), (G^2 - 1) / (4 G^2) (G odd)

(4 p_hat (1 - p_hat) for binary rewards and even G), kept when p >= kappa_t (0.3 for the first 20
steps, then 0.8). Dropped slots are refilled from a memory bank of kept prompts, re-rolled with the
current policy [orig where known, details ours]: a kept prompt enters with priority 0, each step
P <- m P + (1 - m) * (steps since insertion), m = 0.9, the highest replayed first (ties: earlier
insertion, then id), at most twice; prompts of the current batch or inserted this step are never
replayed in the same step, and a replayed prompt is kept whatever its new p. The update averages
over kept and replayed prompts (weight (B + r) / (K + r) each, K kept of B, r replayed): VCRL drops
the other prompts, which the engines' fixed normalizer reproduces this way. Continuous rewards
(RENT's) [ours]: min-max mapped to [0, 1] within the group first (equal rewards: p = 0).
"""

from __future__ import annotations

from typing import Any

import torch

from vicurl.curriculum.base import Batch, Curriculum, Selection, selection_metrics


def variance_max(group_size: int) -> float:
    """Largest population variance of ``group_size`` values in [0, 1] (half at 0, half at 1)."""
    g = int(group_size)
    if g < 2:
        raise ValueError(f"group size must be >= 2, got {g}")
    return 0.25 if g % 2 == 0 else (g * g - 1) / (4.0 * g * g)


def normalized_variance(rewards: torch.Tensor, bounded: bool = True) -> torch.Tensor:
    """p per group (rows of ``rewards``, shape (B, G)): Var(R) / Var_max(G) in [0, 1]."""
    r = rewards.double()
    if not bounded:
        lo, hi = r.min(-1, keepdim=True).values, r.max(-1, keepdim=True).values
        span = hi - lo
        r = torch.where(span > 0, (r - lo) / span.clamp(min=1e-300), torch.zeros_like(r))
    elif bool(((r < 0) | (r > 1)).any()):
        raise ValueError("vcrl: rewards outside [0, 1]; set reward_bounded=False for continuous rewards")
    var = r.var(-1, unbiased=False)
    return (var / variance_max(r.shape[-1])).float()


class VCRL(Curriculum):
    def __init__(self, kappa_early: float, kappa_late: float, switch_step: int, momentum: float, max_replays: int):
        super().__init__(kappa_early=kappa_early, kappa_late=kappa_late, switch_step=switch_step,
                         momentum=momentum, max_replays=max_replays)
        for key, v in (("kappa_early", kappa_early), ("kappa_late", kappa_late), ("momentum", momentum)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"curricula.vcrl.{key} must lie in [0, 1], got {v}")
        if max_replays < 1:
            raise ValueError(f"curricula.vcrl.max_replays must be >= 1, got {max_replays}")
        self.kappa_early, self.kappa_late, self.switch_step = kappa_early, kappa_late, int(switch_step)
        self.momentum, self.max_replays = momentum, int(max_replays)
        # id -> {"priority": float, "inserted": step, "replays": int}; insertion-ordered
        self.bank: dict[str, dict[str, Any]] = {}

    def kappa(self, step: int) -> float:
        return self.kappa_early if step <= self.switch_step else self.kappa_late

    def _age_bank(self, step: int) -> None:
        m = self.momentum
        for e in self.bank.values():
            e["priority"] = m * e["priority"] + (1.0 - m) * (step - e["inserted"])

    def select(self, batch: Batch) -> Selection:
        kappa = self.kappa(batch.step)
        p = normalized_variance(batch.rewards, batch.reward_bounded)
        mask = (p >= kappa - 1e-9).float()
        self._age_bank(batch.step)
        for pid, keep in zip(batch.prompt_ids, mask.tolist()):
            if keep and pid not in self.bank:
                self.bank[pid] = {"priority": 0.0, "inserted": batch.step, "replays": 0}
        need = batch.size - int(mask.sum())
        in_batch = set(batch.prompt_ids)
        candidates = [
            (-e["priority"], e["inserted"], pid)
            for pid, e in self.bank.items()
            if pid not in in_batch and e["inserted"] < batch.step
        ]
        replay = [pid for _, _, pid in sorted(candidates)[:need]]
        for pid in replay:
            self.bank[pid]["replays"] += 1
            if self.bank[pid]["replays"] >= self.max_replays:
                del self.bank[pid]
        kept = int(mask.sum())
        weights = mask * (batch.size / kept) if kept else torch.zeros(batch.size)
        metrics = self._metrics(batch, mask, kappa, p, replayed=0)
        return Selection(weights, metrics, replay=replay)

    def after_replay(self, selection: Selection, batch: Batch, replayed: Batch) -> Selection:
        """Final weights over ``batch`` followed by the ``replayed`` prompts."""
        mask = torch.cat([selection.mask, torch.ones(replayed.size)])
        full = batch.concat(replayed)
        weights = mask * (full.size / float(mask.sum()))
        p = normalized_variance(full.rewards, full.reward_bounded)
        return Selection(weights, self._metrics(full, mask, self.kappa(batch.step), p, replayed=replayed.size))

    def _metrics(self, batch: Batch, mask: torch.Tensor, kappa: float, p: torch.Tensor, replayed: int) -> dict[str, float]:
        m = selection_metrics(batch, mask, float("nan"), kappa)
        m.update({"curriculum/kappa": kappa, "curriculum/p_mean": float(p.mean()),
                  "curriculum/bank_size": float(len(self.bank)), "curriculum/replayed": float(replayed)})
        return m

    def state_dict(self) -> dict[str, Any]:
        return {"bank": {k: dict(v) for k, v in self.bank.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.bank = {k: dict(v) for k, v in state.get("bank", {}).items()}
