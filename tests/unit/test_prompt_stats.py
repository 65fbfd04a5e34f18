"""Offline per-prompt statistics (AdaRFT difficulty, SENT semantic entropy) on hand-made graded samples."""

import math

import pandas as pd
import pytest

from vicurl.curriculum.prompt_stats import cluster_answers, entropy_of_labels, prompt_statistics


def test_clusters_by_equivalence_and_no_answer_is_a_singleton():
    assert cluster_answers(["1/2", "0.5", "3", "\\frac{1}{2}", None, None, "3"]) == [0, 0, 1, 0, 2, 3, 1]
    assert cluster_answers([]) == []


def test_entropy_by_hand():
    assert entropy_of_labels([0, 0, 0, 0]) == 0.0
    assert entropy_of_labels([0, 1, 2, 3]) == pytest.approx(math.log(4))
    assert entropy_of_labels([0, 0, 1, 2]) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))


def test_prompt_statistics_by_hand():
    graded = pd.DataFrame({
        "problem_id": ["a"] * 4 + ["b"] * 4,
        "sample_idx": [0, 1, 2, 3] * 2,
        "extracted": ["5", "5", "5.0", "6", None, "2", None, "2"],
        "correct": [True, True, True, False, False, False, False, False],
    })
    s = prompt_statistics(graded).set_index("id")
    assert s.loc["a", "pass_rate"] == 0.75 and s.loc["a", "difficulty"] == pytest.approx(25.0)
    assert s.loc["a", "n_clusters"] == 2
    assert s.loc["a", "semantic_entropy"] == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert s.loc["b", "difficulty"] == 100.0 and s.loc["b", "n_clusters"] == 3 and s.loc["b", "no_answer_rate"] == 0.5
    assert (s["k"] == 4).all()
