"""Reward sources: pure functions over one group of rollouts (shared by both engines).

Every source maps the G response texts of one prompt (plus what it needs) to G rewards.
"""

from __future__ import annotations

from vicurl.grading import extract_boxed, is_equiv


def oracle(texts: list[str], gold: str) -> list[float]:
    """Verifier reward [paper]: 1 if the last boxed answer is equivalent to the gold answer."""
    return [1.0 if is_equiv(extract_boxed(t), gold) else 0.0 for t in texts]


REWARDS = {"oracle": oracle}
