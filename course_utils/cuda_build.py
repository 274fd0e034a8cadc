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
- missing tools (C++ compiler, ninja, nvcc) and a missing GPU give one clear sentence each
  (`ToolchainError`, a `BuildError`);
- flags default to ``-O3`` (C++ and nvcc), ``-lineinfo`` and ``-gencode`` for the current GPU
  (nvcc). Flags you pass are added to these; a flag you pass of the same kind (``-O*``, any
  ``arch``/``-gencode``/``-code`` flag, ``-G``) replaces the default one.

`compile_cuda` runs ``nvcc -ptx`` (or ``-cubin``) on a source and returns the PTX: no GPU is
needed, only nvcc, so a broken kernel fails CI on a CPU machine. It accepts both kernel-only
sources and the ``cuda_sources`` you give `build_extension` (which may use ``torch::Tensor`` and
include ``torch/...`` or ``c10/...`` headers): for those it adds what ``load_inline`` adds (the
``torch/types.h``, ``cuda.h`` and ``cuda_runtime.h`` includes) and torch's include paths. Kernel-only
sources compile in about a second; sources that pull in torch headers take several seconds more.

`host_compiler` picks the C++ compiler. Once per machine, a tiny extension whose ``TORCH_CHECK``
fails with a formatted number is built with ``$CXX`` (else ``c++``) and run in a child process. If
that crashes instead of raising ``RuntimeError``, each installed ``g++-N`` is tried, newest first. On the reference H100 image the default GCC 13.3 builds extensions whose failing
``TORCH_CHECK(cond, "got ", n)`` kills Python with a segmentation fault, while ``g++-12`` raises
cleanly. A wrapper's error path must give a Python error, not a crash, so the compiler is chosen
by that behaviour rather than by its version. The verdict is cached in the cache folder.

`toolchain_report` says which compilers were found, with their versions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import types
import warnings
from pathlib import Path
from typing import Sequence

import torch

from course_utils import device

__all__ = [
    "BuildError", "ToolchainError", "build_extension", "compile_cuda", "toolchain_report", "host_compiler",
    "current_arch", "default_cflags", "default_cuda_cflags", "extension_name", "first_error_line",
    "extensions_dir",
]

#: Where `find_nvcc` looks last (the usual install location, also on Colab).
DEFAULT_CUDA_HOME = "/usr/local/cuda"

#: A torch build lock older than this (seconds) is left over from a killed build and is removed.
STALE_LOCK_SECONDS = 600

# "file.cpp:5:3: error: ...", "file.cu(12): error: ...", "fatal error: x.h: No such file",
# "error C2065: ...", "collect2: error: ld returned 1 exit status", "ptxas error   : ...".
_ERROR_RE = re.compile(r"(^|[\s:)])(fatal )?error( [A-Z]*\d+)?\s*:", re.IGNORECASE)

_LOADED: dict[str, types.ModuleType] = {}


class BuildError(RuntimeError):
    """A build failed. ``str(err)`` starts with the first error line; ``err.log`` is the full log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class ToolchainError(BuildError):
    """A tool the build needs (C++ compiler, ninja, nvcc) or a CUDA GPU is missing."""


# --------------------------------------------------------------------------------------- tools
def _which(program: str) -> str | None:
    return shutil.which(program)


_PROBE_CPP = r"""
torch::Tensor probe(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2, "probe: expected a 2-D tensor, got ", x.dim(), "-D");
    return x;
}
"""

_PROBE_RUN = """
import sys, torch
from torch.utils.cpp_extension import load_inline
module = load_inline(name=sys.argv[1], cpp_sources=sys.argv[2], functions=["probe"],
                     build_directory=sys.argv[3], extra_cflags=sys.argv[4:])
try:
    module.probe(torch.ones(3))
except RuntimeError as err:
    print("raised:", str(err).splitlines()[0])
"""


def raises_cleanly(cxx: str, build_root: Path | None = None) -> bool:
    """Whether an extension built by ``cxx`` turns a failing, formatted ``TORCH_CHECK`` into a
    Python ``RuntimeError``. Runs in a child process, since the failure being tested is a crash."""
    _require_ninja()
    tag = hashlib.sha256(f"{cxx}|{torch.__version__}".encode()).hexdigest()[:10]
    build_dir = (build_root or Path(device.CACHE_DIR) / "compiler_probe") / tag
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE_RUN, f"cxx_probe_{tag}", _PROBE_CPP, str(build_dir),
                               *default_cflags()],  # the flags real builds use
                              capture_output=True, text=True, timeout=600, env={**os.environ, "CXX": cxx})
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and "raised: probe: expected a 2-D tensor, got 1-D" in done.stdout


def _gxx_candidates() -> list[str]:
    """``g++-N`` compilers on PATH, newest first."""
    found = {}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for path in Path(folder or ".").glob("g++-[0-9]*"):
            match = re.fullmatch(r"g\+\+-(\d+)", path.name)
            if match and os.access(path, os.X_OK):
                found.setdefault(int(match.group(1)), str(path))
    return [found[v] for v in sorted(found, reverse=True)]


@functools.lru_cache(maxsize=None)
def compiler_choice() -> tuple[str | None, str]:
    """(the C++ compiler to build extensions with, why it was chosen); see `host_compiler`."""
    requested = os.environ.get("CXX") or "c++"
    first = _which(requested)
    if first is None:
        return None, f"{requested!r} is not on PATH"
    verdict_file = Path(device.CACHE_DIR) / "compiler_probe" / "verdict.json"
    key = f"{os.path.realpath(first)}|{_version(first)}|{torch.__version__}"
    try:
        verdict = json.loads(verdict_file.read_text())
        if verdict.get("key") == key and _which(verdict.get("cxx", "")):
            return verdict["cxx"], verdict["note"]
    except (OSError, ValueError, KeyError):
        pass
    if find_ninja() is None:  # cannot build the probe; the build itself will say ninja is missing
        return first, f"{requested} (not probed: no ninja)"
    chosen, note = first, f"{requested}: its extensions raise Python errors"
    if not raises_cleanly(first):
        tried = {os.path.realpath(first)}
        fallback = None
        for candidate in [*_gxx_candidates(), _which("c++")]:
            if candidate and os.path.realpath(candidate) not in tried:
                tried.add(os.path.realpath(candidate))
                if raises_cleanly(candidate):
                    fallback = candidate
                    break
        if fallback is None:
            note = f"{requested}: its extensions crash on a failing TORCH_CHECK, and no g++-N does better"
            warnings.warn(f"extensions built by {first} crash when a TORCH_CHECK fails, and no other compiler "
                          "on PATH does better: wrappers' errors will kill the process. Point $CXX at a "
                          "compiler that matches your torch build.", RuntimeWarning, stacklevel=2)
        else:
            chosen = fallback
            note = f"{Path(fallback).name}: {requested} ({first}) builds extensions that crash on a failing TORCH_CHECK"
    verdict_file.parent.mkdir(parents=True, exist_ok=True)
    partial = verdict_file.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"key": key, "cxx": chosen, "note": note}))
    partial.replace(verdict_file)  # atomic: notebooks running side by side may probe at once
    return chosen, note


def host_compiler() -> str | None:
    """The C++ compiler extensions are built with: ``$CXX`` (else ``c++``) if an extension it builds
    turns a failing ``TORCH_CHECK`` into a Python error, else the newest ``g++-N`` that does.
    None if there is no compiler at all. Probed once per machine; the verdict is cached."""
    return compiler_choice()[0]


host_compiler.cache_clear = compiler_choice.cache_clear  # type: ignore[attr-defined]


def find_cxx() -> str | None:
    """The C++ compiler extensions are built with (see `host_compiler`), as a path, or None."""
    return host_compiler()


def _ninja_from_package() -> str | None:
    """The ninja of the ``ninja`` pip package (in a venv that is not activated it is not on PATH)."""
    try:
        import ninja  # type: ignore[import-not-found]
    except ImportError:
        return None
    candidate = Path(getattr(ninja, "BIN_DIR", "")) / "ninja"
    return str(candidate) if candidate.is_file() else None


def find_ninja() -> str | None:
    """ninja on PATH, else the one of the ``ninja`` pip package, or None."""
    return _which("ninja") or _ninja_from_package()


def find_nvcc() -> str | None:
    """nvcc from ``$CUDA_HOME``/``$CUDA_PATH``, else on PATH, else in `DEFAULT_CUDA_HOME`, or None."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    found = _which("nvcc")
    if found:
        return found
    fallback = Path(DEFAULT_CUDA_HOME) / "bin" / "nvcc"
    return str(fallback) if fallback.is_file() else None


def _version(path: str | None, flag: str = "--version") -> str | None:
    if path is None:
        return None
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if not lines:
        return None
    for line in lines:  # nvcc prints a banner; its version is on the "release" line
        if "release" in line:
            return line
    return lines[0]


def toolchain_report() -> dict[str, str | None]:
    """Paths and versions of the tools a build needs; None where a tool is missing."""
    cxx, ninja, nvcc = find_cxx(), find_ninja(), find_nvcc()
    return {
        "c++": cxx, "c++_version": _version(cxx), "c++_choice": compiler_choice()[1] if cxx else None,
        "ninja": ninja, "ninja_version": _version(ninja),
        "nvcc": nvcc, "nvcc_version": _version(nvcc),
        "cuda_available": str(torch.cuda.is_available()),
        "arch": current_arch(),
    }


def _require_cxx() -> None:
    if find_cxx() is None:
        raise ToolchainError(
            f"No C++ compiler found (looked for {os.environ.get('CXX', 'c++')!r} on PATH). Install one "
            "(apt-get install g++, or Xcode command line tools) or point $CXX at it.")


def _require_ninja() -> str:
    found = find_ninja()
    if found is None:
        raise ToolchainError("ninja is not installed: torch builds extensions with it. "
                             "Install it with `pip install ninja`.")
    directory = str(Path(found).parent)
    if _which("ninja") is None:  # torch runs `ninja` by name: make the package's one findable
        os.environ["PATH"] = directory + os.pathsep + os.environ.get("PATH", "")
    return found


def _require_nvcc() -> str:
    found = find_nvcc()
    if found is None:
        raise ToolchainError(
            "nvcc (the CUDA compiler) was not found: not on PATH, not in $CUDA_HOME/bin, not in "
            f"{DEFAULT_CUDA_HOME}/bin. Install the CUDA toolkit or set CUDA_HOME to it.")
    return found


# --------------------------------------------------------------------------------------- flags
def current_arch() -> str | None:
    """``"sm_90"`` for an H100: the architecture of GPU 0, or None without a GPU."""
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def default_cflags() -> list[str]:
    """Host C++ flags `build_extension` uses unless told otherwise."""
    return ["-O3"]


def default_cuda_cflags(arch: str | None = None) -> list[str]:
    """nvcc flags: ``-O3``, ``-lineinfo`` (source lines in profilers) and real code for ``arch``."""
    arch = arch or current_arch()
    flags = ["-O3", "-lineinfo"]
    if arch:
        number = arch.removeprefix("sm_").removeprefix("compute_")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    return flags


def _kind(flag: str) -> str | None:
    if re.match(r"^-O\d?$|^-O[a-z]+$", flag):
        return "opt"
    if "arch" in flag or flag.startswith(("-gencode", "--generate-code", "-code", "--gpu-code")):
        return "arch"
    if flag in ("-G", "--device-debug"):
        return "debug"
    return None


def _merge(defaults: Sequence[str], extra: Sequence[str] | None) -> list[str]:
    """Defaults plus ``extra``; a default is dropped when ``extra`` has a flag of its kind."""
    extra = list(extra or [])
    given = {_kind(f) for f in extra} - {None}
    if "debug" in given:  # -G replaces both the optimisation level and -lineinfo
        given |= {"opt", "lineinfo"}
    kept = [f for f in defaults if _kind(f) not in given and not (f == "-lineinfo" and "lineinfo" in given)]
    return kept + [f for f in extra if f not in kept]


# --------------------------------------------------------------------------------------- build
def extensions_dir() -> Path:
    """The folder that holds one build folder per extension module."""
    return Path(device.CACHE_DIR) / "extensions"


def extension_name(name: str, cpp_sources: str, cuda_sources: str | None = None,
                   functions: Sequence[str] = (), cflags: Sequence[str] = (),
                   cuda_cflags: Sequence[str] = ()) -> str:
    """``f"{name}_{hash}"``: the module name `build_extension` gives these sources and flags."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name must be a Python identifier (letters, digits, _), got {name!r}")
    digest = hashlib.sha256()
    for part in (name, cpp_sources, cuda_sources or "", "\0".join(functions), "\0".join(cflags),
                 "\0".join(cuda_cflags), torch.__version__, sys.version.split()[0], current_arch() or "cpu"):
        digest.update(part.encode())
        digest.update(b"\x1f")
    return f"{name}_{digest.hexdigest()[:12]}"


def first_error_line(log: str) -> str:
    """The first line of a compiler log that reports an error (or the first non-empty line)."""
    lines = [line.strip() for line in log.splitlines()]
    for line in lines:
        if line.startswith(("FAILED:", "[")) or " -c " in line:  # ninja status lines, command lines
            continue
        if _ERROR_RE.search(line):
            return line
    return next((line for line in lines if line), "(empty log)")


def _remove_stale_lock(build_dir: Path) -> None:
    lock = build_dir / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_LOCK_SECONDS:
        warnings.warn(f"removing the lock left by an interrupted build in {build_dir}", stacklevel=3)
        lock.unlink(missing_ok=True)


def _build_failure(module_name: str, build_dir: Path, log: str) -> BuildError:
    log = log.replace(str(build_dir) + os.sep, "")  # "cuda.cu(12): error: ..." reads better than the full path
    first = first_error_line(log)
    return BuildError(f"{first}\n\nBuilding extension {module_name!r} failed (build folder: {build_dir}). "
                      f"Full compiler log:\n{log}", log=log)


def build_extension(name: str, cpp_sources: str, cuda_sources: str | None = None,
                    functions: Sequence[str] = (), *, extra_cflags: Sequence[str] | None = None,
                    extra_cuda_cflags: Sequence[str] | None = None,
                    verbose: bool = False) -> types.ModuleType:
    """Compile ``cpp_sources`` (and ``cuda_sources``) into a Python module and import it.

    ``functions`` are the C++ functions to expose (``load_inline`` writes the bindings; leave it
    empty if the sources have their own ``PYBIND11_MODULE``); ``cpp_sources`` then only needs
    their declarations. Calling it again with the same arguments returns the loaded module at
    once; in a new process the cached build is reused (a second or two). Raises `BuildError`
    (message: the first compiler error line, then the log) when the sources do not compile and
    `ToolchainError` when a tool or, for ``cuda_sources``, a CUDA GPU is missing.
    """
    if isinstance(functions, str):
        functions = [functions]
    functions = list(functions)
    if cuda_sources is not None and not torch.cuda.is_available():
        raise ToolchainError(
            "cuda_sources were given but CUDA is not available on this machine (torch "
            f"{torch.__version__}, torch.cuda.is_available() is False), so a CUDA extension could not "
            "run here. Pass the C++ twin of the kernel as cpp_sources (cuda_sources=None), or check "
            "that the CUDA source compiles with compile_cuda(source), which needs only nvcc.")
    cflags = _merge(default_cflags(), extra_cflags)
    cuda_cflags = _merge(default_cuda_cflags(), extra_cuda_cflags) if cuda_sources is not None else []
    _require_cxx()
    cxx = find_cxx()
    # The compiler is part of the name: a module built by another compiler is another module.
    module_name = extension_name(name, cpp_sources, cuda_sources, functions, [*cflags, f"cxx={cxx}"],
                                 cuda_cflags)
    if module_name in _LOADED:
        return _LOADED[module_name]

    _require_ninja()
    if cuda_sources is not None:
        _require_nvcc()

    from torch.utils.cpp_extension import load_inline

    build_dir = extensions_dir() / module_name
    build_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_lock(build_dir)
    previous_cxx = os.environ.get("CXX")
    os.environ["CXX"] = str(cxx)  # torch's build reads $CXX; restored below
    try:
        module = load_inline(
            name=module_name, cpp_sources=cpp_sources, cuda_sources=cuda_sources,
            functions=functions or None, extra_cflags=cflags,
            extra_cuda_cflags=cuda_cflags or None, build_directory=str(build_dir),
            verbose=verbose, with_cuda=cuda_sources is not None)
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

    ``arch`` is the target (``"sm_90"`` for an H100); ``output`` is ``"ptx"`` or ``"cubin"``.
    Sources that use torch (``torch::Tensor``, ``#include <torch/...>``, ``c10/...``) get the
    includes ``load_inline`` adds and torch's include paths. Results are cached in
    ``CACHE_DIR / "nvcc"`` by a hash of source, flags and nvcc path. Raises `BuildError` (message:
    the first error line) when the source does not compile and `ToolchainError` without nvcc.
    """
    if output not in ("ptx", "cubin"):
        raise ValueError(f"output must be 'ptx' or 'cubin', got {output!r}")
    if not re.fullmatch(r"(sm|compute)_\d+[a-z]?", arch):
        raise ValueError(f"arch must look like 'sm_90' (or 'sm_90a'), got {arch!r}")
    nvcc = _require_nvcc()
    source = cuda_source
    flags = ["-O3", "-lineinfo", f"-arch={arch.replace('compute_', 'sm_')}", *extra_flags]
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
        command = [nvcc, f"-{output}", *flags, "-o", str(tmp), str(src)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, cwd=folder, timeout=600)
        except OSError as err:
            raise ToolchainError(f"could not run nvcc at {nvcc}: {err}") from None
        log = (done.stdout + done.stderr).replace(str(folder) + os.sep, "")
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise BuildError(f"{first_error_line(log)}\n\nnvcc failed ({' '.join(command)}). "
                             f"Full log:\n{log}", log=log)
        tmp.replace(out)  # only a complete output lands under the cached name
    return out.read_text(encoding="utf-8") if output == "ptx" else str(out)
