import itertools
from math import comb

import numpy as np
import pytest

from vicurl.evaluation.passk import mean_pass_at_k, pass_at_k, pass_at_k_array


def brute(n, c, k):
    items = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(items[i] for i in s) for s in subsets) / len(subsets)


def test_hand_values():
    assert pass_at_k(16, 1, 8) == pytest.approx(0.5)
    assert pass_at_k(16, 2, 8) == pytest.approx(0.766667, abs=1e-6)
    assert pass_at_k(16, 2, 8) == pytest.approx(1 - comb(14, 8) / comb(16, 8))
    assert pass_at_k(16, 5, 1) == pytest.approx(5 / 16)


def test_edges():
    assert pass_at_k(16, 0, 8) == 0.0
    assert pass_at_k(16, 16, 8) == 1.0
    assert pass_at_k(16, 9, 8) == 1.0  # n - c = 7 < k
    assert pass_at_k(16, 0, 16) == 0.0
    assert pass_at_k(16, 1, 16) == 1.0
    assert pass_at_k(1, 0, 1) == 0.0 and pass_at_k(1, 1, 1) == 1.0


def test_k_greater_than_n_names_both():
    with pytest.raises(ValueError, match=r"n=4.*k=8"):
        pass_at_k(4, 1, 8)
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 0)


@pytest.mark.parametrize("n", range(1, 9))
def test_against_brute_force(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute(n, c, k), abs=1e-12), (n, c, k)


def test_vectorized_equals_scalar():
    rng = np.random.default_rng(0)
    n = rng.integers(8, 40, size=200)
    c = np.array([rng.integers(0, x + 1) for x in n])
    for k in (1, 2, 8):
        vec = pass_at_k_array(n, c, k)
        assert vec.shape == (200,)
        assert np.allclose(vec, [pass_at_k(int(a), int(b), k) for a, b in zip(n, c)], atol=1e-12)
    assert mean_pass_at_k(n, c, 1) == pytest.approx(np.mean(c / n))


def test_stable_for_large_n():
    v = pass_at_k(1000, 3, 500)
    assert v == pytest.approx(1 - comb(997, 500) / comb(1000, 500), rel=1e-10)
    assert 0.0 <= pass_at_k_array(np.full(5, 2000), np.arange(5), 100).min() <= 1.0
