"""Solutions of notebook 04's exercises: tile_intensity, transposed_store_wavefronts, waves, and rung 4 as a
CUDA kernel with its C++ twin."""

from __future__ import annotations

import math


# ---- Exercise 1 -------------------------------------------------------------------------------------------
def tile_intensity(bm: int, bn: int) -> float:
    flops_per_k = 2 * bm * bn          # an outer product of a bm column of A and a bn row of B
    bytes_per_k = 4 * (bm + bn)        # that column and that row, in FP32
    return flops_per_k / bytes_per_k


# ---- Exercise 2 -------------------------------------------------------------------------------------------
def transposed_store_wavefronts(pitch: int, q: int = 0) -> int:
    words = {(4 * (lane % 2) + q) * pitch + lane // 2 for lane in range(32)}
    per_bank: dict[int, int] = {}
    for w in words:                    # distinct words per bank: the same word twice is one access
        per_bank[w % 32] = per_bank.get(w % 32, 0) + 1
    return max(per_bank.values())


# ---- Exercise 3 -------------------------------------------------------------------------------------------
def waves(m: int, n: int, bm: int, bn: int, blocks_per_sm: int, sms: int = 132) -> tuple[int, float]:
    blocks = math.ceil(m / bm) * math.ceil(n / bn)
    slots = blocks_per_sm * sms
    rounds = math.ceil(blocks / slots)
    last = blocks - (rounds - 1) * slots
    return rounds, last / slots


# ---- Exercise 4: rung 4 ---------------------------------------------------------------------------------------
RUNG4_CUDA = r"""
// 64 x 64 block tile, BK = 8, 512 threads; each thread computes TM = 8 values of one column of C.
__global__ void __launch_bounds__(512, 2)
gemm_rung4_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int BM = 64, BN = 64, BK = 8, TM = 8, THREADS = BM * BN / TM;
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int tcol = threadIdx.x % BN, trow = threadIdx.x / BN;
  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      const int r = i / BK, c = i % BK;
      As[r][c] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.f;   // zero-pad the edges
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
      const int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.f;
    }
    __syncthreads();
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][tcol];                       // one shared load serves TM FMAs
      for (int i = 0; i < TM; ++i) acc[i] += As[trow * TM + i][k] * b;
    }
    __syncthreads();
  }
  for (int i = 0; i < TM; ++i) {
    const int r = bm + trow * TM + i, c = bn + tcol;
    if (r < M && c < N) C[(size_t)r * N + c] = acc[i];
  }
}

std::string launch_rung4(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  dim3 grid((N + 63) / 64, (M + 63) / 64), block(512);
  gemm_rung4_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? "" : cudaGetErrorString(err);
}
"""

RUNG4_TWIN = r"""
// The CUDA kernel's loops written out: blocks (bm, bn), steps of K, and every thread (trow, tcol).
std::string launch_rung4(const torch::Tensor& a, const torch::Tensor& b, torch::Tensor& c) {
  constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
  const float *A = a.data_ptr<float>(), *B = b.data_ptr<float>();
  float* C = c.data_ptr<float>();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  float As[BM][BK], Bs[BK][BN], acc[BM / TM][BN][TM];  // shared memory, and every thread's registers
  for (int64_t bm = 0; bm < M; bm += BM)
    for (int64_t bn = 0; bn < N; bn += BN) {                // one CUDA block
      std::fill(&acc[0][0][0], &acc[0][0][0] + BM * BN, 0.f);
      for (int64_t k0 = 0; k0 < K; k0 += BK) {
        for (int r = 0; r < BM; ++r)                         // the block's loads, zero-padded
          for (int cc = 0; cc < BK; ++cc) As[r][cc] = (bm + r < M && k0 + cc < K) ? A[(bm + r) * K + k0 + cc] : 0.f;
        for (int r = 0; r < BK; ++r)
          for (int cc = 0; cc < BN; ++cc) Bs[r][cc] = (k0 + r < K && bn + cc < N) ? B[(k0 + r) * N + bn + cc] : 0.f;
        for (int trow = 0; trow < BM / TM; ++trow)           // __syncthreads(), then every thread
          for (int tcol = 0; tcol < BN; ++tcol)
            for (int k = 0; k < BK; ++k) {
              const float bv = Bs[k][tcol];
              for (int i = 0; i < TM; ++i) acc[trow][tcol][i] += As[trow * TM + i][k] * bv;
            }
      }
      for (int trow = 0; trow < BM / TM; ++trow)
        for (int tcol = 0; tcol < BN; ++tcol)
          for (int i = 0; i < TM; ++i) {
            const int64_t r = bm + trow * TM + i, col = bn + tcol;
            if (r < M && col < N) C[r * N + col] = acc[trow][tcol][i];
          }
    }
  return "";
}
"""


def gemm_rung4():
    """Build the sources above (exercises.nb04.build_rung4) and return the function."""
    from exercises.nb04 import build_rung4

    return build_rung4(RUNG4_CUDA, RUNG4_TWIN)
