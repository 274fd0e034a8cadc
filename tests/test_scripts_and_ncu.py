"""course_utils.scripts.run_python, profiling.run_ncu / read_ncu_csv, checks.require_tensors, export.show."""

import sys
import textwrap

import numpy as np
import pytest
import torch

import course_utils as cu
from course_utils import profiling
from course_utils.export import show
from course_utils.scripts import PROJECT_DIR, child_env, run_python


def test_run_python_finds_the_course_and_hides_machine_paths(tmp_path):
    script = tmp_path / "child.py"
    script.write_text("import course_utils, os, sys\nprint(os.path.dirname(course_utils.__file__))\n"
                      "print(os.environ['TRITON_INTERPRET'])\nsys.exit(3)\n")
    run = run_python(script, interpret=False)
    assert run.returncode == 3 and not run.ok
    lines = run.stdout.splitlines()
    assert lines == ["course_utils", "0"], lines  # the project's absolute path is cut


def test_run_python_times_out_instead_of_hanging(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    run = run_python(script, timeout=2)
    assert run.returncode is None and "killed after 2 s" in run.stderr


@pytest.mark.parametrize("kwargs, error", [
    (dict(script="no/such/script.py"), FileNotFoundError),
    (dict(script=__file__, timeout=0), ValueError),
    (dict(script=__file__, args=(3,)), TypeError),
])
def test_run_python_refuses_bad_arguments(kwargs, error):
    args = kwargs.pop("args", ())
    with pytest.raises(error):
        run_python(kwargs.pop("script"), *args, **kwargs)


def test_child_env_puts_the_project_first_and_checks_values():
    env = child_env({"X": "1"}, interpret=True)
    assert env["PYTHONPATH"].split(":")[0] == str(PROJECT_DIR) and env["TRITON_INTERPRET"] == "1" and env["X"] == "1"
    with pytest.raises(TypeError):
        child_env({"X": 1})


NCU_CSV = textwrap.dedent('''\
    ==PROF== Connected to process 123
    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
    "0","1","python","h","gemm_tuned_kernel(float const*, float*)","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,234,567"
    "0","1","python","h","gemm_tuned_kernel(float const*, float*)","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","128"
    "1","1","python","h","sm90_xmma_gemm_f32f32_tn","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,000,000"
    "1","1","python","h","sm90_xmma_gemm_f32f32_tn","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","Command line profiler metrics","launch__registers_per_thread","register/thread","n/a"
    "2","1","python","h","sm90_xmma_gemm_f32f32_tn","1","7","(256, 1, 1)","(32, 32, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","999"
    ''')


def test_read_ncu_csv_gives_one_column_per_launch():
    label = lambda name: "mine" if "gemm_tuned" in name else "cuBLAS"  # noqa: E731
    table, names = profiling.read_ncu_csv(NCU_CSV, label)
    assert list(table.columns) == ["mine", "cuBLAS", "cuBLAS (2)"]
    assert table.loc["gpu__time_duration.sum", "mine"] == 1234567
    assert table.loc["gpu__time_duration.sum", "cuBLAS (2)"] == 999
    assert table["cuBLAS"].isna().sum() == 1  # "n/a" -> NaN
    assert names["mine"].startswith("gemm_tuned_kernel")
    with pytest.raises(ValueError, match="no CSV rows"):
        profiling.read_ncu_csv("==PROF== nothing")


def test_ncu_command_and_run_ncu_without_a_gpu_say_what_would_run():
    command = profiling.ncu_command(["a.b", "c.d"], nvtx_range="profiled")
    assert command[:4] == ["ncu", "--nvtx", "--nvtx-include", "profiled/"] and "a.b,c.d" in command
    assert "--profile-from-start" in profiling.ncu_command(["a.b"])
    with pytest.raises(ValueError):
        profiling.ncu_command("a.b")
    if not cu.HAS_CUDA:
        report = profiling.run_ncu(__file__, ["gpu__time_duration.sum"])
        assert report.table is None and "nothing profiled" in str(report) and "ncu --profile-from-start" in str(report)


def test_require_tensors_names_the_argument_at_fault():
    x = torch.ones(4, device=cu.DEVICE)
    cu.require_tensors(x=x, y=x.clone(), dtypes=(torch.float32,), ndim=1, same_shape=True)  # fine
    cases = [
        (dict(x=x, y=[1.0]), TypeError, "y must be a torch.Tensor"),
        (dict(x=x.half(), dtypes=(torch.float32,)), TypeError, "x must have a dtype in"),
        (dict(x=x, y=x.half(), dtypes=(torch.float32, torch.float16)), TypeError, "x and y must share one dtype"),
        (dict(x=x, ndim=2), ValueError, "x must be 2-D"),
        (dict(x=x, y=torch.ones(5, device=cu.DEVICE), same_shape=True), ValueError, "same shape"),
        (dict(x=torch.ones(4, 4, device=cu.DEVICE).t(), contiguous=True), ValueError, "x must be contiguous"),
        (dict(x=x, max_numel=3), ValueError, "x has 4 elements"),
        (dict(x=torch.ones(4, device="meta")), ValueError, "must be on"),
        # a view reaches further than its element count: 48 elements, offsets up to 47 * 2**26 (never allocated)
        (dict(x=torch.empty(48, device="meta").as_strided((48,), (2**26,))), ValueError, "x reaches element offset"),
        (dict(x=torch.ones(4, requires_grad=True), differentiable=False), ValueError, "x requires grad"),
    ]
    for kwargs, error, words in cases:
        with pytest.raises(error, match=words):
            cu.require_tensors(**kwargs)
    with pytest.raises(TypeError, match="keyword arguments"):
        cu.require_tensors()
    cu.require_tensors(x=torch.ones(4, 4, device=cu.DEVICE).t(), y=torch.ones(3, device=cu.DEVICE).expand(8, 3))
    assert cu.require_block_size("block", np.int64(256)) == 256 and cu.require_number("s", np.float32(0.5)) == 0.5
    for bad in (0, -1024, 1000, 2**21, 1024.0, True):
        with pytest.raises((TypeError, ValueError), match="block"):
            cu.require_block_size("block", bad)
    with pytest.raises(ValueError, match="mode must be one of 'gpu', 'wall'"):
        cu.require_choice("mode", "fast", ("gpu", "wall"))


def test_show_prints_a_kernel_a_file_or_a_section(tmp_path, capsys):
    from lessons.nb05_vector_add import add_kernel

    show(add_kernel)
    assert "def add_kernel(" in capsys.readouterr().out
    source = tmp_path / "k.cu"
    source.write_text("// intro\n// rung 1\n__global__ void one() {}\n// rung 1:end\n// rung 2\nvoid two() {}\n")
    show(source, section="rung 1")
    assert capsys.readouterr().out.strip() == "__global__ void one() {}"
    with pytest.raises(ValueError, match="no line holds"):
        show(source, section="rung 9")
    with pytest.raises(FileNotFoundError):
        show("lessons/none.cu")
    with pytest.raises(TypeError):
        show(3)
