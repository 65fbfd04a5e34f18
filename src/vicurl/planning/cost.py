"""Estimated A100 time of every GPU job (and the grading's samples) of a config: the cost model.

The work of each job follows from the config (the same run, evaluation and probe lists as the
workflow: ``vicurl.config.runs``) and each model's architecture (``architecture``: a paper model's published
transformers config, the ``config.json`` of a fetched, built or local folder, or a parameter count
the config gives). Time = work / throughput, the throughputs stated in
``Assumptions``:

* FLOPs per token: 2 N forward, 6 N forward + backward, N the parameters a token's matmuls use
  (everything but the input embedding), plus attention, 4 * layers * width * (context the token
  attends to) forward: half the sequence when training, prompt + half the response when decoding.
* A100 peaks: bf16 tensor cores 312 TFLOP/s (verl trains in bf16); FP32 19.5 TFLOP/s (the probe keeps
  float32 weights and torch's default full-FP32 matmuls).
* vLLM decoding: tokens/s per A100 for a 1.5B model at large batch, scaled by 1.5B / N; a job also lasts at
  least max-new-tokens decode steps (the longest sample) and pays an engine start.
* HF ``generate`` (the probe's rollouts, bf16): its own tokens/s.
* Responses are max_new_tokens long (``length_fraction`` 1): an upper bound; time scales with it.

Every job carries its study, model, setting, seed and step (``Job.key``), so that a target's planned jobs
(``vicurl.planning.target``) and the study planner take their prices from this one list. Imports neither
transformers nor torch: the status command prices a config in a second.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

from vicurl.config import runs as runs_lib

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

# Rows of each set (the sets' cards); a prepared file of the scenario wins, then a local file's rows.
SIZES = {
    "deepscaler": (40315, "DeepScaleR card"),
    "webinstruct_general": (100000, "ASSUMED: WebInstruct-verified ~230k less Mathematics and ungradable types"),
    "aime24": (30, "card"), "aime25": (30, "card"), "amc23": (40, "card"), "math500": (500, "card"),
    "minerva_math": (272, "card"), "olympiadbench": (675, "card"), "mmlu_pro": (12032, "card"),
    "gpqa_diamond": (198, "card"), "theoremqa": (800, "card"),
    "webinstruct_val": (1000, "ASSUMED: WebInstruct-verified test split, non-math"),
}

GPU_RULES = ("train", "generate_checkpoint", "prompt_stats", "probe")


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
    """The transformers config and model classes of an ``ARCHS`` kind (imports transformers: the GPU checks')."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    return {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}[kind]


def arch_of(kind: str, kw: Mapping[str, Any]) -> Arch:
    """The sizes of a decoder-only architecture from its transformers config (``kind``: its ``model_type``),
    counted the way transformers lays out its Qwen2 and Llama decoders (tests/unit/test_gpu_time_estimate.py
    checks the count against the model classes built on the meta device): Qwen2's q, k and v projections carry
    biases, the others' none."""
    h, inter, layers, vocab = kw["hidden_size"], kw["intermediate_size"], kw["num_hidden_layers"], kw["vocab_size"]
    heads = kw["num_attention_heads"]
    head_dim = kw.get("head_dim") or h // heads
    kv = kw.get("num_key_value_heads", heads) * head_dim
    q = heads * head_dim
    bias = (q + 2 * kv) if kind == "qwen2" else 0
    layer = h * q + 2 * h * kv + q * h + bias + 3 * h * inter + 2 * h  # q, k, v, o; gate, up, down; two norms
    embed = vocab * h
    n_flop = layers * layer + h + embed  # the decoder, the final norm, the LM head's matmul (tied or not)
    total = n_flop + (0 if kw.get("tie_word_embeddings", False) else embed)  # a tied matrix counted once
    return Arch(float(n_flop), float(total), layers, q, float(h * vocab))


def architecture(cfg: Mapping[str, Any], model: str, workdir: str | Path = ".") -> tuple[Arch | None, str]:
    """A model's sizes and where they come from: the paper's published configs (``ARCHS``), the ``config.json``
    of its fetched, built or local folder, or ``models.<name>.parameters`` (a count alone: attention and the LM
    head's own rate left out); (None, why) where none is known."""
    spec = cfg["models"][model]
    hub_id = spec.get("hub_id")
    if hub_id in ARCHS:
        return arch_of(*ARCHS[hub_id]), "published config"
    R = Path(workdir) / runs_lib.results_dir(cfg)
    folders = [R / "models" / model / "hub", R / "models" / model / "base"]  # fetched, built
    if hub_id:
        folders.append(Path(workdir) / str(hub_id))  # a local folder
    for folder in folders:
        if (folder / "config.json").is_file():
            c = json.loads((folder / "config.json").read_text())
            return arch_of(str(c.get("model_type", "")), c), f"{folder / 'config.json'}"
    if spec.get("parameters"):
        n = float(spec["parameters"])
        return Arch(n, n, 0, 0, 0.0), f"models.{model}.parameters"
    return None, (f"models.{model}: no architecture known yet (`snakemake models` fetches or builds it; or give "
                  f"`models.{model}.parameters`, its parameter count)")


def dataset_size(cfg: Mapping[str, Any], name: str, workdir: str | Path = ".") -> tuple[int | None, str]:
    """Rows of a set as the workflow prepares it (``subset.n`` at most): the scenario's prepared file, a
    synthetic split's size, a local file's rows, the set's card (``SIZES``); None where none is known."""
    d = cfg["datasets"][name]
    prepared = Path(workdir) / runs_lib.results_dir(cfg) / "data" / f"{name}.parquet"
    if prepared.exists():
        import pyarrow.parquet as pq

        return pq.ParquetFile(prepared).metadata.num_rows, f"prepared {prepared}"
    if d.get("source") == "synthetic":
        return int(cfg["synthetic"]["splits"][name]["n"]), "synthetic split"
    n, where = None, ""
    local = [Path(workdir) / p for p in ([d["local_path"]] if isinstance(d.get("local_path"), str)
                                          else d.get("local_path") or [])]
    if local:
        if all(p.is_file() for p in local):
            n, where = sum(_rows(p) for p in local), "local file"
        else:
            where = f"datasets.{name}: its local_path is not there"
    elif name in SIZES or d.get("source") in SIZES:
        n, where = SIZES.get(name) or SIZES[d["source"]]
    if n is not None and d.get("subset"):
        n, where = min(n, int(d["subset"]["n"])), f"subset of {where}"
    return n, where or f"datasets.{name}: size unknown"


def _rows(path: Path) -> int:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        return len(data) if isinstance(data, list) else 1
    with open(path) as f:
        return sum(1 for line in f if line.strip())


# verl's step 1 at Qwen2.5-Math-1.5B's shape on one H200 (docs/measurements.md, "What has run on a GPU"): 64 rows of
# 506 + 3,072 tokens, the old-policy pass 3.681 s + the reference 3.379 s + the update 20.201 s
MEASURED_STEP = dict(hub_id="Qwen/Qwen2.5-Math-1.5B", rows=64, context=506 + 3072, seconds=3.681 + 3.379 + 20.201,
                     head_peak=790e12)


def measured_share(m: dict, A: "Assumptions") -> float:
    """The share of ``A.bf16_peak`` (the A100's) at which a measured step ran its old-policy pass, reference and
    update, by ``jobs``' count with ``A``'s figures (every row kept; the update counted at
    ``A.update_without_checkpointing`` of its work with recomputation; the LM head's matmuls taken out at A's
    measured shares of ``head_peak``)."""
    a = arch_of(*ARCHS[m["hub_id"]])
    rows_ctx = m["rows"] * m["context"]
    flops = rows_ctx * (2 + 3 * A.update_without_checkpointing) * a.fwd_flops(m["context"] / 2)
    fwd_head, train_head = 2 * a.head * rows_ctx * 2, 6 * a.head * rows_ctx
    head_s = (fwd_head / A.head_share_fwd + train_head / A.head_share_train) / m["head_peak"]
    return (flops - fwd_head - train_head) / ((m["seconds"] - head_s) * A.bf16_peak)


@dataclass
class Assumptions:
    """The throughputs the estimate assumes; docs/paper.md ("GPU time at paper scale") gives each one's source."""

    bf16_peak: float = 312e12
    fp32_peak: float = 19.5e12
    # verl's passes at the measured step's share of an A100's bf16 peak (``measured_share``), the A100 40GB
    # ASSUMED to take a100_factor times the H200's time on them (docs/paper.md)
    mfu_train: float | None = None
    a100_factor: float = 3.1
    update_without_checkpointing: float = 0.780  # the update's time without gradient checkpointing / with it
    util_fp32: float = 0.6  # the probe's FP32 matmuls, one sequence at a time
    vllm_tps_1p5b: float = 15000.0  # vLLM output tokens/s per A100, 1.5B model, large batch
    vllm_step_s: float = 0.025  # one decode step of a full batch (the longest sample's floor)
    vllm_start_s: float = 120.0  # engine start: weights, memory profiling, CUDA graphs
    hf_tps_1p5b: float = 3000.0  # HF generate tokens/s, 1.5B bf16, one padded batch of 256
    verl_step_overhead_s: float = 20.0  # weight sync to vLLM, rewards, metrics
    verl_save_s: float = 30.0  # a resume save (weights and AdamW's moments), every `save_every` steps
    head_share_fwd: float = 0.145  # the LM head's matmuls on verl's fused route, share of the bf16 peak: forward
    head_share_train: float = 0.186  # and forward + backward
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
    tokens: float  # generated tokens (+ scored/trained tokens where that is the work); grade: samples
    gpus: int
    wall_s: float  # on A100s (grade: 0, a CPU job)
    runtime_min: float | None  # the SLURM profile's runtime, attempt 1
    study: str = ""  # "" for a job of no study (prompt_stats)
    setting: str = ""
    seed: int | None = None
    step: int | None = None
    dataset: str = ""  # prompt_stats: the training set
    gen_flops: float = 0.0  # sampling's and training's FLOPs (what a CPU extrapolation divides)
    grad_flops: float = 0.0
    note: str = ""

    @property
    def gpu_hours(self) -> float:
        return self.gpus * self.wall_s / 3600

    @property
    def key(self) -> tuple:
        """What names the job in the workflow: its rule and wildcards (``vicurl.planning.target`` matches them)."""
        if self.rule == "prompt_stats":
            return (self.rule, self.model, self.dataset)
        return (self.rule, self.study, self.model, self.setting, self.seed, self.step)


def profile_runtime(profile: Mapping[str, Any] | None, rule: str, **wildcards) -> float | None:
    if not profile:
        return None
    expr = (profile.get("set-resources", {}).get(rule) or {}).get("runtime", profile["default-resources"]["runtime"])
    return float(eval(str(expr), {"attempt": 1, "wildcards": SimpleNamespace(**wildcards)}))  # the profile's own


def vllm_seconds(tokens: float, max_new: int, a: Arch, A: Assumptions, gpus: int = 1) -> float:
    """Decoding ``tokens`` on ``gpus`` A100s with vLLM: throughput-bound, or the longest sample's steps."""
    return max(tokens / (gpus * A.vllm_tps(a)), max_new * A.vllm_step_s)


def kept_share(s: dict, start: int = 0) -> float:
    """The mean share of a batch the reference pass and the update process over the steps a run trains: a
    beta-share curriculum's beta_t (VI-CuRL: 0.6 over a linear 0.2 -> 1 schedule), when dropped prompts leave the
    batch (``train.skip_dropped``, one optimizer step per batch); else 1."""
    keys = ("curriculum", "total_steps", "curriculum_steps", "mini_batch_size", "batch_size", "skip_dropped")
    return _kept_share(json.dumps({**{k: s.get(k) for k in keys}, "params": s.get("curriculum_params") or {}},
                                  sort_keys=True, default=str), start)


@functools.lru_cache(maxsize=4096)
def _kept_share(key: str, start: int) -> float:
    s = json.loads(key)
    s["curriculum_params"] = s.pop("params")
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


def unknown(cfg: Mapping[str, Any], workdir: str | Path = ".") -> dict[str, str]:
    """The models (``models.<name>``) and sets (``datasets.<name>``) the studies use whose architecture or size the
    estimate does not know, with why; a job that needs one is left unpriced (``jobs``)."""
    out = {}
    for m in {m for s in cfg["studies"].values() for m in s["models"]}:
        a, why = architecture(cfg, m, workdir)
        if a is None:
            out[f"models.{m}"] = why
    for d in {s["train_set"] for s in cfg["studies"].values()} | {b for s in cfg["studies"].values()
                                                                  for b in s["benchmarks"]}:
        n, why = dataset_size(cfg, d, workdir)
        if n is None:
            out[f"datasets.{d}"] = why
    return out


def jobs(cfg: Mapping[str, Any], A: Assumptions | None = None, profile: Mapping[str, Any] | None = None,
         workdir: str | Path = ".") -> list[Job]:
    """Every GPU job of ``cfg`` (and the grading jobs, with their samples), priced; the jobs of a model or set
    whose size is not known (``unknown``) left out."""
    A = A or Assumptions()
    models = {m: architecture(cfg, m, workdir)[0] for m in cfg["models"]}
    sizes = {name: dataset_size(cfg, name, workdir)[0] for name in cfg["datasets"]}
    out: list[Job] = []
    frac = A.length_fraction

    for run in runs_lib.runs(cfg):  # train: one verl job per run
        s, a = runs_lib.train_settings(cfg, run), models[run.model]
        if a is None or sizes[cfg["studies"][run.study]["train_set"]] is None:
            continue
        v = runs_lib.verl_settings(cfg, run.model)
        gpus = int(v.n_gpus_per_node) * int(v.nnodes)
        seqs = s["batch_size"] * max(s["group_size"], int(s["reward_params"].get("n_votes") or 0))
        L = s["max_response_length"] * frac
        gen_tokens = seqs * L
        ctx = A.prompt_tokens + L
        # old log-probs (a forward of every row), then the reference log-probs (a forward) and the update
        # (forward + backward) of the rows the curriculum keeps (the others leave the batch: train.skip_dropped)
        share = kept_share(s, runs_lib.start_step(cfg, run))
        # the update counted as 3 forwards' work with gradient checkpointing (it recomputes a fourth), as
        # update_without_checkpointing of that without
        update = 1.0 if v.gradient_checkpointing else A.update_without_checkpointing
        rows_ctx = s["batch_size"] * s["group_size"] * ctx
        train_flops = rows_ctx * (1 + share * (1 + 3 * update)) * a.fwd_flops(ctx / 2)
        # the LM head's share of train_flops at its own measured rate: forward in the old and reference passes,
        # forward + backward in the update
        fwd_head, train_head = 2 * a.head * rows_ctx * (1 + share), 6 * a.head * rows_ctx * share
        head_s = (fwd_head / A.head_share_fwd + train_head / A.head_share_train
                  - (fwd_head + train_head) / A.mfu_train) / (gpus * A.bf16_peak)
        step_s = (vllm_seconds(gen_tokens, s["max_response_length"], a, A, gpus)
                  + train_flops / (gpus * A.bf16_peak * A.mfu_train) + head_s + A.verl_step_overhead_s
                  + A.verl_save_s / int(s["save_every"]))
        steps = s["total_steps"] - runs_lib.start_step(cfg, run)  # a continued run trains its own steps only
        out.append(Job("train", run.model, steps * (gen_tokens + rows_ctx), gpus, A.verl_start_s + steps * step_s,
                       runs_lib.train_runtime(cfg, run) if profile else None, study=run.study, setting=run.setting,
                       seed=run.seed, gen_flops=steps * gen_tokens * a.fwd_flops(ctx / 2),
                       grad_flops=steps * train_flops))

    generated: dict[tuple, list[str]] = {}  # (study, model, setting, seed, step) of the owner -> benchmarks
    graded: dict[tuple, int] = {}  # grading: one CPU job per run, all its checkpoints
    for study, model, setting, seed, step, bench in runs_lib.evaluations(cfg):
        # a continued run's early checkpoints are its source run's (a Base pseudo-run owns its own)
        o = runs_lib.checkpoint_owner(cfg, runs_lib.Run.of(study, model, setting, seed), step)
        owner = (o.study, o.model, o.setting, o.seed)
        if bench not in generated.setdefault((*owner, step), []):
            generated[(*owner, step)].append(bench)
        n = (sizes[bench] or 0) * runs_lib.eval_settings(cfg, study)["n_samples"]
        graded[(study, model, setting, seed)] = graded.get((study, model, setting, seed), 0) + n
    gen_rule = "generate_checkpoint" if cfg["eval"]["generate_per"] == "checkpoint" else "generate_run"
    for (study, model, setting, seed, step), benches in generated.items():
        ev, a = runs_lib.eval_settings(cfg, study), models[model]
        if a is None or any(sizes[b] is None for b in benches):
            continue
        tokens = sum(sizes[b] for b in benches) * ev["n_samples"] * ev["max_new_tokens"] * frac
        out.append(Job(gen_rule, model, tokens, 1, A.vllm_start_s + vllm_seconds(tokens, ev["max_new_tokens"], a, A),
                       profile_runtime(profile, gen_rule, model=model), study=study, setting=setting, seed=seed,
                       step=step, gen_flops=tokens * a.fwd_flops(A.prompt_tokens + ev["max_new_tokens"] * frac / 2)))
    if gen_rule == "generate_run":  # one job per run: its checkpoints one after the other
        out = _per_run(out, gen_rule, A)
    for (study, model, setting, seed), samples in graded.items():
        out.append(Job("grade", model, samples, 0, 0.0, profile_runtime(profile, "grade", model=model), study=study,
                       setting=setting, seed=seed))

    stats = sorted({(run.model, cfg["studies"][run.study]["train_set"]) for run in runs_lib.runs(cfg)
                    if runs_lib.needs_prompt_stats(cfg, run)})
    ps = cfg["prompt_stats"]
    for model, train_set in stats:  # prompt_stats: vLLM (eval.engine), one GPU
        a = models[model]
        if a is None or sizes[train_set] is None:
            continue
        tokens = sizes[train_set] * ps["k"] * ps["max_new_tokens"] * frac
        out.append(Job("prompt_stats", model, tokens, 1, A.vllm_start_s + vllm_seconds(tokens, ps["max_new_tokens"], a, A),
                       profile_runtime(profile, "prompt_stats"), dataset=train_set,
                       gen_flops=tokens * a.fwd_flops(A.prompt_tokens + ps["max_new_tokens"] * frac / 2),
                       note=f"{train_set}: {sizes[train_set]:,} prompts"))

    for run, step in runs_lib.probes(cfg):  # probe: HF generate (bf16) + FP32 scoring and gradients, one GPU
        s, a, p = runs_lib.train_settings(cfg, run), models[run.model], runs_lib.probe_settings(cfg, run, step)
        if a is None:
            continue
        rows = p["n_prompts"] * p["rollouts"]
        L = s["max_response_length"] * frac
        ctx = A.prompt_tokens + L
        gen_tokens = rows * L
        score_flops = 2 * rows * ctx * a.fwd_flops(ctx / 2)  # old log-probs with entropies, reference log-probs
        # streaming: every rollout's gradient, every prompt's mean, the full mean and the kept mean (<= all rows)
        passes = {"streaming": 4, "exact": 1, "sketch": 1}[p["method"]]
        grad_flops = passes * rows * ctx * 3 * a.fwd_flops(ctx / 2)
        wall = A.probe_start_s + gen_tokens / A.hf_tps(a) + (score_flops + grad_flops) / (A.fp32_peak * A.util_fp32)
        out.append(Job("probe", run.model, gen_tokens + (2 + passes) * rows * ctx, 1, wall,
                       profile_runtime(profile, "probe"), study=run.study, setting=run.setting, seed=run.seed,
                       step=step, gen_flops=gen_tokens * a.fwd_flops(ctx / 2) + score_flops, grad_flops=grad_flops))
    return out


def _per_run(out: list[Job], rule: str, A: Assumptions) -> list[Job]:
    """``eval.generate_per: run``: a run's checkpoints in one job (one engine start, the rest in turn)."""
    merged: dict[tuple, Job] = {}
    rest = []
    for j in out:
        if j.rule != rule:
            rest.append(j)
            continue
        k = (j.study, j.model, j.setting, j.seed)
        if k in merged:
            m = merged[k]
            m.tokens += j.tokens
            m.wall_s += j.wall_s - A.vllm_start_s
            m.gen_flops += j.gen_flops
        else:
            merged[k] = Job(**{**j.__dict__, "step": None})
    return rest + list(merged.values())


def gpu_hours(priced: list[Job]) -> float:
    return sum(j.gpu_hours for j in priced)


def by_study(priced: list[Job]) -> dict[str, float]:
    """A100 hours of the GPU jobs per study (prompt_stats, which no study owns, under "")."""
    out: dict[str, float] = {}
    for j in priced:
        if j.gpus:
            out[j.study] = out.get(j.study, 0.0) + j.gpu_hours
    return out
