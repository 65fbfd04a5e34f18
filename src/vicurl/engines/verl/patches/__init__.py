"""Patches of verl 0.9.1 and vLLM, each for one upstream behaviour (its module says which line).

``colocate_socket``  the weight-sync socket named after the run (two runs on one machine never share it)
``fsdp_wrap``        an untied LM head stays in the root FSDP2 unit with verl's fused kernels
``rollout_seeds``    a seed for every rollout verl asks vLLM for (a run's samples follow from its seed)
``rope_fp32``        the bf16 reference keeps its rotary frequencies in float32
"""
