"""The GPU environment, pinned and offline (docs/offline.md).

    python envs/wheelhouse.py lock [--python python3.12] [--upgrade | --unpin NAME ...]
    python envs/wheelhouse.py download DIR [--python-version 3.12] [--platform manylinux_2_35_x86_64] [--without-torch]
    python envs/wheelhouse.py envs

``envs`` writes the conda environments of ``--sdm conda`` (envs/*.yaml, ``ENVS_FROM_LOCK``) from the Python 3.11
lock: each lists every package it installs, its roots and all they require, at the lock's versions (the GPU env
is the lock; the others are what pip resolves their roots to under the lock's pins), so that the rules run the
GPU node's library versions whichever env runs them, and an env built later is the one tested (the CPU env's
torch aside: 2.13.0, the tests', whose own wheel pins what it requires beyond the lock).

``lock`` rewrites envs/gpu-lock-py3XX.txt for that Python (this one by default): what pip resolves
``requirements()`` to (envs/gpu.yaml's pins, pyproject.toml's dependencies and its SLURM executor
plugin: the GPU environment of docs/gpu.md's first-run command, and ``--profile slurm-a100``) in a fresh
virtual environment of it (``pip install --dry-run --report``), the list's current pins kept unless
``--upgrade`` (all) or ``--unpin`` (those named). One list per Python: vLLM asks setuptools < 81 from Python 3.12 on, and some packages'
newest releases leave 3.11. Torch and what it requires, all the way down (its closure), are marked
``# torch``.

``download`` fills DIR with a wheel of every pinned package for that Python and platform, from any
machine with the package index, and their list, DIR/requirements.txt: pip downloads the binary wheels;
the packages the index has as sources only (marked ``# sdist`` in the lock, all pure Python) are built
into wheels here. ``--without-torch`` leaves out torch's closure, for an image that has torch 2.11.0
already (and so everything torch requires; vLLM's and FlashInfer's own CUDA packages stay in). DIR also
gets the project's build backend (pyproject.toml's [build-system], at the lock's pin, even --without-torch:
pip builds the project in an environment of its own, from DIR). On the machine without internet:

    pip install --no-index --find-links DIR -r DIR/requirements.txt     # --no-deps after --without-torch
    pip install --no-index --find-links DIR --no-deps -e .

pip runs with its own configuration (pip.conf, PIP_INDEX_URL: a cluster's mirror or proxy). Standard
library only; pip does the resolving and downloading.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ENVS = Path(__file__).resolve().parent
PYPROJECT = ENVS.parent / "pyproject.toml"
GPU_PINS = ["verl[vllm]==0.9.1", "vllm==0.24.0", "torch==2.11.0"]  # envs/gpu.yaml's
PIP = ["--disable-pip-version-check"]  # and pip's own configuration: the index (or mirror) it is given


def requirements() -> list[str]:
    """The GPU pins, pyproject.toml's dependencies (the torch range there yields to the pin) and its
    `slurm` extra (the executor plugin ``--profile slurm-a100`` loads)."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["slurm"]
    return GPU_PINS + [d for d in deps if not d.startswith(("torch", "verl"))]


# the conda envs (envs/<name>.yaml, Python 3.11): what each is for, and its packages besides pyproject.toml's
# dependencies (None: those dependencies left out, only the packages listed)
ENVS_FROM_LOCK = {
    "gpu": ("GPU jobs: training on verl (engine: verl), generation with vLLM (eval.engine: vllm), the variance probes\n"
            "# on verl", GPU_PINS, True),
    "cpu": ("CPU jobs: data, grading, scoring, the report, and the CPU demo's training and generation; torch\n"
            "# 2.13.0, the tests' (the GPU lock's 2.11.0 is a CUDA build). From PyPI pip takes its CUDA build, which\n"
            "# runs on a CPU too; PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu gives the CPU build",
            ["torch==2.13.0", "verl==0.9.1"], True),
    "fetch": ("rule fetch_model on the host that runs Snakemake: the Hub's client, no torch",
              ["huggingface_hub", "pyyaml", "snakemake"], False),
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def env_roots(name: str, lock: dict[str, tuple[str, bool, bool]]) -> list[str]:
    """What env ``name`` asks for (``ENVS_FROM_LOCK``), each at the lock's version."""
    _, extra, with_project = ENVS_FROM_LOCK[name]
    project = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9._-]+", d).group(0) for d in project if not d.startswith(("torch", "verl"))]
    entries = [e if "==" in e else f"{e}=={lock[e][0]}" for e in extra]
    return entries + [f"{n}=={lock[n][0]}" for n in names if with_project and n not in extra]


def conda_env(name: str, closure: dict[str, str], lock: dict[str, tuple[str, bool, bool]] | None = None) -> str:
    """envs/<name>.yaml's text: its roots, then the rest of ``closure`` (every package the env installs: name ->
    version), all pinned."""
    lock = read_lock("3.11") if lock is None else lock
    roots = env_roots(name, lock)

    def name_of(requirement: str) -> str:  # verl[vllm]==0.9.1: verl
        return canonical(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))

    named = {name_of(r) for r in roots}
    rest = sorted(f"{n}=={v}" for n, v in closure.items() if name_of(n) not in named)
    return "\n".join([
        f"# {ENVS_FROM_LOCK[name][0]}.",
        "# Written by `python envs/wheelhouse.py envs` from envs/gpu-lock-py3.11.txt: what the env asks for, then",
        "# all it requires, every package at the version the GPU lock pins. Third-party packages only: every rule",
        "# script imports this project from the checkout it runs in (workflow_scripts/_checkout.py), so the env",
        "# builds wherever Snakemake copies this file.",
        f"name: vicurl-{name}", "channels: [conda-forge]", "dependencies:", "  - python=3.11", "  - pip", "  - pip:",
        *[f"      - {e}" for e in roots + rest]]) + "\n"


def env_closure(name: str, lock: dict[str, tuple[str, bool, bool]], tmp: str) -> dict[str, str]:
    """Every package env ``name`` installs (name -> version): the GPU env's is the lock (its resolution);
    another's, what pip resolves its roots to, the lock's pins as constraints (for the CPU env, whose torch is
    another release, less torch's own build: torch, triton and the CUDA packages, which torch's wheel pins).
    Needs the package index."""
    if name == "gpu":
        return {n: v for n, (v, _, _) in lock.items()}
    if sys.version_info[:2] != (3, 11):
        sys.exit("the conda envs run Python 3.11: run `envs` with a Python 3.11")

    def torch_build(n: str) -> bool:
        return name == "cpu" and (n in ("torch", "triton") or n.startswith(("nvidia-", "cuda-")))

    constraints = Path(tmp) / f"{name}-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, (v, _, _) in lock.items() if not torch_build(n)))
    installs = resolve(sys.executable, env_roots(name, lock), tmp, constraints)
    # 2.13.0+cpu: 2.13.0; torch's own CUDA packages (PyPI's build) left to its wheel's pins, whichever index
    return {i["metadata"]["name"]: i["metadata"]["version"].split("+")[0] for i in installs
            if i["metadata"]["name"] == "torch" or not torch_build(canonical(i["metadata"]["name"]))}


def write_envs() -> None:
    lock = read_lock("3.11")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ENVS_FROM_LOCK:
            (ENVS / f"{name}.yaml").write_text(conda_env(name, env_closure(name, lock, tmp), lock))
            print(ENVS / f"{name}.yaml")


def lock_file(python_version: str) -> Path:
    return ENVS / f"gpu-lock-py{python_version}.txt"


def read_lock(python_version: str) -> dict[str, tuple[str, bool, bool]]:
    """name -> (version, sdist only, in torch's closure) of every package pinned for that Python ("3.12")."""
    out = {}
    for line in lock_file(python_version).read_text().splitlines():
        spec, _, comment = line.partition("#")
        if spec.strip():
            name, version = spec.strip().split("==")
            out[name] = (version, "sdist" in comment, "torch" in comment)
    return out


def resolve(py: str, requirements: list[str], tmp: str, constraints: Path | None = None) -> list[dict]:
    """What pip installs for ``requirements`` in the fresh environment ``py``: pip's report entries."""
    report = Path(tmp) / "report.json"
    subprocess.run([py, "-m", "pip", "install", "-q", *PIP, "--dry-run", "--ignore-installed", "--report",
                    str(report), *(["-c", str(constraints)] if constraints else []), *requirements], check=True)
    return json.loads(report.read_text())["install"]


def lock(python: str = sys.executable, upgrade: bool = False, unpin: tuple[str, ...] = ()) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([python, "-m", "venv", tmp], check=True)
        py = str(Path(tmp) / "bin" / "python")
        version = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        subprocess.run([py, "-m", "pip", "install", "-q", *PIP, "--upgrade", "pip"], check=True)
        current, keep = lock_file(version), None
        if current.exists() and not upgrade:  # the current pins as constraints, less those to re-resolve
            free = {canonical(n) for n in unpin}
            keep = Path(tmp) / "constraints.txt"
            keep.write_text("".join(f"{n}=={v}\n" for n, (v, _, _) in read_lock(version).items()
                                    if canonical(n) not in free))
        installs = resolve(py, requirements(), tmp, keep)
        torch = [r for r in GPU_PINS if r.startswith("torch")]
        closure = {i["metadata"]["name"].lower() for i in resolve(py, torch, tmp, keep)}
    pins = sorted((i["metadata"]["name"].lower(), i["metadata"]["version"],
                   not i["download_info"]["url"].endswith(".whl")) for i in installs)
    head = [f"# The GPU environment for Python {version}, resolved by `python envs/wheelhouse.py lock` ({sys.platform}) from",
            "# " + " ".join(requirements()),
            "# Offline install: docs/offline.md. `# sdist`: the index has sources only;",
            "# `# torch`: torch or what it requires (an image with torch has them: download --without-torch)."]
    marks = {n: "  # " + ", ".join(m for m, on in (("sdist", sdist), ("torch", n in closure)) if on)
             for n, _, sdist in pins}
    current.write_text("\n".join(head + [f"{n}=={v}" + (marks[n] if marks[n].strip() != "#" else "")
                                         for n, v, _ in pins]) + "\n")
    print(f"{current}: {len(pins)} packages, {len(closure)} of them torch's closure")


def build_requirements(lock: dict[str, tuple[str, bool, bool]]) -> list[str]:
    """pyproject.toml's [build-system] requirements at the lock's pins: what ``pip install -e .`` builds with."""
    out = []
    for req in tomllib.loads(PYPROJECT.read_text())["build-system"]["requires"]:
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        pin = next((v for n, (v, _, _) in lock.items() if n.lower().replace("_", "-") == name.lower()), None)
        if pin is None:
            sys.exit(f"pyproject.toml's build requirement {req!r} is not in the lock: add it to requirements()")
        out.append(f"{name}=={pin}")
    return out


def download(dest: Path, python_version: str, platform: str, without_torch: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    lock = read_lock(python_version)
    pins = {n: p for n, p in lock.items() if not (without_torch and p[2])}
    binary = [f"{n}=={v}" for n, (v, sdist, _) in pins.items() if not sdist]
    sources = [f"{n}=={v}" for n, (v, sdist, _) in pins.items() if sdist]
    build = [r for r in build_requirements(lock) if r not in binary]  # in DIR, not in its list
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as req:
        req.write("\n".join(binary + build) + "\n")
        req.flush()
        subprocess.run([sys.executable, "-m", "pip", "download", *PIP, "--no-deps", "--only-binary=:all:",
                        "--python-version", python_version, *platforms(platform), "--dest", str(dest),
                        "-r", req.name], check=True)
    if sources:
        subprocess.run([sys.executable, "-m", "pip", "wheel", *PIP, "--no-deps", "--wheel-dir", str(dest), *sources],
                       check=True)
    (dest / "requirements.txt").write_text("\n".join(binary + sources) + "\n")
    print(f"{dest}: {len(pins)} packages for Python {python_version} on {platform}; their list: {dest / 'requirements.txt'}")


def platforms(platform: str) -> list[str]:
    """pip's --platform for ``platform`` and the older tags it runs: a manylinux_2_N machine runs
    wheels built for any glibc up to 2.N (pip takes the tags literally)."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not m:
        return ["--platform", platform]
    arch = m.group(2)
    tags = [f"manylinux_2_{n}_{arch}" for n in range(int(m.group(1)), 4, -1)]
    tags += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}", f"linux_{arch}"]
    return [a for t in tags for a in ("--platform", t)]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    lk = sub.add_parser("lock", help="re-resolve the pinned list of a Python on PyPI")
    lk.add_argument("--python", default=sys.executable, help="that Python's interpreter (default: this one)")
    lk.add_argument("--upgrade", action="store_true", help="resolve afresh, not keeping the list's current pins")
    lk.add_argument("--unpin", nargs="+", default=(), metavar="NAME", help="re-resolve these, keeping the other pins")
    d = sub.add_parser("download", help="a wheel of every pinned package into DIR")
    d.add_argument("dir", type=Path)
    d.add_argument("--python-version", default="3.12")
    d.add_argument("--platform", default="manylinux_2_35_x86_64",
                   help="the machine's glibc (ldd --version): the lock needs 2.31 or later (llguidance's wheel)")
    d.add_argument("--without-torch", action="store_true",
                   help="leave out torch's closure, for an image that has torch 2.11.0 already")
    sub.add_parser("envs", help="write the conda envs (envs/*.yaml) at the Python 3.11 lock's versions")
    a = p.parse_args(argv)
    if a.command == "lock":
        lock(a.python, a.upgrade, tuple(a.unpin))
    elif a.command == "envs":
        write_envs()
    else:
        download(a.dir, a.python_version, a.platform, a.without_torch)


if __name__ == "__main__":
    main()
