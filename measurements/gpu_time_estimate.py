"""Estimated A100 time of every GPU rule (and grade) at paper scale, per job and in total.

The work of each job follows from config/paper.yaml (the same run, evaluation and probe lists
as the workflow: ``vicurl.runs``) and the models' real architectures (parameter counts from
their published transformers configs, no download). Time = work / throughput, with
the throughputs stated below as assumptions (each a command-line option):

* FLOPs per token: 2 N forward, 6 N forward + backward, N the parameters a token's matmuls use
  (everything but the input embedding), plus attention, 4 * layers * width * (context the token
  attends to) forward: half the sequence when training, prompt + half the response when decoding
  (about 10 % at 3k tokens for the 1.5B models).
* A100 peaks: bf16 tensor cores 312 TFLOP/s (verl trains in bf16); FP32 19.5 TFLOP/s (the
  probe keeps float32 weights and torch's default full-FP32 matmuls).
* vLLM decoding: tokens/s per A100 for a 1.5B model at large batch, scaled by 1.5B / N (decoding
  is bound by reading the weights and the KV cache); a job also lasts at least max-new-tokens
  decode steps (the longest sample) and pays an engine start.
* HF ``generate`` (the probe's rollouts, bf16, one padded batch of 256): its own tokens/s.
* Responses are max_new_tokens long (``--length-fraction 1``): an upper bound; time scales with it.

The CPU figures are measured here, on a Qwen2 configuration at reduced size with random
weights, through the project's own code (``vicurl.sampling.sample``'s generate call and the
local engine's ``sequence_logprobs`` + backward), and on grading synthetic responses; the table
extrapolates each job to this CPU as well: why these rules need the GPU.

    .venv/bin/python measurements/gpu_time_estimate.py                # measure (about a minute), then the table
    .venv/bin/python measurements/gpu_time_estimate.py --no-measure   # the table alone
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from vicurl import runs as runs_lib  # noqa: E402

# The paper's models (config `models.*.hub_id`): their published transformers configs
ARCHS = {
    "Qwen/Qwen2.5-Math-1.5B": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                             num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                             tie_word_embeddings=True)),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": ("qwen2", dict(hidden_size=1536, intermediate_size=8960,
                                                                num_hidden_layers=28, num_attention_heads=12,
                                                                num_key_value_heads=2, vocab_size=151936,
                                                                tie_word_embeddings=False)),
    "meta-llama/Llama-3.2-3B-Instruct": ("llama", dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                                                       num_attention_heads=24, num_key_value_heads=8, vocab_size=128256,
                                                       tie_word_embeddings=True)),
    "Qwen/Qwen2.5-Math-7B": ("qwen2", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                           num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
                                           tie_word_embeddings=False)),
}
# A Qwen2 at reduced size for the CPU measurements (random weights)
REDUCED = ("qwen2", dict(hidden_size=512, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=8,
                         num_key_value_heads=2, vocab_size=32768, tie_word_embeddings=True))

# Rows of each set (the sets' cards); a prepared file under results/paper/data wins.
SIZES = {
    "deepscaler": (40315, "DeepScaleR card"),
    "webinstruct_general": (100000, "ASSUMED: WebInstruct-verified ~230k less Mathematics and ungradable types"),
    "aime24": (30, "card"), "aime25": (30, "card"), "amc23": (40, "card"), "math500": (500, "card"),
    "minerva_math": (272, "card"), "olympiadbench": (675, "card"), "mmlu_pro": (12032, "card"),
    "gpqa_diamond": (198, "card"), "theoremqa": (800, "card"),
    "webinstruct_val": (1000, "ASSUMED: WebInstruct-verified test split, non-math"),
}


@dataclass(frozen=True)
class Arch:
    n_flop: float  # parameters a token's matmuls use (all but the input embedding)
    n_total: float
    layers: int
    width: int  # attention width (heads x head dim)
    head: float  # the LM head's matmul, hidden x vocabulary (its forward: 2 * head FLOPs a token)

    def fwd_flops(self, attended: float) -> float:
        """Forward FLOPs of one token that attends to ``attended`` tokens (QK^T and AV: 4 * width each)."""
        return 2 * self.n_flop + 4 * self.layers * self.width * attended


def model_classes(kind: str) -> tuple[type, type]:
    """The transformers config and model classes of an ``ARCHS`` kind."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    return {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}[kind]


def arch_of(kind: str, kw: dict) -> Arch:
    """The sizes of an ``ARCHS`` architecture, counted from its config the way transformers lays out its
    Qwen2 and Llama decoders (tests/unit/test_gpu_time_estimate.py checks the count against the model
    classes built on the meta device): by arithmetic, because importing transformers would take most of
    the status command's time."""
    h, inter, layers, vocab = kw["hidden_size"], kw["intermediate_size"], kw["num_hidden_layers"], kw["vocab_size"]
    head_dim = h // kw["num_attention_heads"]
    kv = kw["num_key_value_heads"] * head_dim
    bias = (h + 2 * kv) if kind == "qwen2" else 0  # Qwen2's q, k and v projections carry biases, Llama's none
    layer = h * h + 2 * h * kv + h * h + bias + 3 * h * inter + 2 * h  # q, k, v, o; gate, up, down; two norms
    embed = vocab * h
    n_flop = layers * layer + h + embed  # the decoder, the final norm, the LM head's matmul (tied or not)
    total = n_flop + (0 if kw["tie_word_embeddings"] else embed)  # a tied matrix counted once
    return Arch(float(n_flop), float(total), layers, kw["num_attention_heads"] * head_dim, float(h * vocab))


# verl's step 1 at Qwen2.5-Math-1.5B's shape on one H200 (paper_shape_steps.py --prompts 8 --steps 1,
# 2026-11-28; docs/verl.md, "What has run on a GPU"): 64 rows of 506 + 3,072 tokens, the old-policy pass
# 3.681 s + the reference 3.379 s + the update 20.201 s (no gradient checkpointing)
MEASURED_STEP = dict(hub_id="Qwen/Qwen2.5-Math-1.5B", rows=64, context=506 + 3072, seconds=3.681 + 3.379 + 20.201,
                     head_peak=790e12)


def measured_share(m: dict, A: "Assumptions") -> float:
    """The share of ``A.bf16_peak`` (the A100's) at which a measured step ran its old-policy pass, reference and update, by
    ``plan``'s count with ``A``'s figures (every row kept; the update counted at ``A.update_without_checkpointing``
    of its work with recomputation; the LM head's matmuls taken out at A's measured shares of ``head_peak``)."""
    a = arch_of(*ARCHS[m["hub_id"]])
    rows_ctx = m["rows"] * m["context"]
    flops = rows_ctx * (2 + 3 * A.update_without_checkpointing) * a.fwd_flops(m["context"] / 2)
    fwd_head, train_head = 2 * a.head * rows_ctx * 2, 6 * a.head * rows_ctx
    head_s = (fwd_head / A.head_share_fwd + train_head / A.head_share_train) / m["head_peak"]
    return (flops - fwd_head - train_head) / ((m["seconds"] - head_s) * A.bf16_peak)


@dataclass
class Assumptions:
    bf16_peak: float = 312e12
    fp32_peak: float = 19.5e12
    # verl's old-policy pass, reference and update on the launcher's route (varlen attention, forward passes on
    # 32,768-token micro-batches, the update on 6,144 without gradient checkpointing): the H200 step in
    # MEASURED_STEP, 0.392 of an A100's bf16 peak by this file's count (measured_share, from this instance's
    # other figures unless given). ASSUMED: the paper's A100 40GB takes a100_factor times the H200's time on
    # these passes. On that card a compute-bound and a bandwidth-bound pass agree: 3.17, the ratio of the bf16
    # dense peaks (989 against 312 TFLOP/s), 3.09, of the memory bandwidths (4.8 against 1.555 TB/s). An A100
    # 80GB has the same peak and 2.04 TB/s: 3.17 compute-bound, 2.35 bandwidth-bound, and these passes, at an
    # eighth of the peak, lie somewhere between. The 7B's larger matmuls likely run at a higher share.
    mfu_train: float | None = None
    a100_factor: float = 3.1
    # the update's time without gradient checkpointing against with it (config verl.gradient_checkpointing):
    # measured on the H200, varlen route, a 16,384-token pack at the 1.5B shape (attention_route.py: 0.389 s
    # against 0.499 s)
    update_without_checkpointing: float = 0.780
    util_fp32: float = 0.6  # the probe's FP32 matmuls, one 3.5k-token sequence at a time
    vllm_tps_1p5b: float = 15000.0  # vLLM output tokens/s per A100, 1.5B model, large batch
    vllm_step_s: float = 0.025  # one decode step of a full batch (the longest sample's floor)
    vllm_start_s: float = 120.0  # engine start: weights, memory profiling, CUDA graphs
    hf_tps_1p5b: float = 3000.0  # HF generate tokens/s, 1.5B bf16, one padded batch of 256
    verl_step_overhead_s: float = 20.0  # weight sync to vLLM, rewards, metrics (H200: the rollout phase's
    # 14 s beyond its decoding (waking vLLM, the agent loops) and 0.5 s more a step)
    verl_save_s: float = 30.0  # a resume save (verl's checkpoint: weights and AdamW's moments; 29.3 s on
    # the H200, 1.5B, one rank to local disk), every `save_every` steps
    # verl's log-prob route, the fused kernels vicurl_ppo_trainer.yaml selects: the LM head's matmuls run
    # 512 tokens at a time, at a lower share of the bf16 peak than the rest of the model. Measured on an
    # H200 (measurements/logprob_route.py, 16,384 tokens at the 1.5B models' head, docs/verl.md): forward
    # + backward 0.156 s (147 TFLOP/s, 0.186 of the card's measured 790), forward 0.067 s (0.145); the
    # same shares assumed on an A100. (verl 0.9.1's per-row loop, without fused kernels and flash-attn:
    # 1.705 s forward + backward there, 11x the fused route.)
    head_share_fwd: float = 0.145
    head_share_train: float = 0.186
    verl_start_s: float = 600.0
    probe_start_s: float = 60.0
    prompt_tokens: float = 200.0  # mean prompt length (template included)
    length_fraction: float = 1.0  # mean response length / max_new_tokens

    def __post_init__(self):
        if self.mfu_train is None:  # the measured step's share, converted to the A100
            self.mfu_train = measured_share(MEASURED_STEP, self) / self.a100_factor

    def vllm_tps(self, a: Arch) -> float:
        return self.vllm_tps_1p5b * 1.54e9 / a.n_flop

    def hf_tps(self, a: Arch) -> float:
        return self.hf_tps_1p5b * 1.54e9 / a.n_flop


@dataclass
class Job:
    rule: str
    model: str
    tokens: float  # generated tokens (+ scored/trained tokens where that is the work)
    gpus: int
    wall_s: float  # on A100s
    cpu_s: float  # extrapolated to this CPU (nan when not measured)
    runtime_min: float | None  # the SLURM profile's runtime, attempt 1
    note: str = ""
    study: str = ""  # the study the job belongs to ("": shared, prompt_stats)


@dataclass
class Cpu:
    sample_flops: float = float("nan")  # effective FLOP/s of sampling (generate)
    grad_flops: float = float("nan")  # of forward + backward of one sequence
    grade_rate: float = float("nan")  # graded samples per second
    lines: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- measurements


def measure_cpu(threads: int, seed: int = 0) -> Cpu:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from vicurl.engines.rollout import sequence_logprobs
    from vicurl.sampling import Rollouts, response_mask_from_ids

    torch.set_num_threads(threads)
    arch = arch_of(*REDUCED)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(**REDUCED[1])).eval()
    out = Cpu()
    out.lines.append(f"CPU: {threads} threads, Qwen2 at reduced size (random weights): {arch.n_total / 1e6:.1f}M "
                     f"parameters ({arch.n_flop / 1e6:.1f}M per token), fp32")

    # sampling: the generate call of vicurl.sampling.sample (top_k off, temperature 1), 16 x 64 new tokens
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


# ----------------------------------------------------------------------------- the jobs


def load_config(path: Path) -> dict:
    from vicurl import checks

    return checks.read(yaml.safe_load(path.read_text()))  # as the workflow reads it: checked, defaults filled


def dataset_size(name: str, scenario: str) -> tuple[int, str]:
    prepared = REPO / "results" / scenario / "data" / f"{name}.parquet"
    if prepared.exists():
        import pyarrow.parquet as pq

        return pq.ParquetFile(prepared).metadata.num_rows, f"prepared {prepared.relative_to(REPO)}"
    return SIZES[name]


def profile_runtime(profile: dict, rule: str, **wildcards) -> float | None:
    expr = (profile.get("set-resources", {}).get(rule) or {}).get("runtime", profile["default-resources"]["runtime"])
    return float(eval(str(expr), {"attempt": 1, "wildcards": SimpleNamespace(**wildcards)}))


def vllm_seconds(tokens: float, max_new: int, a: Arch, A: Assumptions, gpus: int = 1) -> float:
    """Decoding ``tokens`` on ``gpus`` A100s with vLLM: throughput-bound, or the longest sample's steps."""
    return max(tokens / (gpus * A.vllm_tps(a)), max_new * A.vllm_step_s)


def kept_share(s: dict, start: int = 0) -> float:
    """The mean share of a batch the reference pass and the update process over the steps a run
    trains: a beta-share curriculum's beta_t (VI-CuRL: 0.6 over a linear 0.2 -> 1 schedule), when
    dropped prompts leave the batch (``train.skip_dropped``, one optimizer step per batch); else 1."""
    from vicurl.curriculum import make_curriculum
    from vicurl.curriculum.schedules import curriculum_steps
    from vicurl.curriculum.share import ShareCurriculum

    cur = make_curriculum(s["curriculum"], s.get("curriculum_params") or {})
    one_step = s.get("mini_batch_size") in (None, s["batch_size"])
    if not isinstance(cur, ShareCurriculum) or not s.get("skip_dropped", True) or not one_step:
        return 1.0
    span = curriculum_steps(s["total_steps"], s.get("curriculum_steps"))
    steps = range(start + 1, s["total_steps"] + 1)
    return sum(cur.beta(t, span) for t in steps) / len(steps)


def plan(cfg: dict, profile: dict, A: Assumptions, cpu: Cpu) -> tuple[list[Job], dict[str, str]]:
    models = {m: arch_of(*ARCHS[spec["hub_id"]]) for m, spec in cfg["models"].items()}
    sizes, size_notes = {}, {}
    for name in cfg["datasets"]:
        sizes[name], size_notes[name] = dataset_size(name, cfg["scenario"])
    jobs: list[Job] = []
    frac = A.length_fraction

    def cpu_s(gen_flops: float, grad_flops: float) -> float:
        return gen_flops / cpu.sample_flops + grad_flops / cpu.grad_flops

    for run in runs_lib.runs(cfg):  # train: one 8-GPU verl job per run
        s, a = runs_lib.train_settings(cfg, run), models[run.model]
        gpus = int(cfg.get("verl", {}).get("n_gpus_per_node", 8)) * int(cfg.get("verl", {}).get("nnodes", 1))
        seqs = s["batch_size"] * max(s["group_size"], int(s["reward_params"].get("n_votes") or 0))
        L = s["max_response_length"] * frac
        gen_tokens = seqs * L
        ctx = A.prompt_tokens + L
        # old log-probs (a forward of every row), then the reference log-probs (a forward) and the update
        # (forward + backward) of the rows the curriculum keeps (the others leave the batch: train.skip_dropped)
        share = kept_share(s, runs_lib.start_step(cfg, run))
        # the update counted as 3 forwards' work with gradient checkpointing (it recomputes a fourth), as
        # update_without_checkpointing of that without
        update = 1.0 if runs_lib.verl_settings(cfg, run.model).gradient_checkpointing else A.update_without_checkpointing
        train_flops = s["batch_size"] * s["group_size"] * ctx * (1 + share * (1 + 3 * update)) * a.fwd_flops(ctx / 2)
        rows_ctx = s["batch_size"] * s["group_size"] * ctx
        # the LM head's share of train_flops, at its own measured rate: forward in the old and reference
        # passes, forward + backward in the update
        fwd_head, train_head = 2 * a.head * rows_ctx * (1 + share), 6 * a.head * rows_ctx * share
        head_s = (fwd_head / A.head_share_fwd + train_head / A.head_share_train
                  - (fwd_head + train_head) / A.mfu_train) / (gpus * A.bf16_peak)
        step_s = (vllm_seconds(gen_tokens, s["max_response_length"], a, A, gpus)
                  + train_flops / (gpus * A.bf16_peak * A.mfu_train) + head_s + A.verl_step_overhead_s
                  + A.verl_save_s / int(s["save_every"]))
        steps = s["total_steps"] - runs_lib.start_step(cfg, run)  # a continued run trains its own steps only
        jobs.append(Job("train", run.model, steps * (gen_tokens + s["batch_size"] * s["group_size"] * ctx), gpus,
                        A.verl_start_s + steps * step_s,
                        steps * cpu_s(gen_tokens * a.fwd_flops(ctx / 2), train_flops),
                        runs_lib.train_runtime(cfg, run), study=run.study))

    generated: dict[tuple, list[str]] = {}  # checkpoints generated: (study, model, setting, seed, step) -> benchmarks
    graded: dict[tuple, int] = {}  # grading: one CPU job per run (study, model, setting, seed), all its checkpoints
    for study, model, setting, seed, step, bench in runs_lib.evaluations(cfg):
        # a continued run's early checkpoints are its source run's (a Base pseudo-run owns its own)
        o = runs_lib.checkpoint_owner(cfg, runs_lib.Run.of(study, model, setting, seed), step)
        owner = (o.study, o.model, o.setting, o.seed)
        if bench not in generated.setdefault((*owner, step), []):
            generated[(*owner, step)].append(bench)
        n = sizes[bench] * runs_lib.eval_settings(cfg, study)["n_samples"]
        graded[(study, model, setting, seed)] = graded.get((study, model, setting, seed), 0) + n
    if cfg["eval"]["generate_per"] == "run":
        raise ValueError("eval.generate_per: run serializes a run's checkpoints on one GPU; estimate per checkpoint")
    gen_rule = "generate_checkpoint"
    for (study, model, setting, seed, step), benches in generated.items():
        ev, a = runs_lib.eval_settings(cfg, study), models[model]
        # generation: one GPU, the model loaded once per checkpoint
        tokens = sum(sizes[b] for b in benches) * ev["n_samples"] * ev["max_new_tokens"] * frac
        jobs.append(Job(gen_rule, model, tokens, 1, A.vllm_start_s + vllm_seconds(tokens, ev["max_new_tokens"], a, A),
                        cpu_s(tokens * a.fwd_flops(A.prompt_tokens + ev["max_new_tokens"] * frac / 2), 0),
                        profile_runtime(profile, gen_rule, model=model), study=study))
    for (study, model, *_), samples in graded.items():
        jobs.append(Job("grade", model, samples, 0, 0.0, samples / cpu.grade_rate, profile_runtime(profile, "grade", model=model),
                        study=study))

    stats = sorted({(run.model, cfg["studies"][run.study]["train_set"]) for run in runs_lib.runs(cfg)
                    if runs_lib.needs_prompt_stats(cfg, run)})
    ps = cfg["prompt_stats"]
    for model, train_set in stats:  # prompt_stats: vLLM (eval.engine), one GPU
        a = models[model]
        tokens = sizes[train_set] * ps["k"] * ps["max_new_tokens"] * frac
        jobs.append(Job("prompt_stats", model, tokens, 1, A.vllm_start_s + vllm_seconds(tokens, ps["max_new_tokens"], a, A),
                        cpu_s(tokens * a.fwd_flops(A.prompt_tokens + ps["max_new_tokens"] * frac / 2), 0),
                        profile_runtime(profile, "prompt_stats"), note=f"{train_set}: {sizes[train_set]:,} prompts"))

    p = cfg["probes"]
    for run, step in runs_lib.probes(cfg):  # probe: HF generate (bf16) + FP32 scoring and gradients, one GPU
        s, a = runs_lib.train_settings(cfg, run), models[run.model]
        rows = p["n_prompts"] * p["rollouts"]
        L = s["max_response_length"] * frac
        ctx = A.prompt_tokens + L
        gen_tokens = rows * L
        score_flops = 2 * rows * ctx * a.fwd_flops(ctx / 2)  # old log-probs with entropies, reference log-probs
        # streaming: every rollout's gradient, every prompt's mean, the full mean and the kept mean (<= all rows)
        passes = {"streaming": 4, "exact": 1, "sketch": 1}[p["method"]]
        grad_flops = passes * rows * ctx * 3 * a.fwd_flops(ctx / 2)
        wall = (A.probe_start_s + gen_tokens / A.hf_tps(a)
                + (score_flops + grad_flops) / (A.fp32_peak * A.util_fp32))
        jobs.append(Job("probe", run.model, gen_tokens + (2 + passes) * rows * ctx, 1, wall,
                        cpu_s(gen_tokens * a.fwd_flops(ctx / 2) + score_flops, grad_flops),
                        profile_runtime(profile, "probe"), study=run.study))
    return jobs, size_notes


# ----------------------------------------------------------------------------- the table


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


def table(jobs: list[Job], A: Assumptions) -> list[str]:
    groups: dict[tuple[str, str], list[Job]] = defaultdict(list)
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
        gpu_h = sum(j.wall_s * j.gpus for j in js) / 3600
        totals[rule] += gpu_h
        over = [j for j in js if j.runtime_min is not None and j.gpus and j.wall_s / 60 > j.runtime_min]
        runtime = min(j.runtime_min for j in js if j.runtime_min is not None) / 60
        cpu_s = sum(j.cpu_s for j in js) / n
        if rule == "grade":  # CPU rule: its hours are CPU hours on this machine
            mean_wall, max_wall = cpu_s, max(j.cpu_s for j in js)
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
    A = Assumptions()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    ap.add_argument("--profile", type=Path, default=REPO / "slurm-a100" / "config.yaml")
    ap.add_argument("--no-measure", action="store_true", help="skip the CPU measurements")
    ap.add_argument("--threads", type=int, default=2)
    for name, value in A.__dict__.items():  # --mfu-train unset: recomputed from the other figures given
        ap.add_argument("--" + name.replace("_", "-"), type=float, default=None if name == "mfu_train" else value)
    args = ap.parse_args(argv)
    A = Assumptions(**{k: getattr(args, k) for k in A.__dict__})
    cpu = Cpu() if args.no_measure else measure_cpu(args.threads)
    cfg = load_config(args.config)
    profile = yaml.safe_load(args.profile.read_text())
    jobs, size_notes = plan(cfg, profile, A, cpu)
    print(f"config {args.config.relative_to(REPO) if args.config.is_relative_to(REPO) else args.config}, "
          f"profile {args.profile.relative_to(REPO) if args.profile.is_relative_to(REPO) else args.profile}")
    print("Measured on this CPU:" if cpu.lines else "CPU not measured (--no-measure).")
    for line in cpu.lines:
        print(line)
    print("Models (parameters; per-token matmul parameters N):")
    for m, spec in cfg["models"].items():
        a = arch_of(*ARCHS[spec["hub_id"]])
        print(f"  {m:<18}{spec['hub_id']:<44}{a.n_total / 1e9:.2f}B; N {a.n_flop / 1e9:.2f}B")
    print("Set sizes (rows): " + ", ".join(
        f"{n} {dataset_size(n, cfg['scenario'])[0]:,}" + (f" ({size_notes[n]})" if size_notes[n] != "card" else "")
        for n in cfg["datasets"]))
    print()
    for line in table(jobs, A):
        print(line)


if __name__ == "__main__":
    main()
