// Notebook 04's FP32 GEMM ladder, every kernel in one file. Each rung is a section of this file,
// from a line "// rung N" to a line "// rung N:end", so that the notebook shows one rung at a time:
//   from course_utils.export import show; show("lessons/nb04_gemm.cu", section="rung N")
// Every kernel: row-major A (M x K), B (K x N), C (M x N) in FP32; C = A @ B, correct for any M, N, K.
// The notebook builds the whole file as one extension (load_inline, through build_extension); the
// Python side (the wrapper, the labels of the shapes) is lessons/nb04_gemm.py.

// common helpers
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// Four consecutive floats p[row * cols + col ...], zero outside the rows x cols matrix.
// VEC: cols % 4 == 0 and p is 16-byte aligned, so one float4 load reads all four (all in or all out).
template <bool VEC>
__device__ __forceinline__ float4 load4(const float* p, int row, int col, int rows, int cols) {
  if constexpr (VEC) {
    if (row < rows && col < cols) return *reinterpret_cast<const float4*>(p + (size_t)row * cols + col);
    return make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = (row < rows && col + i < cols) ? p[(size_t)row * cols + col + i] : 0.f;
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

template <bool VEC>
__device__ __forceinline__ void store4(float* p, int row, int col, int rows, int cols, float4 v) {
  if (row >= rows) return;
  if constexpr (VEC) {
    if (col < cols) *reinterpret_cast<float4*>(p + (size_t)row * cols + col) = v;
  } else {
    const float w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) if (col + i < cols) p[(size_t)row * cols + col + i] = w[i];
  }
}
// common helpers:end

// rung 1
// Rung 1: one thread per element of C. threadIdx.x walks down a column of C, so the 32 threads
// of a warp read 32 different rows of A: 32 separate memory transactions per load.
__global__ void gemm_naive(const float* A, const float* B, float* C, int M, int N, int K) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  const int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
  }
}
// rung 1:end

// rung 2
// Rung 2: the same arithmetic, but threadIdx.x walks along a row of C. A warp now reads one
// element of A (a broadcast) and 32 neighbouring elements of B (one 128-byte transaction).
__global__ void gemm_coalesced(const float* A, const float* B, float* C, int M, int N, int K) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < M && col < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
  }
}
// rung 2:end

// rung 3
// Rung 3: a 32 x 32 block stages 32 x 32 tiles of A and B in shared memory; each value loaded
// from global memory is then used by 32 threads instead of one.
template <int TILE>
__global__ void gemm_smem(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;  // zero-pad the edges
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
// rung 3:end

// rung 4
// Rung 4: each thread computes TM = 8 elements of a column of C. One value of B, read once from
// shared memory into a register, serves 8 multiply-adds: fewer shared-memory loads per FMA.
template <int BM, int BN, int BK, int TM, int MINB>
__global__ void __launch_bounds__(BM * BN / TM, MINB)
gemm_1d_blocktiling(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int THREADS = BM * BN / TM;
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int tcol = threadIdx.x % BN, trow = threadIdx.x / BN;  // rows trow * TM ... + TM - 1
  float acc[TM] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      const int r = i / BK, c = i % BK;
      As[r][c] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
      const int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float b = Bs[k][tcol];
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] += As[trow * TM + i][k] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = bm + trow * TM + i, c = bn + tcol;
    if (r < M && c < N) C[(size_t)r * N + c] = acc[i];
  }
}
// rung 4:end

// rung 5
// Rung 5: each thread computes a TM x TN = 8 x 8 tile of C as outer products of 8 values of A
// and 8 of B held in registers: 16 shared-memory loads feed 64 FMAs.
template <int BM, int BN, int BK, int TM, int TN, int MINB>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
gemm_2d_blocktiling(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  __shared__ float As[BM][BK];
  __shared__ float Bs[BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
  float acc[TM][TN] = {};
  float a[TM], b[TN];
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK; i += THREADS) {
      const int r = i / BK, c = i % BK;
      As[r][c] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.f;
    }
    for (int i = threadIdx.x; i < BK * BN; i += THREADS) {
      const int r = i / BN, c = i % BN;
      Bs[r][c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[trow * TM + i][k];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int r = bm + trow * TM + i, c = bn + tcol * TN + j;
      if (r < M && c < N) C[(size_t)r * N + c] = acc[i][j];
    }
}
// rung 5:end

// rung 6
// Rung 6: rung 5 with 16-byte accesses. Global loads and stores move float4s (LDG.128/STG.128),
// and A's tile is stored transposed, As[k][m], so a thread's 8 values of A for one k are
// contiguous and come out of shared memory as two float4s, like B's.
template <int BM, int BN, int BK, int TM, int TN, int MINB, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
gemm_vectorized(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  __shared__ __align__(16) float As[BK][BM];
  __shared__ __align__(16) float Bs[BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int trow = threadIdx.x / (BN / TN), tcol = threadIdx.x % (BN / TN);
  float acc[TM][TN] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK / 4; i += THREADS) {
      const int r = i / (BK / 4), c = i % (BK / 4) * 4;
      const float4 v = load4<VEC>(A, bm + r, k0 + c, M, K);
      As[c + 0][r] = v.x; As[c + 1][r] = v.y; As[c + 2][r] = v.z; As[c + 3][r] = v.w;
    }
    for (int i = threadIdx.x; i < BK * BN / 4; i += THREADS) {
      const int r = i / (BN / 4), c = i % (BN / 4) * 4;
      *reinterpret_cast<float4*>(&Bs[r][c]) = load4<VEC>(B, k0 + r, bn + c, K, N);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k][trow * TM + i]);
        a[i] = v.x; a[i + 1] = v.y; a[i + 2] = v.z; a[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < TN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k][tcol * TN + j]);
        b[j] = v.x; b[j + 1] = v.y; b[j + 2] = v.z; b[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; j += 4)
      store4<VEC>(C, bm + trow * TM + i, bn + tcol * TN + j, M, N,
                  make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]));
}
// rung 6:end

// rung 7
// Rung 7: the same 128 x 128 block tile and 8 x 8 values per thread, but arranged for the warp.
// A thread's 8 x 8 is four 4 x 4 pieces, 64 rows / columns apart, and the 32 lanes of a warp form
// an 8 x 4 grid. Each float4 read from shared memory is then shared by lanes of the same
// row (A) or column (B): a warp's read touches only 128 contiguous bytes, one shared-memory cycle.
// The block's 8 warps sit as 2 x 4 over the 16 x 16 grid of threads.
struct WarpTile {
  int ty, tx;  // this thread's place in the 16 x 16 grid: rows ty*4 (+64), columns tx*4 (+64)
  __device__ WarpTile() {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    ty = (warp / 4) * 8 + lane / 4;
    tx = (warp % 4) * 4 + lane % 4;
  }
};

// acc += (BK x 8 slice of the A tile)^T x (BK x 8 slice of the B tile) for this thread.
template <int BK>
__device__ __forceinline__ void mma_8x8(const float (*As)[128], const float (*Bs)[128], const WarpTile& t,
                                        float (&acc)[8][8]) {
#pragma unroll
  for (int k = 0; k < BK; ++k) {
    const float4 a0 = *reinterpret_cast<const float4*>(&As[k][t.ty * 4]);
    const float4 a1 = *reinterpret_cast<const float4*>(&As[k][t.ty * 4 + 64]);
    const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][t.tx * 4]);
    const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][t.tx * 4 + 64]);
    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
  }
}

template <bool VEC>
__device__ __forceinline__ void store_8x8(float* C, int bm, int bn, int M, int N, const WarpTile& t,
                                          const float (&acc)[8][8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = bm + t.ty * 4 + (i / 4) * 64 + i % 4;
    store4<VEC>(C, r, bn + t.tx * 4, M, N, make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
    store4<VEC>(C, r, bn + t.tx * 4 + 64, M, N, make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]));
  }
}

template <int BK, bool VEC>
__global__ void __launch_bounds__(256, 2)
gemm_warptiling(const float* A, const float* B, float* C, int M, int N, int K) {
  __shared__ __align__(16) float As[BK][128];
  __shared__ __align__(16) float Bs[BK][128];
  const int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
  const WarpTile t;
  float acc[8][8] = {};
  for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
    for (int i = threadIdx.x; i < 128 * BK / 4; i += 256) {
      const int r = i / (BK / 4), c = i % (BK / 4) * 4;
      const float4 v = load4<VEC>(A, bm + r, k0 + c, M, K);
      As[c + 0][r] = v.x; As[c + 1][r] = v.y; As[c + 2][r] = v.z; As[c + 3][r] = v.w;
    }
#pragma unroll
    for (int i = threadIdx.x; i < BK * 128 / 4; i += 256) {
      const int r = i / 32, c = i % 32 * 4;
      *reinterpret_cast<float4*>(&Bs[r][c]) = load4<VEC>(B, k0 + r, bn + c, K, N);
    }
    __syncthreads();
    mma_8x8<BK>(As, Bs, t, acc);
    __syncthreads();
  }
  store_8x8<VEC>(C, bm, bn, M, N, t, acc);
}
// rung 7:end

// rung 8
// Rung 8: two shared-memory buffers. While the block multiplies the tile in one buffer, each
// thread already has the next tile's global loads in flight (into registers); it stores them in
// the other buffer afterwards. The load latency hides behind the FMAs, one __syncthreads per tile.
template <int BK, bool VEC>
__global__ void __launch_bounds__(256, 2)
gemm_double_buffered(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int LOADS = 128 * BK / 4 / 256;  // float4s per thread per tile, for A and for B
  __shared__ __align__(16) float As[2][BK][128];
  __shared__ __align__(16) float Bs[2][BK][128];
  const int bm = blockIdx.y * 128, bn = blockIdx.x * 128;
  const WarpTile t;
  float acc[8][8] = {};
  float4 a_next[LOADS], b_next[LOADS];

  auto fetch = [&](int k0) {  // global -> registers
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int i = threadIdx.x + l * 256;
      a_next[l] = load4<VEC>(A, bm + i / (BK / 4), k0 + i % (BK / 4) * 4, M, K);
      b_next[l] = load4<VEC>(B, k0 + i / 32, bn + i % 32 * 4, K, N);
    }
  };
  auto stash = [&](int s) {  // registers -> shared buffer s (A transposed)
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int i = threadIdx.x + l * 256;
      const int r = i / (BK / 4), c = i % (BK / 4) * 4;
      As[s][c + 0][r] = a_next[l].x; As[s][c + 1][r] = a_next[l].y;
      As[s][c + 2][r] = a_next[l].z; As[s][c + 3][r] = a_next[l].w;
      *reinterpret_cast<float4*>(&Bs[s][i / 32][i % 32 * 4]) = b_next[l];
    }
  };

  fetch(0);
  stash(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) fetch(k0 + BK);      // in flight while we compute
    mma_8x8<BK>(As[s], Bs[s], t, acc);
    if (more) stash(s ^ 1);        // the other buffer: nobody reads it in this iteration
    __syncthreads();
    s ^= 1;
  }
  store_8x8<VEC>(C, bm, bn, M, N, t, acc);
}
// rung 8:end

// rung 9
// Rung 9: rung 8 with its shape as parameters. Each thread owns a TM x TN tile of C made of
// 4 x 4 pieces spread over the block tile; a warp's lanes form a WARP_ROWS x (32 / WARP_ROWS) grid.
// The A tile gets 4 floats of padding per row so that the transposed stores are conflict-free.
template <int BM, int BN, int BK, int TM, int TN, int WARP_ROWS, int MINB, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
gemm_tuned(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int THREADS = (BM / TM) * (BN / TN);
  constexpr int TR = BM / TM, TC = BN / TN;             // threads along M and along N
  constexpr int LANES_N = 32 / WARP_ROWS, WARPS_N = TC / LANES_N;
  constexpr int A_LOADS = BM * BK / 4 / THREADS, B_LOADS = BK * BN / 4 / THREADS;
  constexpr int APITCH = BM + 4;
  static_assert(A_LOADS >= 1 && B_LOADS >= 1 && TM % 4 == 0 && TN % 4 == 0, "bad shape");
  __shared__ __align__(16) float As[2][BK][APITCH];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = (warp / WARPS_N) * WARP_ROWS + lane / LANES_N;
  const int tx = (warp % WARPS_N) * LANES_N + lane % LANES_N;
  float acc[TM][TN] = {};
  float4 a_next[A_LOADS], b_next[B_LOADS];

  auto fetch = [&](int k0) {
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      a_next[l] = load4<VEC>(A, bm + i / (BK / 4), k0 + i % (BK / 4) * 4, M, K);
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      b_next[l] = load4<VEC>(B, k0 + i / (BN / 4), bn + i % (BN / 4) * 4, K, N);
    }
  };
  auto stash = [&](int s) {
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      const int r = i / (BK / 4), c = i % (BK / 4) * 4;
      As[s][c + 0][r] = a_next[l].x; As[s][c + 1][r] = a_next[l].y;
      As[s][c + 2][r] = a_next[l].z; As[s][c + 3][r] = a_next[l].w;
    }
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      *reinterpret_cast<float4*>(&Bs[s][i / (BN / 4)][i % (BN / 4) * 4]) = b_next[l];
    }
  };

  fetch(0);
  stash(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) fetch(k0 + BK);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int p = 0; p < TM / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(&As[s][k][p * 4 * TR + ty * 4]);
        a[4 * p] = v.x; a[4 * p + 1] = v.y; a[4 * p + 2] = v.z; a[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int p = 0; p < TN / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[s][k][p * 4 * TC + tx * 4]);
        b[4 * p] = v.x; b[4 * p + 1] = v.y; b[4 * p + 2] = v.z; b[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) stash(s ^ 1);
    __syncthreads();
    s ^= 1;
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int p = 0; p < TN / 4; ++p)
      store4<VEC>(C, bm + (i / 4) * 4 * TR + ty * 4 + i % 4, bn + p * 4 * TC + tx * 4, M, N,
                   make_float4(acc[i][4 * p], acc[i][4 * p + 1], acc[i][4 * p + 2], acc[i][4 * p + 3]));
}
// rung 9:end

// rung 10
// Rung 10: rung 9 with A's tile written by vector stores. Each thread loads a 2 x 4 block of A
// (rows m, m + 1; columns c ... c + 3: two float4s) and writes it transposed as four float2s,
// As[c + q][m ... m + 1]: 4 stores instead of 8. The lanes of a warp take 8 row pairs x 4 column
// groups, so every half-warp's float2 stores land in 32 different banks (the pitch BM + 4 does it).
// With BK = 16 the next tile is twice rung 9's: held whole in registers during the math, it does not
// fit the 128 registers that MINB = 2 allows, and spills. So it travels in halves: A's part is loaded
// at the top of the K step and stored halfway through, B's is loaded then and stored at the end.
template <int BM, int BN, int BK, int TM, int TN, int WARP_ROWS, int MINB, bool VEC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), MINB)
gemm_vecstore(const float* A, const float* B, float* C, int M, int N, int K) {
  constexpr int THREADS = (BM / TM) * (BN / TN), TR = BM / TM, TC = BN / TN;
  constexpr int LANES_N = 32 / WARP_ROWS, WARPS_N = TC / LANES_N;
  constexpr int CG = BK / 4, PAIRS = 32 / CG;             // a warp's column groups and row pairs of A
  constexpr int A_LOADS = BM * BK / 8 / THREADS, B_LOADS = BK * BN / 4 / THREADS, APITCH = BM + 4;
  static_assert((BK == 8 || BK == 16) && A_LOADS >= 1 && B_LOADS >= 1 && TM % 4 == 0 && TN % 4 == 0, "bad shape");
  __shared__ __align__(16) float As[2][BK][APITCH];
  __shared__ __align__(16) float Bs[2][BK][BN];
  const int bm = blockIdx.y * BM, bn = blockIdx.x * BN, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = (warp / WARPS_N) * WARP_ROWS + lane / LANES_N, tx = (warp % WARPS_N) * LANES_N + lane % LANES_N;
  float acc[TM][TN] = {};
  float4 a_next[A_LOADS][2], b_next[B_LOADS];
  auto a_row = [&](int l) { return 2 * (((threadIdx.x + l * THREADS) / 32) * PAIRS + lane % PAIRS); };
  auto fetch_a = [&](int k0) {  // global memory -> registers: A's half of the tile at k0
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l)
#pragma unroll
      for (int h = 0; h < 2; ++h) a_next[l][h] = load4<VEC>(A, bm + a_row(l) + h, k0 + lane / PAIRS * 4, M, K);
  };
  auto fetch_b = [&](int k0) {  // B's half
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      b_next[l] = load4<VEC>(B, k0 + i / (BN / 4), bn + i % (BN / 4) * 4, K, N);
    }
  };
  auto stash_a = [&](int s) {   // registers -> shared buffer s
#pragma unroll
    for (int l = 0; l < A_LOADS; ++l) {
      const float4 u = a_next[l][0], v = a_next[l][1];
      float* col = &As[s][lane / PAIRS * 4][a_row(l)];
      *reinterpret_cast<float2*>(col) = make_float2(u.x, v.x);
      *reinterpret_cast<float2*>(col + APITCH) = make_float2(u.y, v.y);
      *reinterpret_cast<float2*>(col + 2 * APITCH) = make_float2(u.z, v.z);
      *reinterpret_cast<float2*>(col + 3 * APITCH) = make_float2(u.w, v.w);
    }
  };
  auto stash_b = [&](int s) {
#pragma unroll
    for (int l = 0; l < B_LOADS; ++l) {
      const int i = threadIdx.x + l * THREADS;
      *reinterpret_cast<float4*>(&Bs[s][i / (BN / 4)][i % (BN / 4) * 4]) = b_next[l];
    }
  };
  fetch_a(0); fetch_b(0);
  stash_a(0); stash_b(0);
  __syncthreads();
  int s = 0;
  for (int k0 = 0; k0 < K; k0 += BK) {
    const bool more = k0 + BK < K;
    if (more) fetch_a(k0 + BK);  // first half of the math: only A's next part waits in registers
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k == BK / 2 && more) {  // halfway: A's part goes to the other buffer, free since the last
        // barrier (this step reads buffer s only); B's part then takes the registers A's part held
        stash_a(s ^ 1);
        fetch_b(k0 + BK);
      }
      float a[TM], b[TN];
#pragma unroll
      for (int p = 0; p < TM / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(&As[s][k][p * 4 * TR + ty * 4]);
        a[4 * p] = v.x; a[4 * p + 1] = v.y; a[4 * p + 2] = v.z; a[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int p = 0; p < TN / 4; ++p) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[s][k][p * 4 * TC + tx * 4]);
        b[4 * p] = v.x; b[4 * p + 1] = v.y; b[4 * p + 2] = v.z; b[4 * p + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
    }
    if (more) stash_b(s ^ 1);
    __syncthreads();
    s ^= 1;
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int p = 0; p < TN / 4; ++p)
      store4<VEC>(C, bm + (i / 4) * 4 * TR + ty * 4 + i % 4, bn + p * 4 * TC + tx * 4, M, N,
                  make_float4(acc[i][4 * p], acc[i][4 * p + 1], acc[i][4 * p + 2], acc[i][4 * p + 3]));
}
// rung 10:end

// rung 11
// A tile shape per problem size: rung 11 is no new kernel but a list of candidates, each compiled for
// the float4 and the scalar path; the launcher runs the one the notebook's measurement chose for the
// problem's size. lessons/nb04_gemm.py reads this list (SIZE_CONFIGS), so the two cannot disagree.
using Kernel = void (*)(const float*, const float*, float*, int, int, int);
struct SizeShape { Kernel vec, scalar; int bm, bn, threads; };
#define SHAPE(KERNEL, BM, BN, BK, TM, TN, WARP_ROWS, MINB)                                                  \
  {KERNEL<BM, BN, BK, TM, TN, WARP_ROWS, MINB, true>, KERNEL<BM, BN, BK, TM, TN, WARP_ROWS, MINB, false>, \
   BM, BN, (BM / TM) * (BN / TN)}
static const SizeShape SIZE_SHAPES[] = {
    SHAPE(gemm_vecstore, 128, 128, 16, 8, 8, 8, 2),  // 0: rung 10 itself
    SHAPE(gemm_vecstore, 128, 128, 8, 16, 8, 4, 2),  // 1: rung 9's second shape, fewer and fatter threads
    SHAPE(gemm_vecstore, 64, 128, 16, 8, 8, 8, 3),   // 2: half-height tiles, twice the blocks for smaller problems
    SHAPE(gemm_vecstore, 128, 64, 16, 8, 8, 8, 3),   // 3: half-width tiles
    SHAPE(gemm_tuned, 128, 128, 8, 8, 8, 8, 2),      // 4: rung 9 itself: scalar stores of A, BK 8
    SHAPE(gemm_tuned, 128, 128, 16, 8, 8, 8, 2),     // 5: a control, rung 9's kernel at rung 10's BK 16
};
#undef SHAPE
constexpr int N_SIZE_SHAPES = sizeof(SIZE_SHAPES) / sizeof(SIZE_SHAPES[0]);
// rung 11:end

// host code
// The host code: which kernel, grid and block each rung launches, the PyTorch-facing entry point with
// its input checks, and what the CUDA runtime says about each kernel (registers, shared memory, occupancy).
#include <torch/types.h>  // not torch/extension.h: the Python bindings are in the C++ file load_inline writes
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <vector>

struct Launch { Kernel kernel; dim3 grid, block; };

// The kernel, grid and block of each rung for an M x N output. vec: K, N multiples of 4, 16-byte aligned.
static Launch plan(int64_t rung, int64_t config, int M, int N, bool vec) {
  auto tiles = [&](int bm, int bn) { return dim3(CEIL_DIV(N, bn), CEIL_DIV(M, bm)); };
  auto pick = [&](Kernel with_float4, Kernel without) { return vec ? with_float4 : without; };
  switch (rung) {
    case 1: return {gemm_naive, dim3(CEIL_DIV(M, 32), CEIL_DIV(N, 32)), dim3(32, 32)};  // x -> rows
    case 2: return {gemm_coalesced, tiles(32, 32), dim3(32, 32)};
    case 3: return {gemm_smem<32>, tiles(32, 32), dim3(32, 32)};
    case 4: return {gemm_1d_blocktiling<64, 64, 8, 8, 2>, tiles(64, 64), dim3(512)};
    case 5: return {gemm_2d_blocktiling<128, 128, 8, 8, 8, 2>, tiles(128, 128), dim3(256)};
    case 6: return {pick(gemm_vectorized<128, 128, 8, 8, 8, 2, true>, gemm_vectorized<128, 128, 8, 8, 8, 2, false>),
                    tiles(128, 128), dim3(256)};
    case 7: return {pick(gemm_warptiling<8, true>, gemm_warptiling<8, false>), tiles(128, 128), dim3(256)};
    case 8: return {pick(gemm_double_buffered<8, true>, gemm_double_buffered<8, false>), tiles(128, 128), dim3(256)};
    case 9:
      switch (config) {
        case 0: return {pick(gemm_tuned<128, 128, 8, 8, 8, 8, 2, true>, gemm_tuned<128, 128, 8, 8, 8, 8, 2, false>), tiles(128, 128), dim3(256)};
        case 1: return {pick(gemm_tuned<128, 128, 8, 16, 8, 4, 2, true>, gemm_tuned<128, 128, 8, 16, 8, 4, 2, false>), tiles(128, 128), dim3(128)};
        case 2: return {pick(gemm_tuned<128, 256, 8, 8, 16, 8, 1, true>, gemm_tuned<128, 256, 8, 8, 16, 8, 1, false>), tiles(128, 256), dim3(256)};
      }
      TORCH_CHECK_VALUE(false, "gemm: rung 9 has configs 0..2, got ", config);
    case 10: return {pick(gemm_vecstore<128, 128, 16, 8, 8, 8, 2, true>, gemm_vecstore<128, 128, 16, 8, 8, 8, 2, false>),
                     tiles(128, 128), dim3(256)};
    case 11: {
      TORCH_CHECK_VALUE(config >= 0 && config < N_SIZE_SHAPES, "gemm: rung 11 has configs 0..", N_SIZE_SHAPES - 1, ", got ", config);
      const SizeShape& s = SIZE_SHAPES[config];
      return {pick(s.vec, s.scalar), tiles(s.bm, s.bn), dim3(s.threads)};
    }
  }
  TORCH_CHECK_VALUE(false, "gemm: rung must be 1..11, got ", rung);
  return {};
}

static bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

torch::Tensor gemm(torch::Tensor a, torch::Tensor b, int64_t rung, int64_t config) {
  TORCH_CHECK_TYPE(a.is_cuda() && b.is_cuda(), "gemm: a and b must be CUDA tensors");
  TORCH_CHECK_TYPE(a.scalar_type() == torch::kFloat && b.scalar_type() == torch::kFloat, "gemm: a and b must be float32");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "gemm: need a (M x K) and b (K x N)");
  TORCH_CHECK_VALUE(a.is_contiguous() && b.is_contiguous(), "gemm: a and b must be contiguous (row-major)");
  TORCH_CHECK_VALUE(a.numel() < INT32_MAX && b.numel() < INT32_MAX && a.size(0) * b.size(1) < INT32_MAX,
                    "gemm: each matrix must have fewer than 2**31 elements (the kernels index with int)");
  const int M = a.size(0), K = a.size(1), N = b.size(1);
  auto c = torch::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();
  const bool vec = K % 4 == 0 && N % 4 == 0 && aligned16(a) && aligned16(b) && aligned16(c);
  const Launch l = plan(rung, config, M, N, vec);
  l.kernel<<<l.grid, l.block, 0, c10::cuda::getCurrentCUDAStream()>>>(
      a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}

// {registers per thread, static shared memory bytes per block, threads per block, resident blocks per SM}
std::vector<int64_t> kernel_info(int64_t rung, int64_t config) {
  const Launch l = plan(rung, config, 4096, 4096, true);
  cudaFuncAttributes attr;
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attr, l.kernel));
  const int threads = l.block.x * l.block.y;
  int blocks = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, l.kernel, threads, 0));
  return {attr.numRegs, static_cast<int64_t>(attr.sharedSizeBytes), threads, blocks};
}
// host code:end
