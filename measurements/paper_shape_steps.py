"""verl's fit() at a paper model's shape: each step's time by phase, peak memory and tokens per second.

A model with the architecture of a paper model (default Qwen2.5-Math-1.5B), randomly initialised from
its published configuration (vicurl.planning.cost.ARCHS; no download), bf16 on disk; a stand-in
byte-level BPE tokenizer of the model's vocabulary size in Qwen2.5-Instruct's chat format; made-up
prompts of about --prompt-tokens tokens. Training goes through the project's launcher
(``python -m vicurl.engines.verl.launch``, the train job's own command) with config/paper.yaml's run
(--study, --model, --reward, --curriculum: the paper's lengths 512 + 3,072, G = 8, its optimizer and
KL) and its `verl` section, except: --prompts prompts a step, --steps steps, no exports, one node of
--gpus GPUs. A random model almost never ends a response (EOS has probability 1 / vocabulary), so
every response is max_response_length long: a step's worst case.

Printed, per step, from the run's own logs: verl's timings (``timing_s/*``: gen = the rollout,
old_log_prob, ref, update_actor, the weight sync, the whole step), its ``perf/*`` (the actor's peak
memory, tokens per second per GPU), the tokens of the step; on CUDA also the peak memory of the whole
GPU (every process: vLLM and the actor; NVML's count), sampled every 0.5 s. The figures for
vicurl.planning.cost's throughput assumptions and gpu_memory.py's factors come from here (name the
card; converting to an A100 is an assumption). One GPU holds the 1.5B and 3B shapes on an 80 GB card;
the 7B shape, and any shape on a 40 GB A100, needs the paper's 8 GPUs (--gpus 8: its weights and AdamW
moments are sharded over them; docs/paper.md, "GPU memory (estimated)"). On an H200 a run takes about 3 minutes to
its first rollout (docs/measurements.md, "What has run on a GPU").

    python measurements/paper_shape_steps.py --out /tmp/shape                       # a GPU: 16 prompts, 3 steps
    python measurements/paper_shape_steps.py --out /tmp/shape --prompts 64 --steps 2
    python measurements/paper_shape_steps.py --out /tmp/shape --prompts 8 --steps 1 \\
        --verl-override actor_rollout_ref.actor.fsdp_config.use_no_sync_for_gradient_accumulation=true
    python measurements/paper_shape_steps.py --out /tmp/shape --prompts 8 --steps 1 --profile-step 1  # traced
    python measurements/paper_shape_steps.py --out /tmp/shape --cpu --layers 1 --vocab 4096 \\
        --max-response-length 32 --prompt-tokens 40 --prompts 4 --steps 2   # the script itself, on a CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from vicurl.config import runs
from vicurl.config.checks import read_file as load_config
from vicurl.config.settings import VerlSettings
from vicurl.planning.cost import ARCHS, model_classes
from vicurl.rehearsal.stand_ins import CHATML

REPO = Path(__file__).resolve().parents[1]

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # Qwen2.5's, last in its vocabulary as there


def stand_in_tokenizer(vocab_size: int):
    """A byte-level BPE tokenizer of exactly ``vocab_size`` tokens in Qwen2.5-Instruct's chat format: the
    256 byte symbols, then merges of every token with every byte symbol, level by level, until full
    (so every id a random model samples decodes; a newline is one token, as verl's token builder asks)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    vocab, merges, level = {c: i for i, c in enumerate(symbols)}, [], symbols
    while len(vocab) < vocab_size - len(SPECIAL):
        longer = []
        for a in level:
            for b in symbols:
                if len(vocab) == vocab_size - len(SPECIAL):
                    break
                merges.append((a, b))
                vocab[a + b] = len(vocab)
                longer.append(a + b)
        level = longer
    backend = Tokenizer(models.BPE(vocab, merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>"], model_max_length=32768)
    tok.chat_template = CHATML
    return tok


def write_model(out: Path, hub_id: str, layers: int | None, vocab: int | None, seed: int = 0) -> None:
    """A randomly initialised model of ``hub_id``'s architecture (bf16) and a stand-in tokenizer of its size."""
    import torch

    kind, kw = ARCHS[hub_id]
    kw = {**kw, **({"num_hidden_layers": layers} if layers else {}), **({"vocab_size": vocab} if vocab else {})}
    cfg_cls, model_cls = model_classes(kind)
    tok = stand_in_tokenizer(kw["vocab_size"])
    cfg = cfg_cls(**kw, bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                  max_position_embeddings=32768, torch_dtype="bfloat16")
    torch.manual_seed(seed)
    model = model_cls(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    tok.save_pretrained(out)


def write_train_set(path: Path, model_dir: Path, n: int, tokens: int, seed: int = 0) -> None:
    """``n`` made-up problems of about ``tokens`` tokens each (their answers never matter: the model is random)."""
    import random

    from transformers import AutoTokenizer

    from vicurl.data import schema

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    rng = random.Random(seed)

    def question() -> str:  # lowercase words, cut at ``tokens`` tokens
        words = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                         for _ in range(2 * tokens))
        return tok.decode(tok(words)["input_ids"][:tokens])

    rows = [schema.make_row(id=f"p{i}", source="made-up", answer="1", question=question()) for i in range(n)]
    schema.write(schema.to_frame(rows, "made-up"), path)


class GpuMemory:
    """The peak memory in use on GPU 0 by every process, sampled every ``every`` s through NVML (the driver's
    count: this process holds no CUDA context, which would add its own to the figure)."""

    def __init__(self, every: float = 0.5):
        self.peak, self._stop, self._used = 0, threading.Event(), None
        try:
            import pynvml  # nvidia-ml-py, which vLLM requires

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._used = lambda: pynvml.nvmlDeviceGetMemoryInfo(handle).used
        except Exception:  # no NVIDIA driver (a CPU run): no figure
            pass
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)

    def _run(self, every):
        while not self._stop.wait(every):
            self.peak = max(self.peak, self._used())

    def __enter__(self):
        if self._used:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


def verl_rows(path: Path) -> list[dict]:
    """verl's file logger's lines: {"step": s, "data": {metric: value}} (or the metrics alone)."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        d = json.loads(line)
        rows.append({"step": d.get("step"), **(d.get("data") or {k: v for k, v in d.items() if k != "step"})})
    return rows


def profiling(step: int | None, folder: Path, cpu: bool) -> list[str]:
    """verl's overrides that trace ``step``'s actor and reference passes with torch's profiler, a trace a stage
    (``discrete``: the old-policy pass, the reference, the update apart), the GPU's kernels included; not the
    rollout."""
    if not step:
        return []
    tool = "actor_rollout_ref.actor.profiler.tool_config.torch"
    return ["global_profiler.tool=torch", f"global_profiler.steps=[{step}]", f"global_profiler.save_path={folder}",
            "actor_rollout_ref.actor.profiler.enable=true", f"{tool}.discrete=true",
            f"{tool}.contents=[{'cpu' if cpu else 'cpu,cuda'}]",
            "actor_rollout_ref.rollout.profiler.enable=false"]  # it follows the actor's: vLLM's decoding, traced, is large


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--out", type=Path, required=True, help="a folder for the model, the data and the run")
    ap.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    ap.add_argument("--study", default="main")
    ap.add_argument("--model", default="qwen_math_1.5b", help="a model of the config (its hub_id's architecture)")
    ap.add_argument("--reward", default="majority_vote")
    ap.add_argument("--curriculum", default="vicurl")
    ap.add_argument("--prompts", type=int, default=16, help="prompts a step (the paper: 128 on 8 GPUs)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--prompt-tokens", type=int, default=400, help="tokens of a made-up question, about")
    ap.add_argument("--max-response-length", type=int, help="default: the config's (3,072)")
    ap.add_argument("--layers", type=int, help="fewer layers than the published model (a check of the script)")
    ap.add_argument("--vocab", type=int, help="a smaller vocabulary (a check of the script)")
    ap.add_argument("--cpu", action="store_true",
                    help="vLLM's CPU build and config/gpu_smoke_cpu.yaml's verl settings (vicurl.rehearsal.cpu)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds before the run is ended")
    ap.add_argument("--verl-override", action="append", default=[], metavar="KEY=VALUE",
                    help="a Hydra override of verl's config after the project's (verl.overrides), e.g. a setting "
                         "tried for speed; repeatable")
    ap.add_argument("--profile-step", type=int, metavar="N",
                    help="trace step N's actor passes with torch's profiler (verl's own, a file a stage under "
                         "<out>/run/profile) and print where their time went (vicurl.runtime.trace_summary)")
    a = ap.parse_args(argv)

    cfg = load_config(a.config)
    run = runs.Run(a.study, a.model, a.reward, a.curriculum, 0)
    settings = runs.train_settings(cfg, run)
    settings.update(batch_size=a.prompts, total_steps=a.steps, export_steps=[], save_every=a.steps + 1,
                    **({"max_response_length": a.max_response_length} if a.max_response_length else {}))
    verl = VerlSettings.from_dict(cfg.get("verl")).for_model(a.model).__dict__ | {"n_gpus_per_node": a.gpus,
                                                                                  "nnodes": 1, "models": {}}
    env = dict(os.environ)
    if a.cpu:
        from vicurl.rehearsal.cpu import environment

        env.update(environment())
        cpu = yaml.safe_load((REPO / "config" / "gpu_smoke_cpu.yaml").read_text())["verl"]
        verl = {**verl, **cpu, "overrides": list(verl.get("overrides") or []) + cpu["overrides"]}
    traces = (a.out / "run" / "profile").resolve()  # absolute: verl's workers run in folders of their own
    verl["overrides"] = list(verl.get("overrides") or []) + profiling(a.profile_step, traces, a.cpu) + a.verl_override

    a.out.mkdir(parents=True, exist_ok=True)
    model_dir, train_set, work = a.out / "model", a.out / "train.parquet", a.out / "run"
    hub_id = cfg["models"][a.model]["hub_id"]
    if not (model_dir / "config.json").exists():
        write_model(model_dir, hub_id, a.layers, a.vocab)
    vocab = a.vocab or ARCHS[hub_id][1]["vocab_size"]
    write_train_set(train_set, model_dir, 2 * a.prompts * a.steps, a.prompt_tokens)
    shutil.rmtree(work, ignore_errors=True)  # a run left here would be resumed, and its figures reported again
    work.mkdir()
    (work / "settings.json").write_text(json.dumps(settings))
    (work / "verl.json").write_text(json.dumps(verl))
    cmd = [sys.executable, "-m", "vicurl.engines.verl.launch", "--settings", str(work / "settings.json"),
           "--model", str(model_dir), "--train-set", str(train_set), "--work-dir", str(work / "_work"),
           "--checkpoints", str(work / "checkpoints"), "--metrics", str(work / "metrics.jsonl"),
           "--verl-config", str(work / "verl.json"), "--exit-with-parent"]  # this script ended: the run ends too
    t0 = time.time()
    with GpuMemory() as gpu, open(work / "launch.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            rc = proc.wait(timeout=a.timeout)
        except subprocess.TimeoutExpired:  # SIGTERM: the launcher ends verl's loop, Ray and vLLM, then exits
            proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:  # a launcher that hangs: its run ends with it (--exit-with-parent)
                proc.kill()
            sys.exit(f"the run took over {a.timeout} s and was ended; its log: {work / 'launch.log'}")
    wall = time.time() - t0
    if rc != 0:
        sys.exit(f"the run failed ({rc}); its log: {work / 'launch.log'}")

    rows = verl_rows(work / "_work" / "verl_log.jsonl")
    import torch

    card = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(f"{card}; {hub_id}{f' ({a.layers} layers)' if a.layers else ''}, vocabulary {vocab}, random weights; "
          f"{a.prompts} prompts x G {settings['group_size']}, {settings['max_prompt_length']} + "
          f"{settings['max_response_length']} tokens, {a.reward} + {a.curriculum}, {a.gpus} GPU(s); {wall:.0f} s in all")
    keys = sorted({k for r in rows for k in r if k.startswith(("timing_s/", "perf/"))
                   or k in ("response_length/mean", "prompt_length/mean")})
    print(f"{'metric':<40}" + "".join(f"{'step ' + str(r['step']):>12}" for r in rows))
    for k in keys:
        print(f"{k:<40}" + "".join(f"{r[k]:>12.4g}" if isinstance(r.get(k), (int, float)) else f"{'-':>12}"
                                   for r in rows))
    if gpu.peak:
        print(f"peak GPU memory in use (all processes): {gpu.peak / 2**30:.1f} GiB")
    if a.profile_step:
        from vicurl.runtime.trace_summary import load, report, summarize

        files = sorted(traces.rglob("*.json*"))
        if not files:
            sys.exit(f"step {a.profile_step} was to be traced, and verl wrote no trace under {traces}")
        for path in files:
            print(report(path.relative_to(traces.parent), summarize(load(path))), flush=True)
    print(f"the run: {work}")


if __name__ == "__main__":
    main()
