"""Exported from notebooks/14_hopper_matmul_frontier.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import triton
import triton.language as tl

from lessons.nb07_matmul import tile_coords


@triton.jit
def store_subtiled(c_desc, acc, off_m, off_n, BLOCK_N: tl.constexpr, SUBTILES: tl.constexpr):
    # Epilogue: the fp32 tile goes out through the C descriptor whole, or as two halves of N.
    if SUBTILES == 2:
        halves = tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def matmul_persistent_kernel(a_ptr, w_ptr, c_ptr, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr, SUBTILES: tl.constexpr,
                             FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    # C = A @ W^T with A (M x K), W (N x K) and C (M x N) row-major; program p computes tiles p, p + P, ...
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // SUBTILES])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)  # notebook 07's grouped order
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # zeros where the tile leaves A
            w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, w.T, acc)
        store_subtiled(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_N, SUBTILES)


@triton.jit
def matmul_fp8_kernel(a_ptr, w_ptr, c_ptr, a_scale_ptr, w_scale_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, SUBTILES: tl.constexpr, ROWWISE: tl.constexpr,
                      FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    # C (bf16) = (A @ W^T) * scales with A (M x K) and W (N x K) in fp8 e4m3; ROWWISE: one scale per row
    # of A and per row of W (a column of C), else one scale each.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // SUBTILES])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, w.T, acc)  # fp8 x fp8 -> fp32 accumulator
        if ROWWISE:
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = acc * tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)[:, None]
            acc = acc * tl.load(w_scale_ptr + cols, mask=cols < N, other=0.0)[None, :]
        else:
            acc = acc * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
        store_subtiled(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_N, SUBTILES)


@triton.jit
def skinny_matmul_kernel(x_ptr, w_ptr, c_ptr, part_ptr, count_ptr, M, N, K, stride_xm, stride_wn, stride_cm,
                         BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                         SPLIT_K: tl.constexpr):
    # C = X @ W^T for few rows of X, computed as C^T = W @ X^T; program (m, n, s) sums the s-th slice of K
    pid_m, pid_n, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(k_steps):
        offs_k = (split * k_steps + i) * BLOCK_K + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0)
        xt = tl.load(x_ptr + offs_m[None, :] * stride_xm + offs_k[:, None],
                     mask=(offs_m[None, :] < M) & (offs_k[:, None] < K), other=0.0)
        acc = tl.dot(w, xt, acc)  # (BLOCK_N x BLOCK_K) @ (BLOCK_K x BLOCK_M)
    c_ptrs = c_ptr + offs_m[None, :] * stride_cm + offs_n[:, None]  # C^T tile -> C
    c_mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        tile = pid_n * tl.num_programs(0) + pid_m
        part = part_ptr + tile * SPLIT_K * BLOCK_N * BLOCK_M + tl.arange(0, BLOCK_N)[:, None] * BLOCK_M \
            + tl.arange(0, BLOCK_M)[None, :]
        tl.store(part + split * BLOCK_N * BLOCK_M, acc)
        tl.debug_barrier()  # all partial stores of this program before the counter moves
        if tl.atomic_add(count_ptr + tile, 1, sem="acq_rel") == SPLIT_K - 1:  # last one in adds up
            total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in range(SPLIT_K):  # fixed order: the same bits whoever finishes last
                total += tl.load(part + s * BLOCK_N * BLOCK_M, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next call
