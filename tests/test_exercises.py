"""The exercises at the end of notebooks 01-14 (exercises/, solutions/, course_utils.grading).

- every reference solution passes its grader, within the time bound;
- every exercise has at least three plausible wrong answers (tests/wrong_solutions/), and each fails its
  grader with a message that says what is wrong (the test asserts on the words), within the time bound; those
  of notebooks 01-14 have at least five, two or more drawn from the grader's input families and invariants
  (several programs, kinks, gaps, limits, races, inputs written, views returned, compile errors, crashes:
  tests/test_grading.py tests the grader's side of each);
- an unfilled stub (None, or raising NotImplementedError) is "not attempted yet", at once;
- the solutions' Triton kernels compile for sm_90 (what test_compile_targets does for lessons/);
- a GPU grading of each reference solution compiles few Triton kernels (counted here, on a CPU).

On a CPU the C++ twins of notebooks 03 and 04 (the reference and the wrong variants) are built into one
extension, once (a build costs 25-40 s here). On a GPU the CUDA solutions are built and graded instead, and each
wrong answer that runs kernels is graded in a process of its own (one that loses its GPU fails no other test).
"""

from __future__ import annotations

import importlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from course_utils import kernel_inspect as ki
from course_utils.grading import COMPILE_ARCHS, NOT_ATTEMPTED, Exercise, Report, grade

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/wrong_solutions is imported as wrong_solutions

#: The bound on one grading (a solution passing, or a wrong answer failing and being shrunk; on a CPU its CPU
#: time, see `_timed`) on the CI machine: 2 cores, Triton's interpreter. Measured on such a machine: at most 2.4 s
#: (07.1, whose reference runs tile_order_kernel in the interpreter), and 6 s for the first 09 grading, which
#: compiles its kernels.
#: On the H100 under `pytest -n 12` (16 cores), at most 12.5 s per grading and 87 s for the file, once each
#: worker ran one torch thread (tests/conftest.py): with every core's worth of threads in each of the 12 workers,
#: gradings took up to 116 s, compiled kernels or not.
SECONDS_PER_GRADING = 20.0
#: The most Triton compilations a GPU grading of a reference solution may cause, for every exercise. There
#: each new specialization of a kernel (a constexpr value, a pointer dtype or 16-byte alignment, an integer
#: argument equal to 1 or a multiple of 16) is a compilation: 0.1-0.45 s for the elementwise kernels, 0.45 s
#: for split_k_kernel, up to 0.93 s (linear_kernel) on an H100 with Triton 3.6, from an empty cache. 12 at
#: 0.93 s take 11 s and leave 9 s of SECONDS_PER_GRADING to run the cases (05.2's 200 took 11 s there, so it
#: draws 100), and a margin for a count that came out below the H100's (62 against 68 compilations for 06.1
#: before). Drawn freely, inputs made up to 97 compilations (07.3, 104 s; 12.3: 94, 44 s); each exercise now
#: draws from a few configurations that cover its factors pairwise (`exercises.pairwise`), with sizes of one
#: kind (`exercises.kind_sizes`), so that the reference compiles about once per configuration.
GPU_COMPILATIONS = 12
#: The exercises whose reference is plain Python: their gradings compile no kernel. (The CUDA exercises,
#: 03.2 and 04.4, are built once with nvcc on a GPU, not per case: not counted.)
PLAIN_PYTHON = {"nb01.EFFECTIVE_GBPS", "nb01.HALF_BANDWIDTH", "nb01.TIME_CALL", "nb02.TOP_KERNEL",
                "nb02.SYNCS_PER_STEP", "nb03.IDLE_THREADS", "nb04.TILE_INTENSITY", "nb04.STORE_WAVEFRONTS", "nb04.WAVES", "nb07.GROUPED_ORDER",
                "nb09.WIDEST_LOAD", "nb09.COUNT_OPCODE", "nb09.LOAD_BYTES", "nb10.BUSY_SHARE", "nb11.ITEM_CALLS",
                "nb14.SPLIT_K_PLAN", "nb16.BLOCK_SAVED", "nb16.OFFLOAD_PACK", "nb17.BUCKETS",
                "nb17.BUS_BANDWIDTH"}
NOTEBOOKS = ("nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07", "nb08", "nb09", "nb10", "nb11", "nb12", "nb13", "nb14")

#: exercise -> its reference solution in solutions.nbNN ("cpp:" names: the C++ twin in the fixtures' extension)
SOLUTIONS = {
    "nb01": {"EFFECTIVE_GBPS": "effective_gbps", "HALF_BANDWIDTH": "half_bandwidth_size", "TIME_CALL": "time_call"},
    "nb02": {"TOP_KERNEL": "top_kernel", "SYNCS_PER_STEP": "syncs_per_step"},
    "nb03": {"IDLE_THREADS": "idle_threads", "SQUARE_STRIDED": "cpp:square_strided_ref"},
    "nb04": {"TILE_INTENSITY": "tile_intensity", "STORE_WAVEFRONTS": "transposed_store_wavefronts", "WAVES": "waves",
             "RUNG4": "cpp:gemm_rung4_ref"},
    "nb05": {"AXPY": "axpy", "ADD_BIAS": "add_bias", "VECTOR_SUM": "vector_sum"},
    "nb06": {"LOG_SOFTMAX": "log_softmax", "SOFTMAX_LOOPED": "softmax_looped"},
    "nb07": {"GROUPED_ORDER": "grouped_order", "SPLIT_K": "matmul_split_k", "LINEAR": "linear"},
    "nb08": {"FLIP": "flip", "DOUBLE_INTO": "double_2d_into", "TRANSPOSE": "transpose"},
    "nb09": {"WIDEST_LOAD": "widest_load_bits", "COUNT_OPCODE": "count_opcode", "LOAD_BYTES": "load_bytes_per_thread"},
    "nb10": {"BUSY_SHARE": "busy_share", "NORMALIZE": "normalize_uint8", "FLIP_NORMALIZE": "flip_normalize"},
    "nb11": {"ITEM_CALLS": "item_calls_in_range", "RELU_BACKWARD": "relu_backward"},
    "nb12": {"ADD_MUL_TANH": "add_mul_tanh", "ADD_MUL_ACT_BACKWARD": "add_mul_act_backward",
             "LORA_GRAD_B": "lora_grad_b"},
    "nb13": {"BOX_IOU": "box_iou", "DIOU_LOSS": "diou_loss", "GIOU_GRAD_TARGET": "giou_grad_target"},
    "nb14": {"SPLIT_K_PLAN": "split_k_plan", "FP8_ROW_SCALES": "fp8_row_scales",
             "MATMUL_FP8_ROWWISE": "matmul_fp8_rowwise"},
}
# A newer chapter's exercises module names its references itself (`SOLUTIONS = {...}`, as `./course.sh new` writes it).
for _path in sorted((Path(__file__).resolve().parent.parent / "exercises").glob("nb[0-9][0-9].py")):
    _listed = getattr(importlib.import_module(f"exercises.{_path.stem}"), "SOLUTIONS", None)
    if _path.stem not in SOLUTIONS and isinstance(_listed, dict):
        SOLUTIONS[_path.stem] = dict(_listed)
NOTEBOOKS = tuple(sorted(set(NOTEBOOKS) | set(SOLUTIONS)))


def _exercises(nb: str) -> dict[str, Exercise]:
    module = importlib.import_module(f"exercises.{nb}")
    return {name: value for name, value in vars(module).items() if isinstance(value, Exercise)}


def _wrong(nb: str) -> list[tuple]:
    return importlib.import_module(f"wrong_solutions.{nb}").WRONG


#: On a GPU the drawn cases are GPU-sized (`course_utils.pick_size`): a wrong answer that only a family case
#: catches on a CPU may fail there on a drawn case first, with other words. And the family cases are looked at in
#: the interpreter before any case runs on the GPU: a read outside that a CPU grading meets only after a drawn case
#: failed (its values) fails a GPU grading first. (exercise, label) -> the words then.
GPU_WORDS = {("07.2 matmul_split_k", "fp16 partials"): ["splits=", "values wrong"],
             ("07.3 linear", "bias indexed by rows"): ["read outside the input bias"],
             ("14.3 matmul_fp8_rowwise", "W read as K x N"): ["read outside the input w_q"]}
#: Python 3.12 words the error of max() of nothing otherwise (the H100's Python is 3.12, CI's 3.11).
PYTHON_WORDS = ({"max() arg is an empty sequence": "max() iterable argument is empty"} if sys.version_info >= (3, 12)
                else {})


def _expected(exercise: Exercise, label: str, words: list[str]) -> list[str]:
    """The words a wrong answer's report must hold on this machine. On a GPU: no "[programs]" (that family runs
    on a CPU only: there GPU-sized drawn cases need many programs, and fail first), the compile check's first
    architecture is this GPU's (the JIT compiles for it), and `GPU_WORDS`."""
    words = [PYTHON_WORDS.get(w, w) for w in words]
    if not cu.HAS_CUDA:
        return words
    if (exercise.name, label) in GPU_WORDS:
        return GPU_WORDS[exercise.name, label]
    import torch

    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    return [arch if w in COMPILE_ARCHS else w for w in words if w != "[programs]"]


@pytest.fixture(scope="module")
def cpp_ext():
    """The C++ twins of notebooks 03 and 04 (reference and wrong variants) in one extension, built once."""
    if cu.HAS_CUDA:
        pytest.skip("on a GPU the CUDA builds are graded (test_cuda_solutions_pass_on_a_gpu)")
    if shutil.which("c++") is None and shutil.which("g++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    from course_utils.cuda_build import build_extension

    sources = {**importlib.import_module("wrong_solutions.nb03").CPP,
               **importlib.import_module("wrong_solutions.nb04").CPP}
    cpp = "constexpr auto kDevice = c10::DeviceType::CPU;\n" + "\n".join(sources.values())
    return build_extension("exercise_fixtures", cpp, functions=list(sources))


def _timed(grading) -> tuple[Report, float]:
    """A grading's report and its cost in seconds, the cost the bound judges: on a CPU the CPU time of this process
    (what the grading itself needs, whatever else runs: in CI the other worker's builds and notebooks share the two
    cores, and slowed 06.1's wrong answers from 4 s of wall time alone to 24-37 s); on a GPU, where gradings run
    apart, the wall time."""
    start = time.process_time()
    report = grading()
    return report, (report.seconds if cu.HAS_CUDA else time.process_time() - start)


def _function(nb: str, name, request):
    if not isinstance(name, str):
        return name
    if name.startswith("cpp:"):
        return getattr(request.getfixturevalue("cpp_ext"), name[4:])
    return getattr(importlib.import_module(f"solutions.{nb}"), name)


def test_every_exercise_has_a_solution_and_three_wrong_answers():
    for nb in NOTEBOOKS:
        exercises = _exercises(nb)
        assert set(exercises) == set(SOLUTIONS[nb]), f"{nb}: {sorted(exercises)} vs {sorted(SOLUTIONS[nb])}"
        assert 2 <= len(exercises) <= 4, f"{nb}: a notebook ends with 2-4 exercises"
        for exercise in exercises.values():
            wrong = [w for w in _wrong(nb) if w[0] is exercise]
            assert len(wrong) >= 3, f"{exercise.name}: {len(wrong)} wrong answers, at least 3 wanted"


FAMILY_NOTEBOOKS = ("nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07", "nb08", "nb09", "nb10", "nb11", "nb12", "nb13",
                    "nb14")


def test_exercises_of_01_to_14_have_five_wrong_answers_and_families():
    """Two wrong answers or more per exercise beyond the first three come from the grader's input families and
    invariants; and each exercise declares the families that apply to it (course_utils.grading.FAMILIES)."""
    for nb in FAMILY_NOTEBOOKS:
        for exercise in _exercises(nb).values():
            wrong = [w for w in _wrong(nb) if w[0] is exercise]
            assert len(wrong) >= 5, f"{exercise.name}: {len(wrong)} wrong answers, at least 5 wanted"
            assert exercise.families, f"{exercise.name}: no input family declared"


def _cpp_solution(nb: str, name: str) -> bool:
    return SOLUTIONS[nb][name].startswith("cpp:")


def _cpp_wrong(nb: str, index: int) -> bool:
    return isinstance(_wrong(nb)[index][2], str)


SOLUTION_CASES = [(nb, name) for nb in NOTEBOOKS for name in SOLUTIONS[nb]]
WRONG_CASES = [(nb, i) for nb in NOTEBOOKS for i in range(len(_wrong(nb)))]


@pytest.mark.parametrize("nb, name", [case for case in SOLUTION_CASES if not _cpp_solution(*case)])
def test_solution_passes(nb, name, request):
    _solution_passes(nb, name, request)


def _solution_passes(nb: str, name: str, request) -> None:
    exercise, solution = _exercises(nb)[name], SOLUTIONS[nb][name]
    if cu.HAS_CUDA and solution.startswith("cpp:"):
        pytest.skip("a C++ twin: graded on a CPU; the GPU test grades the CUDA build")
    report, cost = _timed(lambda: grade(exercise, _function(nb, solution, request), quiet=True))
    assert report.passed, str(report)
    assert report.cases >= exercise.examples[cu.HAS_CUDA] // 2, f"{exercise.name}: only {report.cases} cases ran"
    assert cost < SECONDS_PER_GRADING, f"{exercise.name}: {cost:.1f} s ({report.seconds:.1f} s of wall time)"


#: On a GPU each wrong answer whose exercise runs kernels is graded in a process of its own (`_graded_apart`): a
#: kernel that the grader's look in the interpreter lets through and that makes an illegal memory access loses its
#: process's GPU for good (the grader then says so), and would fail every later test of that process.
_GRADE_ONE = r"""
import json, sys
import course_utils  # noqa: F401 - first: the interpreter on a CPU
import test_exercises as te

exercise, label, fn, words = te._wrong(sys.argv[1])[int(sys.argv[2])]
report = te.grade(exercise, fn, quiet=True)
print(json.dumps({"status": report.status, "cases": report.cases, "seconds": report.seconds,
                  "message": report.message}))
"""


def _graded_apart(nb: str, index: int) -> Report:
    root = Path(__file__).resolve().parent.parent
    import torch

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")]),
           "OMP_NUM_THREADS": str(torch.get_num_threads())}  # this worker's share of the cores (tests/conftest.py)
    run = subprocess.run([sys.executable, "-c", _GRADE_ONE, nb, str(index)], cwd=root, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout.splitlines()[-1])
    return Report(_wrong(nb)[index][0].name, answer["status"], answer["cases"], answer["seconds"], answer["message"])


@pytest.mark.parametrize("nb, index", [case for case in WRONG_CASES if not _cpp_wrong(*case)],
                         ids=lambda v: v if isinstance(v, str) else str(v))
def test_wrong_answer_fails_with_a_helpful_message(nb, index, request):
    _wrong_answer_fails(nb, index, request)


def _wrong_answer_fails(nb: str, index: int, request) -> None:
    exercise, label, fn, words = _wrong(nb)[index]
    if cu.HAS_CUDA and isinstance(fn, str):
        pytest.skip("a C++ twin: graded on a CPU")
    name = next(n for n, e in _exercises(nb).items() if e is exercise)
    if cu.HAS_CUDA and f"{nb}.{name}" not in PLAIN_PYTHON:
        report, cost = _timed(lambda: _graded_apart(nb, index))
    else:
        report, cost = _timed(lambda: grade(exercise, _function(nb, fn, request), quiet=True))
    assert report.status == "FAILED", f"{exercise.name}, {label}: the grader let it pass ({report})"
    assert report.message.startswith("The smallest failing case: "), str(report)
    missing = [w for w in _expected(exercise, label, words) if w not in report.message]
    assert not missing, f"{exercise.name}, {label}: {missing} not in {report.message!r}"
    assert cost < SECONDS_PER_GRADING, f"{exercise.name}, {label}: {cost:.1f} s ({report.seconds:.1f} s of wall time)"


def test_unfilled_stubs_are_not_attempted(capsys):
    def stub(*args):
        raise NotImplementedError("write me")

    for nb in NOTEBOOKS:
        for exercise in _exercises(nb).values():
            for fn in (None, stub):
                report = grade(exercise, fn)
                assert report.status == NOT_ATTEMPTED and report.seconds < 2, (exercise.name, report)
                assert capsys.readouterr().out == f"{exercise.name}: {NOT_ATTEMPTED}\n"
    build = importlib.import_module("exercises.nb03").build_square_strided
    assert build("// TODO", "// TODO", "// TODO") is None  # templates are not built (a build costs a minute)
    assert importlib.import_module("exercises.nb04").build_rung4("// TODO", "// TODO") is None


def test_grade_refuses_what_is_not_a_function():
    with pytest.raises(TypeError, match="the function you wrote"):
        grade(_exercises("nb05")["AXPY"], "axpy")


def test_solution_kernels_compile_for_sm_90():
    """The solutions' Triton kernels, as test_compile_targets compiles lessons/ (here for the H100 only). The
    `triton.jit` helpers they call (names without "_kernel") are compiled inside them."""
    solutions = {nb: importlib.import_module(f"solutions.{nb}")
                 for nb in ("nb05", "nb06", "nb07", "nb08", "nb10", "nb11", "nb12", "nb13", "nb14")}
    fp32 = {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    rows = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32", "n_cols": "i32"}
    mm = {"M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_bk": "i32"}
    unit = {"stride_ak": 1, "stride_bn": 1}  # unit strides are constants, as the JIT specializes them
    grid2d = {"n_rows": "i32", "n_cols": "i32", "stride_xr": "i32", "stride_xc": "i32"}
    pixels = {"total": "i32", "H": "i32", "W": "i32", "stride_n": "i32", "stride_c": "i32", "stride_h": "i32",
              "stride_w": "i32"}
    boxes = {"n": "i32", "M": "i32", "sp0": "i32", "sp1": "i32", "sp2": "i32", "st0": "i32", "st1": "i32",
             "st2": "i32"}
    bf16_boxes = {"p_ptr": "*bf16", "t_ptr": "*bf16", "mask_ptr": "*i1"}
    targets = {
        ("nb05", "axpy_kernel"): ({**fp32, "y_ptr": "*fp32", "alpha": "fp32", "n_elements": "i32"},
                                  {"BLOCK_SIZE": 1024}),
        ("nb05", "add_bias_kernel"): ({"x_ptr": "*fp16", "b_ptr": "*fp16", "out_ptr": "*fp16", **grid2d,
                                       "stride_b": "i32"}, {"BLOCK_SIZE": 1024}),
        ("nb05", "vector_sum_kernel"): ({**fp32, "n_elements": "i32"}, {"BLOCK_SIZE": 1024}),
        ("nb06", "log_softmax_kernel"): (rows, {"BLOCK_SIZE": 4096}),
        ("nb06", "softmax_looped_kernel"): (rows, {"BLOCK_SIZE": 1024}),
        ("nb07", "linear_kernel"): ({"a_ptr": "*fp16", "b_ptr": "*fp16", "bias_ptr": "*fp16", "c_ptr": "*fp16", **mm,
                                     "stride_cm": "i32"},
                                    {**unit, "stride_bias": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128,
                                     "BLOCK_K": 64, "GROUP_M": 8, "ACTIVATION": "gelu_tanh"}),
        ("nb07", "split_k_kernel"): ({"a_ptr": "*fp16", "b_ptr": "*fp16", "part_ptr": "*fp32", **mm,
                                      "k_per_split": "i32"}, {**unit, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}),
        ("nb08", "flip_kernel"): ({**fp32, "n": "i32"}, {"BLOCK": 1024}),
        ("nb08", "double_2d_into_kernel"): ({**fp32, **grid2d, "stride_or": "i32", "stride_oc": "i32"},
                                            {"BLOCK_R": 16, "BLOCK_C": 32}),
        ("nb08", "transpose_kernel"): ({**fp32, **grid2d}, {"BLOCK": 32}),
        ("nb10", "normalize_kernel"): ({"x_ptr": "*u8", "out_ptr": "*fp32", **pixels}, {"BLOCK": 1024}),
        ("nb10", "flip_normalize_kernel"): ({"x_ptr": "*u8", "flips_ptr": "*i1", "out_ptr": "*fp32", **pixels},
                                            {"BLOCK": 1024}),
        ("nb11", "relu_backward_kernel"): ({"grad_ptr": "*bf16", "y_ptr": "*bf16", "out_ptr": "*bf16",
                                            "n_elements": "i32"}, {"BLOCK": 1024}),
        ("nb12", "add_mul_tanh_kernel"): ({"base_ptr": "*bf16", "lora_ptr": "*bf16", "out_ptr": "*bf16",
                                           "scale": "fp32", "n": "i32"}, {"BLOCK": 2048}),
        ("nb12", "add_mul_act_backward_kernel"): ({"grad_ptr": "*fp16", "base_ptr": "*fp16", "lora_ptr": "*fp16",
                                                   "d_base_ptr": "*fp16", "d_lora_ptr": "*fp16", "scale": "fp32",
                                                   "n": "i32"}, {"BLOCK": 2048, "ACTIVATION": "gelu"}),
        ("nb12", "lora_grad_b_kernel"): ({"g_ptr": "*bf16", "xa_ptr": "*bf16", "out_ptr": "*bf16", "T": "i32",
                                          "N": "i32", "R": "i32", "scale": "fp32", "stride_gt": "i32",
                                          "stride_xt": "i32"},
                                         {"stride_gn": 1, "stride_xr": 1, "BLOCK_N": 64, "BLOCK_T": 64,
                                          "BLOCK_R": 16}),
        ("nb13", "box_iou_kernel"): ({"p_ptr": "*fp16", "t_ptr": "*fp16", "out_ptr": "*fp32", "n": "i32",
                                      "stride_pb": "i32", "stride_pc": "i32", "stride_tb": "i32", "stride_tc": "i32"},
                                     {"EPS": 1e-7, "BLOCK": 512}),
        ("nb13", "diou_partial_kernel"): ({**bf16_boxes, "sums_ptr": "*fp32", "counts_ptr": "*i32", **boxes},
                                          {"EPS": 1e-7, "BLOCK": 512}),
        ("nb13", "giou_grad_target_kernel"): ({**bf16_boxes, "count_ptr": "*i32", "grad_ptr": "*bf16", **boxes},
                                              {"EPS": 1e-7, "BLOCK": 512}),
        ("nb14", "fp8_row_scales_kernel"): ({"x_ptr": "*bf16", "out_ptr": "*fp32", "n_cols": "i32",
                                             "stride_r": "i32", "stride_c": "i32"}, {"FP8_MAX": 448.0, "BLOCK": 1024}),
        ("nb14", "matmul_fp8_rowwise_kernel"): ({"a_ptr": "*fp8e4nv", "w_ptr": "*fp8e4nv", "c_ptr": "*bf16",
                                                 "a_scale_ptr": "*fp32", "w_scale_ptr": "*fp32", "M": "i32",
                                                 "N": "i32", "K": "i32", "stride_am": "i32", "stride_wn": "i32"},
                                                {"stride_ak": 1, "stride_wk": 1, "BLOCK_M": 128, "BLOCK_N": 128,
                                                 "BLOCK_K": 128}),
    }
    defined = {(nb, name) for nb, module in solutions.items() for name, value in vars(module).items()
               if type(value).__name__ in ("JITFunction", "InterpretedFunction")
               and value.fn.__module__ == module.__name__ and name.endswith("_kernel")}
    assert defined == set(targets), f"without a target: {defined - set(targets)}; stale: {set(targets) - defined}"
    jobs = [dict(kernel=getattr(solutions[nb], name), signature=sig, constexprs=const, arch="sm_90",
                 num_warps=8 if name in ("linear_kernel", "matmul_fp8_rowwise_kernel") else 4)
            for (nb, name), (sig, const) in targets.items()]
    for (nb, name), stages in zip(targets, ki.compile_triton_jobs(jobs, quick=True)):
        assert ".entry" in stages["ptx"], f"solutions.{nb}.{name}"


#: Run in a fresh process: the exercises are imported as on a GPU (sizes, dtypes, example counts), each kernel
#: launch records, instead of running, the key under which Triton's JIT (3.6, 3.7) caches a compilation, and
#: `grade` runs with a check that only calls the solution. Against an H100 (Triton 3.6, an empty cache) this
#: count matched the compilations of each of the 15 passing gradings of notebooks 05-08 and 12-14 measured there.
_COUNT_SPECIALIZATIONS = r"""
import importlib, inspect, json, sys
import torch
import course_utils as cu
import course_utils.device as device
import course_utils.grading as grading
from triton.runtime.interpreter import InterpretedFunction

device.HAS_CUDA = cu.HAS_CUDA = grading.HAS_CUDA = True
device.pick_size = cu.pick_size = lambda gpu, cpu: gpu
cu.INTERPRET = False  # bf16 stays bf16, as on a GPU
torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)  # an H100, for modules that ask at import
# values do not matter here, only dtypes, strides and alignments: fill nothing
torch.randn = lambda *size, generator=None, **kwargs: torch.empty(*size, **kwargs)
torch.full = lambda size, fill_value, **kwargs: torch.empty(size, **kwargs)
keys = set()


def arg_key(value, constexpr):
    if constexpr or value is None or isinstance(value, str):
        return repr(value)
    if isinstance(value, torch.Tensor):
        return str(value.dtype), value.data_ptr() % 16 == 0
    if isinstance(value, int) and not isinstance(value, bool):
        return 1 if value == 1 else (-2**31 <= value < 2**31, value % 16 == 0)
    return type(value).__name__


def launch(self, *args, grid, warmup, **kwargs):
    params = list(inspect.signature(self.fn).parameters.values())
    bound = {**dict(zip([p.name for p in params], args)), **kwargs}
    key = [arg_key(bound.get(p.name, p.default), "constexpr" in str(p.annotation)) for p in params]
    options = sorted((k, repr(v)) for k, v in kwargs.items() if k not in {p.name for p in params})  # num_warps...
    keys.add((self.fn.__qualname__, *key, *options))


def call(exercise, fn, case, jobs=None):
    try:
        fn(*case.make())
    except Exception:  # the kernels did not run: what reads their output may fail
        pass
    return ""


InterpretedFunction.run, grading._check = launch, call
grading._interpret = lambda *args, **kwargs: ("", 0)  # the grader's looks in the interpreter compile nothing
counts = {}
for nb, names in json.loads(sys.argv[1]).items():
    exercises, solutions = importlib.import_module(f"exercises.{nb}"), importlib.import_module(f"solutions.{nb}")
    for name, solution in names.items():
        keys.clear()
        grading.grade(getattr(exercises, name), getattr(solutions, solution), quiet=True)
        counts[f"{nb}.{name}"] = len(keys)
print(json.dumps(counts))
"""


def test_gpu_gradings_compile_few_kernels():
    """On a GPU every new specialization of a Triton kernel is a compilation (0.1-1 s): a grading that draws
    many constexpr values, dtypes, alignments or sizes that are 1 or multiples of 16 outlasts its bound there
    while it takes seconds in the interpreter. Each GPU grading of a reference solution may compile at most
    GPU_COMPILATIONS kernels (why 12: see there), counted here for every exercise, as `_COUNT_SPECIALIZATIONS`
    says; the CUDA exercises are built once (nvcc), not per case, and are not counted."""
    wanted = {nb: {name: solution for name, solution in names.items() if not solution.startswith("cpp:")}
              for nb, names in SOLUTIONS.items()}
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root), "TRITON_INTERPRET": "1"}  # the interpreter on a GPU too
    run = subprocess.run([sys.executable, "-c", _COUNT_SPECIALIZATIONS, json.dumps(wanted)], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    counts = json.loads(run.stdout.splitlines()[-1])
    assert set(counts) == {f"{nb}.{name}" for nb, names in wanted.items() for name in names}
    over = {key: count for key, count in counts.items() if count > GPU_COMPILATIONS}
    assert not over, f"more than {GPU_COMPILATIONS} compilations in a GPU grading: {over}"
    none = {key for key, count in counts.items() if count == 0}
    assert none == PLAIN_PYTHON, f"no compilation counted for {none - PLAIN_PYTHON}, some for {PLAIN_PYTHON - none}"


def test_pairwise_covers_every_pair_of_values():
    """`exercises.pairwise`: every two values of every two factors meet in some configuration, in few."""
    from exercises import pairwise

    for shape, most in (((3, 3, 3), 9), ((3, 3, 3, 3), 9), ((2, 2, 3), 6), ((4, 3, 3), 12), ((3, 4, 2, 3), 12),
                        ((4, 3), 12), ((2, 3), 6)):
        factors = [tuple(f"{i}{v}" for v in range(n)) for i, n in enumerate(shape)]
        rows = pairwise(*factors)
        assert len(rows) <= most and len(set(rows)) == len(rows), (shape, rows)
        for i, j in itertools.combinations(range(len(shape)), 2):
            assert {(r[i], r[j]) for r in rows} == set(itertools.product(factors[i], factors[j])), (shape, i, j)


@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="needs nvcc")
def test_cuda_solutions_compile():
    """The CUDA sources of solutions 03.2 and 04.4 compile with nvcc (one translation unit: torch's headers once)."""
    from course_utils.cuda_build import compile_cuda

    s3, s4 = importlib.import_module("solutions.nb03"), importlib.import_module("solutions.nb04")
    ptx = compile_cuda(s3.STRIDED_CUDA + "\n" + s4.RUNG4_CUDA)
    assert "square_strided_kernel" in ptx and "gemm_rung4_kernel" in ptx


@pytest.mark.gpu
def test_cuda_solutions_pass_on_a_gpu():
    for nb, name, build in (("nb03", "SQUARE_STRIDED", "square_strided"), ("nb04", "RUNG4", "gemm_rung4")):
        report = grade(_exercises(nb)[name], getattr(importlib.import_module(f"solutions.{nb}"), build)(), quiet=True)
        assert report.passed, str(report)


# The C++ twins of notebooks 03 and 04 last in the file: the first of them builds the fixtures' extension (`cpp_ext`),
# which then finds the header that ./course.sh test precompiles in the background as the tests start, and the
# compiler probe's verdict (about 140 s in, in a CI-like run). Built earlier it waited for them, or went without the
# header: 100 s then, 25 s with it alone.
@pytest.mark.parametrize("nb, name", [case for case in SOLUTION_CASES if _cpp_solution(*case)])
def test_cpp_twin_solution_passes(nb, name, request):
    _solution_passes(nb, name, request)


@pytest.mark.parametrize("nb, index", [case for case in WRONG_CASES if _cpp_wrong(*case)],
                         ids=lambda v: v if isinstance(v, str) else str(v))
def test_cpp_twin_wrong_answer_fails_with_a_helpful_message(nb, index, request):
    _wrong_answer_fails(nb, index, request)
