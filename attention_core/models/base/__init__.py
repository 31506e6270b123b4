"""A model's contract and what every decoder shares: the protocols, the forward pass's outputs,
the KV cache, the block stack, the decoder language model, the device and the result cache."""
