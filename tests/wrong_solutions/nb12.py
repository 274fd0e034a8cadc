"""Wrong answers to notebook 12's exercises: tanh from exp(2 y) (inf / inf), a missing mask, a strided view read
flat, the scale on the wrong input; the derivative taken at the output, d_lora without the scale, GELU's
derivative without y phi(y), a missing mask; the last tokens' tile without its mask, g's strides assumed,
a round-down loop over the tokens, dB returned transposed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb12 as ex
from solutions import nb12 as sol


# ---- add_mul_tanh --------------------------------------------------------------------------------------
@triton.jit
def tanh_variant_kernel(base_ptr, lora_ptr, out_ptr, scale, n, BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if BUG == "no mask":
        base = tl.load(base_ptr + offs).to(tl.float32)                 # BUG: no mask on the last block
        lora = tl.load(lora_ptr + offs).to(tl.float32)
    else:
        base = tl.load(base_ptr + offs, mask=mask).to(tl.float32)
        lora = tl.load(lora_ptr + offs, mask=mask).to(tl.float32)
    if BUG == "scale on base":
        y = scale * base + lora                                         # BUG: the scale belongs to lora
    else:
        y = base + scale * lora
    if BUG == "exp(2y)":
        e = tl.exp(2.0 * y)                                             # BUG: inf for y > 44, then inf / inf
        th = (e - 1.0) / (e + 1.0)
    else:
        t = tl.exp(-2.0 * tl.abs(y))
        th = tl.where(y < 0, -1.0, 1.0) * (1.0 - t) / (1.0 + t)
    if BUG == "no mask":
        tl.store(out_ptr + offs, th.to(out_ptr.dtype.element_ty))
    else:
        tl.store(out_ptr + offs, th.to(out_ptr.dtype.element_ty), mask=mask)


def _tanh_with(bug, contiguous=True):
    def add_mul_tanh(base, lora, scale):
        if contiguous:
            base, lora = base.contiguous(), lora.contiguous()
        out = torch.empty(base.shape, dtype=base.dtype, device=base.device)  # BUG if not contiguous: views read flat
        block = 4096 // base.element_size()
        tanh_variant_kernel[(triton.cdiv(out.numel(), block),)](base, lora, out, float(scale), out.numel(),
                                                                BLOCK=block, BUG=bug)
        return out
    return add_mul_tanh


# ---- add_mul_act_backward ------------------------------------------------------------------------------
@triton.jit
def activation(y, ACTIVATION: tl.constexpr):
    if ACTIVATION == "relu":
        y = tl.maximum(y, 0.0)
    elif ACTIVATION == "sigmoid":
        y = tl.sigmoid(y)
    elif ACTIVATION == "gelu":
        y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    else:
        y = y * tl.sigmoid(y)
    return y


@triton.jit
def backward_variant_kernel(grad_ptr, base_ptr, lora_ptr, d_base_ptr, d_lora_ptr, scale, n,
                            BLOCK: tl.constexpr, ACTIVATION: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) if BUG != "no mask" else (offs >= 0)              # BUG (no mask): every lane stores
    grad = tl.load(grad_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(base_ptr + offs, mask=mask).to(tl.float32) + scale * tl.load(lora_ptr + offs, mask=mask).to(tl.float32)
    if BUG == "at the output":
        y = activation(y, ACTIVATION)                                   # BUG: act'(act(y)), not act'(y)
    if BUG == "relu at y >= 0" and ACTIVATION == "relu":
        d = tl.where(y >= 0, 1.0, 0.0)                                  # BUG: ReLU's derivative at 0 is 0
    elif BUG == "gelu without y phi(y)" and ACTIVATION == "gelu":
        d = 0.5 * (1.0 + tl.erf(y * 0.7071067811865476))                # BUG: only Phi(y)
    else:
        d = sol.activation_derivative(y, ACTIVATION)
    dy = grad * d
    tl.store(d_base_ptr + offs, dy.to(d_base_ptr.dtype.element_ty), mask=mask)
    d_lora = dy if BUG == "d_lora without scale" else scale * dy       # BUG: d lora = scale d base
    tl.store(d_lora_ptr + offs, d_lora.to(d_lora_ptr.dtype.element_ty), mask=mask)


def _backward_with(bug):
    def add_mul_act_backward(grad, base, lora, scale, activation):
        grad, base, lora = grad.contiguous(), base.contiguous(), lora.contiguous()
        d_base, d_lora = torch.empty_like(base), torch.empty_like(base)
        block = 4096 // base.element_size()
        backward_variant_kernel[(triton.cdiv(base.numel(), block),)](
            grad, base, lora, d_base, d_lora, float(scale), base.numel(), BLOCK=block, ACTIVATION=activation, BUG=bug)
        return d_base, d_lora
    return add_mul_act_backward


# ---- lora_grad_b ---------------------------------------------------------------------------------------
@triton.jit
def grad_b_variant_kernel(g_ptr, xa_ptr, out_ptr, T, N, R, scale, stride_gt, stride_gn, stride_xt, stride_xr,
                          BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_R: tl.constexpr, BUG: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_R)
    offs_t = tl.arange(0, BLOCK_T)
    acc = tl.zeros((BLOCK_N, BLOCK_R), dtype=tl.float32)
    steps = T // BLOCK_T if BUG == "round-down loop" else tl.cdiv(T, BLOCK_T)  # BUG (round-down): the last
    for i in range(0, steps):                                                  # tokens never count
        t = i * BLOCK_T + offs_t
        t_ok = (t < T) if BUG != "no token mask" else (t >= 0)         # BUG (no token mask): the last tile
        gt = tl.load(g_ptr + offs_n[:, None] * stride_gn + t[None, :] * stride_gt,  # reads past the tokens
                     mask=(offs_n[:, None] < N) & t_ok[None, :], other=0.0)
        xa = tl.load(xa_ptr + t[:, None] * stride_xt + offs_r[None, :] * stride_xr,
                     mask=t_ok[:, None] & (offs_r[None, :] < R), other=0.0)
        if BUG == "fp16 tile sums":          # BUG: each tile's sum in fp16 (within 1e-2, unless it overflows)
            acc += tl.dot(gt, xa, out_dtype=tl.float16).to(tl.float32)
        else:
            acc = tl.dot(gt, xa, acc)
    out = out_ptr + offs_n[:, None] * R + offs_r[None, :]
    tl.store(out, (acc * scale).to(out_ptr.dtype.element_ty), mask=(offs_n[:, None] < N) & (offs_r[None, :] < R))


def _grad_b_with(bug):
    def lora_grad_b(g, xa, scale):
        (T, N), R = g.shape, xa.shape[1]
        out = torch.empty((N, R), dtype=g.dtype, device=g.device)
        stride_gt, stride_gn = (N, 1) if bug == "strides assumed" else g.stride()  # BUG: g taken as contiguous
        grid = (1,) if bug == "one program" else (triton.cdiv(N, 32),)   # BUG (one program): 32 rows of dB
        grad_b_variant_kernel[grid](g, xa, out, T, N, R, float(scale), stride_gt, stride_gn,
                                                     xa.stride(0), xa.stride(1), BLOCK_N=32, BLOCK_T=32,
                                                     BLOCK_R=max(16, triton.next_power_of_2(R)), BUG=bug)
        return out
    return lora_grad_b


def grad_b_transposed(g, xa, scale):
    return sol.lora_grad_b(g, xa, scale).t()                            # BUG: r x d_out, the shape of A^T's


WRONG = [
    (ex.ADD_MUL_TANH, "tanh from exp(2y)", _tanh_with("exp(2y)"), ["got nan", "inf / inf"]),
    (ex.ADD_MUL_TANH, "missing mask", _tanh_with("no mask"), ["wrote outside", "past its end"]),
    (ex.ADD_MUL_TANH, "strided view read flat", _tanh_with("", contiguous=False), ["strides", "values wrong"]),
    (ex.ADD_MUL_TANH, "scale on base", _tanh_with("scale on base"), ["values wrong", "scale="]),
    (ex.ADD_MUL_ACT_BACKWARD, "derivative at the output", _backward_with("at the output"),
     ["d_base (the 1st value you returned)", "values wrong", "activation="]),
    (ex.ADD_MUL_ACT_BACKWARD, "d_lora without the scale", _backward_with("d_lora without scale"),
     ["d_lora (the 2nd value you returned)", "values wrong", "scale="]),
    (ex.ADD_MUL_ACT_BACKWARD, "GELU's derivative without y phi(y)", _backward_with("gelu without y phi(y)"),
     ["d_base", "values wrong", "activation='gelu'"]),
    (ex.ADD_MUL_ACT_BACKWARD, "missing mask", _backward_with("no mask"), ["wrote outside", "past its end"]),
    (ex.LORA_GRAD_B, "no mask on the last tokens", _grad_b_with("no token mask"),
     ["read outside the input g", "a load outside an input"]),
    (ex.LORA_GRAD_B, "g's strides assumed", _grad_b_with("strides assumed"), ["g: ", "float16 (", "strides"]),
    (ex.LORA_GRAD_B, "round-down loop over the tokens", _grad_b_with("round-down loop"), ["values wrong"]),
    (ex.LORA_GRAD_B, "dB transposed", grad_b_transposed, ["returned shape", "instead of"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def tanh_one_program(base, lora, scale):
    base, lora = base.contiguous(), lora.contiguous()
    out = torch.empty(base.shape, dtype=base.dtype, device=base.device)
    tanh_variant_kernel[(1,)](base, lora, out, float(scale), out.numel(), BLOCK=4096, BUG="")  # BUG: one program
    return out


def tanh_into_base(base, lora, scale):
    base, lora = base.contiguous(), lora.contiguous()
    block = 4096 // base.element_size()                                  # BUG: the result overwrites base
    tanh_variant_kernel[(triton.cdiv(base.numel(), block),)](base, lora, base, float(scale), base.numel(),
                                                             BLOCK=block, BUG="")
    return base


def _backward_into_base(grad, base, lora, scale, activation):
    grad, base, lora = grad.contiguous(), base.contiguous(), lora.contiguous()
    d_lora = torch.empty_like(base)                                     # BUG: d_base written over base
    block = 4096 // base.element_size()
    backward_variant_kernel[(triton.cdiv(base.numel(), block),)](
        grad, base, lora, base, d_lora, float(scale), base.numel(), BLOCK=block, ACTIVATION=activation, BUG="")
    return base, d_lora


WRONG += [
    (ex.ADD_MUL_TANH, "one program of 4096", tanh_one_program, ["[programs]", "values wrong"]),
    (ex.ADD_MUL_TANH, "the result written over base", tanh_into_base, ["changed its input base"]),
    (ex.ADD_MUL_ACT_BACKWARD, "ReLU's derivative at y >= 0", _backward_with("relu at y >= 0"),
     ["activation='relu'", "expected 0", "d_base (the 1st value you returned)"]),
    (ex.ADD_MUL_ACT_BACKWARD, "the result written over base", _backward_into_base,
     ["changed its input base"]),
    (ex.LORA_GRAD_B, "an fp16 accumulator", _grad_b_with("fp16 tile sums"), ["values wrong"]),
    (ex.LORA_GRAD_B, "one program", _grad_b_with("one program"), ["values wrong"]),
]
