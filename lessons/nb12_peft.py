"""Notebook 12's drop-in for peft: `fuse_lora(model)` runs the forward and backward of every LoRA `Linear` of a
peft model (`get_peft_model`) through notebook 12's fused kernels (`lora_linear_trainable`), and leaves a layer
to peft's own path, with a one-line reason, where the kernels do not compute what peft would.

peft is imported only when a function needs it (`import peft` also imports transformers: seconds).
"""

from __future__ import annotations

import course_utils as cu  # first: on a machine without a GPU it switches Triton to its interpreter

import dataclasses

import torch

from lessons.nb12_lora import LORA_DTYPES, MAX_RANK, SCALE_RANGE, lora_linear_trainable

_FUSED = "_nb12_fused_forward"  # the attribute that marks a fused layer


def _peft_linear_class():
    from peft.tuners.lora.layer import Linear  # peft's LoRA layer around an nn.Linear
    return Linear


def static_reason(layer) -> str | None:
    """Why this peft LoRA Linear cannot run on the fused kernels whatever its input (None: it can)."""
    if not isinstance(layer, _peft_linear_class()):
        raise TypeError(f"layer must be a peft LoRA Linear (peft.tuners.lora.layer.Linear), got {type(layer).__name__}")
    base = layer.get_base_layer()
    if type(base) is not torch.nn.Linear:
        return f"base layer is {type(base).__name__}, not torch.nn.Linear"
    if getattr(layer, "fan_in_fan_out", False):
        return "fan_in_fan_out (a Conv1D-style weight stored transposed)"
    if base.weight.dtype not in LORA_DTYPES:
        return f"base weight is {base.weight.dtype}; the kernels take float16 or bfloat16"
    if base.weight.requires_grad or (base.bias is not None and base.bias.requires_grad):
        return "the base layer's weight or bias is trainable (the kernels give no gradient for it)"
    return None


def call_reason(layer, x, args: tuple, kwargs: dict) -> str | None:
    """Why this call must take peft's path (None: the fused kernels compute what peft would)."""
    reason = static_reason(layer)
    if reason:
        return reason
    if args or kwargs:
        return f"extra forward arguments ({', '.join(list(kwargs)) or 'positional'})"
    if layer.disable_adapters:
        return "adapters disabled"
    if layer.merged:
        return "adapter merged into the base weight (peft runs the base layer alone)"
    active = [name for name in layer.active_adapters if name in layer.lora_A]
    if len(active) != 1:
        return f"{len(active)} active adapters (the kernels fuse one)"
    name = active[0]
    if name in getattr(layer, "lora_variant", {}):
        return f"a LoRA variant ({type(layer.lora_variant[name]).__name__}, e.g. DoRA)"
    if layer.lora_bias.get(name, False):
        return "lora_bias=True (B has a bias)"
    dropout = layer.lora_dropout[name]
    if isinstance(dropout, torch.nn.Dropout) and dropout.p > 0 and dropout.training:
        return f"dropout {dropout.p:g} > 0 in training mode"
    A, B = layer.lora_A[name].weight, layer.lora_B[name].weight
    if A.shape[0] > MAX_RANK:
        return f"rank {A.shape[0]} > {MAX_RANK}"
    scale = layer.scaling[name]
    if not isinstance(scale, (int, float)) or (scale != 0 and not SCALE_RANGE[0] <= abs(scale) <= SCALE_RANGE[1]):
        return f"scaling {scale!r} outside the kernels' range"
    if not isinstance(x, torch.Tensor) or x.dtype != layer.get_base_layer().weight.dtype:
        return f"input dtype {getattr(x, 'dtype', type(x).__name__)} differs from the base weight's"
    if x.device.type != cu.DEVICE.type or A.device != x.device:
        return f"input on {x.device}, the kernels run on {cu.DEVICE.type}"
    if torch.is_autocast_enabled(x.device.type):
        return "autocast is on (peft's path casts under it)"
    if x.dim() < 2 or x.numel() == 0:
        return f"input of shape {tuple(x.shape)}"
    return None


@dataclasses.dataclass
class FuseReport:
    """What `fuse_lora` did: the fused layers' names, and for every other LoRA Linear why it stays on peft."""

    fused: list[str]
    skipped: dict[str, str]

    def __str__(self) -> str:
        lines = [f"fused {len(self.fused)} of {len(self.fused) + len(self.skipped)} LoRA Linear layers"]
        lines += [f"  {name}: peft's path ({why})" for name, why in self.skipped.items()]
        return "\n".join(lines)


def _fused_forward(layer):
    peft_forward = type(layer).forward

    def forward(x, *args, **kwargs):
        if call_reason(layer, x, args, kwargs) is not None:
            return peft_forward(layer, x, *args, **kwargs)  # the reason shows in `explain(layer, x)`
        name = next(n for n in layer.active_adapters if n in layer.lora_A)
        base = layer.get_base_layer()
        return lora_linear_trainable(x, base.weight, base.bias, layer.lora_A[name].weight,
                                     layer.lora_B[name].weight, float(layer.scaling[name]))
    return forward


def fuse_lora(model: torch.nn.Module) -> FuseReport:
    """Route every peft LoRA Linear of ``model`` through the fused kernels (forward and backward); a layer or a
    call the kernels do not support (dropout > 0 in training, several adapters, merged adapters, DoRA, ...)
    runs peft's own forward. Returns what was fused and why the rest was not. Undo with `unfuse_lora`."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module (e.g. from peft.get_peft_model), got {type(model).__name__}")
    linear = _peft_linear_class()
    report = FuseReport([], {})
    for name, module in model.named_modules():
        if not isinstance(module, linear):
            continue
        reason = static_reason(module)
        if reason is not None:
            report.skipped[name] = reason
            continue
        module.forward = _fused_forward(module)  # an instance attribute: nn.Module.__call__ finds it first
        setattr(module, _FUSED, True)
        report.fused.append(name)
    if not report.fused and not report.skipped:
        raise ValueError("model has no peft LoRA Linear layer (wrap it with peft.get_peft_model first)")
    return report


def unfuse_lora(model: torch.nn.Module) -> int:
    """Give every fused layer of ``model`` its peft forward back; returns how many."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    count = 0
    for module in model.modules():
        if getattr(module, _FUSED, False):
            del module.forward
            delattr(module, _FUSED)
            count += 1
    return count


def explain(layer, x) -> str:
    """One line: whether a call of this LoRA Linear on x runs the fused kernels, or peft's path and why."""
    reason = call_reason(layer, x, (), {})
    fused = getattr(layer, _FUSED, False)
    if reason is None:
        return "fused kernels" if fused else "could run the fused kernels (call fuse_lora on its model)"
    return f"peft's path: {reason}"


def peft_linear(d_in: int, d_out: int, r: int, *, alpha: float | None = None, dtype: torch.dtype = torch.bfloat16,
                bias: bool = True, dropout: float = 0.0, seed: int = 0, **lora_options):
    """One nn.Linear(d_in, d_out) of ``dtype`` wrapped by peft's `get_peft_model` with a rank-r adapter (peft's
    defaults otherwise: adapters in fp32, scaling alpha / r). B gets small random values, as after some training
    (peft starts it at zero). Returns the PeftModel; its layer is ``model.base_model.model.proj``."""
    from peft import LoraConfig, get_peft_model

    d_in, d_out, r = (cu.require_number(n, v, integer=True, low=1) for n, v in (("d_in", d_in), ("d_out", d_out), ("r", r)))
    dropout = cu.require_number("dropout", dropout, low=0.0, high=1.0)
    if dtype not in (*LORA_DTYPES, torch.float32):
        raise TypeError(f"dtype must be torch.float16, torch.bfloat16 or torch.float32, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential()
    net.add_module("proj", torch.nn.Linear(d_in, d_out, bias=bias))
    with torch.no_grad():
        net.proj.weight.copy_(torch.randn(d_out, d_in, generator=gen) * d_in**-0.5)
        if bias:
            net.proj.bias.copy_(torch.randn(d_out, generator=gen) * 0.1)
    config = LoraConfig(r=r, lora_alpha=alpha if alpha is not None else 2 * r, target_modules=["proj"],
                        lora_dropout=dropout, **lora_options)
    model = get_peft_model(net.to(cu.DEVICE, dtype), config)
    layer = model.base_model.model.proj
    with torch.no_grad():
        for name in layer.lora_B:
            B = layer.lora_B[name].weight
            B.copy_(torch.randn(B.shape, generator=gen).to(B.device, B.dtype) * 0.1 * r**-0.5)
    return model
