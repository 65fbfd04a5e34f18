"""The names the paper prints for rewards, curricula and settings (tables and figures).

The names themselves are the catalog's (`vicurl.config.methods`: a curriculum's ``label``, a reward's
``title``, ``label`` and ``baseline``); these functions make a table row, a figure legend and a
block title agree. Every name is a default: a table's config can set its own row label or block
title. A name the catalog lacks prints as itself.
"""

from __future__ import annotations

from vicurl.config import methods
from vicurl.config.runs import BASE  # the Base (No RL) setting's name, read where labels are made

BASE_LABEL = "Base (No RL)"


def reward_title(reward: str) -> str:
    """The block title of the paper's Pass@1 tables for a reward source."""
    return methods.REWARDS[reward].title if reward in methods.REWARDS else reward


def reward_label(reward: str) -> str:
    """The short name of a reward setting (figure rows)."""
    return methods.REWARDS[reward].label if reward in methods.REWARDS else reward


def curriculum_label(curriculum: str) -> str:
    return methods.CURRICULA[curriculum].label if curriculum in methods.CURRICULA else curriculum


def row_label(reward: str, curriculum: str) -> str:
    """The paper's row label of a setting: the baseline's name without a curriculum (a reward trained
    without one is that reward's baseline method), else the curriculum's."""
    if reward == BASE:
        return BASE_LABEL
    if curriculum == "none":
        return methods.REWARDS[reward].baseline if reward in methods.REWARDS else curriculum_label("none")
    return curriculum_label(curriculum)
