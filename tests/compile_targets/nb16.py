"""Notebook 16 has no Triton kernel: its lesson is PyTorch code (the model, formulas, hooks, snapshot reader)."""

TARGETS = []
