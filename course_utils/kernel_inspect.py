"""Look inside compiled kernels: Triton stages, PTX, SASS and a summary that says what matters.

`compile_triton` compiles a ``@triton.jit`` kernel for a chosen GPU architecture (sm_75, sm_80, sm_90...)
without that GPU, or any GPU: Triton's compiler and its bundled ``ptxas`` run on the CPU. It compiles in
a child process started with ``TRITON_INTERPRET=0`` (`course_utils.triton_compile_worker`), so it works
the same whether or not this process runs Triton in its interpreter: the kernel is imported there from
its module, or, for a kernel defined in a notebook cell, from its source and the globals it uses. The
child stays up for later compilations (it imports torch and Triton once), and a new one starts when a
module it imported is edited.
`inspect_cuda` does the same for CUDA C++ through `course_utils.cuda_build.compile_cuda`. Both return
`CompiledStages`: the text of each stage (TTIR, TTGIR, LLVM IR, PTX, SASS where ``cuobjdump`` exists)
and a `KernelSummary` (registers, spills, shared memory, vectorized global loads/stores, tensor-core
instructions).

`compare` puts several summaries side by side and `diff` shows what changed between two variants,
with register numbers normalized away so that only real changes remain.

Typical use::

    k = compile_triton(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                       {"BLOCK_SIZE": 1024}, arch="sm_90")
    print(k.summary)                  # registers, ld.global.v4 count, ...
    print(k.grep("ld.global"))       # the PTX lines that load from global memory
"""

from __future__ import annotations

import atexit
import base64
import difflib
import hashlib
import inspect
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import textwrap
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from course_utils.cuda_build import compile_cuda, compiler_log_path
from course_utils.device import CACHE_DIR
from course_utils.toolchain import parse_arch, parse_ptxas_log, run_tool, tool_path

#: The compile worker, run as a script (not imported: it must start with TRITON_INTERPRET=0).
WORKER = Path(__file__).resolve().parent / "triton_compile_worker.py"
#: Where compiled kernels' files (cubins, sources of notebook-defined kernels) go (git-ignored).
BUILD_DIR: Path = CACHE_DIR / "kernel_inspect"

_SCALAR = r"(?:i1|i8|i16|i32|i64|u1|u8|u16|u32|u64|fp8e4nv|fp8e5|fp8e4b15|fp16|bf16|fp32|fp64)"
# '*fp32' (a pointer), 'i32' (a scalar), or 'tensordesc<fp16[64, 64]>' (a host TMA tensor descriptor)
_TYPE_RE = re.compile(rf"^(?:\*?k?{_SCALAR}|tensordesc<{_SCALAR}\[\d+(?:, ?\d+)*\]>)$")

_TORCH_TYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}


class KernelCompileError(RuntimeError):
    """Triton could not compile a kernel for the requested target; the message is the compiler's."""


# ----------------------------------------------------------------------------------------------
# Summaries of PTX and SASS text
# ----------------------------------------------------------------------------------------------

_PTX_COUNTERS: dict[str, re.Pattern[str]] = {
    **{op + width: re.compile(rf"\b{re.escape(op)}" + (rf"(?:\.\w+)*{re.escape(width)}\b" if width else r"\b"))
       for op in ("ld.global", "st.global") for width in ("", ".v2", ".v4")},  # all widths, then 64- and 128-bit
    "ld.shared": re.compile(r"\bld\.shared\b"),
    "st.shared": re.compile(r"\bst\.shared\b"),
    "cp.async": re.compile(r"\bcp\.async\.(?!(?:commit|wait)_group|bulk\.commit|bulk\.wait|mbarrier)"),
    "ldmatrix": re.compile(r"\bldmatrix\b"),
    "mma": re.compile(r"\bmma\.sync\b"),
    "wgmma": re.compile(r"\bwgmma\.mma_async\b"),
}

_SASS_COUNTERS: dict[str, re.Pattern[str]] = {
    "LDG.128": re.compile(r"\bLDG(?:\.\w+)*\.128\b"),
    # mma.sync (HMMA) and Hopper's warpgroup MMA: fp16/bf16 (HGMMA), fp8 (QGMMA), int8 (IGMMA)
    "tensor_core": re.compile(r"\b(?:HMMA|HGMMA|QGMMA|IGMMA)\b"),
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
        elif stripped.startswith(("Function :", "code for", ".")):
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


def summarize(name: str, arch: str, language: str, ptx: str, sass: str | None,
              res: Mapping[str, int | None]) -> KernelSummary:
    """Build a `KernelSummary` from PTX text, clean SASS (or None) and a resources dict
    (``registers``, ``spill_stores_bytes``, ``spill_loads_bytes``, ``shared_bytes``)."""
    if not isinstance(ptx, str) or not (sass is None or isinstance(sass, str)) or not isinstance(res, Mapping):
        raise TypeError("ptx must be the PTX text, sass the SASS text or None, and res a dict of resources")
    p = ptx_counts(ptx)
    s = sass_counts(sass) if sass else {}
    kind = "wgmma" if p["wgmma"] else "mma.sync" if p["mma"] else ""
    return KernelSummary(
        name=name, arch=arch, language=language,
        registers=res.get("registers"), spill_stores_bytes=res.get("spill_stores_bytes"),
        spill_loads_bytes=res.get("spill_loads_bytes"), shared_bytes=res.get("shared_bytes"),
        global_loads=p["ld.global"], vector_global_loads=p["ld.global.v2"] + p["ld.global.v4"],
        global_stores=p["st.global"], vector_global_stores=p["st.global.v2"] + p["st.global.v4"],
        widest_global_load=_widest_load(ptx), async_copies=p["cp.async"],
        shared_memory_ops=p["ld.shared"] + p["st.shared"] + p["cp.async"] + p["ldmatrix"],
        tensor_core_ops=p["mma"] + p["wgmma"], tensor_core_kind=kind,
        sass_instructions=s.get("instructions"), sass_tensor_core_ops=s.get("tensor_core"),
        sass_128bit_loads=s.get("LDG.128"),  # None without SASS
    )


# ----------------------------------------------------------------------------------------------
# Compiled stages
# ----------------------------------------------------------------------------------------------

@dataclass
class CompiledStages:
    """One compiled kernel: ``stages`` maps 'ttir', 'ttgir', 'llir', 'ptx', 'sass' (those that
    exist) to their text; ``summary`` is its `KernelSummary`; ``metadata`` Triton's launch options."""

    name: str
    arch: str
    stages: dict[str, str]
    summary: KernelSummary
    metadata: dict[str, Any] = field(default_factory=dict)

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

    def grep(self, pattern: str, stage: str = "ptx", *, limit: int | None = None) -> list[str]:
        """Lines of ``stage`` containing the substring ``pattern`` (PTX without comments and debug lines)."""
        text = self[stage]
        lines = _code_lines(text) if stage == "ptx" else [ln.strip() for ln in text.splitlines()]
        return [ln for ln in lines if pattern in ln][:limit]

    def show(self, stage: str = "ptx", pattern: str | None = None, *, max_lines: int = 40) -> None:
        """Print ``stage`` (or only the lines containing ``pattern``), at most ``max_lines`` lines."""
        lines = self.grep(pattern, stage) if pattern else self[stage].splitlines()
        for line in lines[:max_lines]:
            print(line)
        if len(lines) > max_lines:
            print(f"... ({len(lines) - max_lines} more lines)")


def _cuobjdump(cubin_path: Path, *, sass: bool = True) -> tuple[str | None, dict[str, int]]:
    """(clean SASS, registers and static shared memory) of a cubin; (None, {}) without cuobjdump. ``sass=False``:
    no SASS (None), only the resource usage (milliseconds; the disassembly takes ~0.4 s even for a small kernel)."""
    tool = tool_path("cuobjdump")
    if tool is None:
        return None, {}
    sass = clean_sass(run_tool([tool, "-sass", str(cubin_path)], "cuobjdump -sass")) if sass else None
    usage = run_tool([tool, "--dump-resource-usage", str(cubin_path)], "cuobjdump --dump-resource-usage")
    match = re.search(r"REG:(\d+)\s+STACK:\d+\s+SHARED:(\d+)", usage)
    return sass, ({"registers": int(match[1]), "shared_bytes": int(match[2])} if match else {})


# ----------------------------------------------------------------------------------------------
# Triton
# ----------------------------------------------------------------------------------------------

def triton_type(value: Any) -> str:
    """Triton signature type of an example argument: a tensor -> '*fp32', an int -> 'i32' or 'i64',
    a type string -> itself (validated)."""
    import torch

    if isinstance(value, str):
        if not _TYPE_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a Triton type like '*fp32', 'i32', 'fp16', 'tensordesc<fp16[64, 64]>'")
        return value
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).replace("torch.", "")
        if name not in _TORCH_TYPES:
            raise TypeError(f"no Triton pointer type for tensors of dtype {value.dtype}")
        return "*" + _TORCH_TYPES[name]
    if isinstance(value, int) and not isinstance(value, bool):
        return "i32" if -2**31 <= value < 2**31 else "i64"
    raise TypeError(f"cannot infer a Triton type from {type(value).__name__}; give a type string like '*fp32'")


def _python_function(kernel: Any) -> types.FunctionType:
    """The plain Python function under a JITFunction, InterpretedFunction, Autotuner, Heuristics..."""
    obj = kernel
    for _ in range(10):
        if inspect.isfunction(obj):
            return obj
        obj = getattr(obj, "fn", None)
    raise TypeError(f"expected a @triton.jit kernel, got {type(kernel).__name__}")


def _is_kernel(value: Any) -> bool:
    return type(value).__name__ in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")


def kernel_source(kernel: Any) -> str:
    """A module's text that defines ``kernel`` for the compile worker: the ``@triton.jit`` helpers it
    calls (recursively), the module aliases and number constants among its globals, then the kernel."""
    blocks: list[str] = []
    header = ["import triton", "import triton.language as tl"]
    done: set[str] = set()

    def add(fn: types.FunctionType) -> None:
        if fn.__name__ in done:
            return
        done.add(fn.__name__)
        names = set(fn.__code__.co_names)
        for const in fn.__code__.co_consts:  # nested code (comprehensions, inner functions)
            if isinstance(const, types.CodeType):
                names |= set(const.co_names)
        for name in sorted(names):
            value = fn.__globals__.get(name)
            if value is None or name in done:
                continue
            if _is_kernel(value):
                add(_python_function(value))
            elif isinstance(value, types.ModuleType) and name not in ("triton", "tl"):
                header.append(f"import {value.__name__} as {name}")
            elif isinstance(value, (bool, int, float, str)):
                header.append(f"{name} = {value!r}")
            elif type(value).__name__ == "constexpr":
                header.append(f"{name} = tl.constexpr({value.value!r})")
        lines = textwrap.dedent(inspect.getsource(fn)).splitlines()
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
        blocks.append("@triton.jit\n" + "\n".join(lines[start:]))  # decorators (autotune...) are not needed

    add(_python_function(kernel))
    return "\n".join(dict.fromkeys(header)) + "\n\n\n" + "\n\n\n".join(blocks) + "\n"


def _kernel_location(kernel: Any) -> dict[str, Any]:
    """How the worker finds ``kernel``: by module and name if its module can be imported, else by source."""
    if not _is_kernel(kernel):
        raise TypeError(f"expected a @triton.jit kernel, got {type(kernel).__name__}")
    fn = _python_function(kernel)
    module = sys.modules.get(fn.__module__)
    importable = (fn.__module__ not in ("__main__", "builtins") and module is not None
                  and getattr(module, "__file__", None) and getattr(module, fn.__name__, None) is not None)
    if importable:
        return {"module": fn.__module__, "name": fn.__name__, "source": None}
    return {"module": None, "name": fn.__name__, "source": kernel_source(kernel)}


def _runtime_argument(name: str, value: Any, divisible_by_16: set[str] | None) -> list[Any]:
    """[triton type, example int or None, 16-divisible?], as the JIT would specialize ``value``."""
    import torch

    kind = triton_type(value)
    example = value if isinstance(value, int) and not isinstance(value, bool) else None
    if divisible_by_16 is not None:
        divisible = name in divisible_by_16
    elif isinstance(value, torch.Tensor):
        divisible = value.data_ptr() % 16 == 0
    elif example is not None:
        divisible = example % 16 == 0
    else:
        divisible = kind.startswith("*")  # a bare pointer type: torch allocations are 256-byte aligned
    return [kind, example, divisible]


#: How long one request to the compile worker may take, in seconds.
WORKER_TIMEOUT_S = 1200
# The worker is run through runpy so that course_utils/ itself is not put first on its import path.
_WORKER_COMMAND = (sys.executable, "-c", "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')",
                   str(WORKER))


class _CompileWorker:
    """The compile worker (`course_utils.triton_compile_worker`), started once and kept for this process's later
    compilations: a grading on a CPU compiles its kernels after every few cases, and a fresh worker would import
    torch and Triton (seconds) each time. A new one starts when this process's import path or environment changed
    (it imports kernels from the same modules), after a fork, after a crash or a timeout, and when a project file
    it imported was edited."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.key: tuple = ()
        self.answers = None
        self.log = None

    def _env(self) -> dict[str, str]:
        project = str(Path(__file__).resolve().parent.parent)
        # The worker sees this process's import path, so it imports kernels from the same modules.
        return {**os.environ, "TRITON_INTERPRET": "0",
                "PYTHONPATH": os.pathsep.join(dict.fromkeys([project, *(p for p in sys.path if p)]))}

    def stop(self) -> None:
        if self.proc is not None:
            if self.key and self.key[0] == os.getpid():  # a forked child leaves its parent's worker alone
                self.proc.kill()
                self.proc.wait()
            for f in (self.answers, self.log):
                f.close()
        self.proc = self.answers = self.log = None

    def _start(self, env: dict[str, str], key: tuple) -> None:
        self.stop()
        read_fd, write_fd = os.pipe()
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        try:
            self.proc = subprocess.Popen([*_WORKER_COMMAND, "--serve", str(write_fd)], stdin=subprocess.PIPE,
                                         stdout=self.log, stderr=self.log, env=env, text=True, pass_fds=(write_fd,))
        finally:
            os.close(write_fd)
        self.answers = os.fdopen(read_fd, "r", encoding="utf-8")
        self.key = key

    def _failed(self, why: str) -> KernelCompileError:
        log = ""
        if self.log is not None:
            self.log.seek(0)
            log = self.log.read()[-4000:]
        self.stop()
        return KernelCompileError(f"the Triton compile worker failed ({why}):\n{log}")

    def _ask(self, line: str) -> dict:
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._failed("it ended") from None
        ready, _, _ = select.select([self.answers], [], [], WORKER_TIMEOUT_S)
        if not ready:
            raise self._failed(f"no answer within {WORKER_TIMEOUT_S} s")
        reply = self.answers.readline()
        if not reply:
            raise self._failed(f"it ended with exit code {self.proc.wait()}")
        return json.loads(reply)

    def compile(self, requests: list, sources: str) -> list:
        env = self._env()
        if os.name == "nt":  # no select() on pipes there: one worker per call
            done = subprocess.run([*_WORKER_COMMAND, sources], input=json.dumps(requests), capture_output=True,
                                  text=True, env=env, timeout=WORKER_TIMEOUT_S)
            if done.returncode != 0:
                raise KernelCompileError(f"the Triton compile worker failed:\n{done.stderr[-4000:]}")
            return json.loads(done.stdout)
        settings = sorted((k, v) for k, v in env.items() if k != "PYTEST_CURRENT_TEST")  # that one names each test
        key = (os.getpid(), hashlib.sha256(json.dumps(settings).encode()).hexdigest())
        line = json.dumps({"jobs": requests, "sources": sources}) + "\n"
        with self.lock:
            for _ in range(2):
                if self.proc is None or self.key != key or self.proc.poll() is not None:
                    self._start(env, key)
                reply = self._ask(line)
                if not reply.get("stale"):
                    return reply["answers"]
                self.stop()  # it imported a file edited since: a fresh worker asks again
            raise self._failed("its modules kept changing")


_WORKER = _CompileWorker()
atexit.register(_WORKER.stop)


def compile_triton_jobs(jobs: Sequence[Mapping[str, Any]], *, quick: bool = False) -> list[CompiledStages]:
    """`compile_triton` for several kernels/targets in one worker process (one Triton import).

    Each job is a mapping of `compile_triton`'s arguments: ``kernel``, ``signature`` and optionally
    ``constexprs``, ``arch``, ``num_warps``, ``num_stages``, ``divisible_by_16``, ``options``.
    ``quick=True`` is for checking that kernels compile: it leaves out the disassembly and the second ``ptxas -v``
    run that only the summary's SASS and spill fields need (about 0.7 s a kernel on a CI core, more than Triton's
    compilation itself when its cache has the kernel); those fields are None, and registers and shared memory still
    come from the cubin.
    """
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {quick!r}")
    requests = []
    for job in jobs:
        job = dict(job)
        unknown = set(job) - {"kernel", "signature", "constexprs", "arch", "num_warps", "num_stages",
                              "divisible_by_16", "options"}
        if unknown:
            raise TypeError(f"unknown compile_triton arguments: {sorted(unknown)}")
        arch = parse_arch(job.get("arch", "sm_90"))
        num_warps, num_stages = job.get("num_warps", 4), job.get("num_stages", 3)
        for label, value in (("num_warps", num_warps), ("num_stages", num_stages)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        if num_warps & (num_warps - 1):
            raise ValueError(f"num_warps must be a power of two, got {num_warps}")
        signature = job["signature"]
        aligned = None if job.get("divisible_by_16") is None else set(job["divisible_by_16"])
        if isinstance(signature, Mapping):
            sig: Any = {n: _runtime_argument(n, v, aligned) for n, v in signature.items()}
        elif isinstance(signature, (list, tuple)):
            sig = [_runtime_argument(f"#{i}", v, aligned) for i, v in enumerate(signature)]
        else:
            raise TypeError("signature must be a mapping name -> type/example value, or a sequence in argument order")
        constexprs = dict(job.get("constexprs") or {})
        for k, v in constexprs.items():  # they travel to the worker as JSON
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise TypeError(f"constexpr {k}={v!r}: give a number, a string or a bool")
        requests.append({**_kernel_location(job["kernel"]), "signature": sig, "constexprs": constexprs,
                         "arch": arch, "num_warps": num_warps, "num_stages": num_stages,
                         "options": dict(job.get("options") or {})})
    answers = _WORKER.compile(requests, str(BUILD_DIR / "sources"))
    results = []
    for request, answer in zip(requests, answers):
        if "error" in answer:
            error = ValueError if answer["kind"] in ("ValueError", "TypeError") else KernelCompileError
            raise error(f"{request['name']} for sm_{request['arch']}: {answer['error']}")
        if answer.get("printed"):
            print(answer["printed"], end="")  # tl.static_print runs at compile time, in the worker
        results.append(_stages_from_triton(answer, request["arch"], quick=quick))
    return results


def compile_triton(kernel: Any, signature: Mapping[str, Any] | Sequence[Any],
                   constexprs: Mapping[str, Any] | None = None, *, arch: str | int = "sm_90",
                   num_warps: int = 4, num_stages: int = 3,
                   divisible_by_16: Iterable[str] | None = None,
                   options: Mapping[str, Any] | None = None) -> CompiledStages:
    """Compile a ``@triton.jit`` kernel for ``arch`` (no GPU needed) and summarize the result.

    Args:
        kernel: the ``@triton.jit`` function (compiled or interpreter mode, or an autotuned kernel).
        signature: the runtime (non-constexpr) arguments, by name in a mapping or in order in a
            sequence. Each value is a Triton type string ('*fp32', 'i32', 'fp16', ...) or an example
            value to infer it from (a tensor -> pointer to its dtype, an int -> 'i32'/'i64'; an int
            equal to 1 becomes a constant, as the JIT does for strides of 1).
        constexprs: values of the ``tl.constexpr`` arguments (the kernel's defaults fill the rest).
        arch: target GPU, e.g. 'sm_75' (T4), 'sm_80' (A100) or 'sm_90' (H100).
        num_warps, num_stages: the launch options the kernel would be compiled with.
        divisible_by_16: names of the arguments Triton may assume are multiples of 16 (pointers:
            16-byte aligned). Default: what the JIT would specialize for the example values;
            for bare type strings, every pointer and no integer.
        options: further backend options (e.g. ``{"debug": True}``).
    Raises ValueError for arguments that do not fit the kernel, `KernelCompileError` if Triton fails.
    """
    return compile_triton_jobs([dict(kernel=kernel, signature=signature, constexprs=constexprs, arch=arch,
                                     num_warps=num_warps, num_stages=num_stages,
                                     divisible_by_16=divisible_by_16, options=options)])[0]


def _stages_from_triton(answer: Mapping[str, Any], arch: int, *, quick: bool = False) -> CompiledStages:
    asm, meta = answer["asm"], answer["metadata"]
    stages = {k: asm[k] for k in ("ttir", "ttgir", "llir", "ptx") if k in asm}
    name = meta["name"]
    workdir = BUILD_DIR / f"triton_{name}_{hashlib.sha256(stages['ptx'].encode()).hexdigest()[:16]}_sm{arch}"
    workdir.mkdir(parents=True, exist_ok=True)
    resources: dict[str, int | None] = {}
    ptxas = None if quick else tool_path("ptxas")
    if ptxas:  # registers and spills, as ptxas reports them
        (workdir / "kernel.ptx").write_text(stages["ptx"], encoding="utf-8")
        gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        resources.update(parse_ptxas_log(run_tool([ptxas, "-v", f"--gpu-name={gpu}", "kernel.ptx", "-o",
                                                   "kernel.cubin"], "ptxas -v", cwd=workdir)))
    cubin_path = workdir / f"{name}.cubin"
    cubin_path.write_bytes(base64.b64decode(asm["cubin"]))
    sass, from_cubin = _cuobjdump(cubin_path, sass=not quick)
    if "registers" in from_cubin:
        resources["registers"] = from_cubin["registers"]  # what the cubin Triton loads really uses
    static_smem = from_cubin.get("shared_bytes", resources.get("shared_bytes", 0))
    if sass:
        stages["sass"] = sass
    resources["shared_bytes"] = int(meta.get("shared", 0) or 0) + int(static_smem or 0)
    label = f"sm_{arch}"
    summary = summarize(name, label, "triton", stages["ptx"], sass, resources)
    return CompiledStages(name=name, arch=label, stages=stages, summary=summary,
                          metadata={k: meta[k] for k in ("num_warps", "num_stages", "shared") if k in meta})


# ----------------------------------------------------------------------------------------------
# CUDA C++ through nvcc
# ----------------------------------------------------------------------------------------------

def inspect_cuda(source: str, *, arch: str | int = "sm_90") -> CompiledStages:
    """Compile CUDA C++ ``source`` for ``arch`` with `course_utils.cuda_build.compile_cuda` (nvcc, no
    GPU) and summarize its first ``__global__`` function: PTX, SASS via cuobjdump, and nvcc's resource
    usage. Raises `course_utils.toolchain.BuildError` with nvcc's first error line."""
    if not isinstance(source, str) or "__global__" not in source:
        raise ValueError("source must be CUDA C++ text containing at least one __global__ kernel")
    gpu = f"sm_{parse_arch(arch)}"
    match = re.search(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?\w[\w:<>\s\*]*?\s+(\w+)\s*\(", source)
    if match is None:
        raise ValueError("could not find the name of a __global__ function in source")
    name = match.group(1)
    ptx = compile_cuda(source, arch=gpu, output="ptx")
    cubin_path = Path(compile_cuda(source, arch=gpu, output="cubin"))
    log = compiler_log_path(cubin_path).read_text(encoding="utf-8")
    resources: dict[str, int | None] = dict(parse_ptxas_log(log, kernel=name))
    stages = {"cuda": source, "ptx": ptx}
    sass, from_cubin = _cuobjdump(cubin_path)
    if sass:
        stages["sass"] = sass
    for key, value in from_cubin.items():
        resources.setdefault(key, value)  # ptxas prints no smem line when a kernel uses none
    return CompiledStages(name=name, arch=gpu, stages=stages,
                          summary=summarize(name, gpu, "cuda", ptx, sass, resources))


# ----------------------------------------------------------------------------------------------
# Comparing variants
# ----------------------------------------------------------------------------------------------

_COMPARE_FIELDS = ["registers", "spill_stores_bytes", "spill_loads_bytes", "shared_bytes", "global_loads",
                   "vector_global_loads", "widest_global_load", "async_copies", "global_stores", "vector_global_stores",
                   "shared_memory_ops", "tensor_core_ops", "tensor_core_kind", "sass_instructions",
                   "sass_128bit_loads", "sass_tensor_core_ops"]


def _require_stages(**variants: Any) -> None:
    for name, value in variants.items():
        if not isinstance(value, CompiledStages):
            raise TypeError(f"{name} must be CompiledStages (from compile_triton or inspect_cuda), got {type(value).__name__}")


def compare(variants: Mapping[str, CompiledStages]) -> pd.DataFrame:
    """Summaries side by side: one row per summary field, one column per named variant."""
    if not isinstance(variants, Mapping) or not variants:
        raise ValueError("compare needs variants: a non-empty dict of label -> CompiledStages")
    _require_stages(**{f"variants[{k!r}]": v for k, v in variants.items()})
    columns = {label: {f: getattr(k.summary, f) for f in _COMPARE_FIELDS} for label, k in variants.items()}
    return pd.DataFrame(columns).rename_axis("field")


_NORMALIZE = [
    (re.compile(r"%(r|rd|rs|p|f|fd|h|hh|b|r_|ri)\d+"), r"%\1#"),  # PTX virtual registers
    (re.compile(r"\bU?R(\d+)\b"), "R#"),                           # SASS registers
    (re.compile(r"\bU?P[0-6]\b"), "P#"),                           # SASS predicates
    (re.compile(r"^/\*[0-9a-f]+\*/\s*"), ""),                      # SASS addresses
    (re.compile(r"\$L__\w+"), "$L"),                               # PTX labels
    (re.compile(r"\.L_x_\d+"), ".L"),                              # SASS labels
]


def normalized_lines(text: str, stage: str, kernel_name: str) -> list[str]:
    """Lines of a stage with register numbers, labels, addresses and the kernel's own name replaced
    by placeholders, so that a diff shows changed instructions, not renumbering."""
    if not all(isinstance(v, str) for v in (text, stage, kernel_name)):
        raise TypeError("text, stage and kernel_name must be strings")
    lines = _code_lines(text) if stage == "ptx" else [ln.strip() for ln in text.splitlines() if ln.strip()]
    name_re = re.compile(rf"\b{re.escape(kernel_name)}(?=\b|_param)")
    out = []
    for line in lines:
        for pattern, repl in _NORMALIZE:
            line = pattern.sub(repl, line)
        out.append(name_re.sub("<kernel>", line))
    return out


def diff(a: CompiledStages, b: CompiledStages, stage: str = "ptx", *, max_lines: int = 60,
         a_label: str | None = None, b_label: str | None = None) -> str:
    """A unified diff of one stage of two variants (`normalized_lines`), at most ``max_lines`` lines."""
    _require_stages(a=a, b=b)
    left, right = normalized_lines(a[stage], stage, a.name), normalized_lines(b[stage], stage, b.name)
    lines = list(difflib.unified_diff(left, right, fromfile=a_label or a.name, tofile=b_label or b.name,
                                      n=1, lineterm=""))
    if not lines:
        return f"no differences in {stage}"
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more diff lines)"]
    return "\n".join(lines)


def instruction_mix(a: CompiledStages, b: CompiledStages, stage: str = "sass") -> pd.DataFrame:
    """Opcode counts of two variants and their difference (only opcodes whose count changed)."""
    _require_stages(a=a, b=b)

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
