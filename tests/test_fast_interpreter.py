"""course_utils.fast_interpreter: Triton's interpreter, with the search for builtins remembered, patches what Triton's
own search patches, inside a kernel and outside, and kernels that call helpers compute what they computed."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import course_utils as cu
from course_utils import fast_interpreter

pytestmark = pytest.mark.skipif(not cu.INTERPRET, reason="Triton runs compiled here, not in its interpreter")
ROOT = Path(__file__).resolve().parent.parent


def _patched_names(patch_builtin, pkg) -> list[str]:
    import triton.runtime.interpreter as ti

    scope = ti._LangPatchScope()
    patch_builtin(pkg, ti.interpreter_builder, scope)
    names = [name for _, name, _ in scope._changes]
    scope.restore()
    return names


def test_the_search_patches_what_triton_s_patches_outside_a_kernel_and_inside():
    import triton.language as tl
    import triton.runtime.interpreter as ti
    from lessons.nb07_matmul import tile_order_kernel

    installed = ti._patch_builtin
    assert getattr(installed, "course_utils_remembers", False), "not installed although Triton runs in its interpreter"
    triton_s = installed.course_utils_original
    mine = fast_interpreter._remembering(ti)  # a fresh one, first used as in a process: by a kernel's first patch
    assert _patched_names(mine, tl) == _patched_names(triton_s, tl) != []
    packages = (tl, tl.tensor, tl.math, tl.core, tl.core.tensor_descriptor_base)
    scope = ti._patch_lang(tile_order_kernel.fn)  # as while a kernel runs: a helper's call patches again
    try:  # (tl.core's reduce and associative_scan are plain functions now, the builtins of tl are wrapped: a first
        # look at tl.core from here would not see those two as builtins; they must be patched again once restored)
        for pkg in packages:
            assert _patched_names(mine, pkg) == _patched_names(triton_s, pkg), pkg
    finally:
        scope.restore()
    for pkg in packages:  # and after: the builtins are back, and found again
        assert _patched_names(mine, pkg) == _patched_names(triton_s, pkg) != [], pkg
        assert _patched_names(installed, pkg) == _patched_names(triton_s, pkg), pkg


def test_a_kernel_calling_helpers_computes_the_same(monkeypatch):
    import triton.runtime.interpreter as ti
    from lessons.nb07_matmul import tile_order_kernel

    def orders():
        out = []
        for tiles_m, tiles_n, group_m in ((8, 8, 4), (7, 5, 3), (16, 4, 32)):
            order = torch.full((tiles_m, tiles_n), -1, dtype=torch.int32)
            tile_order_kernel[(tiles_m * tiles_n,)](order, tiles_m, tiles_n, GROUP_M=group_m)  # tile_coords, tl.cdiv
            out.append(order)
        return out

    mine = orders()
    monkeypatch.setattr(ti, "_patch_builtin", ti._patch_builtin.course_utils_original)
    assert all(torch.equal(a, b) for a, b in zip(mine, orders()))
    assert all(sorted(o.flatten().tolist()) == list(range(o.numel())) for o in mine)


def test_the_numpy_type_of_every_triton_type_is_triton_s():
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as ti

    installed = ti._get_np_dtype
    assert getattr(installed, "course_utils_remembers", False), "not installed although Triton runs in its interpreter"
    triton_s = installed.course_utils_original
    scalars = [t for t in vars(tl).values() if isinstance(t, tl.dtype) and not isinstance(t, tl.pointer_type)]
    known = [t for t in scalars if _answer(triton_s, t) is not None]
    assert {tl.float32, tl.bfloat16, tl.int1, tl.float8e4nv} <= set(known)
    types = [*scalars, *(tl.pointer_type(t) for t in known), *(tl.block_type(t, [4, 8]) for t in known),
             *(tl.block_type(tl.pointer_type(t), [16]) for t in known)]
    for _ in range(2):  # the first answer, then the remembered one
        for t in types:
            assert _answer(installed, t) == _answer(triton_s, t), t
    assert installed(tl.block_type(tl.bfloat16, [2])) == np.dtype(np.uint16)

    class Unhashable(tl.dtype):
        __hash__ = None

    for function in (installed, triton_s):  # not remembered: Triton's own error
        with pytest.raises(TypeError, match="unhashable"):
            function(Unhashable("fp32"))


def test_integer_arithmetic_computes_the_same_without_a_check_that_asserts_nothing(monkeypatch):
    import dataclasses

    import triton
    import triton.language as tl
    import triton.runtime.interpreter as ti
    from lessons.nb07_matmul import tile_order_kernel

    @triton.jit
    def wrap_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0)
        tl.store(out_ptr + offs, x * 65537 + 2_000_000_000 - offs, mask=offs < n)  # int32 overflows, wraps

    def run():
        order = torch.full((7, 5), -1, dtype=torch.int32)
        tile_order_kernel[(35,)](order, 7, 5, GROUP_M=3)
        x = torch.arange(-40000, 40000, 997, dtype=torch.int32)
        out = torch.empty_like(x)
        wrap_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        return order, out

    semantic = ti.interpreter_semantic
    installed = semantic.binary_op_sanitize_overflow_impl
    assert hasattr(installed, "course_utils_original"), "not installed although Triton runs in its interpreter"
    mine = run()
    monkeypatch.setattr(semantic, "binary_op_sanitize_overflow_impl", installed.course_utils_original)
    triton_s = run()
    assert all(torch.equal(a, b) for a, b in zip(mine, triton_s))
    assert sorted(mine[0].flatten().tolist()) == list(range(35))
    monkeypatch.setattr(semantic, "binary_op_sanitize_overflow_impl", installed)
    monkeypatch.setattr(semantic.builder, "options", dataclasses.replace(semantic.builder.options, debug=True))
    with pytest.raises(Exception, match="int32 overflow detected for operation mul"):  # under debug it checks
        run()


def _answer(function, t):
    try:
        return function(t)
    except KeyError:  # a type the interpreter has no NumPy type for: the same error either way
        return None


def test_a_patch_of_the_language_changes_what_triton_s_changes():
    import triton.runtime.interpreter as ti
    from lessons.nb07_matmul import tile_coords, tile_order_kernel

    installed = ti._patch_lang
    assert hasattr(installed, "course_utils_original"), "not installed although Triton runs in its interpreter"

    def changes(patch_lang, fn) -> list:
        scope = patch_lang(fn)
        try:
            return [(id(obj), name) for obj, name, _ in scope._changes]
        finally:
            scope.restore()

    for fn in (tile_order_kernel.fn, tile_coords.fn):
        assert changes(installed, fn) == changes(installed.course_utils_original, fn) != [], fn.__name__
    outer = installed(tile_order_kernel.fn)  # as while a kernel runs, when it calls a helper
    try:
        assert changes(installed, tile_coords.fn) == changes(installed.course_utils_original, tile_coords.fn)
    finally:
        outer.restore()
    with pytest.raises(AssertionError, match="triton.language must be visible"):
        installed(types.FunctionType((lambda: None).__code__, {}))


def test_another_triton_is_left_alone():
    def other(pkg, builder, scope):  # not the loop over inspect.getmembers this module knows
        return None

    def dtypes(tt_dtype):  # not the table this module knows
        return None

    def patch_lang(fn):  # not Triton's, word for word
        return None

    module = types.SimpleNamespace(_patch_builtin=other, _patch_attr=lambda *a: None, tl=None, _get_np_dtype=dtypes,
                                   _patch_lang=patch_lang)
    assert fast_interpreter.patch(module) is False and module._patch_builtin is other
    assert module._get_np_dtype is dtypes and module._patch_lang is patch_lang


def test_installed_when_triton_is_imported_after_course_utils():
    script = ("import sys, inspect, course_utils\n"
              "assert 'triton' not in sys.modules, 'import course_utils imported Triton'\n"
              "import triton.runtime.interpreter as ti\n"
              "assert ti._patch_builtin.course_utils_remembers\n"
              "assert 'class GridExecutor' in inspect.getsource(ti.GridExecutor)\n"  # the module's loader still reads it
              "course_utils.fast_interpreter.install()\n"
              "print(sum(type(f).__name__ == '_OnImport' for f in sys.meta_path))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "1"
