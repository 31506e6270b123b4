"""Reading and validating a checkpoint directory: its files, safetensors,
bounded JSON, size limits."""
