"""Are the vLLM names the project uses (``vicurl.evaluation.vllm_generate.VLLM_NAMES``) in a given vLLM,
and are the configs' ``eval.vllm`` keys its engine arguments?

    .venv-vllm/bin/python measurements/vllm_names.py                # the installed vLLM (the CPU build)
    pip download vllm==0.24.0 --no-deps -d /tmp/w && python -m zipfile -e /tmp/w/vllm-*.whl /tmp/v024
    PYTHONPATH=/tmp/v024 VLLM_TARGET_DEVICE=cpu .venv-vllm/bin/python measurements/vllm_names.py   # the GPU env's vLLM

A vLLM tree first on PYTHONPATH imports its Python modules on a CPU (their compiled kernels are not
loaded). Exits 1 if anything is missing.
"""

import sys
from pathlib import Path

import vllm

from vicurl.evaluation.vllm_generate import VLLM_NAMES, missing_vllm_names

configs = sorted((Path(__file__).resolve().parents[1] / "config").glob("*.yaml"))
missing = missing_vllm_names(configs)
print(f"vLLM {vllm.__version__} ({Path(vllm.__file__).parent})")
for name, used in VLLM_NAMES.items():
    print(f"  {name}({', '.join(used)}): {'MISSING ' + ', '.join(missing[name]) if name in missing else 'ok'}")
for path in configs:
    if path.name in missing:
        print(f"  {path.name}: eval.vllm keys that are not engine arguments: {missing[path.name]}")
print("  every config's eval.vllm keys are engine arguments" if not set(missing) & {p.name for p in configs} else "")
sys.exit(1 if missing else 0)
