"""Look inside compiled kernels: Triton stages, PTX, SASS and a summary that says what matters.

`compile_triton` compiles a ``@triton.jit`` kernel for a chosen GPU architecture (sm_80, sm_90, ...)
without needing that GPU, or any GPU: Triton's compiler and its bundled ``ptxas`` run on the CPU.
It works whether or not Triton is in interpreter mode (in interpreter mode ``@triton.jit`` returns
an ``InterpretedFunction``; the Python function under it is compiled instead). `compile_cuda` does
the same for a CUDA C++ kernel with ``nvcc``. Both return `CompiledStages`: the text of each stage
(TTIR, TTGIR, LLVM IR, PTX, SASS where ``cuobjdump`` exists) and a `KernelSummary` (registers,
spills, shared memory, vectorized global loads/stores, tensor-core instructions).

`compare` puts several summaries side by side and `diff` shows what changed between two variants,
with register numbers normalized away so that only real changes remain.

Typical use::

    k = compile_triton(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                       {"BLOCK_SIZE": 1024}, arch="sm_90")
    print(k.summary)                  # registers, ld.global.v4 count, ...
    print(k.grep("ld.global"))       # the PTX lines that load from global memory
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import inspect as _pyinspect
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import pandas as pd

from course_utils.device import CACHE_DIR

#: Where `compile_cuda` writes its sources and binaries (git-ignored).
BUILD_DIR: Path = CACHE_DIR / "kernel_inspect"

_TYPE_RE = re.compile(r"^\*?k?(i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp16|bf16|fp32|fp64)$")

_TORCH_TYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}


# ----------------------------------------------------------------------------------------------
# Tools
# ----------------------------------------------------------------------------------------------

def tool_path(name: str) -> str | None:
    """Path of an NVIDIA tool (``ptxas``, ``cuobjdump``, ``nvdisasm``, ``nvcc``), or None.

    Triton ships ``ptxas``, ``cuobjdump`` and ``nvdisasm`` in its wheel, so they are looked up there
    first (their version matches the PTX Triton writes); then ``PATH`` and ``/usr/local/cuda/bin``.
    """
    candidates: list[Path] = []
    if name != "nvcc":
        try:
            import triton
            candidates.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)
        except ImportError:
            pass
    found = shutil.which(name)
    if found:
        candidates.append(Path(found))
    candidates.append(Path("/usr/local/cuda/bin") / name)
    for path in candidates:
        if path.is_file():
            return str(path)
    return None


def _run(cmd: Sequence[str], what: str, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"{what} could not run: {err}") from err
    if proc.returncode != 0:
        log = (proc.stderr or proc.stdout).strip()
        first = next((line for line in log.splitlines() if "error" in line.lower()), log[:300])
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {first}\n--- full log ---\n{log}")
    return proc


# ----------------------------------------------------------------------------------------------
# Architectures
# ----------------------------------------------------------------------------------------------

def parse_arch(arch: str | int) -> int:
    """'sm_90', 'sm_90a', '90' or 90 -> 90."""
    if isinstance(arch, bool):
        raise TypeError(f"arch must be like 'sm_90' or 90, got {arch!r}")
    if isinstance(arch, int):
        value = arch
    elif isinstance(arch, str):
        match = re.fullmatch(r"(?:sm_?)?(\d{2,3})a?", arch.strip().lower())
        if not match:
            raise ValueError(f"arch must look like 'sm_90' or 'sm_80', got {arch!r}")
        value = int(match.group(1))
    else:
        raise TypeError(f"arch must be like 'sm_90' or 90, got {type(arch).__name__}")
    if value < 50 or value > 130:
        raise ValueError(f"arch sm_{value} is not a CUDA compute capability the course knows")
    return value


# ----------------------------------------------------------------------------------------------
# Summaries of PTX and SASS text
# ----------------------------------------------------------------------------------------------

_PTX_COUNTERS: dict[str, re.Pattern[str]] = {
    "ld.global": re.compile(r"\bld\.global\b"),
    "ld.global.v2": re.compile(r"\bld\.global(?:\.\w+)*\.v2\b"),
    "ld.global.v4": re.compile(r"\bld\.global(?:\.\w+)*\.v4\b"),
    "st.global": re.compile(r"\bst\.global\b"),
    "st.global.v2": re.compile(r"\bst\.global(?:\.\w+)*\.v2\b"),
    "st.global.v4": re.compile(r"\bst\.global(?:\.\w+)*\.v4\b"),
    "ld.shared": re.compile(r"\bld\.shared\b"),
    "st.shared": re.compile(r"\bst\.shared\b"),
    "cp.async": re.compile(r"\bcp\.async\.(?!(?:commit|wait)_group|bulk\.commit|bulk\.wait|mbarrier)"),
    "ldmatrix": re.compile(r"\bldmatrix\b"),
    "mma": re.compile(r"\bmma\.sync\b"),
    "wgmma": re.compile(r"\bwgmma\.mma_async\b"),
    "bar.sync": re.compile(r"\b(?:bar\.sync|barrier\.sync)\b"),
}

_SASS_COUNTERS: dict[str, re.Pattern[str]] = {
    "LDG": re.compile(r"\bLDG\b"),
    "LDG.128": re.compile(r"\bLDG(?:\.\w+)*\.128\b"),
    "STG": re.compile(r"\bSTG\b"),
    "STG.128": re.compile(r"\bSTG(?:\.\w+)*\.128\b"),
    "LDS": re.compile(r"\bLDS\b"),
    "STS": re.compile(r"\bSTS\b"),
    "LDGSTS": re.compile(r"\bLDGSTS\b"),
    "LDSM": re.compile(r"\bLDSM\b"),
    "HMMA": re.compile(r"\bHMMA\b"),
    "HGMMA": re.compile(r"\bHGMMA\b"),
    "LDL": re.compile(r"\bLDL\b"),
    "STL": re.compile(r"\bSTL\b"),
    "BAR": re.compile(r"\bBAR\b"),
}


def _code_lines(ptx: str) -> list[str]:
    """PTX instruction lines: no comments, no .loc/.file debug lines or debug sections, no blank lines."""
    lines = []
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if re.match(r"\.section\s+\.debug", line):
            break  # DWARF line tables follow: data, no instructions
        if line and not line.startswith((".loc", ".file", "$L__")):
            lines.append(line)
    return lines


def ptx_counts(ptx: str) -> dict[str, int]:
    """How many PTX instructions of each interesting kind ``ptx`` contains (static counts)."""
    lines = _code_lines(ptx)
    return {key: sum(1 for line in lines if pattern.search(line)) for key, pattern in _PTX_COUNTERS.items()}


def clean_sass(raw: str) -> str:
    """``cuobjdump -sass`` output without the encoding comments: one instruction per line."""
    out = []
    for line in raw.splitlines():
        stripped = line.strip()
        if not stripped or re.fullmatch(r"/\* 0x[0-9a-f]+ \*/", stripped):
            continue
        match = re.match(r"/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;?\s*(?:/\* 0x[0-9a-f]+ \*/)?$", stripped)
        if match:
            out.append(f"/*{match.group(1)}*/ {match.group(2).rstrip(' ;')} ;")
        elif stripped.startswith(("Function :", "code for", ".")) or stripped.startswith("..."):
            out.append(stripped)
    return "\n".join(out)


def _sass_instructions(sass: str) -> list[str]:
    return [line.split("*/", 1)[1].strip() for line in sass.splitlines() if re.match(r"/\*[0-9a-f]{4,}\*/", line)]


def sass_counts(sass: str) -> dict[str, int]:
    """How many SASS instructions of each interesting kind ``sass`` (from `clean_sass`) contains."""
    instrs = [i for i in _sass_instructions(sass) if not re.match(r"(?:@!?U?P\w+\s+)?(NOP|BRA)\b", i)]
    counts = {key: sum(1 for i in instrs if pattern.search(i)) for key, pattern in _SASS_COUNTERS.items()}
    counts["instructions"] = len(instrs)
    return counts


@dataclass(frozen=True)
class KernelSummary:
    """What a performance engineer looks for first in a compiled kernel.

    ``registers`` and ``spill_*`` come from ptxas/cuobjdump (None where the tool is missing);
    ``shared_bytes`` is static plus, for Triton, the dynamic shared memory it requests at launch.
    Load/store/tensor-core counts are static instruction counts in the PTX (a loop body counts once).
    """

    name: str
    arch: str
    language: str
    registers: int | None
    spill_stores_bytes: int | None
    spill_loads_bytes: int | None
    local_bytes: int | None
    shared_bytes: int | None
    global_loads: int
    vector_global_loads: int
    global_stores: int
    vector_global_stores: int
    widest_global_load: str
    async_copies: int
    shared_memory_ops: int
    tensor_core_ops: int
    tensor_core_kind: str
    sass_instructions: int | None
    sass_tensor_core_ops: int | None
    sass_128bit_loads: int | None
    ptx: dict[str, int] = field(default_factory=dict, repr=False)
    sass: dict[str, int] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """The headline fields (without the raw count dictionaries)."""
        d = asdict(self)
        d.pop("ptx")
        d.pop("sass")
        return d

    def __str__(self) -> str:
        def show(v: Any) -> str:
            return "n/a" if v is None else str(v)
        lines = [f"{self.name} ({self.language}, {self.arch})",
                 f"  registers/thread : {show(self.registers)}",
                 f"  spills (st/ld)   : {show(self.spill_stores_bytes)} / {show(self.spill_loads_bytes)} bytes",
                 f"  shared memory    : {show(self.shared_bytes)} bytes",
                 f"  global loads     : {self.global_loads} ({self.vector_global_loads} vectorized, "
                 f"widest {self.widest_global_load or 'none'})",
                 f"  global stores    : {self.global_stores} ({self.vector_global_stores} vectorized)",
                 f"  async copies     : {self.async_copies} (cp.async global -> shared)",
                 f"  shared-mem ops   : {self.shared_memory_ops}",
                 f"  tensor-core ops  : {self.tensor_core_ops}"
                 + (f" ({self.tensor_core_kind})" if self.tensor_core_kind else "")]
        if self.sass_instructions is not None:
            lines.append(f"  SASS             : {self.sass_instructions} instructions, "
                         f"{self.sass_128bit_loads} LDG.128, {self.sass_tensor_core_ops} HMMA/HGMMA")
        return "\n".join(lines)


def _widest_load(ptx: str) -> str:
    best, best_bits = "", 0
    for line in _code_lines(ptx):
        match = re.search(r"\bld\.global((?:\.\w+)*)", line)
        if not match:
            continue
        parts = match.group(1).split(".")
        vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
        bits = next((int(p[1:]) for p in parts if re.fullmatch(r"[bfsu]\d+", p)), 32)
        if vec * bits > best_bits:
            best_bits = vec * bits
            best = f"{'v%d.' % vec if vec > 1 else ''}b{bits} ({vec * bits} bits)"
    return best


def summarize(name: str, arch: str, language: str, ptx: str, sass: str | None = None,
              resources: Mapping[str, int | None] | None = None) -> KernelSummary:
    """Build a `KernelSummary` from PTX text, optional clean SASS and a resources dict
    (``registers``, ``spill_stores_bytes``, ``spill_loads_bytes``, ``local_bytes``, ``shared_bytes``)."""
    p = ptx_counts(ptx)
    s = sass_counts(sass) if sass else {}
    res = dict(resources or {})
    kind = "wgmma" if p["wgmma"] else "mma.sync" if p["mma"] else ""
    return KernelSummary(
        name=name, arch=arch, language=language,
        registers=res.get("registers"), spill_stores_bytes=res.get("spill_stores_bytes"),
        spill_loads_bytes=res.get("spill_loads_bytes"), local_bytes=res.get("local_bytes"),
        shared_bytes=res.get("shared_bytes"),
        global_loads=p["ld.global"], vector_global_loads=p["ld.global.v2"] + p["ld.global.v4"],
        global_stores=p["st.global"], vector_global_stores=p["st.global.v2"] + p["st.global.v4"],
        widest_global_load=_widest_load(ptx), async_copies=p["cp.async"],
        shared_memory_ops=p["ld.shared"] + p["st.shared"] + p["cp.async"] + p["ldmatrix"],
        tensor_core_ops=p["mma"] + p["wgmma"], tensor_core_kind=kind,
        sass_instructions=s.get("instructions") if s else None,
        sass_tensor_core_ops=(s["HMMA"] + s["HGMMA"]) if s else None,
        sass_128bit_loads=s.get("LDG.128") if s else None,
        ptx=p, sass=s,
    )


# ----------------------------------------------------------------------------------------------
# Compiled stages
# ----------------------------------------------------------------------------------------------

@dataclass
class CompiledStages:
    """One compiled kernel: ``stages`` maps 'ttir', 'ttgir', 'llir', 'ptx', 'sass' (those that
    exist) to their text; ``summary`` is its `KernelSummary`; ``cubin`` the binary, if built."""

    name: str
    arch: str
    language: str
    stages: dict[str, str]
    summary: KernelSummary
    cubin: bytes | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    log: str = ""

    def __getitem__(self, stage: str) -> str:
        if stage not in self.stages:
            raise KeyError(f"no stage {stage!r} for {self.name}; available: {list(self.stages)}")
        return self.stages[stage]

    def __contains__(self, stage: object) -> bool:
        return stage in self.stages

    def overview(self) -> pd.DataFrame:
        """One row per stage with its size in lines and characters."""
        return pd.DataFrame([{"stage": k, "lines": v.count("\n") + 1, "chars": len(v)}
                             for k, v in self.stages.items()])

    def grep(self, pattern: str, stage: str = "ptx", *, regex: bool = False, limit: int | None = None) -> list[str]:
        """Lines of ``stage`` containing ``pattern`` (a plain substring unless ``regex``)."""
        text = self[stage]
        lines = _code_lines(text) if stage == "ptx" else [ln.strip() for ln in text.splitlines()]
        if regex:
            compiled = re.compile(pattern)
            hits = [ln for ln in lines if compiled.search(ln)]
        else:
            hits = [ln for ln in lines if pattern in ln]
        return hits if limit is None else hits[:limit]

    def show(self, stage: str = "ptx", pattern: str | None = None, *, max_lines: int = 40,
             regex: bool = False) -> None:
        """Print ``stage`` (or only the lines matching ``pattern``), at most ``max_lines`` lines."""
        lines = self.grep(pattern, stage, regex=regex) if pattern else self[stage].splitlines()
        for line in lines[:max_lines]:
            print(line)
        if len(lines) > max_lines:
            print(f"... ({len(lines) - max_lines} more lines)")


def _resources_from_cubin(cubin_path: Path) -> dict[str, int]:
    tool = tool_path("cuobjdump")
    if tool is None:
        return {}
    out = _run([tool, "--dump-resource-usage", str(cubin_path)], "cuobjdump --dump-resource-usage").stdout
    match = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", out)
    if not match:
        return {}
    reg, _stack, shared, local = map(int, match.groups())
    return {"registers": reg, "shared_bytes": shared, "local_bytes": local}


def _sass_from_cubin(cubin_path: Path) -> str | None:
    tool = tool_path("cuobjdump")
    if tool is None:
        return None
    return clean_sass(_run([tool, "-sass", str(cubin_path)], "cuobjdump -sass").stdout)


def parse_ptxas_log(log: str) -> dict[str, int]:
    """Registers, spills and static shared memory from a ``ptxas -v`` / ``--resource-usage`` log.

    With several kernels in the log, the last one wins (the course compiles one kernel at a time).
    """
    out: dict[str, int] = {}
    for match in re.finditer(r"Used (\d+) registers", log):
        out["registers"] = int(match.group(1))
    for match in re.finditer(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log):
        out["spill_stores_bytes"], out["spill_loads_bytes"] = int(match.group(1)), int(match.group(2))
    for match in re.finditer(r"(\d+) bytes smem", log):
        out["shared_bytes"] = int(match.group(1))
    for match in re.finditer(r"(\d+) bytes stack frame", log):
        out["stack_bytes"] = int(match.group(1))
    return out


def _ptxas_report(ptx: str, arch: int, workdir: Path) -> dict[str, int]:
    tool = tool_path("ptxas")
    if tool is None:
        return {}
    src, obj = workdir / "kernel.ptx", workdir / "kernel.cubin"
    src.write_text(ptx, encoding="utf-8")
    gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
    proc = _run([tool, "-v", f"--gpu-name={gpu}", str(src), "-o", str(obj)], "ptxas -v")
    return parse_ptxas_log(proc.stderr + proc.stdout)


# ----------------------------------------------------------------------------------------------
# Triton
# ----------------------------------------------------------------------------------------------

def _python_function(kernel: Any) -> Any:
    """The plain Python function under a JITFunction, InterpretedFunction, Autotuner, Heuristics..."""
    seen = 0
    obj = kernel
    while not _pyinspect.isfunction(obj):
        inner = getattr(obj, "fn", None)
        if inner is None or seen > 10:
            raise TypeError(f"expected a @triton.jit kernel, got {type(kernel).__name__}")
        obj, seen = inner, seen + 1
    return obj


def jit_function(kernel: Any) -> Any:
    """A compilable ``triton.runtime.JITFunction`` for ``kernel``, even in interpreter mode.

    In interpreter mode ``@triton.jit`` returns an ``InterpretedFunction``; the Python function
    under it is wrapped in a fresh ``JITFunction``. ``@triton.jit`` helpers it calls (global names
    bound to interpreted functions) are re-wrapped the same way, so nested kernels compile too.
    """
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    pyfn = _python_function(kernel)
    if isinstance(getattr(kernel, "fn", None), JITFunction):  # Autotuner/Heuristics over a JITFunction
        return kernel.fn
    if pyfn.__name__ == "<lambda>":
        raise TypeError("expected a @triton.jit kernel defined with `def`, got a lambda")
    try:
        return JITFunction(_with_jit_globals(pyfn, {}))
    except (OSError, ValueError, AttributeError) as err:
        raise TypeError(f"cannot compile {pyfn.__name__}: its source is not available ({err}); "
                        "define kernels with `def` in a file or a notebook cell") from err


def _with_jit_globals(pyfn: Any, memo: dict[int, Any]) -> Any:
    """``pyfn`` with any interpreted @triton.jit helper among its globals replaced by a JITFunction."""
    import types
    from triton.runtime.jit import JITFunction

    replacements = {}
    for name in pyfn.__code__.co_names:
        value = pyfn.__globals__.get(name)
        if value is None or isinstance(value, JITFunction) or _pyinspect.ismodule(value):
            continue
        if type(value).__name__ == "InterpretedFunction" and _pyinspect.isfunction(getattr(value, "fn", None)):
            key = id(value)
            if key not in memo:
                memo[key] = None  # guards against recursion
                memo[key] = JITFunction(_with_jit_globals(value.fn, memo))
            replacements[name] = memo[key]
    if not replacements:
        return pyfn
    new_globals = dict(pyfn.__globals__)
    new_globals.update(replacements)
    clone = types.FunctionType(pyfn.__code__, new_globals, pyfn.__name__, pyfn.__defaults__, pyfn.__closure__)
    clone.__kwdefaults__ = pyfn.__kwdefaults__
    clone.__annotations__ = pyfn.__annotations__
    clone.__qualname__ = pyfn.__qualname__
    clone.__module__ = pyfn.__module__
    clone.__doc__ = pyfn.__doc__
    return clone


_STDLIB_JIT: dict[int, Any] = {}
_MISSING = object()


def _language_objects() -> list[Any]:
    """Modules and classes of ``triton.language`` that the interpreter patches while it runs."""
    try:
        import triton.language as tl
    except ImportError:
        return []
    objs: list[Any] = [mod for name, mod in sorted(sys.modules.items())
                       if mod is not None and name.startswith("triton.language")]
    for cls_name in ("tensor", "dtype", "tensor_descriptor_base"):
        cls = getattr(tl.core, cls_name, None)
        if isinstance(cls, type):
            objs.append(cls)
    return objs


#: The language objects as they were when this module was imported (normally before any kernel ran).
_PRISTINE: dict[int, dict[str, Any]] = {id(obj): dict(vars(obj)) for obj in _language_objects()}


def _is_interpreter_patch(value: Any) -> bool:
    """True for the stand-ins Triton's interpreter installs in triton.language while a kernel runs."""
    if type(value).__name__ == "InterpretedFunction":
        return False  # a @jit library function in interpreter mode: handled separately
    if value is print:
        return True
    inner = value.func if isinstance(value, functools.partial) else value.fget if isinstance(value, property) else value
    return getattr(inner, "__module__", None) == "triton.runtime.interpreter"


def _undo_interpreter_patches(saved: list[tuple[Any, str, Any]]) -> None:
    """Put back the compiled-mode versions of whatever the interpreter left patched.

    Triton's interpreter patches ``triton.language`` while a kernel runs and restores it afterwards,
    except when an interpreted kernel calls a ``@jit`` library function (``tl.cdiv``, ``tl.sum``...):
    that nested call patches ``triton.language.core`` and never restores it (Triton 3.6/3.7). The
    compiler then builds interpreter objects and fails; this undoes those leftovers for a compile.
    """
    for obj in _language_objects():
        pristine = _PRISTINE.get(id(obj), {})
        for name, value in list(vars(obj).items()):
            if not _is_interpreter_patch(value):
                continue
            original = pristine.get(name, _MISSING)
            if original is not _MISSING and _is_interpreter_patch(original):
                original = _MISSING
            if original is _MISSING:
                member = (getattr(value, "__kwdefaults__", None) or {}).get("member")
                original = member if member is not None else _MISSING
            saved.append((obj, name, value))
            if original is _MISSING:
                if name in pristine or not isinstance(obj, type):
                    saved.pop()  # nothing known to put back: leave it
                    continue
                delattr(obj, name)
            else:
                setattr(obj, name, original)


def _stdlib_jit(value: Any) -> Any:
    from triton.runtime.jit import JITFunction
    key = id(value)
    if key not in _STDLIB_JIT:
        _STDLIB_JIT[key] = JITFunction(value.fn)
    return _STDLIB_JIT[key]


@contextlib.contextmanager
def _compilable_language() -> Iterator[None]:
    """In interpreter mode, Triton's own ``@jit`` library functions (``tl.cdiv``, ``tl.sum``,
    ``x.sum()``...) are InterpretedFunctions too, which the compiler cannot call. For the duration
    of a compile, put JITFunctions in their place (module attributes and ``tl.tensor`` methods),
    exactly as in compiled mode, and put everything back afterwards."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
        import triton.language as tl
    except ImportError:
        yield
        return
    saved: list[tuple[Any, str, Any]] = []
    try:
        _undo_interpreter_patches(saved)
        for modname, mod in list(sys.modules.items()):
            if mod is None or not modname.startswith("triton.language"):
                continue
            for attr, value in list(vars(mod).items()):
                if isinstance(value, InterpretedFunction):
                    saved.append((mod, attr, value))
                    setattr(mod, attr, _stdlib_jit(value))
        for attr, value in list(vars(tl.core.tensor).items()):
            inner = value
            if not isinstance(inner, InterpretedFunction):
                cells = getattr(value, "__closure__", None) or ()
                inner = next((c.cell_contents for c in cells
                              if isinstance(c.cell_contents, InterpretedFunction)), None)
            if inner is not None:
                saved.append((tl.core.tensor, attr, value))
                setattr(tl.core.tensor, attr, _stdlib_jit(inner))
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)  # leave Triton exactly as we found it


def triton_type(value: Any) -> str:
    """Triton signature type of an example argument: a tensor -> '*fp32', an int -> 'i32' or 'i64',
    a float -> 'fp32', a type string -> itself (validated)."""
    import torch

    if isinstance(value, str):
        if not _TYPE_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a Triton type like '*fp32', 'i32', 'fp16'")
        return value
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).replace("torch.", "")
        if name not in _TORCH_TYPES:
            raise TypeError(f"no Triton pointer type for tensors of dtype {value.dtype}")
        return "*" + _TORCH_TYPES[name]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"cannot infer a Triton type from {type(value).__name__}; give a type string like '*fp32'")


def _default_divisible(value: Any, type_str: str) -> bool:
    """What the JIT would assume: pointers 16-byte aligned, integers that are multiples of 16."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.data_ptr() % 16 == 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value % 16 == 0
    return type_str.startswith("*")  # a bare pointer type: torch allocations are 256-byte aligned


def _astsource(jit_fn: Any, signature: dict[str, str], constexprs: dict[str, Any], attrs: dict) -> Any:
    """``ASTSource`` across Triton versions: 3.3+ takes ``constexprs`` by name (and the signature
    names every argument, constexprs typed 'constexpr'); some builds call it ``constants``."""
    from triton.compiler import ASTSource

    params = _pyinspect.signature(ASTSource.__init__).parameters
    if "constexprs" in params:
        return ASTSource(jit_fn, signature, constexprs=constexprs, attrs=attrs)
    if "constants" in params:
        return ASTSource(jit_fn, signature, constants=constexprs, attrs=attrs)
    raise RuntimeError(f"this Triton ({_triton_version()}) has an ASTSource the course does not know: {list(params)}")


def _triton_version() -> str:
    import triton
    return triton.__version__


def _divisibility_attr(target: Any) -> list:
    try:
        from triton.compiler.compiler import make_backend
        return make_backend(target).parse_attr("D")
    except Exception:  # noqa: BLE001 - older/newer backends: the 3.x format
        return [["tt.divisibility", 16]]


def compile_triton(kernel: Any, signature: Mapping[str, Any] | Sequence[Any],
                   constexprs: Mapping[str, Any] | None = None, *, arch: str | int = "sm_90",
                   num_warps: int = 4, num_stages: int = 3,
                   divisible_by_16: Iterable[str] | None = None,
                   options: Mapping[str, Any] | None = None) -> CompiledStages:
    """Compile a ``@triton.jit`` kernel for ``arch`` (no GPU needed) and summarize the result.

    Args:
        kernel: the ``@triton.jit`` function (a JITFunction, or an InterpretedFunction in interpreter mode).
        signature: the runtime (non-constexpr) arguments, by name in a mapping or in order in a
            sequence. Each value is a Triton type string ('*fp32', 'i32', 'fp16', ...) or an example
            value to infer it from (a tensor -> pointer to its dtype, an int -> 'i32'/'i64'; an int
            equal to 1 becomes a constant, as the JIT does for strides of 1).
        constexprs: values of the ``tl.constexpr`` arguments (defaults of the kernel are used for missing ones).
        arch: target GPU, e.g. 'sm_80' (A100) or 'sm_90' (H100).
        num_warps, num_stages: the launch options the kernel would be compiled with.
        divisible_by_16: names of the arguments Triton may assume are multiples of 16 (pointers:
            16-byte aligned). Default: what the JIT would specialize for the example values;
            for bare type strings, every pointer and no integer.
        options: further backend options (e.g. ``{"debug": True}``).
    """
    import triton
    from triton.backends.compiler import GPUTarget

    arch_num = parse_arch(arch)
    for label, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if num_warps & (num_warps - 1):
        raise ValueError(f"num_warps must be a power of two, got {num_warps}")
    jit_fn = jit_function(kernel)
    pyfn = _python_function(jit_fn)
    py_params = _pyinspect.signature(pyfn).parameters
    arg_names = list(jit_fn.arg_names)
    constexpr_names = [p.name for p in jit_fn.params if p.is_constexpr]

    constexprs = dict(constexprs or {})
    unknown = [k for k in constexprs if k not in arg_names]
    if unknown:
        raise ValueError(f"constexprs {unknown} are not arguments of {pyfn.__name__}{tuple(arg_names)}")
    for name in constexpr_names:
        if name not in constexprs:
            default = py_params[name].default
            if default is _pyinspect.Parameter.empty:
                raise ValueError(f"constexpr argument {name!r} of {pyfn.__name__} needs a value in constexprs")
            constexprs[name] = getattr(default, "value", default)
    runtime_names = [n for n in arg_names if n not in constexprs]

    if isinstance(signature, Mapping):
        given = dict(signature)
    elif isinstance(signature, (list, tuple)):
        if len(signature) != len(runtime_names):
            raise ValueError(f"signature has {len(signature)} entries but {pyfn.__name__} has "
                             f"{len(runtime_names)} runtime arguments {runtime_names}")
        given = dict(zip(runtime_names, signature))
    else:
        raise TypeError("signature must be a mapping name -> type/example value, or a sequence in argument order")
    missing = [n for n in runtime_names if n not in given]
    extra = [n for n in given if n not in runtime_names]
    if missing or extra:
        raise ValueError(f"signature must name exactly the runtime arguments {runtime_names}"
                         + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else ""))

    for n in list(runtime_names):  # like the JIT: an integer argument equal to 1 becomes a constant
        value = given[n]
        if isinstance(value, int) and not isinstance(value, bool) and value == 1:
            constexprs[n] = 1
            runtime_names.remove(n)
    types = {n: triton_type(given[n]) for n in runtime_names}
    if divisible_by_16 is None:
        aligned = [n for n in runtime_names if _default_divisible(given[n], types[n])]
    else:
        aligned = list(divisible_by_16)
        bad = [n for n in aligned if n not in runtime_names and n not in constexprs]
        if bad:
            raise ValueError(f"divisible_by_16 names {bad} that are not runtime arguments {runtime_names}")
        aligned = [n for n in aligned if n in runtime_names]

    full_signature = {n: ("constexpr" if n in constexprs else types[n]) for n in arg_names}
    target = GPUTarget("cuda", arch_num, 32)
    attr = _divisibility_attr(target)
    attrs = {(arg_names.index(n),): attr for n in aligned}
    src = _astsource(jit_fn, full_signature, constexprs, attrs)
    opts = {"num_warps": num_warps, "num_stages": num_stages, **dict(options or {})}
    with _compilable_language():
        compiled = triton.compile(src, target=target, options=opts)

    asm = compiled.asm
    stages = {k: asm[k] for k in ("ttir", "ttgir", "llir", "ptx") if k in asm}
    cubin = asm.get("cubin") if "cubin" in asm else None
    meta = compiled.metadata._asdict() if hasattr(compiled.metadata, "_asdict") else dict(compiled.metadata)
    name = meta.get("name", pyfn.__name__)
    resources: dict[str, int | None] = {}
    key = hashlib.sha256(stages.get("ptx", "").encode() + bytes(str(arch_num), "ascii")).hexdigest()[:16]
    workdir = BUILD_DIR / f"triton_{name}_{key}"
    workdir.mkdir(parents=True, exist_ok=True)
    if "ptx" in stages:
        resources.update(_ptxas_report(stages["ptx"], arch_num, workdir))
    if cubin:
        cubin_path = workdir / f"{name}.cubin"
        cubin_path.write_bytes(cubin)
        from_cubin = _resources_from_cubin(cubin_path)
        if "registers" in from_cubin:
            resources["registers"] = from_cubin["registers"]  # what the cubin Triton loads really uses
        resources["local_bytes"] = from_cubin.get("local_bytes")
        static_smem = from_cubin.get("shared_bytes", 0)
        sass = _sass_from_cubin(cubin_path)
        if sass:
            stages["sass"] = sass
    else:
        static_smem = resources.get("shared_bytes", 0) or 0
    resources["shared_bytes"] = int(meta.get("shared", 0) or 0) + int(static_smem or 0)
    arch_label = f"sm_{arch_num}"
    summary = summarize(name, arch_label, "triton", stages.get("ptx", ""), stages.get("sass"), resources)
    return CompiledStages(name=name, arch=arch_label, language="triton", stages=stages, summary=summary,
                          cubin=cubin, metadata={k: meta[k] for k in ("num_warps", "num_stages", "shared")
                                                 if k in meta})


# ----------------------------------------------------------------------------------------------
# CUDA C++ through nvcc
# ----------------------------------------------------------------------------------------------

def compile_cuda(source: str, *, arch: str | int = "sm_90", name: str | None = None,
                 flags: Sequence[str] = ("-O3", "-lineinfo")) -> CompiledStages:
    """Compile CUDA C++ ``source`` with nvcc for ``arch``: PTX, and SASS via cuobjdump.

    ``name`` picks one ``__global__`` function for the summary (default: the first one). Needs nvcc
    (no GPU); raises RuntimeError with nvcc's first error line if the source does not compile.
    """
    if not isinstance(source, str) or "__global__" not in source:
        raise ValueError("source must be CUDA C++ text containing at least one __global__ kernel")
    nvcc = tool_path("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc was not found (PATH, /usr/local/cuda/bin): install the CUDA toolkit "
                           "to compile CUDA C++ kernels")
    arch_num = parse_arch(arch)
    kernels = re.findall(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?\w[\w:<>\s\*]*?\s+(\w+)\s*\(", source)
    if name is None:
        if not kernels:
            raise ValueError("could not find the name of a __global__ function in source; pass name=")
        name = kernels[0]
    elif name not in kernels:
        raise ValueError(f"no __global__ function named {name!r} in source (found {kernels})")
    key = hashlib.sha256((source + repr(tuple(flags)) + str(arch_num)).encode()).hexdigest()[:16]
    workdir = BUILD_DIR / f"cuda_{name}_{key}"
    workdir.mkdir(parents=True, exist_ok=True)
    cu = workdir / "kernel.cu"
    cu.write_text(source, encoding="utf-8")
    gpu = f"sm_{arch_num}"
    _run([nvcc, *flags, f"-arch={gpu}", "-ptx", str(cu), "-o", str(workdir / "kernel.ptx")], "nvcc -ptx")
    ptx = (workdir / "kernel.ptx").read_text(encoding="utf-8")
    proc = _run([nvcc, *flags, f"-arch={gpu}", "-cubin", "--resource-usage", str(cu), "-o",
                 str(workdir / "kernel.cubin")], "nvcc -cubin")
    log = proc.stderr + proc.stdout
    resources: dict[str, int | None] = {}
    # --resource-usage reports every kernel: keep the block for the one we summarize
    blocks = re.split(r"(?=ptxas info\s+: Compiling entry function)", log)
    mine = [b for b in blocks if re.search(rf"entry function '(?:_Z\w*?{re.escape(name)}\w*|{re.escape(name)})'", b)]
    resources.update(parse_ptxas_log(mine[0] if mine else log))
    cubin_path = workdir / "kernel.cubin"
    stages = {"cuda": source, "ptx": ptx}
    sass = _sass_from_cubin(cubin_path)
    if sass:
        stages["sass"] = sass
    for key, value in _resources_from_cubin(cubin_path).items():
        resources.setdefault(key, value)  # ptxas prints no smem line when a kernel uses none
    summary = summarize(name, gpu, "cuda", ptx, sass, resources)
    return CompiledStages(name=name, arch=gpu, language="cuda", stages=stages, summary=summary,
                          cubin=cubin_path.read_bytes(), log=log)


# ----------------------------------------------------------------------------------------------
# Comparing variants
# ----------------------------------------------------------------------------------------------

_COMPARE_FIELDS = ["registers", "spill_stores_bytes", "spill_loads_bytes", "shared_bytes", "global_loads",
                   "vector_global_loads", "widest_global_load", "async_copies", "global_stores", "vector_global_stores",
                   "shared_memory_ops", "tensor_core_ops", "tensor_core_kind", "sass_instructions",
                   "sass_128bit_loads", "sass_tensor_core_ops"]


def compare(variants: Mapping[str, CompiledStages | KernelSummary]) -> pd.DataFrame:
    """Summaries side by side: one row per summary field, one column per named variant."""
    if not variants:
        raise ValueError("compare needs at least one variant")
    columns = {}
    for label, item in variants.items():
        summary = item.summary if isinstance(item, CompiledStages) else item
        if not isinstance(summary, KernelSummary):
            raise TypeError(f"variant {label!r} must be CompiledStages or KernelSummary, got {type(item).__name__}")
        columns[label] = {f: getattr(summary, f) for f in _COMPARE_FIELDS}
    return pd.DataFrame(columns).rename_axis("field")


_NORMALIZE = [
    (re.compile(r"%(r|rd|rs|p|f|fd|h|hh|b|r_|ri)\d+"), r"%\1#"),  # PTX virtual registers
    (re.compile(r"\bU?R(\d+)\b"), "R#"),                           # SASS registers
    (re.compile(r"\bU?P[0-6]\b"), "P#"),                           # SASS predicates
    (re.compile(r"^/\*[0-9a-f]+\*/\s*"), ""),                      # SASS addresses
    (re.compile(r"\$L__\w+"), "$L"),                               # PTX labels
    (re.compile(r"\.L_x_\d+"), ".L"),                              # SASS labels
]


def normalized_lines(text: str, stage: str = "ptx", kernel_name: str | None = None) -> list[str]:
    """Lines of a stage with register numbers, labels, addresses (and the kernel's own name, if
    given) replaced by placeholders, so that a diff shows changed instructions, not renumbering."""
    lines = _code_lines(text) if stage == "ptx" else [ln.strip() for ln in text.splitlines() if ln.strip()]
    name_re = re.compile(rf"\b{re.escape(kernel_name)}(?=\b|_param)") if kernel_name else None
    out = []
    for line in lines:
        for pattern, repl in _NORMALIZE:
            line = pattern.sub(repl, line)
        if name_re is not None:
            line = name_re.sub("<kernel>", line)
        out.append(line)
    return out


def diff(a: CompiledStages, b: CompiledStages, stage: str = "ptx", *, normalize: bool = True,
         context: int = 1, max_lines: int = 60, a_label: str | None = None, b_label: str | None = None) -> str:
    """A unified diff of one stage of two variants (normalized by default), at most ``max_lines`` lines."""
    if not isinstance(a, CompiledStages) or not isinstance(b, CompiledStages):
        raise TypeError("diff takes two CompiledStages (from compile_triton or compile_cuda)")
    if normalize:
        left, right = normalized_lines(a[stage], stage, a.name), normalized_lines(b[stage], stage, b.name)
    else:
        left, right = a[stage].splitlines(), b[stage].splitlines()
    lines = list(difflib.unified_diff(left, right, fromfile=a_label or a.name, tofile=b_label or b.name,
                                      n=context, lineterm=""))
    if not lines:
        return f"no differences in {stage}"
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


def instruction_mix(a: CompiledStages, b: CompiledStages, stage: str = "sass") -> pd.DataFrame:
    """Opcode counts of two variants and their difference (only opcodes whose count changed)."""
    def opcodes(c: CompiledStages) -> pd.Series:
        if stage == "sass":
            ops = [re.sub(r"^@!?U?P\w+\s+", "", i).split()[0] for i in _sass_instructions(c[stage])]
        else:
            ops = [re.sub(r"^@!?%\w+\s+", "", ln).split()[0] for ln in _code_lines(c[stage])
                   if not ln.startswith((".", "{", "}", ")")) and not ln.endswith(":")]
        return pd.Series(ops, dtype="object").value_counts()
    left, right = opcodes(a), opcodes(b)
    frame = pd.DataFrame({a.name if a.name != b.name else "a": left, b.name if a.name != b.name else "b": right})
    frame = frame.fillna(0).astype(int)
    frame["change"] = frame.iloc[:, 1] - frame.iloc[:, 0]
    return frame[frame["change"] != 0].sort_values("change", key=abs, ascending=False)
