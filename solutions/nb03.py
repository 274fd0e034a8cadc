"""Solutions of notebook 03's exercises: idle_threads, and square_strided (CUDA, its C++ twin, input checks)."""

from __future__ import annotations

import math

# ---- Exercise 1 -------------------------------------------------------------------------------------------
def idle_threads(rows: int, cols: int, block: tuple[int, int]) -> int:
    gx, gy = math.ceil(cols / block[0]), math.ceil(rows / block[1])
    return gx * block[0] * gy * block[1] - rows * cols


# ---- Exercise 2: square_strided ---------------------------------------------------------------------------
STRIDED_WRAPPER = r"""
std::string launch_square_strided(const torch::Tensor& in, torch::Tensor& out);  // cuda.cu or the twin

torch::Tensor square_strided(torch::Tensor m) {
    TORCH_CHECK_TYPE(m.device().type() == kDevice, "square_strided: m must be on ", kDevice, ", got ", m.device());
    TORCH_CHECK_TYPE(m.scalar_type() == torch::kFloat32, "square_strided: m must be float32, got ", m.scalar_type());
    TORCH_CHECK_VALUE(m.dim() == 2, "square_strided: m must be 2-D, got ", m.dim(), "-D");
    TORCH_CHECK_VALUE(m.size(0) <= INT_MAX && m.size(1) <= INT_MAX, "square_strided: sides must fit an int");
    auto out = torch::empty({m.size(0), m.size(1)}, m.options());  // contiguous, whatever m's layout
    if (m.numel() == 0) return out;
    std::string err = launch_square_strided(m, out);
    TORCH_CHECK(err.empty(), "square_strided: kernel launch failed: ", err);
    return out;
}
"""

STRIDED_CUDA = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <string>

__global__ void square_strided_kernel(const float* __restrict__ in, float* __restrict__ out, int rows,
                                      int cols, int64_t stride0, int64_t stride1) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows && col < cols) {
        float v = in[row * stride0 + col * stride1];          // int64 arithmetic: no overflow
        out[(int64_t)row * cols + col] = v * v;
    }
}

std::string launch_square_strided(const torch::Tensor& in, torch::Tensor& out) {
    c10::cuda::CUDAGuard guard(in.device());
    dim3 block(16, 16), grid((in.size(1) + 15) / 16, (in.size(0) + 15) / 16);
    square_strided_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
        in.data_ptr<float>(), out.data_ptr<float>(), in.size(0), in.size(1), in.stride(0), in.stride(1));
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? "" : cudaGetErrorString(err);
}
"""

STRIDED_TWIN = r"""
std::string launch_square_strided(const torch::Tensor& in, torch::Tensor& out) {
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t row = 0; row < in.size(0); ++row)           // the grid and the block, as loops
        for (int64_t col = 0; col < in.size(1); ++col) {
            float v = src[row * in.stride(0) + col * in.stride(1)];
            dst[row * in.size(1) + col] = v * v;
        }
    return "";
}
"""


def square_strided():
    """Build the sources above (exercises.nb03.build_square_strided) and return the function."""
    from exercises.nb03 import build_square_strided

    return build_square_strided(STRIDED_WRAPPER, STRIDED_CUDA, STRIDED_TWIN)
