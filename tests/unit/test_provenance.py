"""Provenance records: package versions, git commit (or "unknown"), the resolved config."""

import json
import os
import subprocess
import sys

from vicurl.runtime import provenance as P


def test_provenance_record(tmp_path):
    rec = P.provenance(run={"study": "main", "seed": 0}, settings={"lr": 1e-4}, config={"scenario": "x", "train": {"lr": 1e-4}},
                       repo=tmp_path, engine="local")
    json.dumps(rec)  # plain JSON
    assert rec["git"] == {"commit": "unknown", "dirty": None}  # not a git checkout
    assert rec["packages"]["torch"] and rec["packages"]["vicurl"] and "vllm" in rec["packages"]
    assert rec["config"]["train"]["lr"] == 1e-4 and rec["settings"] == {"lr": 1e-4} and rec["engine"] == "local"


def test_the_cpu_and_torchs_kernel_set_are_recorded():
    """The demo's numbers move with the instruction set torch's kernels use (docs/demo.md): the record
    names it, and follows ATEN_CPU_CAPABILITY, the variable that changes it."""
    import torch

    assert P.cpu_info()["torch_kernels"] == torch.backends.cpu.get_cpu_capability()
    code = "import json; from vicurl.runtime.provenance import cpu_info; print(json.dumps(cpu_info()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    info = json.loads(out.stdout)
    assert info["torch_kernels"] == "DEFAULT" and info["model"]


def test_git_state_names_the_commit_and_dirty_flag(tmp_path):
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f").write_text("a")
    git("add", "f")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert P.git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "f").write_text("b")
    assert P.git_state(tmp_path) == {"commit": head, "dirty": True}
