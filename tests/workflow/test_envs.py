"""The conda environments build wherever Snakemake puts them, and rule jobs import this project
from the checkout without it being installed.

Snakemake copies ``envs/X.yaml`` to ``.snakemake/conda/<hash>.yaml`` and runs ``conda env create
--file`` on the copy; conda writes the ``pip:`` entries to a requirements file beside the copy and
runs pip there. These tests do the pip part the same way (``pip install --dry-run`` from that
folder, pip's resolver on the real indexes), and run rule jobs with a Python that has every
third-party package but not the project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

from harness import REPO

ENVS = sorted((REPO / "envs").glob("*.yaml"))
# the GPU stack each env adds on top of the project's dependencies
PINS = {"cpu": {"torch==2.13.0", "verl==0.9.1"},
        "gpu": {"verl[vllm]==0.9.1", "torch==2.11.0", "vllm==0.24.0"},
        "fetch": set()}


def wheelhouse():
    import importlib.util

    spec = importlib.util.spec_from_file_location("wheelhouse", REPO / "envs" / "wheelhouse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pip_entries(env: Path) -> list[str]:
    deps = yaml.safe_load(env.read_text())["dependencies"]
    return [e for d in deps if isinstance(d, dict) for e in d.get("pip", [])]


def project_dependencies() -> list[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return [d for d in deps if not d.startswith(("torch", "verl"))]


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.stem)
def test_envs_hold_third_party_packages_only(env):
    entries = pip_entries(env)
    assert not [e for e in entries if e.startswith(("-e", ".", "/")) or ".." in e or "file:" in e], \
        f"{env.name}: a local path does not resolve from .snakemake/conda/"


@pytest.mark.parametrize("env", ENVS, ids=lambda p: p.stem)
def test_every_env_runs_the_gpu_locks_versions(env):
    """Under --sdm conda each rule's env has the versions of the GPU lock (envs/gpu-lock-py3.11.txt, the GPU
    node's): every package pinned, at the lock's version (the CPU env's torch aside, the CPU build), the GPU env
    the whole lock, and the project's dependencies in the GPU and CPU envs within pyproject.toml's ranges. The
    file is what `python envs/wheelhouse.py envs` writes (its roots first); the GPU jobs (training, generation,
    probes) share one env; fetch_model's holds no torch. That the others list all they install:
    `test_pip_resolves_the_cpu_and_fetch_envs_to_what_they_list`."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    wh = wheelhouse()
    pins = {canonicalize_name(Requirement(e).name): str(Requirement(e).specifier).removeprefix("==")
            for e in pip_entries(env)}
    written = dict(e.split("==") for e in pip_entries(env))
    assert env.read_text() == wh.conda_env(env.stem, written), f"{env.name}: run `python envs/wheelhouse.py envs`"
    lock = {canonicalize_name(n): v for n, (v, _, _) in wh.read_lock("3.11").items()}
    if env.stem == "gpu":
        assert pins == lock
    assert all(str(Requirement(e).specifier).startswith("==") for e in pip_entries(env)), env.name
    assert {n: v for n, v in pins.items() if lock.get(n) != v} == ({"torch": "2.13.0"} if env.stem == "cpu" else {})
    assert PINS[env.stem] <= set(pip_entries(env))
    ranges = {canonicalize_name(Requirement(d).name): Requirement(d).specifier for d in project_dependencies()}
    if env.stem != "fetch":
        assert set(ranges) <= set(pins) and all(pins[n] in ranges[n] for n in ranges), env.name
    else:
        assert "torch" not in pins and {"huggingface-hub", "pyyaml"} <= set(pins)


def snakemake_copy(env: Path, tmp_path: Path) -> Path:
    """The env file where Snakemake puts it, and conda's requirements file beside it."""
    folder = tmp_path / "repo" / ".snakemake" / "conda"
    folder.mkdir(parents=True)
    shutil.copy(env, folder / "0123abcd.yaml")
    req = folder / "condaenv.test.requirements.txt"
    req.write_text("\n".join(pip_entries(env)) + "\n")
    return req


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cpu", "fetch"])
def test_pip_resolves_the_cpu_and_fetch_envs_to_what_they_list(name, tmp_path):
    """pip's resolver, run from ``.snakemake/conda/`` as conda runs it, installs exactly the packages the CPU
    and fetch envs list, at their versions (torch's own build aside: the CPU wheel here, the CUDA wheel from
    PyPI, whose CUDA packages torch pins): nothing in them floats. The GPU env is the lock
    (`test_every_env_runs_the_gpu_locks_versions`), which resolves as pip resolved it
    (`test_the_gpu_lock_pins_what_the_verl_env_and_pyproject_ask`); a resolution of its CUDA wheels here took
    35-170 s of pip's downloads of metadata."""
    from packaging.utils import canonicalize_name

    env = REPO / "envs" / f"{name}.yaml"
    req = snakemake_copy(env, tmp_path)
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--report", str(report), "-r", req.name]
    out = subprocess.run(cmd, cwd=req.parent, capture_output=True, text=True, timeout=900)
    if out.returncode != 0 and ("NewConnectionError" in out.stderr or "Temporary failure" in out.stderr):
        pytest.skip(f"no package index reachable: {out.stderr.strip().splitlines()[-1]}")
    assert out.returncode == 0, out.stderr[-3000:]
    import json

    got = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"].split("+")[0]  # 2.13.0+cpu
           for i in json.loads(report.read_text())["install"]}
    listed = {canonicalize_name(e.split("==")[0].split("[")[0]): e.split("==")[1] for e in pip_entries(env)}
    torch_build = {n for n in got if n == "triton" or n.startswith(("nvidia-", "cuda-"))}
    assert {n: v for n, v in got.items() if n not in torch_build} == listed


def python_without_the_project(tmp_path: Path) -> Path:
    """A venv that sees this venv's third-party packages (a plain path entry: its ``.pth`` files,
    the project's editable install among them, are not processed) but not the project."""
    venv = tmp_path / "no_project"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "third_party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([str(py), "-c", "import vicurl"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'vicurl'" in probe.stderr
    return py


def test_rule_jobs_import_the_project_from_the_checkout(tmp_path):
    """A copy of the repository (its tracked files) runs a rule script with a Python that has the
    third-party packages but not the project: the Snakefile and the script import the copy's src/."""
    py = python_without_the_project(tmp_path)
    repo = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for f in files:
        if (REPO / f).is_file() and not f.startswith("results/"):
            (repo / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, repo / f)
    target = "results/demo/data/arith_easy.parquet"  # rule synthetic_data: imports vicurl.data.synthetic
    out = subprocess.run([str(py), "-m", "snakemake", "--cores", "1", target], cwd=repo, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert (repo / target).exists()


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_the_gpu_lock_pins_what_the_verl_env_and_pyproject_ask(python):
    """envs/gpu-lock-py3.X.txt (`python envs/wheelhouse.py lock`, the offline install's list): each package
    once, and every root of envs/gpu.yaml (its GPU pins and pyproject.toml's dependencies), of pyproject's
    dependencies and of its SLURM extra (the executor plugin, and its jobstep plugin that jobs load) met by
    the pinned version; the packages PyPI has as sources only are marked, and torch's closure: what
    ``download --without-torch`` leaves to an image with torch, vLLM's and FlashInfer's CUDA packages not
    among them."""

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    wh = wheelhouse()
    lock = wh.read_lock(python)
    names = [canonicalize_name(n) for n in lock]
    assert len(names) == len(set(names)) > 250
    pinned = {canonicalize_name(n): v for n, (v, _, _) in lock.items()}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["slurm"]
    for entry in wh.env_roots("gpu", wh.read_lock("3.11")) + deps + wh.GPU_PINS:
        req = Requirement(entry)
        name = canonicalize_name(req.name)
        assert name in pinned and pinned[name] in req.specifier, (entry, pinned.get(name))
    assert set(wh.GPU_PINS) == PINS["gpu"]
    assert {n for n, (_, sdist, _) in lock.items() if sdist} == {"antlr4-python3-runtime", "connection_pool"}
    assert {"ray", "flashinfer-python", "hydra-core"} <= set(pinned)  # verl's and vLLM's own dependencies
    assert "snakemake-executor-plugin-slurm-jobstep" in pinned
    torch = {canonicalize_name(n) for n, (_, _, closure) in lock.items() if closure}
    assert {"torch", "triton", "nvidia-cublas", "nvidia-nccl-cu13", "sympy", "filelock"} <= torch
    assert not torch & {"nvidia-ml-py", "nvidia-cutlass-dsl", "nvidia-cudnn-frontend", "cuda-python", "torchvision",
                        "torchaudio", "flashinfer-python", "vllm", "numpy"}


def test_the_project_installs_offline_with_the_wheelhouses_build_backend(tmp_path):
    """The offline install's last step (docs/offline.md): ``pip install --no-index --find-links
    wheels --no-deps -e .`` builds the project in an environment of pip's own, from the wheelhouse, which holds
    pyproject.toml's build backend at the lock's pin even ``--without-torch`` (`wheelhouse.build_requirements`);
    pip's configuration (a cluster's mirror) is not read. It failed while the build asked for ``wheel``, in no lock,
    and while the wheelhouse had no setuptools without torch's closure."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wheelhouse", REPO / "envs" / "wheelhouse.py")
    wheelhouse = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wheelhouse)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    build = wheelhouse.build_requirements(wheelhouse.read_lock(version))
    assert [b.split("==")[0] for b in build] == ["setuptools"], build
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest",
                    str(wheels), *build], check=True, timeout=300)  # what `download` adds, from the package index
    project = tmp_path / "checkout"  # the files the build reads (its egg-info is written there)
    shutil.copytree(REPO / "src" / "vicurl", project / "src" / "vicurl", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, project / name)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True, timeout=300)
    py = tmp_path / "venv" / "bin" / "python"
    out = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--find-links", str(wheels), "--no-deps",
                          "-e", str(project)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found = subprocess.run([str(py), "-c", "import vicurl, sys; print(vicurl.__file__)"], capture_output=True, text=True)
    assert found.stdout.strip() == str(project / "src" / "vicurl" / "__init__.py"), found.stderr
