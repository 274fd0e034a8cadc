"""Find and describe the tools that build and inspect kernels: nvcc, ptxas, cuobjdump, ninja, the host
C++ compiler; read GPU architecture names and compiler logs. `cuda_build` and `kernel_inspect` both
use this module and nothing else for it.

The host compiler is chosen by behaviour, not by version. Once per machine, a tiny extension whose
``TORCH_CHECK`` fails with a formatted number is built with ``$CXX`` (else ``c++``) and run in a child
process; if that crashes instead of raising ``RuntimeError``, each installed ``g++-N`` is tried, newest
first. (On the reference H100 image the default GCC 13.3 builds extensions whose failing
``TORCH_CHECK(cond, "got ", n)`` kills Python, while ``/usr/bin/g++-13`` raises cleanly.) The verdict is
cached in the cache folder.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Sequence

import torch

from course_utils import device

#: Where nvcc is looked for last (the usual install location, also on Colab).
DEFAULT_CUDA_HOME = "/usr/local/cuda"

# "file.cpp:5:3: error: ...", "file.cu(12): error: ...", "fatal error: x.h: No such file",
# "error C2065: ...", "collect2: error: ld returned 1 exit status", "ptxas error   : ...".
_ERROR_RE = re.compile(r"(^|[\s:)])(fatal )?error( [A-Z]*\d+)?\s*:", re.IGNORECASE)


class BuildError(RuntimeError):
    """A build failed. ``str(err)`` starts with the first error line; ``err.log`` is the full log."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log


class ToolchainError(BuildError):
    """A tool the build needs (C++ compiler, ninja, nvcc) or a CUDA GPU is missing."""


# ------------------------------------------------------------------------------------ architectures
def parse_arch(arch: str | int) -> int:
    """'sm_90', 'sm_90a', 'compute_90', '90' or 90 -> 90."""
    if isinstance(arch, bool) or not isinstance(arch, (str, int)):
        raise TypeError(f"arch must be like 'sm_90' or 90, got {arch!r}")
    if isinstance(arch, int):
        value = arch
    else:
        match = re.fullmatch(r"(?:sm_?|compute_)?(\d{2,3})a?", arch.strip().lower())
        if not match:
            raise ValueError(f"arch must look like 'sm_90' or 'sm_80', got {arch!r}")
        value = int(match.group(1))
    if not 50 <= value <= 130:
        raise ValueError(f"arch sm_{value} is not a CUDA compute capability the course knows")
    return value


def current_arch() -> str | None:
    """``"sm_90"`` for an H100: the architecture of GPU 0, or None without a GPU."""
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


# ------------------------------------------------------------------------------------------ tools
def find_nvcc() -> str | None:
    """nvcc from ``$CUDA_HOME``/``$CUDA_PATH``, else on PATH, else in `DEFAULT_CUDA_HOME`, or None."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    fallback = Path(DEFAULT_CUDA_HOME) / "bin" / "nvcc"
    return str(fallback) if fallback.is_file() else None


def tool_path(name: str) -> str | None:
    """Path of an NVIDIA tool: ``nvcc``, ``ptxas`` or ``cuobjdump``, or None.

    For the last two, Triton's wheel is looked in first (its ``ptxas`` reads the PTX Triton writes),
    then the CUDA toolkit of `find_nvcc`, then ``PATH``.
    """
    if name == "nvcc":
        return find_nvcc()
    import triton  # here, not at the top: `import course_utils` does not import Triton

    candidates = [Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name]
    nvcc = find_nvcc()
    if nvcc:
        candidates.append(Path(nvcc).parent / name)
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    return next((str(p) for p in candidates if p.is_file()), None)


def find_ninja() -> str | None:
    """ninja on PATH, else the one of the ``ninja`` pip package (not on PATH in a venv that is not
    activated), or None."""
    found = shutil.which("ninja")
    if found:
        return found
    try:
        import ninja  # type: ignore[import-not-found]
    except ImportError:
        return None
    candidate = Path(getattr(ninja, "BIN_DIR", "")) / "ninja"
    return str(candidate) if candidate.is_file() else None


def require_ninja() -> str:
    """ninja's path, put on PATH (torch runs ``ninja`` by name); `ToolchainError` if it is missing."""
    found = find_ninja()
    if found is None:
        raise ToolchainError("ninja is not installed: torch builds extensions with it. Install it with `pip install ninja`.")
    if shutil.which("ninja") is None:
        os.environ["PATH"] = str(Path(found).parent) + os.pathsep + os.environ.get("PATH", "")
    return found


def require_nvcc() -> str:
    """nvcc's path; `ToolchainError` if it is missing."""
    found = find_nvcc()
    if found is None:
        raise ToolchainError(
            "nvcc (the CUDA compiler) was not found: not on PATH, not in $CUDA_HOME/bin, not in "
            f"{DEFAULT_CUDA_HOME}/bin. Install the CUDA toolkit or set CUDA_HOME to it.")
    return found


def version(path: str | None) -> str | None:
    """The version line a tool prints (nvcc: its "release" line), or None."""
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return next((line for line in lines if "release" in line), lines[0] if lines else None)


def run_tool(command: Sequence[str], what: str, *, cwd: Path | None = None) -> str:
    """Run a compiler or binary tool; return its stdout + stderr, or raise `BuildError` whose
    message starts with the first error line of the log (`ToolchainError` if it cannot start)."""
    try:
        done = subprocess.run(list(command), capture_output=True, text=True, cwd=cwd, timeout=600)
    except (OSError, subprocess.SubprocessError) as err:
        raise ToolchainError(f"{what} could not run: {err}") from None
    log = done.stdout + done.stderr
    if cwd is not None:
        log = log.replace(str(cwd) + os.sep, "")  # "kernel.cu(12): error" reads better than a full path
    if done.returncode != 0:
        raise BuildError(f"{first_error_line(log)}\n\n{what} failed (exit {done.returncode}). Full log:\n{log}", log=log)
    return log


# ------------------------------------------------------------------------------------------ logs
def first_error_line(log: str) -> str:
    """The first line of a compiler log that reports an error (or the first non-empty line)."""
    lines = [line.strip() for line in log.splitlines()]
    for line in lines:
        if line.startswith(("FAILED:", "[")) or " -c " in line:  # ninja status lines, command lines
            continue
        if _ERROR_RE.search(line):
            return line
    return next((line for line in lines if line), "(empty log)")


def parse_ptxas_log(log: str, kernel: str | None = None) -> dict[str, int]:
    """Registers, spills and static shared memory of one kernel from a ``ptxas -v`` log
    (nvcc ``--resource-usage`` prints the same). ``kernel`` picks its block where the log reports
    several (a mangled C++ name matches its plain name); otherwise the last kernel reported wins."""
    if kernel is not None:
        blocks = re.split(r"(?=ptxas info\s+: (?:Compiling entry function|Function properties for))", log)
        entry = re.compile(rf"(?:entry function '|Function properties for )(?:_Z\w*?{re.escape(kernel)}\w*|"
                           rf"{re.escape(kernel)})\b", re.MULTILINE)
        mine = [b for b in blocks if entry.search(b)]
        log = "".join(mine) or log
    patterns = {"registers": r"Used (\d+) registers", "shared_bytes": r"(\d+) bytes smem",
                "spill_stores_bytes": r"(\d+) bytes spill stores", "spill_loads_bytes": r"(\d+) bytes spill loads"}
    out: dict[str, int] = {}
    for key, pattern in patterns.items():
        for match in re.finditer(pattern, log):
            out[key] = int(match.group(1))
    return out


#: Where the OS cannot lock files (Windows), a torch build lock older than this (seconds) is taken for one left
#: over from a killed build and removed.
STALE_LOCK_SECONDS = 600


def _remove_stale_lock(build_dir: Path, *, max_age: float = STALE_LOCK_SECONDS) -> None:
    lock = build_dir / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age >= max_age:
        warnings.warn(f"removing the lock left by an interrupted build in {build_dir}", stacklevel=4)
        lock.unlink(missing_ok=True)


@contextlib.contextmanager
def build_lock(build_dir: Path):
    """Held while this process builds in ``build_dir`` (an extension's folder, or the compiler probe's).

    torch's build waits, without end, for a ``lock`` file in the folder, and a build interrupted (a kernel
    restart) leaves that file behind. Builds here also hold an OS lock on ``.build.flock``, which the OS releases
    when its process dies: a process that gets it has waited for any live build to finish, so a ``lock`` file
    still there is a dead build's, and it goes."""
    if not isinstance(build_dir, (str, os.PathLike)):
        raise TypeError(f"build_dir must be a folder's path (str or Path), got {type(build_dir).__name__}")
    build_dir = Path(build_dir)
    if not build_dir.is_dir():
        raise ValueError(f"build_dir {build_dir} is not a folder: create it first")
    try:
        import fcntl
    except ImportError:  # no fcntl (Windows): a lock file is taken for a dead build's after STALE_LOCK_SECONDS
        _remove_stale_lock(build_dir)
        yield
        return
    with open(build_dir / ".build.flock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            _remove_stale_lock(build_dir, max_age=0)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------- host compiler
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

#: Host C++ flags every extension build uses (the probe too, so it tests what real builds do).
HOST_CFLAGS = ("-O3",)
#: More flags for the probe's build, given the compiler. `course_utils.cuda_build` sets this to the flags that include
#: the precompiled torch header (under COURSE_PCH=1: ``./course.sh test``), as its builds do: the probe then takes about
#: half as long (it is a build like theirs, and ./course.sh test's first builds wait for its verdict).
probe_cflags: Callable[[str], list[str]] = lambda cxx: []
#: How long one probe build may take (a cold build takes seconds to a minute).
PROBE_TIMEOUT_S = 600


def raises_cleanly(cxx: str) -> bool:
    """Whether an extension built by ``cxx`` turns a failing, formatted ``TORCH_CHECK`` into a
    Python ``RuntimeError``. Runs in a child process, since the failure being tested is a crash."""
    if not isinstance(cxx, str) or not cxx:
        raise TypeError(f"cxx must be the path or name of a C++ compiler, got {cxx!r}")
    require_ninja()
    tag = hashlib.sha256(f"{cxx}|{torch.__version__}".encode()).hexdigest()[:10]
    build_dir = Path(device.CACHE_DIR) / "compiler_probe" / tag
    build_dir.mkdir(parents=True, exist_ok=True)
    try:  # processes probing at once share the build: the first builds, the others wait for it and import it
        with build_lock(build_dir):
            done = subprocess.run([sys.executable, "-c", _PROBE_RUN, f"cxx_probe_{tag}", _PROBE_CPP,
                                   str(build_dir), *HOST_CFLAGS, *probe_cflags(cxx)], capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S, env={**os.environ, "CXX": cxx})
    except subprocess.TimeoutExpired:  # no verdict: "crashes" would be a wrong one, and it would be kept
        raise ToolchainError(f"building a probe extension with {cxx} took over {PROBE_TIMEOUT_S} s; check that "
                             f"{cxx} and ninja run, then try again") from None
    return done.returncode == 0 and "raised: probe: expected a 2-D tensor, got 1-D" in done.stdout


def _gxx_candidates() -> list[str]:
    """``g++-N`` compilers on PATH, newest first."""
    found: dict[int, str] = {}
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        for path in Path(folder or ".").glob("g++-[0-9]*"):
            match = re.fullmatch(r"g\+\+-(\d+)", path.name)
            if match and os.access(path, os.X_OK):
                found.setdefault(int(match.group(1)), str(path))
    return [found[v] for v in sorted(found, reverse=True)]


@functools.lru_cache(maxsize=None)
def compiler_choice() -> tuple[str | None, str]:
    """(the C++ compiler to build extensions with, or None if there is none; why it was chosen)."""
    requested = os.environ.get("CXX") or "c++"
    first = shutil.which(requested)
    if first is None:
        return None, f"{requested!r} is not on PATH"
    verdict_file = Path(device.CACHE_DIR) / "compiler_probe" / "verdict.json"
    key = f"{os.path.realpath(first)}|{version(first)}|{torch.__version__}"
    try:
        verdict = json.loads(verdict_file.read_text())
        if verdict.get("key") == key and shutil.which(verdict.get("cxx", "")):
            return verdict["cxx"], verdict["note"]
    except (OSError, ValueError, KeyError):
        pass
    if find_ninja() is None:  # cannot build the probe; the build itself will say ninja is missing
        return first, f"{requested} (not probed: no ninja)"
    chosen, note = first, f"{requested}: its extensions raise Python errors"
    if not raises_cleanly(first):
        tried = {os.path.realpath(first)}
        fallback = None
        for candidate in [*_gxx_candidates(), shutil.which("c++")]:
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
    """The C++ compiler extensions are built with (see the module docstring), or None."""
    return compiler_choice()[0]


def require_host_compiler() -> str:
    """`host_compiler`, or `ToolchainError` if there is none."""
    found = host_compiler()
    if found is None:
        raise ToolchainError(
            f"No C++ compiler found (looked for {os.environ.get('CXX', 'c++')!r} on PATH). Install one "
            "(apt-get install g++, or Xcode command line tools) or point $CXX at it.")
    return found


def toolchain_report() -> dict[str, str | None]:
    """Paths and versions of the tools a build needs; None where a tool is missing."""
    cxx, ninja, nvcc = host_compiler(), find_ninja(), find_nvcc()
    return {
        "c++": cxx, "c++_version": version(cxx), "c++_choice": compiler_choice()[1] if cxx else None,
        "ninja": ninja, "ninja_version": version(ninja),
        "nvcc": nvcc, "nvcc_version": version(nvcc),
        "ptxas": tool_path("ptxas"), "cuobjdump": tool_path("cuobjdump"),
        "cuda_available": str(torch.cuda.is_available()),
        "arch": current_arch(),
    }
