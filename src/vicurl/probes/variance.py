"""Monte-Carlo estimates of the two variance components of Theorem "Variance Decomposition"
(paper, section "Does VI-CuRL Really Reduce Variance?"), with K rollouts per prompt x in a set S:

    sigma2_hat(S) = 1/|S| sum_{x in S} Var_hat_{y|x}( g(x, y) )      (action variance)
    V_hat(S)      = Var_hat_{x in S}( g_bar(x) ),  g_bar(x) = 1/K sum_k g(x, y_k)   (problem variance)

Var_hat is the unbiased sample variance of vectors (trace of the covariance, over n - 1); g(x, y_k)
the gradient of rollout k's term of the training surrogate. Each is taken over ``SUBSETS``: the full
batch, the kept prompts, and each restricted to the informative prompts (unequal rewards; an
equal-reward group has advantage 0 and adds only its KL term). ``from_gradients`` is exact with every
gradient in memory, ``streaming`` exact with O(1) gradient vectors (P + 2 extra backward passes),
``CountSketch`` approximate; see docs/configuration.md ("Variance probes") and docs/algorithms.md.
"""

from __future__ import annotations

import hashlib
import math
from typing import Callable, Sequence

import torch

Vec = list[torch.Tensor]  # a gradient as per-parameter tensors


# ----------------------------------------------------------------------------- vectors


def sq_dist(a: Vec, b: Vec, chunk: int = 1 << 24) -> float:
    """||a - b||^2 in float64, ``chunk`` entries at a time (a 1.5B model's embedding would otherwise take
    three float64 temporaries of 1.9 GB); ``b`` may live on another device (the host), its chunks are
    brought to ``a``'s."""
    total = torch.zeros((), dtype=torch.float64, device=a[0].device if a else "cpu")
    for x, y in zip(a, b):
        x, y = x.reshape(-1), y.reshape(-1)
        for i in range(0, x.numel(), chunk):
            total += ((x[i : i + chunk].double() - y[i : i + chunk].to(x.device, torch.float64)) ** 2).sum()
    return float(total)


def to_host(vec: Vec) -> Vec:
    """``vec`` in host memory when it is on a GPU; as it is otherwise. Pageable, not pinned: torch's caching
    host allocator rounds each pinned block up to a power of two (a 1.5B model's mean took 7.8 GB for its
    6.2), and the probe holds up to four means in the job's host memory; copies back are slower."""
    return [x.detach().to("cpu") if x.is_cuda else x for x in vec]


SUBSETS = ("full", "kept", "full_inf", "kept_inf")


def subset_masks(kept: torch.Tensor, informative: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """``SUBSETS`` as boolean masks over prompts; ``informative`` None: every prompt."""
    kept = torch.as_tensor(kept).bool()
    inf = torch.ones_like(kept) if informative is None else torch.as_tensor(informative).bool()
    full = torch.ones_like(kept)
    return {"full": full, "kept": kept, "full_inf": inf, "kept_inf": kept & inf}


def from_moments(within: torch.Tensor, gram: torch.Tensor, weights: torch.Tensor) -> tuple[float, float]:
    """(sigma2_hat, V_hat) of the prompts counted ``weights`` times each (0/1: a subset).

    sigma2_hat = sum_j w_j within_j / n and, with n = sum_j w_j and G the Gram matrix of the
    prompt means, V_hat = (sum_j w_j G_jj - w'Gw / n) / (n - 1): the sum of squared distances to
    the weighted mean, over n - 1. NaN where a subset is too small (n = 0, resp. n < 2).
    """
    w = torch.as_tensor(weights, dtype=torch.float64)
    n = float(w.sum())
    sigma2 = float((w * within.double()).sum()) / n if n > 0 else math.nan
    if n < 2:
        return sigma2, math.nan
    g = gram.double()
    ss = float((w * torch.diagonal(g)).sum()) - float(w @ g @ w) / n
    return sigma2, max(ss, 0.0) / (n - 1)


def estimates(within: torch.Tensor, gram: torch.Tensor, masks: dict[str, torch.Tensor]) -> dict[str, float]:
    """``sigma2_<subset>`` and ``vprob_<subset>`` for each named mask."""
    out = {}
    for name, mask in masks.items():
        out[f"sigma2_{name}"], out[f"vprob_{name}"] = from_moments(within, gram, mask.double())
    return out


def moments(grads: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``within`` (P,) and the Gram matrix (P, P) of the prompt means, from all per-rollout
    gradients (P, K, d). The means are centred on their average first (V is shift-invariant;
    centring keeps the Gram's differences well conditioned)."""
    p, k, _ = grads.shape
    if k < 2:
        raise ValueError("the action variance needs K >= 2 rollouts per prompt")
    g = grads.double()
    gbar = g.mean(1)  # (P, d)
    # one prompt at a time: a (K, d) temporary instead of two of the whole (P, K, d) tensor
    within = torch.stack([((g[i] - gbar[i]) ** 2).sum() for i in range(p)]) / (k - 1)
    centred = gbar - gbar.mean(0)
    return within, centred @ centred.T


def from_gradients(grads: torch.Tensor, kept: torch.Tensor, informative: torch.Tensor | None = None) -> dict[str, float]:
    """Estimates from all per-rollout gradients, shape (P, K, d), over ``subset_masks``."""
    return estimates(*moments(grads), subset_masks(kept, informative))


def streaming(
    mean_grad: Callable[[Sequence[int]], Vec],
    rollout_grad: Callable[[int], Vec],
    n_prompts: int,
    k: int,
    kept: torch.Tensor,
    informative: torch.Tensor | None = None,
) -> tuple[dict[str, float], torch.Tensor]:
    """The same estimates with O(1) gradient vectors in memory, and ``within`` per prompt.

    ``mean_grad(rows)``: the gradient of the mean surrogate over sequence ``rows`` (row j*K + i is
    rollout i of prompt j), a copy; ``rollout_grad(row)``: one rollout's gradient, read at once (it
    may be the model's own ``.grad``). Prompt means enter V_prob through their squared distances to
    each subset's mean, computed first (one pass per distinct subset) and kept in host memory; each
    rollout through its squared distance to its prompt's mean. On the device: the model's gradient
    and the current prompt's mean, two gradient-sized vectors beside the weights. No Gram matrix:
    that would hold every prompt mean.
    """
    if k < 2:
        raise ValueError("the action variance needs K >= 2 rollouts per prompt")
    rows = lambda prompts: [j * k + i for j in prompts for i in range(k)]  # noqa: E731
    masks = subset_masks(kept, informative)
    means: dict[tuple[int, ...], Vec | None] = {}
    for mask in masks.values():
        members = tuple(j for j in range(n_prompts) if mask[j])
        if members not in means:
            means[members] = to_host(mean_grad(rows(members))) if members else None
    within = torch.zeros(n_prompts, dtype=torch.float64)
    dist = {members: torch.zeros(n_prompts, dtype=torch.float64) for members in means}
    for j in range(n_prompts):
        gbar = mean_grad(rows([j]))
        for members, mu in means.items():
            if j in members:
                dist[members][j] = sq_dist(gbar, mu)
        within[j] = sum(sq_dist(rollout_grad(j * k + i), gbar) for i in range(k)) / (k - 1)
    out = {}
    for name, mask in masks.items():
        members = tuple(j for j in range(n_prompts) if mask[j])
        n = len(members)
        out[f"sigma2_{name}"] = float(within[mask].mean()) if n else math.nan
        out[f"vprob_{name}"] = float(dist[members].sum()) / (n - 1) if n > 1 else math.nan
    return out, within


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
