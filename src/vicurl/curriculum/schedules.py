"""Retention schedules beta_t (paper, Algorithm 1: linear annealing; the ablations: constant).

Steps count from 1 (the first update). The linear schedule spans T_curr = max(1,
round(fraction * T)) steps: beta_start at step 1, beta_end at step T_curr, flat after.
"""

from __future__ import annotations

SCHEDULES = ("linear", "constant")


def curriculum_steps(total_steps: int, curriculum_steps: int | None = None) -> int:
    """The steps the curriculum's schedule spans (the T of T_curr = fraction T): the run's own,
    or, for a run continuing another (`vicurl.config.runs`), the source run's: beta_t reaches 1 where the
    source run ends and stays there."""
    return int(curriculum_steps or total_steps)


def linear_beta(step: int, total_steps: int, beta_start: float, beta_end: float, fraction: float = 1.0) -> float:
    """beta_t linear from beta_start at step 1 to beta_end at step T_curr, then flat."""
    t_curr = max(1, round(fraction * total_steps))
    if t_curr == 1:
        return beta_end
    progress = min(1.0, max(0.0, (step - 1) / (t_curr - 1)))
    return beta_start + (beta_end - beta_start) * progress


def schedule_beta(kind: str, step: int, total_steps: int, beta_start: float, beta_end: float, fraction: float) -> float:
    if kind == "linear":
        return linear_beta(step, total_steps, beta_start, beta_end, fraction)
    if kind == "constant":
        return beta_start
    raise ValueError(f"curriculum schedule must be one of {SCHEDULES}, got {kind!r}")
