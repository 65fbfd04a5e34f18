"""The GPU environment, pinned and offline (docs/verl.md, "Installing offline").

    python envs/wheelhouse.py lock [--python python3.12]
    python envs/wheelhouse.py download DIR [--python-version 3.12] [--platform manylinux_2_35_x86_64] [--without-torch]

``lock`` rewrites envs/gpu-lock-py3XX.txt for that Python (this one by default): what pip resolves
``requirements()`` to (envs/verl.yaml's pins and pyproject.toml's dependencies: the GPU environment of
docs/verl.md's first-run command) in a fresh virtual environment of it, on PyPI (``pip install
--dry-run --report``). One list per Python: vLLM asks setuptools < 81 from Python 3.12 on, and some
packages' newest releases leave 3.11.

``download`` fills DIR with a wheel of every pinned package for that Python and platform, from any
machine with PyPI, and their list, DIR/requirements.txt: pip downloads the binary wheels; the
packages PyPI has as sources only (marked ``# sdist`` in the lock, all pure Python) are built into
wheels here. ``--without-torch`` leaves out torch and the CUDA libraries it brings (``TORCH_STACK``),
for an image that has torch 2.11.0 already. On the machine without internet:

    pip install --no-index --find-links DIR -r DIR/requirements.txt     # --no-deps after --without-torch
    pip install --no-index --no-deps -e .

Standard library only; pip does the resolving and downloading.
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
GPU_PINS = ["verl[vllm]==0.9.1", "vllm==0.24.0", "torch==2.11.0"]  # envs/verl.yaml's (a test checks them)
# what an image with torch 2.11.0 (CUDA 13) already holds
TORCH_STACK = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*|cuda-.*)$")
PIP = ["--isolated", "--index-url", "https://pypi.org/simple"]  # PyPI alone, whatever pip.conf says


def requirements() -> list[str]:
    """The GPU pins and pyproject.toml's dependencies (the torch range there yields to the pin)."""
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    return GPU_PINS + [d for d in deps if not d.startswith(("torch", "verl"))]


def lock_file(python_version: str) -> Path:
    return ENVS / f"gpu-lock-py{python_version}.txt"


def read_lock(python_version: str) -> dict[str, tuple[str, bool]]:
    """name -> (version, sdist only) of every package pinned for that Python ("3.12")."""
    out = {}
    for line in lock_file(python_version).read_text().splitlines():
        spec, _, comment = line.partition("#")
        if spec.strip():
            name, version = spec.strip().split("==")
            out[name] = (version, "sdist" in comment)
    return out


def lock(python: str = sys.executable) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([python, "-m", "venv", tmp], check=True)
        py = str(Path(tmp) / "bin" / "python")
        version = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        subprocess.run([py, "-m", "pip", "install", "-q", *PIP, "--upgrade", "pip"], check=True)
        report = Path(tmp) / "report.json"
        subprocess.run([py, "-m", "pip", "install", "-q", *PIP, "--dry-run", "--ignore-installed", "--report",
                        str(report), *requirements()], check=True)
        installs = json.loads(report.read_text())["install"]
    pins = sorted((i["metadata"]["name"].lower(), i["metadata"]["version"],
                   not i["download_info"]["url"].endswith(".whl")) for i in installs)
    head = [f"# The GPU environment for Python {version}, resolved by `python envs/wheelhouse.py lock` ({sys.platform}) from",
            "# " + " ".join(requirements()),
            "# Offline install: docs/verl.md, \"Installing offline\". `# sdist`: PyPI has sources only."]
    out = lock_file(version)
    out.write_text("\n".join(head + [f"{n}=={v}" + ("  # sdist" if sdist else "") for n, v, sdist in pins]) + "\n")
    print(f"{out}: {len(pins)} packages")


def download(dest: Path, python_version: str, platform: str, without_torch: bool) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    pins = {n: p for n, p in read_lock(python_version).items() if not (without_torch and TORCH_STACK.match(n))}
    binary = [f"{n}=={v}" for n, (v, sdist) in pins.items() if not sdist]
    sources = [f"{n}=={v}" for n, (v, sdist) in pins.items() if sdist]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as req:
        req.write("\n".join(binary) + "\n")
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
    d = sub.add_parser("download", help="a wheel of every pinned package into DIR")
    d.add_argument("dir", type=Path)
    d.add_argument("--python-version", default="3.12")
    d.add_argument("--platform", default="manylinux_2_35_x86_64",
                   help="the machine's glibc (ldd --version): the lock needs 2.31 or later (llguidance's wheel)")
    d.add_argument("--without-torch", action="store_true", help="for an image that has torch 2.11.0 already")
    a = p.parse_args(argv)
    if a.command == "lock":
        lock(a.python)
    else:
        download(a.dir, a.python_version, a.platform, a.without_torch)


if __name__ == "__main__":
    main()
