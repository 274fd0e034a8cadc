"""Notebook 17 has no Triton kernel: its lessons are PyTorch code (the model, data parallelism from scratch, the
trace reader, the torchrun scripts)."""

TARGETS = []
