"""The paper's theory (section "Theoretical Analysis"), checked numerically by enumeration.

A finite population of prompts, each with a tiny softmax policy over A single-token
responses, known rewards and a known confidence. Everything is enumerable: every prompt, every
group y_1..G of G rollouts, every mini-batch. The estimator is computed by the project's own
code (curriculum weights, verl-based advantages and loss, autograd); the objectives L and L_t
by a separate, direct implementation of the paper's surrogate in this file.

Paper, eq. (Jt):   L_t(theta) = E_x E_y [ w_t(x) / beta_t * l(theta; x, y) ],  beta_t = E_x[w_t(x)]
Estimator (masked): g_hat = 1/|M| sum_{j in M} w_j / beta_t * grad l(theta; x_j, y_j)
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from vicurl.algos.grpo import group_advantages, grpo_loss, loss_config
from vicurl.config.settings import TrainSettings
from vicurl.curriculum import quantile_threshold

EPS, KL_COEF = 0.2, 0.001
CFG = loss_config(TrainSettings(total_steps=1, clip_ratio=EPS, kl_coef=KL_COEF))  # the defaults elsewhere


class Population:
    """N prompts with probabilities p(x), A actions, G rollouts per group."""

    def __init__(self, seed: int, n: int = 5, actions: int = 2, group: int = 3):
        g = torch.Generator().manual_seed(seed)
        self.n, self.a, self.g = n, actions, group
        self.p = torch.softmax(torch.randn(n, generator=g, dtype=torch.float64), 0)
        self.theta_old = torch.randn(n, actions, generator=g, dtype=torch.float64)
        self.theta = (self.theta_old + 0.05 * torch.randn(n, actions, generator=g, dtype=torch.float64))
        self.theta_ref = self.theta_old + 0.2 * torch.randn(n, actions, generator=g, dtype=torch.float64)
        self.reward = (torch.rand(n, actions, generator=g) < 0.5).double()
        self.reward[:, 0], self.reward[:, 1] = 1.0, 0.0  # every prompt can produce signal
        self.conf = torch.rand(n, generator=g, dtype=torch.float64)
        self.groups = list(itertools.product(range(actions), repeat=group))

    def group_prob(self, x: int, y) -> float:
        pi = torch.softmax(self.theta_old[x], 0)
        return float(torch.prod(pi[list(y)]))

    def weights(self, beta_share: float) -> tuple[torch.Tensor, float]:
        """The curriculum's mask over the whole population and beta = P(w = 1) (the theorem's)."""
        mask, _ = quantile_threshold(self.conf.float(), beta_share)
        mask = mask.double()
        beta = float((self.p * mask).sum())
        return mask, beta

    # ---- the paper's surrogate, written out directly (independent of the project's loss code)
    def surrogate(self, theta: torch.Tensor, x: int, y) -> torch.Tensor:
        lp, old, ref = (torch.log_softmax(t[x], 0) for t in (theta, self.theta_old, self.theta_ref))
        r = self.reward[x, list(y)]
        adv = (r - r.mean()) / (r.std(unbiased=True) + 1e-6)
        terms = []
        for i, a in enumerate(y):
            rho = torch.exp(lp[a] - old[a])
            clipped = torch.minimum(rho * adv[i], torch.clamp(rho, 1 - EPS, 1 + EPS) * adv[i])
            d = ref[a] - lp[a]
            terms.append(clipped - KL_COEF * (torch.exp(d) - d - 1))
        return torch.stack(terms).mean()

    def objective(self, theta: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """L (weight None) or L_t (weight = w / beta) by enumeration of prompts and groups."""
        total = torch.zeros((), dtype=torch.float64)
        for x in range(self.n):
            wx = 1.0 if weight is None else weight[x]
            if wx == 0:
                continue
            for y in self.groups:
                total = total + self.p[x] * wx * self.group_prob(x, y) * self.surrogate(theta, x, y)
        return total

    # ---- the project's estimator: weights -> advantages -> verl loss -> autograd
    def estimator(self, batch, seq_weight: torch.Tensor) -> torch.Tensor:
        """g_hat for one mini-batch [(x, y), ...]: minus the gradient of the project's loss."""
        theta = self.theta.clone().requires_grad_(True)
        xs = [x for x, y in batch for _ in y]
        acts = [a for _, y in batch for a in y]
        lp = torch.log_softmax(theta, -1)[xs, acts][:, None]
        old = torch.log_softmax(self.theta_old, -1)[xs, acts][:, None]
        ref = torch.log_softmax(self.theta_ref, -1)[xs, acts][:, None]
        scores = self.reward[xs, acts].float()
        mask = torch.ones(len(xs), 1)
        index = np.repeat(np.arange(len(batch)), self.g)
        adv = group_advantages(scores, mask, index).double()
        w = torch.tensor([float(seq_weight[x]) for x in xs], dtype=torch.float64)
        loss, _ = grpo_loss(lp, old, adv, mask, w, CFG, ref_log_prob=ref, global_batch_size=len(xs))
        (grad,) = torch.autograd.grad(loss, theta)
        return -grad

    def batches(self, m: int):
        """Every mini-batch of m prompts drawn iid from p(x), each with its group, and its probability."""
        single = [(x, y, float(self.p[x]) * self.group_prob(x, y)) for x in range(self.n) for y in self.groups]
        for combo in itertools.product(single, repeat=m):
            yield [(x, y) for x, y, _ in combo], math.prod(q for *_, q in combo)


@pytest.mark.parametrize("seed, share, m", [(0, 0.4, 1), (1, 0.6, 2), (2, 1.0, 1)])
def test_estimator_is_unbiased_for_grad_Lt(seed, share, m):
    """(a) E[g_hat] = grad L_t: expectation by enumeration vs the gradient of L_t computed directly."""
    pop = Population(seed)
    mask, beta = pop.weights(share)
    weight = mask / beta
    expected = torch.zeros_like(pop.theta)
    total_prob = 0.0
    for batch, prob in pop.batches(m):
        expected += prob * pop.estimator(batch, weight)
        total_prob += prob
    assert total_prob == pytest.approx(1.0, abs=1e-12)
    theta = pop.theta.clone().requires_grad_(True)
    (grad_lt,) = torch.autograd.grad(pop.objective(theta, weight), theta)
    assert torch.allclose(expected, grad_lt, atol=2e-6), (expected, grad_lt)
    if share < 1.0:  # and it is NOT the gradient of the full objective L (the curriculum's bias)
        theta = pop.theta.clone().requires_grad_(True)
        (grad_l,) = torch.autograd.grad(pop.objective(theta), theta)
        assert not torch.allclose(grad_lt, grad_l, atol=1e-4)


def test_consistency_bound():
    """(b) Theorem "Consistency": |L - L_t| <= 2 L_max (1 - beta_t), over many populations and shares."""
    checked = 0
    for seed in range(6):
        pop = Population(seed, n=6)
        with torch.no_grad():
            per_prompt = [sum(pop.group_prob(x, y) * float(pop.surrogate(pop.theta, x, y)) for y in pop.groups)
                          for x in range(pop.n)]
            l_max = max(abs(float(pop.surrogate(pop.theta, x, y))) for x in range(pop.n) for y in pop.groups)
        lbar = torch.tensor(per_prompt, dtype=torch.float64)
        full = float((pop.p * lbar).sum())
        for share in np.linspace(0.05, 1.0, 20):
            mask, beta = pop.weights(float(share))
            lt = float((pop.p * mask / beta * lbar).sum())
            assert abs(full - lt) <= 2 * l_max * (1 - beta) + 1e-12
            checked += 1
    assert checked == 120


def test_consistency_bound_is_tight():
    """(b) The bound is attained: l = +L_max on kept prompts, -L_max on dropped ones."""
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    conf = torch.tensor([0.9, 0.2, 0.8, 0.1])
    mask, _ = quantile_threshold(conf, 0.5)  # keeps 0.9, 0.8 (and c_(2) = 0.2)
    mask = mask.double()
    beta = float((p * mask).sum())
    l_max = 1.7
    lbar = l_max * (2 * mask - 1)
    full, lt = float((p * lbar).sum()), float((p * mask / beta * lbar).sum())
    assert abs(lt - full) == pytest.approx(2 * l_max * (1 - beta), abs=1e-12)


@pytest.mark.parametrize("seed, share", [(3, 0.3), (4, 0.5), (5, 0.8), (6, 1.0)])
def test_variance_decomposition_is_exact(seed, share):
    """(c) Var(g_hat) = sigma^2/beta + V_prob/beta + (1 - beta)/beta ||grad L_t||^2, by enumeration.

    Its assumptions: one prompt x ~ p(x) with its group y ~ pi_old(.|x), a fixed mask w(x) and
    beta = P(w = 1). g(x, y) is the gradient of the project's loss for that prompt alone.
    """
    pop = Population(seed, n=6)
    mask, beta = pop.weights(share)
    ones = torch.ones(pop.n, dtype=torch.float64)
    grads = {(x, y): pop.estimator([(x, y)], ones) for x in range(pop.n) for y in pop.groups}
    prob = {(x, y): float(pop.p[x]) * pop.group_prob(x, y) for x in range(pop.n) for y in pop.groups}

    # left side: the variance of the curriculum estimator g_hat = w(x)/beta * g(x, y)
    g_hat = {k: float(mask[k[0]]) / beta * grads[k] for k in grads}
    mean = sum(prob[k] * g_hat[k] for k in grads)
    var = sum(prob[k] * float(((g_hat[k] - mean) ** 2).sum()) for k in grads)

    # right side, each term from its own definition on the kept set {x : w(x) = 1}
    kept = [x for x in range(pop.n) if mask[x] > 0]
    p_kept = {x: float(pop.p[x]) / beta for x in kept}  # p(x | w = 1)
    gbar = {x: sum(pop.group_prob(x, y) * grads[(x, y)] for y in pop.groups) for x in kept}
    sigma2 = sum(p_kept[x] * sum(pop.group_prob(x, y) * float(((grads[(x, y)] - gbar[x]) ** 2).sum())
                                 for y in pop.groups) for x in kept)
    mu = sum(p_kept[x] * gbar[x] for x in kept)  # = grad L_t
    v_prob = sum(p_kept[x] * float(((gbar[x] - mu) ** 2).sum()) for x in kept)
    rhs = sigma2 / beta + v_prob / beta + (1 - beta) / beta * float((mu**2).sum())

    assert torch.allclose(mean, mu, atol=1e-12)  # E[g_hat] = grad L_t
    assert var == pytest.approx(rhs, rel=1e-9, abs=1e-15)
    if share == 1.0:
        assert beta == pytest.approx(1.0) and var == pytest.approx(sigma2 + v_prob, rel=1e-9)


# ---- the same statements on what training runs: the batch-quantile mask of the VI-CuRL curriculum
#      and its weight 1/beta-hat_t (the empirical batch retention, the paper's implementation)

def training_weights(pop: Population, xs: list[int], step: int, total: int) -> torch.Tensor:
    """The weights training gives the batch xs: VICuRL.select on the batch's own confidences."""
    from vicurl.curriculum import Batch, make_curriculum

    b = Batch(confidence=pop.conf[xs].float(), rewards=torch.zeros(len(xs), pop.g), lengths=torch.ones(len(xs), pop.g),
              prompt_ids=[str(x) for x in xs], step=step, total_steps=total)
    return make_curriculum("vicurl").select(b).weights.double()


@pytest.mark.parametrize("seed, xs, step", [(0, [0, 2, 4], 1), (1, [1, 3, 4], 3), (2, [0, 1, 2], 10)])
def test_batch_estimator_is_unbiased_for_the_batch_objective(seed, xs, step):
    """(a) on one batch of prompts: with the batch-quantile mask and the 1/beta-hat weights that
    training uses, E_y[g_hat] = grad L-hat_t, where L-hat_t = 1/B sum_j w_j/beta-hat E_y l(x_j, y),
    by enumeration of every group of every prompt of the batch."""
    pop = Population(seed)
    w = training_weights(pop, xs, step, total=10)
    kept = int((w > 0).sum())
    assert float(w.sum()) == pytest.approx(len(xs)) and set(w.tolist()) <= {0.0, len(xs) / kept}
    weight = torch.zeros(pop.n, dtype=torch.float64)
    weight[xs] = w
    expected = torch.zeros_like(pop.theta)
    for ys in itertools.product(pop.groups, repeat=len(xs)):
        prob = math.prod(pop.group_prob(x, y) for x, y in zip(xs, ys))
        expected += prob * pop.estimator(list(zip(xs, ys)), weight)
    theta = pop.theta.clone().requires_grad_(True)
    objective = sum(weight[x] / len(xs) * sum(pop.group_prob(x, y) * pop.surrogate(theta, x, y) for y in pop.groups)
                    for x in xs)
    (grad,) = torch.autograd.grad(objective, theta)
    assert torch.allclose(expected, grad, atol=2e-6), (expected, grad)


def test_batch_consistency_bound_with_the_training_weights():
    """(b) per batch: |L-hat - L-hat_t| <= 2 L_max (1 - beta-hat_t), L-hat the batch's unweighted
    objective, for the weights training uses (they sum to B), over many batches and steps."""
    checked = 0
    for seed in range(4):
        pop = Population(seed, n=8)
        with torch.no_grad():
            lbar = torch.tensor([sum(pop.group_prob(x, y) * float(pop.surrogate(pop.theta, x, y)) for y in pop.groups)
                                 for x in range(pop.n)], dtype=torch.float64)
        rng = np.random.default_rng(seed)
        for step in range(1, 11):
            xs = [int(x) for x in rng.choice(pop.n, size=int(rng.integers(3, 9)), replace=False)]
            w = training_weights(pop, xs, step, total=10)
            beta_hat = float((w > 0).double().mean())
            full, lt = float(lbar[xs].mean()), float((w * lbar[xs]).mean())
            l_max = float(lbar[xs].abs().max())
            assert abs(full - lt) <= 2 * l_max * (1 - beta_hat) + 1e-12
            checked += 1
    assert checked == 40
