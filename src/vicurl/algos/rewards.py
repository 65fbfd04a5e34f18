"""Reward sources: pure functions over one group of rollouts, shared by both engines.

Each source maps one prompt's ``Group`` (its G response texts and what the source needs) to a
``GroupReward`` (a reward per rollout, whether the prompt stays in the update, diagnostics):
``oracle`` [paper], ``majority_vote`` [TTRL], ``entropy`` [RENT], ``semantic`` [EMPO]; the catalog
`vicurl.config.methods.REWARDS` says what the engines ask of each. Answers are extracted and compared by
the grader of the problem's answer type, so voting and clustering use the same equivalence as
evaluation. ``group_rewards``, what an engine calls for a batch, first sends every comparison the
batch needs to the worker pool at once, so the per-group functions only hit the cache, and counts
the comparisons whose CPU budget ran out (``reward/timeouts``: each reads as "not equal"). See
docs/algorithms.md.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from vicurl.config import methods
from vicurl.grading import verdicts
from vicurl.grading.classes import clusters, majority_class
from vicurl.grading.equiv import distinct
from vicurl.grading.extract import extract_boxed
from vicurl.grading.graders import ANSWER_TYPES, answer_type


@dataclass
class Group:
    """One prompt's G rollouts and what the reward sources may read."""

    texts: list[str]
    gold: str = ""  # unused by the verifier-free rewards
    answer_type: str = "math"
    options: Sequence[str] = ()
    entropy: Sequence[float] | None = None  # (G,) mean token entropy (nats) under pi_old, response tokens
    vote_texts: Sequence[str] | None = None  # extra samples that only vote (TTRL n_votes > G); None: texts

    @property
    def problem(self) -> dict[str, Any]:
        return {"answer": self.gold, "answer_type": self.answer_type, "options": list(self.options)}

    def answers(self, texts: Sequence[str] | None = None) -> list[str | None]:
        at = answer_type(self.answer_type)
        return [at.extract(t or "", self.problem) for t in (self.texts if texts is None else texts)]


@dataclass
class GroupReward:
    rewards: list[float]  # one per rollout in Group.texts
    keep: bool = True  # False: drop this prompt from the update (EMPO's filter)
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- equivalence classes (vicurl.grading.classes)


def _needed_pairs(name: str, group: Group) -> list[tuple[str, str]]:
    """The (answer, reference) comparisons a source will ask for (to batch them up front)."""
    compares = methods.reward(name).compares
    if compares == "gold":
        gold = answer_type(group.answer_type).gold(group.problem)
        return [(a, gold) for a in group.answers() if a is not None]
    if compares == "answers":
        voters = list(group.vote_texts) if group.vote_texts is not None else []
        uniq = distinct(group.answers(voters + list(group.texts)))
        return [(uniq[j], uniq[i]) for j in range(len(uniq)) for i in range(j)]
    return []


# ---------------------------------------------------------------- the sources


def oracle(group: Group) -> GroupReward:
    """[paper] 1 if the extracted answer is equivalent to the gold answer; no answer scores 0."""
    at = answer_type(group.answer_type)
    answers = group.answers()
    gold = at.gold(group.problem)
    idx = [i for i, a in enumerate(answers) if a is not None]
    ok = at.same([(answers[i], gold) for i in idx], [group.problem] * len(idx)) if idx else []
    rewards = [0.0] * len(answers)
    for i, v in zip(idx, ok):
        rewards[i] = float(bool(v))  # a timeout scores 0, as a wrong answer
    return GroupReward(rewards, info={"no_answer": sum(a is None for a in answers) / max(len(answers), 1)})


def majority_vote(group: Group, n_votes: int | None = None) -> GroupReward:
    """[TTRL] 1 if the rollout's answer is in the majority equivalence class, else 0.

    The majority class is the largest among the voters' answers (``vote_texts`` if given, else the
    rollouts themselves); ties go to the class seen first. [ours] Rollouts without an extractable
    answer do not vote and get 0; with no answer at all, every reward is 0. ``n_votes`` is read
    by the engine (how many samples to draw per prompt, >= G; the first G are trained on), not here.
    """
    voters_texts = list(group.vote_texts) if group.vote_texts is not None else list(group.texts)
    n_v = len(voters_texts)
    answers = group.answers(voters_texts + list(group.texts))
    cls = clusters(answers, group.answer_type, group.problem)
    vote_cls, own_cls = cls[:n_v], cls[n_v:]
    major, counts = majority_class(vote_cls)
    info: dict[str, Any] = {"n_voters": sum(counts.values()), "n_classes": len(counts)}
    if major is None:
        return GroupReward([0.0] * len(group.texts), info={**info, "majority": None, "majority_share": 0.0})
    majority_answer = answers[vote_cls.index(major)]
    rewards = [1.0 if c == major else 0.0 for c in own_cls]
    return GroupReward(rewards, info={**info, "majority": majority_answer,
                                      "majority_share": counts[major] / sum(counts.values())})


def entropy(group: Group, format_penalty: bool = False, format_penalty_value: float = -7.0) -> GroupReward:
    """[RENT] R_i = - mean_t H_t of rollout i under pi_old (response tokens, rollout temperature).

    Lower entropy, higher reward (the sign!). Optional format penalty [RENT]: R_i =
    ``format_penalty_value`` when the response has no (non-empty) ``\\boxed{}`` answer.
    """
    if group.entropy is None:
        raise ValueError("the entropy reward needs Group.entropy (mean token entropy of each rollout under pi_old)")
    if len(group.entropy) != len(group.texts):
        raise ValueError(f"Group.entropy has {len(group.entropy)} values for {len(group.texts)} texts")
    rewards = [-float(h) for h in group.entropy]
    penalized = 0
    if format_penalty:
        for i, t in enumerate(group.texts):
            box = extract_boxed(t or "")
            if box is None or not box.strip():
                rewards[i] = float(format_penalty_value)
                penalized += 1
    return GroupReward(rewards, info={"format_penalized": penalized / max(len(rewards), 1)})


def semantic(group: Group, entropy_threshold: float | None = 1.0) -> GroupReward:
    """[EMPO] R_i = |class(i)| / G; no answer scores 0; high-entropy prompts are dropped.

    Semantic entropy SE = - sum_k p_k log p_k over the classes of the G answers, p_k = |C_k| / G,
    each rollout without an answer counted as a class of its own (EMPO's "no answer {i}"), so
    that the p_k sum to 1. A prompt with SE >= ``entropy_threshold`` * log G is dropped (EMPO:
    threshold 1.0, i.e. only when all G answers differ); its rewards are set to 0 as in EMPO's
    code, and ``keep`` is False. ``None`` keeps every prompt.
    """
    g = len(group.texts)
    cls = clusters(group.answers(), group.answer_type, group.problem)
    sizes: dict[int, int] = {}
    for c in cls:
        if c is not None:
            sizes[c] = sizes.get(c, 0) + 1
    counts = list(sizes.values()) + [1] * sum(c is None for c in cls)
    se = -sum((k / g) * math.log(k / g) for k in counts) if g else 0.0
    keep = entropy_threshold is None or g < 2 or se < entropy_threshold * math.log(g) - 1e-9
    rewards = [0.0 if c is None or not keep else sizes[c] / g for c in cls]
    return GroupReward(rewards, keep=keep, info={"semantic_entropy": se, "n_classes": len(sizes)})


def source(name: str) -> Callable[..., GroupReward]:
    """The reward source ``name`` of the catalog (`vicurl.config.methods.REWARDS`)."""
    return methods.load(methods.reward(name).implementation)


def check_params(name: str, params: dict[str, Any]) -> None:
    """Unknown reward or parameter: an error naming it (before a run starts)."""
    allowed = set(inspect.signature(source(name)).parameters) - {"group"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"reward {name!r}: unknown parameter(s) {unknown}; allowed: {sorted(allowed)}")


# ---------------------------------------------------------------- the batch helper


@dataclass
class BatchRewards:
    rewards: torch.Tensor  # (N,) prompt-major, G per prompt
    keep: torch.Tensor  # (B,) bool
    metrics: dict[str, float]
    infos: list[dict[str, Any]]


def group_rewards(
    name: str,
    params: dict[str, Any] | None,
    texts: Sequence[str],
    golds: Sequence[str],
    answer_types: Sequence[str] | None = None,
    options: Sequence[Sequence[str]] | None = None,
    entropies: Sequence[float] | torch.Tensor | None = None,
    group_size: int = 8,
    vote_texts: Sequence[Sequence[str]] | None = None,
) -> BatchRewards:
    """Rewards of a batch of B prompts x G rollouts (rows prompt-major) from the source ``name``.

    ``entropies``: (N,) mean token entropy of each rollout under pi_old (the entropy reward).
    ``vote_texts``: per prompt, the texts that vote (TTRL with n_votes > G). Metrics are named
    ``reward/...``: the mean reward, the kept share of prompts, the no-answer rate, the number of
    distinct comparisons that timed out, and the source's own (majority share, semantic entropy,
    format-penalized share).
    """
    params = dict(params or {})
    check_params(name, params)
    g = int(group_size)
    if len(texts) % g:
        raise ValueError(f"{len(texts)} texts is not a multiple of the group size {g}")
    b = len(texts) // g
    if len(golds) != b:
        raise ValueError(f"{len(golds)} gold answers for {b} prompts")
    types = list(answer_types) if answer_types is not None else ["math"] * b
    opts = list(options) if options is not None else [()] * b
    ent = None if entropies is None else np.asarray(torch.as_tensor(entropies, dtype=torch.float64).reshape(-1))
    groups = [
        Group(
            texts=list(texts[j * g : (j + 1) * g]),
            gold=str(golds[j]),
            answer_type=types[j],
            options=[str(o) for o in (opts[j] if opts[j] is not None else ())],
            entropy=None if ent is None else ent[j * g : (j + 1) * g].tolist(),
            vote_texts=None if vote_texts is None else list(vote_texts[j]),
        )
        for j in range(b)
    ]
    timeouts = _prefetch(name, groups)
    fn = source(name)
    results = [fn(grp, **params) for grp in groups]
    rewards = torch.tensor([r for res in results for r in res.rewards], dtype=torch.float32)
    keep = torch.tensor([res.keep for res in results], dtype=torch.bool)
    no_answer = [a is None for grp in groups for a in grp.answers()]
    metrics = {
        f"reward/{name}/mean": float(rewards.mean()) if len(rewards) else 0.0,
        f"reward/{name}/kept": float(keep.float().mean()) if len(keep) else 1.0,
        "reward/no_answer": float(np.mean(no_answer)) if no_answer else 0.0,
        "reward/timeouts": float(timeouts),
    }
    for key in ("majority_share", "semantic_entropy", "n_classes", "format_penalized"):
        vals = [res.info[key] for res in results if key in res.info]
        if vals:
            metrics[f"reward/{name}/{key}"] = float(np.mean(vals))
    return BatchRewards(rewards, keep, metrics, [res.info for res in results])


def _prefetch(name: str, groups: Sequence[Group]) -> int:
    """Run every comparison the batch will need at once, so the worker pool works in parallel; returns how
    many of the distinct comparisons timed out (from the verdicts, cached or not, so a resumed run logs the
    same count)."""
    by_type: dict[str, list[tuple[str, str]]] = {}
    for grp in groups:
        by_type.setdefault(grp.answer_type, []).extend(_needed_pairs(name, grp))
    timeouts = 0
    for t, pairs in by_type.items():
        if pairs:
            uniq = list(dict.fromkeys(pairs))
            timeouts += verdicts.count(ANSWER_TYPES[t].same(uniq, [{}] * len(uniq)))
    return timeouts
