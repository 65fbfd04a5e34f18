"""The verl engine's path to a GPU run, checked with verl's and transformers' own code on the CPU.

Each test runs the library code that a first cluster run would run at that point: verl's model
config (``HFModelConfig``), its model loading, its packed (remove-padding) model inputs, its
FSDP checkpoint manager (two gloo ranks, FSDP2 shards), its model merger and its rollout
tokenizer (the Continuous Token builder). Nothing of verl is mocked here; the tiny model is a
Llama whose tokenizer has a BOS token and a Llama-3-like chat template.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from omegaconf import OmegaConf

from vicurl.config.settings import TrainSettings
from vicurl.data import schema
from vicurl.data.long_prompts import fit, prompt_lengths, training_limit
from vicurl.data.prompts import build_prompts
from vicurl.engines.verl import export, launch, varlen_attention
from vicurl.engines.verl.data import VERBATIM_TEMPLATE
from vicurl.engines.verl.trainer import CURRICULUM_STATE, VICuRLTrainer
from vicurl.runtime import vllm_env

from harness import CHARS, CHAT_MODEL, LAUNCHER_RUN, REPO, settings_for, tiny_llama, tiny_qwen2


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory):
    """A 2-layer Llama and a character tokenizer with BOS ``<s>`` (prepended by the tokenizer's
    post-processor, as Llama's is) and a chat template that renders the BOS itself."""
    return tiny_llama(tmp_path_factory.mktemp("chat_model") / "model", **CHAT_MODEL)


def launch_settings(**kw):
    """The launcher's run: majority vote, VI-CuRL (no parameters given: the settings' defaults)."""
    return settings_for("majority_vote", "vicurl", run=LAUNCHER_RUN, params_from=None, **kw)


def launcher_config(model_dir, work, settings=None, verl=None):
    """verl's composed ``ppo_trainer`` config with the launcher's overrides for this model."""
    ov = launch.overrides(settings or launch_settings(), model_path=str(model_dir), train_files=str(work / "t.parquet"),
                          work_dir=str(work), settings_path=str(work / "s.json"), train_set=str(work / "ts.parquet"),
                          vocab_size=100, n_train=8, verl={"n_gpus_per_node": 1, **(verl or {})})
    return launch.compose(ov)


def verl_model_config(config):
    """What verl's TaskRunner and workers build from ``actor_rollout_ref.model`` (main_ppo_v0)."""
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(config.actor_rollout_ref.model)


def load_like_verls_engine(model_config):
    """The actor's module as verl's FSDP engine builds it (``FSDPEngine._build_module``)."""
    from verl.utils.model import get_hf_auto_model_class

    cls = get_hf_auto_model_class(hf_config=model_config.hf_config)
    return cls.from_pretrained(model_config.local_path, torch_dtype=torch.float32, config=model_config.hf_config)


# ---------------------------------------------------------------- 1. attention implementation


def test_the_launchers_model_config_loads_through_verls_own_code(chat_model_dir, tmp_path):
    """The launcher's attention (`varlen_attention`, which verl's processes import as this test module does)
    through verl's model config and its engine's loading."""
    mc = verl_model_config(launcher_config(chat_model_dir, tmp_path))
    assert mc.hf_config._attn_implementation == varlen_attention.NAME and mc.use_remove_padding
    model = load_like_verls_engine(mc)
    assert model.config._attn_implementation == varlen_attention.NAME


def test_verls_default_attention_needs_flash_attn(chat_model_dir, tmp_path):
    """Without the launcher's choice verl asks for flash_attention_2, which the envs do not install."""
    import importlib.util

    from verl.workers.config import HFModelConfig

    mc = HFModelConfig(path=str(chat_model_dir))
    assert mc.hf_config._attn_implementation == "flash_attention_2"
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here")
    with pytest.raises(ImportError, match="FlashAttention2"):
        load_like_verls_engine(mc)


@pytest.mark.parametrize("attention", [varlen_attention.NAME, "sdpa"])
def test_packed_log_probs_equal_one_sequence_at_a_time(attention, chat_model_dir, tmp_path):
    """verl's remove-padding forward (sequences packed in one row, attention_mask None, position ids
    restarting at each sequence: ``FSDPEngineWithLMHead.prepare_model_inputs``) attends within each
    sequence only, under the launcher's attention (each sequence its own causal attention; on the CPU one
    at a time) and under sdpa (a dense block mask transformers builds from the position ids): the log-probs
    equal those of each sequence alone. So do a padded batch (a 2D mask, which the packed route never
    passes) and a batch of rows without positions under the launcher's attention."""
    from verl.utils.torch_functional import logprobs_from_logits

    config = launcher_config(chat_model_dir, tmp_path, verl={"attn_implementation": attention})
    model = load_like_verls_engine(verl_model_config(config)).eval()
    assert model.config._attn_implementation == attention
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(5, model.config.vocab_size, (n,), generator=g) for n in (7, 12, 3, 9)]
    input_ids = torch.nested.as_nested_tensor(seqs, layout=torch.jagged)
    position_ids = torch.nested.as_nested_tensor([torch.arange(len(s)) for s in seqs], layout=torch.jagged)
    with torch.no_grad():
        logits = model(input_ids=input_ids.values().unsqueeze(0), attention_mask=None,
                       position_ids=position_ids.values().unsqueeze(0), use_cache=False).logits[0]  # as verl calls it
        rolled = torch.roll(input_ids.values(), shifts=-1)
        packed = logprobs_from_logits(logits, rolled)
        start, alone = 0, []
        for s in seqs:
            alone.append(model(input_ids=s[None], use_cache=False).logits[0])
            lp = logprobs_from_logits(alone[-1][:-1], s[1:])
            torch.testing.assert_close(packed[start : start + len(s) - 1], lp, atol=1e-5, rtol=1e-5)
            start += len(s)
        if attention == varlen_attention.NAME:
            padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
            mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(s), dtype=torch.long) for s in seqs], batch_first=True)
            logits = model(input_ids=padded, attention_mask=mask, use_cache=False).logits
            for row, one in zip(logits, alone):
                torch.testing.assert_close(row[: len(one)], one, atol=1e-5, rtol=1e-5)
            # rows of equal length, neither positions nor a mask given (transformers passes one row of positions)
            pair = torch.stack([seqs[0], seqs[0].flip(0)])
            rows = model(input_ids=pair, use_cache=False).logits
            torch.testing.assert_close(rows[0], alone[0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(rows[1], model(input_ids=pair[1:], use_cache=False).logits[0], atol=1e-5, rtol=1e-5)


def _flash(q, k, v, cu, causal, scale=None):
    """A stand-in for ATen's flash kernel, which every release's varlen_attn calls: SDPA over each segment, as
    told (no default it does not have); fewer key/value heads than query heads taken as they are, as the
    kernel takes them (it refuses copies of another width only if they do not divide the queries')."""
    if q.shape[1] % k.shape[1]:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")
    out = []
    for a, b in zip(cu[:-1].tolist(), cu[1:].tolist()):
        seg = [x[a:b].transpose(0, 1)[None] for x in (q, k, v)]
        out.append(torch.nn.functional.scaled_dot_product_attention(*seg, is_causal=causal, scale=scale,
                                                                    enable_gqa=True)[0].transpose(0, 1))
    return torch.cat(out)


def varlen_first_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
    """The first releases' signature: ``is_causal``, no scale."""
    return _flash(query, key, value, cu_seq_q, is_causal)


def varlen_2_11_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                     window_size=(-1, -1), k_cache=None, v_cache=None, cache_seqlens=None, cache_batch_idx=None,
                     page_table=None, seqused_k=None):
    """The GPU lock's (torch 2.11): causal only as ``window_size == (-1, 0)``, ``scale``, no ``enable_gqa``
    (grouped heads go to the kernel unchecked)."""
    return _flash(query, key, value, cu_seq_q, window_size == (-1, 0), scale)


def varlen_later_form(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                      window_size=(-1, -1), enable_gqa=False, seqused_k=None, block_table=None, num_splits=None):
    """torch 2.13's: as 2.11's, and grouped heads refused unless ``enable_gqa`` (a check, then the same kernel)."""
    if key.shape[1] != query.shape[1] and not enable_gqa:
        raise ValueError("Try setting enable_gqa=True for GQA.")
    return _flash(query, key, value, cu_seq_q, window_size == (-1, 0), scale)


@pytest.mark.parametrize("kernel", [varlen_first_form, varlen_2_11_form, varlen_later_form])
def test_the_gpu_kernel_is_called_causal_with_the_models_scale_and_heads(kernel, monkeypatch):
    """The launcher's attention calls torch's varlen kernel (a GPU's route, which a CPU cannot run) by the
    keywords the installed signature has: against a stand-in of each form, causal, at a scale that is not
    the kernel's default, with grouped-query heads (4 queries' to 2 keys', passed at their own width: no
    copy), on segments of unequal lengths, it gives the CPU's route one segment at a time."""
    import functools

    import torch.nn.attention.varlen as varlen

    widths = []  # the key heads each call passed

    @functools.wraps(kernel)  # its signature, which the launcher's attention reads
    def called(query, key, *args, **kwargs):
        widths.append(key.shape[1])
        return kernel(query, key, *args, **kwargs)

    monkeypatch.setattr(varlen, "varlen_attn", called)
    varlen_attention._varlen_parameters.cache_clear()
    try:
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(23, h, 16, generator=g) for h in (4, 2, 2))
        cu = varlen_attention.segments(torch.cat([torch.arange(n) for n in (9, 3, 11)]))
        got = varlen_attention.varlen_kernel(q, k, v, cu, 11, scale=0.3)
    finally:
        varlen_attention._varlen_parameters.cache_clear()
    assert widths == [2]
    torch.testing.assert_close(got, varlen_attention.by_segment(q, k, v, cu, 0.3), rtol=1e-5, atol=1e-6)


def test_rows_and_position_jumps_start_sequences_as_under_sdpa(chat_model_dir, tmp_path):
    """Position ids that are not verl's packs are read as transformers reads them under sdpa: rows whose
    positions start above 0 are each their own sequence, and a sequence ends wherever a position does not
    follow the previous one (not only where one restarts at 0): the launcher's attention gives sdpa's
    logits, which attend that way."""
    models = {a: load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path / a,
                                                                          verl={"attn_implementation": a}))).eval()
              for a in (varlen_attention.NAME, "sdpa")}
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, models["sdpa"].config.vocab_size, (2, 8), generator=g)
    cases = {"rows from 5": (ids, torch.arange(5, 13).expand(2, 8)),
             "a jump": (ids[:1], torch.tensor([[0, 1, 2, 3, 7, 8, 9, 10]])),
             "a restart and a jump": (ids[:1], torch.tensor([[0, 1, 2, 0, 1, 5, 6, 7]]))}
    with torch.no_grad():
        for name, (x, pos) in cases.items():
            got, want = (models[a](input_ids=x, position_ids=pos, use_cache=False).logits
                         for a in (varlen_attention.NAME, "sdpa"))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=name)


def test_a_forward_pass_reads_its_sequences_once(chat_model_dir, tmp_path, monkeypatch):
    """The boundaries of a pack are computed once per forward pass, not once a layer (on a GPU each
    computation stops the host until the GPU catches up); another pack, or the same tensor changed in
    place, is read again."""
    model = load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path))).eval()
    assert model.config.num_hidden_layers > 1
    calls = []
    segments = varlen_attention.segments
    monkeypatch.setattr(varlen_attention, "segments", lambda pos: calls.append(pos) or segments(pos))
    ids = torch.randint(5, model.config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(2))
    pos = torch.cat([torch.arange(5), torch.arange(7)])[None]
    with torch.no_grad():
        first = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        assert len(calls) == 1
        torch.testing.assert_close(model(input_ids=ids, position_ids=pos, use_cache=False).logits, first)
        assert len(calls) == 1
        pos[0, 5:] = torch.arange(5, 12)  # one sequence now
        whole = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        assert len(calls) == 2
        model(input_ids=ids, position_ids=pos.clone(), use_cache=False)
        assert len(calls) == 3
        torch.testing.assert_close(whole, model(input_ids=ids, use_cache=False).logits)  # transformers' positions
        assert len(calls) == 4


def test_what_the_attention_cannot_compute_is_refused(monkeypatch):
    """Soft-capping, attention sinks, a non-causal module, a 4D mask and verl's Ulysses sequence
    parallelism (which gathers the sequence only on the flash-attn path) are refused, never ignored;
    boundaries a caller computed (flash attention's ``cu_seq_lens_*``) are taken as given."""
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(1, 4, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g), torch.randn(1, 2, 10, 8, generator=g)
    causal, pos = SimpleNamespace(is_causal=True), torch.cat([torch.arange(4), torch.arange(6)])[None]
    want, _ = varlen_attention.attention(causal, q, k, v, None, scaling=0.3, position_ids=pos)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    got, _ = varlen_attention.attention(causal, q, k, v, None, scaling=0.3, cu_seq_lens_q=cu, cu_seq_lens_k=cu,
                                        max_length_q=6, max_length_k=6)
    torch.testing.assert_close(got, want)
    for kwargs, match in (({"softcap": 30.0}, "soft-capping"), ({"s_aux": torch.zeros(4)}, "sinks"),
                          ({"is_causal": False}, "non-causal"), ({"dropout": 0.1}, "dropout")):
        with pytest.raises(ValueError, match=match):
            varlen_attention.attention(causal, q, k, v, None, position_ids=pos, **kwargs)
    with pytest.raises(ValueError, match="non-causal"):
        varlen_attention.attention(SimpleNamespace(is_causal=False), q, k, v, None, position_ids=pos)
    with pytest.raises(ValueError, match="4D mask"):
        varlen_attention.attention(causal, q, k, v, torch.ones(1, 1, 10, 10, dtype=torch.bool))
    import verl.utils.ulysses as ulysses

    monkeypatch.setattr(ulysses, "get_ulysses_sequence_parallel_world_size", lambda group=None: 2)
    with pytest.raises(ValueError, match="ulysses"):
        varlen_attention.attention(causal, q, k, v, None, position_ids=pos.clone())


def test_gradient_checkpointing_changes_no_log_prob_nor_gradient(chat_model_dir, tmp_path):
    """The update with and without gradient checkpointing (``verl.gradient_checkpointing``, off for the
    paper's smaller models, as verl enables it: non-reentrant) on a packed micro-batch of unequal lengths
    under the launcher's attention: the same log-probs and the same gradient of every parameter."""
    from verl.utils.torch_functional import logprobs_from_logits

    model = load_like_verls_engine(verl_model_config(launcher_config(chat_model_dir, tmp_path))).train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, model.config.vocab_size, (1, 23), generator=g)
    pos = torch.cat([torch.arange(9), torch.arange(14)])[None]
    weights = torch.randn(23, generator=g)

    def update(checkpointing: bool):
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_disable()
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, position_ids=pos, use_cache=False).logits[0]
        lp = logprobs_from_logits(logits, torch.roll(ids[0], -1))
        (lp * weights).sum().backward()
        return lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    (lp_on, grads_on), (lp_off, grads_off) = update(True), update(False)
    assert model.is_gradient_checkpointing is False
    torch.testing.assert_close(lp_on, lp_off, rtol=0, atol=0)
    assert grads_on.keys() == grads_off.keys()
    for name, grad in grads_on.items():
        torch.testing.assert_close(grad, grads_off[name], rtol=1e-6, atol=1e-8, msg=lambda m: f"{name}: {m}")


# ---------------------------------------------------------------- 2., 4. exports: merged shards, base tokenizer

SAVE_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

model_cfg, out, step, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=int(os.environ["RANK"]),
                        world_size=int(os.environ["WORLD_SIZE"]))
mc = omega_conf_to_dataclass(OmegaConf.load(model_cfg))  # the launcher's actor_rollout_ref.model
from verl.utils.model import get_hf_auto_model_class
model = get_hf_auto_model_class(hf_config=mc.hf_config).from_pretrained(mc.local_path, torch_dtype=torch.float32,
                                                                         config=mc.hf_config)
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("fsdp",))
for layer in model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
if mode == "save":
    with torch.no_grad():  # a trained policy differs from the base
        for p in model.parameters():
            p.add_(0.01)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
contents = {"save_contents": ["model", "optimizer", "extra"], "load_contents": ["model", "optimizer", "extra"]}
cm = FSDPCheckpointManager(model=model, optimizer=opt, lr_scheduler=None, processing_class=mc.get_processor(),
                           checkpoint_config=contents)
if mode == "save":
    cm.save_checkpoint(out, None, step, max_ckpt_to_keep=1)
else:  # load the save into the base model's shards, as a resuming worker does: the saved weights
    cm.load_checkpoint(out)
    base = get_hf_auto_model_class(hf_config=mc.hf_config).from_pretrained(mc.local_path, torch_dtype=torch.float32,
                                                                            config=mc.hf_config)
    for (name, p), q in zip(model.named_parameters(), base.parameters()):
        torch.testing.assert_close(p.full_tensor(), q + 0.01, msg=name)
dist.destroy_process_group()
"""


def rendezvous(work: Path) -> dict[str, str]:
    """Where a test's gloo ranks meet: a file of their own (a free port chosen first could be taken by another
    process, Ray's or vLLM's of the other suite, before rank 0 binds it)."""
    return {"RENDEZVOUS": f"file://{work}/rendezvous-{secrets.token_hex(4)}"}


def save_fsdp_checkpoint(config, actor_dir: Path, tmp_path: Path, step: int, world_size: int = 2,
                         mode: str = "save") -> None:
    """verl's ``FSDPCheckpointManager.save_checkpoint`` of an FSDP2 model on ``world_size`` gloo ranks,
    the model and tokenizer built from the launcher's model config as verl's workers build them
    (``mode="load"``: its ``load_checkpoint`` of such a save, checking the weights it loads)."""
    script, model_cfg = tmp_path / "save.py", tmp_path / "model.yaml"
    script.write_text(SAVE_SCRIPT)
    OmegaConf.save(config.actor_rollout_ref.model, model_cfg)
    env = {**os.environ, **rendezvous(tmp_path), "WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": "1"}
    env.update(launch.verl_environment(env))  # the project's modules in verl, as its workers import them
    procs = [subprocess.Popen([sys.executable, str(script), str(model_cfg), str(actor_dir), str(step), mode],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world_size)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)[-3000:]


@pytest.fixture(scope="module")
def saved_step(chat_model_dir, tmp_path_factory):
    """A verl resume checkpoint of step 3 (two FSDP2 ranks) from the launcher's config."""
    tmp = tmp_path_factory.mktemp("fsdp")
    config = launcher_config(chat_model_dir, tmp)
    ckpt = tmp / "verl_checkpoints"
    save_fsdp_checkpoint(config, export.step_dir(ckpt, 3) / "actor", tmp, step=3)
    return config, ckpt


def test_an_export_renders_the_base_models_chat_prompt(chat_model_dir, saved_step, tmp_path):
    """base model -> launcher's tokenizer setup (verl's model config: the pass-through template) ->
    verl's checkpoint save -> export -> load: the prompt the base tokenizer renders, and the weights."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, ckpt = saved_step
    actor = export.step_dir(ckpt, 3) / "actor"
    saved = AutoTokenizer.from_pretrained(actor / "huggingface")
    assert saved.chat_template == VERBATIM_TEMPLATE  # what verl's save leaves: the defect an export must not copy
    assert "hf_model" not in config.actor_rollout_ref.actor.checkpoint.save_contents
    dest = tmp_path / "exports" / "step3"
    export.export_step(actor, dest, chat_model_dir)

    base, exported = AutoTokenizer.from_pretrained(chat_model_dir), AutoTokenizer.from_pretrained(dest)
    msgs = [{"role": "user", "content": "What is 2+3?"}]
    want = base.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert exported.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == want
    assert want.startswith("<s><|start|>user\n")
    assert exported("x 1", add_special_tokens=False)["input_ids"] == base("x 1", add_special_tokens=False)["input_ids"]
    # the weights: the shards' (base + 0.01), merged, in bf16 as verl's own hf_model save writes them
    model, ref = AutoModelForCausalLM.from_pretrained(dest), AutoModelForCausalLM.from_pretrained(chat_model_dir)
    for (name, p), (_, q) in zip(model.state_dict().items(), ref.state_dict().items()):
        torch.testing.assert_close(p.float(), (q + 0.01).bfloat16().float(), msg=name)


def test_an_export_is_made_and_loaded_where_the_launchers_attention_is_unknown(chat_model_dir, saved_step, tmp_path):
    """verl saves the training's attention (`varlen_attention`'s name) in the checkpoint's config. The
    launcher's own process merges a checkpoint a killed job left unexported, and an evaluation loads the export,
    neither having imported verl's external modules: the export is made there, and names no attention."""
    _, ckpt = saved_step
    actor = export.step_dir(ckpt, 3) / "actor"
    assert json.loads((actor / "huggingface" / "config.json").read_text())["attn_implementation"] == varlen_attention.NAME
    dest = tmp_path / "step3"
    code = ("import sys; from vicurl.engines.verl import export; export.export_step(sys.argv[1], sys.argv[2], sys.argv[3]); "
            "from transformers import AutoModelForCausalLM; m = AutoModelForCausalLM.from_pretrained(sys.argv[2]); "
            "print(m.config._attn_implementation)")
    out = subprocess.run([sys.executable, "-c", code, str(actor), str(dest), str(chat_model_dir)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "attn_implementation" not in json.loads((dest / "config.json").read_text())
    assert out.stdout.split()[-1] == "sdpa"  # transformers' own choice for a plain model


def test_a_killed_export_is_redone_and_a_rotated_one_is_refused(chat_model_dir, saved_step, tmp_path):
    config, ckpt = saved_step
    work = tmp_path / "work"
    (ckpt / export.TRACKER).write_text("3")
    half = work / "exports" / ".step3.k1ll3d.tmp" / "step3"  # what a job killed inside atomic_path leaves
    half.mkdir(parents=True)
    (half / "model.safetensors").write_bytes(b"\0" * 1000)
    assert export.missing_exports(work, [3, 6], ckpt) == [3]
    assert export.repair_exports(work, [3, 6], ckpt, chat_model_dir) == [3]
    assert (work / "exports" / "step3" / "config.json").exists() and export.missing_exports(work, [3, 6], ckpt) == []
    assert [p.name for p in (work / "exports").iterdir()] == ["step3"]  # the half-written folder went
    with pytest.raises(RuntimeError, match=r"steps \[2\].*delete"):
        export.repair_exports(work, [2, 3], ckpt, chat_model_dir)  # step 2's shards were rotated away


# ---------------------------------------------------------------- 3. a finished run only publishes


def test_a_rerun_after_the_last_save_publishes_without_training(chat_model_dir, saved_step, tmp_path, monkeypatch):
    """The tracker says T (the job died while exporting or publishing): no verl run (it would train
    step T + 1), the missing export is merged from the shards, everything is published."""
    import shutil

    _, ckpt0 = saved_step
    work = tmp_path / "_work"
    ckpt = work / "verl_checkpoints"
    shutil.copytree(export.step_dir(ckpt0, 3), export.step_dir(ckpt, 3))
    (ckpt / export.TRACKER).write_text("3")
    metrics = [{"step": s, "reward/mean": 0.1 * s} for s in (1, 2, 3)]
    (work / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(4), train_set)
    monkeypatch.setattr(launch, "train", lambda *a, **k: pytest.fail("a finished run must not train again"))
    s = launch_settings(total_steps=3, export_steps=[3])
    out = launch.run(s, str(chat_model_dir), str(train_set), str(work), str(tmp_path / "ck"), str(tmp_path / "m.jsonl"))
    assert (tmp_path / "ck" / "step3" / "model.safetensors").exists()
    assert [json.loads(x)["step"] for x in (tmp_path / "m.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert out["long_prompts"]["dropped"] == 0


def test_verl_resuming_from_the_last_step_is_refused(tmp_path):
    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto"}})
    t._hook = type("H", (), {"total_steps": 6})()
    t.global_steps = 6
    with pytest.raises(RuntimeError, match="nothing to train"):
        _load_after_verls(t)


def _load_after_verls(t):
    """``VICuRLTrainer._load_checkpoint`` with verl's own part done (it set global_steps from the tracker)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    orig = RayPPOTrainer._load_checkpoint
    RayPPOTrainer._load_checkpoint = lambda self: None
    try:
        return t._load_checkpoint()
    finally:
        RayPPOTrainer._load_checkpoint = orig


# ---------------------------------------------------------------- 5. prompts over max_prompt_length


def train_df(n, long_every=None):
    q = [("What is " + "1+" * (40 if long_every and i % long_every == 0 else 1) + f"{i}?") for i in range(n)]
    return schema.to_frame([schema.make_row(id=f"p{i}", question=q[i], answer=str(i + 1), source="t") for i in range(n)])


def test_prompt_lengths_are_the_tokens_verls_rollout_builds(chat_model_dir, tmp_path):
    """verl's agent loop tokenizes the parquet's message with its Continuous Token builder and the
    launcher's pass-through template: exactly the ids we count (no BOS added)."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    mc = verl_model_config(launcher_config(chat_model_dir, tmp_path))
    tok = mc.tokenizer  # verl set the custom template on it
    assert tok.chat_template == VERBATIM_TEMPLATE
    from transformers import AutoTokenizer

    prompts = build_prompts(train_df(3), "question_first", AutoTokenizer.from_pretrained(chat_model_dir), True)
    for model_type in ("llama", None):  # Llama's builder, the generic one (qwen2's needs Qwen's <|im_end|>)
        builder = create_continuous_token_builder(tok, hf_model_type=model_type)
        built = [builder.build_initial_tokens([{"role": "user", "content": p}]) for p in prompts]
        assert [len(b) for b in built] == prompt_lengths(tok, prompts)
        assert built[0] == tok(prompts[0], add_special_tokens=False)["input_ids"]
        assert built[0].count(tok.bos_token_id) == 1  # the chat template's BOS, and no second one


def test_long_prompts_are_dropped_and_counted_or_refused(chat_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    df = train_df(6, long_every=3)  # p0, p3 are long
    prompts = build_prompts(df, "question_first", tok, True)
    kept, kept_prompts, report = fit(df, prompts, tok, training_limit(220))
    assert report["dropped"] == 2 and report["dropped_ids"] == ["p0", "p3"] and report["rows"] == 6
    assert list(kept["id"]) == ["p1", "p2", "p4", "p5"] and kept_prompts == [prompts[i] for i in (1, 2, 4, 5)]
    assert max(prompt_lengths(tok, kept_prompts)) <= 220 < report["longest"]
    with pytest.raises(ValueError, match=r"train.parquet: 2 prompt\(s\) longer than train.max_prompt_length=220.*'p0'"):
        fit(df, prompts, tok, training_limit(220), "fail", source="train.parquet")


def test_the_launcher_trains_on_the_kept_rows_only(chat_model_dir, tmp_path):
    """The verl parquet and the set the trainer's hook reads hold the same kept rows, in order
    (verl's dataset row i is the hook's row i); the count is in long_prompts.json."""
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(6, long_every=3), train_set)
    work = tmp_path / "_work"
    work.mkdir()
    report = launch.prepare(launch_settings(max_prompt_length=220), str(chat_model_dir), str(train_set), work)
    verl_rows = pd.read_parquet(work / "verl_train.parquet")
    hook_rows = schema.read(work / "train_set.parquet")
    assert [e["id"] for e in verl_rows["extra_info"]] == list(hook_rows["id"]) == ["p1", "p2", "p4", "p5"]
    assert json.loads((work / "long_prompts.json").read_text()) == report and report["dropped"] == 2


# ---------------------------------------------------------------- continued runs (the mechanism study)


def _tree_digest(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def source_run_work(saved_step, work: Path):
    """A finished run's work folder as verl leaves it: the last save (step 3: FSDP shards, the
    dataloader's state after 3 batches, the curriculum's state), the tracker, the per-step metrics.
    Returns the folder and the batches the source's dataloader would have drawn next."""
    import shutil

    from torchdata.stateful_dataloader import StatefulDataLoader

    _, ckpt0 = saved_step
    ckpt = export.checkpoint_dir(work)
    shutil.copytree(export.step_dir(ckpt0, 3), export.step_dir(ckpt, 3))
    loader = StatefulDataLoader(list(range(20)), batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(0))
    it = iter(loader)
    for _ in range(3):
        next(it)
    torch.save(loader.state_dict(), export.step_dir(ckpt, 3) / "data.pt")  # what verl's _save_checkpoint writes
    following = [next(it).tolist() for _ in range(4)]
    (export.step_dir(ckpt, 3) / CURRICULUM_STATE).write_text(json.dumps({"step": 3, "curriculum": {}}))
    (ckpt / export.TRACKER).write_text("3")
    (work / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/mean": 0.1 * s}) + "\n" for s in (1, 2, 3)))
    return work, following


def test_a_continued_run_resumes_verl_from_its_source_runs_last_save(chat_model_dir, saved_step, tmp_path):
    """``export.fork`` puts the source run's last save into the continued run's checkpoints; then
    verl's own resume (``RayPPOTrainer._load_checkpoint``) finds it by its tracker, hands its shards to
    the actor, whose ``FSDPCheckpointManager`` loads the source's weights, and its dataloader draws the
    batches the source's would have drawn next. What the continued run writes afterwards (its metrics,
    verl's tracker, the rotation of old saves) leaves the source run's files as they were."""
    import shutil
    from types import SimpleNamespace

    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    from vicurl.curriculum import make_curriculum

    src, following = source_run_work(saved_step, tmp_path / "main" / "_work")
    before = _tree_digest(src)
    work = tmp_path / "mechanism" / "_work"
    export.fork(src, work, 3)
    ckpt = export.checkpoint_dir(work)
    assert find_latest_ckpt_path(str(ckpt)) == str(export.step_dir(ckpt, 3))
    shard = next((export.step_dir(ckpt, 3) / "actor").glob("model_world_size_*.pt"))
    assert shard.samefile(export.step_dir(export.checkpoint_dir(src), 3) / "actor" / shard.name)  # linked, not copied

    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({"trainer": {"default_local_dir": str(ckpt), "default_hdfs_dir": None,
                                             "resume_mode": "auto", "del_local_ckpt_after_load": False}})
    loaded = []
    t.actor_rollout_wg = SimpleNamespace(load_checkpoint=lambda path, del_local_after_load: loaded.append(path))
    t.use_critic = False
    t.train_dataloader = StatefulDataLoader(list(range(20)), batch_size=2, shuffle=True,
                                            generator=torch.Generator().manual_seed(0))
    t._hook = SimpleNamespace(total_steps=6, curriculum=make_curriculum("vicurl", {}))
    t._load_checkpoint()  # verl's, then the curriculum's state
    assert t.global_steps == 3 and loaded == [str(export.step_dir(ckpt, 3) / "actor")]
    it = iter(t.train_dataloader)
    assert [next(it).tolist() for _ in range(4)] == following  # the data order goes on
    save_fsdp_checkpoint(saved_step[0], Path(loaded[0]), tmp_path, step=3, mode="load")  # the source's weights

    with open(work / "metrics.jsonl", "a") as f:  # the hook's next record
        f.write(json.dumps({"step": 4}) + "\n")
    (ckpt / export.TRACKER).write_text("6")  # verl's next save, and its rotation of the forked one
    shutil.rmtree(export.step_dir(ckpt, 3))
    assert _tree_digest(src) == before


def test_the_launcher_forks_before_training_and_only_once(chat_model_dir, saved_step, tmp_path, monkeypatch):
    src, _ = source_run_work(saved_step, tmp_path / "main" / "_work")
    work = tmp_path / "mechanism" / "_work"
    train_set = tmp_path / "train.parquet"
    schema.write(train_df(4), train_set)
    seen = []

    def train(settings, model_path, work_dir, *a, **k):  # verl's run would resume from what it finds here
        seen.append(export.last_saved_step(export.checkpoint_dir(work_dir)))
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "train", train)
    s = launch_settings(total_steps=6, export_steps=[6], curriculum_steps=3)
    for _ in range(2):
        with pytest.raises(KeyboardInterrupt):
            launch.run(s, str(chat_model_dir), str(train_set), str(work), str(tmp_path / "ck"), str(tmp_path / "m.jsonl"),
                       start_from={"work_dir": str(src), "step": 3})
        (export.checkpoint_dir(work) / export.TRACKER).write_text("5")  # the continued run saved step 5, was killed
    assert seen == [3, 5]  # the second job resumes from the run's own save, not from the source's again
    assert [json.loads(x)["step"] for x in (work / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    with pytest.raises(RuntimeError, match="no complete save of step 2"):
        export.fork(src, tmp_path / "other" / "_work", 2)


# ---------------------------------------------------------------- 6. the curriculum state before verl's tracker


class _SaveOnly:
    """The actor worker group's ``save_checkpoint`` (what verl's ``_save_checkpoint`` calls on it)."""

    def __init__(self, fail=False):
        self.fail = fail

    def save_checkpoint(self, local_path, remote_path, step, max_ckpt_to_keep=None):
        state = Path(local_path).parent / CURRICULUM_STATE
        assert state.exists(), "the curriculum state must be on disk before verl's save (and its tracker)"
        if self.fail:
            raise KeyboardInterrupt("killed while saving")


def state_trainer(tmp_path, fail=False):
    from vicurl.curriculum import make_curriculum

    t = object.__new__(VICuRLTrainer)
    t.config = OmegaConf.create({
        "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": False}}},
        "trainer": {"default_local_dir": str(tmp_path / "ckpt"), "default_hdfs_dir": None, "max_actor_ckpt_to_keep": 1},
        "vicurl": {"work_dir": str(tmp_path / "work")}})
    t.use_critic = False
    t.actor_rollout_wg = _SaveOnly(fail)
    t.train_dataloader = type("DL", (), {"state_dict": lambda self: {}})()
    t._hook = type("H", (), {"settings": TrainSettings(total_steps=6), "total_steps": 6,
                             "curriculum": make_curriculum("vicurl", {})})()
    return t


def test_the_curriculum_state_is_written_before_verls_tracker(tmp_path):
    t = state_trainer(tmp_path)
    t.global_steps = 2
    t._save_checkpoint()
    assert export.last_saved_step(tmp_path / "ckpt") == 2
    t = state_trainer(tmp_path, fail=True)
    t.global_steps = 4
    with pytest.raises(KeyboardInterrupt):
        t._save_checkpoint()
    assert export.last_saved_step(tmp_path / "ckpt") == 2  # the tracker still names a complete save
    assert (export.step_dir(tmp_path / "ckpt", 2) / CURRICULUM_STATE).exists()


# ---------------------------------------------------------------- the first GPU run for users


def test_the_gpu_smoke_config_composes_with_verls_config():
    """config/gpu_smoke.yaml: one verl run on one GPU, exported at steps 2 and 4, accepted by verl's
    own config and ``validate_config`` (what its ``main`` runs first)."""
    import yaml
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from vicurl.config import checks
    from vicurl.config import runs as runs_lib
    from vicurl.engines.verl.hook import check_settings

    cfg = checks.read(yaml.safe_load((REPO / "config" / "gpu_smoke.yaml").read_text()))
    (run,) = runs_lib.runs(cfg)
    settings = runs_lib.train_settings(cfg, run)
    check_settings(settings)
    assert settings["export_steps"] == [2, 4] and settings["chat_template"]
    ov = launch.overrides(settings, model_path=cfg["models"][run.model]["hub_id"], train_files="/d/t.parquet",
                          work_dir="/w", settings_path="/w/s.json", train_set="/w/ts.parquet", vocab_size=151936,
                          n_train=256, verl=cfg["verl"])
    c = launch.compose(ov)
    validate_config(config=c, use_reference_policy=need_reference_policy(c), use_critic=need_critic(c))
    assert c.trainer.n_gpus_per_node == 1 and c.trainer.save_freq == 2 and c.actor_rollout_ref.rollout.n == 4


def test_a_dtype_the_gpu_kernel_cannot_take_stops_the_run_before_a_model_is_built():
    """On a GPU, the actor or reference computing in fp32 under vicurl_varlen is refused from verl's composed
    config, naming the setting (SDPA one segment at a time would run instead, with two host syncs a layer);
    bf16, sdpa and the CPU pass."""
    import yaml

    from vicurl.config import checks
    from vicurl.config import runs as runs_lib

    cfg = checks.read(yaml.safe_load((REPO / "config" / "gpu_smoke.yaml").read_text()))
    (run,) = runs_lib.runs(cfg)

    def composed(*extra, attention=varlen_attention.NAME):
        ov = launch.overrides(runs_lib.train_settings(cfg, run), model_path="/m", train_files="/d/t.parquet",
                              work_dir="/w", settings_path="/w/s.json", train_set="/w/ts.parquet",
                              vocab_size=151936, n_train=256, verl={**cfg["verl"], "attn_implementation": attention})
        return launch.compose([*ov, *extra])

    varlen_attention.check_config(composed(), cuda=True)
    for role in ("actor", "ref"):
        fp32 = f"+actor_rollout_ref.{role}.fsdp_config.mixed_precision.param_dtype=fp32"
        with pytest.raises(ValueError, match=f"the {role} .*mixed_precision.param_dtype.*attn_implementation: sdpa"):
            varlen_attention.check_config(composed(fp32), cuda=True)
        varlen_attention.check_config(composed(fp32), cuda=False)  # the CPU's route, as the rehearsal takes it
        varlen_attention.check_config(composed(fp32), cuda=None)  # this machine: no GPU
        varlen_attention.check_config(composed(fp32, attention="sdpa"), cuda=True)


def deepseek_distill_tokenizer():
    """A character tokenizer with DeepSeek-R1-Distill-Qwen's special tokens (its tokenizer.json: ids
    151643-151649 are <｜end▁of▁sentence｜>, <｜User｜>, <｜Assistant｜>, <｜begin▁of▁sentence｜>, <|EOT|>,
    <think>, </think>, where Qwen2.5's <|im_end|> was) and its chat format."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>", "<|EOT|>",
                "<think>", "</think>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for c in CHARS + CHAT_MODEL["extra_chars"]:
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token=None))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tk.add_special_tokens(specials)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<｜begin▁of▁sentence｜>",
                                  eos_token="<｜end▁of▁sentence｜>", pad_token="<｜end▁of▁sentence｜>")
    tok.chat_template = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}"
                         "{% endif %}{% endfor %}{% if add_generation_prompt %}<｜Assistant｜><think>\n{% endif %}")
    return tok


def test_r1_distills_tokenizer_gets_a_token_builder_it_supports():
    """DeepSeek-R1-Distill's config says qwen2, and verl's agent loop then builds Qwen's token builder,
    which requires <|im_end|>: R1-Distill's tokenizer has none, and the rollout would fail at its first
    request. The project's agent loop (`rollout_seeds.SeededSingleTurnAgentLoop`) falls back to verl's
    default builder, the same for a single-turn prompt; a ChatML tokenizer keeps Qwen's."""
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    from vicurl.engines.verl.patches.rollout_seeds import token_builder_model_type

    tok = deepseek_distill_tokenizer()
    with pytest.raises(ValueError, match="does not define required token '<|im_end|>'"):
        create_continuous_token_builder(tok, hf_model_type="qwen2")
    assert token_builder_model_type(tok, "qwen2") is None
    builder = create_continuous_token_builder(tok, hf_model_type=token_builder_model_type(tok, "qwen2"))
    prompt = tok.apply_chat_template([{"role": "user", "content": "Compute 1 + 1."}], tokenize=False,
                                     add_generation_prompt=True)
    assert type(builder).__name__ == "ContinuousTokenBuilder" and prompt.startswith("<｜begin▁of▁sentence｜><｜User｜>")
    chatml = deepseek_distill_tokenizer()
    chatml.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    assert token_builder_model_type(chatml, "qwen2") == "qwen2"


def test_ray_workers_import_the_project_from_the_checkout(tmp_path):
    """With `--sdm conda` the env holds third-party packages only and only the driver has src/ on its
    path: the launcher gives Ray's workers PYTHONPATH with this checkout's src/ first
    (`launch.worker_pythonpath`, verl's ray_init.runtime_env); a Ray worker imports a module from a
    folder it names that way, and not without it."""
    import ray

    from vicurl.engines.verl.launch import worker_pythonpath

    assert worker_pythonpath().split(os.pathsep)[0] == str(Path(launch.__file__).resolve().parents[3])
    (tmp_path / "only_here.py").write_text("VALUE = 42\n")

    @ray.remote
    def probe():
        try:
            import only_here

            return only_here.VALUE
        except ImportError:
            return None

    for env, expected in (({"PYTHONPATH": str(tmp_path)}, 42), ({}, None)):
        ray.init(num_cpus=1, include_dashboard=False, runtime_env={"env_vars": env} if env else None)
        try:
            assert ray.get(probe.remote()) == expected
        finally:
            ray.shutdown()


@pytest.fixture
def short_folder():
    """A folder in /tmp, removed afterwards: pytest's tmp_path is too long to build a 41-character path in."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    yield base
    shutil.rmtree(base)


def test_ray_starts_under_a_long_tmpdir_through_the_launchers_link(short_folder):
    """SLURM's per-job TMPDIRs are often long, and Ray's socket paths (under $TMPDIR/ray/session_*)
    must fit 107 bytes: under a 70-character TMPDIR Ray does not start; with the launcher's RAY_TMPDIR
    (`vicurl.runtime.vllm_env.short_sockets`, a short link in /tmp to a folder in TMPDIR) it does, its files land
    in TMPDIR, and the link is gone afterwards. vLLM's sockets (``/<uuid4>``) and verl's weight-sync socket
    (``/rl-colocate-zmq-<token>-...``, 64 bytes) get the same link past 43 characters; Ray's alone from 40 to
    43."""
    base = short_folder
    long = base / ("t" * (69 - len(str(base))))
    long.mkdir()
    assert len(str(long)) == 70
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"} | {"TMPDIR": str(long)}
    code = "import ray; ray.init(num_cpus=1, include_dashboard=False); print('started', flush=True); ray.shutdown()"
    plain = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert plain.returncode != 0 and "AF_UNIX path length cannot exceed 107 bytes" in plain.stdout + plain.stderr
    with vllm_env.short_sockets(env, ray=True) as extra:
        assert sorted(extra) == ["RAY_TMPDIR", "VLLM_RPC_BASE_PATH"] and len(set(extra.values())) == 1
        link = extra["RAY_TMPDIR"]
        assert len(link) < 30 and Path(link).resolve().parent == long
        ours = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                              timeout=300)
    assert ours.returncode == 0 and "started" in ours.stdout, ours.stderr[-3000:]
    assert list(long.glob("sockets-*/ray/session_*/logs")) and not os.path.lexists(link)
    with vllm_env.short_sockets({**env, "TMPDIR": "/tmp"}, ray=True) as extra:
        assert extra == {}  # a short temp folder: Ray's own default
    middle = base / ("m" * (40 - len(str(base))))
    middle.mkdir()
    assert len(str(middle)) == 41
    with vllm_env.short_sockets({**env, "TMPDIR": str(middle)}, ray=True) as extra:
        assert list(extra) == ["RAY_TMPDIR"], extra


def test_what_a_jobs_libraries_write_to_the_temp_folder_goes_with_the_job(tmp_path):
    """vLLM, Ray and verl write sockets, file stores, sessions and locks to the temp folder and leave what a
    killed process does not remove: each job has a folder of its own there (`vicurl.runtime.vllm_env.private_temp`),
    removed when it ends. The train job's launcher around verl's loop: Ray's session (its sockets, its logs)
    lies in it, under the short link where TMPDIR is long, and nothing is left; an evaluation job's process
    (`vllm_env.prepare`, before it starts vLLM): its temp files go there, and are gone when it exits."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_TMPDIR", "VLLM_RPC_BASE_PATH")} | {"TMPDIR": str(tmp_path)}
    code = ("import ray; ray.init(num_cpus=1, include_dashboard=False); "
            "print(ray._private.worker._global_node.get_session_dir_path()); ray.shutdown()")
    with vllm_env.private_temp(env) as temp, vllm_env.short_sockets({**env, **temp}, ray=True) as extra:
        out = subprocess.run([sys.executable, "-c", code], env={**env, **temp, **extra}, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        session = Path(out.stdout.strip().splitlines()[-1]).resolve()
        assert session.is_relative_to(temp["TMPDIR"]) and list(session.glob("logs/*")), session
    assert list(tmp_path.iterdir()) == []
    code = ("import tempfile; from vicurl.runtime import vllm_env; vllm_env.prepare(); "
            "print(tempfile.NamedTemporaryFile(delete=False).name)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert Path(out.stdout.strip()).parent.parent == tmp_path and list(tmp_path.iterdir()) == []


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
