"""The training math as pure functions over tensors (shared by the local and verl engines)."""
