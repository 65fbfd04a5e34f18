"""verl's legacy ``TaskRunner`` (``verl.trainer.main_ppo_v0``), building ``VICuRLTrainer``.

verl's ``TaskRunner.run`` instantiates the name ``RayPPOTrainer`` of its module; inside this
Ray actor's process that name is pointed at ``VICuRLTrainer`` before verl's own ``run`` is
called, so the worker setup, datasets and resource pools stay verl's code (a test checks the
name and method exist in the installed verl).
"""

from __future__ import annotations

import ray
from verl.trainer import main_ppo_v0

from vicurl.engines.verl.trainer import VICuRLTrainer


class _Runner(main_ppo_v0.BaseTaskRunner):
    def run(self, config):
        main_ppo_v0.RayPPOTrainer = VICuRLTrainer  # this actor's process only
        return main_ppo_v0.TaskRunner.__ray_actor_class__.run(self, config)


VICuRLTaskRunner = ray.remote(_Runner)
