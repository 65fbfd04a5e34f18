"""GRPO (the paper's objective) against a hand computation on a tiny batch."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from vicurl.algos.grpo import group_advantages, grpo_loss, loss_config
from vicurl.config.settings import TrainSettings

PAPER = loss_config(TrainSettings(total_steps=1))  # the paper's loss settings


def test_group_advantages_by_hand():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0], [1, 1, 0]])
    index = np.array([0, 0, 0, 0, 1, 1])
    adv = group_advantages(scores, mask, index)
    std = math.sqrt(sum((x - 0.5) ** 2 for x in [1, 0, 0, 1]) / 3)  # Bessel-corrected, as verl
    a = 0.5 / (std + 1e-6)
    expect = [a, -a, -a, a]
    for i, e in enumerate(expect):
        assert adv[i, 0].item() == pytest.approx(e, rel=1e-6)
        # the same advantage on every response token, zero on padding
        assert torch.all(adv[i][mask[i].bool()] == adv[i, 0])
        assert torch.all(adv[i][~mask[i].bool()] == 0)
    assert torch.all(adv[4:] == 0)  # equal rewards in a group -> A = 0


def hand_loss(lp, old, ref, adv, mask, w, eps=0.2, kl_coef=0.001, weight_kl=True):
    """l = 1/N sum_i 1/T_i sum_t w_i [ -min(rho A, clip(rho) A) (dual-clip 3 for A<0) + kl_coef * k3 ]."""
    total = 0.0
    n = len(lp)
    for i in range(n):
        T = int(sum(mask[i]))
        s_pg, s_kl = 0.0, 0.0
        for t in range(T):
            rho = math.exp(lp[i][t] - old[i][t])
            a = adv[i][t]
            pg = max(-rho * a, -min(max(rho, 1 - eps), 1 + eps) * a)
            if a < 0:
                pg = min(pg, -3.0 * a)
            x = ref[i][t] - lp[i][t]
            s_pg += pg
            s_kl += math.exp(x) - x - 1
        total += w[i] * s_pg / T + kl_coef * (w[i] if weight_kl else 1.0) * s_kl / T
    return total / n


@pytest.mark.parametrize("weight_kl", [True, False])
def test_grpo_loss_by_hand(weight_kl):
    g = torch.Generator().manual_seed(0)
    n, r = 4, 5
    old = -torch.rand(n, r, generator=g) * 2
    lp = old + (torch.rand(n, r, generator=g) - 0.5) * 0.8  # ratios both inside and outside the clip range
    ref = old + (torch.rand(n, r, generator=g) - 0.5)
    adv = torch.tensor([1.5, -0.7, 0.3, -2.0])[:, None].expand(n, r).clone()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    w = torch.tensor([5.0, 0.0, 5.0, 1.0])
    cfg = replace(PAPER, weight_kl=weight_kl)
    assert cfg.kl_coef == 0.001
    loss, _ = grpo_loss(lp, old, adv * mask, mask, w, cfg, ref_log_prob=ref)
    expect = hand_loss(lp.tolist(), old.tolist(), ref.tolist(), adv.tolist(), mask.tolist(), w.tolist(), weight_kl=weight_kl)
    assert loss.item() == pytest.approx(expect, rel=1e-5)


def test_micro_batches_add_up_to_the_mini_batch():
    g = torch.Generator().manual_seed(1)
    old = -torch.rand(6, 4, generator=g)
    base = old + 0.1 * torch.randn(6, 4, generator=g)
    ref = old.clone()
    adv = torch.randn(6, 1, generator=g).expand(6, 4).clone()
    mask = torch.ones(6, 4)
    mask[2, 2:] = 0
    w = torch.tensor([1.0, 2.0, 0.0, 1.0, 0.5, 3.0])
    cfg = PAPER
    lp = base.clone().requires_grad_(True)
    grpo_loss(lp, old, adv, mask, w, cfg, ref_log_prob=ref)[0].backward()
    full = lp.grad.clone()
    lp.grad = None
    for rows in (slice(0, 4), slice(4, 6)):
        grpo_loss(lp[rows], old[rows], adv[rows], mask[rows], w[rows], cfg, ref_log_prob=ref[rows], global_batch_size=6)[0].backward()
    assert torch.allclose(lp.grad, full, atol=1e-7)
