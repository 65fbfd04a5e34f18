"""verl's training loop on one run's Hydra overrides, in the process the train job supervises
(`vicurl.runtime.supervise`; the launcher writes the overrides and starts it):

    python -m vicurl.engines.verl.fit <work>/verl_overrides.json

It ends itself when its supervisor is gone (SIGTERM to itself: Ray's handler then shuts Ray down).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time


def fit(overrides: list[str]) -> None:
    """``launch.CONFIG`` with ``overrides``, checked by verl and by the attention's dtype check, then verl's
    ``run_ppo`` with ``VICuRLTaskRunner``."""
    from verl.trainer.main_ppo import run_ppo
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    from vicurl.engines.verl import varlen_attention
    from vicurl.engines.verl.launch import compose
    from vicurl.engines.verl.runner import VICuRLTaskRunner

    config = compose(overrides)
    auto_set_device(config)
    varlen_attention.check_config(config)  # a dtype its GPU kernel cannot take: refused before a model is built
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    run_ppo(config, task_runner_class=VICuRLTaskRunner)


def _end_with_parent(poll: float = 2.0) -> None:
    """A thread that sends this process SIGTERM once its parent (the supervising train job) has ended."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


if __name__ == "__main__":
    _end_with_parent()
    with open(sys.argv[1]) as f:
        fit(json.load(f))
