"""The launcher around verl's loop: the curriculum state before verl's tracker, the GPU smoke config against verl's
config, the dtype the GPU kernel takes, the tokenizers, Ray's workers, imports and temp folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from vicurl.config.settings import TrainSettings
from vicurl.engines.verl import export, launch, varlen_attention
from vicurl.engines.verl.trainer import CURRICULUM_STATE, VICuRLTrainer
from vicurl.runtime import vllm_env

from harness import CHARS, CHAT_MODEL, REPO

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
