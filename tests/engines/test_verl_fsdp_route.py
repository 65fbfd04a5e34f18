"""verl's FSDP2 engine on gloo ranks with the launcher's settings: the old-policy pass's entropy, the fused log-prob
route tied or untied, the patches of verl and the rehearsal, seeded rollout requests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from omegaconf import OmegaConf

from vicurl.engines.verl import launch

from harness import CHAT_MODEL, REPO, tiny_llama, tiny_qwen2
from verl_support import (
    launch_settings,
    launcher_config,
    rendezvous,
)


def run_engine_script(code: str, model_dir, work) -> subprocess.CompletedProcess:
    """``code`` in a fresh process (one gloo rank) with the launcher's model and actor configs for
    ``model_dir`` as its two arguments, as verl's workers receive them."""
    config = launcher_config(model_dir, work)
    model_cfg, actor_cfg, script = work / "model.yaml", work / "actor.yaml", work / "engine.py"
    OmegaConf.save(config.actor_rollout_ref.model, model_cfg)
    OmegaConf.save(config.actor_rollout_ref.actor, actor_cfg, resolve=True)
    script.write_text(code)
    env = {**os.environ, **rendezvous(work)}
    env.update(launch.verl_environment(env))  # the project's modules in verl, as its workers import them
    return subprocess.run([sys.executable, str(script), str(model_cfg), str(actor_cfg)], env=env, capture_output=True,
                          text=True, timeout=300)


ENGINE_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
from omegaconf import OmegaConf
from verl.utils import torch_functional as verl_F
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

# no LOCAL_RANK: torch's mesh would pick a CUDA device
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=0, world_size=1)
actor = OmegaConf.load(sys.argv[2])
engine = FSDPEngine(omega_conf_to_dataclass(OmegaConf.load(sys.argv[1])), omega_conf_to_dataclass(actor.fsdp_config),
                    omega_conf_to_dataclass(actor.optim), omega_conf_to_dataclass(actor.checkpoint))
fn = engine.compute_entropy_from_logits
print("chunked" if fn is verl_F.entropy_from_logits_with_chunking else "other:" + repr(fn))
logits = torch.randn(5000, 300)
torch.testing.assert_close(fn(logits, chunk_size=2048), verl_F.entropy_from_logits(logits))
"""


def test_the_old_policy_pass_takes_verls_chunked_eager_entropy(chat_model_dir, tmp_path):
    """The old-policy pass's entropies, the curriculum's confidences: verl's FSDP engine built from the
    launcher's config computes them in chunks, without torch.compile (``vicurl_ppo_trainer.yaml``), so
    their memory is bounded whether or not compile would fuse the unchunked form (eager, 34.9 GB above
    the weights at 16,384 tokens of a 1.5B model); the same entropies."""
    out = run_engine_script(ENGINE_SCRIPT, chat_model_dir, tmp_path)
    assert out.returncode == 0 and "chunked" in out.stdout.splitlines(), (out.stdout + out.stderr)[-3000:]


FSDP_FUSED_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
from omegaconf import OmegaConf
from torch.distributed.fsdp import FSDPModule
from transformers import AutoModelForCausalLM
from verl.models.transformers import dense_common
from vicurl.engines.verl import varlen_attention  # as VERL_USE_EXTERNAL_MODULES imports it in verl's workers
from verl.utils import torch_functional as verl_F
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=rank, world_size=world)


def check(family, model_path, actor_path, ref_path):
    model_cfg, actor = OmegaConf.load(model_path), OmegaConf.load(actor_path)
    actor.fsdp_config.strategy = actor.strategy  # as verl's ActorConfig passes it on (fsdp2)
    # float32 compute, so that the two routes compare closely (the run's own policy is bf16)
    actor.fsdp_config.mixed_precision = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    engine = FSDPEngine(omega_conf_to_dataclass(model_cfg), omega_conf_to_dataclass(actor.fsdp_config),
                        omega_conf_to_dataclass(actor.optim), omega_conf_to_dataclass(actor.checkpoint))
    module = engine._build_fsdp_module(engine._build_module())  # FSDP2 over the ranks, as the engine wraps it
    assert type(module).forward is dense_common.forward_with_torch_backend, type(module).forward  # the fused route
    units = [n for n, m in module.named_modules() if isinstance(m, FSDPModule)]
    head_in_root = "lm_head" not in units
    assert module.config._attn_implementation == varlen_attention.NAME  # the launcher's attention
    plain = AutoModelForCausalLM.from_pretrained(model_cfg.path, torch_dtype=torch.float32, attn_implementation="sdpa")

    # two sequences packed as verl packs them, the same on every rank (FSDP averages the ranks' gradients)
    torch.manual_seed(0)
    ids = torch.randint(0, plain.config.vocab_size, (1, 23))
    pos = torch.cat([torch.arange(9), torch.arange(14)]).unsqueeze(0)
    labels = torch.roll(ids, -1, dims=-1)
    T = 0.7
    w_lp, w_ent = torch.randn(23), torch.randn(23)

    def update():
        module.zero_grad(set_to_none=True)
        out = module(input_ids=ids, position_ids=pos, temperature=T, return_dict=True, shift_labels=labels,
                     use_cache=False)
        fused = (out.log_probs.squeeze(0), out.entropy.squeeze(0))
        ((fused[0] * w_lp).sum() + (fused[1] * w_ent).sum()).backward()
        return tuple(t.detach() for t in fused), {n: p.grad.full_tensor() for n, p in module.named_parameters()}

    # in training mode, as verl's update runs it: with gradient checkpointing (the launcher's default, the 7B's),
    # recomputing each layer under FSDP2 in the backward, and without it (the paper's smaller models)
    module.train()
    assert module.is_gradient_checkpointing
    fused, g_fused = update()
    module.gradient_checkpointing_disable()
    fused_off, g_off = update()
    for a, b in zip(fused, fused_off):
        assert torch.equal(a, b)
    for n, g in g_fused.items():
        torch.testing.assert_close(g_off[n], g, rtol=1e-6, atol=1e-8, msg=lambda m: f"{n}: {m}")

    # verl patched the class's forward: the logits through the modules themselves, under sdpa's dense block mask
    logits = plain.lm_head(plain.model(input_ids=ids, position_ids=pos, use_cache=False)[0]).squeeze(0) / T
    ref = (verl_F.logprobs_from_logits(logits, labels.squeeze(0)), verl_F.entropy_from_logits(logits))
    ((ref[0] * w_lp).sum() + (ref[1] * w_ent).sum()).backward()

    for a, b in zip(fused, ref):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    names = {n for n, _ in plain.named_parameters()}
    assert set(g_fused) == names, (sorted(g_fused), sorted(names))
    for n, p in plain.named_parameters():
        torch.testing.assert_close(g_fused[n], p.grad, rtol=1e-4, atol=1e-6, msg=lambda m: f"{n}: {m}")

    # the reference, built as verl builds it from the launcher's ref config (bf16 weights): its rotary
    # frequencies stay float32, those of the model the actor and vLLM compute with (rope_fp32.py)
    ref = OmegaConf.load(ref_path)
    assert ref.fsdp_config.model_dtype == "bf16", ref.fsdp_config
    ref.fsdp_config.strategy = ref.strategy
    ref_engine = FSDPEngine(omega_conf_to_dataclass(model_cfg), omega_conf_to_dataclass(ref.fsdp_config),
                            omega_conf_to_dataclass(actor.optim), omega_conf_to_dataclass(actor.checkpoint))
    reference = ref_engine._build_module()
    assert next(reference.parameters()).dtype == torch.bfloat16
    want = dict(plain.named_buffers())
    rotary = {n: b for n, b in reference.named_buffers() if n.endswith("inv_freq")}
    assert rotary and all(b.dtype == torch.float32 and torch.equal(b, want[n]) for n, b in rotary.items()), rotary

    # the KL's two sides: the reference from its bf16 weights gives the policy's log-probs and entropies at the
    # same weights (fp32, under the launcher's bf16 mixed precision) bit for bit, each wrapped by FSDP2 as verl
    # wraps it and run under verl's autocast, on a pack reaching position 1,100 (where a rotary frequency
    # rounded to bf16, verl's cast before rope_fp32.py, turns the angles by radians: the check fails then)
    policy_cfg = OmegaConf.load(actor_path)
    policy_cfg.fsdp_config.strategy = policy_cfg.strategy
    policy = FSDPEngine(omega_conf_to_dataclass(model_cfg), omega_conf_to_dataclass(policy_cfg.fsdp_config),
                        omega_conf_to_dataclass(policy_cfg.optim), omega_conf_to_dataclass(policy_cfg.checkpoint))
    policy_module = policy._build_fsdp_module(policy._build_module())
    reference = ref_engine._build_fsdp_module(reference)
    assert policy._autocast_dtype == ref_engine._autocast_dtype == torch.bfloat16
    ids = torch.randint(0, plain.config.vocab_size, (1, 1130))
    pos = torch.cat([torch.arange(1100), torch.arange(30)]).unsqueeze(0)
    labels = torch.roll(ids, -1, dims=-1)

    def outputs(module):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            out = module(input_ids=ids, position_ids=pos, temperature=T, return_dict=True, shift_labels=labels,
                         use_cache=False)
        return out.log_probs.squeeze(0), out.entropy.squeeze(0)

    from_policy, from_ref = outputs(policy_module), outputs(reference)
    for a, b in zip(from_ref, from_policy):
        assert torch.equal(a, b), (a - b).abs().max()
    for n, b in reference.named_buffers():  # the rotary frequencies as verl's cast had rounded them
        if n.endswith("inv_freq"):
            b.copy_(b.to(torch.bfloat16).float())
    assert not torch.equal(outputs(reference)[0], from_policy[0])  # 2-4e-3 apart on these small random models
    if rank == 0:
        print(family, "head-in-root" if head_in_root else "head-own-unit", "equal", flush=True)


for family, model_path, actor_path, ref_path in zip(*(iter(sys.argv[1:]),) * 4):
    check(family, model_path, actor_path, ref_path)
dist.destroy_process_group()
"""


def run_engine_ranks(code: str, configs: dict, work: Path, world_size: int) -> list[subprocess.CompletedProcess]:
    """``code`` on ``world_size`` gloo ranks (a process each), given, for each name of ``configs``, the name and
    the model, actor and reference configs of its config as verl's workers receive them (four arguments a
    config)."""
    args, script = [], work / "engine.py"
    for name, config in configs.items():
        paths = [work / f"{name}.{part}.yaml" for part in ("model", "actor", "ref")]
        OmegaConf.save(config.actor_rollout_ref.model, paths[0])
        OmegaConf.save(config.actor_rollout_ref.actor, paths[1], resolve=True)
        OmegaConf.save(config.actor_rollout_ref.ref, paths[2], resolve=True)
        args += [name, *map(str, paths)]
    script.write_text(code)
    from vicurl.rehearsal.cpu import VERL_ENV  # verl's CPU platform (its FSDP engine asks the device)

    env = {**os.environ, **VERL_ENV, **rendezvous(work), "WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": "1"}
    env.update(launch.verl_environment(env))  # the project's patches of verl, as the launcher gives them
    procs = [subprocess.Popen([sys.executable, str(script), *args], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(world_size)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=300 * len(configs))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(subprocess.CompletedProcess(p.args, p.returncode, out, ""))
    return outs


@pytest.fixture(scope="module")
def paper_families(chat_model_dir, tmp_path_factory):
    """The paper models' ties and families: Qwen2, tied (Qwen2.5-Math-1.5B) and untied (R1-Distill-
    Qwen-1.5B, Qwen2.5-Math-7B); Llama, tied (Llama-3.2-3B-Instruct) and untied (no paper model: a user's)."""
    root = tmp_path_factory.mktemp("families")
    return {
        "qwen2-tied": tiny_qwen2(root / "qwen2_tied", like=chat_model_dir, tied=True),
        "qwen2-untied": tiny_qwen2(root / "qwen2_untied", like=chat_model_dir, tied=False),
        "llama-tied": tiny_llama(root / "llama_tied", **{**CHAT_MODEL, "tied": True}),
        "llama-untied": chat_model_dir,
    }


def test_the_model_patches_answer_verls_lines():
    """``fsdp_wrap`` replaces verl 0.9.1's choice of FSDP2 units, ``rope_fp32`` follows its cast of a built
    model; an upgrade that moves the lines they answer fails here."""
    from vicurl.engines.verl.patches import fsdp_wrap, rope_fp32
    from vicurl.rehearsal.cpu import stale_patches

    assert stale_patches(fsdp_wrap.PATCHES + rope_fp32.PATCHES) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_rehearsals_linear_layers_compute_a_row_alike_whatever_shares_its_batch(dtype):
    """The CPU rehearsal's vLLM linear layers (`vicurl.rehearsal.vllm_cpu.batch_invariant_linear`): rows
    computed 1 to 99 at a time, as a decode step or a prefill batches them, at any offset in the call and on
    1 or 2 threads, are bit for bit the rows of one call over all of them, and the plain matmul's results up
    to its rounding. (``torch.nn.functional.linear`` alone differs in the last bits on some row counts, by CPU and dtype: fp32 at 1, 2, 3, 5-7, 9-11 rows on
    an AMD EPYC with AVX-512.)"""
    from vicurl.rehearsal.vllm_cpu import batch_invariant_linear

    g = torch.Generator().manual_seed(0)
    w, bias, x = (torch.randn(*shape, generator=g).to(dtype) for shape in ((896, 256), (896,), (99, 256)))
    every = batch_invariant_linear(x, w, bias)
    for n in range(1, 100):
        assert torch.equal(batch_invariant_linear(x[:n], w, bias), every[:n]), n
    assert torch.equal(batch_invariant_linear(x.view(9, 11, 256), w, bias), every.view(9, 11, 896))
    # a request's rows sit anywhere in a call (what shares the batch decides), and the engine's processes
    # run several threads: a row's result is the same at every offset, on 2 threads too
    threads = torch.get_num_threads()
    try:
        for t in (1, 2):
            torch.set_num_threads(t)
            for start in range(33):
                for n in range(1, 40):
                    assert torch.equal(batch_invariant_linear(x[start:start + n], w, bias), every[start:start + n]), \
                        (t, start, n)
    finally:
        torch.set_num_threads(threads)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(every, torch.nn.functional.linear(x, w, bias), rtol=8 * eps, atol=8 * eps * 256 ** 0.5)


def test_fsdp2_ranks_take_the_fused_route_tied_or_untied(paper_families, chat_model_dir, tmp_path):
    """verl's FSDP engine, built from the launcher's config on two gloo ranks, shards the model and runs the
    fused route: an untied head stays in the root FSDP2 unit (``fsdp_wrap.py``; as verl wraps it, a unit of
    its own, the fused forward's matmul met a sharded DTensor: ``got mixed torch.Tensor and DTensor``), as
    a tied one, the embedding's weight, is. Log-probs, entropies and every parameter's gradient (gathered over
    the ranks) equal verl's functions of the full logits of the unsharded model, at a temperature and on
    two packed sequences of unequal lengths, with gradient checkpointing and without (without fused kernels and
    without flash-attn verl loops over token rows: 11x slower on an H200); the engine's attention is the launcher's (`varlen_attention`: each
    sequence its own, on the CPU one at a time), the unsharded model's today's sdpa over its dense block mask.
    The reference, built from the launcher's ref config in bf16, keeps its rotary frequencies float32
    (``rope_fp32.py``; verl's cast had rounded them), and gives the policy's log-probs and entropies under its
    bf16 mixed precision bit for bit (KL zero at equal weights). The paper's four families (tied and untied
    Qwen2 and Llama) in one launch of the two ranks."""
    configs = {}
    for family, model in paper_families.items():
        configs[family] = launcher_config(model, tmp_path)
        configs[family].actor_rollout_ref.model.tokenizer_path = str(chat_model_dir)  # the Qwen2 stand-ins carry none
    outs = run_engine_ranks(FSDP_FUSED_SCRIPT, configs, tmp_path, world_size=2)
    log = "\n".join(o.stdout[-3000:] for o in outs)
    assert all(o.returncode == 0 for o in outs), log
    done = [line.split() for line in outs[0].stdout.splitlines() if line.endswith(" equal")]
    assert done == [[family, "head-in-root", "equal"] for family in configs], log


def test_rollout_requests_are_seeded_only_when_reproducibility_is_asked(chat_model_dir, tmp_path):
    """``reproducible`` (off by default): the rollout manager's wrapper writes each request's seed into the
    batch (which the project's agent loop puts into vLLM's sampling parameters) and verl's
    ``rollout.full_determinism`` asks vLLM for batch-invariant kernels; off, neither, and vLLM keeps its
    batched sampler. The CPU rehearsal keeps the kernels as they are (vLLM's CPU build fails with that mode)."""
    import types

    from vicurl.engines.verl.patches.rollout_seeds import FIELD, SeededRollouts, batch_seeds

    seen = []

    class Manager:
        def generate_sequences(self, batch):
            seen.append(batch.non_tensor_batch.get(FIELD))
            return types.SimpleNamespace(non_tensor_batch={})

    def batch():
        return types.SimpleNamespace(non_tensor_batch={"extra_info": [{"id": "p1"}, {"id": "p1"}, {"id": "p2"}]})

    SeededRollouts(Manager(), seed=4, step_of=lambda: 2, seeded=False).generate_sequences(batch())
    SeededRollouts(Manager(), seed=4, step_of=lambda: 2, seeded=True).generate_sequences(batch())
    assert seen[0] is None and list(seen[1]) == batch_seeds(4, 2, 0, ["p1", "p1", "p2"])
    assert len(set(seen[1])) == 3

    assert not launcher_config(chat_model_dir, tmp_path).actor_rollout_ref.rollout.full_determinism
    asked = launch_settings(reproducible=True)
    assert launcher_config(chat_model_dir, tmp_path, asked).actor_rollout_ref.rollout.full_determinism
    cpu = yaml.safe_load((REPO / "config" / "gpu_smoke_cpu.yaml").read_text())["verl"]
    assert not launcher_config(chat_model_dir, tmp_path, asked, verl=cpu).actor_rollout_ref.rollout.full_determinism
