"""measurements/attention_route.py, the GPU check of the training passes' attention, rehearsed on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

from harness import REPO


def test_the_attention_routes_script_runs_and_its_routes_agree(tmp_path):
    """`--cpu` (a reduced model in fp32, a pack of 4 sequences): every route timed forward and forward + backward
    with and without checkpointing, its figures written as it goes, and the launcher's route and one sequence at
    a time give the dense-mask pack's log-probs to fp32 rounding, and the fp32 reference's; the update in
    one-sequence micro-batches timed on the launcher's route."""
    out = subprocess.run([sys.executable, str(REPO / "measurements" / "attention_route.py"), "--cpu", "--reps", "1",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads((tmp_path / "attention_route.json").read_text())
    routes = figures["routes"]
    assert set(routes) == {"sdpa_pack", "one_at_a_time", "varlen"}
    for r in routes.values():
        assert all(r[k] > 0 for k in ("forward_s", "train_s_checkpointing", "train_s_no_checkpointing"))
        assert r["max_abs_logprob_diff_vs_sdpa_pack"] < 1e-4
        assert r["max_abs_logprob_diff_vs_fp32"] < 1e-4  # fp32 already: the reference agrees with every route
    assert routes["varlen"]["train_s_no_checkpointing_one_sequence_a_micro_batch"] > 0
    assert "varlen against sdpa_pack" in out.stdout and "every route within" in out.stdout


def test_a_route_that_lets_sequences_see_each_other_fails_the_script(tmp_path):
    """The check's verdict: with the launcher's attention reading the whole pack as one sequence (each
    token attending to the sequences before its own too), the script exits non-zero naming the route,
    its figures written."""
    code = ("import runpy, sys, torch; from vicurl.engines.verl import varlen_attention as v; "
            "v.segments = lambda pos: torch.tensor([0, pos.numel()], dtype=torch.int32, device=pos.device); "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code, str(REPO / "measurements" / "attention_route.py"), "--cpu",
                          "--reps", "1", "--routes", "sdpa_pack", "varlen", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode != 0 and "varlen further from the fp32 log-probs" in out.stderr, out.stderr[-2000:]
    figures = json.loads((tmp_path / "attention_route.json").read_text())
    assert figures["routes"]["varlen"]["max_abs_logprob_diff_vs_fp32"] > figures["limit_vs_fp32"]
