"""Build CUDA (or C++) extensions from strings, and compile CUDA sources without a GPU.

`build_extension` wraps ``torch.utils.cpp_extension.load_inline`` and fixes its pitfalls for a
notebook workflow:

- the module name is ``f"{name}_{hash}"``, the hash covering the sources, the flags, the torch
  version, the Python version and the GPU architecture. An edited kernel is a new module (no
  "I changed the code but the old kernel still runs"), and a failed build never leaves a stale
  module behind: the next successful build has its own name and folder;
- builds go to ``CACHE_DIR / "extensions" / <module name>`` (an ignored folder), so a second run of
  the same source (even in a new process) only re-links nothing and imports: ninja sees no change;
- the compiler log is shown only when the build fails, as a `BuildError` whose message starts with
  the first error line, then the full log;
- a build interrupted by a kernel restart leaves torch's ``lock`` file in its folder, and torch's next
  build there waits for it without end; here the next build removes it (an OS lock tells a live build
  from a dead one);
- missing tools (C++ compiler, ninja, nvcc) and a missing GPU give one clear sentence each
  (`ToolchainError`, a `BuildError`);
- flags are ``-O3`` (C++ and nvcc), ``-lineinfo`` and ``-gencode`` for the current GPU (nvcc);
- with ``COURSE_PCH=1`` in the environment (``./course.sh test`` sets it) and GCC as the host compiler, the
  C++ file includes ``torch/extension.h`` from a precompiled header, built once per compiler, flags and torch
  version into ``CACHE_DIR / "pch"``. Parsing that header is most of a small build (on a 2-core machine a build
  took 27 s with it against 48 s without; the header itself takes about a minute and 0.8 GB of disk), so it
  pays from the third build on: worth it for the test suite's dozen builds, not for a notebook's two or three.

`compile_cuda` runs ``nvcc -ptx`` (or ``-cubin``) on a source and returns the PTX: no GPU is
needed, only nvcc, so a broken kernel fails CI on a CPU machine. It accepts both kernel-only
sources and the ``cuda_sources`` you give `build_extension` (which may use ``torch::Tensor`` and
include ``torch/...`` or ``c10/...`` headers): for those it adds what ``load_inline`` adds (the
``torch/types.h``, ``cuda.h`` and ``cuda_runtime.h`` includes) and torch's include paths. Kernel-only
sources compile in about a second; sources that pull in torch headers take several seconds more.

With ``output="cubin"`` it also keeps nvcc's ``--resource-usage`` log beside the cubin, which
`course_utils.kernel_inspect` reads. The tools themselves (nvcc, ninja, the host C++ compiler, chosen so
that a failing ``TORCH_CHECK`` raises instead of crashing) are found by `course_utils.toolchain`.

Compared with calling ``load_inline`` yourself (notebook 03 does that first), this adds the hashed
names, the cache folder, the first-error-line messages, the host-compiler choice and the lock; nothing else.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import types
from pathlib import Path
from typing import Sequence

import torch

from course_utils import device, toolchain
from course_utils.toolchain import (HOST_CFLAGS, BuildError, ToolchainError, build_lock, current_arch, first_error_line,
                                    parse_arch, require_host_compiler, require_ninja, require_nvcc, run_tool,
                                    toolchain_report)

__all__ = [
    "BuildError", "PCH_ENV", "ToolchainError", "build_extension", "compile_cuda", "compiler_log_path",
    "current_arch", "default_cuda_cflags", "extension_name", "extensions_dir", "precompiled_torch_header", "toolchain_report",
    "warm_precompiled_header",
]

_LOADED: dict[str, types.ModuleType] = {}


# --------------------------------------------------------------------------------------- flags
def default_cuda_cflags(arch: str | None = None) -> list[str]:
    """nvcc flags: ``-O3``, ``-lineinfo`` (source lines in profilers) and real code for ``arch``."""
    arch = arch or current_arch()
    flags = ["-O3", "-lineinfo"]
    if arch:
        number = parse_arch(arch)
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    return flags


# --------------------------------------------------------------------------------------- build
def extensions_dir() -> Path:
    """The folder that holds one build folder per extension module."""
    return Path(device.CACHE_DIR) / "extensions"


def extension_name(name: str, cpp_sources: str, cuda_sources: str | None = None,
                   functions: Sequence[str] = (), cflags: Sequence[str] = (),
                   cuda_cflags: Sequence[str] = ()) -> str:
    """``f"{name}_{hash}"``: the module name `build_extension` gives these sources and flags."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name must be a Python identifier (letters, digits, _), got {name!r}")
    if not isinstance(cpp_sources, str) or not (cuda_sources is None or isinstance(cuda_sources, str)):
        raise TypeError("cpp_sources must be C++ source text (a str) and cuda_sources a str or None, got "
                        f"{type(cpp_sources).__name__} and {type(cuda_sources).__name__}")
    for label, flags in (("functions", functions), ("cflags", cflags), ("cuda_cflags", cuda_cflags)):
        if isinstance(flags, str) or not all(isinstance(f, str) for f in flags):
            raise TypeError(f"{label} must be a list of strings, e.g. [{flags!r}] rather than {flags!r}")
    bad = [f for f in functions if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f)]
    if bad:
        raise ValueError(f"functions must name C++ functions (identifiers), got {bad}")
    digest = hashlib.sha256()
    for part in (name, cpp_sources, cuda_sources or "", "\0".join(functions), "\0".join(cflags),
                 "\0".join(cuda_cflags), torch.__version__, sys.version.split()[0], current_arch() or "cpu"):
        digest.update(part.encode())
        digest.update(b"\x1f")
    return f"{name}_{digest.hexdigest()[:12]}"


def _build_failure(module_name: str, build_dir: Path, log: str) -> BuildError:
    log = log.replace(str(build_dir) + os.sep, "")  # "cuda.cu(12): error: ..." reads better than the full path
    return BuildError(f"{first_error_line(log)}\n\nBuilding extension {module_name!r} failed "
                      f"(build folder: {build_dir}). Full compiler log:\n{log}", log=log)


def build_extension(name: str, cpp_sources: str, cuda_sources: str | None = None,
                    functions: Sequence[str] = ()) -> types.ModuleType:
    """Compile ``cpp_sources`` (and ``cuda_sources``) into a Python module and import it.

    ``functions`` are the C++ functions to expose (``load_inline`` writes the bindings; leave it
    empty if the sources have their own ``PYBIND11_MODULE``); ``cpp_sources`` then only needs
    their declarations. Calling it again with the same arguments returns the loaded module at
    once; in a new process the cached build is reused (a second or two). Raises `BuildError`
    (message: the first compiler error line, then the log) when the sources do not compile and
    `ToolchainError` when a tool or, for ``cuda_sources``, a CUDA GPU is missing.
    """
    extension_name(name, cpp_sources, cuda_sources, functions)  # checks the arguments: a clear error, not a compile error
    functions = list(functions)
    if cuda_sources is not None and not torch.cuda.is_available():
        raise ToolchainError(
            "cuda_sources were given but CUDA is not available on this machine (torch "
            f"{torch.__version__}, torch.cuda.is_available() is False), so a CUDA extension could not "
            "run here. Pass the C++ twin of the kernel as cpp_sources (cuda_sources=None), or check "
            "that the CUDA source compiles with compile_cuda(source), which needs only nvcc.")
    cflags = list(HOST_CFLAGS)
    cuda_cflags = default_cuda_cflags() if cuda_sources is not None else []
    cxx = require_host_compiler()
    # The compiler is part of the name: a module built by another compiler is another module.
    module_name = extension_name(name, cpp_sources, cuda_sources, functions, [*cflags, f"cxx={cxx}"],
                                 cuda_cflags)
    if module_name in _LOADED:
        return _LOADED[module_name]

    require_ninja()
    if cuda_sources is not None:
        require_nvcc()

    from torch.utils.cpp_extension import load_inline

    build_dir = extensions_dir() / module_name
    build_dir.mkdir(parents=True, exist_ok=True)
    # [] unless COURSE_PCH=1; waits for a header that another process is building (./course.sh test starts one as
    # the tests start): a build with it costs less than half of one without, and the header's build is paid anyway
    pch = precompiled_torch_header(cxx, cflags, cuda=cuda_sources is not None, wait=True)
    previous_cxx = os.environ.get("CXX")
    os.environ["CXX"] = str(cxx)  # torch's build reads $CXX; restored below
    try:
        with build_lock(build_dir):
            module = load_inline(
                name=module_name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
                functions=functions or None, extra_cflags=[*cflags, *pch],
                extra_cuda_cflags=cuda_cflags or None, build_directory=str(build_dir),
                with_cuda=cuda_sources is not None)
    except RuntimeError as err:
        message = str(err)
        if message.startswith("Error building extension"):
            log = message.split(":", 1)[1] if ":" in message else message
            raise _build_failure(module_name, build_dir, log.strip("\n")) from None
        raise
    except ImportError as err:  # compiled and linked, but a symbol is missing at load time
        raise _build_failure(module_name, build_dir, f"error: {err}") from None
    finally:
        if previous_cxx is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = previous_cxx
    _LOADED[module_name] = module
    return module


#: The environment variable that turns on the precompiled torch header (build_extension's docstring).
PCH_ENV = "COURSE_PCH"
#: Where the precompiled headers go: the cache folder this process started with (a test that points
#: CACHE_DIR at a fresh folder, to build an extension afresh, still finds the machine's header).
_PCH_ROOT = Path(device.CACHE_DIR) / "pch"


def _compiler_version(cxx: str) -> str:
    try:
        done = subprocess.run([str(cxx), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else ""


def precompiled_torch_header(cxx: str, cflags: Sequence[str], *, cuda: bool = False,
                             wait: bool = False) -> list[str]:
    """The extra C++ flags that make a build include ``torch/extension.h`` precompiled: ``["-include", header,
    "-Winvalid-pch"]``, the ``.gch`` built beside ``header`` first if this process is the first to need it;
    ``[]`` (build as usual) unless ``COURSE_PCH=1``, for a compiler other than GCC, while another process builds
    the header (unless ``wait``: then it waits for that build), or where building it failed. The header is
    compiled with the flags ``load_inline`` gives the C++ file (`torch.utils.cpp_extension`: the extension API
    macro, torch's and Python's include folders, ``-fPIC -std=c++20``, then ``cflags``): GCC uses a precompiled header only under the same flags, and
    falls back to reading the header itself, with a warning, otherwise."""
    if not isinstance(cxx, (str, os.PathLike)):
        raise TypeError(f"cxx must be the C++ compiler's path (str), got {type(cxx).__name__}")
    if isinstance(cflags, str) or not all(isinstance(f, str) for f in cflags):
        raise TypeError(f"cflags must be a list of strings, e.g. [{cflags!r}] rather than {cflags!r}")
    if not isinstance(wait, bool) or not isinstance(cuda, bool):
        raise TypeError(f"cuda and wait must be True or False, got {cuda!r} and {wait!r}")
    if os.environ.get(PCH_ENV, "") != "1":
        return []
    version = _compiler_version(cxx)
    if not version or "clang" in version.lower():  # clang reads .pch files, through other flags
        return []
    try:
        import fcntl
    except ImportError:  # no OS lock here (Windows): builds go without
        return []
    from torch.utils.cpp_extension import include_paths

    includes = [*include_paths("cuda" if cuda else "cpu"), sysconfig.get_path("include", scheme="posix_prefix")]
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", *(x for p in includes if p for x in ("-isystem", p)),
             "-fPIC", "-std=c++20", *cflags]
    compiler = os.path.realpath(shutil.which(str(cxx)) or str(cxx))  # "c++" and "/usr/bin/c++": one header
    key = hashlib.sha256("\x1f".join([compiler, version, torch.__version__, *flags]).encode()).hexdigest()[:12]
    folder = _PCH_ROOT / key
    header, gch, failed = folder / "torch_extension.h", folder / "torch_extension.h.gch", folder / "failed.log"
    use = ["-include", str(header), "-Winvalid-pch"]
    if any(c.isspace() for c in str(header)):  # torch writes extra_cflags into build.ninja unquoted
        return []
    if gch.exists():
        return use
    if failed.exists():
        return []
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".build.flock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:  # another process is building it (about a minute): this build goes without
            return []
        try:
            if gch.exists():
                return use
            header.write_text("#include <torch/extension.h>\n", encoding="utf-8")
            part = folder / f"torch_extension.{os.getpid()}.gch"
            try:
                done = subprocess.run([str(cxx), *flags, "-x", "c++-header", str(header), "-o", str(part)],
                                      capture_output=True, text=True, timeout=900)
            except (OSError, subprocess.SubprocessError) as err:
                failed.write_text(str(err), encoding="utf-8")
                return []
            if done.returncode != 0:
                failed.write_text(done.stdout + done.stderr, encoding="utf-8")
                part.unlink(missing_ok=True)
                return []
            os.replace(part, gch)  # whole or absent: a reader never sees half a header
            return use
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _probe_cflags(cxx: str) -> list[str]:
    """The compiler probe's build includes the header as the builds it stands for do (toolchain.probe_cflags)."""
    return precompiled_torch_header(shutil.which(cxx) or cxx, list(HOST_CFLAGS), wait=True)


toolchain.probe_cflags = _probe_cflags


def warm_precompiled_header() -> None:
    """Build the precompiled torch header that C++-only builds will use (``./course.sh test`` runs this in the
    background as the tests start, so that the first builds need not pay for it). The header comes first, for the
    compiler that the compiler probe tries first and almost always keeps, then the probe (a build of its own): a
    build that starts meanwhile waits for the header, which it needs sooner."""
    from course_utils.toolchain import require_host_compiler as host

    before = os.environ.get(PCH_ENV)
    os.environ[PCH_ENV] = "1"
    try:
        first = shutil.which(os.environ.get("CXX") or "c++")
        if first:
            precompiled_torch_header(first, list(HOST_CFLAGS))
        precompiled_torch_header(host(), list(HOST_CFLAGS))  # found at once, unless the probe chose another
    finally:
        if before is None:
            os.environ.pop(PCH_ENV)
        else:
            os.environ[PCH_ENV] = before


# --------------------------------------------------------------------------------- compile only
_TORCH_HINTS = re.compile(r"#\s*include\s*[<\"](torch|ATen|c10)/|\b(torch|at|c10)::")


def _torch_flags() -> list[str]:
    from torch.utils.cpp_extension import include_paths

    paths = include_paths()
    flags = [f"-I{p}" for p in paths]
    flags.append(f"-I{sysconfig.get_paths()['include']}")
    # A CPU-only torch wheel ships the c10/cuda headers but not the one CMake generates for them;
    # a stub with the same content lets `#include <c10/cuda/CUDAException.h>` compile here too.
    if not (Path(paths[0]) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").is_file():
        stub = Path(device.CACHE_DIR) / "nvcc" / "stub_include"
        header = stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        if not header.is_file():
            header.parent.mkdir(parents=True, exist_ok=True)
            header.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n", encoding="utf-8")
        flags.append(f"-I{stub}")
    flags += ["-std=c++17", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
              "--expt-relaxed-constexpr", "-DTORCH_EXTENSION_NAME=compile_check"]
    return flags


def compile_cuda(cuda_source: str, *, arch: str = "sm_90", output: str = "ptx",
                 extra_flags: Sequence[str] = ()) -> str:
    """Compile a CUDA source with nvcc, without a GPU; return the PTX text (or the cubin's path).

    ``arch`` is the target (``"sm_90"`` for an H100); ``output`` is ``"ptx"`` or ``"cubin"`` (then
    nvcc's ``--resource-usage`` log is kept at `compiler_log_path`). Sources that use torch
    (``torch::Tensor``, ``#include <torch/...>``, ``c10/...``) get the includes ``load_inline`` adds and
    torch's include paths. Results are cached in ``CACHE_DIR / "nvcc"`` by a hash of source, flags and
    nvcc path. Raises `BuildError` (message: the first error line) when the source does not compile
    and `ToolchainError` without nvcc.
    """
    if output not in ("ptx", "cubin"):
        raise ValueError(f"output must be 'ptx' or 'cubin', got {output!r}")
    if isinstance(extra_flags, str) or not all(isinstance(f, str) for f in extra_flags):
        raise TypeError(f"extra_flags must be a list of strings, e.g. [{extra_flags!r}] rather than {extra_flags!r}")
    target = f"sm_{parse_arch(arch)}"
    if not isinstance(cuda_source, str) or not cuda_source.strip():
        raise ValueError("cuda_source must be the CUDA C++ source text")
    nvcc = require_nvcc()
    source = cuda_source
    flags = ["-O3", "-lineinfo", f"-arch={target}", *extra_flags]
    if output == "cubin":
        flags.append("--resource-usage")
    if _TORCH_HINTS.search(cuda_source):
        source = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + cuda_source
        flags += _torch_flags()
    digest = hashlib.sha256("\x1f".join([source, output, *flags, nvcc]).encode()).hexdigest()[:16]
    folder = Path(device.CACHE_DIR) / "nvcc"
    folder.mkdir(parents=True, exist_ok=True)
    src, out = folder / f"{digest}.cu", folder / f"{digest}.{output}"
    if not out.is_file():
        src.write_text(source, encoding="utf-8")
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        try:
            log = run_tool([nvcc, f"-{output}", *flags, "-o", tmp.name, src.name], "nvcc", cwd=folder)
        except BuildError:
            tmp.unlink(missing_ok=True)
            raise
        compiler_log_path(out).write_text(log, encoding="utf-8")
        tmp.replace(out)  # only a complete output lands under the cached name
    return out.read_text(encoding="utf-8") if output == "ptx" else str(out)


def compiler_log_path(output_path: str | Path) -> Path:
    """Where `compile_cuda` kept nvcc's log for the PTX or cubin at ``output_path``."""
    return Path(output_path).with_suffix(".log")
