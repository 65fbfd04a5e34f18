"""Reward sources on hand-made groups, and the entropy reward against a hand computation from logits."""

import math

import pandas as pd
import pytest
import torch

from vicurl.algos.confidence import logprobs_and_entropy, mean_token_entropy
from vicurl.algos.rewards import Group, check_params, clusters, entropy, group_rewards, majority_vote, oracle, semantic
from vicurl.config.methods import REWARDS

pytestmark = pytest.mark.usefixtures("small_pool")  # conftest.py


def box(a):
    return f"reasoning ... so the answer is \\boxed{{{a}}}." if a is not None else "I am not sure."


def group(answers, **kw):
    return Group(texts=[box(a) for a in answers], **kw)


# ---------------------------------------------------------------- oracle


def test_oracle():
    r = oracle(group(["\\frac{1}{2}", "0.5", "1/3", None, ""], gold="1/2"))
    assert r.rewards == [1.0, 1.0, 0.0, 0.0, 0.0] and r.keep
    mc = oracle(group(["B", "(b)", "C", None], gold="B", answer_type="multiple_choice", options=["w", "x", "y", "z"]))
    assert mc.rewards == [1.0, 1.0, 0.0, 0.0]


# ---------------------------------------------------------------- equivalence classes


def test_clusters_join_equivalent_forms():
    cls = clusters(["2", "x", "2.0", "\\frac{4}{2}", None, "x", "(x)"], "math", {})
    assert cls == [0, 1, 0, 0, None, 1, 1]


# ---------------------------------------------------------------- majority vote (TTRL)


def test_majority_all_agree():
    r = majority_vote(group(["7", "7", "7.0", "\\frac{14}{2}"]))
    assert r.rewards == [1.0] * 4
    assert r.info["majority"] == "7" and r.info["majority_share"] == 1.0


def test_majority_picks_the_largest_equivalence_class():
    # "1/2" x3 (in three spellings) beats "3" x2
    r = majority_vote(group(["3", "0.5", "3", "\\frac{1}{2}", "1/2"]))
    assert r.rewards == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert r.info["majority_share"] == pytest.approx(3 / 5) and r.info["n_classes"] == 2


def test_majority_tie_goes_to_the_class_seen_first():
    r = majority_vote(group(["5", "4", "4", "5"]))
    assert r.rewards == [1.0, 0.0, 0.0, 1.0] and r.info["majority"] == "5"


def test_majority_all_distinct_first_answer_wins_the_tie():
    r = majority_vote(group(["1", "2", "3", "4"]))
    assert r.rewards == [1.0, 0.0, 0.0, 0.0]


def test_majority_no_answers_do_not_vote():
    # two no-answers, one empty box: they neither vote nor score; "9" wins 2-1 among voters
    r = majority_vote(group([None, "9", None, "8", "9", ""]))
    assert r.rewards == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert r.info["n_voters"] == 3


def test_majority_nobody_answered():
    r = majority_vote(group([None, None, ""]))
    assert r.rewards == [0.0, 0.0, 0.0] and r.info["majority"] is None


def test_majority_with_extra_voters():
    """TTRL with n_votes > G: the extra samples decide the majority but get no reward."""
    trained = ["3", "4"]
    voters = trained + ["4", "4", "3"]  # the G trained rollouts vote too
    r = majority_vote(Group(texts=[box(a) for a in trained], vote_texts=[box(a) for a in voters]), n_votes=5)
    assert r.rewards == [0.0, 1.0] and r.info["n_voters"] == 5


# ---------------------------------------------------------------- semantic (EMPO)


def test_semantic_cluster_probability_and_entropy():
    r = semantic(group(["2", "2.0", "3", None]))  # classes {2: 2}, {3: 1}, no-answer counted alone
    assert r.rewards == [0.5, 0.5, 0.25, 0.0] and r.keep
    se = -(0.5 * math.log(0.5) + 0.25 * math.log(0.25) + 0.25 * math.log(0.25))
    assert r.info["semantic_entropy"] == pytest.approx(se)
    assert r.info["n_classes"] == 2


def test_semantic_all_agree():
    r = semantic(group(["x+1", "1+x", "x + 1"]))
    assert r.rewards == [1.0, 1.0, 1.0] and r.keep and r.info["semantic_entropy"] == pytest.approx(0.0)


@pytest.mark.parametrize("g", [2, 3, 5, 8, 16])
def test_semantic_all_distinct_is_dropped(g):
    """SE = log G exactly when all answers differ; float rounding must not keep the prompt."""
    r = semantic(group([str(k) for k in range(g)]))
    assert not r.keep and r.rewards == [0.0] * g
    assert r.info["semantic_entropy"] == pytest.approx(math.log(g))


def test_semantic_no_answers_count_as_distinct():
    assert not semantic(group(["1", "2", None, None])).keep  # 4 singleton classes: SE = log 4
    assert not semantic(group([None, None, None])).keep
    assert semantic(group(["1", "1", None, None])).keep


def test_semantic_threshold_switch():
    assert semantic(group(["1", "2", "3"]), entropy_threshold=None).keep
    assert not semantic(group(["1", "1", "2", "3"]), entropy_threshold=0.5).keep  # SE = 1.04 >= 0.5 log 4


# ---------------------------------------------------------------- entropy (RENT)


def hand_entropy(logits, temperature):
    """-sum_v p_v log p_v with p = softmax(logits / T), in plain Python."""
    z = [x / temperature for x in logits]
    m = max(z)
    e = [math.exp(x - m) for x in z]
    s = sum(e)
    return -sum((x / s) * math.log(x / s) for x in e)


def test_entropy_reward_matches_a_hand_computation_from_logits():
    torch.manual_seed(0)
    g, t_len, v, temp = 3, 4, 5, 0.7
    logits = torch.randn(g, t_len, v) * 3
    labels = torch.randint(0, v, (g, t_len))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    _, ent = logprobs_and_entropy(logits, labels, temp)  # what the engines compute from pi_old
    mean_h = mean_token_entropy(ent, mask)
    expected = []
    for i in range(g):
        hs = [hand_entropy(logits[i, t].tolist(), temp) for t in range(t_len) if mask[i, t]]
        expected.append(-sum(hs) / len(hs))
    r = entropy(Group(texts=["a", "b", "c"], entropy=mean_h.tolist()))
    assert r.rewards == pytest.approx(expected, rel=1e-5)
    # the sign: the most confident (lowest entropy) rollout gets the highest reward
    assert max(range(g), key=lambda i: r.rewards[i]) == int(torch.argmin(mean_h))
    # and through the batch helper the engines call
    b = group_rewards("entropy", {}, ["a", "b", "c"], ["0"], entropies=mean_h, group_size=3)
    assert b.rewards.tolist() == pytest.approx(expected, rel=1e-5)


def test_entropy_format_penalty():
    grp = Group(texts=["\\boxed{1}", "no box", "\\boxed{}"], entropy=[0.5, 0.1, 0.2])
    assert entropy(grp).rewards == pytest.approx([-0.5, -0.1, -0.2])
    r = entropy(grp, format_penalty=True)
    assert r.rewards == pytest.approx([-0.5, -7.0, -7.0]) and r.info["format_penalized"] == pytest.approx(2 / 3)
    assert entropy(grp, format_penalty=True, format_penalty_value=-1.0).rewards == pytest.approx([-0.5, -1.0, -1.0])


def test_entropy_needs_entropies():
    with pytest.raises(ValueError, match="entropy"):
        entropy(Group(texts=["a"]))


# ---------------------------------------------------------------- the batch helper


def test_group_rewards_batch():
    texts = [box(a) for a in ["1", "1", "2", "3", "4", "5", "6", None]]
    b = group_rewards("semantic", {"entropy_threshold": 1.0}, texts, ["1", "0"], group_size=4)
    assert b.rewards.tolist() == [0.5, 0.5, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0]
    assert b.keep.tolist() == [True, False]
    assert b.metrics["reward/semantic/kept"] == 0.5 and b.metrics["reward/no_answer"] == pytest.approx(1 / 8)
    o = group_rewards("oracle", {}, texts, ["1", "6"], answer_types=["math", "math"], options=[[], []], group_size=4)
    assert o.rewards.tolist() == [1, 1, 0, 0, 0, 0, 1, 0] and o.keep.all()
    m = group_rewards("majority_vote", {}, texts, ["", ""], group_size=4,
                      vote_texts=[texts[:4] + [box("2")] * 3, texts[4:]])
    assert m.rewards.tolist() == [0, 0, 1, 0, 1, 0, 0, 0]


def test_comparisons_that_timed_out_are_counted_in_the_steps_metrics():
    """A rollout whose comparison ran out of its CPU budget scores 0 (the oracle) or forms a class of its own (a
    vote); the step's ``reward/timeouts`` counts the distinct comparisons that did, cached or not, and a step's
    two parts (VCRL's replay) add their counts."""
    from vicurl.engines.step import mean_metrics
    from vicurl.grading import equiv, symbolic

    equiv.cache_clear()
    symbolic.configure(workers=2, cpu_seconds=1.0)
    try:
        tower = box("9^{9^{9^{9}}}")
        texts = [box("1"), tower, box("1"), box("2")]
        for _ in range(2):  # computed, then from the cache: the same count
            o = group_rewards("oracle", {}, texts, ["1"], group_size=4)
            assert o.rewards.tolist() == [1, 0, 1, 0] and o.metrics["reward/timeouts"] == 1
        m = group_rewards("majority_vote", {}, texts, [""], group_size=4)
        assert m.rewards.tolist() == [1, 0, 1, 0] and m.metrics["reward/timeouts"] == 2  # tower vs 1 and vs 2
    finally:
        equiv.cache_clear()
        symbolic.configure(workers=2, cpu_seconds=symbolic.CPU_SECONDS)
    both = mean_metrics({"reward/timeouts": 1.0, "reward/mean": 0.5}, 4, {"reward/timeouts": 2.0, "reward/mean": 1.0}, 4)
    assert both == {"reward/timeouts": 3.0, "reward/mean": 0.75}


def test_unknown_reward_parameter_is_named():
    with pytest.raises(ValueError, match="n_vote"):
        check_params("majority_vote", {"n_vote": 3})
    with pytest.raises(ValueError, match="unknown reward"):
        check_params("verifier", {})
    for name in REWARDS:
        check_params(name, {})


# ---------------------------------------------------------------- the local engine


def problems(n=8):
    return pd.DataFrame({"id": [f"p{i}" for i in range(n)], "question": [f"Compute {i} + 1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)], "answer_type": ["math"] * n,
                         "options": [[] for _ in range(n)]})


@pytest.mark.parametrize("reward, params", [("majority_vote", {"n_votes": 6}), ("entropy", {"format_penalty": True}),
                                            ("semantic", {"entropy_threshold": 1.0})])
def test_local_engine_trains_with_each_reward(char_model_dir, tmp_path, reward, params):
    from vicurl.config.settings import TrainSettings
    from vicurl.engines.local import LocalTrainer

    cfg = TrainSettings(total_steps=1, batch_size=4, group_size=4, lr=1e-3, max_response_length=8, micro_batch_size=8,
                        save_every=1, seed=1, reward=reward, reward_params=params, curriculum="vicurl",
                        curriculum_params={"beta_start": 0.5})
    hist = LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "w").run()
    m = hist[0]
    assert f"reward/{reward}/mean" in m and "reward/oracle_acc" in m
    if reward == "entropy":
        assert m[f"reward/{reward}/mean"] < 0  # minus an entropy (or the -7 format penalty)
    if reward == "semantic":
        # a random char model never boxes an answer: every prompt is dropped, nothing is trained on
        assert m["reward/semantic/kept"] == 0.0


def test_n_votes_below_group_size_is_refused(char_model_dir, tmp_path):
    from vicurl.config.settings import TrainSettings
    from vicurl.engines.local import LocalTrainer

    cfg = TrainSettings(total_steps=1, batch_size=4, group_size=4, reward="majority_vote", reward_params={"n_votes": 2})
    with pytest.raises(ValueError, match="n_votes"):
        LocalTrainer(cfg, char_model_dir, problems(), tmp_path / "w")


def test_first_of_each_group_keeps_the_trained_rows():
    from vicurl.engines.rollout import first_of_each_group
    from vicurl.models.sampling import Rollouts

    n, g, b = 3, 2, 2  # 2 prompts x 3 samples, train on the first 2 of each
    ids = torch.arange(b * n)[:, None].repeat(1, 4)
    r = Rollouts(ids, torch.ones_like(ids), ids + 100, torch.ones_like(ids), [f"t{i}" for i in range(b * n)],
                 torch.zeros(b * n, dtype=torch.bool))
    kept = first_of_each_group(r, n, g)
    assert kept.texts == ["t0", "t1", "t3", "t4"]
    assert kept.prompt_ids[:, 0].tolist() == [0, 1, 3, 4] and kept.response_ids[:, 0].tolist() == [100, 101, 103, 104]


def test_config_check_refuses_n_votes_below_the_group_size():
    import yaml

    from vicurl.config import checks

    from harness import DEMO_CONFIG

    config = checks.with_defaults(yaml.safe_load(DEMO_CONFIG.read_text()))
    checks.check(config)
    config["rewards"]["majority_vote"] = {"n_votes": 4}  # the demo's G is 8
    with pytest.raises(ValueError, match="n_votes=4"):
        checks.check(config)
