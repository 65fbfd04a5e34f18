"""Every curriculum (VI-CuRL and the paper's baselines) on hand-made batches, and the threshold's counts."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from vicurl.config.methods import CURRICULA
from vicurl.config.runs import Run, needs_prompt_stats
from vicurl.curriculum import (
    Batch,
    kept_count,
    make_curriculum,
    normalized_variance,
    quantile_threshold,
)
from vicurl.curriculum.adarft import next_target
from vicurl.curriculum.vcrl import variance_max


def batch(conf=None, rewards=None, lengths=None, step=1, total=10, ids=None, seed=0, bounded=True):
    n = len(next(x for x in (conf, rewards, lengths) if x is not None))
    conf = torch.tensor(conf if conf is not None else [0.5] * n, dtype=torch.float32)
    rewards = torch.tensor(rewards if rewards is not None else [[0.0, 1.0]] * n, dtype=torch.float32)
    g = rewards.shape[1]
    lengths = torch.tensor(lengths if lengths is not None else [[10.0] * g] * n, dtype=torch.float32)
    ids = ids or [f"p{i}" for i in range(n)]
    return Batch(conf, rewards, lengths, ids, step, total, seed, bounded)


def prompts(n):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "metadata": [json.dumps({"difficulty": i}) for i in range(n)]})


# ----------------------------------------------------------------------------- (d) the threshold


def test_threshold_counts_are_floor_consistent_ties_included():
    rng = np.random.default_rng(0)
    for b in range(1, 13):
        for beta in np.linspace(0.05, 1.0, 20):
            k = math.floor((1 - beta) * b + 1e-9)
            for distinct in (True, False):
                c = torch.tensor(rng.permutation(b) if distinct else rng.integers(0, 3, b), dtype=torch.float32)
                mask, tau = quantile_threshold(c, float(beta))
                if k == 0:
                    assert mask.sum() == b and tau == -math.inf
                    continue
                tau_ref = sorted(c.tolist())[k - 1]  # the k-th smallest, 1-based
                assert tau == tau_ref
                assert mask.tolist() == [float(x >= tau_ref) for x in c.tolist()]  # ties at tau all kept
                if distinct:
                    assert mask.sum() == b - k + 1 == kept_count(b, float(beta))
                else:
                    assert mask.sum() >= b - k + 1


def test_threshold_is_monotone_in_beta():
    c = torch.tensor([0.3, 0.9, 0.1, 0.5, 0.5, 0.7, 0.2])
    prev = torch.zeros(7)
    for beta in np.linspace(0.05, 1.0, 40):
        mask, _ = quantile_threshold(c, float(beta))
        assert bool((mask >= prev).all())  # a larger share keeps a superset
        prev = mask


# ----------------------------------------------------------------------------- (e) the share curricula


def test_reverse_confidence_keeps_the_least_confident():
    c = [0.9, 0.1, 0.5, 0.7, 0.3, 0.8, 0.2, 0.6, 0.4, 0.0]
    sel = make_curriculum("reverse_confidence").select(batch(c))
    # beta = 0.2, B = 10: k = 8, threshold on -c keeps the 3 lowest confidences, weight 1/beta-hat = 10/3
    assert sel.weights.tolist() == pytest.approx([0, 10 / 3, 0, 0, 0, 0, 10 / 3, 0, 0, 10 / 3])
    assert sel.metrics["curriculum/kept"] == 3
    assert sel.metrics["curriculum/tau"] == pytest.approx(0.2)  # in confidence units: keeps c <= 0.2


def test_length_first_keeps_the_shortest():
    lengths = [[10, 20], [4, 4], [30, 30], [5, 7], [50, 10]]
    sel = make_curriculum("length_first", {"beta_start": 0.4}).select(batch(lengths=lengths))
    # means 15, 4, 30, 6, 30; beta 0.4, B 5: k = 3, keeps the 3 shortest (k-th included), weight 5/3
    assert sel.weights.tolist() == pytest.approx([5 / 3, 5 / 3, 0, 5 / 3, 0])
    assert sel.metrics["curriculum/tau"] == pytest.approx(15.0)  # keeps mean length <= 15 tokens


def test_random_keeps_vicurl_count_reproducibly():
    cur = make_curriculum("random")
    b = batch([0.1] * 20, step=3, total=10, seed=7)
    sel = cur.select(b)
    beta = cur.beta(3, 10)
    assert sel.mask.sum() == kept_count(20, beta)
    assert sorted(set(sel.weights.tolist())) == pytest.approx([0.0, 20 / kept_count(20, beta)])
    assert torch.equal(sel.weights, cur.select(b).weights)  # same (seed, step), same draw
    other = cur.select(batch([0.1] * 20, step=4, total=10, seed=7))
    assert not torch.equal(sel.mask, other.mask)
    # uniform: over many steps every prompt is kept about equally often
    counts = sum(cur.select(batch([0.1] * 20, step=s, total=10, seed=1)).mask for s in range(1, 401))
    assert counts.min() > 0.6 * counts.mean() and counts.max() < 1.4 * counts.mean()


def test_static_confidence_never_anneals():
    cur = make_curriculum("static_confidence")
    c = list(np.linspace(0, 1, 10))
    for step in (1, 5, 10):
        sel = cur.select(batch(c, step=step, total=10))
        assert sel.metrics["curriculum/beta_target"] == pytest.approx(0.2)
        assert sel.mask.tolist() == [0] * 7 + [1] * 3


def test_soft_confidence_weights_by_hand():
    """The paper's static Soft Confidence Weighting: w_j = c_j / mean(c), every prompt, every step."""
    cur = make_curriculum("soft_confidence")
    c = [0.2, 0.5, 0.9]
    sel = cur.select(batch(c, step=1, total=10))
    assert sel.weights.tolist() == pytest.approx([0.2 / (1.6 / 3), 0.5 / (1.6 / 3), 0.9 / (1.6 / 3)], rel=1e-6)
    assert float(sel.weights.mean()) == pytest.approx(1.0)  # normalized to mean 1
    assert sel.mask.tolist() == [1, 1, 1] and sel.metrics["curriculum/kept"] == 3  # no hard filter
    for step in (5, 10):  # static: the same weights at every step, including the last
        assert torch.equal(cur.select(batch(c, step=step, total=10)).weights, sel.weights)
    assert cur.select(batch([0.4, 0.4], step=1)).weights.tolist() == pytest.approx([1, 1])  # no spread
    assert cur.select(batch([0.0, 0.0], step=1)).weights.tolist() == pytest.approx([1, 1])  # no confidence at all
    with pytest.raises(ValueError, match="soft_confidence"):
        make_curriculum("soft_confidence", {"beta_start": 0.2})  # no schedule to set


@pytest.mark.parametrize("name", ["vicurl", "reverse_confidence", "length_first", "random", "static_confidence"])
def test_kept_prompts_weigh_one_over_the_empirical_or_the_scheduled_retention(name):
    """Paper: "we estimate beta_t using the empirical batch retention beta-hat_t = (1/B) sum_j w_t(x_j)".
    With ties at the threshold beta-hat exceeds beta_t; both are logged, and the weight used."""
    c = [0.9, 0.5, 0.5, 0.5, 0.1, 0.3, 0.5, 0.7, 0.2, 0.8]  # ties at the threshold
    lengths = [[i % 4 + 1] * 2 for i in range(10)]
    b = batch(c, lengths=lengths, step=4, total=10, seed=3)
    emp = make_curriculum(name).select(b)
    sched_cur = make_curriculum(name, {"weight_by": "scheduled"})
    sched = sched_cur.select(b)
    beta, kept = sched_cur.beta(4, 10), float(emp.mask.sum())
    assert torch.equal(emp.mask, sched.mask)
    assert emp.metrics["curriculum/beta_actual"] == pytest.approx(kept / 10)
    assert emp.metrics["curriculum/beta_target"] == pytest.approx(beta)
    assert emp.weights.tolist() == pytest.approx((emp.mask * 10 / kept).tolist())
    assert float(emp.weights.sum()) == pytest.approx(10.0)  # the weights sum to B
    assert sched.weights.tolist() == pytest.approx((emp.mask / beta).tolist())
    assert emp.metrics["curriculum/weight"] == pytest.approx(10 / kept)
    assert sched.metrics["curriculum/weight"] == pytest.approx(1 / beta)
    with pytest.raises(ValueError, match="weight_by"):
        make_curriculum(name, {"weight_by": "population"})


# ----------------------------------------------------------------------------- (f) VCRL


def test_vcrl_p_is_4phat_1_minus_phat_for_binary_even_groups():
    for g in (2, 4, 6, 8):
        rows = torch.tensor(list(itertools.product([0.0, 1.0], repeat=g)))
        p_hat = rows.mean(-1)
        assert normalized_variance(rows).tolist() == pytest.approx((4 * p_hat * (1 - p_hat)).tolist(), abs=1e-6)


def test_vcrl_p_for_odd_groups_and_continuous_rewards():
    rows = torch.tensor(list(itertools.product([0.0, 1.0], repeat=5)))
    p = normalized_variance(rows)
    assert float(p.max()) == pytest.approx(1.0) and float(p.min()) == 0.0
    assert variance_max(5) == pytest.approx(24 / 100)
    # continuous rewards: min-max within the group first (an affine map leaves p unchanged)
    r = torch.tensor([[-3.0, -1.0, -1.0, -3.0], [-2.0, -2.0, -2.0, -2.0]])
    assert normalized_variance(r, bounded=False).tolist() == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError, match="outside"):
        normalized_variance(r)


def test_vcrl_filter_bank_and_replay():
    cur = make_curriculum("vcrl", dict(switch_step=2, kappa_early=0.3, kappa_late=0.8, max_replays=2))
    # step 1 (kappa 0.3): G = 4, p = 0, 0.75, 1, 0 -> keep p1, p2; bank = {p1, p2}; nothing to replay yet
    r1 = [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]]
    sel = cur.select(batch(rewards=r1, step=1, ids=["p0", "p1", "p2", "p3"]))
    assert sel.mask.tolist() == [0, 1, 1, 0] and sel.replay == []
    assert sel.weights.tolist() == pytest.approx([0, 2, 2, 0])  # mean over the kept prompts
    assert list(cur.bank) == ["p1", "p2"]
    # step 3 (kappa 0.8): only p = 1 kept; 3 slots to refill, the bank holds p1, p2 (equal priority:
    # earlier insertion, then id)
    r3 = [[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]
    b3 = batch(rewards=r3, step=3, ids=["q0", "q1", "q2", "q3"])
    sel = cur.select(b3)
    assert sel.mask.tolist() == [1, 0, 0, 0]
    assert sel.replay == ["p1", "p2"]
    assert cur.bank["p1"]["replays"] == 1 and "q0" in cur.bank
    assert cur.bank["p1"]["priority"] == pytest.approx(0.9 * 0.0 + 0.1 * (3 - 1))  # aged once, 2 steps old
    replayed = batch(rewards=[[0, 0, 0, 0], [1, 0, 1, 0]], step=3, ids=["p1", "p2"])
    final = cur.after_replay(sel, b3, replayed)
    # 6 prompts, 3 of them used (1 kept + 2 replayed whatever their new p): weight 6/3 each
    assert final.weights.tolist() == pytest.approx([2, 0, 0, 0, 2, 2])
    assert final.metrics["curriculum/replayed"] == 2
    # a second replay removes an entry (max_replays = 2)
    sel = cur.select(batch(rewards=[[0, 0, 0, 0]] * 4, step=4, ids=["r0", "r1", "r2", "r3"]))
    assert sel.replay[:2] == ["p1", "p2"] and "p1" not in cur.bank and "p2" not in cur.bank
    state = cur.state_dict()
    again = make_curriculum("vcrl", dict(switch_step=2))
    again.load_state_dict(state)
    assert again.bank == cur.bank


def test_vcrl_priority_prefers_older_entries():
    cur = make_curriculum("vcrl", dict(switch_step=100))
    cur.select(batch(rewards=[[1, 0]], step=1, ids=["old"]))  # enters with P = 0
    cur.select(batch(rewards=[[1, 0]], step=5, ids=["new"]))
    assert cur.bank["old"]["priority"] == pytest.approx(0.1 * 4)  # 0.9 * 0 + 0.1 * (5 - 1)
    assert cur.bank["new"]["priority"] == 0.0
    sel = cur.select(batch(rewards=[[0, 0], [1, 0]], step=6, ids=["x", "y"]))
    assert cur.bank["old"]["priority"] == pytest.approx(0.9 * 0.4 + 0.1 * 5)
    assert cur.bank["new"]["priority"] == pytest.approx(0.1 * 1)
    assert sel.replay == ["old"]  # one slot: the entry that waited longest


# ----------------------------------------------------------------------------- (g) AdaRFT


def test_adarft_target_update_by_hand():
    assert next_target(0.0, 1.0) == pytest.approx(50 * math.tanh(1.0))
    assert next_target(30.0, 0.5) == 30.0
    assert next_target(10.0, 0.0) == 0.0  # clipped below
    assert next_target(90.0, 1.0) == 100.0  # clipped above
    assert next_target(40.0, 0.25) == pytest.approx(40 + 50 * math.tanh(2 * -0.25))


def test_adarft_proposes_nearest_and_moves_its_target():
    cur = make_curriculum("adarft")
    stats = pd.DataFrame({"id": [f"p{i}" for i in range(10)], "difficulty": [0, 90, 10, 80, 20, 70, 30, 60, 40, 50]})
    cur.setup(prompts(10), batch_size=3, total_steps=5, seed=0, stats=stats)
    assert sorted(cur.propose(1, [])) == ["p0", "p2", "p4"]  # T = 0: the 3 easiest
    cur.observe(batch(rewards=[[1, 1]] * 3, step=1), None)
    t = 50 * math.tanh(1.0)  # 38.08
    assert cur.target == pytest.approx(t)
    assert sorted(cur.propose(2, [])) == ["p6", "p8", "p9"]  # 30, 40, 50 nearest 38.1
    # the entropy reward (negative): mean of exp(reward)
    cur.observe(batch(rewards=[[0.0, -math.log(4)]] * 3, step=2, bounded=False), None)
    assert cur.target == pytest.approx(next_target(t, 0.625))
    assert make_curriculum("adarft").load_state_dict(cur.state_dict()) is None


def test_adarft_difficulty_from_metadata_and_bad_values():
    cur = make_curriculum("adarft", dict(difficulty_from="metadata"))
    assert cur.needs_stats == ()
    cur.setup(prompts(5), batch_size=2, total_steps=3)
    assert sorted(cur.propose(1, [])) == ["p0", "p1"]
    with pytest.raises(ValueError, match="p3"):
        make_curriculum("adarft").setup(prompts(5), batch_size=2, total_steps=3,
                       stats=pd.DataFrame({"id": [f"p{i}" for i in range(5)], "difficulty": [1, 2, 3, 300, 4]}))
    with pytest.raises(ValueError, match="needs per-prompt statistics"):
        make_curriculum("adarft").setup(prompts(5), batch_size=2, total_steps=3)


# ----------------------------------------------------------------------------- SENT


def test_sent_two_stages_low_entropy_first():
    cur = make_curriculum("sent")
    h = [0.5, 0.1, 0.9, 0.0, 0.7, 0.3, 0.8, 0.2]  # lower half: p3, p1, p7, p5
    stats = pd.DataFrame({"id": [f"p{i}" for i in range(8)], "semantic_entropy": h})
    cur.setup(prompts(8), batch_size=2, total_steps=6, seed=4, stats=stats)
    low, high = {"p3", "p1", "p7", "p5"}, {"p0", "p4", "p6", "p2"}
    steps = {s: cur.propose(s, []) for s in range(1, 7)}
    assert all(set(steps[s]) <= low for s in (1, 2, 3)) and all(set(steps[s]) <= high for s in (4, 5, 6))
    assert set(steps[1] + steps[2]) == low  # one pass over the stage's pool, then a new permutation
    assert steps == {s: cur.propose(s, []) for s in range(1, 7)}  # deterministic (resumable)


# ----------------------------------------------------------------------------- the registry


def test_every_curriculum_of_the_spec_is_registered_and_config_errors_are_named():
    assert set(CURRICULA) == {"none", "vicurl", "reverse_confidence", "random", "length_first", "static_confidence",
                              "soft_confidence", "vcrl", "adarft", "sent"}
    with pytest.raises(ValueError, match="curricula.vicurl"):
        make_curriculum("vicurl", {"beta_strat": 0.3})
    with pytest.raises(ValueError, match="curricula.vcrl.kappa_late"):
        make_curriculum("vcrl", {"kappa_late": 1.5})


@pytest.mark.parametrize("name, params", [(n, {}) for n in CURRICULA] + [("adarft", {"difficulty_from": "metadata"})])
def test_dag_knows_which_curricula_need_offline_stats(name, params):
    """AdaRFT's offline difficulty and SENT's semantic entropy, as the DAG and the curriculum read them."""
    config = {"curricula": {name: params}}
    expected = {"adarft": ("difficulty",), "sent": ("semantic_entropy",)}.get(name, ()) if not params else ()
    assert make_curriculum(name, params).needs_stats == expected
    assert needs_prompt_stats(config, Run("s", "m", "oracle", name, 0)) == bool(expected)


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_every_curriculum_logs_the_common_metrics(name):
    cur = make_curriculum(name)
    stats = pd.DataFrame({"id": [f"p{i}" for i in range(6)], "difficulty": [10.0] * 6, "semantic_entropy": [0.1] * 6})
    cur.setup(prompts(6), batch_size=3, total_steps=4, stats=stats)
    sel = cur.select(batch([0.1, 0.5, 0.9], rewards=[[0, 1], [1, 1], [0, 0]], step=2, total=4))
    for key in ("beta_target", "beta_actual", "tau", "conf_mean", "conf_std", "kept", "reward_kept",
                "reward_dropped", "conf_reward_corr"):
        assert f"curriculum/{key}" in sel.metrics, (name, key)
    assert sel.weights.shape == (3,) and bool((sel.weights >= 0).all())
