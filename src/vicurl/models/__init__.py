"""Initial policies and sampling from them.

``fetch``     an initial policy from the Hub, fetched once for the whole study
``tiny``      the demo's tokenizer and tiny Llama, trained from scratch
``sampling``  G responses per prompt with transformers ``generate`` (CPU engine and CPU evaluation)
``rope``      a model cast to bf16 keeps its rotary frequencies in float32
"""
