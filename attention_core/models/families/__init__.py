"""The hand-written model families (GPT-2, Llama, BERT), each in plain PyTorch
over the core's attention."""
