"""A first GPU session's checks, in order, within a time limit: what only a GPU shows (docs/rehearsal.md, docs/measurements.md).

    python measurements/first_gpu_checks.py OUTDIR [--minutes 30] [--only smoke shape_untied ...]

Each check runs in a process group of its own, its output written to OUTDIR/<check>.log as it goes; a check
still running at the limit (or at its own, `checks`) is ended, the whole group, and a check is skipped when
less than its minimum is left. OUTDIR/summary.txt says per check what ran, its exit code and seconds; its
first line and each log's name the card and the versions that gave the figures.

  smoke          config/gpu_smoke.yaml without the Hub (`python -m vicurl.rehearsal gpu all`): SIGTERM to the
                 train job once verl has saved step 2 (as SLURM's time limit sends it), then the same command
                 again, which resumes from that save and finishes the DAG; the run's metrics, logs and table
                 are copied to OUTDIR/smoke/
  smoke_whole    the same DAG in one go, without the interruption (about 4 minutes less)
  smoke_train    the same DAG up to the train job's end (data, training, the exports; about 6 minutes): with
                 smoke_whole after it (the evaluations and the table, about 5), the whole DAG in two sessions
                 shorter than it
  shape_untied   measurements/paper_shape_steps.py at DeepSeek-R1-Distill-Qwen-1.5B's shape (an untied head
                 on the fused route), --shape-args prompts and steps
  shape_tied     the same at Qwen2.5-Math-1.5B's shape (tied)
  shape_tied_no_sync  shape_tied with FSDP2's gradient reduce once a step (not every micro-batch) and the layers
                 kept gathered from the update's forward to its backward (verl's fsdp_config overrides)
  shape_tied_profile  shape_tied with its step traced by torch's profiler (verl's own), then where the time of
                 the old-policy pass, the reference and the update went: the GPU's busy share, its kernels, the
                 host's waits (vicurl.runtime.trace_summary)
  probe          measurements/probe_memory.py (the 1.5B shape)
  logprob        measurements/logprob_route.py
  qwen2_stall    measurements/qwen2_eval.py --parallel-op-first --fork --debug: the stalled evaluation's parent
                 recreated (multi-threaded torch work on the CPU, then vLLM forking its engine core, as before
                 vicurl.runtime.vllm_env asked for spawn): the engine start should stall, and every process print its
                 stacks after 45 s (the engine core's in the input batch's allocation, under popen_fork)
  qwen2_eval     measurements/qwen2_eval.py --parallel-op-first --problems 16: the same parent with the fix (vLLM
                 spawns): an evaluation's generation with a Qwen2-family model at the 1.5B shape (vLLM's V1
                 model runner, the default's unseeded sampler)
  attention      measurements/attention_route.py: the training passes' attention routes at the 1.5B shape

(measurements/gpu_memory.py is an estimate computed on the CPU: not a check here.) On an H200 a verl job takes
about 3 minutes to its first rollout: the smoke check needs about 15 minutes with its interruption (smoke_whole about 11), a
paper-shape one 6.5 minutes for one step (384 s: the untied 1.5B shape, --prompts 8 --steps 1), the probe
100 s (docs/measurements.md, "What has run on a GPU").
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RESULTS = {"gpu": REPO / "results" / "gpu_smoke_offline", "cpu": REPO / "results" / "gpu_smoke_cpu"}
RUN = Path("runs", "main", "qwen_0.5b_instruct", "majority_vote-vicurl", "seed0")
TRAINED = RUN / "metrics.jsonl"  # the train job's last output
AFTER_TRAIN = 240  # smoke_whole's least seconds once smoke_train is done (the evaluations and the table)


# the card and the versions that give the figures (in a process of its own: this one leaves CUDA alone)
CARD = """
import torch
from importlib.metadata import PackageNotFoundError, version
def v(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"
card = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
print(card + "; " + ", ".join(f"{n} {v(n)}" for n in ("torch", "vllm", "verl", "transformers", "ray")))
"""


def shape(model: str, out: str, extra: list[str]) -> list[str]:
    return [PY, "measurements/paper_shape_steps.py", "--model", model, "--out", out, *extra]


def checks(shape_args: list[str], work: Path) -> dict[str, tuple[list[str] | None, float, float]]:
    """name -> (command, or None for the smoke DAG's own driver; the least seconds worth starting it with;
    the most it may take)."""
    return {
        "smoke": (None, 600, 900),
        "smoke_whole": (None, 600, 900),  # AFTER_TRAIN once smoke_train is done (`least`)
        "smoke_train": (None, 300, 600),
        "shape_untied": (shape("r1_distill_1.5b", str(work / "shape_untied"), shape_args), 390, 600),
        "probe": ([PY, "measurements/probe_memory.py"], 100, 180),
        "logprob": ([PY, "measurements/logprob_route.py"], 30, 90),
        "shape_tied": (shape("qwen_math_1.5b", str(work / "shape_tied"), shape_args), 390, 600),
        # the same with the update's gradients reduced once a step and its layers kept gathered from forward to
        # backward (FSDP2's per-micro-batch work: the tied step's update ran at half its forward passes' rate)
        "shape_tied_no_sync": (shape("qwen_math_1.5b", str(work / "shape_tied_no_sync"), shape_args + [
            "--verl-override", "actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation=true",
            "--verl-override", "actor_rollout_ref.actor.fsdp_config.reshard_after_forward=false"]), 390, 600),
        "shape_tied_profile": (shape("qwen_math_1.5b", str(work / "shape_tied_profile"),
                                     shape_args + ["--profile-step", "1"]), 420, 600),
        # one model folder for both (written once)
        "qwen2_stall": ([PY, "measurements/qwen2_eval.py", "--out", str(work / "qwen2"), "--problems", "16",
                         "--parallel-op-first", "--fork", "--debug", "--dump-after", "45"], 110, 130),
        "qwen2_eval": ([PY, "measurements/qwen2_eval.py", "--out", str(work / "qwen2"), "--problems", "16",
                        "--parallel-op-first"], 180, 300),
        "attention": ([PY, "measurements/attention_route.py", "--out", str(work / "attention")], 90, 240),  # H200: 54 s
    }


def least(name: str, seconds: float, device: str) -> float:
    """The least time worth starting check ``name`` with: smoke_whole needs less once the train job is done."""
    trained = (RESULTS[device] / TRAINED).exists()
    return min(seconds, AFTER_TRAIN) if name == "smoke_whole" and trained else seconds


def start(cmd: list[str], log) -> subprocess.Popen:
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, deadline: float) -> int:
    """The exit code, or -9 after ending the process group at the deadline."""
    try:
        return proc.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                return proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                continue
        return -9


def train_job(pid: int):
    """The train job among ``pid``'s descendants: the parent of verl's loop (`vicurl.engines.verl.fit`)."""
    import psutil

    for p in psutil.Process(pid).children(recursive=True):
        try:
            if "vicurl.engines.verl.fit" in p.cmdline():
                return p.parent()
        except psutil.Error:
            continue
    return None


def smoke(log, deadline: float, out: Path, device: str = "gpu", interrupt: bool = True, train_only: bool = False) -> int:
    """The smoke DAG, interrupted once verl has saved step 2 (``interrupt``), then resumed to its end
    (``device`` cpu: the CPU rehearsal, a check of this driver); ``train_only``: up to the train job's end
    (a later run of the DAG does the rest: what is done is not done again)."""
    results = RESULTS[device]
    target = str((results / TRAINED).relative_to(REPO)) if train_only else "all"
    cmd = [PY, "-m", "vicurl.rehearsal", device, target, "--cores", "all"]
    saved = results / RUN / "_work" / "verl_checkpoints" / "latest_checkpointed_iteration.txt"
    proc = start(cmd, log)
    t0 = time.time()
    while interrupt and proc.poll() is None and time.time() < deadline:
        if saved.exists() and saved.read_text().strip() == "2":
            job = train_job(proc.pid)
            if job is not None:
                log.write(f"\n=== step 2 saved after {time.time() - t0:.0f} s: SIGTERM to the train job {job.pid}\n")
                log.flush()
                job.send_signal(signal.SIGTERM)
                break
        time.sleep(1)
    rc = finish(proc, deadline)
    log.write(f"\n=== first run ended: {rc} after {time.time() - t0:.0f} s\n")
    if interrupt:
        log.write("=== the same command again\n")
        log.flush()
        t1 = time.time()
        rc = finish(start(cmd, log), deadline)
        log.write(f"\n=== second run ended: {rc} after {time.time() - t1:.0f} s\n")
    out.mkdir(exist_ok=True)
    keep = [results / RUN / "metrics.jsonl", results / RUN / "_work" / "verl_log.jsonl",
            results / "report" / "tables" / "smoke.tex", *sorted((results / "logs").rglob("*.log"))]
    for path in keep:
        if path.exists():
            shutil.copy(path, out / "__".join(path.relative_to(results).parts))
    return rc


def keep_run(out: Path, run: Path) -> None:
    """A paper-shape run's launch log and verl's metrics, beside the check's log."""
    for name in ("launch.log", "_work/verl_log.jsonl"):
        if (run / name).exists():
            shutil.copy(run / name, out.with_name(f"{out.name}__{Path(name).name}"))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--minutes", type=float, default=30.0, help="the time limit of all checks together")
    ap.add_argument("--only", nargs="+", help="these checks, in this order (default: all, in the order above)")
    ap.add_argument("--work", type=Path, default=Path("/tmp"), help="where the paper-shape runs write")
    ap.add_argument("--device", choices=sorted(RESULTS), default="gpu",
                    help="cpu: the smoke check as the CPU rehearsal (a check of this script)")
    ap.add_argument("--shape-args", default="--prompts 8 --steps 1", help="paper_shape_steps.py's options")
    a = ap.parse_args(argv)
    end = time.time() + 60 * a.minutes
    table = checks(a.shape_args.split(), a.work)
    names = a.only or list(table)
    unknown = sorted(set(names) - set(table))
    if unknown:
        ap.error(f"unknown checks {unknown}; known: {list(table)}")
    a.outdir.mkdir(parents=True, exist_ok=True)
    summary = a.outdir / "summary.txt"
    card = subprocess.run([PY, "-c", CARD], capture_output=True, text=True).stdout.strip()
    with open(summary, "w") as s:
        s.write(f"{card}\n")
    for name in names:
        cmd, need, most = table[name]
        need, left = least(name, need, a.device), end - time.time()
        if left < need:
            line = f"{name}: skipped, {left:.0f} s left (needs {need:.0f})"
        else:
            t0 = time.time()
            deadline = min(end, t0 + most)
            with open(a.outdir / f"{name}.log", "w") as log:
                log.write(f"{card}\n")
                if cmd is None:
                    rc = smoke(log, deadline, a.outdir / "smoke", a.device, interrupt=name == "smoke",
                               train_only=name == "smoke_train")
                else:
                    rc = finish(start(cmd, log), deadline)
            if name.startswith("shape_"):
                keep_run(a.outdir / name, Path(cmd[cmd.index("--out") + 1]) / "run")
            line = f"{name}: exit {rc}, {time.time() - t0:.0f} s"
        print(line, flush=True)
        with open(summary, "a") as s:
            s.write(line + "\n")


if __name__ == "__main__":
    main()
