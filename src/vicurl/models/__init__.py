"""Models: the CPU demo's tiny base model (tokenizer, transformer, SFT) built from scratch."""
