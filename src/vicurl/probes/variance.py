"""Monte-Carlo estimates of the two variance components of Theorem "Variance Decomposition".

Paper, section "Does VI-CuRL Really Reduce Variance?": with K rollouts per prompt and a set of
prompts S (the curriculum-kept subset, or the full batch),

    sigma2_hat(S) = 1/|S| sum_{x in S} Var_hat_{y|x}( g(x, y) )      (action variance)
    V_hat(S)      = Var_hat_{x in S}( g_bar(x) ),  g_bar(x) = 1/K sum_k g(x, y_k)   (problem variance)

Var_hat is the unbiased sample variance of vectors (trace of the covariance: mean squared
distance to the sample mean, divided by n - 1). g(x, y_k) is the gradient of rollout k's term of
the training surrogate (its advantage normalized within the K rollouts of x).

Three ways to compute the same numbers:

* ``from_gradients``: every per-rollout gradient in memory, (P, K, d). Exact; for small models.
* ``streaming``: exact too, with a constant number of gradient-sized vectors in memory
  (two passes: the means first, then each gradient's squared distance to its mean), at the cost
  of P + 2 extra backward passes. For large models; the vectors may be lists of per-parameter
  tensors, never flattened.
* ``CountSketch``: each gradient compressed to R numbers by a seeded count sketch
  (coordinate j goes to bucket h(j) with sign s(j)); squared norms, hence the estimates'
  numerators, are unbiased (E ||S v||^2 = ||v||^2). Cheapest in memory and time; approximate.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Sequence

import torch

Vec = list[torch.Tensor]  # a gradient as per-parameter tensors


# ----------------------------------------------------------------------------- vectors


def sq_dist(a: Vec, b: Vec) -> float:
    return float(sum(((x.double() - y.double()) ** 2).sum() for x, y in zip(a, b)))


def _components(within: torch.Tensor, gbar_dist: Callable[[torch.Tensor], float], kept: torch.Tensor) -> dict[str, float]:
    out = {}
    for name, sel in (("full", torch.ones_like(kept, dtype=torch.bool)), ("kept", kept.bool())):
        n = int(sel.sum())
        out[f"sigma2_{name}"] = float(within[sel].mean()) if n else float("nan")
        out[f"vprob_{name}"] = gbar_dist(sel) / (n - 1) if n > 1 else float("nan")
    return out


def from_gradients(grads: torch.Tensor, kept: torch.Tensor) -> dict[str, float]:
    """Estimates from all per-rollout gradients, shape (P, K, d); ``kept``: (P,) mask."""
    p, k, _ = grads.shape
    if k < 2:
        raise ValueError("the action variance needs K >= 2 rollouts per prompt")
    g = grads.double()
    gbar = g.mean(1)  # (P, d)
    # one prompt at a time: a (K, d) temporary instead of two of the whole (P, K, d) tensor
    within = torch.stack([((g[i] - gbar[i]) ** 2).sum() for i in range(p)]) / (k - 1)

    def gbar_dist(sel: torch.Tensor) -> float:
        sub = gbar[sel]
        return float(((sub - sub.mean(0)) ** 2).sum())

    return _components(within, gbar_dist, kept)


def streaming(
    mean_grad: Callable[[Sequence[int]], Vec],
    rollout_grad: Callable[[int], Vec],
    n_prompts: int,
    k: int,
    kept: torch.Tensor,
) -> dict[str, float]:
    """The same estimates with O(1) gradient vectors in memory.

    ``mean_grad(rows)``: the gradient of the mean surrogate over sequence ``rows`` (row j*K + i is
    rollout i of prompt j); ``rollout_grad(row)``: one rollout's gradient. Prompt means enter
    V_prob through their squared distances to the subset's mean, computed first; each rollout
    through its squared distance to its prompt's mean.
    """
    if k < 2:
        raise ValueError("the action variance needs K >= 2 rollouts per prompt")
    rows = lambda prompts: [j * k + i for j in prompts for i in range(k)]  # noqa: E731
    kept_prompts = [j for j in range(n_prompts) if kept[j]]
    mu_full = mean_grad(rows(range(n_prompts)))
    mu_kept = mean_grad(rows(kept_prompts)) if kept_prompts else None
    within = torch.zeros(n_prompts, dtype=torch.float64)
    d_full = torch.zeros(n_prompts, dtype=torch.float64)
    d_kept = torch.zeros(n_prompts, dtype=torch.float64)
    for j in range(n_prompts):
        gbar = mean_grad(rows([j]))
        d_full[j] = sq_dist(gbar, mu_full)
        if kept[j]:
            d_kept[j] = sq_dist(gbar, mu_kept)
        within[j] = sum(sq_dist(rollout_grad(j * k + i), gbar) for i in range(k)) / (k - 1)
    out = {}
    for name, sel, dist in (("full", torch.ones(n_prompts, dtype=torch.bool), d_full), ("kept", kept.bool(), d_kept)):
        n = int(sel.sum())
        out[f"sigma2_{name}"] = float(within[sel].mean()) if n else float("nan")
        out[f"vprob_{name}"] = float(dist[sel].sum()) / (n - 1) if n > 1 else float("nan")
    return out


class CountSketch:
    """A seeded linear map R^d -> R^R with E ||S v||^2 = ||v||^2 (Charikar et al. 2002).

    Each parameter tensor gets its own bucket and sign arrays, drawn from a seed derived from
    (seed, parameter name), so the same sketch is rebuilt anywhere without storing it.
    """

    def __init__(self, named_shapes: Sequence[tuple[str, torch.Size]], dim: int, seed: int = 0):
        if dim < 1:
            raise ValueError(f"sketch dimension must be >= 1, got {dim}")
        self.dim = int(dim)
        self.buckets, self.signs = [], []
        for name, shape in named_shapes:
            h = int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "little") & (2**63 - 1)
            g = torch.Generator().manual_seed(h)
            n = int(torch.Size(shape).numel())
            self.buckets.append(torch.randint(0, self.dim, (n,), generator=g))
            self.signs.append(torch.randint(0, 2, (n,), generator=g).double() * 2 - 1)

    def __call__(self, vec: Vec) -> torch.Tensor:
        out = torch.zeros(self.dim, dtype=torch.float64)
        for x, b, s in zip(vec, self.buckets, self.signs):
            out.index_add_(0, b, x.detach().reshape(-1).double() * s)
        return out
