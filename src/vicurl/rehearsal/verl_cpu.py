"""verl 0.9.1 on a CPU: a platform named ``cpu`` and two patches of verl internals that assume an
accelerator. Never imported on the GPU path: `vicurl.rehearsal.cpu.environment` names this module in
``VERL_USE_EXTERNAL_MODULES`` (``verl/__init__.py`` imports it in every process that imports verl,
the Ray workers included) and selects the platform with ``VERL_PLATFORM=cpu``.

The platform goes through verl's public extension point (``verl.plugin.platform.PlatformRegistry``).
The patches replace one name each, before verl's worker modules import it; each names verl's file
and line, and ``check_patches`` fails when that line changes (a test calls it), so an upgrade of
verl re-examines them.
"""

from __future__ import annotations

import functools
import types
from contextlib import contextmanager
from typing import Any, Optional

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry


def _nothing(*args, **kwargs):
    return None


def _zero(*args, **kwargs):
    return 0


# What verl calls of ``torch.cuda`` (``verl.utils.device.get_torch_device()``), for the CPU: memory
# statistics are zero, caches and streams do nothing, seeds and RNG states are torch's own.
DEVICE = types.ModuleType("vicurl_cpu_device")
DEVICE.__dict__.update(
    is_available=lambda: True, device_count=lambda: 1, current_device=lambda: "cpu", set_device=_nothing,
    synchronize=_nothing, empty_cache=_nothing, ipc_collect=_nothing, reset_peak_memory_stats=_nothing,
    memory_allocated=_zero, memory_reserved=_zero, max_memory_allocated=_zero, max_memory_reserved=_zero,
    mem_get_info=lambda *a, **k: (0, 0), set_per_process_memory_fraction=_nothing, get_device_name=lambda *a: "cpu",
    manual_seed=torch.manual_seed, manual_seed_all=torch.manual_seed, get_rng_state=torch.get_rng_state,
    set_rng_state=torch.set_rng_state, Stream=torch.cpu.Stream, stream=torch.cpu.stream,
    current_stream=torch.cpu.current_stream, Event=torch.cpu.Event if hasattr(torch.cpu, "Event") else _nothing,
)


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """The CPU as verl's device: gloo for collectives, Ray's (logical) GPU as the resource a worker asks."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return DEVICE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check=False) -> bool:
        return True

    def current_device(self):
        return "cpu"  # verl moves tensors with .to(get_device_id())

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: Optional[int] = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0):
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for a logical GPU

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"  # ray_init.num_gpus declares logical ones (config/gpu_smoke_cpu.yaml)

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


# ---------------------------------------------------------------- patches of verl internals


def _gloo_only_process_group():
    """verl/utils/distributed.py:89 (``initialize_global_process_group_ray``) asks for the backend
    ``f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"``, on this platform "cpu:gloo,cpu:gloo",
    which torch refuses ("Duplicate device type cpu"): ask for "cpu:gloo"."""
    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray

    @functools.wraps(original)
    def initialize(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    distributed.initialize_global_process_group_ray = initialize


def _unpinned_offload():
    """verl/workers/engine/fsdp/transformer_impl.py:462 gives a forward-only model (the reference
    policy) ``CPUOffloadPolicy(pin_memory=True)``; pinning memory needs an accelerator: unpinned."""
    from verl.workers.engine.fsdp import transformer_impl

    policy = transformer_impl.CPUOffloadPolicy

    def unpinned(pin_memory=True):
        return policy(pin_memory=False)

    transformer_impl.CPUOffloadPolicy = unpinned


# (module, function, the line of verl 0.9.1 the patch answers, the patch)
PATCHES = (
    ("verl.utils.distributed", "initialize_global_process_group_ray",
     'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"', _gloo_only_process_group),
    ("verl.workers.engine.fsdp.transformer_impl", "FSDPEngine._build_fsdp_module",
     "offload_policy = CPUOffloadPolicy(pin_memory=True)", _unpinned_offload),
)


def check_patches() -> list[str]:
    """The patches whose verl line is no longer where verl 0.9.1 had it (empty: all still apply)."""
    from vicurl.rehearsal.cpu import stale_patches

    return stale_patches(PATCHES)


for _, _, _, _patch in PATCHES:
    _patch()
