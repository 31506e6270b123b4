"""Which checkpoints exist, which family and backend runs each, and which are loaded."""
