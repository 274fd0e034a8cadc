"""Notebook 03 (CUDA kernels with load_inline): the idle threads of a grid, and square_strided, a CUDA kernel
with full input checks (graded through its C++ twin on a CPU, through the CUDA build on a GPU)."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from course_utils.checks import require_tensors
from course_utils.cuda_build import ToolchainError, build_extension, compile_cuda
from course_utils.device import DEVICE, HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import LAYOUTS, case, described, describe, guarded_tensor, randn, sizes, tensor_arg, values

BLOCKS = ((16, 16), (32, 8), (8, 32), (1, 256), (128, 1), (32, 32), (64, 4))


@st.composite
def _idle_inputs(draw) -> Inputs:
    rows, cols, block = draw(sizes(100_000, 16)), draw(sizes(100_000, 16)), draw(st.sampled_from(BLOCKS))
    return Inputs(lambda: (rows, cols, block), f"rows={rows}, cols={cols}, block={block}")


def _idle_threads(rows: int, cols: int, block: tuple[int, int]) -> int:
    grid_x, grid_y = math.ceil(cols / block[0]), math.ceil(rows / block[1])  # section 3's grid
    return grid_x * block[0] * grid_y * block[1] - rows * cols


IDLE_THREADS = Exercise(
    "03.1 idle_threads", "idle_threads(rows, cols, block): how many launched threads fail the bounds check",
    _idle_threads, _idle_inputs(), examples=(60, 200),
    families={"edges": lambda: [case("rows=1, cols=1, block=(1, 256)", 1, 1, (1, 256)),
                                case("rows=100000, cols=1, block=(128, 1)", 100_000, 1, (128, 1)),
                                case("rows=33, cols=17, block=(16, 16)", 33, 17, (16, 16))]})

BAD_INPUTS = ("float64", "float16", "1-D", "3-D") + (("on the CPU",) if HAS_CUDA else ())


@st.composite
def _strided_inputs(draw) -> Inputs:
    cap = pick_size(3000, 300)
    rows, cols = draw(sizes(cap, 16)), draw(sizes(cap, 16))
    bad = None if draw(st.integers(0, 3)) < 3 else draw(st.sampled_from(BAD_INPUTS))  # 1 case in 4 is bad
    if bad is None:
        m, about = tensor_arg(draw, "m", (rows, cols), torch.float32, LAYOUTS)
        return Inputs(lambda: (m(),), about)
    shape = {"1-D": (cols,), "3-D": (2, rows, cols)}.get(bad, (rows, cols))
    dtype = {"float64": torch.float64, "float16": torch.float16}.get(bad, torch.float32)
    make = lambda: (guarded_tensor(shape, dtype).to("cpu" if bad == "on the CPU" else DEVICE),)  # noqa: E731
    return Inputs(make, describe("m", make()[0]) + f" (bad input: {bad})")


def _square_strided(m: torch.Tensor) -> torch.Tensor:
    if m.device.type != DEVICE.type:  # the C++ wrapper's TORCH_CHECK_TYPE: a TypeError (require_tensors: ValueError)
        raise TypeError(f"square_strided: m must be a {DEVICE.type} tensor, got one on {m.device}")
    require_tensors(m=m, dtypes=(torch.float32,), ndim=2, max_span=None)  # any strides: 64-bit offsets
    return torch.square(m).contiguous()


SQUARE_STRIDED = Exercise(
    "03.2 square_strided", "square_strided(m): m * m into a new contiguous tensor, for a 2-D float32 m of any "
    "strides, as a CUDA kernel (and its C++ twin); TypeError/ValueError for any other input",
    _square_strided, _strided_inputs(), (torch.float32,), examples=(30, 100), layout="contiguous", isolate=True,
    families={"empty": lambda: [case(described("m", t), values(t)) for t in (randn(0, 5), randn(7, 0))],
              "nonfinite": lambda: [case(described("m", t) + " with a row of inf and NaN", values(t))
                                    for t in [torch.cat([randn(3, 5), torch.tensor([[math.inf, -math.inf, math.nan,
                                                                                     1e30, -0.0]])])]],
              "programs": lambda: [case(described("m", t, "transposed"), values(t.t().contiguous().t()))
                                   for t in [randn(70, 37, seed=3)]]})


def build_square_strided(wrapper: str, cuda: str, twin: str):
    """Build the three sources of exercise 2 and return their ``square_strided``; None while one says TODO.

    On a GPU: ``wrapper`` (C++, with ``kDevice`` = CUDA) and ``cuda`` (the kernel and
    ``launch_square_strided``). On a CPU: nvcc compiles ``cuda`` (if nvcc is installed), and ``wrapper``
    (``kDevice`` = CPU) is built with ``twin``, the launcher written as C++ loops.
    """
    if any("TODO" in source for source in (wrapper, cuda, twin)):
        return None
    if HAS_CUDA:
        return build_extension("ex03_square_strided", "constexpr auto kDevice = c10::DeviceType::CUDA;\n" + wrapper,
                               cuda, ["square_strided"]).square_strided
    try:
        compile_cuda(cuda)  # the CUDA version must compile, even where it cannot run
    except ToolchainError:
        print("(nvcc is not installed here: the CUDA source was not compiled; the C++ twin is graded)")
    cpp = "constexpr auto kDevice = c10::DeviceType::CPU;\n" + wrapper + twin
    return build_extension("ex03_square_strided_twin", cpp, functions=["square_strided"]).square_strided
