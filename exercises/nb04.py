"""Notebook 04 (the GEMM ladder): a tile's arithmetic intensity, shared-memory wavefronts, waves of blocks,
and rung 4 (1D register blocking) as a CUDA kernel and its C++ twin."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from course_utils.cuda_build import ToolchainError, build_extension, compile_cuda
from course_utils.device import HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, randn, sizes, tensor_arg, values

_TILES = (1, 2, 3, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512)


@st.composite
def _tile_inputs(draw) -> Inputs:
    bm, bn = draw(st.sampled_from(_TILES)), draw(st.sampled_from(_TILES))
    return Inputs(lambda: (bm, bn), f"bm={bm}, bn={bn}")


TILE_INTENSITY = Exercise(
    "04.1 tile_intensity", "tile_intensity(bm, bn): FLOP per byte of global traffic of a bm x bn FP32 block tile",
    lambda bm, bn: 2 * bm * bn / (4 * (bm + bn)), _tile_inputs(), rtol=1e-9, examples=(40, 100),
    families={"edges": lambda: [case("bm=1, bn=1", 1, 1), case("bm=512, bn=1", 512, 1)]})


@st.composite
def _store_inputs(draw) -> Inputs:
    pitch = draw(st.one_of(st.sampled_from((128, 132, 129, 136, 144, 160)), st.integers(1, 300)))
    q = draw(st.integers(0, 3))
    return Inputs(lambda: (pitch, q), f"pitch={pitch}, q={q}")


def _wavefronts(pitch: int, q: int = 0) -> int:
    words = {(4 * (lane % 2) + q) * pitch + lane // 2 for lane in range(32)}  # As[c + q][r], c = 4 (i % 2), r = i // 2
    return max(sum(1 for w in words if w % 32 == bank) for bank in range(32))


STORE_WAVEFRONTS = Exercise(
    "04.2 transposed_store_wavefronts", "transposed_store_wavefronts(pitch, q): shared-memory wavefronts of one warp's "
    "transposed store As[c + q][r] with a row pitch of `pitch` floats", _wavefronts, _store_inputs(),
    examples=(40, 100), families={"edges": lambda: [case("pitch=1, q=0", 1, 0), case("pitch=32, q=3", 32, 3),
                                                    case("pitch=33, q=0", 33, 0)]})


@st.composite
def _wave_inputs(draw) -> Inputs:
    bm, bn = draw(st.sampled_from(((128, 128), (128, 256), (64, 64), (256, 128))))
    per_sm = draw(st.sampled_from((1, 2, 3)))
    sms = draw(st.sampled_from((132, 108, 40)))
    # tile counts whose products fill whole waves (132 = 11 x 12, 264 = 33 x 8 ...), and sizes with ragged edges
    tiles_m = draw(st.sampled_from((1, 2, 11, 12, 33, 66, 132)))
    tiles_n = draw(st.sampled_from((1, 2, 4, 8, 9, 12, 24)))
    m = tiles_m * bm - draw(st.sampled_from((0, 1, bm // 2, bm - 1)))
    n = tiles_n * bn - draw(st.sampled_from((0, 1, bn // 2, bn - 1)))
    about = f"m={m}, n={n}, bm={bm}, bn={bn}, blocks_per_sm={per_sm}, sms={sms}"
    return Inputs(lambda: (m, n, bm, bn, per_sm, sms), about)


def _waves(m: int, n: int, bm: int, bn: int, blocks_per_sm: int, sms: int = 132) -> tuple[int, float]:
    blocks, slots = math.ceil(m / bm) * math.ceil(n / bn), blocks_per_sm * sms
    rounds = math.ceil(blocks / slots)
    return rounds, (blocks - (rounds - 1) * slots) / slots


WAVES = Exercise(
    "04.3 waves", "waves(m, n, bm, bn, blocks_per_sm, sms=132): (rounds of blocks, fraction of the last round's "
    "slots that are busy)", _waves, _wave_inputs(), rtol=1e-9, examples=(40, 100), returns=("rounds", "busy share"),
    families={"edges": lambda: [case("m=1, n=1, bm=128, bn=128, blocks_per_sm=1, sms=132", 1, 1, 128, 128, 1, 132),
                                case("m=1536, n=1408, bm=128, bn=128, blocks_per_sm=1, sms=132 (one full wave)",
                                     1536, 1408, 128, 128, 1, 132)]})

#: Given: the PyTorch-facing wrapper of rung 4 (input checks, the output), for the CUDA build and the twin.
RUNG4_WRAPPER = r"""
std::string launch_rung4(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c);  // yours

torch::Tensor gemm_rung4(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK_TYPE(a.device().type() == kDevice && b.device().type() == kDevice,
                   "gemm_rung4: a and b must be on ", kDevice);
  TORCH_CHECK_TYPE(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat,
                   "gemm_rung4: a and b must be float32");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "gemm_rung4: need a (M x K) and b (K x N)");
  TORCH_CHECK_VALUE(a.numel() < INT_MAX && b.numel() < INT_MAX && a.size(0) * b.size(1) < INT_MAX,
                    "gemm_rung4: too big for int indexing");
  a = a.contiguous(); b = b.contiguous();
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  if (c.numel() == 0) return c;
  if (a.size(1) == 0) return c.zero_();
  std::string err = launch_rung4(a, b, c);
  TORCH_CHECK(err.empty(), "gemm_rung4: kernel launch failed: ", err);
  return c;
}
"""


@st.composite
def _rung4_inputs(draw) -> Inputs:
    cap = pick_size(1100, 150)
    m, n, k = draw(sizes(cap, 64)), draw(sizes(cap, 64)), draw(sizes(cap, 8))
    a, about_a = tensor_arg(draw, "a", (m, k), torch.float32, ("contiguous", "transposed", "offset"))
    b, about_b = tensor_arg(draw, "b", (k, n), torch.float32, ("contiguous", "sliced"), seed=1)
    return Inputs(lambda: (a(), b()), f"{about_a}, {about_b}")


RUNG4 = Exercise(
    "04.4 gemm_rung4", "gemm_rung4(a, b): a @ b in FP32 with rung 4's kernel (64 x 64 block tile, BK = 8, 8 values "
    "of a column of C per thread) for any M, N, K", lambda a, b: (a.double() @ b.double()).float(), _rung4_inputs(),
    (torch.float32,), rtol=1e-4, atol=1e-3, examples=(25, 100), isolate=True, layout="contiguous",
    families={"empty": lambda: [case(f"{described('a', a)}, {described('b', b)}", values(a), values(b))
                                for a, b in ((randn(5, 0), randn(0, 7)), (randn(0, 9), randn(9, 4)))],
              "programs": lambda: [case(f"{described('a', a)}, {described('b', b)} (3 block tiles each way)",
                                        values(a), values(b)) for a, b in [(randn(131, 9, seed=1), randn(9, 130))]]})


def build_rung4(cuda: str, twin: str):
    """Build exercise 4's sources with `RUNG4_WRAPPER`; return ``gemm_rung4``, or None while one says TODO.

    On a GPU ``cuda`` (the kernel and ``launch_rung4``) is built and run; on a CPU nvcc compiles it (if
    installed) and ``twin`` (``launch_rung4`` as C++ loops over blocks and threads) is built and run.
    """
    if "TODO" in cuda or "TODO" in twin:
        return None
    cuda = "#include <c10/cuda/CUDAStream.h>\n#include <string>\n" + cuda  # getCurrentCUDAStream, std::string
    if HAS_CUDA:
        cpp = "constexpr auto kDevice = c10::DeviceType::CUDA;\n" + RUNG4_WRAPPER
        return build_extension("ex04_rung4", cpp, cuda, ["gemm_rung4"]).gemm_rung4
    try:
        compile_cuda(cuda)
    except ToolchainError:
        print("(nvcc is not installed here: the CUDA source was not compiled; the C++ twin is graded)")
    cpp = "constexpr auto kDevice = c10::DeviceType::CPU;\n" + RUNG4_WRAPPER + twin
    return build_extension("ex04_rung4_twin", cpp, functions=["gemm_rung4"]).gemm_rung4
