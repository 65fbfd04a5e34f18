"""The cost model (`vicurl.planning.cost`): its architecture sizes against transformers' own model classes, the
paper's estimate without importing transformers or verl (the status command calls it: they would take most of
its time), any model's price from its own config.json or parameter count, and a set's rows as prepared."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import yaml

from vicurl.config import checks
from vicurl.planning import cost
from vicurl.planning.cost import ARCHS, arch_of, model_classes

from harness import REPO

REDUCED = ("qwen2", dict(hidden_size=512, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=2, vocab_size=32768, tie_word_embeddings=True))  # the CPU measurement's


@pytest.mark.parametrize("kind, kw", [*ARCHS.values(), REDUCED], ids=[*ARCHS, "reduced"])
def test_the_counted_sizes_are_the_model_classes(kind, kw):
    """Parameters in all (a tied matrix once), parameters a token's matmuls use (all but the input
    embedding; a tied matrix is the LM head's), attention width and the LM head's size, as in the model
    transformers builds from the published config."""
    cfg_cls, model_cls = model_classes(kind)
    cfg = cfg_cls(**kw)
    with torch.device("meta"):
        model = model_cls(cfg)
    total = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings().weight.numel()
    a = arch_of(kind, kw)
    assert a.n_total == total
    assert a.n_flop == (total if cfg.tie_word_embeddings else total - embed)
    assert a.width == model.model.layers[0].self_attn.q_proj.out_features
    assert a.head == model.lm_head.weight.numel() and a.layers == cfg.num_hidden_layers


def test_the_papers_estimate_imports_neither_transformers_nor_verl():
    code = ("import sys, yaml; from vicurl.config import checks; from vicurl.planning import cost;"
            "jobs = cost.jobs(checks.read_file('config/paper.yaml'), profile=yaml.safe_load(open('slurm-a100/config.yaml')));"
            "assert jobs and not {'transformers', 'verl'} & set(sys.modules), sorted(sys.modules)[:50]")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


def paper():
    return checks.read_file(REPO / "config" / "paper.yaml")


def test_every_job_carries_its_study_model_setting_and_seed():
    jobs = cost.jobs(paper())
    assert {j.rule for j in jobs} == {"train", "generate_checkpoint", "grade", "prompt_stats", "probe"}
    for j in jobs:
        if j.rule == "prompt_stats":
            assert j.model and j.dataset and not j.study
        else:
            assert j.study and j.model and j.setting and j.seed is not None, j
        assert (j.step is not None) == (j.rule in ("generate_checkpoint", "probe")), j
    assert len({j.key for j in jobs}) == len(jobs)  # each names one job of the workflow


def test_a_subset_of_a_benchmark_is_priced_at_its_rows():
    """The general study's MMLU-Pro, the largest evaluation: 12,032 rows, 1,000 with `subset.n: 1000`."""
    full = paper()
    cut = paper()
    cut["datasets"]["mmlu_pro"]["subset"] = {"n": 1000, "seed": 0}
    assert cost.dataset_size(full, "mmlu_pro")[0] == 12032 and cost.dataset_size(cut, "mmlu_pro")[0] == 1000
    general = lambda cfg: cost.by_study(cost.jobs(cfg))["general"]  # noqa: E731
    assert general(cut) < general(full)
    grade = {j.key: j.tokens for j in cost.jobs(cut) if j.rule == "grade" and j.study == "general"}
    assert grade and all(n == (1000 + 198 + 800 + 1000) * 16 * 7 for n in grade.values())  # 7 steps, 16 samples


def test_a_model_outside_the_papers_is_priced_from_its_own_config(tmp_path):
    """Before its fetch, by the parameter count the config gives; after it, by the fetched config.json (which
    wins); with neither, its jobs are left out and the model named."""
    def with_mine(**spec):
        raw = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
        raw["models"]["mine"] = {"hub_id": "org/mine", **spec}
        raw["studies"]["main"]["models"] = ["mine"]
        return checks.read(raw)

    cfg = with_mine()
    assert "models.mine" in cost.unknown(cfg, tmp_path)
    assert not [j for j in cost.jobs(cfg, workdir=tmp_path) if j.model == "mine" and j.gpus]  # grading needs none
    cfg = with_mine(parameters=1.54e9)
    by_count = {j.key: j.gpu_hours for j in cost.jobs(cfg, workdir=tmp_path) if j.model == "mine" and j.gpus}
    assert by_count and not cost.unknown(cfg, tmp_path)
    folder = tmp_path / "results" / "paper" / "models" / "mine" / "hub"
    folder.mkdir(parents=True)
    kind, kw = ARCHS["Qwen/Qwen2.5-Math-1.5B"]
    (folder / "config.json").write_text(json.dumps({"model_type": kind, **kw}))
    a, where = cost.architecture(cfg, "mine", tmp_path)
    assert a == arch_of(kind, kw) and where.endswith("config.json")
    fetched = {j.key: j.gpu_hours for j in cost.jobs(cfg, workdir=tmp_path) if j.model == "mine" and j.gpus}

    def main_study(jobs, model):
        return {(j.rule, j.setting, j.seed, j.step): j.gpu_hours for j in jobs
                if j.model == model and j.study == "main" and j.rule == "generate_checkpoint"}  # train: verl.models differ

    assert main_study(cost.jobs(cfg, workdir=tmp_path), "mine") == \
        pytest.approx(main_study(cost.jobs(paper()), "qwen_math_1.5b"))  # its architecture, the paper model's prices
    assert sum(by_count.values()) == pytest.approx(sum(fetched.values()), rel=0.15)  # attention left out


def test_a_local_training_set_is_priced_at_its_rows(tmp_path):
    cfg = checks.read_file(REPO / "config" / "paper.yaml")
    (tmp_path / "mine.jsonl").write_text('{"problem": "1 + 1?", "answer": "2"}\n' * 37)
    cfg["datasets"]["mine"] = {"source": "deepscaler", "local_path": "mine.jsonl"}
    assert cost.dataset_size(cfg, "mine", tmp_path)[0] == 37
    assert cost.dataset_size(cfg, "mine", REPO / "nowhere")[0] is None


def test_the_measured_share_is_the_steps_work_over_its_time():
    """The training rate the estimate takes (``measured_share``): the H200 step's counted work without the LM
    head over its time without the head's, by hand from Qwen2.5-Math-1.5B's published sizes; recomputed from the
    figures given (an update factor, the A100 conversion), so that the plan's count of the measured step gives
    back its measured time whatever they are."""
    from vicurl.planning.cost import MEASURED_STEP, Assumptions, measured_share

    n, layers, width, head = 1_543_714_304, 28, 1536, 151_936 * 1536
    tokens, ctx, seconds = 64 * (506 + 3072), 506 + 3072, 3.681 + 3.379 + 20.201
    forward = 2 * n + 4 * layers * width * ctx / 2  # a token's forward: matmuls and attention over half its sequence
    head_fwd, head_train = 2 * head * tokens * 2, 6 * head * tokens  # old-policy pass and reference; update
    head_s = (head_fwd / 0.145 + head_train / 0.186) / 790e12
    share = (tokens * forward * (2 + 3 * 0.780) - head_fwd - head_train) / ((seconds - head_s) * 312e12)
    assert measured_share(MEASURED_STEP, Assumptions()) == pytest.approx(share, rel=1e-12)
    assert Assumptions().mfu_train == pytest.approx(share / 3.1, rel=1e-12)
    for update, factor in ((0.780, 3.1), (1.0, 3.1), (0.6, 2.0)):
        A = Assumptions(update_without_checkpointing=update, a100_factor=factor)
        work = tokens * forward * (2 + 3 * update)  # as plan() counts a step of every row kept
        h200 = (work - head_fwd - head_train) / (A.mfu_train * factor * 312e12) + head_s
        assert h200 == pytest.approx(seconds, rel=1e-12)
    assert Assumptions(mfu_train=0.2).mfu_train == 0.2  # given: taken as it is
