"""Equivalence classes of a group's answers, and the majority among them: what majority vote (TTRL)
votes on and semantic entropy (EMPO) counts, and what the findings table measures on a model's
samples (how often its majority answer is wrong). torch-free."""

from __future__ import annotations

from typing import Any, Sequence

from vicurl.grading.equiv import distinct
from vicurl.grading.graders import ANSWER_TYPES


def clusters(answers: Sequence[str | None], answer_type_name: str, problem: dict[str, Any]) -> list[int | None]:
    """Greedy equivalence classes: each answer joins the first class whose first member it matches.

    Returns a class id per answer (ids numbered in order of first appearance), None for no answer.
    Two answers are compared as (later, earlier representative); identical texts share a class
    without a comparison.
    """
    at = ANSWER_TYPES[answer_type_name]
    uniq = distinct(answers)
    pairs = [(uniq[j], uniq[i]) for j in range(len(uniq)) for i in range(j)]
    verdict = dict(zip(pairs, at.same(pairs, [problem] * len(pairs)))) if pairs else {}
    reps: list[int] = []  # index into uniq of each class's representative
    cls_of: dict[str, int] = {}
    for j, a in enumerate(uniq):
        for c, r in enumerate(reps):
            if verdict[(a, uniq[r])]:
                cls_of[a] = c
                break
        else:
            cls_of[a] = len(reps)
            reps.append(j)
    return [None if a is None or not a.strip() else cls_of[a.strip()] for a in answers]


def majority_class(classes: Sequence[int | None]) -> tuple[int | None, dict[int, int]]:
    """The most frequent class among the answers' classes (None: no answer, no vote) and the
    votes per class; ties go to the class seen first. None when nobody answered."""
    counts: dict[int, int] = {}
    for c in classes:  # dict order = first appearance, so max() breaks ties toward the first seen
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
    return (max(counts, key=lambda c: counts[c]) if counts else None), counts
