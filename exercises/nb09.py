"""Notebook 09 (PTX and SASS): functions that read facts off compiled code, graded on real compiler output
(`kernel_inspect.compile_triton` of the course's kernels for sm_80 and sm_90, no GPU needed) and on
instruction lines hypothesis writes (predicates, cache qualifiers, comments, look-alike opcodes)."""

from __future__ import annotations

import functools
import json
import re

import triton
from hypothesis import strategies as st

from course_utils import kernel_inspect as ki
from course_utils.device import CACHE_DIR
from course_utils.grading import Exercise, Inputs
from exercises import case

_BITS = {"8": 8, "16": 16, "32": 32, "64": 64}


#: The kernels whose compiled code the exercises read (notebooks 05-07), compiled on first use.
LABELS = ("add fp32, n % 16 == 0", "add fp16, n % 16 == 0", "add fp32, any n", "softmax fp32", "matmul fp16 sm_80",
          "matmul fp16 sm_90")


@functools.lru_cache(maxsize=None)
def corpus() -> dict[str, tuple[str, str]]:
    """label -> (PTX, SASS or '') of the `LABELS` kernels, compiled once (a few seconds) and kept in CACHE_DIR."""
    path = CACHE_DIR / "exercises" / f"nb09_corpus_triton{triton.__version__}.json"
    if path.is_file():
        return {label: tuple(texts) for label, texts in json.loads(path.read_text(encoding="utf-8")).items()}
    from lessons.nb05_vector_add import add_kernel
    from lessons.nb06_softmax import softmax_kernel
    from lessons.nb07_matmul import matmul_kernel

    vec = lambda t, n: {"x_ptr": f"*{t}", "y_ptr": f"*{t}", "out_ptr": f"*{t}", "n_elements": n}  # noqa: E731
    mm = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
          "stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
    mm_const = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "ACTIVATION": "",
                "stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
    rows = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32", "n_cols": "i32"}
    jobs = [dict(kernel=add_kernel, signature=vec("fp32", 2**20), constexprs={"BLOCK_SIZE": 1024}),
            dict(kernel=add_kernel, signature=vec("fp16", 2**20), constexprs={"BLOCK_SIZE": 1024}),
            dict(kernel=add_kernel, signature=vec("fp32", "i32"), constexprs={"BLOCK_SIZE": 1024}),
            dict(kernel=softmax_kernel, signature=rows, constexprs={"BLOCK_SIZE": 1024}),
            dict(kernel=matmul_kernel, signature=mm, constexprs=mm_const, arch="sm_80", num_warps=8),
            dict(kernel=matmul_kernel, signature=mm, constexprs=mm_const, arch="sm_90", num_warps=8)]
    texts = {label: (c["ptx"], c.stages.get("sass", "")) for label, c in zip(LABELS, ki.compile_triton_jobs(jobs))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(texts), encoding="utf-8")
    return texts


def _text(label: str | None, stage: int, extra: list[str]) -> str:
    return "\n".join([corpus()[label][stage] if label else "", *extra])


# ---- PTX ----------------------------------------------------------------------------------------------------
@st.composite
def _ptx_line(draw) -> str:
    op = draw(st.sampled_from(("ld.global", "st.global", "ld.shared", "ld.param", "ld.global.nc")))
    cache = draw(st.sampled_from(("", ".L1::evict_last", ".L1::no_allocate", ".L2::cache_hint")))
    vec, kind = draw(st.sampled_from(("", ".v2", ".v4"))), draw(st.sampled_from(("b", "f", "u", "s")))
    bits = draw(st.sampled_from(("8", "16", "32", "64") if kind in "bus" else ("16", "32", "64")))
    pred = draw(st.sampled_from(("", "@%p1 ", "@!%p3 ")))
    line = f"\t{pred}{op}{cache}{vec}.{kind}{bits} {{ %r1, %r2 }}, [ %rd4 + 0 ];"
    return draw(st.sampled_from((line, line + " // ld.global.v4.b64 in a comment", "\t// " + line.strip())))


@st.composite
def _ptx_inputs(draw) -> Inputs:
    label, extra = draw(st.sampled_from((None,) + LABELS)), draw(st.lists(_ptx_line(), max_size=4))
    about = (f"the PTX of {label}" if label else "a PTX text") + (f" plus the lines {extra!r}" if extra else "")
    return Inputs(lambda: (_text(label, 0, extra),), about)


def _loads(ptx: str) -> list[int]:
    """Bits moved by each ld.global instruction (comments and debug lines ignored)."""
    sizes = []
    for line in ptx.splitlines():
        match = re.search(r"\bld\.global((?:\.[\w:]+)*)\.[bfus](8|16|32|64)\b", line.split("//", 1)[0])
        if match:
            vec = re.search(r"\.v([24])\b", match.group(1))
            sizes.append((int(vec.group(1)) if vec else 1) * _BITS[match.group(2)])
    return sizes


_ptx_edges = [case(f"the lines {lines!r}", "\n".join(lines)) for lines in (
    ["\t@%p1 ld.global.v4.b64 { %rd1, %rd2, %rd3, %rd4 }, [ %rd9 + 0 ];", "\tld.global.nc.u8 %rs1, [ %rd2 + 0 ];"],
    ["\tld.global.L1::evict_last.v2.f16 { %h1, %h2 }, [ %rd4 + 0 ];  // ld.global.v4.b64"])]


WIDEST_LOAD = Exercise(
    "09.1 widest_load_bits", "widest_load_bits(ptx): the bits moved by the widest ld.global instruction "
    "(ld.global.v4.b32: 128), 0 if there is none", lambda ptx: max(_loads(ptx), default=0), _ptx_inputs(),
    examples=(40, 100), families={"empty": lambda: [case("an empty text", "")], "edges": lambda: _ptx_edges})

LOAD_BYTES = Exercise(
    "09.3 load_bytes_per_thread", "load_bytes_per_thread(ptx): the bytes one thread loads from global memory if "
    "each ld.global instruction runs once", lambda ptx: sum(_loads(ptx)) // 8, _ptx_inputs(), examples=(40, 100),
    families={"empty": lambda: [case("an empty text", "")], "edges": lambda: _ptx_edges})


# ---- SASS ---------------------------------------------------------------------------------------------------
_OPCODES = ("HGMMA", "HMMA", "LDG", "LDGSTS", "STG", "FFMA", "LDS", "BAR", "EXIT")


@st.composite
def _sass_line(draw) -> str:
    pred = draw(st.sampled_from(("", "@P0 ", "@!P1 ", "@UP0 ")))
    op = draw(st.sampled_from(_OPCODES))
    mods = draw(st.sampled_from(("", ".E", ".E.128", ".64x128x16.F32", ".SYNC.DEFER_BLOCKING")))
    address = draw(st.integers(0, 0xFFFF))
    return draw(st.sampled_from((f"/*{address:04x}*/ {pred}{op}{mods} R4, [R2.64] ;",
                                 f"        Function : kernel_using_{op}", f"/*{address:04x}*/ MOV R1, {op}_c[0x0] ;")))


@st.composite
def _sass_inputs(draw) -> Inputs:
    label, extra = draw(st.sampled_from((None,) + LABELS)), draw(st.lists(_sass_line(), max_size=5))
    opcode = draw(st.sampled_from(_OPCODES))
    about = (f"the SASS of {label}" if label else "a SASS text") + (f" plus the lines {extra!r}" if extra else "")
    return Inputs(lambda: (_text(label, 1, extra), opcode), f"{about}, opcode={opcode!r}")


def _count_opcode(sass: str, opcode: str) -> int:
    count = 0
    for line in sass.splitlines():
        match = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", line)
        count += bool(match) and match.group(1) == opcode
    return count


COUNT_OPCODE = Exercise(
    "09.2 count_opcode", "count_opcode(sass, opcode): how many SASS instructions have this opcode (the word "
    "before the first dot, after any @P predicate)", _count_opcode, _sass_inputs(), examples=(40, 100),
    families={"empty": lambda: [case("an empty text, opcode='LDG'", "", "LDG")],
              "edges": lambda: [case(f"the lines {lines!r}, opcode='LDG'", "\n".join(lines), "LDG") for lines in (
                  ["/*0010*/ @!UP0 LDGSTS.E R4, [R2.64] ;", "/*0020*/ LDG.E.128 R4, [R2.64] ;",
                   "/*0030*/ @UP0 LDG.E R2, [R4.64] ;"],)]})
