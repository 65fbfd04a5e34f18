"""An evaluation job's generation with a Qwen2-family model at a paper model's shape, timed.

A randomly initialised model of DeepSeek-R1-Distill-Qwen-1.5B's architecture (Qwen2, untied head; no
download; paper_shape_steps.write_model) samples config/paper.yaml's evaluation (n, temperature, top_p,
max_new_tokens, eval.vllm) for made-up problems through the evaluation's own vLLM code
(``vicurl.evaluation.vllm_generate``) with the default ``reproducible: false``: unseeded requests, so vLLM
takes its batched top-p sampler (FlashInfer's off, `vicurl.runtime.vllm_env`), the path every paper evaluation takes;
vLLM 0.24 serves ``Qwen2ForCausalLM`` with its V1 model runner (the smoke rehearsal's Llama takes the V2 one).
A random model seldom ends a response (EOS has probability 1 / vocabulary a token): nearly every sample is
max_new_tokens long, an evaluation's worst case.

Printed: the engine's start, the generation's time and tokens a second, and checks of the records (one per
problem and sample, the evaluation's columns, a sample marked truncated exactly where it reached max_new_tokens).

The engine start that stalled on an H200 (docs/gpu.md, "How vLLM starts its processes"), recreated:
``--parallel-op-first`` runs a multi-threaded torch op on the CPU before vLLM starts (the stalled process had
converted the model to bf16 on the CPU) and prints torch's OpenMP library and threads; ``--fork`` has vLLM fork
its processes, as before `vicurl.runtime.vllm_env` asked for spawn. With both the engine core should stall (its stacks,
dumped after ``--dump-after`` seconds, in the input batch's allocation, their bottom frames in popen_fork);
with the first alone it starts. ``--debug``: vLLM's DEBUG log.

    python measurements/qwen2_eval.py --out /tmp/qwen2_eval                       # a GPU: 40 problems x 16
    python measurements/qwen2_eval.py --out /tmp/qwen2_eval --parallel-op-first --fork --debug --dump-after 60
    .venv-vllm/bin/python measurements/qwen2_eval.py --out /tmp/qwen2_eval --cpu --layers 1 --vocab 4096 \\
        --max-new-tokens 16 --samples 2 --problems 4     # the script itself on a CPU (vLLM's CPU build)

vLLM's CPU build crashes at this Qwen2 shape (docs/measurements.md, "vLLM's CPU build at a Qwen2 shape"): the CPU
command checks the script, not vLLM.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from paper_shape_steps import write_model

from vicurl.config.checks import read_file as load_config

REPO = Path(__file__).resolve().parents[1]


def problems(n: int):
    """``n`` made-up problems in the evaluation's table layout (the CPU rehearsal's AMC 2023 stand-in)."""
    from vicurl.data import synthetic
    from vicurl.rehearsal.stand_ins import SPLITS

    rows = synthetic.make_splits({"eval": {**SPLITS["eval"], "n": n}}, 0)["eval"]
    return rows.assign(id=[str(i) for i in range(len(rows))])[["id", "question", "answer"]]


def stack_dumps(site: Path) -> None:
    """On SIGUSR1 this process and every Python process started after this call print their stacks (faulthandler,
    registered here and, through a ``sitecustomize`` written to ``site`` and put on PYTHONPATH, in the processes
    vLLM spawns or forks)."""
    site.mkdir(parents=True, exist_ok=True)
    Path(site, "sitecustomize.py").write_text(
        "import faulthandler, signal\nfaulthandler.register(signal.SIGUSR1, all_threads=True)\n")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    faulthandler.register(signal.SIGUSR1, all_threads=True)


@contextlib.contextmanager
def stacks_after(seconds: float):
    """A stalled block diagnosed: after ``seconds`` inside it, SIGUSR1 to this process and its children (after
    ``stack_dumps``), which print their Python stacks to stderr and go on. The first GPU run's engine start
    stalled for 3 minutes without a log line."""
    done = threading.Event()

    def watch():
        if done.wait(seconds):
            return
        import psutil

        print(f"=== not done after {seconds:.0f} s: every process's Python stacks", flush=True)
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=watch, daemon=True).start()
    try:
        yield
    finally:
        done.set()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="a folder for the model (and the stack dumps' sitecustomize)")
    ap.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    ap.add_argument("--hub-id", default="deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B")
    ap.add_argument("--problems", type=int, default=40, help="AMC 2023 has 40")
    ap.add_argument("--samples", type=int, help="default: the config's eval.n_samples")
    ap.add_argument("--max-new-tokens", type=int, help="default: the config's eval.max_new_tokens")
    ap.add_argument("--layers", type=int, help="fewer layers than the published model (a CPU check)")
    ap.add_argument("--vocab", type=int, help="a smaller vocabulary (a CPU check)")
    ap.add_argument("--cpu", action="store_true",
                    help="vLLM's CPU build with the CPU rehearsal's environment (a check of the script)")
    ap.add_argument("--dump-after", type=float, default=150.0,
                    help="seconds of engine start after which every process prints its Python stacks")
    ap.add_argument("--parallel-op-first", action="store_true",
                    help="a multi-threaded torch op on the CPU before vLLM starts (the stalled run's parent)")
    ap.add_argument("--fork", action="store_true", help="vLLM forks its processes (before the fix: spawn)")
    ap.add_argument("--debug", action="store_true", help="vLLM's DEBUG log (VLLM_LOGGING_LEVEL)")
    a = ap.parse_args(argv)
    stack_dumps(a.out / "stack_dumps")  # before any process starts
    if a.cpu:
        from vicurl.rehearsal.cpu import environment

        os.environ.update(environment())
    if a.fork:
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"  # kept by vllm_env.prepare: a value set wins
    if a.debug:
        os.environ["VLLM_LOGGING_LEVEL"] = "DEBUG"

    from vicurl.config.settings import SamplingSettings
    from vicurl.evaluation.records import RECORD_COLUMNS
    from vicurl.evaluation.vllm_generate import generate_sets_vllm, requests, start_engine

    ev = load_config(a.config)["eval"]
    sampling = SamplingSettings(n=a.samples or ev["n_samples"], temperature=ev["temperature"], top_p=ev["top_p"],
                                max_new_tokens=a.max_new_tokens or ev["max_new_tokens"], seed=0)
    assert not sampling.reproducible, "the default's path: unseeded requests"
    model_dir = a.out / "model"
    t0 = time.time()
    if not (model_dir / "config.json").exists():
        # in a process of its own: an evaluation job finds its model on disk and starts vLLM from a process
        # that has run no torch work (the first GPU run wrote the model here, then vLLM's engine core stalled)
        part = model_dir.with_name(model_dir.name + ".part")  # renamed when whole: a killed run leaves no half model
        shutil.rmtree(part, ignore_errors=True)
        writer = multiprocessing.get_context("spawn").Process(target=write_model,
                                                              args=(part, a.hub_id, a.layers, a.vocab))
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            sys.exit(f"writing the model failed ({writer.exitcode})")
        shutil.rmtree(model_dir, ignore_errors=True)  # a folder an older run left without its config
        part.rename(model_dir)
    print(f"model written: {time.time() - t0:.0f} s", flush=True)

    table = problems(a.problems)
    _, _, args = requests(str(model_dir), {"amc23": table}, sampling, ev.get("vllm"))  # as the evaluation starts vLLM
    if a.parallel_op_first:
        import torch

        x = torch.randn(2048, 2048)
        float((x @ x).sum())  # torch's OpenMP threads now exist in this process
        print(f"a parallel op ran first: {torch.get_num_threads()} threads\n{torch.__config__.parallel_info()}",
              flush=True)
    print(f"vLLM starts its processes by {os.environ.get('VLLM_WORKER_MULTIPROC_METHOD', 'spawn (vicurl.runtime.vllm_env)')}",
          flush=True)
    t0 = time.time()
    with stacks_after(a.dump_after):
        llm = start_engine(str(model_dir), sampling.seed, args)
    start = time.time() - t0
    print(f"vLLM engine started: {start:.0f} s ({args})", flush=True)
    t0 = time.time()
    records = generate_sets_vllm(str(model_dir), {"amc23": table}, sampling, llm=llm)["amc23"]
    gen = time.time() - t0
    tokens = int(records["n_tokens"].sum())

    import torch

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"{card}; {a.hub_id}{f' ({a.layers} layers)' if a.layers else ''}, random weights, "
          f"{len(table)} problems x {sampling.n} samples, at most {sampling.max_new_tokens} new tokens, "
          f"temperature {sampling.temperature}, top_p {sampling.top_p}, unseeded requests")
    print(f"engine start {start:.1f} s; generation {gen:.1f} s, {tokens} tokens, {tokens / gen:.0f} tokens/s; "
          f"{records['truncated'].mean():.1%} of the samples cut at max_new_tokens")
    checks = {
        "the evaluation's columns": list(records.columns) == list(RECORD_COLUMNS),
        "one record per problem and sample": len(records) == len(table) * sampling.n,
        "every sample within max_new_tokens": bool((records["n_tokens"] <= sampling.max_new_tokens).all()),
        "truncated where a sample reached max_new_tokens": bool(
            (records["truncated"] == (records["n_tokens"] == sampling.max_new_tokens)).all()),
    }
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
