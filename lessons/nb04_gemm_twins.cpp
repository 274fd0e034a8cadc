// The C++ twins of rungs 1 and 3: the same loops as the CUDA kernels, run on a CPU (built C++-only).
#include <torch/extension.h>
#include <algorithm>

static void check_inputs(const torch::Tensor& a, const torch::Tensor& b) {
  TORCH_CHECK_TYPE(a.device().is_cpu() && b.device().is_cpu(), "the C++ twins need CPU tensors");
  TORCH_CHECK_TYPE(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat, "a and b must be float32");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "need a (M x K) and b (K x N)");
}

// Twin of rung 1: the body of one CUDA thread is the body of the two outer loops.
torch::Tensor gemm_naive_cpu(torch::Tensor a, torch::Tensor b) {
  check_inputs(a, b);
  a = a.contiguous(); b = b.contiguous();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  const float *A = a.data_ptr<float>(), *B = b.data_ptr<float>();
  float* C = c.data_ptr<float>();
  for (int64_t row = 0; row < M; ++row)
    for (int64_t col = 0; col < N; ++col) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
      C[row * N + col] = acc;
    }
  return c;
}

// Twin of rung 3: loop over 32 x 32 blocks of C; for each step of K, copy zero-padded 32 x 32
// tiles of A and B into small arrays (the block's shared memory), then multiply the tiles.
torch::Tensor gemm_tiled_cpu(torch::Tensor a, torch::Tensor b) {
  check_inputs(a, b);
  a = a.contiguous(); b = b.contiguous();
  constexpr int T = 32;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  const float *A = a.data_ptr<float>(), *B = b.data_ptr<float>();
  float* C = c.data_ptr<float>();
  float As[T][T], Bs[T][T], acc[T][T];
  for (int64_t bm = 0; bm < M; bm += T)
    for (int64_t bn = 0; bn < N; bn += T) {            // one CUDA block
      std::fill(&acc[0][0], &acc[0][0] + T * T, 0.f);
      for (int64_t k0 = 0; k0 < K; k0 += T) {
        for (int ty = 0; ty < T; ++ty)                   // every thread (ty, tx) loads one element
          for (int tx = 0; tx < T; ++tx) {
            As[ty][tx] = (bm + ty < M && k0 + tx < K) ? A[(bm + ty) * K + k0 + tx] : 0.f;
            Bs[ty][tx] = (k0 + ty < K && bn + tx < N) ? B[(k0 + ty) * N + bn + tx] : 0.f;
          }
        for (int ty = 0; ty < T; ++ty)                   // __syncthreads(), then every thread
          for (int k = 0; k < T; ++k)                    // accumulates its dot product
            for (int tx = 0; tx < T; ++tx) acc[ty][tx] += As[ty][k] * Bs[k][tx];
      }
      for (int ty = 0; ty < T; ++ty)
        for (int tx = 0; tx < T; ++tx)
          if (bm + ty < M && bn + tx < N) C[(bm + ty) * N + bn + tx] = acc[ty][tx];
    }
  return c;
}
