"""Unit tests of course_utils.kernel_inspect: compiling for sm_75/sm_80/sm_90 works without a GPU."""

from __future__ import annotations

import os

import pytest
import torch

import course_utils  # noqa: F401 - must come before any kernel is defined (interpreter on CPU)
import triton
import triton.language as tl

from course_utils import kernel_inspect as ki
from course_utils import toolchain


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # tl.cdiv is itself a @jit function of Triton's library
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    acc = _twice(acc)  # a user @jit helper: interpreted too in interpreter mode
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(tl.float16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


SCALE = tl.constexpr(2.0)


@triton.jit
def times_scale(x):
    return x * SCALE


@triton.jit
def scaled_add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, times_scale(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
          "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
MM_CONST = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
MM_DIV = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]


@pytest.fixture(scope="module")
def compiled() -> dict[str, ki.CompiledStages]:
    """The kernels that several tests read, compiled by one worker: each worker that starts imports torch and
    Triton again (~2.5 s on a CI core). compile_triton itself is called by the tests further down."""
    x = torch.empty(1000)
    jobs = {"add_sm90": dict(kernel=add_kernel, signature=ADD_SIG, constexprs={"BLOCK_SIZE": 1024}, arch="sm_90",
                             divisible_by_16=["x_ptr", "y_ptr", "out_ptr", "n_elements"]),
            "add_n1000": dict(kernel=add_kernel, signature=[x, x, x, 1000], constexprs={"BLOCK_SIZE": 1024}),
            **{f"matmul_{arch}": dict(kernel=matmul_kernel, signature=MM_SIG, constexprs=MM_CONST, arch=arch,
                                      num_warps=4, divisible_by_16=MM_DIV) for arch in ("sm_80", "sm_90")}}
    return dict(zip(jobs, ki.compile_triton_jobs(list(jobs.values()))))


@pytest.fixture(scope="module")
def add_sm90(compiled) -> ki.CompiledStages:
    return compiled["add_sm90"]


def test_vector_add_sm90_has_vector_loads_and_registers(add_sm90: ki.CompiledStages) -> None:
    s = add_sm90.summary
    assert s.arch == "sm_90" and s.language == "triton"
    assert s.vector_global_loads > 0, s
    assert s.vector_global_stores > 0
    assert "128 bits" in s.widest_global_load
    assert isinstance(s.registers, int) and 0 < s.registers <= 255
    assert s.spill_stores_bytes == 0 and s.spill_loads_bytes == 0
    assert s.tensor_core_ops == 0
    assert any("ld.global.v4" in line for line in add_sm90.grep("ld.global"))
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        assert stage in add_sm90
    if ki.tool_path("cuobjdump"):
        assert s.sass_128bit_loads and s.sass_128bit_loads > 0
        assert "LDG.E.128" in add_sm90["sass"]


def test_mask_on_unaligned_length_loses_vectorization(add_sm90: ki.CompiledStages, compiled) -> None:
    scalar = compiled["add_n1000"]  # [x, x, x, 1000] for a tensor x: types inferred, n not a multiple of 16
    assert scalar.arch == "sm_90"  # the default target
    assert scalar.summary.vector_global_loads == 0
    assert scalar.summary.global_loads > add_sm90.summary.global_loads
    table = ki.compare({"aligned": add_sm90, "n=1000": scalar})
    assert list(table.columns) == ["aligned", "n=1000"]
    assert table.loc["vector_global_loads", "n=1000"] == 0
    text = ki.diff(add_sm90, scalar)
    assert text.startswith("---") and "ld.global" in text
    assert "%r#" in text  # register numbers are normalized away
    assert ki.diff(add_sm90, add_sm90) == "no differences in ptx"


def test_compiles_in_a_worker_and_leaves_this_process_alone() -> None:
    before_language = dict(vars(tl.core))
    before_env = os.environ.get("TRITON_INTERPRET")
    k = ki.compile_triton(matmul_kernel, MM_SIG, MM_CONST, arch="sm_90", divisible_by_16=MM_DIV)
    assert k.summary.language == "triton" and k.name == "matmul_kernel"
    assert all(vars(tl.core).get(name) is value for name, value in before_language.items())
    assert os.environ.get("TRITON_INTERPRET") == before_env


def test_kernel_source_carries_helpers_and_constants() -> None:
    """A kernel defined where the worker cannot import it (a notebook cell) travels as source text."""
    text = ki.kernel_source(scaled_add_kernel)
    assert "SCALE = tl.constexpr(2.0)" in text
    assert text.index("def times_scale") < text.index("def scaled_add_kernel")  # helpers first
    assert text.count("@triton.jit") == 2


def test_a_quick_compilation_leaves_out_only_the_sass_and_the_spills(add_sm90: ki.CompiledStages) -> None:
    """quick=True (the grader's compile check, the compile-targets test): the same compilation, without the
    disassembly and the second `ptxas -v` run; registers and shared memory still come from the cubin."""
    quick = ki.compile_triton_jobs([dict(kernel=add_kernel, signature=ADD_SIG, constexprs={"BLOCK_SIZE": 1024},
                                         arch="sm_90", divisible_by_16=["x_ptr", "y_ptr", "out_ptr", "n_elements"])],
                                   quick=True)[0]
    assert quick["ptx"] == add_sm90["ptx"] and "sass" not in quick
    q, s = quick.summary, add_sm90.summary
    assert q.sass_instructions is None and q.spill_stores_bytes is None and q.spill_loads_bytes is None
    assert (q.global_loads, q.vector_global_loads, q.tensor_core_ops) == (s.global_loads, s.vector_global_loads,
                                                                         s.tensor_core_ops)
    if ki.tool_path("cuobjdump"):
        assert q.registers == s.registers and q.shared_bytes == s.shared_bytes
    with pytest.raises(TypeError, match="quick must be True or False"):
        ki.compile_triton_jobs([], quick="yes")


def test_many_targets_in_one_worker() -> None:
    x = torch.empty(64)
    jobs = [dict(kernel=scaled_add_kernel, signature=[x, x, 64], constexprs={"BLOCK": 64}, arch=arch)
            for arch in ("sm_75", "sm_80", "sm_90")]
    compiled = ki.compile_triton_jobs(jobs)
    assert [c.arch for c in compiled] == ["sm_75", "sm_80", "sm_90"]
    assert all(f".target {c.arch}" in c["ptx"] and c.summary.global_stores > 0 for c in compiled)


@pytest.mark.parametrize("arch, kind, sass_op", [("sm_80", "mma.sync", "HMMA"), ("sm_90", "wgmma", "HGMMA")])
def test_matmul_uses_tensor_cores(arch: str, kind: str, sass_op: str, compiled) -> None:
    k = compiled[f"matmul_{arch}"]
    s = k.summary
    assert s.tensor_core_kind == kind and s.tensor_core_ops > 0
    assert s.shared_bytes and s.shared_bytes > 0
    if ki.tool_path("cuobjdump"):
        assert s.sass_tensor_core_ops > 0 and sass_op in k["sass"]


def test_compile_triton_validates_arguments() -> None:
    with pytest.raises(ValueError, match="arch"):
        ki.compile_triton(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}, arch="volta")
    with pytest.raises(ValueError, match="missing"):
        ki.compile_triton(add_kernel, {"x_ptr": "*fp32"}, {"BLOCK_SIZE": 1024})
    with pytest.raises(ValueError, match="BLOCK_SIZE"):
        ki.compile_triton(add_kernel, ADD_SIG)
    with pytest.raises(ValueError, match="not a Triton type"):
        ki.compile_triton(add_kernel, {**ADD_SIG, "n_elements": "int"}, {"BLOCK_SIZE": 1024})
    with pytest.raises(ValueError, match="num_warps"):
        ki.compile_triton(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}, num_warps=3)
    with pytest.raises(TypeError):
        ki.compile_triton(lambda x: x, ADD_SIG, {"BLOCK_SIZE": 1024})


def test_parse_arch_and_types() -> None:
    assert toolchain.parse_arch("sm_90") == 90 and toolchain.parse_arch("sm_90a") == 90 and toolchain.parse_arch(80) == 80
    with pytest.raises(ValueError):
        toolchain.parse_arch("sm_9")
    assert ki.triton_type(torch.empty(2, dtype=torch.float16)) == "*fp16"
    assert ki.triton_type(7) == "i32" and ki.triton_type(2**40) == "i64"


def test_ptx_and_sass_counters() -> None:
    ptx = "\n".join(["\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];",
                     "\tld.global.b32 %r5, [ %rd2 + 0 ];", "// ld.global.v4 in a comment",
                     "\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...};",
                     "\tcp.async.cg.shared.global [ %r1 + 0 ], [ %rd1 + 0 ], 0x10, %r2;", "\tcp.async.commit_group;"])
    counts = ki.ptx_counts(ptx)
    assert counts["ld.global"] == 2 and counts["ld.global.v4"] == 1 and counts["wgmma"] == 1
    assert counts["cp.async"] == 1
    raw = ("        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;   /* 0x000 */\n"
           "                                                                      /* 0x000e2 */\n"
           "        /*0010*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], R24 ;   /* 0x001 */\n"
           "        /*0020*/                   STL [R1], R4 ;   /* 0x002 */\n")
    sass = ki.clean_sass(raw)
    assert sass.splitlines()[0] == "/*0000*/ LDG.E.128 R4, desc[UR4][R2.64] ;"
    c = ki.sass_counts(sass)
    assert c["LDG.128"] == 1 and c["tensor_core"] == 1 and c["instructions"] == 3
    log = ("ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem\n"
           "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n")
    assert toolchain.parse_ptxas_log(log) == {"registers": 40, "spill_stores_bytes": 8, "spill_loads_bytes": 12,
                                       "shared_bytes": 4096}


SQUARE_CU = r"""
__global__ void square_matrix_kernel(const float* matrix, float* result, int width, int height) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < height && col < width) {
        int idx = row * width + col;
        result[idx] = matrix[idx] * matrix[idx];
    }
}
"""


@pytest.mark.skipif(ki.tool_path("nvcc") is None, reason="needs nvcc")
def test_inspect_cuda_square_kernel() -> None:
    k = ki.inspect_cuda(SQUARE_CU, arch="sm_90")
    s = k.summary
    assert s.name == "square_matrix_kernel" and s.language == "cuda"
    assert s.global_loads == 1 and s.global_stores == 1 and s.vector_global_loads == 0
    assert isinstance(s.registers, int) and s.registers > 0
    assert s.spill_stores_bytes == 0
    with pytest.raises(RuntimeError, match="error"):
        ki.inspect_cuda(SQUARE_CU.replace("idx];", "idy];"), arch="sm_90")
    with pytest.raises(ValueError):
        ki.inspect_cuda("int main() {}")


def test_compiles_after_an_interpreted_run_that_leaks_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's interpreter leaves triton.language.core patched after a kernel calls a @jit library
    function (tl.cdiv here); compile_triton must still compile, and leave things as it found them."""
    if not course_utils.INTERPRET:
        pytest.skip("only meaningful when kernels run in the interpreter")
    a = torch.randn(16, 16, dtype=torch.float16)
    c = torch.empty(16, 16, dtype=torch.float16)
    matmul_kernel[(1, 1)](a, a, c, 16, 16, 16, 16, 1, 16, 1, 16, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    before = dict(vars(tl.core))
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # a cache hit would skip the front end
    k = ki.compile_triton(matmul_kernel, MM_SIG, MM_CONST, arch="sm_90", divisible_by_16=MM_DIV)
    assert k.summary.tensor_core_kind == "wgmma"
    assert all(vars(tl.core).get(name) is value for name, value in before.items())
    matmul_kernel[(1, 1)](a, a, c, 16, 16, 16, 16, 1, 16, 1, 16, 1, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    torch.testing.assert_close(c, (2 * a.float() @ a.float()).half(), rtol=2e-2, atol=2e-2)


_KERNEL_MODULE = '''
import triton
import triton.language as tl
{prelude}

@triton.jit
def scale_kernel(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_print("{label}")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''


def _write_kernel_module(folder, name: str, label: str, prelude: str = "") -> None:
    path = folder / f"{name}.py"
    before = path.stat().st_mtime if path.exists() else 0.0
    path.write_text(_KERNEL_MODULE.format(label=label, prelude=prelude), encoding="utf-8")
    if path.stat().st_mtime <= before:  # an edit within the file system's clock tick: a later time all the same
        os.utime(path, (before + 1, before + 1))


def _scale(module, capsys):
    ki.compile_triton(module.scale_kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}, arch="sm_80")
    return capsys.readouterr().out


def test_one_compile_worker_serves_the_process_and_sees_edited_modules(tmp_path, monkeypatch, capsys):
    """Compilations share one worker process (Python, torch and Triton imported once); a module it imported and
    that was edited since is compiled from its new text; a worker that died is replaced."""
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # a cache hit would skip the front end and its static_print
    _write_kernel_module(tmp_path, "course_worker_kernels", "version 1")
    module = importlib.import_module("course_worker_kernels")
    assert "version 1" in _scale(module, capsys)
    worker = ki._WORKER.proc
    assert worker is not None and worker.poll() is None
    monkeypatch.setenv("COURSE_WORKER_TEST", "1")  # another environment: another worker, which sees it
    assert "version 1" in _scale(module, capsys)
    assert ki._WORKER.proc is not worker and worker.poll() is not None, "the old worker was stopped"
    worker = ki._WORKER.proc
    _write_kernel_module(tmp_path, "course_worker_kernels", "version 2")
    assert "version 2" in _scale(module, capsys), "the worker compiled the module it had imported before the edit"
    assert ki._WORKER.proc is not worker
    worker = ki._WORKER.proc
    assert "version 2" in _scale(module, capsys)
    assert ki._WORKER.proc is worker, "no edit, no new worker"
    worker.kill()
    worker.wait()
    assert "version 2" in _scale(module, capsys), "a dead worker is replaced"


def test_a_worker_that_dies_mid_request_is_a_clear_error_and_the_next_call_works(tmp_path, monkeypatch, capsys):
    import importlib

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")
    # the worker imports this module to compile its kernel, and dies there (here, in this process, it does not)
    _write_kernel_module(tmp_path, "course_worker_dies", "dies", "import os\nif os.environ.get('TRITON_INTERPRET') "
                         "== '0':\n    os._exit(7)")
    _write_kernel_module(tmp_path, "course_worker_lives", "lives")
    with pytest.raises(ki.KernelCompileError, match="compile worker failed .*exit code 7"):
        _scale(importlib.import_module("course_worker_dies"), capsys)
    assert "lives" in _scale(importlib.import_module("course_worker_lives"), capsys)
