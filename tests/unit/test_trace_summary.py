"""vicurl.runtime.trace_summary: the GPU's busy time of a trace (overlapping streams counted once), the host's
waits, and a real torch profiler trace read as torch writes it."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from vicurl.runtime.trace_summary import load, report, summarize, union_length


def test_union_counts_each_instant_once():
    assert union_length([]) == 0
    assert union_length([(0, 10), (5, 15), (20, 30), (28, 32), (21, 22)]) == 15 + 12
    assert union_length([(3, 4), (0, 10)]) == 10


def event(cat, name, ts, dur):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 0}


def test_a_gpu_trace(tmp_path):
    events = [event("user_annotation", "update_actor", 0, 40), event("cpu_op", "aten::mm", 1, 2),
              event("kernel", "gemm", 0, 10), event("kernel", "gemm", 5, 10), event("kernel", "softmax", 20, 10),
              event("gpu_memcpy", "Memcpy DtoH", 28, 4),
              event("cuda_runtime", "cudaStreamSynchronize", 12, 3), event("cuda_runtime", "cudaLaunchKernel", 13, 1),
              event("cpu_op", "aten::_local_scalar_dense", 30, 2), {"ph": "i", "name": "marker", "ts": 100}]
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    s = summarize(load(path))
    assert s["span_us"] == 40 and s["gpu_busy_us"] == 27 and s["gpu_busy_share"] == pytest.approx(27 / 40)
    assert s["kernels"] == [("gemm", 2, 20), ("softmax", 1, 10)]
    assert s["copies"] == [("Memcpy DtoH", 1, 4)]
    assert s["host_syncs"] == [("cudaStreamSynchronize", 1, 3)]  # not the launch, nor a scalar read alone
    assert s["regions"] == [("update_actor", 1, 40)] and s["cpu_ops"] == []
    assert "GPU busy 0.0 ms (67.5 %)" in report(path, s)


def test_a_cpu_trace_as_torch_writes_it(tmp_path):
    a = torch.randn(256, 256)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("update_actor"):
            for _ in range(3):
                a = torch.tanh(a @ a)
    path = tmp_path / "cpu.json"
    prof.export_chrome_trace(str(path))
    s = summarize(load(path))
    (name, count, total), = s["regions"]
    assert (name, count) == ("update_actor", 1) and 0 < total <= s["span_us"]
    ops = {name: n for name, n, _ in s["cpu_ops"]}
    assert ops["aten::mm"] == 3 and ops["aten::tanh"] == 3
    assert s["gpu_busy_us"] == 0 and s["kernels"] == [] and s["host_syncs"] == []
    assert "no GPU work" in report(path, s)
    with pytest.raises(ValueError, match="no complete events"):
        summarize([])
