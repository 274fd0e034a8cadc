"""Notebook 12's comparisons, as functions the notebook calls and as a script:

    python -m lessons.nb12_bench            # prints one JSON object: the same-run ratios at every shape
    python lessons/nb12_bench.py --ncu      # one fused launch and the merged cuBLAS matmul, for Nsight Compute

Providers of the forward pass (one LoRA linear, bias, no activation): eager PyTorch (`lora_eager`, peft's
five kernels), `torch.compile` of it, the merged-weight cuBLAS matmul (the lower bound), peft's own layer
(`get_peft_model`, its defaults: adapters in fp32), and the fused kernel (`lora_linear`; at the headline also
x A^T in the K loop, and `fuse_lora` on the peft model). Training steps (forward, backward with grads for x, A
and B, an SGD step on A and B): eager autograd, peft's layer and the fused Function, each timed as it runs and
replayed from a CUDA graph. On a CPU everything runs at tiny sizes (Triton's interpreter): the code path only.
"""

from __future__ import annotations

import course_utils as cu  # first: on a machine without a GPU it switches Triton to its interpreter

import json
import sys

import torch
import torch.nn.functional as F

from course_utils.timing import MODES
from lessons.nb12_lora import LORA_DTYPES, lora_eager, lora_linear, lora_linear_trainable
from lessons.nb12_peft import fuse_lora, peft_linear

#: (tokens, d_in, d_out, r, dtype): the headline first, then a star around it (tokens, rank, dtype, the MLP's
#: 4096 -> 14336 projection). On a CPU: tiny shapes with the same structure.
HEADLINE = cu.pick_size((8192, 4096, 4096, 16, torch.bfloat16), (64, 64, 64, 16, torch.bfloat16))
LLM_SHAPES = cu.pick_size(
    [HEADLINE, (4096, 4096, 4096, 16, torch.bfloat16), (16384, 4096, 4096, 16, torch.bfloat16),
     (8192, 4096, 4096, 8, torch.bfloat16), (8192, 4096, 4096, 64, torch.bfloat16),
     (8192, 4096, 14336, 16, torch.bfloat16), (8192, 4096, 4096, 16, torch.float16),
     (8192, 4096, 14336, 64, torch.float16)],
    [HEADLINE, (48, 64, 96, 8, torch.float16)])
SCALE = 2.0  # alpha / r, e.g. alpha = 32 at r = 16
BENCH = dict(rep_ms=cu.pick_size(100, 2), warmup_ms=cu.pick_size(25, 0))


def _shape(shape) -> tuple:
    if not isinstance(shape, tuple) or len(shape) != 5:
        raise ValueError(f"shape must be (tokens, d_in, d_out, r, dtype), got {shape!r}")
    tokens, d_in, d_out, r = (cu.require_number(n, v, integer=True, low=1)
                              for n, v in zip(("tokens", "d_in", "d_out", "r"), shape[:4]))
    cu.require_choice("dtype", shape[4], LORA_DTYPES)
    return tokens, d_in, d_out, r, shape[4]


def label(shape) -> str:
    """'8192 tokens, 4096 -> 4096, r 16, bfloat16'."""
    tokens, d_in, d_out, r, dtype = _shape(shape)
    return f"{tokens} tokens, {d_in} -> {d_out}, r {r}, {str(dtype)[6:]}"


def useful_flops(shape) -> int:
    """The layer's useful FLOPs: x W^T plus the two rank-r products, 2 T (d_in d_out + r (d_in + d_out))."""
    tokens, d_in, d_out, r, _ = _shape(shape)
    return 2 * tokens * (d_in * d_out + r * (d_in + d_out))


def llm_inputs(shape, seed: int = 0):
    """x, W, b, A, B of one LoRA linear at the scales of a trained layer (B is not zero, as after some steps)."""
    tokens, d_in, d_out, r, dtype = _shape(shape)
    gen = torch.Generator(cu.DEVICE).manual_seed(seed)
    rnd = lambda *s, std=1.0: (torch.randn(*s, generator=gen, device=cu.DEVICE) * std).to(dtype)  # noqa: E731
    return (rnd(tokens, d_in), rnd(d_out, d_in, std=d_in**-0.5), rnd(d_out, std=0.1), rnd(r, d_in, std=d_in**-0.5),
            rnd(d_out, r, std=0.1 * r**-0.5))


def peft_model_of(W, b, A, B, scale: float = SCALE):
    """peft's `get_peft_model` around an nn.Linear holding W and b, its adapter set to A and B (kept in fp32, as
    peft does by default), scaling = alpha / r = scale. Returns (model, its LoRA layer)."""
    cu.require_tensors(W=W, A=A, B=B, ndim=2, max_numel=None, max_span=None)
    r = A.shape[0]
    model = peft_linear(W.shape[1], W.shape[0], r, alpha=scale * r, dtype=W.dtype, bias=b is not None)
    layer = model.base_model.model.proj
    with torch.no_grad():
        layer.get_base_layer().weight.copy_(W)
        if b is not None:
            layer.get_base_layer().bias.copy_(b)
        layer.lora_A["default"].weight.copy_(A)
        layer.lora_B["default"].weight.copy_(B)
    return model, layer


def forward_providers(shape, *, compiled=None, in_loop: bool = False, fused_peft: bool = False) -> dict:
    """name -> function of no arguments, every one computing the same layer at ``shape`` (inference, no grad)."""
    x, W, b, A, B = llm_inputs(shape)
    W_merged = (W.float() + SCALE * B.float() @ A.float()).to(W.dtype)
    model, _ = peft_model_of(W, b, A, B)
    fns = {"eager": lambda: lora_eager(x, W, b, A, B, SCALE), "merged weight": lambda: F.linear(x, W_merged, b),
           "peft": lambda: _inference(model, x), "fused": lambda: lora_linear(x, W, b, A, B, SCALE)}
    if compiled is not None:
        fns["torch.compile"] = lambda: compiled(x, W, b, A, B, SCALE)
    if in_loop:
        fns["fused, x A^T in the loop"] = lambda: lora_linear(x, W, b, A, B, SCALE, xa_in_loop=True)
    if fused_peft:
        fused_model, _ = peft_model_of(W, b, A, B)
        fuse_lora(fused_model)
        fns["fuse_lora(peft)"] = lambda: _inference(fused_model, x)
    return fns


def _inference(model, x):
    with torch.no_grad():  # inference: no autograd graph, as for the other providers
        return model(x)


def _step(forward, params, x, grad_out, lr: float = 1e-4):
    opt = torch.optim.SGD(params, lr=lr)

    def step():  # forward, backward (grads for x and the adapters), an SGD step; grads start as None each time
        x.grad = None
        forward(x).backward(grad_out)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def train_steps(shape) -> dict:
    """name -> one training step at ``shape``: eager autograd and the fused Function (adapters in x's dtype), and
    peft's layer (its fp32 adapters)."""
    x0, W, b, A0, B0 = llm_inputs(shape)
    grad_out = torch.randn(x0.shape[0], W.shape[0], device=cu.DEVICE,
                           generator=torch.Generator(cu.DEVICE).manual_seed(2)).to(x0.dtype)
    steps = {}
    for name, layer in (("eager", lora_eager), ("fused", lora_linear_trainable)):
        x, A, B = (t.clone().requires_grad_() for t in (x0, A0, B0))
        steps[name] = _step(lambda x, A=A, B=B, layer=layer: layer(x, W, b, A, B, SCALE), [A, B], x, grad_out)
    model, peft_layer = peft_model_of(W, b, A0, B0)
    adapters = [peft_layer.lora_A["default"].weight, peft_layer.lora_B["default"].weight]
    steps["peft"] = _step(model, adapters, x0.clone().requires_grad_(), grad_out)
    return steps


def compare_forward(shapes=None, *, rounds: int = 1, mode: str | None = None) -> list[dict]:
    """For each shape: each provider's ms (cu.benchmark_interleaved) and the fused kernel's ratios to them
    (above 1: the fused kernel is faster). torch.compile and the in-loop variant at the headline only.

    ``mode`` (cu.benchmark's): on a GPU "graph" by default, each provider's kernels replayed from a CUDA graph
    after an L2 flush, so that the ratios compare GPU work: with events around one call ("gpu"), a provider
    whose Python takes longer than the flush is charged its host time too."""
    shapes = LLM_SHAPES if shapes is None else shapes
    if not isinstance(shapes, (list, tuple)) or not shapes:
        raise ValueError(f"shapes must be a non-empty list of (tokens, d_in, d_out, r, dtype), got {shapes!r}")
    rounds = cu.require_number("rounds", rounds, integer=True, low=1, high=20)
    mode = cu.require_choice("mode", ("graph" if cu.HAS_CUDA else "gpu") if mode is None else mode, MODES)
    compiled = torch.compile(lora_eager, dynamic=False) if cu.HAS_CUDA else None  # CPU: a C++ build, too slow
    rows = []
    for shape in shapes:
        head = _shape(shape) == _shape(HEADLINE)
        fns = forward_providers(shape, compiled=compiled if head else None, in_loop=head and cu.HAS_CUDA,
                                fused_peft=head)
        ms = cu.benchmark_interleaved(fns, rounds=rounds if head else 1, mode=mode, **BENCH)
        row = {"shape": label(shape), "headline": head, **{f"{k} ms": v for k, v in ms.items()}}
        row.update({f"fused / {k}": ms[k] / ms["fused"] for k in ms if k != "fused"})
        rows.append(row)
        del fns
    return rows


def compare_training(shape=None, *, rounds: int = 1, graphs: bool = True) -> dict:
    """ms per training step for eager, peft and fused, as they run (mode "gpu") and, on a GPU with ``graphs``,
    replayed from a CUDA graph (mode "graph"), with the fused step's ratios to the others."""
    shape = HEADLINE if shape is None else shape
    rounds = cu.require_number("rounds", rounds, integer=True, low=1, high=20)
    graphs = cu.require_choice("graphs", graphs, (False, True))
    result = {"shape": label(shape)}
    for mode in ("gpu", "graph") if graphs and cu.HAS_CUDA else ("gpu",):
        ms = cu.benchmark_interleaved(train_steps(shape), rounds=rounds, mode=mode, **BENCH)
        tag = "" if mode == "gpu" else ", CUDA graph"
        result.update({f"{k}{tag} ms": v for k, v in ms.items()})
        result.update({f"fused / {k}{tag}": ms[k] / ms["fused"] for k in ms if k != "fused"})
    return result


def profile_for_ncu() -> None:
    """The headline: three warm-up calls of the fused layer and of the merged-weight matmul, then one of each
    between torch.cuda.profiler.start() and stop() (what `run_ncu` profiles)."""
    if not cu.HAS_CUDA:
        raise RuntimeError("profile_for_ncu launches CUDA kernels: it needs a CUDA GPU")
    fns = forward_providers(HEADLINE)
    for _ in range(3):
        fns["fused"]()
        fns["merged weight"]()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fns["fused"]()
    fns["merged weight"]()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def main(argv: list[str] | None = None) -> dict | None:
    """``--ncu``: `profile_for_ncu`. Otherwise the comparisons, printed as one JSON object and returned."""
    argv = sys.argv[1:] if argv is None else argv
    if not isinstance(argv, list) or any(a not in ("--ncu", "--quick") for a in argv):
        raise ValueError(f"argv: expected at most --ncu or --quick, got {argv!r}")
    if "--ncu" in argv:
        return profile_for_ncu()
    quick = "--quick" in argv
    report = {"device": torch.cuda.get_device_name(0) if cu.HAS_CUDA else "cpu (interpreter: not GPU figures)",
              "forward": compare_forward(LLM_SHAPES[:1] if quick else None, rounds=1 if quick else 3),
              "training": compare_training(rounds=1 if quick else 3)}
    goals = {"fused / merged weight (headline)": (report["forward"][0]["fused / merged weight"], 0.95),
             "fused / peft (headline)": (report["forward"][0]["fused / peft"], 1.15),
             "fused / merged weight (worst LLM shape)": (min(r["fused / merged weight"] for r in report["forward"]), 0.9),
             "training fused / eager": (report["training"]["fused / eager"], 1.15),
             "training fused / peft": (report["training"]["fused / peft"], 1.15)}
    report["goals"] = {k: {"ratio": round(v, 4), "at_least": g, "met": v >= g if cu.HAS_CUDA else None}  # CPU: not judged
                       for k, (v, g) in goals.items()}
    print(json.dumps(report, indent=1, default=float))
    return report


if __name__ == "__main__":
    main()
