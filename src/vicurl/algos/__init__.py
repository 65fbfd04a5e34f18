"""The training math as pure functions over tensors (shared by the local and verl engines).

``grpo``        GRPO's advantages and loss as the paper uses them, on verl's core_algos
``confidence``  VI-CuRL's curriculum score: mean token entropy per prompt
``rewards``     the reward sources (oracle, majority vote, entropy, semantic), over one group of rollouts
"""
