"""Exported from notebooks/03_cuda_kernels_load_inline.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import course_utils as cu
from course_utils import cuda_build

KERNEL_SRC = r"""
// One thread per element of a rows x cols row-major matrix.
__global__ void square_matrix_kernel(const float* __restrict__ in, float* __restrict__ out,
                                     int rows, int cols) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows && col < cols) {   // the grid overhangs the matrix: those threads do nothing
        float v = in[row * cols + col];
        out[row * cols + col] = v * v;
    }
}
"""


WRAPPER_SRC = r"""
// Reject what the kernel cannot handle, with a message that says what to do.
static void check_input(const torch::Tensor& m) {
    TORCH_CHECK_TYPE(m.device().type() == kDevice, "square_matrix: m must be a ",
                     c10::DeviceTypeName(kDevice, /*lower_case=*/true), " tensor, got one on ", m.device());
    TORCH_CHECK_TYPE(m.scalar_type() == torch::kFloat32, "square_matrix: m must be float32, got ",
                     m.scalar_type());
    TORCH_CHECK_VALUE(m.dim() == 2, "square_matrix: m must be 2-D, got ", m.dim(), "-D");
    TORCH_CHECK_VALUE(m.is_contiguous(), "square_matrix: m must be contiguous, got strides ",
                      m.strides(), "; call .contiguous() first");
    TORCH_CHECK_VALUE(m.numel() <= INT_MAX, "square_matrix: more than 2^31 - 1 elements overflow int indexing");
}

// Defined in cuda.cu (or by the C++ twin): launch the kernel, return "" or the launch error.
std::string launch_square_matrix(const torch::Tensor& in, torch::Tensor& out, int64_t block_x, int64_t block_y);

torch::Tensor square_matrix_block(torch::Tensor m, int64_t block_x, int64_t block_y) {
    check_input(m);
    // a block of 0 threads would divide by zero in the grid's size; dim3 keeps only 32 bits of a larger one
    TORCH_CHECK_VALUE(block_x >= 1 && block_y >= 1 && block_x <= 1024 && block_y <= 1024,
                      "square_matrix: block_x and block_y must be 1 to 1024, got ", block_x, " and ", block_y);
    auto out = torch::empty_like(m);
    if (m.numel() == 0) return out;                      // a grid of 0 blocks is an error
    std::string err = launch_square_matrix(m, out, block_x, block_y);
    TORCH_CHECK(err.empty(), "square_matrix: kernel launch failed: ", err);
    return out;
}

torch::Tensor square_matrix(torch::Tensor m) { return square_matrix_block(m, 16, 16); }
"""


LAUNCH_SRC = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <string>

std::string launch_square_matrix(const torch::Tensor& in, torch::Tensor& out, int64_t block_x, int64_t block_y) {
    c10::cuda::CUDAGuard guard(in.device());            // launch on the tensor's GPU
    const int rows = in.size(0), cols = in.size(1);
    dim3 block(block_x, block_y);
    dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
    auto stream = c10::cuda::getCurrentCUDAStream();    // PyTorch's current stream
    square_matrix_kernel<<<grid, block, 0, stream>>>(in.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    cudaError_t err = cudaGetLastError();               // did the launch itself fail?
    if (err == cudaSuccess) return "";
    return std::string(cudaGetErrorString(err)) + " (grid " + std::to_string(grid.x) + "x" +
           std::to_string(grid.y) + ", block " + std::to_string(block.x) + "x" + std::to_string(block.y) + ")";
}
"""


TWIN_LAUNCH_SRC = r"""
std::string launch_square_matrix(const torch::Tensor& in, torch::Tensor& out, int64_t block_x, int64_t block_y) {
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int rows = in.size(0), cols = in.size(1);
    const int grid_x = (cols + block_x - 1) / block_x, grid_y = (rows + block_y - 1) / block_y;
    if (block_x < 1 || block_y < 1 || block_x * block_y > 1024)   // what CUDA refuses to launch
        return "invalid configuration argument (grid " + std::to_string(grid_x) + "x" + std::to_string(grid_y) +
               ", block " + std::to_string(block_x) + "x" + std::to_string(block_y) + ")";
    for (int by = 0; by < grid_y; ++by)                  // blockIdx.y
      for (int bx = 0; bx < grid_x; ++bx)                // blockIdx.x
        for (int ty = 0; ty < block_y; ++ty)             // threadIdx.y
          for (int tx = 0; tx < block_x; ++tx) {         // threadIdx.x
            int row = by * block_y + ty, col = bx * block_x + tx;
            if (row < rows && col < cols) {
                float v = src[row * cols + col];
                dst[row * cols + col] = v * v;
            }
          }
    return "";
}
"""
FUNCTIONS = ["square_matrix", "square_matrix_block"]


def build_square_matrix():
    """The square_matrix module: the CUDA build on a GPU; elsewhere nvcc compiles the CUDA source (so a
    broken kernel fails here too) and the wrapper is built with the C++ twin of the launcher."""
    if cu.HAS_CUDA:
        return cuda_build.build_extension("square_matrix", "constexpr auto kDevice = c10::DeviceType::CUDA;\n"
                                          + WRAPPER_SRC, KERNEL_SRC + LAUNCH_SRC, FUNCTIONS)
    try:
        cuda_build.compile_cuda(KERNEL_SRC + LAUNCH_SRC, arch="sm_90")
    except cuda_build.ToolchainError as err:  # no nvcc here: the twin still runs
        print(f"(the CUDA source was not compiled: {err})")
    return cuda_build.build_extension("square_matrix_twin", "constexpr auto kDevice = c10::DeviceType::CPU;\n"
                                      + WRAPPER_SRC + TWIN_LAUNCH_SRC, functions=FUNCTIONS)
