"""The verl engine: verl 0.9.1's legacy GRPO trainer with the VI-CuRL step hooked in (GPU clusters).

``hook``     the step on verl's ``DataProto`` batches, calling `vicurl.engines.step` (Ray-free)
``trainer``  ``VICuRLTrainer(RayPPOTrainer)``: three overridden methods call the hook
``runner``   verl's legacy ``TaskRunner`` building ``VICuRLTrainer``
``data``     prepared sets -> verl's RL parquet format
``launch``   one run's settings -> verl Hydra overrides -> train -> Hugging Face exports, metrics
``reward_fn`` the zero score verl's reward loop places (the hook grades every rollout itself)

Only ``hook`` and ``data`` import without verl's trainer stack; see docs/verl.md.
"""
