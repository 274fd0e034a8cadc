"""The child process in which `course_utils.kernel_inspect.compile_triton` compiles Triton kernels.

A notebook on a CPU runs Triton in interpreter mode, where ``@triton.jit`` kernels are Python
functions and the compiler cannot be used. This process starts with ``TRITON_INTERPRET=0``, imports
each kernel from its module (or from source text written to a file), compiles it with Triton's public
``triton.compile(ASTSource(...), target=GPUTarget(...))`` for the requested architecture (no GPU
needed: the compiler and its ``ptxas`` run on the CPU) and answers with every stage's text.

Protocol: a JSON list of jobs on stdin, a JSON list of answers on stdout (one per job, in order),
each either ``{"printed": ..., "asm": {...}, "metadata": {...}}`` (what the compiler printed, e.g.
``tl.static_print``; the cubin base64-encoded) or ``{"error": ...}``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

if os.environ.get("TRITON_INTERPRET") != "0":  # must be decided before triton is imported
    raise SystemExit("run this worker with TRITON_INTERPRET=0")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402


def load_kernel(job: dict[str, Any], source_dir: Path) -> JITFunction:
    if job.get("source") is not None:
        digest = hashlib.sha256(job["source"].encode()).hexdigest()[:16]
        path = source_dir / f"kernel_{digest}.py"
        if not path.exists():
            source_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(job["source"], encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"kernel_{digest}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(job["module"])
    kernel = getattr(module, job["name"])
    while not isinstance(kernel, JITFunction):  # Autotuner / Heuristics wrap the JITFunction
        if not hasattr(kernel, "fn"):
            raise TypeError(f"{job['name']} is not a @triton.jit kernel")
        kernel = kernel.fn
    return kernel


def compile_one(job: dict[str, Any], source_dir: Path) -> dict[str, Any]:
    kernel = load_kernel(job, source_dir)
    name = kernel.fn.__name__
    arg_names = list(kernel.arg_names)
    constexprs = dict(job["constexprs"])
    unknown = [k for k in constexprs if k not in arg_names]
    if unknown:
        raise ValueError(f"constexprs {unknown} are not arguments of {name}{tuple(arg_names)}")
    py_params = inspect.signature(kernel.fn).parameters
    for p in kernel.params:
        if p.is_constexpr and p.name not in constexprs:
            default = py_params[p.name].default
            if default is inspect.Parameter.empty:
                raise ValueError(f"constexpr argument {p.name!r} of {name} needs a value in constexprs")
            constexprs[p.name] = getattr(default, "value", default)
    runtime = [n for n in arg_names if n not in constexprs]
    given = job["signature"]
    if isinstance(given, list):
        if len(given) != len(runtime):
            raise ValueError(f"signature has {len(given)} entries but {name} has {len(runtime)} runtime "
                             f"arguments {runtime}")
        given = dict(zip(runtime, given))
    missing, extra = [n for n in runtime if n not in given], [n for n in given if n not in runtime]
    if missing or extra:
        raise ValueError(f"signature must name exactly the runtime arguments {runtime} of {name}"
                         + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else ""))
    types, aligned = {}, []
    for n in runtime:
        kind, example, divisible = given[n]  # (triton type, example int or None, 16-divisible?)
        if example == 1 and kind in ("i32", "i64"):  # like the JIT: an integer equal to 1 is a constant
            constexprs[n] = 1
            continue
        types[n] = kind
        if divisible:
            aligned.append(n)
    target = GPUTarget("cuda", job["arch"], 32)
    backend = triton.compiler.compiler.make_backend(target)
    attrs = {(arg_names.index(n),): backend.parse_attr("D") for n in aligned}
    signature = {n: ("constexpr" if n in constexprs else types[n]) for n in arg_names}
    source = ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs)
    options = {"num_warps": job["num_warps"], "num_stages": job["num_stages"], **job["options"]}
    printed = io.StringIO()  # tl.static_print and friends: stdout is the answer channel here
    with contextlib.redirect_stdout(printed):
        compiled = triton.compile(source, target=target, options=options)
    asm = {k: v for k, v in compiled.asm.items() if isinstance(v, str)}
    asm["cubin"] = base64.b64encode(compiled.asm["cubin"]).decode("ascii")
    meta = compiled.metadata._asdict()
    return {"printed": printed.getvalue(), "asm": asm, "metadata": {k: meta[k] for k in ("name", "num_warps", "num_stages", "shared") if k in meta}}


def main() -> None:
    jobs = json.load(sys.stdin)
    source_dir = Path(sys.argv[-1])
    answers = []
    for job in jobs:
        try:
            answers.append(compile_one(job, source_dir))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the caller as text
            answers.append({"error": f"{type(err).__name__}: {err}", "kind": type(err).__name__})
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
