"""Exercise cells for notebooks 12, 13 and 14, waiting for those notebooks' next H100 run.

The specifications, solutions and wrong answers are in exercises/, solutions/ and tests/wrong_solutions/
(nb12, nb13, nb14) and tested in CI; the notebooks hold the outputs of an H100 run made before these cells
existed, so the cells go in just before their next H100 run (issue 15), then this file is deleted:
- 12 and 13: split the cell that holds "What to remember" and "## Further reading" (12: id 3f35e8c1,
  13: id e172a258) and put NB12 / NB13 between the two parts;
- 14: remove the "## Exercise: how much of K should one program see?" section from the summary cell
  (id 393bd38f), delete cells 949e2332 (its solution, now solutions/nb14.py) and fa2f3da6, and put NB14
  before the "Further reading" cell (id 8c08fb07).
`python tools/pending_exercise_cells.py 14` does this for one notebook.
Each entry is (cell type, source).
"""

INTRO = """## Exercises

Each exercise has a task, a stub cell for you to fill in, and a one-line grading call:
`grade(exercise, your_function)` runs your function and a reference on inputs that
[hypothesis](https://hypothesis.readthedocs.io/) draws and prints `passed`, `not attempted yet` (the stub
raises `NotImplementedError`), or the smallest input on which your function is wrong and what went wrong
there. The memory around every input holds NaN and the memory around every tensor your code allocates
holds -7776, so a missing mask shows up in the message. On a CPU an exercise gets a few dozen small cases,
on a GPU a few dozen to a few hundred larger ones. `ex.NAME.task` repeats the task in one line. The
solutions are in `solutions/nb{nn}.py`: try first."""

IMPORTS = """from course_utils.grading import grade
from exercises import nb{nn} as ex  # the exercises' specifications (what to write, the reference, the inputs)"""

NB12 = [
    ("markdown", INTRO.format(nn=12)),
    ("code", IMPORTS.format(nn=12)),
    ("markdown", """### Exercise 1: the fused tail with tanh (easy)

`add_mul_act_kernel` takes its activation as a `tl.constexpr`, and tanh is not among them. Write
`add_mul_tanh(base, lora, scale)` = `tanh(base + scale * lora)` as a Triton kernel and its wrapper, for 2-D
tensors of one dtype (fp32, fp16 or bf16): fp32 math, rounded once on the store, as in
`add_mul_act_kernel`. `triton.language` has no tanh: build it from `tl.exp` (or `tl.sigmoid`), and mind what
`exp(2 y)` is for `y > 44` in fp32; the grader draws pre-activations of a few hundred. It also passes
strided and transposed views: decide what your wrapper does with them."""),
    ("code", """# Exercise 1: your kernel (decorated with triton.jit) and this wrapper
def add_mul_tanh(base: torch.Tensor, lora: torch.Tensor, scale: float) -> torch.Tensor:
    raise NotImplementedError("exercise 1: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.ADD_MUL_TANH, add_mul_tanh)"""),
    ("markdown", """### Exercise 2: the tail's backward pass

Training through the fused tail needs its backward pass. With `y = base + scale * lora` and `grad` the
gradient of `act(y)`, the gradients of the two inputs are `d_base = grad * act'(y)` and
`d_lora = scale * d_base`. Write `add_mul_act_backward(grad, base, lora, scale, activation)`, returning
`(d_base, d_lora)`, as one Triton kernel for 1-D tensors of one dtype (fp32, fp16 or bf16), with
`activation` one of `"relu"`, `"sigmoid"`, `"gelu"` (the exact erf form, as `F.gelu`) and `"silu"`, chosen
by a `tl.constexpr`. Recompute `y` in the kernel from `base` and `lora` (nothing else is saved), take the
derivatives from section 8's `activation_grad`, compute in fp32 and round once. The grader compares with
autograd in fp32 and also passes strided views."""),
    ("code", """# Exercise 2: your kernel and this wrapper
def add_mul_act_backward(grad: torch.Tensor, base: torch.Tensor, lora: torch.Tensor, scale: float,
                         activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    raise NotImplementedError("exercise 2: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.ADD_MUL_ACT_BACKWARD, add_mul_act_backward)"""),
    ("markdown", """### Exercise 3: the gradient of B in Triton (harder)

Section 8 leaves `dB = s g^T (x A^T)` to cuBLAS: a d_out x r result, summed over every token. Write it as
a Triton kernel: `lora_grad_b(g, xa, scale)` takes `g` (tokens x d_out), the gradient of the layer's
output, and `xa` (tokens x r), the `x A^T` that the forward pass stores, both fp16 or both bf16, and returns
`scale * g^T xa` (d_out x r) in their dtype, accumulated in fp32. One program per `BLOCK_N` rows of dB: it
walks the tokens in steps of `BLOCK_T` and accumulates `tl.dot` of a `BLOCK_N x BLOCK_T` tile of `g^T`,
read through `g`'s strides (no transposed copy), with a `BLOCK_T x BLOCK_R` tile of `xa`, the rank padded
to `BLOCK_R = max(16, next_power_of_2(r))` as in `lora_linear_kernel`. The grader draws ranks 1, 13 and
128, token counts that are not multiples of a block, and `g` transposed or sliced from a wider matrix. On
a CPU it grades fp16 only: the interpreter's `tl.dot` is wrong for bf16 (see `WIDEN`)."""),
    ("code", """# Exercise 3: your kernel and this wrapper
def lora_grad_b(g: torch.Tensor, xa: torch.Tensor, scale: float) -> torch.Tensor:
    raise NotImplementedError("exercise 3: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.LORA_GRAD_B, lora_grad_b)"""),
]

NB13 = [
    ("markdown", INTRO.format(nn=13)),
    ("code", IMPORTS.format(nn=13)),
    ("markdown", """### Exercise 1: IoU of box pairs (easy)

Write `box_iou(pred, target)`: the IoU of each pair of boxes, `I / (U + 1e-7)` with `I` and `U` as in
section 1, for `pred` and `target` of shape (n, 4) in fp32, fp16 or bf16, returned as a float32 tensor of n
values, in one Triton kernel with one program per `BLOCK` pairs; compute in fp32. The grader's boxes touch,
nest, coincide, have zero width, or lie far apart in x *and* in y (look at the sign of `iw * ih` there), and
come as views: every other element, the first 4 of 7 columns (boxes stored with a score and a class), and a
coordinate-major (4, n) tensor transposed. Read each coordinate through the strides."""),
    ("code", """# Exercise 1: your kernel (decorated with triton.jit) and this wrapper
def box_iou(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("exercise 1: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.BOX_IOU, box_iou)"""),
    ("markdown", """### Exercise 2: the mean DIoU loss of a padded batch

The distance-IoU loss (Zheng et al., 2020; `torchvision.ops.distance_box_iou_loss`) replaces GIoU's
enclosing-area term by the distance of the centres: per box, `1 - IoU + d^2 / (c^2 + 1e-7)`, with `d` the
distance between the centres of the two boxes and `c` the diagonal of the smallest box that encloses both.
Write `diou_loss(pred, target, mask)` for a padded batch as in section 1: the sum over the valid boxes
divided by their number, as a 0-d float32 tensor, and 0 when no box is valid. Use a grid over tiles of
boxes, as in section 6 (a partial sum per program, then a sum; or atomics). The padding may hold NaN, and
`pred` and `target` may be strided views."""),
    ("code", """# Exercise 2: your kernel and this wrapper
def diou_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("exercise 2: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.DIOU_LOSS, diou_loss)"""),
    ("markdown", """### Exercise 3: the gradient for the target boxes (harder)

Section 3 derived the gradient with respect to `pred`. When both sets of boxes are trained (a student
matching a teacher's boxes that still learn, a consistency loss between two predictions), `target` needs
its gradient too. Write `giou_grad_target(pred, target, mask)`: the gradient of the mean GIoU loss
(`giou_loss_reference`) with respect to `target`, with the shape and dtype of `target` and zeros in the
padding (which may hold NaN), in one Triton kernel. A tie in a `min` or `max` splits the gradient in half,
as in section 3; the grader's boxes lie on a grid of 1/32, so shared edges and identical boxes are common.
Look at the formula for a shortcut before deriving anything."""),
    ("code", """# Exercise 3: your kernel and this wrapper
def giou_grad_target(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("exercise 3: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.GIOU_GRAD_TARGET, giou_grad_target)"""),
]

NB14 = [
    ("markdown", INTRO.format(nn=14)),
    ("code", IMPORTS.format(nn=14)),
    ("markdown", """### Exercise 1: how much of K should one program see? (easy)

Before timing split-K configs, count what they launch. Write `split_k_plan(M, N, K, block_n, block_k,
split_k)` in plain Python: the dict that describes `skinny_matmul_kernel`'s launch with
`BLOCK_M = skinny_block_m(M)`, with four keys:

- `"grid"`: the launch grid, `(row tiles, column tiles, SPLIT_K)`;
- `"k_steps"`: how many `BLOCK_K` steps each program's loop runs (the kernel's `k_steps`);
- `"idle_programs"`: how many programs get a slice of K that starts at or past K, and so multiply nothing
  (the correctness check of section 6 uses 3 splits so that some do);
- `"workspace_bytes"`: the bytes of the fp32 partial tiles the programs write, 0 without split-K.

The grader draws M up to 600, N and K up to 20000, BLOCK_N from 32 to 128, BLOCK_K from 32 to 256 and
SPLIT_K from 1 to 8."""),
    ("code", """# Exercise 1: your function
def split_k_plan(M: int, N: int, K: int, block_n: int, block_k: int, split_k: int) -> dict:
    raise NotImplementedError("exercise 1: replace this line with your function")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.SPLIT_K_PLAN, split_k_plan)"""),
    ("markdown", """Once it passes, the next cell asks it section 6's question: for M = 16 and the 4096 x 4096 weight,
with the GPU configs' BLOCK_N = 64 and BLOCK_K = 256, which splits launch at least one program per SM on
an H100 (132 SMs) without exceeding two waves? On a GPU, time them with `skinny_matmul(x, w, config)` and
compare with the autotuner's choice."""),
    ("code", """if report.passed:
    for split in (1, 2, 4, 8):
        plan = split_k_plan(16, 4096, 4096, 64, 256, split)
        programs = plan["grid"][0] * plan["grid"][1] * plan["grid"][2]
        print(f"SPLIT_K={split}: {programs} programs ({programs / 132:.2f} per SM on an H100), "
              f"{64 * plan['k_steps'] * 256 * 2 / 2**20:.3f} MiB of W per program, "
              f"workspace {plan['workspace_bytes'] / 2**20:.1f} MiB"
              + (": between one and two waves" if 132 <= programs <= 2 * 132 else ""))"""),
    ("markdown", """### Exercise 2: per-row fp8 scales

`quantize_fp8(x, rowwise=True)` computes its per-row scales with several PyTorch kernels (abs, amax, a
division, a clamp) before the cast. Write them as one Triton kernel: `fp8_row_scales(x)`, for a 2-D `x` in
fp32, fp16 or bf16, returns the float32 `max(max |x[row]| / 448, 1e-12)` of every row, one program per row,
looping over the row in `BLOCK` steps (the grader's rows are longer than one block). Read `x` through its
strides: the grader passes transposed, sliced and strided views, rows of zeros, an outlier row, and rows
whose largest magnitude is a negative value. The cast itself stays in PyTorch here: on a CPU the
interpreter's fp32 -> e4m3 conversion gets some roundings wrong (126.6 becomes 64, where PyTorch gives
128)."""),
    ("code", """# Exercise 2: your kernel and this wrapper
def fp8_row_scales(x: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("exercise 2: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.FP8_ROW_SCALES, fp8_row_scales)"""),
    ("markdown", """### Exercise 3: an fp8 matmul with per-row scales, without descriptors (harder)

`matmul_fp8_kernel` loads its tiles through tensor descriptors, which need contiguous, 16-byte aligned
operands. Write the pointer version: `matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale)` with `a_q` (M x K)
and `w_q` (N x K) in `torch.float8_e4m3fn` and one float32 scale per row of each, returning the bf16
`(a_q * a_scale[:, None]) @ (w_q * w_scale[:, None])^T`: the fp8 products accumulated in fp32 by `tl.dot`,
the scales applied to the fp32 tile in the epilogue (A's along the rows of C, W's along its columns), masks
on M, N and K, and `w_q` read as rows of N x K (load a `BLOCK_N x BLOCK_K` tile and `tl.trans` it). On an
H100, `tl.dot` of two fp8 tiles lets the tensor cores keep the sum at their own precision (about 14 bits,
truncated) for the whole K loop, the "fast accumulation" of section 5: pass `max_num_imprecise_acc=32`, and
each `wgmma`'s 32 products go into the fp32 accumulator in fp32 (it must not exceed `BLOCK_K`; other GPUs
and the interpreter ignore it). The grader compares with `dequantized_reference` at rtol = atol = 1e-2, the
tolerance of section 5, with K up to 2048 on a GPU and smaller than one block, M and N that are not
multiples of it, `a_q` the first columns of a wider matrix, `w_q` not 16-byte aligned, and an outlier row
in A."""),
    ("code", """# Exercise 3: your kernel and this wrapper
def matmul_fp8_rowwise(a_q: torch.Tensor, w_q: torch.Tensor, a_scale: torch.Tensor,
                       w_scale: torch.Tensor) -> torch.Tensor:
    raise NotImplementedError("exercise 3: replace this line with your wrapper")"""),
    ("code", """# NBVAL_CHECK_OUTPUT
report = grade(ex.MATMUL_FP8_ROWWISE, matmul_fp8_rowwise)"""),
]


def insert(number: int) -> None:
    """Put notebook `number`'s exercise cells in place, as the docstring says; run it once per notebook."""
    from pathlib import Path

    import nbformat

    path = next(Path("notebooks").glob(f"{number}_*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    new = [nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
           for kind, src in {12: NB12, 13: NB13, 14: NB14}[number]]
    ids = [c.id for c in nb.cells]
    if number == 14:
        summary = nb.cells[ids.index("393bd38f")]
        summary.source = summary.source[:summary.source.index("## Exercise: how much of K")].rstrip() + "\n"
        nb.cells = [c for c in nb.cells if c.id not in ("949e2332", "fa2f3da6")]
        at = [c.id for c in nb.cells].index("8c08fb07")
    else:
        index = ids.index({12: "3f35e8c1", 13: "e172a258"}[number])
        text = nb.cells[index].source
        cut = text.index("## Further reading")
        nb.cells[index].source = text[:cut].rstrip() + "\n"
        new.append(nbformat.v4.new_markdown_cell(text[cut:]))
        at = index + 1
    nb.cells[at:at] = new
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print(f"{path}: exercise cells inserted")


if __name__ == "__main__":
    import sys

    insert(int(sys.argv[1]))
