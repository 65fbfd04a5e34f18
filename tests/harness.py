"""The tests' shared plumbing: the repository's paths, the one Snakemake runner, the one run-settings
builder and the one tiny-model factory. Every test folder imports it as ``harness`` (pyproject's
pytest ``pythonpath = ["tests"]``: with ``--import-mode=importlib`` the test folders are no packages,
and verl installs a top-level ``tests`` package of its own).

    tests/unit/       pure functions and modules, no Snakemake DAG
    tests/engines/    the engines: local vs verl equivalence, verl's and vLLM's pieces (in .venv)
    tests/workflow/   Snakemake DAG runs and dry runs
    tests/cluster/    the SLURM profile on a real (private, one-node) SLURM
    tests/gpu_path/   vLLM's CPU build and verl's own loop (in .venv-vllm: make test-gpu-path)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
DATA = TESTS / "data"
FIXTURES = DATA / "fixtures"
DEMO_CONFIG = REPO / "config" / "demo.yaml"
PAPER_CONFIG = REPO / "config" / "paper.yaml"
SMOKE_CONFIG = DATA / "smoke.yaml"  # a very small override of the demo's
PROFILE = yaml.safe_load((REPO / "slurm-a100" / "config.yaml").read_text())  # the cluster profile, as users copy it


def load_config(path: Path) -> dict:
    return yaml.safe_load(Path(path).read_text())


DEMO = load_config(DEMO_CONFIG)  # read it, never change it: every test module shares it


# ---------------------------------------------------------------- Snakemake


def snakemake_cmd(workdir: Path, *args: str, configs=(), snakefile: Path | None = None) -> list[str]:
    """``python -m snakemake`` on the repository's Snakefile (or ``snakefile``) in ``workdir``.

    ``configs``: the whole config, as ``--configfile`` files in that order (later ones laid over
    earlier ones); none given, the Snakefile loads config/demo.yaml itself. They come first, so
    that ``args`` may hold targets, options and ``--`` in any order."""
    configfiles = ["--configfile", *map(str, configs)] if configs else []
    return [sys.executable, "-m", "snakemake", *configfiles, "-s", str(snakefile or REPO / "Snakefile"),
            "--directory", str(workdir), *map(str, args)]


def snakemake(workdir: Path, *args: str, configs=(), snakefile: Path | None = None, timeout: float = 900,
              **run) -> subprocess.CompletedProcess:
    """Run :func:`snakemake_cmd` to its end (`bounded`), output captured as text; ``run``: more of
    ``subprocess.Popen``'s arguments (``cwd``, ``env``)."""
    return bounded(snakemake_cmd(workdir, *args, configs=configs, snakefile=snakefile), timeout=timeout, **run)


def bounded(cmd: list[str], *, timeout: float, **popen) -> subprocess.CompletedProcess:
    """``cmd`` to its end, output captured as text, in a session of its own. Past ``timeout`` seconds
    every process it started ends, not only ``cmd``'s own (a train job and its Ray cluster outlived a
    killed Snakemake): SIGTERM to the session and the process tree, SIGKILL after 30 s; then
    `subprocess.TimeoutExpired`."""
    from vicurl.runtime.supervise import end_session

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_session(proc, grace=30)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def alive(pids) -> list[int]:
    """Those of ``pids`` still running (a zombie, which only its parent's exit clears, is not)."""
    import psutil

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def shared_memory_left(inodes) -> list[str]:
    """The files of /dev/shm among ``inodes`` (`vicurl.runtime.processes.shared_memory_of`: what processes mapped)."""
    from vicurl.runtime.processes import shared_memory_files

    return sorted(shared_memory_files(inodes))


def cmdline(p) -> list[str]:
    """A process's command line; [] for one that has exited meanwhile (psutil refuses a zombie's)."""
    import psutil

    try:
        return p.cmdline()
    except psutil.Error:
        return []


def title(p) -> str:
    """A process's title: its command line's first word (vLLM and Ray rename theirs: VLLM::EngineCore)."""
    return " ".join(cmdline(p)[:1])


def link_demo_config(workdir: Path) -> None:
    """config/demo.yaml under ``workdir`` as seen from the repository root (the Snakefile names it)."""
    (workdir / "config").mkdir()
    (workdir / "config" / "demo.yaml").symlink_to(DEMO_CONFIG)


def job_counts(text: str) -> dict[str, int]:
    """The "Job stats" table of a dry run: rule -> number of jobs."""
    import re

    block = text.split("Job stats:", 1)[1].split("Reasons:", 1)[0] if "Job stats:" in text else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M) if m.group(1) != "total"}


# ---------------------------------------------------------------- a run's settings

# a batch both engines step through alike (tests/engines/test_verl_engine.py): B prompts, G responses
# each, R response tokens
ENGINE_RUN = dict(total_steps=4, batch_size=4, group_size=4, max_response_length=10, micro_batch_size=16, seed=3,
                  export_steps=[4])
# the launcher's run on the GPU path (tests/engines/test_verl_*.py): a chat template, saves every
# two steps, two exports
LAUNCHER_RUN = dict(total_steps=6, batch_size=2, group_size=2, save_every=2, export_steps=[3, 6], seed=0,
                    chat_template=True, max_prompt_length=400, max_response_length=32)


def settings_for(reward: str, curriculum: str, *, run: dict = ENGINE_RUN, params_from: dict | None = DEMO,
                 **kw) -> dict:
    """A run's settings (what the train rule hands an engine): ``run``'s, the reward and the
    curriculum with their parameters from the config ``params_from`` (the demo's; None: no
    ``reward_params`` or ``curriculum_params`` at all), then ``kw``."""
    s = dict(run, reward=reward, curriculum=curriculum)
    if params_from is not None:
        s["reward_params"] = dict(params_from["rewards"].get(reward) or {})
        s["curriculum_params"] = dict(params_from["curricula"].get(curriculum) or {})
    s.update(kw)
    return s


# ---------------------------------------------------------------- a tiny model

CHARS = "0123456789+-*=. ()<>/\\{}abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'\n,$:?"
BOS = "<s>"
# Llama 3's chat template renders its own BOS: a tokenizer that also adds one doubles it
BOS_CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
                     "{% if add_generation_prompt %}<|assistant|>{% endif %}")
LLAMA3_LIKE_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] }}<|end|>"
                        "{% endfor %}{% if add_generation_prompt %}<|start|>assistant\n{% endif %}")

# the models the tests build (keyword arguments of tiny_llama):
# no BOS, no chat template (the `char_model_dir` fixture)
CHAR_MODEL: dict = {}
# a tokenizer that adds a BOS, as Llama's and R1-Distill's do, and a chat template that renders one too,
# its tokens matched whole in text; head size 32, the smallest vLLM's CPU attention serves (`bos_model_dir`)
BOS_MODEL = dict(hidden=64, bos=BOS, specials=("<|user|>", "<|assistant|>"), match_specials=True,
                 chat_template=BOS_CHAT_TEMPLATE)
# two layers, untied, a tokenizer that adds a BOS and a Llama-3-like chat template (the verl GPU path's)
CHAT_MODEL = dict(layers=2, tied=False, bos=BOS, specials=("<|start|>", "<|end|>"), extra_chars="|_",
                  chat_template=LLAMA3_LIKE_TEMPLATE)


def tiny_llama(path: Path, *, seed: int = 0, hidden: int = 32, layers: int = 1, tied: bool = True,
               bos: str | None = None, specials: tuple[str, ...] = (), match_specials: bool = False,
               extra_chars: str = "", chat_template: str | None = None) -> Path:
    """A tiny random Llama (not Qwen2: transformers 5 reloads any qwen2 checkpoint with Qwen2's own
    tokenizer class) and its character tokenizer, built offline and saved in HF format at ``path``.

    Vocabulary: ``<pad>`` 0, ``<eos>`` 1, then ``bos`` and ``specials``, then one token per character
    (CHARS + ``extra_chars``). ``bos``: a token the tokenizer prepends (a TemplateProcessing
    post-processor) and the model's BOS id; without one the BOS id is ``<eos>``'s. ``specials``: the
    tokenizer's additional special tokens, or with ``match_specials`` every special token matched
    whole in text before the character split."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    named = ["<pad>", "<eos>", *([bos] if bos else []), *specials]
    vocab = {t: i for i, t in enumerate(named)}
    for c in CHARS + extra_chars:
        vocab.setdefault(c, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tokens = dict(pad_token="<pad>", eos_token="<eos>")
    if match_specials:
        tk.add_special_tokens(named)  # matched whole in text, before the character split
    if bos:
        tk.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, vocab[bos])])
        tokens["bos_token"] = bos
    if specials and not match_specials:
        tokens["additional_special_tokens"] = list(specials)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, **tokens)
    if chat_template:
        tok.chat_template = chat_template
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(vocab), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512, tie_word_embeddings=tied,
        pad_token_id=0, eos_token_id=1, bos_token_id=vocab[bos] if bos else 1,
    )
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_qwen2(path: Path, *, like: Path, tied: bool, seed: int = 0) -> Path:
    """A tiny random Qwen2 (the family of five of the paper's six models) of ``like``'s vocabulary and
    sizes, weights and config only: its tokenizer stays ``like``'s (transformers 5 would reload it with
    Qwen2's own tokenizer class), to be named as the model's ``tokenizer_path``."""
    import torch
    from transformers import AutoConfig, Qwen2Config, Qwen2ForCausalLM

    ref = AutoConfig.from_pretrained(like)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=ref.vocab_size, hidden_size=ref.hidden_size, intermediate_size=ref.intermediate_size,
        num_hidden_layers=ref.num_hidden_layers, num_attention_heads=ref.num_attention_heads,
        num_key_value_heads=ref.num_key_value_heads, max_position_embeddings=ref.max_position_embeddings,
        tie_word_embeddings=tied, pad_token_id=ref.pad_token_id, eos_token_id=ref.eos_token_id,
        bos_token_id=ref.bos_token_id,
    )
    Qwen2ForCausalLM(cfg).save_pretrained(path)
    return path


def long_folder(root: Path, length: int) -> str:
    """A folder under ``root`` (or under /tmp when ``root`` is too long) whose path has ``length`` characters."""
    import tempfile

    base = str(root) if len(str(root)) < length - 10 else tempfile.mkdtemp(dir="/tmp")
    path = Path(base) / ("t" * (length - len(base) - 1))
    path.mkdir()
    assert len(str(path)) == length
    return str(path)


def tensorboard_scalars(folder: Path) -> dict[str, list[float]]:
    """tag -> the values of every step, as TensorBoard reads a run's event files (`vicurl.runtime.tracking`)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
