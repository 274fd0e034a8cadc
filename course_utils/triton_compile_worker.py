"""The child process in which `course_utils.kernel_inspect.compile_triton` compiles Triton kernels.

A notebook on a CPU runs Triton in interpreter mode, where ``@triton.jit`` kernels are Python
functions and the compiler cannot be used. This process starts with ``TRITON_INTERPRET=0``, imports
each kernel from its module (or from source text written to a file), compiles it with Triton's public
``triton.compile(ASTSource(...), target=GPUTarget(...))`` for the requested architecture (no GPU
needed: the compiler and its ``ptxas`` run on the CPU) and answers with every stage's text.

Protocol: a JSON list of jobs on stdin, a JSON list of answers on stdout (one per job, in order),
each either ``{"printed": ..., "asm": {...}, "metadata": {...}}`` (what the compiler printed, e.g.
``tl.static_print``; the cubin base64-encoded) or ``{"error": ...}``.

With ``--serve`` it stays up and answers request after request, so a process that compiles often (the grader
on a CPU, a test run) pays for Python, torch and Triton once: each request is one line on stdin,
``{"jobs": [...], "sources": folder}``, and each answer one line on the file descriptor given after
``--serve`` (anything printed to stdout goes to stderr instead, so it never mixes with the answers). An answer is
``{"answers": [...]}``, or ``{"stale": true}`` when a project file the worker imported was edited since: the
caller then starts a fresh worker and asks again. It ends when stdin closes.
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


def compile_all(jobs: list[dict[str, Any]], source_dir: Path) -> list[dict[str, Any]]:
    answers = []
    for job in jobs:
        try:
            answers.append(compile_one(job, source_dir))
        except Exception as err:  # noqa: BLE001 - every failure goes back to the caller as text
            answers.append({"error": f"{type(err).__name__}: {err}", "kind": type(err).__name__})
    return answers


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _loaded_files() -> dict[str, float]:
    """The project's Python files among the modules imported so far (not the installed packages), with their
    modification times."""
    files, installed = {}, tuple({sys.prefix, sys.base_prefix})
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and path.endswith(".py") and not path.startswith(installed) and "site-packages" not in path:
            if (mtime := _mtime(path)) is not None:
                files[path] = mtime
    return files


def serve(answer_fd: int) -> None:
    answers_out = os.fdopen(answer_fd, "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints (and C code writing to fd 1) land in stderr, not among the answers
    sys.stdout = sys.stderr
    seen = _loaded_files()
    for line in sys.stdin:
        if not line.strip():
            continue
        if any(_mtime(path) not in (mtime, None) for path, mtime in seen.items()):  # None: deleted since
            reply: dict[str, Any] = {"stale": True}  # an edited module: a fresh process imports the new code
        else:
            request = json.loads(line)
            reply = {"answers": compile_all(request["jobs"], Path(request["sources"]))}
            seen.update({path: mtime for path, mtime in _loaded_files().items() if path not in seen})
        answers_out.write(json.dumps(reply) + "\n")
        answers_out.flush()
        if reply.get("stale"):
            return


def main() -> None:
    if "--serve" in sys.argv[:-1]:  # run as a file or through runpy (then sys.argv[1] is this file)
        serve(int(sys.argv[sys.argv.index("--serve") + 1]))
        return
    json.dump(compile_all(json.load(sys.stdin), Path(sys.argv[-1])), sys.stdout)


if __name__ == "__main__":
    main()
