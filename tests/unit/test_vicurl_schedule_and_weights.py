"""VI-CuRL's schedule, threshold and weights (paper section 3) on hand-made confidences."""

import math

import numpy as np
import pytest
import torch

from vicurl.algos.confidence import normalized_uncertainty, prompt_confidence
from vicurl.curriculum import Batch, NoCurriculum, linear_beta, make_curriculum, quantile_threshold


def batch(conf, step=1, total=10, rewards=None):
    conf = torch.tensor(conf, dtype=torch.float32)
    b = conf.numel()
    rewards = torch.zeros(b, 2) if rewards is None else torch.tensor(rewards, dtype=torch.float32)
    return Batch(conf, rewards, torch.ones(b, 2), [f"p{i}" for i in range(b)], step, total)


def test_linear_schedule_end_points():
    assert linear_beta(1, 100, 0.2, 1.0) == pytest.approx(0.2)
    assert linear_beta(100, 100, 0.2, 1.0) == pytest.approx(1.0)
    assert linear_beta(50, 100, 0.2, 1.0) == pytest.approx(0.2 + 0.8 * 49 / 99)
    # annealing over the first half only, then flat at beta_end
    assert linear_beta(50, 100, 0.2, 1.0, fraction=0.5) == pytest.approx(1.0)
    assert linear_beta(26, 100, 0.2, 1.0, fraction=0.5) == pytest.approx(0.2 + 0.8 * 25 / 49)


def test_quantile_threshold_hand_made():
    c = torch.tensor([0.9, 0.1, 0.5, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4, 0.0])
    # beta = 0.2, B = 10: k = floor(0.8 * 10) = 8, tau = c_(8) = 0.7 (1-based), keeps {0.7, 0.8, 0.9}
    mask, tau = quantile_threshold(c, 0.2)
    assert tau == pytest.approx(0.7)
    assert mask.tolist() == [1, 0, 0, 1, 0, 1, 0, 0, 0, 0]
    # beta = 1: k = 0, keep everything
    mask, tau = quantile_threshold(c, 1.0)
    assert mask.sum() == 10 and tau == -math.inf
    # beta = 0.55: k = floor(4.5) = 4 -> tau = c_(4) = 0.3, keeps 7 prompts
    mask, tau = quantile_threshold(c, 0.55)
    assert tau == pytest.approx(0.3) and mask.sum() == 7


def test_ties_can_exceed_beta():
    mask, tau = quantile_threshold(torch.tensor([0.5, 0.5, 0.5, 0.5, 0.1]), 0.2)
    assert tau == 0.5 and mask.tolist() == [1, 1, 1, 1, 0]


def test_vicurl_weights_are_mask_over_beta_hat():
    cur = make_curriculum("vicurl", dict(beta_start=0.2, beta_end=1.0))
    b = batch([0.9, 0.1, 0.5, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4, 0.0], step=1, total=10,
              rewards=[[1, 1], [0, 0], [0, 1], [1, 1], [0, 0], [1, 0], [0, 0], [1, 1], [0, 0], [0, 0]])
    sel = cur.select(b)
    # k = floor(0.8 x 10) = 8: c_(8) = 0.7 and above kept, 3 of 10: beta-hat = 0.3, weight 1/0.3
    assert sel.weights.tolist() == pytest.approx([10 / 3, 0, 0, 10 / 3, 0, 10 / 3, 0, 0, 0, 0])
    scheduled = make_curriculum("vicurl", dict(beta_start=0.2, beta_end=1.0, weight_by="scheduled")).select(b)
    assert scheduled.weights.tolist() == pytest.approx([5, 0, 0, 5, 0, 5, 0, 0, 0, 0])  # 1/beta_t
    m = sel.metrics
    assert m["curriculum/beta_target"] == pytest.approx(0.2)
    assert m["curriculum/beta_actual"] == pytest.approx(0.3)
    assert m["curriculum/kept"] == 3
    assert m["curriculum/reward_kept"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert m["curriculum/reward_dropped"] == pytest.approx((0 + 0.5 + 0 + 0 + 1 + 0 + 0) / 7)
    # last step: beta = 1, every prompt kept with weight 1
    sel = cur.select(batch([0.3, 0.2, 0.1], step=10, total=10))
    assert sel.weights.tolist() == [1, 1, 1]


def test_none_keeps_everything():
    sel = NoCurriculum().select(batch([0.1, 0.9]))
    assert sel.weights.tolist() == [1, 1]


def test_unknown_curriculum_named():
    with pytest.raises(ValueError, match="unknown curriculum 'vicrul'"):
        make_curriculum("vicrul")


def test_confidence_from_entropies():
    # 2 prompts x 2 rollouts; |V| = e^2 so that H / log|V| = H / 2
    ent = torch.tensor([[1.0, 1.0, 9.0], [0.5, 0.5, 0.5], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]])
    u = normalized_uncertainty(ent, mask, vocab_size=math.e**2)
    assert u.tolist() == pytest.approx([0.5, 0.25, 1.0, 0.0])  # padding entropies are ignored
    c = prompt_confidence(ent, mask, np.array([7, 7, 3, 3]), vocab_size=math.e**2)
    assert c.tolist() == pytest.approx([1 - 0.375, 1 - 0.5])  # in order of first appearance
