"""The verl engine: verl 0.9.1's legacy GRPO trainer with the VI-CuRL step hooked in (GPU clusters).

``hook``     the step on verl's ``DataProto`` batches, calling `vicurl.engines.step` (Ray-free)
``trainer``  ``VICuRLTrainer(RayPPOTrainer)``: the verl methods it overrides to call the hook, and
             why, are in its docstring (the one statement of the hook contract)
``runner``   verl's legacy ``TaskRunner`` building ``VICuRLTrainer``
``data``     prepared sets -> verl's RL parquet format
``launch``   one run's settings -> verl's config (``vicurl_ppo_trainer.yaml`` + the run's Hydra
             overrides) -> train -> Hugging Face exports, metrics
``reward_fn`` the zero score verl's reward loop places (the hook grades every rollout itself)

Only ``hook`` and ``data`` import without verl's trainer stack; see docs/verl.md.
"""
