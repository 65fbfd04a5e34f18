"""The cost model's table (`vicurl.planning.cost`): estimated A100 time of every GPU rule (and grade), per job
and in total, for a config; and each job extrapolated to this CPU, measured here: why these rules need a GPU.

The CPU figures are measured on a Qwen2 configuration at reduced size with random weights, through the
project's own code (``vicurl.models.sampling.sample``'s generate call and the local engine's
``sequence_logprobs`` + backward), and on grading synthetic responses. Every throughput the estimate assumes
is an option (``--vllm-tps-1p5b 12000``, ...; `vicurl.planning.cost.Assumptions`).

    .venv/bin/python measurements/gpu_time_estimate.py                # measure (about a minute), then the table
    .venv/bin/python measurements/gpu_time_estimate.py --no-measure   # the table alone
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vicurl.config import checks
from vicurl.planning import cost

REPO = Path(__file__).resolve().parents[1]
# A Qwen2 at reduced size for the CPU measurements (random weights)
REDUCED = ("qwen2", dict(hidden_size=512, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=2, vocab_size=32768, tie_word_embeddings=True))


@dataclass
class Cpu:
    sample_flops: float = float("nan")  # effective FLOP/s of sampling (generate)
    grad_flops: float = float("nan")  # of forward + backward of one sequence
    grade_rate: float = float("nan")  # graded samples per second
    lines: list[str] = field(default_factory=list)

    def seconds(self, job: cost.Job) -> float:
        """The job's time extrapolated to this CPU (grade: its samples at the measured grading rate)."""
        if job.rule == "grade":
            return job.tokens / self.grade_rate
        return job.gen_flops / self.sample_flops + job.grad_flops / self.grad_flops


def measure_cpu(threads: int, seed: int = 0) -> Cpu:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from vicurl.engines.rollout import sequence_logprobs
    from vicurl.models.sampling import Rollouts, response_mask_from_ids

    torch.set_num_threads(threads)
    arch = cost.arch_of(*REDUCED)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(**REDUCED[1])).eval()
    out = Cpu()
    out.lines.append(f"CPU: {threads} threads, Qwen2 at reduced size (random weights): {arch.n_total / 1e6:.1f}M "
                     f"parameters ({arch.n_flop / 1e6:.1f}M per token), fp32")

    # sampling: the generate call of vicurl.models.sampling.sample (top_k off, temperature 1), 16 x 64 new tokens
    batch, prompt, new = 16, 64, 64
    ids = torch.randint(3, REDUCED[1]["vocab_size"], (batch, prompt), generator=torch.Generator().manual_seed(seed))
    gen_cfg = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new,
                               min_new_tokens=new, pad_token_id=0, eos_token_id=1)
    with torch.no_grad():
        model.generate(input_ids=ids[:2, :8], attention_mask=torch.ones(2, 8, dtype=torch.long),
                       generation_config=GenerationConfig(**{**gen_cfg.to_dict(), "max_new_tokens": 2, "min_new_tokens": 2}))
        t = time.perf_counter()
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gen_cfg)
        dt = time.perf_counter() - t
    produced = batch * (gen.shape[1] - prompt)
    tps = produced / dt
    out.sample_flops = tps * arch.fwd_flops(prompt + new / 2)
    out.lines.append(f"  sampling (HF generate, batch {batch}, {prompt} + {new} tokens): {tps:,.0f} tokens/s = "
                     f"{out.sample_flops / 1e9:.1f} GFLOP/s effective (2N + attention per token)")

    # per-rollout gradient: the local engine's sequence_logprobs of one 512-token sequence, then backward
    p_len, r_len = 128, 384
    g = torch.Generator().manual_seed(seed + 1)
    r_ids = torch.randint(3, REDUCED[1]["vocab_size"], (1, r_len), generator=g)
    mask, trunc = response_mask_from_ids(r_ids, 1)
    ro = Rollouts(torch.randint(3, REDUCED[1]["vocab_size"], (1, p_len), generator=g), torch.ones(1, p_len, dtype=torch.long),
                  r_ids, mask, [""], trunc)
    model.train()
    reps, dt = 3, 0.0
    for i in range(reps + 1):  # the first is a warm-up
        model.zero_grad(set_to_none=True)
        t = time.perf_counter()
        lp, _ = sequence_logprobs(model, ro, torch.tensor([0]), 1.0, with_entropy=False)
        (-(lp * mask).sum() / mask.sum()).backward()
        if i:
            dt += time.perf_counter() - t
    tps = reps * (p_len + r_len) / dt
    out.grad_flops = tps * 3 * arch.fwd_flops((p_len + r_len) / 2)
    out.lines.append(f"  per-rollout gradient (forward + backward, one {p_len} + {r_len}-token sequence): {tps:,.0f} "
                     f"tokens/s = {out.grad_flops / 1e9:.1f} GFLOP/s effective (6N + attention per token)")

    out.grade_rate = measure_grading(seed)
    out.lines.append(f"  grading (grade_records, 1,000 synthetic 12k-character responses, 5 % needing the symbolic "
                     f"check): {out.grade_rate:,.0f} samples/s")
    return out


def measure_grading(seed: int, n: int = 1000) -> float:
    import random

    import pandas as pd

    from vicurl.evaluation.grade import grade_records

    rng = random.Random(seed)
    filler = "We compute the quantity step by step, checking each case. " * 200  # ~12k characters, ~3k tokens
    golds, texts = [], []
    for i in range(n):
        a, b = rng.randint(1, 99), rng.randint(2, 99)
        if i % 20 == 0:  # fractions written differently: the symbolic path
            golds.append(f"\\frac{{{a}}}{{{b}}}")
            texts.append(f"<think>{filler}</think> The answer is \\boxed{{{a}/{b} + 0}}.")
        else:
            golds.append(str(a))
            texts.append(f"<think>{filler}</think> The answer is \\boxed{{{a if rng.random() < 0.5 else b}}}.")
    problems = pd.DataFrame({"id": [f"p{i}" for i in range(n)], "answer": golds, "answer_type": ["math"] * n})
    samples = pd.DataFrame({"problem_id": problems["id"], "sample_idx": 0, "text": texts})
    t = time.perf_counter()
    grade_records(samples, problems)
    return n / (time.perf_counter() - t)


NOTES = {
    "train": "verl, 8 GPUs: vLLM rollouts + fwd (old) + fwd (ref) and fwd/bwd of the kept rows in bf16 at MFU {mfu_train:.1%} (an H200's measured {h200_share:.3f} at 1.5B on the varlen route, an A100 40GB assumed {a100_factor:g}x slower; the update x {update_without_checkpointing:.2f} without gradient checkpointing, measured); +{verl_step_overhead_s:.0f} s/step, +{verl_save_s:.0f} s a save; LM head (verl's fused kernels) at {head_share_fwd:.1%} (fwd) and {head_share_train:.1%} (fwd/bwd) of peak (an H200's measured shares)",
    "generate_checkpoint": "vLLM, 1 GPU, a checkpoint's benchmarks: {vllm_tps_1p5b:,.0f} tok/s at 1.5B (x 1.5B/N), >= max_new x {vllm_step_s:.3f} s, +{vllm_start_s:.0f} s start",
    "prompt_stats": "as generate_checkpoint (eval.engine vllm): k samples of every training prompt",
    "probe": "HF generate bf16 {hf_tps_1p5b:,.0f} tok/s at 1.5B; FP32 scoring + 4 x 256 fwd/bwd at {util_fp32:.0%} of 19.5 TFLOP/s",
    "grade": "CPU only (no GPU), a run's samples (all its checkpoints) / the measured grading rate",
}


def fmt_h(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    h = seconds / 3600
    return f"{h:,.0f}" if h >= 100 else f"{h:,.1f}" if h >= 1 else f"{h:.2g}"


def table(jobs: list[cost.Job], A: cost.Assumptions, cpu: Cpu) -> list[str]:
    groups: dict[tuple[str, str], list[cost.Job]] = defaultdict(list)
    for j in jobs:
        groups[(j.rule, j.model)].append(j)
    head = (f"{'rule':<20}{'model':<18}{'jobs':>7}{'tokens/job':>13}{'GPUs':>5}{'h/job':>8}{'max h':>8}"
            f"{'runtime h':>10}{'A100 h total':>14}{'CPU h/job here':>16}")
    lines = [head, "-" * len(head)]
    totals: dict[str, float] = defaultdict(float)
    order = ["train", "generate_checkpoint", "prompt_stats", "probe", "grade"]
    for (rule, model), js in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
        n = len(js)
        mean_tokens = sum(j.tokens for j in js) / n
        mean_wall, max_wall = sum(j.wall_s for j in js) / n, max(j.wall_s for j in js)
        gpu_h = sum(j.gpu_hours for j in js)
        totals[rule] += gpu_h
        over = [j for j in js if j.runtime_min is not None and j.gpus and j.wall_s / 60 > j.runtime_min]
        runtime = min(j.runtime_min for j in js if j.runtime_min is not None) / 60
        cpu_s = sum(cpu.seconds(j) for j in js) / n
        if rule == "grade":  # CPU rule: its hours are CPU hours on this machine
            mean_wall, max_wall = cpu_s, max(cpu.seconds(j) for j in js)
            gpu_h = float("nan")
        lines.append(f"{rule:<20}{model:<18}{n:>7,}{mean_tokens:>13,.3g}{js[0].gpus:>5}{fmt_h(mean_wall):>8}"
                     f"{fmt_h(max_wall):>8}{runtime:>9.0f}{'!' if over else ' '}"
                     f"{(f'{gpu_h:,.0f}' if gpu_h == gpu_h else '-'):>14}{fmt_h(cpu_s):>16}")
    lines.append("-" * len(head))
    lines.append("A100 hours by rule: " + ", ".join(f"{r} {totals[r]:,.0f}" for r in order if r in totals and r != "grade")
                 + f"; all GPU rules {sum(v for r, v in totals.items() if r != 'grade'):,.0f}")
    lines.append("tokens/job: tokens generated, plus those scored/trained on (train, probe); grade: samples graded.")
    lines.append("h/job, max h: wall-clock hours of a job on its GPUs (grade: CPU hours at this machine's measured rate);")
    lines.append("runtime h: the SLURM profile's runtime at attempt 1 (! = some job's estimate exceeds it).")
    lines.append("Assumptions per rule:")
    for rule in order:
        lines.append(f"  {rule:<20}" + NOTES[rule].format(**A.__dict__, h200_share=A.mfu_train * A.a100_factor))
    lines.append(f"  all          responses at {A.length_fraction:.0%} of max_new_tokens (an upper bound; time scales with it),"
                 f" prompts {A.prompt_tokens:.0f} tokens")
    return lines


def main(argv=None) -> None:
    A = cost.Assumptions()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    ap.add_argument("--profile", type=Path, default=REPO / "slurm-a100" / "config.yaml")
    ap.add_argument("--no-measure", action="store_true", help="skip the CPU measurements")
    ap.add_argument("--threads", type=int, default=2)
    for name, value in A.__dict__.items():  # --mfu-train unset: recomputed from the other figures given
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=None if name == "mfu_train" else value)
    args = ap.parse_args(argv)
    A = cost.Assumptions(**{k: getattr(args, k) for k in A.__dict__})
    cpu = Cpu() if args.no_measure else measure_cpu(args.threads)
    cfg = checks.read(yaml.safe_load(args.config.read_text()))  # as the workflow reads it: checked, defaults filled
    profile = yaml.safe_load(args.profile.read_text())
    jobs = cost.jobs(cfg, A, profile, workdir=REPO)
    print(f"config {args.config}, profile {args.profile}")
    print("Measured on this CPU:" if cpu.lines else "CPU not measured (--no-measure).")
    for line in cpu.lines:
        print(line)
    print("Models (parameters; per-token matmul parameters N):")
    for m, spec in cfg["models"].items():
        a, where = cost.architecture(cfg, m, REPO)
        print(f"  {m:<18}{spec.get('hub_id', ''):<44}{a.n_total / 1e9:.2f}B; N {a.n_flop / 1e9:.2f}B ({where})")
    print("Set sizes (rows): " + ", ".join(
        f"{n} {cost.dataset_size(cfg, n, REPO)[0]:,}" + (f" ({w})" if (w := cost.dataset_size(cfg, n, REPO)[1]) != "card" else "")
        for n in cfg["datasets"]))
    print()
    for line in table(jobs, A, cpu):
        print(line)


if __name__ == "__main__":
    main()
