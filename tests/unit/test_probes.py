"""Variance probes: the estimators by hand, the low-memory ones against the exact one, and a probe
of a real (tiny) model."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import torch

from vicurl.algos.rewards import GroupReward
from vicurl.config import methods
from vicurl.config.settings import TrainSettings
from vicurl.curriculum.schedules import linear_beta
from vicurl.probes import variance
from vicurl.probes.probe import ProbeConfig, probe_prompt_ids, run_probe


def test_estimates_by_hand():
    # P = 3 prompts, K = 2 rollouts, d = 2
    g = torch.tensor([[[1.0, 0.0], [3.0, 0.0]],     # gbar (2, 0), within: (1 + 1) / 1 = 2
                      [[0.0, 2.0], [0.0, 2.0]],     # gbar (0, 2), within 0
                      [[4.0, 4.0], [2.0, 2.0]]])    # gbar (3, 3), within (2 + 2) / 1 = 4
    kept = torch.tensor([1, 0, 1])
    est = variance.from_gradients(g, kept)
    assert est["sigma2_full"] == pytest.approx((2 + 0 + 4) / 3)
    assert est["sigma2_kept"] == pytest.approx((2 + 4) / 2)
    mu = torch.tensor([5 / 3, 5 / 3])
    gbar = torch.tensor([[2.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    assert est["vprob_full"] == pytest.approx(float(((gbar - mu) ** 2).sum()) / 2)
    assert est["vprob_kept"] == pytest.approx(float(((gbar[[0, 2]] - gbar[[0, 2]].mean(0)) ** 2).sum()) / 1)
    one = variance.from_gradients(g, torch.tensor([0, 0, 1]))
    assert math.isnan(one["vprob_kept"]) and one["sigma2_kept"] == pytest.approx(4.0)
    # informative prompts: the same estimates over the subsets restricted to them
    inf = variance.from_gradients(g, kept, informative=torch.tensor([1, 1, 0]))
    assert inf["sigma2_full_inf"] == pytest.approx((2 + 0) / 2) and inf["sigma2_kept_inf"] == pytest.approx(2.0)
    assert inf["vprob_full_inf"] == pytest.approx(float(((gbar[:2] - gbar[:2].mean(0)) ** 2).sum()) / 1)
    assert math.isnan(inf["vprob_kept_inf"]) and inf["sigma2_full"] == est["sigma2_full"]


def test_weighted_moments_equal_the_estimates_of_repeated_prompts():
    """A bootstrap draw counts prompts: weights (2, 0, 1, 3) give the estimates of the batch that
    holds prompt 0 twice, prompt 2 once and prompt 3 three times."""
    gen = torch.Generator().manual_seed(3)
    g = torch.randn(4, 3, 5, generator=gen, dtype=torch.float64)
    within, gram = variance.moments(g)
    s, v = variance.from_moments(within, gram, torch.tensor([2.0, 0.0, 1.0, 3.0]))
    rep = variance.from_gradients(g[[0, 0, 2, 3, 3, 3]], torch.ones(6))
    assert s == pytest.approx(rep["sigma2_full"], rel=1e-12) and v == pytest.approx(rep["vprob_full"], rel=1e-12)
    assert math.isnan(variance.from_moments(within, gram, torch.tensor([0.0, 1.0, 0.0, 0.0]))[1])


def test_streaming_equals_exact():
    gen = torch.Generator().manual_seed(0)
    p, k = 7, 4
    grads = [torch.randn(p * k, 5, generator=gen, dtype=torch.float64), torch.randn(p * k, 3, 2, generator=gen, dtype=torch.float64)]
    kept = torch.tensor([1, 0, 1, 1, 0, 0, 1])
    informative = torch.tensor([1, 1, 0, 1, 0, 1, 1])
    calls = []

    def mean_grad(rows):
        calls.append(len(rows))
        rows = list(rows)
        return [t[rows].mean(0) for t in grads]

    est, within = variance.streaming(mean_grad, lambda r: mean_grad([r]), p, k, kept, informative)
    flat = torch.cat([t.reshape(p * k, -1) for t in grads], dim=1).view(p, k, -1)
    exact = variance.from_gradients(flat, kept, informative)
    assert set(exact) == {f"{e}_{s}" for e in ("sigma2", "vprob") for s in variance.SUBSETS}
    for key, v in exact.items():
        assert est[key] == pytest.approx(v, rel=1e-12)
    assert torch.allclose(within, variance.moments(flat)[0], rtol=1e-12)
    # four subset means, P prompt means, P*K rollouts
    assert max(calls) == p * k and calls.count(1) == p * k and len(calls) == 4 + p + p * k


def test_count_sketch_preserves_squared_norms_in_expectation():
    shapes = [("a", torch.Size([40])), ("b", torch.Size([6, 10]))]
    gen = torch.Generator().manual_seed(1)
    v = [torch.randn(40, generator=gen), torch.randn(6, 10, generator=gen)]
    true = sum(float((x.double() ** 2).sum()) for x in v)
    sketches = [variance.CountSketch(shapes, dim=16, seed=s) for s in range(400)]
    norms = torch.tensor([float((sk(v) ** 2).sum()) for sk in sketches])
    assert float(norms.mean()) == pytest.approx(true, rel=0.05)  # unbiased; sd of the mean ~ 2%
    again = variance.CountSketch(shapes, dim=16, seed=3)
    assert torch.equal(again(v), sketches[3](v))  # rebuilt from its seed


def problems(n=24):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "question": [f"Compute {i} + 1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)]})


def train_cfg(**kw):
    base = dict(total_steps=10, batch_size=4, group_size=4, lr=1e-3, max_response_length=12, micro_batch_size=8,
                curriculum="vicurl", curriculum_params={"beta_start": 0.2}, seed=0)
    base.update(kw)
    return TrainSettings(**base)


def parity_reward(group):
    return GroupReward([float(len(t) % 2) for t in group.texts])


def test_probe_of_a_real_model_low_memory_methods_agree_with_exact(char_model_dir, monkeypatch):
    # a reward with spread (the random model never answers right): length parity
    monkeypatch.setitem(methods.REWARDS, "oracle",
                        dataclasses.replace(methods.REWARDS["oracle"], implementation=f"{__name__}:parity_reward"))
    df = problems()
    out = {}
    for method in ("exact", "streaming", "sketch"):
        probe = ProbeConfig(n_prompts=6, rollouts=3, method=method, sketch_dim=3000, seed=2)
        out[method] = run_probe(train_cfg(), char_model_dir, char_model_dir, df, step=3, probe=probe)
    ex, st, sk = out["exact"], out["streaming"], out["sketch"]
    assert ex["beta_t"] == pytest.approx(linear_beta(4, 10, 0.2, 1.0))  # the selection training step 4 makes
    assert ex["n_prompts"] == 6 and 1 <= ex["n_kept"] < 6
    assert ex["sigma2_full"] > 0 and ex["vprob_full"] > 0
    pp = ex["per_prompt"]
    assert len(pp["id"]) == 6 and sum(pp["kept"]) == ex["n_kept"] and sum(pp["informative"]) == ex["n_informative"]
    assert st["per_prompt"]["gram"] is None and len(ex["per_prompt"]["gram"]) == 6
    assert sum(pp["within"]) / 6 == pytest.approx(ex["sigma2_full"])  # the record's per-prompt quantities
    for key in ("sigma2_full", "sigma2_kept", "vprob_full", "vprob_kept", "sigma2_full_inf", "vprob_full_inf"):
        if not math.isnan(ex[key]):
            assert st[key] == pytest.approx(ex[key], rel=1e-6), key
            assert sk[key] == pytest.approx(ex[key], rel=0.25), key  # approximate: d = 12,000 into R = 3,000
    # the same prompts and rollouts every time (seeded): identical runs give identical numbers
    again = run_probe(train_cfg(), char_model_dir, char_model_dir, df, step=3,
                      probe=ProbeConfig(n_prompts=6, rollouts=3, method="exact", seed=2))
    assert again["sigma2_full"] == ex["sigma2_full"]


def test_probe_batch_is_fixed_and_errors_are_named(char_model_dir):
    df = problems()
    assert probe_prompt_ids(df, 5, 0, 1) == probe_prompt_ids(df, 5, 0, 1)  # a run's batch, the same at every step
    assert probe_prompt_ids(df, 5, 0, 1) != probe_prompt_ids(df, 5, 0, 2)  # drawn per run seed
    with pytest.raises(ValueError, match="n_prompts"):
        probe_prompt_ids(df, 50, 0, 0)
    with pytest.raises(ValueError, match="keeps state"):
        run_probe(train_cfg(curriculum="vcrl", curriculum_params={}), char_model_dir, char_model_dir, df, step=1,
                  probe=ProbeConfig(n_prompts=4, rollouts=2))


def test_the_probe_scores_rollouts_without_a_trainer():
    """The probe uses the public rollout component: no LocalTrainer (optimizer, work folder), no
    private members of another module."""
    import subprocess
    import sys

    code = "import sys, vicurl.probes.probe; print('vicurl.engines.local' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    import inspect
    import re

    from vicurl.probes import probe as probe_lib

    assert not re.search(r"\w\._[a-z]", inspect.getsource(probe_lib))


def test_recomputed_activations_give_the_same_gradients(char_model_dir):
    """On a GPU the probe recomputes activations layer by layer (`probe.recompute_activations`: about 20 GB
    less for one 3,272-token sequence of a 1.5B model in float32), which needs train mode: the
    gradients are eval mode's exactly where no module draws randomness, and a model with dropout is
    left as it was."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    from vicurl.models.sampling import Rollouts
    from vicurl.probes.probe import recompute_activations, rollout_gradient

    torch.manual_seed(0)
    n, p, r = 4, 6, 5
    rollouts = Rollouts(torch.randint(3, 40, (n, p)), torch.ones(n, p, dtype=torch.long), torch.randint(3, 40, (n, r)),
                        torch.ones(n, r, dtype=torch.long), [""] * n, torch.zeros(n, dtype=torch.bool))
    part = SimpleNamespace(rollouts=rollouts, old_lp=-torch.rand(n, r) - 1,
                           scored=SimpleNamespace(advantages=torch.tensor([1.0, -1.0, 0.5, -0.5])[:, None].expand(n, r)))
    settings, ref_lp = train_cfg(), -torch.rand(n, r) - 1

    def gradient(model):
        return rollout_gradient(model, part, ref_lp, settings)(range(n))

    plain = AutoModelForCausalLM.from_pretrained(char_model_dir, dtype=torch.float32)
    recomputed = AutoModelForCausalLM.from_pretrained(char_model_dir, dtype=torch.float32)
    recompute_activations(recomputed)
    assert recomputed.is_gradient_checkpointing and recomputed.training
    for a, b in zip(gradient(plain), gradient(recomputed)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-7)
    dropout = AutoModelForCausalLM.from_pretrained(char_model_dir, dtype=torch.float32, attention_dropout=0.1)
    dropout.eval()
    recompute_activations(dropout)
    assert not dropout.training and not dropout.is_gradient_checkpointing
