"""measurements/gpu_time_estimate.py's architecture sizes: its arithmetic against transformers' own model
classes, and the plan's estimate without importing transformers or verl (the status command calls it: they would
take most of its time)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from harness import REPO

sys.path.insert(0, str(REPO / "measurements"))
from gpu_time_estimate import ARCHS, REDUCED, arch_of, model_classes  # noqa: E402


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
    code = ("import sys, yaml; sys.path.insert(0, 'measurements');"
            "from gpu_time_estimate import Assumptions, Cpu, load_config, plan;"
            "from pathlib import Path;"
            "jobs, _ = plan(load_config(Path('config/paper.yaml')), yaml.safe_load(open('slurm-a100/config.yaml')),"
            " Assumptions(), Cpu());"
            "assert jobs and not {'transformers', 'verl'} & set(sys.modules), sorted(sys.modules)[:50]")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


def test_the_measured_share_is_the_steps_work_over_its_time():
    """The training rate the estimate takes (``measured_share``): the H200 step's counted work without the LM
    head over its time without the head's, by hand from Qwen2.5-Math-1.5B's published sizes; recomputed from the
    figures given (an update factor, the A100 conversion), so that the plan's count of the measured step gives
    back its measured time whatever they are."""
    from gpu_time_estimate import MEASURED_STEP, Assumptions, measured_share

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
