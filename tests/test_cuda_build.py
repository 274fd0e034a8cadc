"""course_utils.cuda_build on the CPU: hashing, rebuild on edit, recovery after a failed build,
missing tools, and compile-only checks of CUDA sources with nvcc.

A C++ build costs ~20 s on one core (parsing torch/extension.h, whatever the source), twice that with both
CI workers busy, so the file builds what the test run builds anyway where it can. The good extension is
notebook 03's square_matrix twin, built in the shared cache folder exactly as `build_square_matrix` builds it
on a CPU (together with nvcc's compile of its CUDA source, the torch-including source checked below):
tests/test_nb03_square_matrix.py and notebooks 03 and 03b then find both in the cache, as they find each
other's. Only the broken and the edited variants of that source are built here for this file alone, in a
fresh cache folder, so that every run really builds them.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils import cuda_build as cb
from course_utils import device
from course_utils import toolchain as tc
from lessons import nb03_square_matrix as sm

SQUARE_CPP = r"""
torch::Tensor square_rows(torch::Tensor m) {
    TORCH_CHECK(m.dim() == 2, "square_rows: expected a 2-D tensor, got ", m.dim(), " dims");
    auto out = torch::empty_like(m);
    const float* in = m.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < m.numel(); ++i) o[i] = in[i] * in[i] + OFFSET;
    return out;
}
"""
GOOD = SQUARE_CPP.replace("OFFSET", "0.0f")
EDITED = SQUARE_CPP.replace("OFFSET", "1.0f")

# Notebook 03's C++ twin, with the arguments `build_square_matrix` builds it with on a CPU (same name, same
# module), and two edits of its launcher: one that does not compile, one that adds 1 to every square.
TWIN_NAME, TWIN_FUNCTIONS = "square_matrix_twin", sm.FUNCTIONS
TWIN_CPP = "constexpr auto kDevice = c10::DeviceType::CPU;\n" + sm.WRAPPER_SRC + sm.TWIN_LAUNCH_SRC
assert TWIN_CPP.count("v * v;") == 1, "the twin's launcher no longer squares with `v * v;`: update the edits below"
TWIN_BROKEN = TWIN_CPP.replace("v * v;", "v * v + undeclared_offset;")
TWIN_EDITED = TWIN_CPP.replace("v * v;", "v * v + 1.0f;")

SQUARE_KERNEL = r"""
__global__ void square_kernel(const float* in, float* out, int rows, int cols) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows && c < cols) out[r * cols + c] = in[r * cols + c] * in[r * cols + c];
}
"""
CUDA_WRAPPER = r"""
torch::Tensor square_cuda(torch::Tensor m) {
    auto out = torch::empty_like(m);
    dim3 block(16, 16);
    dim3 grid((m.size(1) + 15) / 16, (m.size(0) + 15) / 16);
    square_kernel<<<grid, block>>>(m.data_ptr<float>(), out.data_ptr<float>(), m.size(0), m.size(1));
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None or tc.find_ninja() is None,
                               reason="needs a C++ compiler and ninja")
REAL_CACHE = device.CACHE_DIR  # before any test points it at a folder of its own
needs_nvcc = pytest.mark.skipif(tc.find_nvcc() is None, reason="needs nvcc")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """A fresh cache folder, so every run really builds (no artefacts from an earlier run)."""
    folder = tmp_path_factory.mktemp("course_cache")
    # The compiler probe (a build of its own) is the machine's, not the cache's: its verdict, made once in the real
    # cache that the other tests and notebooks share, is copied in, so only the builds under test happen here.
    tc.compiler_choice()
    verdict = Path(REAL_CACHE) / "compiler_probe" / "verdict.json"
    if verdict.is_file():
        (folder / "compiler_probe").mkdir()
        shutil.copy(verdict, folder / "compiler_probe" / "verdict.json")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(device, "CACHE_DIR", folder)
        yield folder


@contextlib.contextmanager
def shared_cache():
    """The cache folder that the other tests and the notebooks use, even while `cache_dir` is in use."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(device, "CACHE_DIR", REAL_CACHE)
        yield Path(REAL_CACHE)


@pytest.fixture(scope="module")
def good_ext():
    """Notebook 03's twin, built (or found) in the shared cache folder."""
    with shared_cache():
        return cb.build_extension(TWIN_NAME, TWIN_CPP, functions=TWIN_FUNCTIONS)


# ------------------------------------------------------------------------- names and flags
def test_name_depends_on_sources_and_flags():
    base = cb.extension_name("k", GOOD, None, ["square_rows"], ["-O3"])
    assert base == cb.extension_name("k", GOOD, None, ["square_rows"], ["-O3"])
    assert base.startswith("k_") and len(base) == len("k_") + 12
    assert base != cb.extension_name("k", EDITED, None, ["square_rows"], ["-O3"])
    assert base != cb.extension_name("k", GOOD, None, ["square_rows"], ["-O2"])
    assert base != cb.extension_name("k", GOOD, "__global__ void f() {}", ["square_rows"], ["-O3"])
    with pytest.raises(ValueError, match="identifier"):
        cb.extension_name("my-kernel", GOOD)


def test_default_flags():
    assert cb.default_cuda_cflags("sm_90") == ["-O3", "-lineinfo", "-gencode=arch=compute_90,code=sm_90"]
    assert tc.HOST_CFLAGS == ("-O3",)


def test_first_error_line_skips_commands():
    log = ("[1/2] c++ -MMD -Werror=foo -c main.cpp -o main.o\nFAILED: main.o\n"
           "c++ -MMD -c main.cpp -o main.o\nmain.cpp: In function 'f':\n"
           "main.cpp:7:52: error: 'x' was not declared in this scope\n")
    assert tc.first_error_line(log) == "main.cpp:7:52: error: 'x' was not declared in this scope"
    assert tc.first_error_line('k.cu(5): error: identifier "inn" is undefined') == 'k.cu(5): error: identifier "inn" is undefined'


# ------------------------------------------------------------------------------- builds
@needs_cxx
def test_build_runs_and_is_cached(good_ext):
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    torch.testing.assert_close(good_ext.square_matrix(x), x * x)
    assert good_ext.__name__.startswith("square_matrix_twin_")
    with shared_cache() as shared:
        assert (shared / "extensions" / good_ext.__name__).is_dir()
        assert cb.build_extension(TWIN_NAME, TWIN_CPP, functions=TWIN_FUNCTIONS) is good_ext
        if not torch.cuda.is_available():  # with CUDA, build_square_matrix builds the CUDA extension instead
            assert sm.build_square_matrix() is good_ext  # what the notebook and its test use: one build for all
    # a failing TORCH_CHECK with formatted values is a Python exception, not a crash
    with pytest.raises(ValueError, match="m must be 2-D, got 1-D"):
        good_ext.square_matrix(torch.ones(3))
    with pytest.raises(RuntimeError, match="kernel launch failed: invalid configuration argument"):
        good_ext.square_matrix_block(x, 64, 32)


@needs_cxx
def test_failed_build_then_edit_rebuilds(good_ext, cache_dir: Path):
    with pytest.raises(cb.BuildError) as info:
        cb.build_extension(TWIN_NAME, TWIN_BROKEN, functions=TWIN_FUNCTIONS)
    first = str(info.value).splitlines()[0]
    assert "error" in first and "undeclared_offset" in first and first.startswith("main.cpp:"), first
    assert "Full compiler log" in str(info.value) and "undeclared_offset" in info.value.log
    # the fixed (edited) source is a new module with its own name, and it runs the new code
    fixed = cb.build_extension(TWIN_NAME, TWIN_EDITED, functions=TWIN_FUNCTIONS)
    assert fixed.__name__ != good_ext.__name__ and fixed.__name__.startswith("square_matrix_twin_")
    assert (cache_dir / "extensions" / fixed.__name__).is_dir()  # built here, in the fresh folder
    x = torch.arange(4, dtype=torch.float32).reshape(2, 2)
    torch.testing.assert_close(fixed.square_matrix(x), x * x + 1)
    torch.testing.assert_close(good_ext.square_matrix(x), x * x)


@needs_cxx
def test_the_precompiled_torch_header_is_valid_under_the_builds_own_flags(good_ext, monkeypatch):
    cxx = tc.require_host_compiler()
    monkeypatch.delenv(cb.PCH_ENV, raising=False)
    assert cb.precompiled_torch_header(cxx, list(tc.HOST_CFLAGS)) == [], "off unless asked for"
    monkeypatch.setenv(cb.PCH_ENV, "1")
    with shared_cache() as shared:
        # wait=True: the build that ./course.sh test starts in the background may be underway
        flags = cb.precompiled_torch_header(cxx, list(tc.HOST_CFLAGS), wait=True)
        if "clang" in cb._compiler_version(cxx).lower():
            assert flags == [], "clang: no GCC precompiled header"
            return
        assert flags[0] == "-include" and Path(flags[1] + ".gch").is_file(), flags
        assert cb.precompiled_torch_header(cxx, list(tc.HOST_CFLAGS)) == flags, "built once, then found"
        # the flags load_inline wrote for a real build (its build.ninja) must accept the header: GCC only warns
        # about an unusable one and reads the header instead, so -Werror=invalid-pch turns that into a failure
        ninja = (shared / "extensions" / good_ext.__name__ / "build.ninja").read_text()
        cflags = [f for f in shlex.split(re.search(r"^cflags = (.*)$", ninja, re.M).group(1))
                  if f not in flags]
    done = subprocess.run([cxx, *cflags, *flags, "-Werror=invalid-pch", "-fsyntax-only", "-x", "c++", "-"],
                          input="#include <torch/extension.h>\nint f() { return 0; }\n", capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# ------------------------------------------------------------------------ missing tools
@pytest.fixture
def no_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.setitem(sys.modules, "ninja", None)  # the pip package cannot be imported either
    monkeypatch.setattr(tc, "DEFAULT_CUDA_HOME", str(tmp_path / "no_cuda"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(device, "CACHE_DIR", tmp_path)
    tc.compiler_choice.cache_clear()  # the choice made with the real tools must not leak in, or out
    yield
    tc.compiler_choice.cache_clear()


def test_missing_cxx_is_a_clear_error(no_tools):
    with pytest.raises(cb.ToolchainError, match="No C\\+\\+ compiler found"):
        cb.build_extension("cb_missing", "int f() { return 1; }", functions=["f"])


def test_missing_ninja_is_a_clear_error(no_tools, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: "/usr/bin/c++" if name == "c++" else None)
    with pytest.raises(cb.ToolchainError, match="pip install ninja"):
        cb.build_extension("cb_missing", "int f() { return 2; }", functions=["f"])


def test_missing_nvcc_is_a_clear_error(no_tools):
    with pytest.raises(cb.ToolchainError, match="nvcc"):
        cb.compile_cuda(SQUARE_KERNEL)
    report = cb.toolchain_report()
    assert report["nvcc"] is None and report["ninja"] is None and report["c++"] is None


def test_cuda_sources_without_cuda_points_to_the_cpu_path(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(cb.ToolchainError, match="C\\+\\+ twin.*compile_cuda"):
        cb.build_extension("cb_cuda", "torch::Tensor square_cuda(torch::Tensor m);",
                           SQUARE_KERNEL + CUDA_WRAPPER, ["square_cuda"])


# ------------------------------------------------------------------------- compile only
@needs_nvcc
def test_compile_cuda_good_and_broken(cache_dir: Path):
    ptx = cb.compile_cuda(SQUARE_KERNEL)
    assert ".entry" in ptx and "square_kernel" in ptx and ".target sm_90" in ptx
    assert cb.compile_cuda(SQUARE_KERNEL) == ptx  # cached
    cubin = cb.compile_cuda(SQUARE_KERNEL, output="cubin", arch="sm_80")
    assert Path(cubin).is_file() and Path(cubin).stat().st_size > 0
    with pytest.raises(cb.BuildError) as info:
        cb.compile_cuda(SQUARE_KERNEL.replace("in[r * cols + c] *", "inn[r * cols + c] *"))
    first = str(info.value).splitlines()[0]
    assert "error" in first and '"inn"' in first, first
    with pytest.raises(ValueError, match="output"):
        cb.compile_cuda(SQUARE_KERNEL, output="sass")


@needs_nvcc
def test_compile_cuda_with_torch_wrapper():
    """A load_inline-style source (torch::Tensor, c10/cuda headers) compiles without a GPU too. The source is
    notebook 03's kernel and launcher (c10/cuda/CUDAGuard.h, CUDAStream.h), which `build_square_matrix`
    compiles for sm_90 in the shared cache folder: the test run compiles it once (~10 s), for all its users."""
    source = sm.KERNEL_SRC + sm.LAUNCH_SRC
    assert "#include <c10/cuda/" in source and "torch::Tensor" in source
    with shared_cache() as shared:
        ptx = cb.compile_cuda(source, arch="sm_90")
        compiled = [p for p in (shared / "nvcc").glob("*.cu")
                    if p.read_text(encoding="utf-8").endswith(source)]
    assert ".entry" in ptx and "square_matrix_kernel" in ptx and ".target sm_90" in ptx
    # what load_inline adds to a cuda source, compile_cuda added before nvcc saw it
    assert compiled and compiled[0].read_text(encoding="utf-8").startswith("#include <torch/types.h>\n")


def test_toolchain_report_keys():
    report = cb.toolchain_report()
    assert {"c++", "ninja", "nvcc", "nvcc_version", "cuda_available", "arch"} <= set(report)


# ------------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
def test_cuda_extension_builds_and_runs(cache_dir: Path):
    ext = cb.build_extension("cb_cuda", "torch::Tensor square_cuda(torch::Tensor m);",
                             SQUARE_KERNEL + CUDA_WRAPPER, ["square_cuda"])
    x = torch.randn(37, 70, device="cuda")
    torch.testing.assert_close(ext.square_cuda(x), x * x)
    with pytest.raises(cb.BuildError) as info:
        cb.build_extension("cb_cuda", "torch::Tensor square_cuda(torch::Tensor m);",
                           SQUARE_KERNEL.replace("out[r", "outt[r") + CUDA_WRAPPER, ["square_cuda"])
    assert str(info.value).startswith("cuda.cu(") and "outt" in str(info.value).splitlines()[0]


# ----------------------------------------------------------------------- choice of compiler
@pytest.fixture
def fake_compilers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A PATH holding only fake c++, g++-13 and g++-12 (each a script that prints a version)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("c++", "g++-13", "g++-12"):
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\necho {name} 1.0\n")
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(device, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(tc, "find_ninja", lambda: "/usr/bin/ninja")
    monkeypatch.setattr(tc, "probe_cflags", lambda cxx: [])  # no precompiled header for a fake compiler
    tc.compiler_choice.cache_clear()
    yield bin_dir
    tc.compiler_choice.cache_clear()


def test_host_compiler_keeps_a_default_that_raises_cleanly(fake_compilers, monkeypatch):
    monkeypatch.setattr(tc, "raises_cleanly", lambda cxx, *a: True)
    assert tc.host_compiler() == str(fake_compilers / "c++")


def test_host_compiler_falls_back_to_a_gxx_whose_errors_raise(fake_compilers, monkeypatch):
    probed = []

    def crashes_unless_gcc12(cxx, *args):
        probed.append(Path(cxx).name)
        return cxx.endswith("g++-12")

    monkeypatch.setattr(tc, "raises_cleanly", crashes_unless_gcc12)
    assert tc.host_compiler() == str(fake_compilers / "g++-12")
    assert probed == ["c++", "g++-13", "g++-12"]  # the default first, then the newest g++-N
    # the verdict is cached on disk: a new process (here: a cleared cache) does not probe again
    tc.compiler_choice.cache_clear()
    monkeypatch.setattr(tc, "raises_cleanly", lambda cxx, *a: pytest.fail("probed again"))
    assert tc.host_compiler() == str(fake_compilers / "g++-12")


def test_host_compiler_warns_when_no_compiler_raises_cleanly(fake_compilers, monkeypatch):
    monkeypatch.setattr(tc, "raises_cleanly", lambda cxx, *a: False)
    with pytest.warns(RuntimeWarning, match="crash when a TORCH_CHECK fails"):
        assert tc.host_compiler() == str(fake_compilers / "c++")


def test_cxx_environment_variable_is_kept_when_it_raises_cleanly(fake_compilers, monkeypatch):
    monkeypatch.setenv("CXX", "g++-13")
    monkeypatch.setattr(tc, "raises_cleanly", lambda cxx, *a: True)
    assert tc.host_compiler() == str(fake_compilers / "g++-13")


def test_a_crashing_cxx_environment_variable_is_replaced_and_said_so(fake_compilers, monkeypatch):
    # the reference H100 image sets CXX to a GCC 13.3 whose extensions crash on a failing TORCH_CHECK
    monkeypatch.setenv("CXX", "g++-13")
    monkeypatch.setattr(tc, "raises_cleanly", lambda cxx, *a: cxx.endswith("g++-12"))
    chosen, note = tc.compiler_choice()
    assert chosen == str(fake_compilers / "g++-12")
    assert "g++-13" in note and "crash" in note


@needs_cxx
def test_the_chosen_compiler_really_raises_cleanly(monkeypatch):
    # On the reference H100 image this is the test that fails with the image's default GCC 13.3.
    monkeypatch.setattr(device, "CACHE_DIR", REAL_CACHE)  # the probe's build, shared with every other build here
    tc.compiler_choice.cache_clear()
    assert tc.raises_cleanly(tc.host_compiler())


def test_a_probe_clears_a_killed_probe_s_lock_and_a_stuck_one_says_so(fake_compilers, monkeypatch):
    # A probe killed mid-build left torch's lock file in the shared probe folder, and every later probe waited on
    # it for ever; then the timeout cached "this compiler crashes", a wrong verdict. The probe now holds the
    # folder's OS lock, removes a dead build's lock file, and a probe that times out raises instead.
    import subprocess

    seen = []

    def fake_run(argv, **kwargs):
        build_dir = Path(argv[5])
        seen.append((build_dir, (build_dir / "lock").exists()))
        return subprocess.CompletedProcess(argv, 0, stdout="raised: probe: expected a 2-D tensor, got 1-D\n")

    monkeypatch.setattr(tc.subprocess, "run", fake_run)
    assert tc.raises_cleanly("c++")
    folder = seen[0][0]
    (folder / "lock").touch()  # a probe killed a moment ago
    with pytest.warns(UserWarning, match="interrupted build"):
        assert tc.raises_cleanly("c++")
    assert seen == [(folder, False), (folder, False)], "one shared folder, and no lock file when the build starts"

    def stuck(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    monkeypatch.setattr(tc.subprocess, "run", stuck)
    with pytest.raises(tc.ToolchainError, match="took over"):
        tc.raises_cleanly("c++")


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next(monkeypatch, tmp_path):
    # torch's build waits without end for the `lock` file of a build in the same folder; a build killed a moment
    # ago (a kernel restart during a compile) leaves one. The next build_extension must remove it, not wait.
    import types

    import torch.utils.cpp_extension as ext

    monkeypatch.setattr(cb, "extensions_dir", lambda: tmp_path)
    monkeypatch.setattr(cb, "require_host_compiler", lambda: "c++")
    monkeypatch.setattr(cb, "require_ninja", lambda: None)
    name = cb.extension_name("locked", "int f();", None, ["f"], [*cb.HOST_CFLAGS, "cxx=c++"], [])
    (tmp_path / name).mkdir()
    (tmp_path / name / "lock").touch()
    seen = []

    def fake_load_inline(**kwargs):
        seen.append((Path(kwargs["build_directory"]) / "lock").exists())
        return types.ModuleType(kwargs["name"])

    monkeypatch.setattr(ext, "load_inline", fake_load_inline)
    with pytest.warns(UserWarning, match="interrupted build"):
        module = cb.build_extension("locked", "int f();", functions=["f"])
    assert seen == [False] and module.__name__ == name
