"""The device setting: resolved once per job (auto = CUDA when present), errors naming the setting,
bf16 only for sampling on CUDA, and the CPU path's numbers untouched by the device plumbing."""

import pandas as pd
import pytest
import torch

from vicurl.config.settings import SamplingSettings, TrainSettings
from vicurl.engines.local import LocalTrainer
from vicurl.evaluation.generate import generate_records, load_model
from vicurl.probes.probe import micro_batch_size
from vicurl.runtime import devices


def test_auto_is_cuda_when_present_else_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve() == torch.device("cpu") and devices.resolve("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.resolve("auto") == torch.device("cuda")
    assert devices.resolve("cuda:1") == torch.device("cuda:1")


def test_explicit_cpu_even_with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert devices.resolve("cpu") == torch.device("cpu") and devices.resolve(" CPU ") == torch.device("cpu")
    assert devices.resolve(torch.device("cpu")) == torch.device("cpu")


def test_unknown_or_unavailable_device_names_the_setting(monkeypatch):
    with pytest.raises(ValueError, match=r"^device: unknown device 'gpu'; expected auto, cpu, cuda or cuda:N"):
        devices.resolve("gpu")
    with pytest.raises(ValueError, match=r"^probes\.device: unknown device 'cuda0'"):
        devices.resolve("cuda0", key="probes.device")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"^device: 'cuda' asked for but CUDA is not available"):
        devices.resolve("cuda")


def test_dtypes_and_micro_batches_per_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert devices.sampling_dtype(cpu) == torch.float32 and devices.sampling_dtype(cuda) == torch.bfloat16
    assert micro_batch_size(cpu, 64) == 64 and micro_batch_size(cuda, 64) == 1


def test_cpu_models_stay_float32_and_the_policy_samples_itself(char_model_dir, tmp_path):
    model, _ = load_model(char_model_dir, "cpu")
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    df = pd.DataFrame({"id": [f"p{i}" for i in range(4)], "question": [f"Compute {i} + 1." for i in range(4)],
                       "answer": [str(i + 1) for i in range(4)]})
    tr = LocalTrainer(TrainSettings(total_steps=1, batch_size=2, group_size=2), char_model_dir, df, tmp_path)
    assert tr.device == torch.device("cpu") and tr.scorer.sampling_model() is tr.policy  # no bf16 copy on the CPU


def test_auto_on_this_machine_gives_the_cpu_numbers(char_model_dir, monkeypatch):
    """`device: auto` on a CPU machine is the CPU path, sample for sample."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    problems = pd.DataFrame({"id": ["a", "b"], "question": ["Compute 1 + 1.", "Compute 2 + 1."]})
    kw = dict(sampling=SamplingSettings(n=2, temperature=1.0, top_p=1.0, max_new_tokens=6, seed=3), batch_size=4)
    pd.testing.assert_frame_equal(generate_records(str(char_model_dir), problems, device="auto", **kw),
                                  generate_records(str(char_model_dir), problems, device="cpu", **kw))
