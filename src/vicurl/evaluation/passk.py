"""Unbiased pass@k estimator (Chen et al., 2021, "Evaluating Large Language Models Trained on Code").

For one problem with ``n`` samples of which ``c`` are correct::

    pass@k = 1 - C(n - c, k) / C(n, k)          (= 1.0 when n - c < k)

computed in the numerically stable product form::

    C(n - c, k) / C(n, k) = prod_{i = n - c + 1}^{n} (1 - k / i)

which never forms a large binomial coefficient. Pass@1 reduces to ``c / n``. The benchmark
score is the mean over problems. Examples (n = 16): c = 1 -> pass@8 = 0.5; c = 2 -> 0.766667.
"""

from __future__ import annotations

import numpy as np


def _check(n: np.ndarray, c: np.ndarray, k: int) -> None:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"k must be a positive integer, got k={k!r}")
    if np.any(n < 1):
        raise ValueError(f"n must be >= 1 for every problem, got n={n[n < 1][:5].tolist()}")
    if np.any(c < 0) or np.any(c > n):
        bad = (c < 0) | (c > n)
        raise ValueError(f"need 0 <= c <= n, got c={c[bad][:5].tolist()} for n={n[bad][:5].tolist()}")
    if np.any(k > n):
        raise ValueError(f"pass@k needs k <= n samples per problem, got n={int(n[k > n].min())} and k={int(k)}")


def pass_at_k_array(n, c, k: int) -> np.ndarray:
    """Per-problem unbiased pass@k, vectorized over problems.

    ``n`` and ``c`` are integers or array-likes that broadcast together (samples and correct
    samples per problem). Returns a float array of the broadcast shape. Raises ValueError
    naming ``n`` and ``k`` when ``k > n``.
    """
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n), np.asarray(c))
    if n_arr.size and (not np.issubdtype(n_arr.dtype, np.integer) or not np.issubdtype(c_arr.dtype, np.integer)):
        if not (np.all(np.mod(n_arr, 1) == 0) and np.all(np.mod(c_arr, 1) == 0)):
            raise ValueError("n and c must be integer counts")
    n_arr = n_arr.astype(np.int64)
    c_arr = c_arr.astype(np.int64)
    _check(n_arr, c_arr, k)
    out = np.ones(n_arr.shape, dtype=np.float64)
    if n_arr.size == 0:
        return out
    n_max = int(n_arr.max())
    # factor i in 1..n_max participates for a problem when n - c < i <= n
    i = np.arange(1, n_max + 1, dtype=np.float64)
    active = (i > (n_arr - c_arr)[..., None]) & (i <= n_arr[..., None])
    factors = np.where(active, 1.0 - k / i, 1.0)
    out = 1.0 - np.prod(factors, axis=-1)
    out = np.where(n_arr - c_arr < k, 1.0, out)
    return out.astype(np.float64)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Scalar unbiased pass@k for one problem."""
    return float(pass_at_k_array(np.int64(n), np.int64(c), k))


def mean_pass_at_k(n, c, k: int) -> float:
    """Mean over problems of the per-problem pass@k (the benchmark score, a fraction in [0, 1])."""
    vals = pass_at_k_array(n, c, k)
    if vals.size == 0:
        raise ValueError("mean_pass_at_k needs at least one problem")
    return float(vals.mean())
