"""Per-prompt statistics of the initial policy, computed once before training (rule ``prompt_stats``).

From k graded samples per training prompt (``vicurl.evaluation``: generate, then grade):

pass_rate         share of the k samples graded correct
difficulty        100 * (1 - pass_rate), AdaRFT's difficulty in [0, 100]
semantic_entropy  -sum_c p_c log p_c over the clusters of the k final answers (SENT's ordering)
n_clusters        number of such clusters
no_answer_rate    share of samples without an extractable answer

Clusters are built greedily as in EMPO: each answer joins the first cluster whose
representative (first member) is equivalent to it, else opens a new one; a sample without an
answer is a cluster of its own (it agrees with nothing), so a prompt the model cannot answer
has high entropy.

``offline_statistics`` is the whole rule: sampling goes through ``eval.engine``'s generator
(``vicurl.evaluation.engines``: vLLM on GPU clusters), grading through the evaluation's graders.
A prompt longer than the model's context minus ``prompt_stats.max_new_tokens`` is dropped (no
statistics; the log names it) or refuses the set, per the training set's ``on_bad_row``
(``vicurl.long_prompts``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from vicurl.evaluation.engines import generate_sets_with
from vicurl.evaluation.grade import grade_records
from vicurl.grading import is_equiv
from vicurl.long_prompts import fit_sets
from vicurl.settings import SamplingSettings

COLUMNS = ["id", "k", "pass_rate", "difficulty", "semantic_entropy", "n_clusters", "no_answer_rate"]


def cluster_answers(answers: Sequence[str | None], equiv: Callable[[str, str], bool] = is_equiv) -> list[int]:
    """Cluster label of every answer (0, 1, ... in order of first appearance); None is a singleton."""
    reps: list[str | None] = []
    labels = []
    for a in answers:
        for c, rep in enumerate(reps):
            if a is not None and rep is not None and equiv(a, rep):
                labels.append(c)
                break
        else:
            reps.append(a)
            labels.append(len(reps) - 1)
    return labels


def entropy_of_labels(labels: Sequence[int]) -> float:
    """-sum_c p_c log p_c of the empirical cluster distribution (natural log; 0 for no labels)."""
    n = len(labels)
    if n == 0:
        return 0.0
    counts = pd.Series(list(labels)).value_counts().to_numpy()
    return float(-sum((c / n) * math.log(c / n) for c in counts))


def prompt_statistics(graded: pd.DataFrame) -> pd.DataFrame:
    """Graded samples (``problem_id``, ``sample_idx``, ``extracted``, ``correct``) -> one row per prompt."""
    missing = [c for c in ("problem_id", "extracted", "correct") if c not in graded.columns]
    if missing:
        raise ValueError(f"graded samples lack column(s) {missing}")
    rows = []
    order = graded.sort_values(["problem_id", "sample_idx"]) if "sample_idx" in graded.columns else graded
    for pid, g in order.groupby(order["problem_id"].astype(str), sort=False):
        answers = [a if isinstance(a, str) else None for a in g["extracted"]]
        labels = cluster_answers(answers)
        pass_rate = float(g["correct"].astype(bool).mean())
        rows.append({
            "id": pid,
            "k": len(g),
            "pass_rate": pass_rate,
            "difficulty": 100.0 * (1.0 - pass_rate),
            "semantic_entropy": entropy_of_labels(labels),
            "n_clusters": len(set(labels)),
            "no_answer_rate": float(sum(a is None for a in answers) / len(answers)),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def offline_statistics(
    model_dir: str,
    problems: pd.DataFrame,
    settings: Mapping[str, Any],
    *,
    engine: str = "transformers",
    vllm_args: dict[str, Any] | None = None,
    prompt_order: str = "question_first",
    chat_template: bool | str = "auto",
    threads: int = 1,
    device: str = "auto",
    dataset: str = "",
    on_bad_row: str = "fail",
) -> pd.DataFrame:
    """Rule prompt_stats: ``settings["k"]`` samples of the model per problem from ``engine``
    (``eval.engine``), graded, one row per prompt. ``settings``: the config's ``prompt_stats``;
    ``dataset``, ``on_bad_row``: the training set's name and its ``on_bad_row``."""
    kept, _ = fit_sets(model_dir, {dataset: problems}, max_new_tokens=settings["max_new_tokens"], policies=on_bad_row,
                       prompt_order=prompt_order, chat_template=chat_template,
                       max_model_len=(vllm_args or {}).get("max_model_len") if engine == "vllm" else None,
                       budget_key="prompt_stats.max_new_tokens")
    sampling = SamplingSettings(n=settings["k"], temperature=settings["temperature"], top_p=settings["top_p"],
                                max_new_tokens=settings["max_new_tokens"], seed=settings["seed"],
                                prompt_order=prompt_order, chat_template=chat_template)
    records = generate_sets_with(engine, model_dir, kept, sampling, batch_size=settings["batch_size"], threads=threads,
                                 device=device, vllm_args=vllm_args)[dataset]
    return prompt_statistics(grade_records(records, kept[dataset]))
