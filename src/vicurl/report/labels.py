"""The names the paper prints for rewards, curricula and settings (tables and figures).

Kept in one place so that a table row, a figure legend and a block title agree. Every name is
a default: a table's config can set its own row label or block title.
"""

from __future__ import annotations

from vicurl.runs import BASE  # the Base (No RL) setting's name, read where labels are made

#: block titles of the paper's Pass@1 tables, per reward source
REWARD_TITLES = {
    "oracle": "Oracle Reward (w. Verifier)",
    "majority_vote": "Verifier-Free: Majority Vote",
    "entropy": "Verifier-Free: Entropy",
    "semantic": "Verifier-Free: Semantic Entropy",
}
#: short names of the reward settings (figure rows)
REWARD_NAMES = {"oracle": "Oracle", "majority_vote": "MajVote", "entropy": "Entropy", "semantic": "Semantic"}
CURRICULUM_LABELS = {
    "none": "No Curriculum",
    "vicurl": "VI-CuRL",
    "vcrl": "VCRL",
    "adarft": "AdaRFT",
    "sent": "SENT",
    "reverse_confidence": "Reverse Confidence",
    "random": "Random",
    "length_first": "Length First",
    "static_confidence": "Static Confidence",
    "soft_confidence": "Soft Confidence",
}
#: a reward trained without a curriculum is the baseline method of that reward (paper's names)
BASELINE_NAMES = {"oracle": "No Curriculum", "majority_vote": "TTRL", "entropy": "RENT", "semantic": "EMPO"}
BASE_LABEL = "Base (No RL)"

#: every reward and curriculum name a table may refer to (a run of it need not be configured)
KNOWN_REWARDS = tuple(REWARD_TITLES)
KNOWN_CURRICULA = tuple(CURRICULUM_LABELS)


def row_label(reward: str, curriculum: str) -> str:
    """The paper's row label of a setting: the baseline's name without a curriculum, else the curriculum's."""
    if reward == BASE:
        return BASE_LABEL
    if curriculum == "none":
        return BASELINE_NAMES.get(reward, CURRICULUM_LABELS["none"])
    return CURRICULUM_LABELS.get(curriculum, curriculum)


def curriculum_label(curriculum: str) -> str:
    return CURRICULUM_LABELS.get(curriculum, curriculum)
