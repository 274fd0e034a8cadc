"""A careless learner's calls: every public function of course_utils and of the lessons in `LESSONS`, given bad
input, must raise a clear error (the right type, a message naming what was wrong) or return the right answer;
never crash the process, hang, or answer wrong in silence.

`TABLE` lists the calls as source text, each with what must happen. They run in a child process (this file run
as a script), one after another, each with a deadline; a crash or a hang fails its row and the next child goes
on from the row after it. Huge tensors are described (meta tensors), never allocated, and no kernel is launched
on them: the rows test the guard. `test_every_public_function_is_in_the_table` lists the public functions and
classes of the modules and fails on one that no row calls.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import sys
from pathlib import Path

import pytest
import torch

if __name__ == "__main__":  # the child: course_utils first (Triton's interpreter on a CPU)
    import course_utils  # noqa: F401

PROJECT = Path(__file__).resolve().parent.parent
CASE_SECONDS = 30  # one row's deadline: a row still running after it is a hang

#: The lessons covered so far. NOT_YET: modules being written or reworked by others right now (none now); the
#: lead adds their rows to TABLE, and moves them to LESSONS, when that work lands.
#: nb03_square_matrix and nb08_debugging have no public function of parameters, so no rows: 03's C++ wrapper is
#: tested in tests/test_nb03_square_matrix.py (it needs a build), 08's kernels are wrong on purpose.
LESSONS = ("lessons.nb03_square_matrix", "lessons.nb04_gemm", "lessons.nb05_vector_add", "lessons.nb05_row_kernels",
           "lessons.nb06_softmax", "lessons.nb06_softmax_persistent", "lessons.nb07_matmul", "lessons.nb08_debugging",
           "lessons.nb10_input_pipeline", "lessons.nb11_dlrm", "lessons.nb12_bench", "lessons.nb12_lora",
           "lessons.nb12_peft", "lessons.nb13_giou", "lessons.nb14_hopper_matmul", "lessons.nb15_flash_attention",
           "lessons.nb16_gpu_memory", "lessons.nb17_multi_gpu_training")
NOT_YET: set[str] = set()
#: Not libraries: scripts that a child process runs (they exit when imported in the interpreter's mode, or without a
#: GPU: nb04_ncu_child is the script that notebook 04c profiles).
SCRIPTS = {"course_utils.triton_compile_worker", "lessons.nb04_ncu_child", "lessons.nb15_ncu_child",
           "lessons.nb16_fragmentation", "lessons.nb17_collectives", "lessons.nb17_train"}
#: Exceptions and result records: they take no input from a learner, so there is nothing to validate.
RECORDS = {"checks:CaseResult", "checks:CheckReport", "results:Verdict", "results:SavedResults", "scripts:ScriptRun",
           "timing:BenchmarkResult", "grading:Report", "toolchain:BuildError", "toolchain:ToolchainError", "profiling:NcuReport",
           "kernel_inspect:KernelCompileError", "kernel_inspect:KernelSummary", "kernel_inspect:CompiledStages",
           "nb10_input_pipeline:BadImageError", "nb10_input_pipeline:Skipped",
           "nb13_giou:TritonGIoULoss", "nb12_peft:FuseReport"}

# What must happen: E(type, words) a clear error (an instance of type, its message matching the regular
# expression words); R(test) the right answer (the Python expression test, about the result r, is true).
E = lambda kind, words: ("error", kind, words)  # noqa: E731
R = lambda test: ("value", test)  # noqa: E731

META_VIEW = 'torch.empty(48, device="meta").as_strided((48,), (2**26,))'  # 48 elements, span 3.2e9: never launched
RG = "torch.ones(4, requires_grad=True)"

TABLE: list[tuple[str, str, tuple]] = [
    # ------------------------------------------------------------------ checks
    ("checks:require_tensors", f"cu.require_tensors(x={META_VIEW})", E("ValueError", r"x reaches element offset 3,154,116,608")),
    ("checks:require_tensors", 'cu.require_tensors(x=torch.empty(2**31, device="meta"))', E("ValueError", "x has 2,147,483,648 elements")),
    ("checks:require_tensors", f"cu.require_tensors(x={META_VIEW}, max_span=None)", E("ValueError", "x must be on cpu")),
    ("checks:require_tensors", "cu.require_tensors(x=torch.ones(4, 4).t())", R("r is None")),
    ("checks:require_tensors", "cu.require_tensors(x=torch.ones(4, 4).t(), contiguous=True)", E("ValueError", "x must be contiguous")),
    ("checks:require_tensors", "cu.require_tensors(x=torch.ones(3).expand(2**20, 3))", R("r is None")),
    ("checks:require_tensors", f"cu.require_tensors(x={RG}, differentiable=False)", E("ValueError", "x requires grad")),
    ("checks:require_tensors", f"cu.require_tensors(x={RG}.detach(), differentiable=False)", R("r is None")),
    ("checks:require_tensors", "cu.require_tensors(x=[1.0, 2.0])", E("TypeError", "x must be a torch.Tensor")),
    ("checks:require_tensors", "cu.require_tensors(x=None)", E("TypeError", "x must be a torch.Tensor")),
    ("checks:require_tensors", "cu.require_tensors(x=torch.ones(2), y=torch.ones(2).double(), dtypes=(torch.float32, torch.float64))", E("TypeError", "share one dtype")),
    ("checks:require_tensors", "cu.require_tensors(x=torch.ones(0))", R("r is None")),
    ("checks:span", "checks.span(torch.ones(5, 7)[:, ::3])", R("r == 4 * 7 + 2 * 3")),
    ("checks:span", "checks.span(torch.ones(0, 7))", R("r == -1")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", -1024)', E("ValueError", "block_size must be a positive power of two")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", 0)', E("ValueError", "block_size must be a positive power of two")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", 1000)', E("ValueError", "power of two")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", 2**21)', E("ValueError", "block_size must be between")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", 1024.0)', E("TypeError", "block_size must be an integer")),
    ("checks:require_block_size", 'cu.require_block_size("block_size", np.int64(256))', R("r == 256 and type(r) is int")),
    ("checks:require_number", 'cu.require_number("scale", np.float32(0.5))', R("r == 0.5 and type(r) is float")),
    ("checks:require_number", 'cu.require_number("scale", True)', E("TypeError", "scale must be a number")),
    ("checks:require_number", 'cu.require_number("scale", float("nan"))', E("ValueError", "scale must be finite")),
    ("checks:require_number", 'cu.require_number("n", 5, integer=True, low=6)', E("ValueError", "n must be >= 6")),
    ("checks:require_number", 'cu.require_number("n", "5")', E("TypeError", "n must be a number")),
    ("checks:require_choice", 'cu.require_choice("mode", "fast", ("gpu", "wall"))', E("ValueError", "mode must be one of 'gpu', 'wall'")),
    ("checks:require_choice", 'cu.require_choice("flag", 1, (True, False))', E("ValueError", "flag must be one of")),
    ("checks:make_tensor", "checks.make_tensor((3, 4), contiguous=False)", R("r.shape == (3, 4) and not r.is_contiguous()")),
    ("checks:make_tensor", 'checks.make_tensor((3,), device="cuda")', E("ValueError", "no CUDA GPU")),
    ("checks:awkward_cases", "cu.awkward_cases(n_inputs=0)", E("ValueError", "n_inputs must be >= 1")),
    ("checks:Case", 'cu.check(torch.neg, torch.neg, [cu.Case("two", lambda: (torch.ones(2),))]).passed', R("r is True")),
    ("checks:check", 'cu.check(lambda x: (x + 1, x.sum().item()), lambda x: (x + 1, x.sum().item()), cu.awkward_cases([5])).passed', R("r is True")),
    ("checks:check", 'cu.check(lambda x: x.sum().item(), lambda x: float(x.sum()), cu.awkward_cases([5])).passed', R("r is True")),
    ("checks:check", 'str(cu.check(lambda x: (x, x), lambda x: (x, x + 1), cu.awkward_cases([5], non_contiguous=False)))', R("'output 1' in r and 'FAILED' in r")),
    ("checks:check", "cu.check(torch.neg, None, cu.awkward_cases([5]))", E("TypeError", "must both be callable")),
    ("checks:check", "cu.check(torch.neg, torch.neg, [])", E("ValueError", "at least one Case")),
    # ------------------------------------------------------------------ device, peaks, timing, sweeps, tuning
    ("device:pick_size", "cu.pick_size(4096, 16)", R("r == 16")),
    ("device:require_device", 'device.require_device("tpu")', E("ValueError", "device='tpu'")),
    ("device:require_device", 'device.require_device("cuda")', E("ValueError", "no CUDA GPU")),
    ("device:environment", "cu.environment()", R("r['gpu'] == 'none' and 'torch' in r")),
    ("device:print_environment", "cu.print_environment()", R("r is None")),
    ("peaks:DevicePeaks", 'peaks.DevicePeaks("x", 1, 1, None, 1).tflops_for(torch.int8)', E("ValueError", "no peak FLOP/s for dtype torch.int8")),
    ("peaks:lookup_peaks", "cu.lookup_peaks(None)", E("TypeError", "device_name must be a str")),
    ("peaks:lookup_peaks", 'cu.lookup_peaks("NVIDIA H100 80GB HBM3").name', R("r == 'H100 SXM'")),
    ("timing:benchmark", "cu.benchmark(lambda: None, bytes_moved=np.int64(1000), rep_ms=1, warmup_ms=0).bytes_moved", R("r == 1000")),
    ("timing:benchmark", "cu.benchmark(lambda: None, bytes_moved=-1)", E("ValueError", "bytes_moved must be a finite number >= 0")),
    ("timing:benchmark", 'cu.benchmark(lambda: None, flops="many")', E("TypeError", "flops must be a number")),
    ("timing:benchmark", 'cu.benchmark(lambda: None, mode="fast")', E("ValueError", "mode must be one of")),
    ("timing:benchmark", "cu.benchmark(lambda: None, max_reps=0)", E("ValueError", "max_reps must be a whole number >= 1")),
    ("timing:benchmark", "cu.benchmark(lambda: None, rep_ms=float('nan'))", E("TypeError", "rep_ms must be a finite number")),
    ("timing:benchmark", "cu.benchmark(None)", E("TypeError", "fn must be callable")),
    ("timing:benchmark_interleaved", "cu.benchmark_interleaved({'a': lambda: None}, rounds=0)", E("ValueError", "rounds must be a positive integer")),
    ("timing:benchmark_interleaved", "sorted(cu.benchmark_interleaved({'a': lambda: None}, rounds=np.int64(1), rep_ms=1, warmup_ms=0))", R("r == ['a']")),
    ("timing:cuda_graph", "cu.cuda_graph(lambda: None)", E("ValueError", "cuda_graph needs a CUDA GPU")),
    ("timing:cuda_graph", "cu.cuda_graph(3)", E("TypeError", "fn must be callable")),
    ("timing:measure_peaks", "timing.measure_peaks()", E("ValueError", "needs a CUDA GPU")),
    ("timing:device_peaks", "cu.device_peaks()", R("r is None")),
    ("sweeps:sweep", "cu.sweep({'neg': torch.neg}, np.array([4, 8]), inputs=lambda n: (torch.ones(n),), rep_ms=1, warmup_ms=0)['size'].tolist()", R("r == [4, 8]")),
    ("sweeps:sweep", "cu.sweep({'neg': torch.neg}, [0], inputs=lambda n: (torch.ones(n),))", E("ValueError", r"sizes\[i\] must be >= 1")),
    ("sweeps:sweep", "cu.sweep({'neg': torch.neg}, [])", E("ValueError", "sizes must be a non-empty list")),
    ("sweeps:sweep", "cu.sweep({'neg': 3}, [4])", E("TypeError", "provider 'neg' must be a function")),
    ("tuning:autotune", "tuning.autotune([], key=['n'])", E("ValueError", "at least one triton.Config")),
    ("tuning:cpu_do_bench", "tuning.cpu_do_bench(lambda: None, quantiles=[0.5, 0.2])", R("len(r) == 2")),
    # ------------------------------------------------------------------ results, plots
    ("results:format_figure", "results.format_figure(np.float32(1234.5))", R("r == '1,234'")),
    ("results:format_figure", 'results.format_figure("fast")', E("TypeError", "value must be a number")),
    ("results:Headline", 'results.Headline("add", np.float64(3051.2), "GB/s").value', R("r == 3051.2 and type(r) is float")),
    ("results:Headline", 'results.Headline("add", float("nan"), "GB/s")', E("ValueError", "Headline.value must be finite")),
    ("results:Headline", 'results.Headline("add", 1.0, "")', E("ValueError", "needs a description")),
    ("results:verdict", 'cu.verdict("add", np.float32(2.0), "GB/s", baseline_value=np.int64(1)).ratio', R("r == 2.0")),
    ("results:verdict", 'cu.verdict("add", float("inf"), "GB/s")', E("ValueError", "value must be finite")),
    ("results:verdict", 'cu.verdict("add", 1.0, "GB/s", expect=(0.9,))', E("ValueError", "expect must be")),
    ("results:Target", 'results.Target(1, "05_x", "add", "torch", 1.0, "x").verdict(results.Headline("add", 2.0, "GB/s", "torch", 1.0))', R("r.endswith('met')")),
    ("results:load_targets", 'results.load_targets(Path(tmp) / "none.json")', E("FileNotFoundError", "none.json")),
    ("results:device_slug", 'results.device_slug({"gpu": "NVIDIA H100 80GB HBM3"})', R("r == 'NVIDIA_H100_80GB_HBM3'")),
    ("results:check_notebook_name", 'results.check_notebook_name("../etc")', E("ValueError", "notebook must be a notebook's file stem")),
    ("results:save_results", 'results.save_results("05_triton_vector_add", pd.DataFrame({"gbps": [float("inf")]}), results_dir=tmp)', E("ValueError", r"column\(s\) \['gbps'\] hold infinities")),
    ("results:save_results", 'results.save_results("05_triton_vector_add", [1, 2], results_dir=tmp)', E("TypeError", "frame must be a pandas DataFrame")),
    ("results:load_results", 'results.load_results(results.save_results("05_triton_vector_add", pd.DataFrame({"gbps": [1.0, float("nan")]}), [results.Headline("a", 1.0, "GB/s")], results_dir=tmp)).frame["gbps"].isna().tolist()', R("r == [False, True]")),
    ("results:load_results", 'results.load_results(Path(tmp) / "missing.json")', E("FileNotFoundError", "missing.json")),
    ("results:figures_table", 'results.figures_table(Path(tmp), "no_such_gpu")', E("FileNotFoundError", "no saved results")),
    ("results:update_readme", 'results.update_readme(write(Path(tmp) / "R.md", "no markers"), "table")', E("ValueError", "no <!-- figures:begin -->")),
    ("results:main", 'results.main(["--results", tmp, "--device", "none", "--targets", str(Path(tmp) / "t.json"), "--readme", str(Path(tmp) / "R.md"), "--check"])', E("FileNotFoundError", "no saved results")),
    ("plots:plot_roofline", 'plots.plot_roofline({"k": (0.0, 1.0)}, cu.lookup_peaks("H100"))', E("ValueError", r"points\['k'\] intensity must be > 0")),
    ("plots:plot_roofline", 'plots.plot_roofline({"k": (2.0, 1.0)}, cu.device_peaks())', E("TypeError", "peaks must be a DevicePeaks")),
    ("plots:plot_roofline", 'plots.plot_roofline({"k": (np.float32(2.0), np.int64(1))}, cu.lookup_peaks("H100")).lines[0].get_ydata().min()', R("np.isfinite(r) and r > 0")),
    ("plots:plot_roofline", 'plots.plot_roofline({"k": 2.0}, cu.lookup_peaks("H100"))', E("ValueError", r"points\['k'\] must be \(FLOP per byte, TFLOP/s\)")),
    ("plots:plot_roofline", 'plots.plot_roofline({"k": (2.0, 1.0)}, cu.lookup_peaks("H100"), labels="side")', E("ValueError", "labels must be")),
    ("plots:plot_bars", 'plots.plot_bars({"a": None}, ylabel="ms")', E("TypeError", r"values\['a'\] must be a number")),
    ("plots:plot_bars", 'plots.plot_bars({}, ylabel="ms")', E("ValueError", "values must be a non-empty mapping")),
    ("plots:plot_bars", 'len(plots.plot_bars({"a": np.float32(1.5)}, ylabel="ms").patches)', R("r == 1")),
    ("plots:plot_throughput", 'plots.plot_throughput([1, 2])', E("TypeError", "frame must be a sweep DataFrame")),
    ("plots:plot_throughput", 'plots.plot_throughput(pd.DataFrame(), "bandwidth")', E("ValueError", "metric must be one of")),
    # ------------------------------------------------------------------ scripts, export, cuda_build, toolchain
    ("scripts:run_python", 'scripts.run_python("no/such.py")', E("FileNotFoundError", "no such file")),
    ("scripts:run_python", 'scripts.run_python(__file__, timeout=float("inf"))', E("ValueError", "timeout must be a positive number")),
    ("scripts:run_python", 'scripts.run_python(write(Path(tmp) / "ok.py", "print(1)"), timeout=np.float64(60)).stdout', R("r == '1\\n'")),
    ("scripts:child_env", 'scripts.child_env({"A": 1})', E("TypeError", "env must map str to str")),
    ("export:show", 'export.show("lessons/no_such.py")', E("FileNotFoundError", "no such file")),
    ("export:show", "export.show(3)", E("TypeError", "what must be a function, a kernel or a path")),
    ("export:show", 'export.show("lessons/nb13_giou.py", section="no such section")', E("ValueError", "section: no line holds")),
    ("export:exported_modules", "export.exported_modules(Path(tmp))", R("r == {}")),
    ("export:main", 'export.main(["--check", "--project", tmp])', R("r == 0")),
    ("cuda_build:build_extension", 'cuda_build.build_extension("add", "int add(int a);", functions="add")', E("TypeError", r"functions must be a list of strings, e.g. \['add'\]")),
    ("cuda_build:build_extension", 'cuda_build.build_extension("bad name", "")', E("ValueError", "name must be a Python identifier")),
    ("cuda_build:build_extension", 'cuda_build.build_extension("x", None)', E("TypeError", "cpp_sources must be C")),
    ("cuda_build:build_extension", 'cuda_build.build_extension("x", "", "__global__ void k() {}", functions=["k"])', E("ToolchainError", "CUDA is not available")),
    ("cuda_build:extension_name", 'cuda_build.extension_name("x", "", functions=["a-b"])', E("ValueError", "functions must name C")),
    ("cuda_build:precompiled_torch_header", 'cuda_build.precompiled_torch_header("c++", "-O3")', E("TypeError", r"cflags must be a list of strings, e.g. \['-O3'\]")),
    ("cuda_build:precompiled_torch_header", 'cuda_build.precompiled_torch_header(None, [])', E("TypeError", "cxx must be the C\\+\\+ compiler's path")),
    ("cuda_build:precompiled_torch_header", 'cuda_build.precompiled_torch_header("c++", [], wait="yes")', E("TypeError", "cuda and wait must be True or False")),
    ("cuda_build:warm_precompiled_header", 'cuda_build.warm_precompiled_header(True)', E("TypeError", "takes 0 positional arguments")),
    ("cuda_build:default_cuda_cflags", 'cuda_build.default_cuda_cflags("sm_x")', E("ValueError", "sm_x")),
    ("cuda_build:extensions_dir", "cuda_build.extensions_dir().name", R("r == 'extensions'")),
    ("cuda_build:compile_cuda", 'cuda_build.compile_cuda("", output="ptx")', E("ValueError", "cuda_source must be")),
    ("cuda_build:compile_cuda", 'cuda_build.compile_cuda("x", output="sass")', E("ValueError", "output must be 'ptx' or 'cubin'")),
    ("cuda_build:compile_cuda", 'cuda_build.compile_cuda("x", extra_flags="-G")', E("TypeError", "extra_flags must be a list of strings")),
    ("cuda_build:compiler_log_path", 'cuda_build.compiler_log_path("a/b.ptx").name', R("r == 'b.log'")),
    ("toolchain:parse_arch", 'toolchain.parse_arch("hopper")', E("ValueError", "hopper")),
    ("toolchain:parse_arch", 'toolchain.parse_arch("sm_90")', R("r == 90")),
    ("toolchain:current_arch", "toolchain.current_arch()", R("r is None")),
    ("toolchain:find_nvcc", "toolchain.find_nvcc()", R("r is None or isinstance(r, str)")),
    ("toolchain:tool_path", 'toolchain.tool_path("no-such-tool-xyz")', R("r is None")),
    ("toolchain:find_ninja", "toolchain.find_ninja()", R("r is None or isinstance(r, str)")),
    ("toolchain:require_ninja", "toolchain.require_ninja()", R("isinstance(r, str)")),
    ("toolchain:require_nvcc", "attempt(toolchain.require_nvcc)", R("'nvcc' in r")),
    ("toolchain:version", 'toolchain.version(None)', R("r is None")),
    ("toolchain:run_tool", 'toolchain.run_tool(["no-such-tool-xyz"], "tool")', E("ToolchainError", "no-such-tool-xyz|tool")),
    ("toolchain:first_error_line", 'toolchain.first_error_line("a\\nb.cu(3): error: bad\\n")', R("'error: bad' in r")),
    ("toolchain:parse_ptxas_log", 'toolchain.parse_ptxas_log("")', R("r == {}")),
    ("toolchain:raises_cleanly", "toolchain.raises_cleanly(None)", E("TypeError", "cxx must be the path or name")),
    ("toolchain:build_lock", "toolchain.build_lock(None).__enter__()", E("TypeError", "build_dir must be a folder")),
    ("toolchain:build_lock", 'toolchain.build_lock("no/such/folder").__enter__()', E("ValueError", "no/such/folder is not a folder")),
    ("toolchain:host_compiler", "toolchain.host_compiler()", R("r is None or isinstance(r, str)")),
    ("toolchain:require_host_compiler", "toolchain.require_host_compiler()", R("isinstance(r, str)")),
    ("toolchain:toolchain_report", "toolchain.toolchain_report()", R("isinstance(r, dict)")),
    # ------------------------------------------------------------------ profiling, kernel_inspect
    ("profiling:annotate", "profiling.annotate(3)", E("TypeError|ValueError", "name")),
    ("profiling:annotate_calls", "profiling.annotate_calls(torch.nn.Linear(2, 2), ['no_such']).__enter__()", E("ValueError|AttributeError", "no_such")),
    ("profiling:stack_config", "profiling.stack_config()", R("r is not None")),
    ("profiling:device_activity", "profiling.device_activity(None)", E("TypeError|ValueError", "prof")),
    ("profiling:time_breakdown", "profiling.time_breakdown(pd.DataFrame())", E("TypeError", "expects the DataFrame returned by device_activity")),
    ("profiling:idle_fraction", "profiling.idle_fraction(pd.DataFrame())", E("TypeError", "expects the DataFrame returned by device_activity")),
    ("profiling:short_kernel_name", 'profiling.short_kernel_name("void k<int>(int)", width=0)', E("ValueError", "width")),
    ("profiling:top_kernels", 'profiling.top_kernels(pd.DataFrame(), by="colour")', E("ValueError", "by")),
    ("profiling:range_times", "profiling.range_times(None)", E("TypeError|ValueError", "prof")),
    ("profiling:time_by_source", 'profiling.time_by_source(None, by="line")', E("ValueError", "by")),
    ("profiling:plot_time_breakdown", 'profiling.plot_time_breakdown({}, unit="percent")', E("ValueError", "frames")),
    ("profiling:ncu_command", 'profiling.ncu_command("dram__bytes")', E("TypeError|ValueError", "metrics")),
    ("profiling:read_ncu_csv", 'profiling.read_ncu_csv("")', E("ValueError", "ncu|CSV|csv")),
    ("profiling:run_ncu", 'profiling.run_ncu("no/such.py", ["dram__bytes"])', E("FileNotFoundError|ToolchainError", "no such file|ncu")),
    ("kernel_inspect:ptx_counts", 'kernel_inspect.ptx_counts("")', R("isinstance(r, dict)")),
    ("kernel_inspect:clean_sass", 'kernel_inspect.clean_sass("")', R("r == ''")),
    ("kernel_inspect:sass_counts", 'kernel_inspect.sass_counts("")', R("isinstance(r, dict)")),
    ("kernel_inspect:summarize", 'kernel_inspect.summarize("k", "sm_90", "cuda", None, None, {})', E("TypeError", "ptx must be the PTX text")),
    ("kernel_inspect:triton_type", "kernel_inspect.triton_type(object())", E("TypeError|ValueError", "object")),
    ("kernel_inspect:kernel_source", "kernel_inspect.kernel_source(3)", E("TypeError", "kernel")),
    ("kernel_inspect:compile_triton_jobs", "kernel_inspect.compile_triton_jobs([])", R("r == []")),
    ("kernel_inspect:compile_triton_jobs", 'kernel_inspect.compile_triton_jobs([], quick="yes")', E("TypeError", "quick must be True or False")),
    ("kernel_inspect:compile_triton", 'kernel_inspect.compile_triton(torch.add, {"x": "*fp32"})', E("TypeError", "kernel")),
    ("fast_interpreter:patch", "fast_interpreter.patch(None)", R("r is False")),
    ("fast_interpreter:patch", "fast_interpreter.patch(types.SimpleNamespace(_patch_builtin=print))", R("r is False")),
    ("kernel_inspect:inspect_cuda", 'kernel_inspect.inspect_cuda("", arch="sm_90")', E("ValueError|ToolchainError", "source|nvcc")),
    ("kernel_inspect:compare", "kernel_inspect.compare({})", E("ValueError", "variants")),
    ("kernel_inspect:normalized_lines", 'kernel_inspect.normalized_lines(None, "ptx", "k")', E("TypeError", "text, stage and kernel_name must be strings")),
    ("kernel_inspect:diff", 'kernel_inspect.diff(None, None)', E("TypeError", "a must be CompiledStages")),
    ("kernel_inspect:instruction_mix", 'kernel_inspect.instruction_mix(None, None)', E("TypeError", "CompiledStages")),
    # ------------------------------------------------------------------ grading
    ("grading:Exercise", 'grading.Exercise("x", "task", None, st.just(None))', E("TypeError", "reference must be the reference function")),
    ("grading:Exercise", 'grading.Exercise("x", "task", torch.neg, [])', E("TypeError", "inputs must be a hypothesis strategy")),
    ("grading:Exercise", 'dataclasses.replace(EXERCISE, families={"typo": list})', E("ValueError", r"unknown input families \['typo'\]")),
    ("grading:Exercise", 'dataclasses.replace(EXERCISE, families={"edges": 3})', E("TypeError", "families must map")),
    ("grading:Exercise", "dataclasses.replace(EXERCISE, examples=(0, 5))", E("ValueError", "examples must be")),
    ("grading:Exercise", "dataclasses.replace(EXERCISE, seconds=-1)", E("ValueError", "seconds must be a number of seconds > 0")),
    ("grading:Exercise", 'dataclasses.replace(EXERCISE, layout="row-major")', E("ValueError", "layout must be")),
    ("grading:Exercise", "dataclasses.replace(EXERCISE, name=None)", E("TypeError", "name must be a non-empty str")),
    ("grading:Exercise", 'dataclasses.replace(EXERCISE, families={"edges": lambda: [grading.Inputs(lambda: (torch.ones(0),), "empty")]}).family_cases()[0][0]', R("r == 'edges'")),
    ("grading:Inputs", 'grading.Inputs(None, "x")', E("TypeError", "Inputs.make must be a function")),
    ("grading:Inputs", "grading.Inputs(tuple, 3)", E("TypeError", "Inputs.about must be a str")),
    ("grading:grade", "grading.grade(None, lambda: None)", E("TypeError", "needs an Exercise")),
    ("grading:grade", 'grading.grade(EXERCISE, "neg")', E("TypeError", "the function you wrote")),
    ("grading:grade", "grading.grade(EXERCISE, torch.neg, quiet=True).passed", R("r is True")),
    ("grading:grade", "grading.grade(EXERCISE, None, quiet=True).status", R("r == grading.NOT_ATTEMPTED")),
    ("grading:grade", "grading.grade(EXERCISE, torch.abs, quiet=True)", R("r.status == 'FAILED' and 'expected' in r.message")),
    ("grading:grade", "grading.grade(dataclasses.replace(EXERCISE, seconds=0.5), lambda *a: time.sleep(3600), quiet=True)", R("r.status == 'FAILED' and 'timed out after 0.5 s' in r.message")),
    ("grading:guard", "grading.guard([1.0])", E("TypeError", "t must be a torch.Tensor")),
    ("grading:guard", "grading.guard(torch.ones(3), pad=-1)", E("ValueError", "pad must be a whole number")),
    ("grading:guard", "grading.guard(torch.ones(4, 4).t()).stride()", R("r == (1, 4)")),
    ("grading:guard", "grading.guard(torch.ones(0)).shape", R("r == (0,)")),
    ("grading:guard", "grading.guard(torch.tensor([float('nan'), 1.0]), fill=0.0, pad=np.int64(2))._course_guard[0].tolist()", R("r[:2] == [0, 0] and math.isnan(r[2]) and r[3:] == [1, 0, 0]")),
    ("grading:compile_check", "grading.compile_check(None)", E("TypeError", "launches must be a list")),
    ("grading:compile_check", "grading.compile_check([])", R("r == ''")),
    ("grading:compile_check", 'grading.compile_check([], archs="sm_90")', E("ValueError", "archs must be a list of architectures")),
    # ------------------------------------------------------------------ lessons/nb04_gemm.py (the CUDA ladder: the guard runs, no kernel)
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5))", E("ValueError", "the CUDA kernels need CUDA tensors")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=np.int64(11), config=np.int64(1))", E("ValueError", "the CUDA kernels need CUDA tensors")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=0)", E("ValueError", "rung must be one of")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=9.0)", E("TypeError", "rung must be an integer")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=True)", E("TypeError", "rung must be an integer")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=9, config=3)", E("ValueError", "config must be >= 0 and <= 2")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), rung=1, config=1)", E("ValueError", "config must be >= 0 and <= 0")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), torch.ones(3, 5), tuned=-1)", E("ValueError", "tuned must be >= 0")),
    ("nb04_gemm:matmul", f"L04.matmul(None, {RG}.reshape(2, 2), torch.ones(2, 2))", E("ValueError", "a requires grad")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3, dtype=torch.half), torch.ones(3, 5))", E("TypeError", "a must have a dtype in")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(3), torch.ones(3, 5))", E("ValueError", "a must be 2-D")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2, 3), None)", E("TypeError", "b must be a torch.Tensor")),
    ("nb04_gemm:matmul", 'L04.matmul(None, torch.ones(2, 3, device="meta"), torch.ones(3, 5, device="meta"))', E("ValueError", "a must be on cpu")),
    ("nb04_gemm:matmul", 'L04.matmul(None, torch.empty(2**31, 1, device="meta"), torch.ones(1, 5, device="meta"))', E("ValueError", "a has 2,147,483,648 elements")),
    ("nb04_gemm:matmul", "L04.matmul(None, torch.ones(2**16, 1), torch.ones(1, 2**16))", E("ValueError", "a @ b would have 65,536 x 65,536 elements")),
    ("nb04_gemm:rung_label", "L04.rung_label(np.int64(11), np.int64(0))", R("r.startswith('rung 11 shape per size [')")),
    ("nb04_gemm:rung_label", "L04.rung_label(12)", E("ValueError", "rung must be one of")),
    ("nb04_gemm:rung_label", "L04.rung_label(9, 3)", E("ValueError", "config must be >= 0 and <= 2")),
    ("nb04_gemm:config_for", "L04.config_for({512: 1, 4096: 2}, np.int64(4000), 4000, 4000)", R("r == 2")),
    ("nb04_gemm:config_for", "L04.config_for({}, 0, 0, 0)", R("r == 0")),
    ("nb04_gemm:config_for", "L04.config_for({0: 1}, 8, 8, 8)", E("ValueError", "a size of size_config must be >= 1")),
    ("nb04_gemm:config_for", "L04.config_for({512: 1}, -1, 8, 8)", E("ValueError", "m must be >= 0")),
    ("nb04_gemm:config_for", "L04.config_for(None, 8, 8, 8)", E("TypeError", "size_config must be a dict")),
    ("nb04_gemm:section", 'L04.section("no such rung")', E("ValueError", "has no section 'no such rung'")),
    ("nb04_gemm:section", 'L04.section("rung 1")', R("'__global__' in r")),
    ("nb04_gemm:smem_wavefronts", "L04.smem_wavefronts([])", E("ValueError", "words must hold the word addresses")),
    ("nb04_gemm:smem_wavefronts", "L04.smem_wavefronts([1.5])", E("TypeError", r"words\[i\] must be an integer")),
    ("nb04_gemm:smem_wavefronts", "L04.smem_wavefronts([-1])", E("ValueError", r"words\[i\] must be >= 0")),
    ("nb04_gemm:smem_wavefronts", "L04.smem_wavefronts(np.array([0, 32, 64, 1]))", R("r == 3")),
    ("nb04_gemm:gemm_cases", 'L04.gemm_cases("tpu")', E("ValueError", "device='tpu'")),
    ("nb04_gemm:gemm_cases", 'len(L04.gemm_cases("cpu", [(1, 1, 1)]))', R("r == 3")),
    ("nb04_gemm:resource_usage", 'L04.resource_usage("sm_x")', E("ValueError", "arch must look like 'sm_90'")),
    # ------------------------------------------------------------------ lessons/nb05_vector_add.py
    ("nb05_vector_add:add", "L05.add(torch.ones(4, dtype=torch.int32), torch.ones(4, dtype=torch.int32))", E("TypeError", "x must have a dtype in")),
    ("nb05_vector_add:add", "L05.add(torch.ones(4), torch.ones(4).double())", E("TypeError", "y must have a dtype in")),
    ("nb05_vector_add:add", "L05.add(torch.ones(4), torch.ones(5))", E("ValueError", "must have the same shape")),
    ("nb05_vector_add:add", "L05.add(None, torch.ones(4))", E("TypeError", "x must be a torch.Tensor")),
    ("nb05_vector_add:add", "L05.add([1.0], [2.0])", E("TypeError", "x must be a torch.Tensor")),
    ("nb05_vector_add:add", f"L05.add({RG}, torch.ones(4))", E("ValueError", "x requires grad")),
    ("nb05_vector_add:add", 'L05.add(torch.ones(4, device="meta"), torch.ones(4, device="meta"))', E("ValueError", "x must be on cpu")),
    ("nb05_vector_add:add", 'L05.add(torch.empty(2**31, device="meta"), torch.empty(2**31, device="meta"))', E("ValueError", "x has 2,147,483,648 elements")),
    ("nb05_vector_add:add", f"L05.add({META_VIEW}, {META_VIEW})", E("ValueError", "x must be on cpu")),  # copied first: its span is no limit
    ("nb05_vector_add:add", "L05.add(torch.ones(8), torch.ones(8), block_size=0)", E("ValueError", "block_size must be a positive power of two")),
    ("nb05_vector_add:add", "L05.add(torch.ones(8), torch.ones(8), block_size=-1024)", E("ValueError", "block_size must be a positive power of two")),
    ("nb05_vector_add:add", "L05.add(torch.ones(8), torch.ones(8), block_size=1000)", E("ValueError", "power of two")),
    ("nb05_vector_add:add", "L05.add(torch.ones(8), torch.ones(8), block_size=2**21)", E("ValueError", "block_size must be between")),
    ("nb05_vector_add:add", "L05.add(torch.ones(8), torch.ones(8), block_size=1024.0)", E("TypeError", "block_size must be an integer")),
    ("nb05_vector_add:add", "L05.add(torch.arange(40.0), torch.ones(40), block_size=np.int64(16)).tolist()", R("r == list(range(1, 41))")),
    ("nb05_vector_add:add", "L05.add(torch.ones(0), torch.ones(0)).shape", R("r == (0,)")),
    ("nb05_vector_add:add", "L05.add(torch.ones(1, dtype=torch.half), torch.ones(1, dtype=torch.half)).tolist()", R("r == [2.0]")),
    ("nb05_vector_add:add", "torch.equal(L05.add(torch.arange(20.0)[::2], torch.arange(10.0)), torch.arange(20.0)[::2] + torch.arange(10.0))", R("r")),
    ("nb05_vector_add:add", "torch.equal(L05.add(x6.t(), x6.t()), 2 * x6.t())", R("r")),
    ("nb05_vector_add:add", "torch.equal(L05.add(torch.ones(1).expand(3000), torch.ones(3000)), torch.full((3000,), 2.0))", R("r")),
    ("nb05_vector_add:add", "L05.add(torch.tensor([float('nan'), float('inf'), 1.0]), torch.tensor([1.0, -float('inf'), float('inf')])).tolist()", R("math.isnan(r[0]) and math.isnan(r[1]) and r[2] == float('inf')")),
    ("nb05_vector_add:add_no_mask", "torch.equal(L05.add_no_mask(torch.arange(2048.0)[::2], torch.ones(1024)), torch.arange(2048.0)[::2] + 1)", R("r")),
    ("nb05_vector_add:add_no_mask", "torch.equal(L05.add_no_mask(torch.ones(1).expand(1024), torch.ones(1024)), torch.full((1024,), 2.0))", R("r")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(1000), torch.ones(1000))", E("ValueError", "multiple of 1024, got 1000")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(1024), torch.ones(1024), block_size=0)", E("ValueError", "block_size must be a positive power of two")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(1024), torch.ones(1024), block_size=-1024)", E("ValueError", "block_size must be a positive power of two")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(48), torch.ones(48), block_size=48)", E("ValueError", "power of two")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.full((16,), float('nan')), torch.ones(16), block_size=np.int64(16)).isnan().all().item()", R("r is True")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(0), torch.ones(0)).shape", R("r == (0,)")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(4, 4), torch.ones(4, 4))", E("ValueError", "x must be 1-D")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(1024, dtype=torch.int64), torch.ones(1024, dtype=torch.int64))", E("TypeError", "x must have a dtype in")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(1024, requires_grad=True), torch.ones(1024))", E("ValueError", "x requires grad")),
    ("nb05_vector_add:add_no_mask", 'L05.add_no_mask(torch.empty(2**31, device="meta"), torch.empty(2**31, device="meta"))', E("ValueError", "x has 2,147,483,648 elements")),
    ("nb05_vector_add:add_no_mask", "L05.add_no_mask(torch.ones(16), None)", E("TypeError", "y must be a torch.Tensor")),
    # ------------------------------------------------------------------ lessons/nb05_row_kernels.py
    ("nb05_row_kernels:square_rowblock", "torch.equal(L05r.square_rowblock(x6.t()), x6.t() ** 2)", R("r")),
    ("nb05_row_kernels:square_rowblock", "torch.equal(L05r.square_rowblock(x6[:, ::2]), x6[:, ::2] ** 2)", R("r")),
    ("nb05_row_kernels:square_rowblock", "torch.equal(L05r.square_rowblock(torch.arange(3.0).expand(4, 3)), torch.arange(3.0).expand(4, 3) ** 2)", R("r")),
    ("nb05_row_kernels:square_rowblock", "[L05r.square_rowblock(torch.ones(s)).shape for s in ((0, 5), (3, 0))]", R("r == [(0, 5), (3, 0)]")),
    ("nb05_row_kernels:square_rowblock", "L05r.square_rowblock(torch.tensor([[float('nan'), -float('inf')]])).tolist()", R("math.isnan(r[0][0]) and r[0][1] == float('inf')")),
    ("nb05_row_kernels:square_rowblock", "L05r.square_rowblock(torch.ones(6))", E("ValueError", "x must be 2-D")),
    ("nb05_row_kernels:square_rowblock", "L05r.square_rowblock(torch.ones(2, 2, dtype=torch.int32))", E("TypeError", "x must have a dtype in")),
    ("nb05_row_kernels:square_rowblock", "L05r.square_rowblock(torch.ones(2, 2, requires_grad=True))", E("ValueError", "x requires grad")),
    ("nb05_row_kernels:square_rowblock", "L05r.square_rowblock(torch.zeros(1, 2**20 + 1))", E("ValueError", "do not fit in one block")),
    ("nb05_row_kernels:square_rowblock", 'L05r.square_rowblock(torch.empty(8, device="meta").as_strided((2, 4), (2**31, 1)))', E("ValueError", "x reaches element offset 2,147,483,651")),
    ("nb05_row_kernels:square_chunked", "torch.equal(L05r.square_chunked(x6, block=np.int64(4)), x6 ** 2)", R("r")),
    ("nb05_row_kernels:square_chunked", "L05r.square_chunked(x6, block=0)", E("ValueError", "block must be a positive power of two")),
    ("nb05_row_kernels:square_chunked", "L05r.square_chunked(x6, block=-4)", E("ValueError", "block must be a positive power of two")),
    ("nb05_row_kernels:square_chunked", "L05r.square_chunked(x6, block=2**21)", E("ValueError", "block must be between")),
    ("nb05_row_kernels:square_chunked", "L05r.square_chunked(None)", E("TypeError", "x must be a torch.Tensor")),
    ("nb05_row_kernels:square_chunked", "L05r.square_chunked(torch.ones(0, 3)).shape", R("r == (0, 3)")),
    ("nb05_row_kernels:rowblock_warps", "L05r.rowblock_warps(np.int64(4096))", R("r == 16")),
    ("nb05_row_kernels:rowblock_warps", "L05r.rowblock_warps(3000)", E("ValueError", "block must be a positive power of two")),
    ("nb05_row_kernels:useful_fraction", "L05r.useful_fraction(4097, np.int64(1024))", R("abs(r - 4097 / 5120) < 1e-12")),
    ("nb05_row_kernels:useful_fraction", "L05r.useful_fraction(4097, 0)", E("ValueError", "block must be a positive power of two")),
    ("nb05_row_kernels:useful_fraction", "L05r.useful_fraction(0, 1024)", E("ValueError", "n_cols must be >= 1")),
    # ------------------------------------------------------------------ lessons/nb06_softmax.py, nb06_softmax_persistent.py
    ("nb06_softmax:softmax", "torch.allclose(L06.softmax(x6.t()), torch.softmax(x6.t(), 1))", R("r")),
    ("nb06_softmax:softmax", "torch.allclose(L06.softmax(x6[:, ::2]), torch.softmax(x6[:, ::2], 1))", R("r")),
    ("nb06_softmax:softmax", "torch.allclose(L06.softmax(torch.arange(4.0).expand(3, 4)), torch.softmax(torch.arange(4.0), 0).expand(3, 4))", R("r")),
    ("nb06_softmax:softmax", "L06.softmax(torch.tensor([[3.0]], dtype=torch.bfloat16)).tolist()", R("r == [[1.0]]")),
    ("nb06_softmax:softmax", "[L06.softmax(torch.ones(s)).shape for s in ((0, 5), (5, 0))]", R("r == [(0, 5), (5, 0)]")),
    ("nb06_softmax:softmax", "torch.allclose(L06.softmax(torch.tensor([[1.0, float('inf')], [float('nan'), 0.0], [-float('inf'), 0.0]])), torch.softmax(torch.tensor([[1.0, float('inf')], [float('nan'), 0.0], [-float('inf'), 0.0]]), 1), equal_nan=True)", R("r")),
    ("nb06_softmax:softmax", "L06.softmax(torch.ones(6))", E("ValueError", "x must be 2-D")),
    ("nb06_softmax:softmax", "L06.softmax(torch.ones(2, 2, dtype=torch.float64))", E("TypeError", "x must have a dtype in")),
    ("nb06_softmax:softmax", "L06.softmax([[1.0]])", E("TypeError", "x must be a torch.Tensor")),
    ("nb06_softmax:softmax", "L06.softmax(torch.ones(2, 2, requires_grad=True))", E("ValueError", "x requires grad")),
    ("nb06_softmax:softmax", "L06.softmax(torch.zeros(1, 32769))", E("ValueError", "do not fit in one block")),
    ("nb06_softmax:softmax", 'L06.softmax(torch.empty(8, device="meta").as_strided((2, 4), (2**31, 1)))', E("ValueError", "x reaches element offset 2,147,483,651")),
    ("nb06_softmax:softmax", 'L06.softmax(torch.empty(8, device="meta").as_strided((2, 4), (1, 2**30)))', E("ValueError", "x must be on cpu")),  # copied: a row of 4
    ("nb06_softmax:softmax", 'L06.softmax(torch.empty(2**16 - 1, 3 * 2**14, device="meta")[:, :2**15])', E("ValueError", r"x reaches element offset 3,221,159,935")),  # fewer than 2**31 elements
    ("nb06_softmax:softmax_num_warps", "L06.softmax_num_warps(np.int64(8192))", R("r == 8")),
    ("nb06_softmax:softmax_num_warps", "L06.softmax_num_warps(0)", E("ValueError", "block_size must be a positive power of two")),
    ("nb06_softmax_persistent:softmax_persistent", "torch.allclose(L06p.softmax_persistent(x6.t(), np.int64(1), np.int64(2)), torch.softmax(x6.t(), 1))", R("r")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(torch.ones(0, 4)).shape", R("r == (0, 4)")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6, programs_per_sm=0)", E("ValueError", "programs_per_sm must be >= 1")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6, programs_per_sm=-8)", E("ValueError", "programs_per_sm must be >= 1")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6, num_stages=0)", E("ValueError", "num_stages must be >= 1")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6, num_stages=2.5)", E("TypeError", "num_stages must be an integer")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6.int())", E("TypeError", "x must have a dtype in")),
    ("nb06_softmax_persistent:softmax_persistent", "L06p.softmax_persistent(x6.clone().requires_grad_())", E("ValueError", "x requires grad")),
    # ------------------------------------------------------------------ lessons/nb07_matmul.py
    ("nb07_matmul:validate", "L07.validate(torch.ones(2, 3), torch.ones(3, 2))", E("TypeError", "a must have a dtype in")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3), h(4, 2))", E("ValueError", "inner dimensions differ")),
    ("nb07_matmul:validate", 'L07.validate(h(2, 3), h(3, 2), "relu")', E("ValueError", "activation must be one of")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3), h(3, 2), None)", E("ValueError", "activation must be one of")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3).requires_grad_(), h(3, 2))", E("ValueError", "a requires grad")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3), h(3))", E("ValueError", "b must be 2-D")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3), [[1.0]] * 3)", E("TypeError", "b must be a torch.Tensor")),
    ("nb07_matmul:validate", "L07.validate(h(2**16, 1), h(1, 2**16))", E("ValueError", "a @ b would have 65,536 x 65,536 elements")),
    ("nb07_matmul:validate", 'L07.validate(torch.empty(16, dtype=torch.half, device="meta").as_strided((4, 4), (2**30, 1)), h(4, 2))', E("ValueError", "a reaches element offset 3,221,225,475")),
    ("nb07_matmul:validate", 'L07.validate(h(2, 3).to("meta"), h(3, 2).to("meta"))', E("ValueError", "a must be on cpu")),
    ("nb07_matmul:validate", "L07.validate(h(2, 3), h(3, 2).bfloat16())", E("TypeError", "share one dtype")),
    ("nb07_matmul:matmul_rowmajor", "torch.equal(L07.matmul_rowmajor(h(5, 7), h(7, 3)), L07.reference(h(5, 7), h(7, 3)))", R("r")),
    ("nb07_matmul:matmul_rowmajor", "torch.equal(L07.matmul_rowmajor(h(7, 5).t(), h(1, 3).expand(7, 3), group_m=np.int64(2)), L07.reference(h(7, 5).t(), h(1, 3).expand(7, 3)))", R("r")),
    ("nb07_matmul:matmul_rowmajor", "L07.matmul_rowmajor(h(5, 7), h(7, 3), group_m=0)", E("ValueError", "group_m must be >= 1")),
    ("nb07_matmul:matmul_rowmajor", "L07.matmul_rowmajor(h(0, 7), h(7, 3)).shape", R("r == (0, 3)")),
    ("nb07_matmul:matmul_rowmajor", "L07.matmul_rowmajor(h(2, 0), h(0, 3)).tolist()", R("r == [[0.0] * 3] * 2")),
    ("nb07_matmul:matmul_rowmajor", "L07.matmul_rowmajor(torch.tensor([[float('nan'), 1.0]], dtype=torch.half), h(2, 2)).isnan()[0].tolist()", R("r == [True, True]")),
    ("nb07_matmul:matmul_blocked", 'torch.allclose(L07.matmul_blocked(h(5, 7).bfloat16(), h(7, 3).bfloat16(), "leaky_relu"), L07.reference(h(5, 7).bfloat16(), h(7, 3).bfloat16(), "leaky_relu"), rtol=3e-2, atol=3e-2)', R("r")),
    ("nb07_matmul:matmul_blocked", 'L07.matmul_blocked(h(5, 7), h(7, 3), "tanh")', E("ValueError", "activation must be one of")),
    ("nb07_matmul:matmul", "torch.equal(L07.matmul(h(16, 8), h(8, 8)), L07.reference(h(16, 8), h(8, 8)))", R("r")),
    ("nb07_matmul:matmul", "L07.matmul(h(16, 8).requires_grad_(), h(8, 8))", E("ValueError", "a requires grad")),
    ("nb07_matmul:uses_tma", "L07.uses_tma(h(16, 8), h(8, 8))", R("r is True")),
    ("nb07_matmul:uses_tma", "L07.uses_tma(h(16, 7), h(7, 8))", R("r is False")),
    ("nb07_matmul:uses_tma", "L07.uses_tma(None, h(8, 8))", E("TypeError", "a must be a torch.Tensor")),
    ("nb07_matmul:interpreter_safe", "L07.interpreter_safe(h(2, 2).bfloat16(), h(2, 2).bfloat16())[0].dtype", R("r == torch.float32")),
    ("nb07_matmul:interpreter_safe", "L07.interpreter_safe(h(2, 2), 3)", E("TypeError", "b must be a torch.Tensor")),
    ("nb07_matmul:config", "L07.config(np.int64(64), 32, 32, 1, 4).kwargs", R("r == {'BLOCK_M': 64, 'BLOCK_N': 32, 'BLOCK_K': 32, 'GROUP_M': 8}")),
    ("nb07_matmul:config", "L07.config(0, 32, 32, 1, 4)", E("ValueError", "bm must be a positive power of two")),
    ("nb07_matmul:config", "L07.config(64, 48, 32, 1, 4)", E("ValueError", "bn must be a positive power of two")),
    ("nb07_matmul:config", "L07.config(64, 64, 32, 0, 4)", E("ValueError", "stages must be >= 1")),
    ("nb07_matmul:config", "L07.config(64, 64, 32, 1, 3)", E("ValueError", "warps must be a positive power of two")),
    ("nb07_matmul:config", "L07.config(64, 64, 32, 1, 4, group_m=-1)", E("ValueError", "group_m must be >= 1")),
    ("nb07_matmul:prune_configs", "len(L07.prune_configs([L07.config(32, 32, 32, 1, 4), L07.config(128, 128, 32, 1, 4)], {'M': 8, 'N': 8}))", R("r == 1")),
    ("nb07_matmul:prune_configs", "L07.prune_configs([], {'M': 8, 'N': 8})", E("ValueError", "configs must be a non-empty list")),
    ("nb07_matmul:prune_configs", "L07.prune_configs([L07.config(32, 32, 32, 1, 4)], {})", E("ValueError", "named_args must hold the kernel's M and N")),
    ("nb07_matmul:set_block_shapes", "L07.set_block_shapes({})", E("ValueError", "nargs must hold the launch's arguments")),
    ("nb07_matmul:set_block_shapes", "(lambda d: (L07.set_block_shapes(d), d['a_desc'].block_shape)[1])({'BLOCK_M': 32, 'BLOCK_N': 16, 'BLOCK_K': 8, **{k: types.SimpleNamespace() for k in ('a_desc', 'b_desc', 'c_desc')}})", R("r == [32, 8]")),
    ("nb07_matmul:reference", 'L07.reference(h(2, 3), h(3, 2), "relu")', E("ValueError", "activation must be one of")),
    ("nb07_matmul:reference", "L07.reference(h(2, 3), h(3, 2)).dtype", R("r == torch.float16")),
    ("nb07_matmul:matmul_cases", "len(L07.matmul_cases([(1, 1, 1)], torch.bfloat16, seed=np.int64(3)))", R("r == 3")),
    ("nb07_matmul:matmul_cases", "L07.matmul_cases([(1, 1, 1)], torch.float32)", E("ValueError", "dtype must be one of")),
    ("nb07_matmul:matmul_cases", "L07.matmul_cases([(1, 1)], torch.float16)", E("ValueError", r"shapes must be a non-empty list of \(M, N, K\)")),
    ("nb07_matmul:matmul_cases", "L07.matmul_cases([(1, -1, 1)], torch.float16)", E("ValueError", r"shapes\[i\] must be >= 0")),
    ("nb07_matmul:check_matmul", "L07.check_matmul(None)", E("TypeError", "must both be callable")),
    ("nb07_matmul:check_matmul", "L07.check_matmul(L07.matmul_rowmajor, [(1, 1, 1)]).passed", R("r is True")),
    # ------------------------------------------------------------------ lessons/nb11_dlrm.py
    ("nb11_dlrm:generate_criteo_like", "L11.generate_criteo_like(tmp, 0, 10)", E("ValueError", "at least one train")),
    ("nb11_dlrm:generate_criteo_like", "L11.generate_criteo_like(tmp, 10, 10, positive_rate=0.9)", E("ValueError", "positive_rate < 0.5")),
    ("nb11_dlrm:generate_criteo_like", "L11.generate_criteo_like(tmp, 10.5, 10)", E("TypeError", "n_train must be an integer")),
    ("nb11_dlrm:generate_criteo_like", "L11.generate_criteo_like(Path(tmp) / 'd', np.int64(64), 64, max_vocab=50)['rows']", R("r == {'train': 64, 'test': 64}")),
    ("nb11_dlrm:write_criteo_tsv", "L11.write_criteo_tsv(None, Path(tmp) / 'x.tsv')", E("TypeError", "table must be a pyarrow Table")),
    ("nb11_dlrm:read_criteo", "L11.read_criteo(write(Path(tmp) / 'empty.parquet', ''))", E("ValueError", "empty.parquet is empty")),
    ("nb11_dlrm:read_criteo", "L11.read_criteo(Path(tmp) / 'nothing.parquet')", E("FileNotFoundError", "nothing.parquet")),
    ("nb11_dlrm:read_criteo", "L11.read_criteo(write(Path(tmp) / 'bad.tsv', '1\\t2\\n'))", E("ValueError|ArrowInvalid", "column|Expected")),
    ("nb11_dlrm:CriteoDataset", "L11.CriteoDataset(None)", E("TypeError", "source must be a path or a pyarrow Table")),
    ("nb11_dlrm:CriteoDataset", "len(L11.CriteoDataset(criteo()))", R("r == 64")),
    ("nb11_dlrm:make_loader", "L11.make_loader(L11.CriteoDataset(criteo()), 65)", E("ValueError", "batch_size=65 but the dataset has 64 rows")),
    ("nb11_dlrm:make_loader", "L11.make_loader(L11.CriteoDataset(criteo()), 0)", E("ValueError", "batch_size must be >= 1")),
    ("nb11_dlrm:make_loader", "len(list(L11.make_loader(L11.CriteoDataset(criteo()), np.int64(65), shuffle=False)))", R("r == 1")),
    ("nb11_dlrm:forever", "next(L11.forever([]))", E("ValueError", "no batch in a whole epoch")),
    ("nb11_dlrm:dense_transform", "L11.dense_transform(torch.tensor([float('nan'), -2.0, 0.0]))", R("r.tolist() == [0.0, 0.0, 0.0]")),
    ("nb11_dlrm:dense_transform", "L11.dense_transform(torch.tensor([1, 2]))", E("TypeError", "x must be a float tensor")),
    ("nb11_dlrm:hash_rows", "L11.hash_rows(torch.tensor([[-1, 7]]), torch.tensor([3, 5]))", R("r.tolist() == [[2, 2]]")),
    ("nb11_dlrm:hash_rows", "L11.hash_rows(torch.tensor([[1, 7, 9]]), torch.tensor([3, 5]))", E("ValueError", r"ids must be \(batch, 2\)")),
    ("nb11_dlrm:hash_rows", "L11.hash_rows(torch.tensor([[1, 7]]), torch.tensor([[3, 5]]))", E("ValueError", "table_sizes must be 1-D")),
    ("nb11_dlrm:VocabTokenizer", "L11.VocabTokenizer([3, 0])", E("ValueError", r"table_sizes\[1\] must be >= 1")),
    ("nb11_dlrm:VocabTokenizer", "L11.VocabTokenizer([3, 2.5])", E("TypeError", r"table_sizes\[1\] must be an integer")),
    ("nb11_dlrm:VocabTokenizer", "L11.VocabTokenizer([3, 3])(torch.tensor([[1.0, 2.0]]))", E("TypeError", "ids must be an int64 tensor")),
    ("nb11_dlrm:VocabTokenizer", "L11.VocabTokenizer([3, 3])(torch.tensor([[5, -1], [5, 9]])).tolist()", R("r == [[1, 0], [1, 1]]")),
    ("nb11_dlrm:mlp", "L11.mlp([4], last_relu=False)", E("ValueError", "at least an input and an output")),
    ("nb11_dlrm:mlp", "L11.mlp([4, -2], last_relu=False)", E("ValueError", r"sizes\[1\] must be >= 1")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 0, 5])", E("ValueError", r"table_sizes\[1\] must be >= 1")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, -4, 5])", E("ValueError", r"table_sizes\[1\] must be >= 1")),
    ("nb11_dlrm:DLRM", "L11.DLRM([])", E("ValueError", "table_sizes must be a non-empty list")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 5], dim=0)", E("ValueError", "dim must be >= 1")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 5], n_dense=2)(torch.ones(4, 2), torch.zeros(4, 3, dtype=torch.long))", E("ValueError", r"rows must be int64 \(batch, 2\)")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 5], n_dense=2)(torch.ones(4, 3), torch.zeros(4, 2, dtype=torch.long))", E("ValueError", r"dense must be \(batch, 2\)")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 5], n_dense=2)(torch.ones(4, 2), torch.zeros(4, 2, dtype=torch.long)).shape", R("r == (4,)")),
    ("nb11_dlrm:rows_loss", "L11.rows_loss(L11.DLRM([3], n_dense=1), torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.long), torch.ones(3))", E("ValueError", "size")),
    ("nb11_dlrm:hashed_loss", "L11.hashed_loss(L11.DLRM([3], n_dense=1), torch.ones(2, 1), torch.zeros(2, 1), torch.ones(2))", E("TypeError", "int64")),
    ("nb11_dlrm:roc_auc", "L11.roc_auc([0.1, 0.9], [1, 1])", E("ValueError", "at least one positive and one negative")),
    ("nb11_dlrm:roc_auc", "L11.roc_auc(np.array([0.1, 0.9, 0.5], dtype=np.float32), [0, 1, 0])", R("r == 1.0")),
    ("nb11_dlrm:auc_standard_error", "L11.auc_standard_error(1.5, 10, 10)", E("ValueError", "auc must be >= 0 and <= 1")),
    ("nb11_dlrm:auc_standard_error", "L11.auc_standard_error(np.float32(0.75), np.int64(10), 0)", E("ValueError", "n_neg must be >= 1")),
    ("nb11_dlrm:evaluate", "L11.evaluate(L11.DLRM([3], n_dense=1), [], 'cpu')", E("ValueError", "loader gave no batch")),
    ("nb11_dlrm:Stage", 'L11.Stage("x", "dict", sync_logging=True)', E("ValueError", "Stage.tokenizer must be")),
    ("nb11_dlrm:train_steps", "L11.train_steps(None, None, iter([]), -1, L11.STAGES[3], device='cpu', loss_fn=L11.hashed_loss)", E("ValueError", "steps must be >= 0")),
    ("nb11_dlrm:train_steps", "L11.train_steps(None, None, iter([]), 1, L11.STAGES[3], device='cpu')", E("ValueError", "pass loss_fn")),
    ("nb11_dlrm:train_steps", "L11.train_steps(None, None, iter([]), 1, L11.STAGES[0], device='cpu')", E("ValueError", "pass tokenizer")),
    ("nb11_dlrm:train_steps", "L11.train_steps(None, None, [], 1, L11.STAGES[3], device='cpu', loss_fn=L11.hashed_loss)", E("TypeError", "batches must be an iterator")),
    ("nb11_dlrm:train_steps", "L11.train_steps(None, None, L11.forever(L11.make_loader(L11.CriteoDataset(criteo()), 64)), 0, L11.STAGES[3], device='cpu', loss_fn=L11.hashed_loss)", R("r == []")),
    ("nb11_dlrm:naive_loop_report", "L11.naive_loop_report({'sizes': [3]})", E("ValueError", "cfg must be a dict with keys")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3, requires_grad=True), torch.ones(3))", E("ValueError", "x requires grad")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3), torch.ones(3), block=0)", E("ValueError", "block must be a positive power of two")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3), torch.ones(3), block=-64)", E("ValueError", "block must be a positive power of two")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3), torch.ones(3), block=100)", E("ValueError", "power of two")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3, dtype=torch.int32), torch.ones(3, dtype=torch.int32))", E("TypeError", "x must have a dtype in")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3), torch.ones(4))", E("ValueError", "bias must be 1-D with x.shape")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(4, 3), [1.0, 2.0, 3.0])", E("TypeError", "bias must be a torch.Tensor")),
    ("nb11_dlrm:bias_relu", 'L11.bias_relu(torch.ones(4, 3, device="meta"), torch.ones(3, device="meta"))', E("ValueError", "x must be on cpu")),
    ("nb11_dlrm:bias_relu", 'L11.bias_relu(torch.ones(2**31, 1, device="meta"), torch.ones(1, device="meta"))', E("ValueError", "x has 2,147,483,648 elements")),
    ("nb11_dlrm:bias_relu", "torch.equal(L11.bias_relu(x6.t(), torch.arange(4.0) - 2, block=np.int64(64)), torch.relu(x6.t() + torch.arange(4.0) - 2))", R("r")),
    ("nb11_dlrm:bias_relu", "torch.equal(L11.bias_relu(torch.ones(3).expand(5, 3), -torch.ones(3)), torch.zeros(5, 3))", R("r")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.ones(0, 3), torch.ones(3)).shape", R("r == (0, 3)")),
    ("nb11_dlrm:bias_relu", "L11.bias_relu(torch.tensor([[float('nan'), float('inf')]]), torch.zeros(2)).tolist()", R("math.isnan(r[0][0]) and r[0][1] == float('inf')")),
    ("nb11_dlrm:build_bias_relu_cuda", "L11.build_bias_relu_cuda()", E("ToolchainError", "CUDA is not available")),
    ("nb11_dlrm:DLRM", "L11.DLRM([3, 4], n_dense=1, fused=True)(torch.ones(2, 1), torch.tensor([[2, 3], [0, 0]])).shape", R("r == (2,)")),
    ("nb11_dlrm:fuse_tables", "L11.fuse_tables(None)", E("TypeError", "model must be a DLRM with one table per feature")),
    ("nb11_dlrm:fuse_tables", "L11.fuse_tables(L11.DLRM([3, 4], fused=True))", E("TypeError", "model must be a DLRM with one table per feature")),
    ("nb11_dlrm:fuse_tables", "L11.fuse_tables(L11.DLRM([3, 4], n_dense=1)).table.weight.shape", R("r == (7, 16)")),
    ("nb11_dlrm:Vocabulary", "L11.Vocabulary(torch.tensor([[5, -1], [7, 5]]), [3, 3])(torch.tensor([[7, 5], [9, -1]])).tolist()", R("r == [[2, 1], [0, 0]]")),
    ("nb11_dlrm:Vocabulary", "L11.Vocabulary(torch.tensor([[5, 6], [7, 8]]), [2, 3])", E("ValueError", r"table_sizes\[0\] = 2 has no room for 2 distinct ids")),
    ("nb11_dlrm:Vocabulary", "L11.Vocabulary(torch.tensor([[1.0, 2.0]]), [3, 3])", E("TypeError", "ids must be an int64 tensor")),
    ("nb11_dlrm:Vocabulary", "L11.Vocabulary(torch.tensor([[1, 2]]), [3, 3])(torch.tensor([[1, 2, 3]]))", E("ValueError", r"ids must be int64 \(batch, 2\)")),
    ("nb11_dlrm:DeviceBatches", "L11.DeviceBatches(None, None, None, 2)", E("TypeError", "dense, rows and label must be tensors")),
    ("nb11_dlrm:DeviceBatches", "L11.DeviceBatches(torch.ones(4, 2), torch.zeros(4, 3, dtype=torch.long), torch.ones(5), 2)", E("ValueError", "one row per sample")),
    ("nb11_dlrm:DeviceBatches", "L11.DeviceBatches(torch.ones(4, 2), torch.zeros(4, 3, dtype=torch.long), torch.ones(4), 5)", E("ValueError", "batch_size=5 but the data set has 4 rows")),
    ("nb11_dlrm:DeviceBatches", "L11.DeviceBatches(torch.ones(4, 2), torch.zeros(4, 3, dtype=torch.long), torch.ones(4), 0)", E("ValueError", "batch_size must be >= 1")),
    ("nb11_dlrm:DeviceBatches", "sorted(torch.cat([next(b)[2] for b in [L11.DeviceBatches(torch.ones(4, 2), torch.zeros(4, 3, dtype=torch.long), torch.arange(4.0), np.int64(2))] for _ in range(2)]).tolist())", R("r == [0.0, 1.0, 2.0, 3.0]")),
    ("nb11_dlrm:device_step", "L11.device_step(None, None, None)", E("TypeError", "loss_fn must be callable")),
    ("nb11_dlrm:device_step", "float(L11.device_step(m := L11.DLRM([3], n_dense=1), torch.optim.SGD(m.parameters(), lr=0.1), L11.rows_loss)(torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.long), torch.ones(2)))", R("r > 0")),
    ("nb11_dlrm:graph_step", "L11.graph_step(None, ())", E("TypeError", "step must be callable and example a batch")),
    ("nb11_dlrm:graph_step", "L11.graph_step(lambda *b: b[0].sum(), (torch.ones(2),))", E("ValueError", "cuda_graph needs a CUDA GPU")),
    ("nb11_dlrm:device_run", "L11.device_run(None, iter([]))", E("TypeError", "step must be callable")),
    ("nb11_dlrm:device_run", "L11.device_run(lambda d, r, y: d.sum(), iter([]))(-1)", E("ValueError", "steps must be >= 0")),
    ("nb11_dlrm:device_run", "(lambda run: (run(1), run.losses[0].item())[1])(L11.device_run(lambda d, r, y: d.sum(), iter([(torch.ones(2), None, None)])))", R("r == 2.0")),
    ("nb11_dlrm:loader_run", "L11.loader_run('x', None, None, iter([]), device='cpu')", E("TypeError", "stage must be a Stage")),
    ("nb11_dlrm:loader_run", "L11.loader_run(L11.STAGES[3], None, None, iter([]), device='cpu')(1)", E("ValueError", "pass loss_fn")),
    ("nb11_dlrm:steps_per_second", "L11.steps_per_second(None, 5)", E("TypeError", "run must be callable")),
    ("nb11_dlrm:steps_per_second", "L11.steps_per_second(lambda n, on_step=None: None, 0)", E("ValueError", "steps must be >= 1")),
    ("nb11_dlrm:steps_per_second", "L11.steps_per_second(lambda n, on_step=None: time.sleep(0.001 * n), 5, repeats=np.int64(3), warmup=0)[0]", R("100 < r <= 1000")),
    ("nb11_dlrm:profile_run", "L11.profile_run(None, 2)", E("TypeError", "run must be callable")),
    ("nb11_dlrm:profile_run", "L11.profile_run(lambda n, on_step=None: None, 0)", E("ValueError", "steps must be >= 1")),
    ("nb11_dlrm:profile_run", "len([e for e in L11.profile_run(lambda n, on_step=None: [(torch.ones(3) + 1, on_step and on_step()) for _ in range(n)], 2).events() if e.name == 'aten::add'])", R("r == 2")),
    ("nb11_dlrm:chapter_setup", "L11.chapter_setup(None, full=False)", E("TypeError", "cache_dir must be a path and full a bool")),
    ("nb11_dlrm:chapter_setup", "L11.chapter_setup(tmp, full=1)", E("TypeError", "cache_dir must be a path and full a bool")),
    ("nb11_dlrm:compile_logs", "L11.compile_logs({'sizes': [3]})", E("ValueError", "cfg must be a dict with keys sizes, model, batch and data")),
    ("nb11_dlrm:read_compile_logs", "L11.read_compile_logs(None)", E("TypeError", "text must be the child's stderr")),
    ("nb11_dlrm:read_compile_logs", "L11.read_compile_logs('== part 1\\nOutput code:\\nk0 = async_compile.triton(0)\\nx = extern_kernels.mm(a, b)')['kernels']", R("r == [('forward', 'k0')]")),
    # ------------------------------------------------------------------ lessons/nb12_lora.py, nb12_peft.py, nb12_bench.py
    ("nb12_lora:lora_eager", 'L12.lora_eager(torch.ones(2, 4), torch.ones(3, 4), None, torch.ones(1, 4), torch.ones(3, 1), 1.0, "tanh")', E("ValueError", "activation must be one of")),
    ("nb12_lora:lora_eager", "L12.lora_eager(torch.ones(2, 4), torch.ones(3, 4), None, torch.ones(1, 4), torch.ones(3, 1), 0.5).tolist()", R("r == [[6.0] * 3] * 2")),
    ("nb12_lora:lora_reference", 'L12.lora_reference(h(2, 4), h(3, 4), None, h(1, 4), h(3, 1), 0.5, "relu").dtype', R("r == torch.float16")),
    ("nb12_lora:lora_reference", 'L12.lora_reference(h(2, 4), h(3, 4), None, h(1, 4), h(3, 1), 0.5, None)', E("ValueError", "activation must be one of")),
    ("nb12_lora:add_mul_act_eager", 'L12.add_mul_act_eager(torch.ones(3), torch.ones(3), 2.0, "swish")', E("ValueError", "activation must be one of")),
    ("nb12_lora:add_mul_act_reference", 'L12.add_mul_act_reference(torch.tensor([-1.0, 1.0]), torch.ones(2), 2.0).tolist()', R("r == [1.0, 3.0]")),
    ("nb12_lora:check_options", "L12.check_options(1e31, 'none')", E("ValueError", "scale must be 0 or between 1e-30 and 1e\\+30")),
    ("nb12_lora:check_options", "L12.check_options(np.float32(0.5), 'gelu')", R("r == 0.5 and type(r) is float")),
    ("nb12_lora:check_options", "L12.check_options(True, 'none')", E("TypeError", "scale must be a number")),
    ("nb12_lora:check_elementwise", "L12.check_elementwise(torch.ones(3), torch.ones(3).int(), 1.0, 'relu')", E("TypeError", "lora must have a dtype in")),
    ("nb12_lora:add_mul_act", "L12.add_mul_act(torch.ones(4, 8), torch.ones(8, 4))", E("ValueError", "base and lora must have the same shape")),
    ("nb12_lora:add_mul_act", "L12.add_mul_act(torch.ones(4), torch.ones(4), float('nan'))", E("ValueError", "scale must be finite")),
    ("nb12_lora:add_mul_act", "L12.add_mul_act(torch.tensor([float('nan'), -1.0, 2.0]), torch.zeros(3), 1.0, 'relu').isnan().tolist()", R("r == [True, False, False]")),
    ("nb12_lora:add_mul_act", 'L12.add_mul_act(torch.ones(4, 8)[:, ::2], torch.ones(4, 4), 0.5, "none").tolist()', R("r == [[1.5] * 4] * 4")),
    ("nb12_lora:add_mul_act_cuda", "L12.add_mul_act_cuda(torch.ones(3), torch.ones(4))", E("ValueError", "base and lora must have the same shape")),
    ("nb12_lora:add_mul_act_cuda", "L12.add_mul_act_cuda(torch.ones(3), torch.ones(3), 1.0, 'tanh')", E("ValueError", "activation must be one of")),
    ("nb12_lora:tma_layout", "L12.tma_layout(h(16, 8), h(8, 16), 16)", R("r is True")),
    ("nb12_lora:tma_layout", "L12.tma_layout(h(16, 8), h(16, 8).t(), 16)", R("r is False")),
    ("nb12_lora:tma_layout", "L12.tma_layout(h(16, 8), h(8, 16), 7)", R("r is None")),
    ("nb12_lora:tma_layout", "L12.tma_layout(h(16, 8), None, 16)", E("TypeError", "w_op must be a torch.Tensor")),
    ("nb12_lora:lora_forward", "L12.lora_forward([[1.0]], h(8, 16), None, h(2, 8), h(2, 16), 1.0, 'none')", E("TypeError", "x2 must be a torch.Tensor")),
    ("nb12_lora:lora_forward", "L12.lora_forward(h(16, 8), h(8, 17), None, h(2, 8), h(2, 17), 1.0, 'none', xa_in_loop=True)", E("ValueError", "xa_in_loop=True needs the persistent TMA kernel")),
    ("nb12_lora:check_lora", "L12.check_lora(h(2, 8), h(4, 8), None, h(2, 8), h(4, 3), 1.0, 'none')", E("ValueError", "ranks differ")),
    ("nb12_lora:check_lora", "L12.check_lora(h(2, 8), h(4, 8), h(5), h(2, 8), h(4, 2), 1.0, 'none')", E("ValueError", r"b must have shape \(4,\)")),
    ("nb12_lora:lora_linear", "torch.allclose(L12.lora_linear(h(5, 16), h(8, 16), h(8)[::1], h(2, 16), h(8, 2), 0.5).float(), L12.lora_reference(h(5, 16), h(8, 16), h(8), h(2, 16), h(8, 2), 0.5).float(), rtol=4e-3, atol=4e-3)", R("r")),
    ("nb12_lora:lora_linear", "torch.allclose(L12.lora_linear(h(5, 16), h(8, 16), h(16)[::2], h(2, 16), h(8, 2), 0.5).float(), L12.lora_reference(h(5, 16), h(8, 16), h(16)[::2], h(2, 16), h(8, 2), 0.5).float(), rtol=4e-3, atol=4e-3)", R("r")),
    ("nb12_lora:lora_linear", 'L12.lora_linear(torch.empty(48 * 64, device="meta", dtype=torch.half).as_strided((48, 64), (2**26, 1)), torch.empty(32, 64, device="meta", dtype=torch.half), None, torch.empty(4, 64, device="meta", dtype=torch.half), torch.empty(32, 4, device="meta", dtype=torch.half))', E("ValueError", "x reaches element offset 3,154,116,671")),
    ("nb12_lora:lora_linear", "L12.lora_linear(h(5, 16), h(8, 16), None, h(2, 16).float(), h(8, 2).float(), 1e300)", E("ValueError", "scale must be 0 or between")),
    ("nb12_lora:lora_linear", "L12.lora_linear(h(5, 16).bfloat16(), h(8, 16).bfloat16(), None, h(2, 16), h(8, 2))", E("TypeError", "A must have a dtype in")),
    ("nb12_lora:lora_linear", "L12.lora_linear(h(5, 16), h(8, 16), None, h(200, 16), h(8, 200))", E("ValueError", "rank must be between 1 and 128")),
    ("nb12_lora:lora_linear", "L12.lora_linear(h(2**16, 8), h(2**16, 8), None, h(4, 8), h(2**16, 4))", E("ValueError", "the output would have 65,536 x 65,536 elements")),
    ("nb12_lora:lora_linear", "(lambda B: L12.lora_linear(h(5, 16), h(8, 16), None, h(2, 16), B, 2e5).isfinite().all().item())(h(8, 2) * 1e-4)", R("r is True")),
    ("nb12_lora:config_text", "L12.config_text({'BLOCK_M': 64})", E("TypeError", "config must be a triton.Config")),
    ("nb12_lora:prune_epilogues", "L12.prune_epilogues([], {}, HAS_ADAPTER=True)", E("ValueError", "configs must be a non-empty list")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['RANK_FMA'] for c in L12.prune_epilogues([L12.triton.Config({'RANK_FMA': f}) for f in (False, True)], {}, HAS_ADAPTER=True, XA_IN_LOOP=True)]", R("r == [False]")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['RANK_FMA'] for c in L12.prune_epilogues([L12.triton.Config({'RANK_FMA': f}) for f in (False, True)], {}, HAS_ADAPTER=True, XA_IN_LOOP=False)]", R("r == [False, True]")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['RANK_FMA'] for c in L12.prune_epilogues([L12.triton.Config({'RANK_FMA': f}) for f in (False, True)], {'M': 8192, 'N': 4096}, HAS_ADAPTER=True)]", R("r == [False, True]")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['RANK_FMA'] for c in L12.prune_epilogues([L12.tile_config(128, 256, 64, 3, 8, 1, False, RANK_FMA=f) for f in (False, True)], {'M': 33, 'N': 40}, HAS_ADAPTER=True, BLOCK_R=32)]", R("r == [True]")),
    ("nb12_lora:prune_epilogues", "[c.num_stages for c in L12.prune_epilogues([L12.tile_config(128, 256, 64, s, 8, 1, False, RANK_FMA=False) for s in (4, 3)], {'M': 33, 'N': 40}, HAS_ADAPTER=True, XA_IN_LOOP=True, BLOCK_R=32)]", R("r == [3]")),
    ("nb12_lora:shared_elements", "L12.shared_elements(L12.triton.Config({'RANK_FMA': True}), 16, False)", E("TypeError", "config must be a triton.Config with BLOCK_M")),
    ("nb12_lora:shared_elements", "L12.shared_elements(L12.tile_config(128, 256, 64, 3, 8, 2, False), 20, False)", E("ValueError", "block_r")),
    ("nb12_lora:shared_elements", "L12.shared_elements(L12.tile_config(128, 256, 64, 3, 8, 2, False, RANK_FMA=False), 16, False)", R("r == 3 * 384 * 64 + 128 * 128 + 384 * 16")),
    ("nb12_lora:shared_elements", "L12.shared_elements(L12.tile_config(128, 256, 64, 3, 8, 2, False, RANK_FMA=True), 16, False)", R("r == 3 * 384 * 64 + 128 * 128")),
    ("nb12_lora:shared_elements", "L12.shared_elements(L12.tile_config(128, 256, 64, 3, 8, 2, False, RANK_FMA=True), 16, True)", R("r == 3 * 400 * 64 + 128 * 128 + 384 * 16")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['WARP_SPECIALIZE'] for c in L12.prune_epilogues([L12.triton.Config({'RANK_FMA': False, 'WARP_SPECIALIZE': w}) for w in (False, True)], {}, HAS_ADAPTER=True, XA_IN_LOOP=True)]", R("r == [False]")),
    ("nb12_lora:prune_epilogues", "[c.kwargs['WARP_SPECIALIZE'] for c in L12.prune_epilogues([L12.triton.Config({'RANK_FMA': False, 'WARP_SPECIALIZE': w}) for w in (False, True)], {}, HAS_ADAPTER=True, XA_IN_LOOP=False)]", R("r == [False, True]")),
    ("nb12_lora:prune_epilogues", "L12.prune_epilogues([L12.triton.Config({'RANK_FMA': False})], None)", E("TypeError", "named_args must be the kernel's arguments by name")),
    ("nb12_lora:config_text", "L12.config_text(L07.config(64, 32, 32, 2, 4))", R("r == '64x32x32, 4 warps, 2 stages'")),
    ("nb12_lora:lora_linear_config", "L12.lora_linear_config(h(0, 16), h(8, 16), None, h(2, 16), h(8, 2))", R("r == 'no launch (empty output)'")),
    ("nb12_lora:lora_linear_config", "L12.lora_linear_config(h(5, 16), h(8, 15), None, h(2, 16), h(8, 2))", E("ValueError", "x has 16 features, but W is 8 x 15")),
    ("nb12_lora:lora_forward_reference", "L12.lora_forward_reference(h(2, 4), None, None, h(1, 4), h(1, 3), 1.0, 'none')", E("TypeError", "w_op must be a torch.Tensor")),
    ("nb12_lora:activation_grad", "L12.activation_grad(torch.zeros(3), 'elu')", E("ValueError", "activation must be one of")),
    ("nb12_lora:activation_grad", "L12.activation_grad(torch.tensor([-1.0, 2.0]), 'relu').tolist()", R("r == [0.0, 1.0]")),
    ("nb12_lora:activation_grad", "L12.activation_grad(torch.zeros(3, dtype=torch.long), 'relu')", E("TypeError", "pre must have a dtype in")),
    ("nb12_lora:LoRALinearFunction", "L12.LoRALinearFunction.apply(h(2, 8), h(4, 8), None, h(2, 8), h(4, 3))", E("ValueError", "ranks differ")),
    ("nb12_lora:LoRALinearFunction", "L12.LoRALinearFunction.apply(h(2, 2, 8), h(4, 8), None, h(2, 8), h(4, 2))", E("ValueError", "x2 must be 2-D")),
    ("nb12_lora:lora_linear_trainable", "L12.lora_linear_trainable(h(2, 8), h(4, 8).requires_grad_(), None, h(2, 8), h(4, 2))", E("ValueError", "W must not require grad")),
    ("nb12_lora:lora_linear_trainable", "L12.lora_linear_trainable(h(2, 8), h(4, 8), None, h(2, 8), h(4, 2), reference='yes')", E("ValueError", "reference must be one of")),
    ("nb12_lora:lora_linear_trainable", "(lambda A: (L12.lora_linear_trainable(h(3, 16), h(8, 16), None, A, h(8, 2).float(), 0.5).float().sum().backward(), A.grad.dtype)[1])(h(2, 16).float().requires_grad_())", R("r == torch.float32")),
    ("nb12_peft:static_reason", "L12p.static_reason(torch.nn.Linear(2, 3))", E("TypeError", "layer must be a peft LoRA Linear")),
    ("nb12_peft:static_reason", "L12p.static_reason(L12p.peft_linear(8, 4, 2, dtype=torch.float32).base_model.model.proj)", R("'float16 or bfloat16' in r")),
    ("nb12_peft:call_reason", "L12p.call_reason(L12p.peft_linear(8, 4, 2).base_model.model.proj, torch.ones(3, 8, dtype=torch.bfloat16), (), {'adapter_names': ['default']})", R("r == 'extra forward arguments (adapter_names)'")),
    ("nb12_peft:call_reason", "L12p.call_reason(L12p.peft_linear(8, 4, 2).base_model.model.proj, [1.0], (), {})", R("r.startswith('input dtype list')")),
    ("nb12_peft:call_reason", "L12p.call_reason(None, torch.ones(3, 8), (), {})", E("TypeError", "layer must be a peft LoRA Linear")),
    ("nb12_peft:fuse_lora", "L12p.fuse_lora(torch.nn.Linear(3, 4))", E("ValueError", "model has no peft LoRA Linear layer")),
    ("nb12_peft:fuse_lora", "L12p.fuse_lora(None)", E("TypeError", "model must be a torch.nn.Module")),
    ("nb12_peft:fuse_lora", "L12p.fuse_lora(L12p.peft_linear(8, 4, 2)).fused", R("r == ['base_model.model.proj']")),
    ("nb12_peft:unfuse_lora", "L12p.unfuse_lora('model')", E("TypeError", "model must be a torch.nn.Module")),
    ("nb12_peft:unfuse_lora", "(lambda m: (L12p.fuse_lora(m), L12p.unfuse_lora(m), L12p.unfuse_lora(m))[1:])(L12p.peft_linear(8, 4, 2))", R("r == (1, 0)")),
    ("nb12_peft:explain", "L12p.explain(L12p.peft_linear(8, 4, 2, dropout=0.5).base_model.model.proj, torch.ones(3, 8, dtype=torch.bfloat16))", R("r == \"peft's path: dropout 0.5 > 0 in training mode\"")),
    ("nb12_peft:explain", "L12p.explain(torch.nn.Linear(8, 4), torch.ones(3, 8))", E("TypeError", "layer must be a peft LoRA Linear")),
    ("nb12_peft:peft_linear", "L12p.peft_linear(8, 0, 2)", E("ValueError", "d_out must be >= 1")),
    ("nb12_peft:peft_linear", "L12p.peft_linear(8, 4, 2, dtype=torch.int8)", E("TypeError", "dtype must be torch.float16, torch.bfloat16 or torch.float32")),
    ("nb12_peft:peft_linear", "L12p.peft_linear(8, 4, 2, dropout=1.5)", E("ValueError", "dropout must be >= 0 and <= 1")),
    ("nb12_bench:label", "L12b.label((8192, 4096, 4096, 16, torch.bfloat16))", R("r == '8192 tokens, 4096 -> 4096, r 16, bfloat16'")),
    ("nb12_bench:label", "L12b.label((8192, 4096, 4096, 16))", E("ValueError", r"shape must be \(tokens, d_in, d_out, r, dtype\)")),
    ("nb12_bench:useful_flops", "L12b.useful_flops((2, 3, 5, 1, torch.float16))", R("r == 2 * 2 * (15 + 8)")),
    ("nb12_bench:useful_flops", "L12b.useful_flops((2, 3, 5, 1, torch.float32))", E("ValueError", "dtype must be one of")),
    ("nb12_bench:llm_inputs", "[tuple(t.shape) for t in L12b.llm_inputs((3, 8, 4, 2, torch.float16))]", R("r == [(3, 8), (4, 8), (4,), (2, 8), (4, 2)]")),
    ("nb12_bench:llm_inputs", "L12b.llm_inputs((0, 8, 4, 2, torch.float16))", E("ValueError", "tokens must be >= 1")),
    ("nb12_bench:peft_model_of", "L12b.peft_model_of(None, None, h(2, 8), h(4, 2))", E("TypeError", "W must be a torch.Tensor")),
    ("nb12_bench:forward_providers", "sorted(L12b.forward_providers((3, 16, 8, 2, torch.float16)))", R("r == ['eager', 'fused', 'merged weight', 'peft']")),
    ("nb12_bench:forward_providers", "L12b.forward_providers((3, 16, 8, 2, 'fp16'))", E("ValueError", "dtype must be one of")),
    ("nb12_bench:train_steps", "sorted(L12b.train_steps((3, 16, 8, 2, torch.float16)))", R("r == ['eager', 'fused', 'peft']")),
    ("nb12_bench:compare_forward", "L12b.compare_forward([])", E("ValueError", "shapes must be a non-empty list")),
    ("nb12_bench:compare_forward", "L12b.compare_forward(rounds=0)", E("ValueError", "rounds must be >= 1")),
    ("nb12_bench:compare_forward", "L12b.compare_forward(mode='events')", E("ValueError", "mode must be one of")),
    ("nb12_bench:compare_training", "L12b.compare_training(graphs='yes')", E("ValueError", "graphs must be one of")),
    ("nb12_bench:compare_training", "L12b.compare_training((3, 16, 8, 2, torch.float16), rounds=1.5)", E("TypeError", "rounds must be an integer")),
    ("nb12_bench:main", "L12b.main(['--all'])", E("ValueError", "argv: expected at most --ncu or --quick")),
    ("nb12_bench:main", "L12b.main('--quick')", E("ValueError", "argv: expected at most --ncu or --quick")),
    # ------------------------------------------------------------------ lessons/nb13_giou.py
    ("nb13_giou:check_boxes", "L13.check_boxes(*boxes()[:2], boxes()[2].int())", E("TypeError", "mask must be a bool tensor")),
    ("nb13_giou:check_boxes", "L13.check_boxes(boxes()[0][..., :3], *boxes()[1:])", E("ValueError", r"pred must have shape \(batch, max_boxes, 4\)")),
    ("nb13_giou:check_boxes", "L13.check_boxes(None, *boxes()[1:])", E("TypeError", "pred must be a torch.Tensor")),
    ("nb13_giou:giou_per_box", "L13.giou_per_box(torch.ones(3), torch.ones(3))", E("ValueError", r"pred must be a float tensor of boxes \(\.\.\., 4\)")),
    ("nb13_giou:giou_per_box", "L13.giou_per_box(torch.tensor([0., 0, 1, 1]), torch.tensor([0., 0, 1, 1])).item()", R("abs(r) < 1e-6")),
    ("nb13_giou:giou_per_box_grad", "L13.giou_per_box_grad(torch.ones(2, 4), torch.ones(3, 4))", E("ValueError", "pred and target must have one shape")),
    ("nb13_giou:compute_dtype", "L13.compute_dtype(torch.ones(1, dtype=torch.half), torch.ones(1, dtype=torch.double))", R("r == torch.float64")),
    ("nb13_giou:giou_loss_reference", "L13.giou_loss_reference(*boxes()[:2], boxes()[2][:1])", E("ValueError", "mask must have shape")),
    ("nb13_giou:giou_loss_reference", "L13.giou_loss_reference(*L13.random_boxes(3, 0)).item()", R("r == 0.0")),
    ("nb13_giou:random_boxes", "L13.random_boxes(-1, 4)", E("ValueError", "batch must be >= 0")),
    ("nb13_giou:random_boxes", "L13.random_boxes(2, 4, min_fill=1.5)", E("ValueError", "min_fill must be >= 0 and <= 1")),
    ("nb13_giou:random_boxes", "L13.random_boxes(2, 4, dtype=torch.int32)", E("ValueError", "dtype must be one of")),
    ("nb13_giou:random_boxes", "L13.random_boxes(np.int64(2), np.int32(4))[0].shape", R("r == (2, 4, 4)")),
    ("nb13_giou:check_kernel_inputs", "L13.check_kernel_inputs(boxes()[0].requires_grad_(), *boxes()[1:])", E("ValueError", "requires grad")),
    ("nb13_giou:giou_sums_per_image", "L13.giou_sums_per_image(boxes()[0][:, :2], *boxes()[1:])", E("ValueError", "target must have the shape of pred")),
    ("nb13_giou:giou_sums_per_image", "L13.giou_sums_per_image(boxes()[0].requires_grad_(), *boxes()[1:])", E("ValueError", "requires grad")),
    ("nb13_giou:giou_sums_per_image", "L13.giou_sums_per_image(*boxes())[1].tolist() == boxes()[2].sum(1).tolist()", R("r")),
    ("nb13_giou:giou_forward", "L13.giou_forward(boxes()[0], boxes()[1].requires_grad_(), boxes()[2])", E("ValueError", "requires grad")),
    ("nb13_giou:giou_forward", 'L13.giou_forward(*(t.to("meta") for t in boxes()))', E("ValueError", "this kernel runs on cpu tensors")),
    ("nb13_giou:giou_forward", "L13.giou_forward(boxes()[0], boxes()[1].double(), boxes()[2])[0].dtype", R("r == torch.float64")),
    ("nb13_giou:giou_forward", "torch.allclose(L13.giou_forward(*boxes())[0], L13.giou_loss_reference(*boxes()))", R("r")),
    ("nb13_giou:giou_backward", "L13.giou_backward(None, *boxes(), torch.tensor(1.0))", E("ValueError", "grad_loss must be a one-element float tensor")),
    ("nb13_giou:giou_backward", "L13.giou_backward(torch.tensor(1.0), boxes()[0].requires_grad_(), *boxes()[1:], torch.tensor(1.0))", E("ValueError", "requires grad")),
    ("nb13_giou:giou_loss_triton", "L13.giou_loss_triton(boxes()[0].requires_grad_(), *boxes()[1:]).grad_fn is not None", R("r")),
    ("nb13_giou:giou_loss_triton", "L13.giou_loss_triton(boxes()[0], boxes()[1].requires_grad_(), boxes()[2])", E("ValueError", "target must not require grad")),
    ("nb13_giou:giou_loss_triton", "L13.giou_loss_triton(*boxes()[:2], boxes()[2].float())", E("TypeError", "mask must be a bool tensor")),
    ("nb13_giou:giou_loss_op", "L13.giou_loss_op(boxes()[0].requires_grad_(), *boxes()[1:]).grad_fn is not None", R("r")),
    ("nb13_giou:giou_loss_op", "L13.giou_loss_op(boxes()[0][..., :3], *boxes()[1:])", E("ValueError", "pred must have shape")),
    ("nb13_giou:giou_loss_triton", "L13.giou_loss_triton(*boxes(), per_image=1)", E("ValueError", "per_image must be one of")),
    ("nb13_giou:giou_forward", "L13.giou_forward(*boxes(), atomic=None)", E("ValueError", "atomic must be one of")),
    ("nb13_giou:giou_forward", "L13.giou_forward(*boxes(), wrap=3)", E("TypeError", "wrap must be callable")),
    ("nb13_giou:giou_backward", 'L13.giou_backward(torch.tensor(1.0, device="meta"), *boxes(), torch.tensor(1.0))', E("ValueError", "grad_loss must be on pred's device")),
    ("nb13_giou:check_kernel_inputs", "L13.check_kernel_inputs(boxes()[0], boxes()[1].requires_grad_(), boxes()[2])", E("ValueError", "target requires grad")),
    ("nb13_giou:compute_dtype", "L13.compute_dtype(torch.ones(1), 2.0)", E("TypeError", "target must be a torch.Tensor")),
    ("nb13_giou:random_boxes", "L13.random_boxes(2, 4, seed=-1)", E("ValueError", "seed must be >= 0")),
    ("nb13_giou:random_boxes", 'L13.random_boxes(2, 4, pad_value="nan")', E("TypeError", "pad_value must be a number")),
    ("nb13_giou:random_boxes", 'L13.random_boxes(2, 4, pad_value=float("nan"))[0].isnan().any().item()', R("r")),
    ("nb13_giou:degenerate_batch", "L13.degenerate_batch(torch.int32)", E("ValueError", "dtype must be one of")),
    ("nb13_giou:degenerate_batch", "L13.degenerate_batch(torch.float64)[2].sum().item()", R("r == len(L13.DEGENERATE)")),
    ("nb13_giou:loss_cases", "L13.loss_cases(torch.float32)", E("ValueError", "dtypes must be a non-empty sequence")),
    ("nb13_giou:loss_cases", "len(L13.loss_cases((torch.float32,)))", R("r == 9")),
    ("nb13_giou:gradient_of", "L13.gradient_of(None)", E("TypeError", "loss_fn must be callable")),
    ("nb13_giou:gradient_of", "L13.gradient_of(L13.giou_loss_reference)(*boxes()).shape", R("r == (2, 5, 4)")),
    ("nb13_giou:per_image_twin", "L13.per_image_twin(*boxes(), threads=100)", E("ValueError", "threads must be a power of two")),
    ("nb13_giou:per_image_twin", "L13.per_image_twin(boxes()[0][:, :2], *boxes()[1:])", E("ValueError", "target must have the shape of pred")),
    ("nb13_giou:backward_twin", "L13.backward_twin(torch.ones(2), *boxes(), torch.tensor(1.0))", E("ValueError", "grad_loss must be a one-element tensor")),
    ("nb13_giou:make_cuda_loss", "L13.make_cuda_loss(L13.per_image_twin, None)", E("TypeError", "backward_fn must be callable")),
    ("nb13_giou:make_cuda_loss", "L13.make_cuda_loss(L13.per_image_twin, L13.backward_twin)(*boxes()[:2], boxes()[2].int())", E("TypeError", "mask must be a bool tensor")),
    ("nb13_giou:make_cuda_loss", "torch.allclose(L13.make_cuda_loss(L13.per_image_twin, L13.backward_twin)(*boxes()), L13.giou_loss_reference(*boxes()))", R("r")),
    ("nb13_giou:count_launches", "L13.count_launches(3)", E("TypeError", "fn must be callable")),
    ("nb13_giou:loss_call", "L13.loss_call(L13.giou_loss_reference, 2, 4, phase='backward')", E("ValueError", "phase must be one of")),
    ("nb13_giou:loss_call", "L13.loss_call(None, 2, 4)", E("TypeError", "loss_fn must be callable")),
    ("nb13_giou:loss_call", "L13.loss_call(L13.giou_loss_reference, -2, 4)", E("ValueError", "batch must be >= 0")),
    ("nb13_giou:loss_call", "L13.loss_call(L13.giou_loss_reference, 2, 4)()[0].shape", R("r == (2, 4, 4)")),
    ("nb13_giou:time_modes", "L13.time_modes(lambda: None, modes='wall')", E("ValueError", "modes must be a non-empty sequence")),
    ("nb13_giou:time_modes", "L13.time_modes(None)", E("TypeError", "fn must be callable")),
    ("nb13_giou:time_modes", "sorted(L13.time_modes(lambda: None, rep_ms=1, warmup_ms=0))", R("r == ['graph', 'wall']")),
    # ------------------------------------------------------------------ lessons/nb10_input_pipeline.py
    ("nb10_input_pipeline:FolderSpec", "L10.FolderSpec(np.int64(2), 3).n_images", R("r == 6")),
    ("nb10_input_pipeline:FolderSpec", "L10.FolderSpec(2, 3, min_side=8)", E("ValueError", "16 <= min_side")),
    ("nb10_input_pipeline:FolderSpec", "L10.FolderSpec(2.0, 3)", E("TypeError", "FolderSpec.n_classes must be an int")),
    ("nb10_input_pipeline:synthetic_image", "L10.synthetic_image(L10.FolderSpec(2, 3), 2, 0)", E("ValueError", "label must be below spec.n_classes")),
    ("nb10_input_pipeline:synthetic_image", "L10.synthetic_image(None, 0, 0)", E("TypeError", "spec must be a FolderSpec")),
    ("nb10_input_pipeline:image_path", "L10.image_path(tmp, -1, 0)", E("ValueError", "label must be an int >= 0")),
    ("nb10_input_pipeline:make_image_folder", "L10.make_image_folder(tmp, L10.FolderSpec(1, 1), workers=0)", E("ValueError", "workers must be a positive int")),
    ("nb10_input_pipeline:make_image_folder", "L10.make_image_folder(tmp, {'n_classes': 1})", E("TypeError", "spec must be a FolderSpec")),
    ("nb10_input_pipeline:train_transform", "L10.train_transform(4)", E("ValueError", "crop must be an int >= 8")),
    ("nb10_input_pipeline:train_transform", 'L10.train_transform(16, output="half")', E("ValueError", "output must be")),
    ("nb10_input_pipeline:CheckedImageFolder", 'L10.CheckedImageFolder(jpegs(), on_error="ignore")', E("ValueError", "on_error must be")),
    ("nb10_input_pipeline:JpegBytesFolder", "L10.JpegBytesFolder(jpegs(), scale=(1.5, 0.5))", E("ValueError", r"scale must be \(low, high\) with 0 < low <= high <= 1")),
    ("nb10_input_pipeline:JpegBytesFolder", "L10.JpegBytesFolder(jpegs(), ratio=(0, 1))", E("ValueError", "ratio must be")),
    ("nb10_input_pipeline:JpegBytesFolder", "L10.JpegBytesFolder(jpegs(), scale=0.5)", E("ValueError", "scale must be two numbers")),
    ("nb10_input_pipeline:JpegBytesFolder", "[type(s).__name__ for s in L10.JpegBytesFolder(jpegs(), scale=(np.float32(0.5), 1))]", R("r == ['tuple', 'tuple']")),
    ("nb10_input_pipeline:check_jpeg_bytes", 'L10.check_jpeg_bytes("not bytes")', E("TypeError", "data must be the file's bytes")),
    ("nb10_input_pipeline:check_jpeg_bytes", 'L10.check_jpeg_bytes(b"\\xff\\xd8abc")', E("ValueError", "truncated JPEG")),
    ("nb10_input_pipeline:collate_images", "L10.collate_images(None)", E("TypeError", "batch must be the list of samples")),
    ("nb10_input_pipeline:collate_images", 'L10.collate_images([L10.Skipped("a", "b")])[0].shape', R("r == (0,)")),
    ("nb10_input_pipeline:collate_encoded", "L10.collate_encoded(3)", E("TypeError", "batch must be the list of samples")),
    ("nb10_input_pipeline:FaultyDataset", 'L10.FaultyDataset([1, 2], 0, fault="explode")', E("ValueError", "fault must be")),
    ("nb10_input_pipeline:FaultyDataset", "L10.FaultyDataset([1, 2], 0, seconds=-1)", E("ValueError", "seconds must be a number >= 0")),
    ("nb10_input_pipeline:FaultyDataset", "L10.FaultyDataset([1, 2], 0)[0]", E("RuntimeError", "only inside a DataLoader worker")),
    ("nb10_input_pipeline:shutdown_workers", "L10.shutdown_workers(iter([]))", R("r is None")),
    ("nb10_input_pipeline:normalize_on_device", "L10.normalize_on_device(torch.rand(1, 3, 4, 4))", E("ValueError", "pixels scaled to 0..1")),
    ("nb10_input_pipeline:normalize_on_device", "L10.normalize_on_device(torch.zeros(1, 4, 4, 3, dtype=torch.uint8))", E("ValueError", "N x 3 x H x W")),
    ("nb10_input_pipeline:normalize_on_device", 'L10.normalize_on_device(torch.zeros(1, 3, 4, 4, dtype=torch.uint8, device="meta"))', E("ValueError", "x must be on the CPU or a CUDA GPU")),
    ("nb10_input_pipeline:normalize_on_device", "torch.equal(L10.normalize_on_device(px().float()), L10.normalize_on_device(px()))", R("r")),
    ("nb10_input_pipeline:decode_jpegs", "L10.decode_jpegs(torch.zeros(100, dtype=torch.uint8), 'cpu')", E("TypeError", "data must be a list of 1-D uint8 tensors")),
    ("nb10_input_pipeline:decode_jpegs", "L10.decode_jpegs([torch.zeros(10)], 'cpu')", E("TypeError", r"data\[0\] must be a 1-D uint8 CPU tensor")),
    ("nb10_input_pipeline:decode_jpegs", "L10.decode_jpegs([], 'tpu')", E("ValueError", "device='tpu'")),
    ("nb10_input_pipeline:decode_jpegs", "L10.decode_jpegs([torch.zeros(10, dtype=torch.uint8)], 'cpu')[1][0][0]", R("r == 0")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0].permute(1, 2, 0)], [(0, 0, 2, 2)], [False], 8)", E("ValueError", r"images\[0\] must be a uint8 3 x H x W tensor")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0].float() / 255], [(0, 0, 2, 2)], [False], 8)", E("ValueError", r"images\[0\] must be a uint8")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], [(0, 0, 2, 2)], [False], 0)", E("ValueError", "size must be a positive int")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], [(0, 0, 0, 2)], [False], 4)", E("ValueError", "does not fit")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops(px(), [(0, 0, 2, 2)], [False], 4)", E("TypeError", "images must be a list")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], [(0, 0, 4, 4)], [False], np.int64(4)).equal(px().float())", R("r")),
    ("nb10_input_pipeline:DevicePrefetcher", "L10.DevicePrefetcher([], tuple, 'tpu')", E("ValueError", "device='tpu'")),
    ("nb10_input_pipeline:DevicePrefetcher", "L10.DevicePrefetcher(3, tuple, 'cpu')", E("TypeError", "loader must be iterable")),
    ("nb10_input_pipeline:DevicePrefetcher", "L10.DevicePrefetcher([], tuple, 'cpu', depth=0)", E("ValueError", "depth must be a positive int")),
    ("nb10_input_pipeline:DevicePrefetcher", "[b for b in L10.DevicePrefetcher([1, 2], lambda b: (b,), 'cpu', thread=True)]", R("r == [(1,), (2,)]")),
    ("nb10_input_pipeline:DevicePrefetcher", "L10.DevicePrefetcher([], tuple, 'cpu', thread=1)", E("TypeError", "thread must be True or False")),
    ("nb10_input_pipeline:normalize_on_device", "L10.normalize_on_device([1, 2])", E("TypeError", "x must be a tensor")),
    ("nb10_input_pipeline:normalize_on_device", "L10.normalize_on_device(px(), channels_last='yes')", E("TypeError", "channels_last must be True or False")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], [(0.5, 0, 2, 2)], [False], 4)", E("TypeError", "boxes must hold integers")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], [(0, 0, 2, 2)], [1], 4)", E("TypeError", "flips must be bools")),
    ("nb10_input_pipeline:resized_crops", "L10.resized_crops([px()[0]], 'box', [False], 4)", E("ValueError", "boxes must be")),
    ("nb10_input_pipeline:image_path", "L10.image_path(None, 0, 0)", E("TypeError", "root must be a folder path")),
    ("nb10_input_pipeline:CheckedImageFolder", "L10.CheckedImageFolder(Path(tmp) / 'nowhere')", E("FileNotFoundError", "root must be an existing folder")),
    ("nb10_input_pipeline:CheckedImageFolder", "L10.CheckedImageFolder(jpegs(), transform='flip')", E("TypeError", "transform must be callable")),
    ("nb10_input_pipeline:sync", "L10.sync('cpu')", R("r is None")),
    ("nb10_input_pipeline:sync", "L10.sync('tpu')", E("ValueError", "device='tpu'")),
    ("nb10_input_pipeline:Rung", "L10.Rung('r', num_workers=-1)", E("ValueError", "Rung.num_workers must be an int >= 0")),
    ("nb10_input_pipeline:Rung", "L10.Rung('r', pinned='yes')", E("TypeError", "Rung.pinned must be True or False")),
    ("nb10_input_pipeline:Rung", "L10.Rung('r', device_work='gpu')", E("ValueError", "Rung.device_work must be")),
    ("nb10_input_pipeline:Rung", "L10.Rung('r', num_workers=np.int64(2)).warmup_steps", R("r == 7")),
    ("nb10_input_pipeline:make_loader", "L10.make_loader('r', jpegs(), crop=16, batch_size=1, n_batches=1)", E("TypeError", "rung must be a Rung")),
    ("nb10_input_pipeline:make_loader", "L10.make_loader(L10.Rung('r'), jpegs(), crop=4, batch_size=1, n_batches=1)", E("ValueError", "crop must be an int >= 8")),
    ("nb10_input_pipeline:make_loader", "L10.make_loader(L10.Rung('r'), jpegs(), crop=16, batch_size=0, n_batches=1)", E("ValueError", "batch_size must be an int >= 1")),
    ("nb10_input_pipeline:make_loader", "len(L10.make_loader(L10.Rung('r'), jpegs(), crop=16, batch_size=1, n_batches=np.int64(3)))", R("r == 3")),
    ("nb10_input_pipeline:prepare_batch", "L10.prepare_batch(L10.Rung('r'), (1, 2), 'cpu', 16)", E("TypeError", "batch must be what this rung's collate function returns")),
    ("nb10_input_pipeline:prepare_batch", "L10.prepare_batch(L10.Rung('r'), (px().float(), torch.zeros(1), []), 'tpu', 16)", E("ValueError", "device='tpu'")),
    ("nb10_input_pipeline:prepare_batch", "L10.prepare_batch(L10.Rung('r', device_work='normalize'), (px(), torch.zeros(1), []), 'cpu', 4)[0].shape", R("r == (1, 3, 4, 4)")),
    ("nb10_input_pipeline:device_batches", "L10.device_batches(3, tuple)", E("TypeError", "loader must be iterable")),
    ("nb10_input_pipeline:device_batches", "L10.device_batches([], None)", E("TypeError", "prepare must be callable")),
    ("nb10_input_pipeline:device_batches", "list(L10.device_batches([1, 2], lambda b: b * 2))", R("r == [2, 4]")),
    ("nb10_input_pipeline:loader_rate", "L10.loader_rate([], warmup=0, steps=0)", E("ValueError", "steps must be an int >= 1")),
    ("nb10_input_pipeline:loader_rate", "L10.loader_rate(None, warmup=0, steps=1)", E("TypeError", "loader must be iterable")),
    ("nb10_input_pipeline:loader_rate", "L10.loader_rate([(0, [1, 2])] * 3, warmup=1, steps=2) > 0", R("r")),
    ("nb10_input_pipeline:make_model", "L10.make_model('resnet_big', 2, 'cpu')", E("ValueError", "arch must name a torchvision model")),
    ("nb10_input_pipeline:make_model", "L10.make_model('resnet18', 0, 'cpu')", E("ValueError", "n_classes must be an int >= 1")),
    ("nb10_input_pipeline:make_model", "L10.make_model('resnet18', 2, 'cpu', channels_last=1)", E("TypeError", "channels_last must be True or False")),
    ("nb10_input_pipeline:train_step", "L10.train_step(*L10.make_model('resnet18', 2, 'cpu'), px(), torch.zeros(1), bf16=False)", E("TypeError", "x must be a float batch")),
    ("nb10_input_pipeline:train_step", "L10.train_step(*L10.make_model('resnet18', 2, 'cpu'), torch.randn(2, 3, 16, 16), torch.zeros(2), bf16=False)", E("TypeError", "y must hold one integer label per image")),
    ("nb10_input_pipeline:train_step", "L10.train_step(torch.nn.Linear(2, 2), None, torch.randn(2, 3, 16, 16), torch.zeros(2), bf16=False)", E("TypeError", "opt must be a torch.optim.Optimizer")),
    ("nb10_input_pipeline:train_step", "torch.isfinite(L10.train_step(*L10.make_model('resnet18', 2, 'cpu'), torch.randn(2, 3, 16, 16), torch.tensor([0, 1]), bf16=False)).item()", R("r")),
    ("nb10_input_pipeline:run_steps", "L10.run_steps([], None, None, 1, bf16=False)", E("TypeError", "batches must be an iterator")),
    ("nb10_input_pipeline:run_steps", "L10.run_steps(iter([]), None, None, -1, bf16=False)", E("ValueError", "n must be an int >= 0")),
    ("nb10_input_pipeline:run_steps", "L10.run_steps(iter([]), None, None, 0, bf16=False)", R("r == (0, None, [])")),
    ("nb10_input_pipeline:kernel_classes", "L10.kernel_classes([1], 1)", E("TypeError", "frame must be the DataFrame that course_utils.profiling.device_activity returns")),
    ("nb10_input_pipeline:kernel_classes", "L10.kernel_classes(pd.DataFrame({'name': ['nchwToNhwcKernel'], 'category': ['kernel'], 'duration_us': [2000.0]}), 0)", E("ValueError", "steps must be an int >= 1")),
    ("nb10_input_pipeline:kernel_classes", "L10.kernel_classes(pd.DataFrame({'name': ['nchwToNhwcKernel'], 'category': ['kernel'], 'duration_us': [2000.0]}), 2)['layout transposes']", R("r == 1.0")),
    ("nb10_input_pipeline:step_figures", "L10.step_figures(None, 1)", E("TypeError", "prof must be a torch.profiler.profile")),
    ("nb10_input_pipeline:step_figures", "L10.step_figures(torch.profiler.profile(), 0)", E("ValueError", "steps must be an int >= 1")),
    ("nb10_input_pipeline:measure", "L10.measure('a/b', [], *L10.make_model('resnet18', 2, 'cpu'), warmup=0, steps=1, profile_steps=1, bf16=False)", E("ValueError", "name must be a file-name-safe str")),
    ("nb10_input_pipeline:measure", "L10.measure('a', None, *L10.make_model('resnet18', 2, 'cpu'), warmup=0, steps=1, profile_steps=1, bf16=False)", E("TypeError", "source must be an iterable")),
    ("nb10_input_pipeline:measure", "L10.measure('a', [], *L10.make_model('resnet18', 2, 'cpu'), warmup=0, steps=0, profile_steps=1, bf16=False)", E("ValueError", "steps must be an int >= 1")),
    ("nb10_input_pipeline:measure", "L10.measure('a', [], torch.nn.Linear(2, 2), None, warmup=0, steps=1, profile_steps=1, bf16=False)", E("TypeError", "opt must be a torch.optim.Optimizer")),
    ("nb10_input_pipeline:measure", "L10.measure('a', [(torch.randn(2, 3, 16, 16), torch.tensor([0, 1]), [])] * 4, *L10.make_model('resnet18', 2, 'cpu'), warmup=1, steps=1, profile_steps=1, bf16=False)[0]['images_per_s'] > 0", R("r")),
    ("nb10_input_pipeline:overlap_share", "L10.overlap_share(None, pd.DataFrame({'start_us': [], 'end_us': []}))", E("TypeError", "kernels must be a DataFrame with start_us and end_us")),
    ("nb10_input_pipeline:overlap_share", "L10.overlap_share(pd.DataFrame({'start_us': [0.0], 'end_us': [10.0]}), pd.DataFrame({'start_us': [5.0], 'end_us': [15.0]}))", R("r == 0.5")),
    # ------------------------------------------------------------------ lessons/nb14_hopper_matmul.py (tiny tiles in the interpreter)
    ("nb14_hopper_matmul:scratch_for_descriptors", "(lambda t: (t.numel(), t.dtype, t.data_ptr() % 4096))(L14.scratch_for_descriptors(np.int64(100), 4096, None))", R("r == (100, torch.int8, 0)")),
    ("nb14_hopper_matmul:scratch_for_descriptors", "L14.scratch_for_descriptors(-1, 128, None)", E("ValueError", "size must be >= 0")),
    ("nb14_hopper_matmul:scratch_for_descriptors", "L14.scratch_for_descriptors(64.0, 128, None)", E("TypeError", "size must be an integer")),
    ("nb14_hopper_matmul:scratch_for_descriptors", "L14.scratch_for_descriptors(64, 100, None)", E("ValueError", "alignment must be a positive power of two")),
    ("nb14_hopper_matmul:timed_rounds", "{k: len(v) for k, v in L14.timed_rounds({'a': lambda: None, 'b': lambda: None}, rounds=np.int64(2), rep_ms=1, warmup_ms=0).items()}", R("r == {'a': 2, 'b': 2}")),
    ("nb14_hopper_matmul:timed_rounds", "L14.timed_rounds({'a': lambda: None}, rounds=0)", E("ValueError", "rounds must be >= 1")),
    ("nb14_hopper_matmul:timed_rounds", "L14.timed_rounds({'a': 3}, rounds=1)", E("TypeError", "fns must be a non-empty dict")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [2.0, 4.0], 'b': [1.0, np.float64(1.0)]}, 'a')", R("r == {'a': (1.0, 1.0, 1.0), 'b': (3.0, 2.0, 4.0)}")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [1.0]}, 'cuBLAS')", E("ValueError", "baseline must be one of 'a'")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [1.0, 2.0], 'b': [1.0]}, 'a')", E("ValueError", r"times\['b'\] has 1 rounds but times\['a'\] has 2")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [1.0], 'b': [0.0]}, 'a')", E("ValueError", r"times\['b'\]'s ms must be > 0")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [1.0], 'b': [float('nan')]}, 'a')", E("ValueError", r"times\['b'\]'s ms must be finite")),
    ("nb14_hopper_matmul:speedups", "L14.speedups({'a': [], 'b': []}, 'a')", E("TypeError", r"times\['a'\] must be a non-empty list")),
    ("nb14_hopper_matmul:speedups", "L14.speedups([1.0], 'a')", E("TypeError", "times must be the dict timed_rounds returns")),
    ("nb14_hopper_matmul:ranges_overlap", "L14.ranges_overlap((1.0, 0.9, 1.1), (1.2, 1.05, np.float64(1.3)))", R("r is True")),
    ("nb14_hopper_matmul:ranges_overlap", "L14.ranges_overlap((1.0, 0.9, 1.0), (1.2, 1.1, 1.3))", R("r is False")),
    ("nb14_hopper_matmul:ranges_overlap", "L14.ranges_overlap((1.0, 0.9), (1.2, 1.1, 1.3))", E("TypeError", "a must be a speedups entry")),
    ("nb14_hopper_matmul:ranges_overlap", "L14.ranges_overlap((1.0, 0.9, 1.1), (1.2, 1.3, 1.1))", E("ValueError", "b must be .* with lowest <= highest")),
    ("nb14_hopper_matmul:ranges_overlap", "L14.ranges_overlap((1.0, '0.9', 1.1), (1.2, 1.1, 1.3))", E("TypeError", r"a\[1\] must be a number")),
    ("nb14_hopper_matmul:tflops", "L14.tflops(np.int64(1000), 1000, 1000, np.float64(2.0))", R("r == 1.0")),
    ("nb14_hopper_matmul:tflops", "L14.tflops(1000, 1000, 1000, 0)", E("ValueError", "ms must be > 0")),
    ("nb14_hopper_matmul:tflops", "L14.tflops(-1, 1000, 1000, 1.0)", E("ValueError", "m must be >= 0")),
    ("nb14_hopper_matmul:tflops", "L14.tflops(1000, 1000, 1000.5, 1.0)", E("TypeError", "k must be an integer")),
    ("nb14_hopper_matmul:ClockLog", "(lambda c: (c.__enter__(), c.__exit__(None, None, None), str(c))[-1])(L14.ClockLog())", R("r.startswith('no GPU')")),
    ("nb14_hopper_matmul:ClockLog", "L14.ClockLog().samples", R("r == []")),  # str() before the with-block: no AttributeError
    ("nb14_hopper_matmul:ClockLog", "L14.ClockLog(200)", E("TypeError", "positional argument")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(np.int64(32), 32, 32, 1, 4, 2, False).kwargs", R("r == {'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 32, 'GROUP_M': 8, 'SUBTILES': 2, 'FLATTEN': True, 'WARP_SPECIALIZE': False} and type(r['BLOCK_M']) is int")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(48, 32, 32, 1, 4, 1, False)", E("ValueError", "bm must be a positive power of two")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(32, 512, 32, 1, 4, 1, False)", E("ValueError", "bn must be between 16 and 256")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(32, 32, 8, 1, 4, 1, False)", E("ValueError", "bk must be between 16 and 256")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(32, 32, 32, 0, 4, 1, False)", E("ValueError", "stages must be >= 1")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(32, 32, 32, 1, 6, 1, False)", E("ValueError", "warps must be a positive power of two")),
    ("nb14_hopper_matmul:tile_config", "L14.tile_config(32, 32, 32, 1, 4, 3, False)", E("ValueError", "subtiles must be 1 or 2")),
    ("nb14_hopper_matmul:tile_config", 'L14.tile_config(32, 32, 32, 1, 4, 1, "yes")', E("ValueError", "ws must be one of True, False")),
    ("nb14_hopper_matmul:describe", "L14.describe(L14.tile_config(32, 32, 32, 1, 4, 2, True))", R("r == '32x32x32, 1 stages, 4 warps, 2 subtile(s), warp-specialized'")),
    ("nb14_hopper_matmul:describe", "L14.describe(L14.SKINNY_CONFIGS[0])", E("ValueError", "cfg must set BLOCK_M.*; it lacks BLOCK_M")),
    ("nb14_hopper_matmul:describe", "L14.describe({'BLOCK_M': 32})", E("TypeError", "cfg must be a triton.Config")),
    ("nb14_hopper_matmul:check_operands", "L14.check_operands(h(2, 8), h(3, 8), torch.float16)", R("r is None")),
    ("nb14_hopper_matmul:check_operands", "L14.check_operands(h(2, 8), h(8, 3), (torch.float16,))", E("ValueError", "a is 2x8 but w is 8x3: w must be N x K")),
    ("nb14_hopper_matmul:check_operands", "L14.check_operands(h(2, 8).float(), h(3, 8).float(), (torch.float16, torch.bfloat16))", E("TypeError", "a must have a dtype in")),
    ("nb14_hopper_matmul:check_operands", "L14.check_operands(h(2, 8), h(3, 8).bfloat16(), (torch.float16, torch.bfloat16))", E("TypeError", "a and w must share one dtype")),
    ("nb14_hopper_matmul:check_operands", "L14.check_operands(h(2, 8).requires_grad_(), h(3, 8), (torch.float16,))", E("ValueError", "a requires grad")),
    ("nb14_hopper_matmul:check_operands", 'L14.check_operands(torch.empty(16, dtype=torch.half, device="meta").as_strided((2, 8), (2**31, 1)), h(3, 8).to("meta"), torch.float16, max_span=2**31 - 1)', E("ValueError", "a reaches element offset 2,147,483,655")),
    ("nb14_hopper_matmul:tma_ready", "L14.tma_ready(h(4, 8), h(2, 8))", R("r is True")),
    ("nb14_hopper_matmul:tma_ready", "[L14.tma_ready(t) for t in (h(4, 7), h(8, 4).t(), h(40)[1:33].view(4, 8), h(0, 8))]", R("r == [False, False, False, False]")),  # 14-byte rows, transposed, off 16 bytes, empty
    ("nb14_hopper_matmul:tma_ready", "L14.tma_ready()", E("TypeError", "tma_ready needs the matrices")),
    ("nb14_hopper_matmul:tma_ready", "L14.tma_ready(h(8))", E("ValueError", r"tensors\[0\] must be 2-D")),
    ("nb14_hopper_matmul:tma_ready", "L14.tma_ready(h(2, 8), [[1.0]])", E("TypeError", r"tensors\[1\] must be a torch.Tensor")),
    ("nb14_hopper_matmul:launch_persistent", "torch.equal(L14.launch_persistent(h(5, 16), h(8, 16), torch.empty(5, 8, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0])), L14.reference(h(5, 16), h(8, 16)))", R("r")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(16, 5).t(), h(8, 16), torch.empty(5, 8, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0]))", E("ValueError", "a must be contiguous, with rows of a multiple of 16 bytes")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 7), h(8, 7), torch.empty(5, 8, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0]))", E("ValueError", "a must be contiguous, with rows of a multiple of 16 bytes")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 16), h(8, 16), torch.empty(5, 8, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0]), programs=0)", E("ValueError", "programs must be >= 1")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 16), h(8, 16), torch.empty(8, 5, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0]))", E("ValueError", "c must be 5 x 8")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 16), h(8, 16), None, L14.tile_config(*L14.CPU_TILES[0]))", E("TypeError", "c must be a torch.Tensor")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 16), h(8, 16), torch.empty(5, 8, dtype=torch.half), L14.SKINNY_CONFIGS[0])", E("ValueError", "cfg must set BLOCK_M")),
    ("nb14_hopper_matmul:launch_persistent", "L14.launch_persistent(h(5, 0), h(8, 0), torch.full((5, 8), 7.0, dtype=torch.half), L14.tile_config(*L14.CPU_TILES[0])).abs().sum().item()", R("r == 0")),
    ("nb14_hopper_matmul:stderr_to_file", '(lambda cm: (lambda read: (__import__("os").write(2, b"ptxas fatal\\n"), read(), cm.__exit__(None, None, None))[1])(cm.__enter__()))(L14.stderr_to_file())', R("r == 'ptxas fatal\\n'")),
    ("nb14_hopper_matmul:stderr_to_file", "L14.stderr_to_file(3)", E("TypeError", "positional argument")),
    ("nb14_hopper_matmul:compiler_report", 'L14.compiler_report("/tmp/x.mlir:3: note\\nerror: out of shared memory\\n\\n")', R("""r == ' (the compiler wrote 2 lines, the first: "error: out of shared memory")'""")),
    ("nb14_hopper_matmul:compiler_report", 'L14.compiler_report("")', R("r == ''")),
    ("nb14_hopper_matmul:compiler_report", "L14.compiler_report(None)", E("TypeError", "text must be a str")),
    ("nb14_hopper_matmul:compiler_report", 'L14.compiler_report(b"error")', E("TypeError", "text must be a str")),
    ("nb14_hopper_matmul:probe", 'L14.probe((L14.tile_config(*L14.CPU_TILES[0]),), lambda *a: None, tuple, lambda *a: None, "x")', R("isinstance(r, list) and len(r) == 1")),  # CPU: all kept, nothing run
    ("nb14_hopper_matmul:probe", 'L14.probe(None, lambda *a: None, tuple, lambda *a: None, "x")', E("TypeError", "configs must be a list of triton.Config")),
    ("nb14_hopper_matmul:probe", 'L14.probe([], None, tuple, tuple, "x")', E("TypeError", "launch must be callable")),
    ("nb14_hopper_matmul:probe", "L14.probe([], tuple, tuple, tuple, 3)", E("TypeError", "label must be a str")),
    ("nb14_hopper_matmul:probe_inputs", "[(tuple(t.shape), t.dtype) for t in L14.probe_inputs(torch.bfloat16, np.int64(2), 3, 4)]", R("r == [((2, 4), torch.bfloat16), ((3, 4), torch.bfloat16)]")),
    ("nb14_hopper_matmul:probe_inputs", "L14.probe_inputs(torch.int32)", E("ValueError", "dtype must be one of")),
    ("nb14_hopper_matmul:probe_inputs", "L14.probe_inputs(m=0)", E("ValueError", "m must be >= 1")),
    ("nb14_hopper_matmul:probe_inputs", "L14.probe_inputs(k=2.5)", E("TypeError", "k must be an integer")),
    ("nb14_hopper_matmul:persistent_tuned", 'L14.persistent_tuned("all") is L14.persistent_tuned() is not None', R("r is True")),
    ("nb14_hopper_matmul:persistent_tuned", 'L14.persistent_tuned("fast")', E("ValueError", "family must be one of")),
    ("nb14_hopper_matmul:persistent_tuned", "L14.persistent_tuned(None)", E("ValueError", "family must be one of")),
    ("nb14_hopper_matmul:matmul_persistent", "torch.equal(L14.matmul_persistent(h(5, 16), h(8, 16), config=L14.tile_config(*L14.CPU_TILES[1])), L14.reference(h(5, 16), h(8, 16)))", R("r")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(5, 16).requires_grad_(), h(8, 16))", E("ValueError", "a requires grad")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(5, 16), h(16, 8))", E("ValueError", "w must be N x K")),
    ("nb14_hopper_matmul:matmul_persistent", 'L14.matmul_persistent(h(5, 16), h(8, 16), "fast")', E("ValueError", "family must be one of")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(5, 16), h(8, 16), config={'BLOCK_M': 32})", E("TypeError", "config must be a triton.Config")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(5, 16).float(), h(8, 16).float())", E("TypeError", "a must have a dtype in")),
    ("nb14_hopper_matmul:matmul_persistent", 'L14.matmul_persistent(h(2, 8).to("meta"), h(3, 8).to("meta"))', E("ValueError", "a must be on cpu")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(3, 0), h(2, 0)).tolist()", R("r == [[0.0, 0.0]] * 3")),
    ("nb14_hopper_matmul:matmul_persistent", "L14.matmul_persistent(h(0, 16), h(2, 16)).shape", R("r == (0, 2)")),
    ("nb14_hopper_matmul:operand_cases", "[(c.name, [tuple(t.shape) for t in c.make_inputs()]) for c in L14.operand_cases([(1, 8, 16)], torch.bfloat16, seed=np.int64(1))]", R("r == [('1x8x16 bfloat16', [(1, 16), (8, 16)])]")),
    ("nb14_hopper_matmul:operand_cases", "L14.operand_cases([(1, 8)], torch.float16)", E("ValueError", r"shapes must be a non-empty list of \(M, N, K\)")),
    ("nb14_hopper_matmul:operand_cases", "L14.operand_cases([(1, -8, 8)], torch.float16)", E("ValueError", r"shapes\[i\] must be >= 0")),
    ("nb14_hopper_matmul:operand_cases", "L14.operand_cases([(1, 8, 8)], torch.float32)", E("ValueError", "dtype must be one of")),
    ("nb14_hopper_matmul:operand_cases", "L14.operand_cases([(1, 8, 8)], torch.float16, seed=-1)", E("ValueError", "seed must be >= 0")),
    ("nb14_hopper_matmul:reference", "L14.reference(h(2, 3), h(4, 3)).tolist() == (h(2, 3).float() @ h(4, 3).float().t()).tolist()", R("r")),
    ("nb14_hopper_matmul:reference", "L14.reference(h(2, 3), h(3, 4))", E("ValueError", "w must be N x K")),
    ("nb14_hopper_matmul:reference", "L14.reference(h(3), h(4, 3))", E("ValueError", "a must be 2-D")),
    ("nb14_hopper_matmul:reference", "L14.reference(torch.ones(2, 3, dtype=torch.int32), torch.ones(4, 3, dtype=torch.int32))", E("TypeError", "a must have a dtype in")),
    ("nb14_hopper_matmul:reference", 'L14.reference(h(2, 3), h(4, 3).to("meta"))', E("ValueError", "a and w must be on one device")),
    ("nb14_hopper_matmul:check_linear", "L14.check_linear(L14.reference, [(1, 8, 8), (3, 5, 0)]).passed", R("r is True")),
    ("nb14_hopper_matmul:check_linear", "str(L14.check_linear(lambda a, w: 2 * L14.reference(a, w), [(2, 8, 8)]))", R("r.startswith('2 of 2 cases FAILED')")),
    ("nb14_hopper_matmul:check_linear", "L14.check_linear(None)", E("TypeError", "fn must be callable")),
    ("nb14_hopper_matmul:check_linear", "L14.check_linear(L14.reference, [])", E("ValueError", "shapes must be a non-empty list")),
    ("nb14_hopper_matmul:quantize_fp8", "(lambda q, s: (q.dtype, q.float().tolist(), s.tolist()))(*L14.quantize_fp8(torch.tensor([[1.0, -448.0]]), False))", R("r == (torch.float8_e4m3fn, [[1.0, -448.0]], [1.0])")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8(torch.tensor([[1.0, -448.0], [2.0, 0.0]], dtype=torch.bfloat16), True)[1].tolist()", R("abs(r[0] - 1) < 1e-7 and abs(r[1] - 2 / 448) < 1e-7")),
    ("nb14_hopper_matmul:quantize_fp8", "[tuple(t.shape) for t in L14.quantize_fp8(torch.ones(0, 4), True)]", R("r == [(0, 4), (0,)]")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8(torch.ones(3, 0), True)", E("ValueError", r"x must hold elements to scale by \(K >= 1")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8(torch.tensor([[1.0, float('inf')]]), False)", E("ValueError", "x holds NaN or infinity")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8(torch.ones(4), True)", E("ValueError", "x must be 2-D")),
    ("nb14_hopper_matmul:quantize_fp8", 'L14.quantize_fp8(torch.ones(2, 2), "rows")', E("ValueError", "rowwise must be one of True, False")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8(torch.ones(2, 2, dtype=torch.int64), False)", E("TypeError", "x must have a dtype in")),
    ("nb14_hopper_matmul:quantize_fp8", "L14.quantize_fp8([[1.0]], True)", E("TypeError", "x must be a torch.Tensor")),
    ("nb14_hopper_matmul:dequantized_reference", "L14.dequantized_reference(*(t for pair in zip(L14.quantize_fp8(torch.tensor([[1.0, -2.0]]), False), L14.quantize_fp8(torch.tensor([[4.0, 0.5]]), False)) for t in pair)).tolist()", R("r == [[3.0]]")),
    ("nb14_hopper_matmul:dequantized_reference", "L14.dequantized_reference(torch.ones(2, 3).to(L14.FP8), torch.ones(5, 3).to(L14.FP8), torch.ones(1), torch.full((1,), 0.5)).tolist()", R("r == [[1.5] * 5] * 2")),  # any K
    ("nb14_hopper_matmul:dequantized_reference", "L14.dequantized_reference(*L14.fp8_cases(False)[1].make_inputs()[:3], torch.ones(48))", E("ValueError", "scales must have 1 and 1 elements")),
    ("nb14_hopper_matmul:dequantized_reference", "L14.dequantized_reference(h(2, 16), h(16, 16), torch.ones(1), torch.ones(1))", E("TypeError", "a_q must have a dtype in")),
    ("nb14_hopper_matmul:dequantized_reference", "L14.dequantized_reference(torch.ones(2, 16).to(L14.FP8), torch.ones(16, 32).to(L14.FP8), torch.ones(1), torch.ones(1))", E("ValueError", "a_q must be M x K and w_q N x K")),
    ("nb14_hopper_matmul:scaled_mm", "(lambda *t: torch.allclose(L14.scaled_mm(*t).float(), L14.dequantized_reference(*t).float(), rtol=1e-2, atol=1e-2))(*L14.fp8_cases(True)[1].make_inputs())", R("r")),
    ("nb14_hopper_matmul:scaled_mm", "(lambda a, w, sa, sw: torch.allclose(L14.scaled_mm(a.t().contiguous().t(), w, sa, sw, fast_accum=False).float(), L14.dequantized_reference(a, w, sa, sw).float(), rtol=1e-2, atol=1e-2))(*L14.fp8_cases(False)[1].make_inputs())", R("r")),  # a column-major a_q
    ("nb14_hopper_matmul:scaled_mm", 'L14.scaled_mm(*L14.fp8_cases(False)[0].make_inputs(), fast_accum="yes")', E("ValueError", "fast_accum must be one of")),
    ("nb14_hopper_matmul:scaled_mm", "L14.scaled_mm(*L14.fp8_cases(False)[1].make_inputs()[:3], torch.ones(48))", E("ValueError", "scales must have 1 and 1 elements")),
    ("nb14_hopper_matmul:scaled_mm", "L14.scaled_mm(torch.ones(2, 8).to(L14.FP8), torch.ones(16, 8).to(L14.FP8), torch.ones(1), torch.ones(1))", E("ValueError", "K and N must be multiples of 16")),
    ("nb14_hopper_matmul:relative_error", "L14.relative_error(torch.tensor([3.0, 4.0]) * 1.1, torch.tensor([3.0, 4.0]))", R("abs(r - 0.1) < 1e-6")),
    ("nb14_hopper_matmul:relative_error", "L14.relative_error(torch.ones(2, dtype=torch.bfloat16), torch.ones(2))", R("r == 0.0")),
    ("nb14_hopper_matmul:relative_error", "L14.relative_error(torch.ones(4, 4), torch.ones(4))", E("ValueError", "x and ref must have the same shape")),
    ("nb14_hopper_matmul:relative_error", "L14.relative_error(torch.ones(3), torch.zeros(3))", E("ValueError", "ref must have a finite, non-zero norm")),
    ("nb14_hopper_matmul:relative_error", "L14.relative_error([1.0], torch.ones(1))", E("TypeError", "x must be a torch.Tensor")),
    ("nb14_hopper_matmul:check_fp8_operands", "[L14.check_fp8_operands(*L14.fp8_cases(rowwise)[0].make_inputs()) for rowwise in (True, False)]", R("r == [True, False]")),
    ("nb14_hopper_matmul:check_fp8_operands", "L14.check_fp8_operands(torch.ones(2, 16).to(L14.FP8), torch.ones(24, 16).to(L14.FP8), torch.ones(1), torch.ones(1))", E("ValueError", "K and N must be multiples of 16")),
    ("nb14_hopper_matmul:check_fp8_operands", "L14.check_fp8_operands(h(2, 16), h(16, 16), torch.ones(1), torch.ones(1))", E("TypeError", "a_q must have a dtype in")),
    ("nb14_hopper_matmul:check_fp8_operands", "L14.check_fp8_operands(*L14.fp8_cases(False)[0].make_inputs()[:2], torch.ones(1, dtype=torch.float64), torch.ones(1))", E("TypeError", "a_scale must have a dtype in")),
    ("nb14_hopper_matmul:check_fp8_operands", "L14.check_fp8_operands(*L14.fp8_cases(False)[0].make_inputs()[:3], torch.ones(1, requires_grad=True))", E("ValueError", "w_scale requires grad")),
    ("nb14_hopper_matmul:check_fp8_operands", 'L14.check_fp8_operands(torch.empty(1, 16, dtype=L14.FP8, device="meta"), torch.empty(16, 16, dtype=L14.FP8, device="meta"), torch.ones(1), torch.ones(1))', E("ValueError", "a_q must be on cpu")),
    ("nb14_hopper_matmul:launch_fp8", "(lambda *t: torch.allclose(L14.launch_fp8(*t, torch.empty(1, 16, dtype=torch.bfloat16), L14.tile_config(*L14.CPU_FP8_TILES[0]), False).float(), L14.dequantized_reference(*t).float(), rtol=1e-2, atol=1e-2))(*L14.fp8_cases(False)[0].make_inputs())", R("r")),
    ("nb14_hopper_matmul:launch_fp8", "L14.launch_fp8(*L14.fp8_cases(False)[0].make_inputs(), torch.empty(1, 16, dtype=torch.bfloat16), L14.tile_config(*L14.CPU_FP8_TILES[0]), True)", E("ValueError", "rowwise must be False")),
    ("nb14_hopper_matmul:launch_fp8", "(lambda a, w, sa, sw: L14.launch_fp8(a.t().contiguous().t(), w, sa, sw, torch.empty(17, 48, dtype=torch.bfloat16), L14.tile_config(*L14.CPU_FP8_TILES[0]), False))(*L14.fp8_cases(False)[1].make_inputs())", E("ValueError", "a_q must be contiguous")),
    ("nb14_hopper_matmul:launch_fp8", "L14.launch_fp8(*L14.fp8_cases(False)[1].make_inputs(), torch.empty(48, 17, dtype=torch.bfloat16), L14.tile_config(*L14.CPU_FP8_TILES[0]), False)", E("ValueError", "c must be 17 x 48")),
    ("nb14_hopper_matmul:launch_fp8", "L14.launch_fp8(*L14.fp8_cases(False)[1].make_inputs(), torch.empty(17, 48, dtype=torch.bfloat16), None, False)", E("TypeError", "cfg must be a triton.Config")),
    ("nb14_hopper_matmul:matmul_fp8", "(lambda a, w, sa, sw: torch.allclose(L14.matmul_fp8(a.t().contiguous().t(), w, sa, sw, config=L14.tile_config(*L14.CPU_FP8_TILES[0])).float(), L14.dequantized_reference(a, w, sa, sw).float(), rtol=1e-2, atol=1e-2))(*L14.fp8_cases(True)[1].make_inputs())", R("r")),  # a column-major a_q: copied
    ("nb14_hopper_matmul:matmul_fp8", "L14.matmul_fp8(torch.ones(2, 0).to(L14.FP8), torch.ones(16, 0).to(L14.FP8), torch.ones(1), torch.ones(1)).tolist()", R("r == [[0.0] * 16] * 2")),
    ("nb14_hopper_matmul:matmul_fp8", "L14.matmul_fp8(*L14.fp8_cases(False)[0].make_inputs(), config=L14.SKINNY_CONFIGS[0])", E("ValueError", "config must set BLOCK_M")),
    ("nb14_hopper_matmul:matmul_fp8", "L14.matmul_fp8(*L14.fp8_cases(False)[1].make_inputs()[:3], torch.ones(48))", E("ValueError", "scales must have 1 and 1 elements")),
    ("nb14_hopper_matmul:fp8_cases", "[c.name for c in L14.fp8_cases(True, seed=np.int64(2))]", R("r[0] == '1x16x16 per-row' and len(r) == 4")),
    ("nb14_hopper_matmul:fp8_cases", 'L14.fp8_cases("yes")', E("ValueError", "rowwise must be one of True, False")),
    ("nb14_hopper_matmul:fp8_cases", "L14.fp8_cases(True, seed=1.5)", E("TypeError", "seed must be an integer")),
    ("nb14_hopper_matmul:check_fp8", "L14.check_fp8(L14.dequantized_reference).passed", R("r is True")),
    ("nb14_hopper_matmul:check_fp8", "L14.check_fp8(None)", E("TypeError", "fn must be callable")),
    ("nb14_hopper_matmul:skinny_block_m", "[L14.skinny_block_m(m) for m in (0, 1, np.int64(17), 100)]", R("r == [16, 16, 32, 64]")),
    ("nb14_hopper_matmul:skinny_block_m", "L14.skinny_block_m(-3)", E("ValueError", "m must be >= 0")),
    ("nb14_hopper_matmul:skinny_block_m", "L14.skinny_block_m(2.0)", E("TypeError", "m must be an integer")),
    ("nb14_hopper_matmul:skinny_programs", "L14.skinny_programs(L14.SKINNY_CONFIGS[1], np.int64(17), 100)", R("r == 12")),
    ("nb14_hopper_matmul:skinny_programs", "L14.skinny_programs(L14.tile_config(*L14.CPU_TILES[0]), 17, 100)", E("ValueError", "cfg must set BLOCK_N, BLOCK_K, SPLIT_K; it lacks SPLIT_K")),
    ("nb14_hopper_matmul:skinny_programs", "L14.skinny_programs(L14.SKINNY_CONFIGS[1], -1, 100)", E("ValueError", "M must be >= 0")),
    ("nb14_hopper_matmul:skinny_runs", "[L14.skinny_runs(L14.SKINNY_CONFIGS[1], 16, k) for k in (64, 96)]", R("r == [False, True]")),
    ("nb14_hopper_matmul:skinny_runs", "L14.skinny_runs(None, 16, 64)", E("TypeError", "cfg must be a triton.Config")),
    ("nb14_hopper_matmul:skinny_runs", "L14.skinny_runs(L14.triton.Config({'BLOCK_N': 32, 'BLOCK_K': 32, 'SPLIT_K': 0}), 16, 64)", E("ValueError", "SPLIT_K must be >= 1")),
    ("nb14_hopper_matmul:skinny_candidates", "L14.skinny_candidates(16, 64, np.int64(96)) == [L14.SKINNY_CONFIGS[1]]", R("r")),
    ("nb14_hopper_matmul:skinny_candidates", "L14.skinny_candidates(16, -64, 96)", E("ValueError", "N must be >= 0")),
    ("nb14_hopper_matmul:scratch", 'L14.scratch("bad input 1", np.int64(3), torch.int32, zeroed=True).tolist()', R("r == [0, 0, 0]")),
    ("nb14_hopper_matmul:scratch", '(L14.scratch("bad input 2", 8, torch.float32), L14.scratch("bad input 2", 2, torch.int32))[1].dtype', R("r == torch.int32")),
    ("nb14_hopper_matmul:scratch", '(L14.scratch("bad input 3", 4, torch.int32).fill_(5), L14.scratch("bad input 3", 4, torch.int32, zeroed=True))[1].tolist()', R("r == [0, 0, 0, 0]")),
    ("nb14_hopper_matmul:scratch", 'L14.scratch("bad input 4", -1, torch.float32)', E("ValueError", "numel must be >= 0")),
    ("nb14_hopper_matmul:scratch", 'L14.scratch("bad input 4", 4, "float32")', E("TypeError", "dtype must be a torch.dtype")),
    ("nb14_hopper_matmul:scratch", "L14.scratch(None, 4, torch.float32)", E("TypeError", "name must be a str")),
    ("nb14_hopper_matmul:skinny_plan", "L14.skinny_plan(16, 64, np.int64(96), None)", R("r == (16, 3072, 2)")),
    ("nb14_hopper_matmul:skinny_plan", "L14.skinny_plan(16, 64, 96, L14.tile_config(*L14.CPU_TILES[0]))", E("ValueError", "config must set BLOCK_N, BLOCK_K, SPLIT_K")),
    ("nb14_hopper_matmul:skinny_plan", "L14.skinny_plan(16, 64, [96], None)", E("TypeError", "K must be an integer")),
    ("nb14_hopper_matmul:skinny_matmul", "torch.equal(L14.skinny_matmul(h(40, 3).t(), h(20, 40), L14.SKINNY_CONFIGS[1]), L14.reference(h(40, 3).t(), h(20, 40)))", R("r")),  # split-K 3, a transposed x
    ("nb14_hopper_matmul:skinny_matmul", 'L14.skinny_matmul(torch.empty(16, dtype=torch.half, device="meta").as_strided((2, 8), (2**31, 1)), h(3, 8).to("meta"))', E("ValueError", "x reaches element offset 2,147,483,655")),
    ("nb14_hopper_matmul:skinny_matmul", 'L14.skinny_matmul(h(2, 8).to("meta"), torch.empty(2**28, 8, dtype=torch.half, device="meta"))', E("ValueError", "w has 2,147,483,648 elements")),
    ("nb14_hopper_matmul:skinny_matmul", "L14.skinny_matmul(h(2**16, 1), h(2**16, 1))", E("ValueError", "x @ w.T would have 65,536 x 65,536 elements")),
    ("nb14_hopper_matmul:skinny_matmul", "L14.skinny_matmul(h(3, 40), h(20, 40).requires_grad_())", E("ValueError", "w requires grad")),
    ("nb14_hopper_matmul:skinny_matmul", "L14.skinny_matmul(h(2, 0), h(3, 0)).tolist()", R("r == [[0.0] * 3] * 2")),
    ("nb14_hopper_matmul:skinny_matmul", "L14.skinny_matmul(h(3, 40), h(20, 40), L14.tile_config(*L14.CPU_TILES[0]))", E("ValueError", "config must set BLOCK_N, BLOCK_K, SPLIT_K")),
    ("nb14_hopper_matmul:skinny_matmul", "L14.skinny_matmul(torch.ones(3, 8), torch.ones(2, 8))", E("TypeError", "x must have a dtype in")),
    ("nb14_hopper_matmul:linear", "torch.equal(L14.linear(h(3, 40), h(20, 40)), L14.reference(h(3, 40), h(20, 40)))", R("r")),
    ("nb14_hopper_matmul:linear", "L14.linear(h(0, 0), h(0, 0)).shape", R("r == (0, 0)")),
    ("nb14_hopper_matmul:linear", "L14.linear(h(3, 40), h(40, 20))", E("ValueError", "x is 3x40 but w is 40x20: w must be N x K")),
    ("nb14_hopper_matmul:linear", "L14.linear(h(3, 40).requires_grad_(), h(20, 40))", E("ValueError", "x requires grad")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('square', 64, json.loads(L14.profile_config(L14.tile_config(*L14.GPU_TILES[0]), programs=4)))", E("RuntimeError", "needs a CUDA GPU")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('square', 64, {'kwargs': {}, 'num_warps': 4, 'num_stages': 3, 'programs': 4})", E("ValueError", r"config\['kwargs'\] must set BLOCK_M")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('skinny', 16, json.loads(L14.profile_config(L14.SKINNY_CONFIGS[0])))", E("ValueError", "config must hold kwargs, num_warps, num_stages, BLOCK_M for mode 'skinny'; it lacks BLOCK_M")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('rect', 64, {})", E("ValueError", "mode must be 'square' or 'skinny'")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('square', 0, {})", E("ValueError", "size must be >= 1")),
    ("nb14_hopper_matmul:profile_once", "L14.profile_once('square', 64, '{}')", E("TypeError", "config must be the dict")),
    ("nb14_hopper_matmul:profile_config", "json.loads(L14.profile_config(L14.SKINNY_CONFIGS[0], BLOCK_M=np.int64(16)))", R("r == {'kwargs': {'BLOCK_N': 32, 'BLOCK_K': 32, 'SPLIT_K': 1}, 'num_warps': 4, 'num_stages': 1, 'BLOCK_M': 16}")),
    ("nb14_hopper_matmul:profile_config", "L14.profile_config(L14.SKINNY_CONFIGS[0], BLOCK_M=[16])", E("TypeError", "BLOCK_M must be a number or a str")),
    ("nb14_hopper_matmul:profile_config", "L14.profile_config({'BLOCK_N': 32})", E("TypeError", "cfg must be a triton.Config")),
    # ------------------------------------------------------------------ lessons/nb15_flash_attention.py
    ("nb15_flash_attention:n_key", "L15.n_key(0)", E("ValueError", "n must be >= 1")),
    ("nb15_flash_attention:n_key", "L15.n_key(2.5)", E("TypeError", "n must be an integer")),
    ("nb15_flash_attention:n_key", "L15.n_key(True)", E("TypeError", "n must be an integer")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(d=24))", E("ValueError", r"head dim \(last dim\) must be one of")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(n=0))", E("ValueError", "q must hold at least one")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(b=0))", E("ValueError", "q must hold at least one")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(dtype=torch.int32))", E("TypeError", "q must have a dtype in")),
    ("nb15_flash_attention:validate", "L15.validate(qkv()[0], qkv(n=4)[1], qkv()[2])", E("ValueError", "q and k must have the same shape")),
    ("nb15_flash_attention:validate", "L15.validate(qkv()[0][0], *qkv()[1:])", E("ValueError", "q must be 4-D")),
    ("nb15_flash_attention:validate", 'L15.validate(qkv()[0], *(t.to("meta") for t in qkv()[1:]))', E("ValueError", "q and k must be on one device")),
    ("nb15_flash_attention:validate", "L15.validate(None, *qkv()[1:])", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:validate", "L15.validate(qkv()[0].tolist(), *qkv()[1:])", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(), causal=1)", E("TypeError", "causal must be True or False")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(), sm_scale=-1)", E("ValueError", "sm_scale must be >=")),
    ("nb15_flash_attention:validate", "L15.validate(*qkv(), sm_scale=np.float32(0.5))", R("r == 0.5 and type(r) is float")),
    ("nb15_flash_attention:flash_attention", 'L15.flash_attention(*(t.to("meta") for t in qkv()))', E("ValueError", "q must be on cpu")),
    ("nb15_flash_attention:flash_attention", 'L15.flash_attention(*[torch.empty(1, 1, 2**27, 16, device="meta")] * 3)', E("ValueError", "q has 2,147,483,648 elements")),
    ("nb15_flash_attention:flash_attention", "L15.flash_attention(*qkv(), sm_scale=float('nan'))", E("ValueError", "sm_scale must be finite")),
    ("nb15_flash_attention:flash_attention", 'L15.flash_attention(*qkv(), sm_scale="big")', E("TypeError", "sm_scale must be a number")),
    ("nb15_flash_attention:flash_attention", "L15.flash_attention(*qkv(d=8))", E("ValueError", "head dim")),
    ("nb15_flash_attention:flash_attention", "torch.allclose(L15.flash_attention(*qkv(n=17), causal=True), L15.naive_attention(*qkv(n=17), causal=True), atol=1e-5)", R("r")),
    ("nb15_flash_attention:flash_attention", "torch.allclose(L15.flash_attention(*(t.transpose(2, 3) for t in qkv(n=16))), L15.naive_attention(*(t.transpose(2, 3) for t in qkv(n=16))), atol=1e-5)", R("r")),
    ("nb15_flash_attention:FlashAttention", "(lambda q: (torch.autograd.grad(L15.FlashAttention.apply(q, *qkv()[1:], False, 0.25, None).sum(), q)[0] - torch.autograd.grad(L15.naive_attention(q, *qkv()[1:], sm_scale=0.25).sum(), q)[0]).abs().max().item())(qkv()[0].requires_grad_())", R("r < 1e-4")),
    ("nb15_flash_attention:FlashAttention", "L15.FlashAttention.apply(None, *qkv()[1:], False, 0.25, None)", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:attention_forward", "L15.attention_forward(*qkv(), False, 0)", E("ValueError", "sm_scale must be >=")),
    ("nb15_flash_attention:attention_forward", "[tuple(t.shape) for t in L15.attention_forward(*qkv(), False, 0.25)]", R("r == [(1, 2, 8, 16), (2, 8)]")),
    ("nb15_flash_attention:attention_backward", "L15.attention_backward(qkv()[0][:, :1], *qkv(), *L15.attention_forward(*qkv(), False, 0.25), False, 0.25)", E("ValueError", "q and do must have the same shape")),
    ("nb15_flash_attention:attention_backward", "L15.attention_backward(qkv()[0], *qkv(), L15.attention_forward(*qkv(), False, 0.25)[0], torch.zeros(2, 9), False, 0.25)", E("ValueError", r"lse must have shape \(B\*H, N\)")),
    ("nb15_flash_attention:attention_backward", "L15.attention_backward(qkv()[0], *qkv(), *L15.attention_forward(*qkv(), False, 0.25), None, 0.25)", E("TypeError", "causal must be True or False")),
    ("nb15_flash_attention:flash_attention", 'L15.flash_attention(*qkv(), tma="auto")', E("TypeError", "tma must be True or False")),
    ("nb15_flash_attention:flash_attention", "L15.flash_attention(*qkv(), tma=True)", E("ValueError", "tma=True needs fp16 or bf16 inputs")),
    ("nb15_flash_attention:attention_forward", "L15.attention_forward(*qkv(dtype=torch.float64), False, 0.25, True)", E("ValueError", "tma=True needs fp16 or bf16 inputs")),
    ("nb15_flash_attention:uses_tma", "L15.uses_tma(qkv()[0], 1)", E("TypeError", "tma must be True or False")),
    ("nb15_flash_attention:uses_tma", "L15.uses_tma(qkv()[0], None)", R("r is False")),
    ("nb15_flash_attention:uses_tma", "L15.uses_tma(qkv(dtype=torch.float16)[0], False)", R("r is False")),
    ("nb15_flash_attention:kernel_dtype", "L15.kernel_dtype(torch.ones(2, dtype=torch.bfloat16)).dtype", R("r == torch.float32")),
    ("nb15_flash_attention:kernel_dtype", "L15.kernel_dtype(torch.ones(4, 4).t()).is_contiguous()", R("r")),
    ("nb15_flash_attention:kernel_dtype", "L15.kernel_dtype(None)", E("TypeError", "t must be a torch.Tensor")),
    ("nb15_flash_attention:kernel_flags", "L15.kernel_flags(torch.ones(1, dtype=torch.float64))", R("r == {'PRECISION': 'ieee', 'FP64': True}")),
    ("nb15_flash_attention:kernel_flags", "L15.kernel_flags([1.0])", E("TypeError", "t must be a torch.Tensor")),
    ("nb15_flash_attention:naive_attention", "L15.naive_attention(None, *qkv()[1:])", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:naive_attention", "L15.naive_attention(*qkv(dtype=torch.int64))", E("TypeError", "q must have a dtype in")),
    ("nb15_flash_attention:naive_attention", "L15.naive_attention(qkv()[0], *qkv(d=32)[1:])", E("ValueError", "k and v must have one shape")),
    ("nb15_flash_attention:naive_attention", 'L15.naive_attention(*qkv(), causal="yes")', E("TypeError", "causal must be True or False")),
    ("nb15_flash_attention:naive_attention", "L15.naive_attention(*qkv(), sm_scale=float('inf'))", E("ValueError", "sm_scale must be finite")),
    ("nb15_flash_attention:naive_attention", "L15.naive_attention(*qkv(d=24), causal=True).shape", R("r == (1, 2, 8, 24)")),
    ("nb15_flash_attention:tiled_attention", "L15.tiled_attention(*qkv(), block_m=0)", E("ValueError", "block_m must be >= 1")),
    ("nb15_flash_attention:tiled_attention", "L15.tiled_attention(*qkv(), block_n=-16)", E("ValueError", "block_n must be >= 1")),
    ("nb15_flash_attention:tiled_attention", "L15.tiled_attention(*qkv(), block_m=4.0)", E("TypeError", "block_m must be an integer")),
    ("nb15_flash_attention:tiled_attention", "L15.tiled_attention(qkv()[0], *qkv(n=5)[1:], causal=True)", E("ValueError", "causal needs q and k of one shape")),
    ("nb15_flash_attention:tiled_attention", "L15.tiled_attention([[1.0]], *qkv()[1:])", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:tiled_attention", "torch.allclose(L15.tiled_attention(*qkv(n=11, d=24), True, np.int64(3), 5), L15.naive_attention(*qkv(n=11, d=24), True), atol=1e-6)", R("r")),
    ("nb15_flash_attention:fwd_metadata", 'L15.fwd_metadata((2, 3), None, {"N_CTX": 8, "HEAD_DIM": 16, "CAUSAL": True, "Q": torch.ones(1, dtype=torch.half)})["flops16"]', R("r == 4 * 3 * 64 * 16 * 0.5")),
    ("nb15_flash_attention:fwd_metadata", 'L15.fwd_metadata((2, 3), None, {"HEAD_DIM": 16})', E("KeyError", "N_CTX")),
    ("nb15_flash_attention:tiles_for", "L15.tiles_for(L15.GPU_FWD, 32) == L15.GPU_FWD[64]", R("r")),
    ("nb15_flash_attention:tiles_for", "L15.tiles_for(L15.GPU_FWD, 24)", E("ValueError", "head_dim must be one of")),
    ("nb15_flash_attention:tiles_for", "L15.tiles_for([(16, 16, 1, 1)], 64)", E("TypeError", "table must be a dict")),
    ("nb15_flash_attention:configs", "[(c.kwargs, c.num_warps) for c in L15.configs(L15.CPU_TILE)]", R("r == [({'BLOCK_M': 16, 'BLOCK_N': 16}, 1)]")),
    ("nb15_flash_attention:configs", "L15.configs(None)", E("TypeError", "table must be a dict")),
    ("nb15_flash_attention:for_head_dim", "L15.for_head_dim({64: [(16, 16)]})", E("TypeError", "table must be a dict")),
    ("nb15_flash_attention:for_head_dim", '[c.kwargs["BLOCK_M"] for c in L15.for_head_dim(L15.GPU_FWD)(L15.configs(L15.GPU_FWD), {"HEAD_DIM": 16, "N_CTX": 8})]', R("r == [64]")),
    ("nb15_flash_attention:tma_configs", "[c.pre_hook is L15.set_block_shapes for c in L15.tma_configs(L15.CPU_TILE)]", R("r == [True]")),
    ("nb15_flash_attention:tma_configs", "L15.tma_configs(3)", E("TypeError", "table must be a dict")),
    ("nb15_flash_attention:tma_prune", '[c.kwargs for c in L15.tma_prune(L15.tma_configs(L15.FWD_TILES), {"HEAD_DIM": 128, "N_CTX": 40, "WARP_SPECIALIZE": True})]', R("r == [{'BLOCK_M': 16, 'BLOCK_N': 16}]")),
    ("nb15_flash_attention:set_block_shapes", '(lambda n: (L15.set_block_shapes(n), n["q_desc"].block_shape, n["k_desc"].block_shape)[1:])({"HEAD_DIM": 16, "BLOCK_M": 32, "BLOCK_N": 16, **{d: types.SimpleNamespace() for d in ("q_desc", "k_desc", "v_desc", "o_desc")}})', R("r == ([1, 32, 16], [1, 16, 16])")),
    ("nb15_flash_attention:flash_attention_tma", "L15.flash_attention_tma(*qkv())", E("TypeError", r"q must have a dtype in \('torch.float16', 'torch.bfloat16'\)")),
    ("nb15_flash_attention:flash_attention_tma", "L15.flash_attention_tma(*qkv(dtype=torch.half)[:2], qkv(dtype=torch.half)[2].requires_grad_())", E("ValueError", "v requires grad")),
    ("nb15_flash_attention:flash_attention_tma", 'L15.flash_attention_tma(*qkv(dtype=torch.half), warp_specialize="yes")', E("TypeError", "warp_specialize must be True or False")),
    ("nb15_flash_attention:flash_attention_tma", "L15.flash_attention_tma(*qkv(d=48, dtype=torch.half))", E("ValueError", "head dim")),
    ("nb15_flash_attention:attention_flops", "L15.attention_flops(1, 2, 8, 16, True, backward=True)", R("r == 4 * 2 * 64 * 16 * 0.5 * 3.5")),
    ("nb15_flash_attention:attention_flops", "L15.attention_flops(-1, 2, 8, 16, False)", E("ValueError", "B must be >= 0")),
    ("nb15_flash_attention:attention_flops", "L15.attention_flops(1, 2, 8.5, 16, False)", E("TypeError", "N must be an integer")),
    ("nb15_flash_attention:attention_flops", 'L15.attention_flops(1, 2, 8, 16, "causal")', E("TypeError", "causal must be True or False")),
    ("nb15_flash_attention:naive_bytes", "L15.naive_bytes(np.int64(1), 2, 4, torch.bfloat16)", R("r == 2 * 16 * 6")),
    ("nb15_flash_attention:naive_bytes", "L15.naive_bytes(1, 2, -4, torch.bfloat16)", E("ValueError", "N must be >= 0")),
    ("nb15_flash_attention:naive_bytes", "L15.naive_bytes(1, 2, 4, torch.int8)", E("ValueError", "dtype must be one of")),
    ("nb15_flash_attention:proton_kernels", "L15.proton_kernels(write(Path(tmp) / 'p.hatchet', 'not json'))", E("ValueError", "p.hatchet is not a Proton profile")),
    ("nb15_flash_attention:proton_kernels", "L15.proton_kernels(write(Path(tmp) / 'e.hatchet', '[]'))", E("ValueError", "e.hatchet is not a Proton profile")),
    ("nb15_flash_attention:proton_kernels", "L15.proton_kernels(Path(tmp) / 'none.hatchet')", E("FileNotFoundError", "none.hatchet")),
    ("nb15_flash_attention:proton_kernels", "L15.proton_kernels(None)", E("TypeError", "path must be a str or Path")),
    ("nb15_flash_attention:proton_kernels", """L15.proton_kernels(write(Path(tmp) / 'k.hatchet', json.dumps([{"frame": {"name": "ROOT"}, "metrics": {}, "children": [{"frame": {"name": "k"}, "metrics": {"time (ns)": 1000, "count": 2, "flops16": 4e6}, "children": []}]}])))""", R("r == [{'scope': '', 'kernel': 'k', 'calls': 2, 'time_ms': 0.001, 'tflops': 4.0}]")),
    ("nb15_flash_attention:sdpa", 'L15.sdpa("FAST")', E("ValueError", "backend must be one of")),
    ("nb15_flash_attention:sdpa", 'torch.allclose(L15.sdpa("MATH")(*qkv(), True), L15.naive_attention(*qkv(), True), atol=1e-5)', R("r")),
    ("nb15_flash_attention:step", "L15.step(None, *qkv(), False, False)", E("TypeError", "fn must be callable")),
    ("nb15_flash_attention:step", "L15.step(L15.naive_attention, None, *qkv()[1:], False, False)", E("TypeError", "q must be a torch.Tensor")),
    ("nb15_flash_attention:step", "L15.step(L15.naive_attention, *qkv(), False, 1)", E("TypeError", "backward must be True or False")),
    ("nb15_flash_attention:step", "L15.step(L15.naive_attention, *qkv(), True, True)()", R("r is None")),
    ("nb15_flash_attention:runs", "L15.runs(None)", E("TypeError", "call must be callable")),
    ("nb15_flash_attention:runs", "(L15.runs(lambda: 1), L15.runs(lambda: L15.sdpa('CUDNN_ATTENTION')(*qkv())))", R("r == (True, False)")),
    ("nb15_flash_attention:peak_memory_gib", "L15.peak_memory_gib(lambda: None)", E("ValueError", "needs a CUDA GPU")),
    ("nb15_flash_attention:peak_memory_gib", "L15.peak_memory_gib(3)", E("TypeError", "call must be callable")),
    # ------------------------------------------------------------------ lessons/nb16_gpu_memory.py
    ("nb16_gpu_memory:GPTConfig", "L16.GPTConfig(width=100, heads=16)", E("ValueError", r"GPTConfig.width \(100\) must be a multiple of heads")),
    ("nb16_gpu_memory:GPTConfig", "L16.GPTConfig(layers=0)", E("ValueError", "GPTConfig.layers must be >= 1")),
    ("nb16_gpu_memory:GPTConfig", "L16.GPTConfig(seq=1.5)", E("TypeError", "GPTConfig.seq must be an integer")),
    ("nb16_gpu_memory:GPTConfig", "L16.GPTConfig(batch=None)", E("TypeError", "GPTConfig.batch must be an integer")),
    ("nb16_gpu_memory:GPTConfig", "L16.GPTConfig(vocab=np.int64(10)).vocab", R("r == 10")),
    ("nb16_gpu_memory:Block", "L16.Block(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:Block", "L16.Block(TINY)(torch.ones(2, 9, 16))", E("ValueError", r"x must be a \(batch, T, width=16\) tensor with T <= seq=8")),
    ("nb16_gpu_memory:Block", "L16.Block(TINY)(torch.ones(2, 4, 12))", E("ValueError", "x must be a")),
    ("nb16_gpu_memory:Block", "L16.Block(TINY)(torch.ones(2, 4, 16)).shape", R("r == (2, 4, 16)")),
    ("nb16_gpu_memory:GPT", 'L16.GPT(TINY, checkpointing="every 0")', E("ValueError", "checkpointing must be None")),
    ("nb16_gpu_memory:GPT", 'L16.GPT(TINY, checkpointing="half")', E("ValueError", "checkpointing must be None")),
    ("nb16_gpu_memory:GPT", "L16.GPT({'width': 16})", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:GPT", "L16.GPT(TINY)(torch.zeros(2, 9, dtype=torch.long), torch.zeros(2, 9, dtype=torch.long))", E("ValueError", r"idx must be \(batch >= 1, T\) with 1 <= T <= cfg.seq=8")),
    ("nb16_gpu_memory:GPT", "L16.GPT(TINY)(torch.full((2, 4), 32), torch.zeros(2, 4, dtype=torch.long))", E("ValueError", r"idx must hold token ids in \[0, cfg.vocab=32\)")),
    ("nb16_gpu_memory:GPT", "L16.GPT(TINY)(torch.zeros(2, 4, dtype=torch.long), -torch.ones(2, 4, dtype=torch.long))", E("ValueError", "targets must hold token ids")),
    ("nb16_gpu_memory:GPT", "L16.GPT(TINY)(torch.zeros(2, 4), torch.zeros(2, 4))", E("TypeError", "idx must have a dtype in")),
    ("nb16_gpu_memory:GPT", "L16.GPT(TINY)(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))", E("ValueError", "idx and targets must have the same shape")),
    ("nb16_gpu_memory:GPT", 'L16.GPT(TINY, checkpointing="every 2")(*L16.make_batch(TINY)).item()', R("3 < r < 4")),
    ("nb16_gpu_memory:keep_matmul_outputs", "L16.keep_matmul_outputs(None, torch.ops.aten.mm.default).name", R("r == 'MUST_SAVE'")),
    ("nb16_gpu_memory:keep_matmul_outputs", "L16.keep_matmul_outputs(None, torch.ops.aten._softmax.default).name", R("r == 'PREFER_RECOMPUTE'")),
    ("nb16_gpu_memory:make_batch", "L16.make_batch(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:make_batch", 'L16.make_batch(TINY, "tpu")', E("ValueError", "device='tpu'")),
    ("nb16_gpu_memory:make_batch", "L16.make_batch(TINY, seed=-1)", E("ValueError", "seed must be >= 0")),
    ("nb16_gpu_memory:make_batch", "[tuple(t.shape) for t in L16.make_batch(TINY, seed=np.int64(1))]", R("r == [(4, 8), (4, 8)]")),
    ("nb16_gpu_memory:train_step", "L16.train_step(L16.GPT(TINY), None, *L16.make_batch(TINY))", E("TypeError", "opt must be a torch.optim.Optimizer")),
    ("nb16_gpu_memory:train_step", "(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters()), *L16.make_batch(TINY), accumulation=0))(L16.GPT(TINY))", E("ValueError", "accumulation must be >= 1")),
    ("nb16_gpu_memory:train_step", "(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters()), *L16.make_batch(TINY), accumulation=5))(L16.GPT(TINY))", E("ValueError", "accumulation must be >= 1 and <= 4")),
    ("nb16_gpu_memory:train_step", "(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters()), None, None))(L16.GPT(TINY))", E("TypeError", "idx must be a torch.Tensor")),
    ("nb16_gpu_memory:train_step", "(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters()), *L16.make_batch(TINY), autocast=torch.int8))(L16.GPT(TINY))", E("ValueError", "autocast must be one of")),
    ("nb16_gpu_memory:train_step", '(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters()), *L16.make_batch(TINY), mark="forward"))(L16.GPT(TINY))', E("TypeError", "mark must be callable")),
    ("nb16_gpu_memory:train_step", "(lambda m: L16.train_step(m, torch.optim.SGD(m.parameters(), lr=0.1), *L16.make_batch(TINY), accumulation=np.int64(2)))(L16.GPT(TINY))", R("3 < r < 4")),
    ("nb16_gpu_memory:param_count", "L16.param_count(TINY) == sum(p.numel() for p in L16.GPT(TINY).parameters())", R("r")),
    ("nb16_gpu_memory:param_count", "L16.param_count(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:block_saved_bytes", "L16.block_saved_bytes(1, 2, 4, 1)", R("r == 4 * (16 * 2 * 4 + 4 + 8)")),
    ("nb16_gpu_memory:block_saved_bytes", "L16.block_saved_bytes(-1, 2, 4, 1)", E("ValueError", "batch must be >= 1")),
    ("nb16_gpu_memory:block_saved_bytes", "L16.block_saved_bytes(1, 2, 4.5, 1)", E("TypeError", "width must be an integer")),
    ("nb16_gpu_memory:saved_bytes_formula", "L16.saved_bytes_formula(TINY)['blocks'] == 2 * L16.block_saved_bytes(4, 8, 16, 2)", R("r")),
    ("nb16_gpu_memory:saved_bytes_formula", "L16.saved_bytes_formula(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:predict_budget", "(lambda b: b['predicted peak'] == 3 * b['parameters'] + b['activations'] + b['backward temporaries'])(L16.predict_budget(TINY))", R("r")),
    ("nb16_gpu_memory:predict_budget", "L16.predict_budget('tiny')", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:saved_bytes_by_module", "L16.saved_bytes_by_module(None, *L16.make_batch(TINY))", E("TypeError", "model must be an nn.Module")),
    ("nb16_gpu_memory:saved_bytes_by_module", "sum(L16.saved_bytes_by_module(L16.GPT(TINY), *L16.make_batch(TINY)).values())", R("r > 0")),
    ("nb16_gpu_memory:LiveStorages", "(lambda: [(live := L16.LiveStorages()).__enter__(), (t := torch.ones(256)), [torch.zeros(64)] and None, live.__exit__(None, None, None), live.live_bytes()][-1])()", R("r == 1024")),
    ("nb16_gpu_memory:forward_kept_bytes", "L16.forward_kept_bytes(L16.GPT(TINY), *L16.make_batch(TINY))", R("r > 0")),
    ("nb16_gpu_memory:forward_kept_bytes", "L16.forward_kept_bytes(L16.GPT(TINY), None, None)", E("TypeError", "idx must be a torch.Tensor")),
    ("nb16_gpu_memory:forward_kept_bytes", "L16.forward_kept_bytes(L16.GPT(TINY), *L16.make_batch(TINY), autocast=torch.float64)", E("ValueError", "autocast must be one of")),
    ("nb16_gpu_memory:gpu_peak", "L16.gpu_peak(lambda: None)", E("ValueError", "gpu_peak needs a CUDA GPU")),
    ("nb16_gpu_memory:gpu_peak", "L16.gpu_peak(None)", E("TypeError", "step must be callable")),
    ("nb16_gpu_memory:record_snapshot", "L16.record_snapshot(lambda mark: None, 0, Path(tmp) / 's.pickle')", E("ValueError", "steps must be >= 1")),
    ("nb16_gpu_memory:record_snapshot", "L16.record_snapshot(None, 1, Path(tmp) / 's.pickle')", E("TypeError", "step must be callable")),
    ("nb16_gpu_memory:record_snapshot", "L16.record_snapshot(lambda mark: None, 1, Path(tmp) / 's.pickle')", E("ValueError", "record_snapshot needs a CUDA GPU")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(write(Path(tmp) / 'text.pickle', 'hello'))", E("ValueError", "text.pickle is not a memory snapshot")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(Path(tmp) / 'missing.pickle')", E("FileNotFoundError", "missing.pickle")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(None)", E("TypeError", "path must be a str or Path")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(dump(Path(tmp) / 'list.pickle', []))", E("ValueError", "list.pickle holds a list of segments only")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(dump(Path(tmp) / 'dict.pickle', {'a': 1}))", E("ValueError", "dict.pickle is not a memory snapshot")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(dump(Path(tmp) / 'ev.pickle', {'segments': [], 'device_traces': [[3]]}))", E("ValueError", "an event of 'device_traces' is not a dict")),
    ("nb16_gpu_memory:read_snapshot", "L16.read_snapshot(dump(Path(tmp) / 'ok.pickle', SNAP))['device_traces'][0][0]['size']", R("r == 100")),
    ("nb16_gpu_memory:timeline", "L16.timeline(SNAP, device=1)", E("ValueError", r"device must be in \[0, 1\)")),
    ("nb16_gpu_memory:timeline", 'L16.timeline(SNAP, device="0")', E("TypeError", "device must be an integer")),
    ("nb16_gpu_memory:timeline", "L16.timeline(None)", E("TypeError", "snapshot must be the dict read_snapshot")),
    ("nb16_gpu_memory:timeline", "L16.timeline(SNAP, [('forward',)])", E("TypeError", "marks must be a list of")),
    ("nb16_gpu_memory:timeline", "L16.timeline(SNAP, [('warmup', 0)])", E("ValueError", "marks' phase must be one of")),
    ("nb16_gpu_memory:timeline", "L16.timeline(SNAP, [('forward', -1)])", E("ValueError", "marks' event index must be >= 0")),
    ("nb16_gpu_memory:timeline", "L16.timeline(SNAP, [('forward', 0), ('backward', 1)])['activations'].tolist()", R("r == [100, 0]")),
    ("nb16_gpu_memory:plot_timeline", "L16.plot_timeline(None)", E("ValueError", "frame must be what timeline")),
    ("nb16_gpu_memory:plot_timeline", "L16.plot_timeline(L16.timeline(SNAP), [('forward', 'x')])", E("TypeError", "marks' event index must be an integer")),
    ("nb16_gpu_memory:plot_timeline", "L16.plot_timeline(L16.timeline(SNAP), [('forward', 0)]).axes[0].get_ylabel()", R("r == 'GiB'")),
    ("nb16_gpu_memory:largest_that_fits", "L16.largest_that_fits(lambda n: None, limit=0)", E("ValueError", "limit must be >= 1")),
    ("nb16_gpu_memory:largest_that_fits", "L16.largest_that_fits(lambda n: None, start=0)", E("ValueError", "start must be >= 1")),
    ("nb16_gpu_memory:largest_that_fits", "L16.largest_that_fits(None)", E("TypeError", "try_size must be callable")),
    ("nb16_gpu_memory:largest_that_fits", "L16.largest_that_fits(lambda n: L16.trains_by_formula(L16.with_layers(TINY, n), 10**6), limit=np.int64(100))", R("r == max(n for n in range(1, 101) if L16.predict_budget(L16.with_layers(TINY, n))['predicted peak'] <= 10**6)")),
    ("nb16_gpu_memory:require_budget", "L16.require_budget(-1)", E("ValueError", "budget_bytes must be >= 1")),
    ("nb16_gpu_memory:require_budget", "L16.require_budget(1.5e9)", E("TypeError", "budget_bytes must be an integer")),
    ("nb16_gpu_memory:require_budget", "L16.require_budget(np.int64(5))", R("r == 5 and type(r) is int")),
    ("nb16_gpu_memory:trains_on_gpu", "L16.trains_on_gpu(TINY, -1)", E("ValueError", "budget_bytes must be >= 1")),
    ("nb16_gpu_memory:trains_on_gpu", "L16.trains_on_gpu(TINY, 10**9, steps=0)", E("ValueError", "steps must be >= 1")),
    ("nb16_gpu_memory:trains_on_gpu", 'L16.trains_on_gpu(TINY, 10**9, checkpointing="most")', E("ValueError", "checkpointing must be None")),
    ("nb16_gpu_memory:trains_on_gpu", "L16.trains_on_gpu(TINY, 10**9, autocast=torch.int8)", E("ValueError", "autocast must be one of")),
    ("nb16_gpu_memory:trains_on_gpu", "L16.trains_on_gpu(TINY, 10**9)", E("ValueError", "trains_on_gpu needs a CUDA GPU")),
    ("nb16_gpu_memory:trains_by_formula", "L16.trains_by_formula(TINY, 0)", E("ValueError", "budget_bytes must be >= 1")),
    ("nb16_gpu_memory:trains_by_formula", 'L16.trains_by_formula(TINY, 10**12, checkpointing="every 2")', E("ValueError", "checkpointing must be one of")),
    ("nb16_gpu_memory:trains_by_formula", "L16.trains_by_formula(None, 10**12)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb16_gpu_memory:trains_by_formula", "L16.trains_by_formula(TINY, 1000)", E("OutOfMemoryError", "predicted peak")),
    ("nb16_gpu_memory:trains_by_formula", 'L16.trains_by_formula(TINY, 10**12, checkpointing="full")', R("r is None")),
    ("nb16_gpu_memory:with_layers", "L16.with_layers(TINY, 3).layers", R("r == 3")),
    ("nb16_gpu_memory:with_layers", "L16.with_layers(TINY, 0)", E("ValueError", "GPTConfig.layers must be >= 1")),
    ("nb16_gpu_memory:with_layers", "L16.with_layers(None, 3)", E("TypeError", "cfg must be a GPTConfig")),
    # ------------------------------------------------------------------ lessons/nb17_multi_gpu_training.py
    ("nb17_multi_gpu_training:bus_factor", 'L17.bus_factor("all_reduce", 4)', R("r == 1.5")),
    ("nb17_multi_gpu_training:bus_factor", 'L17.bus_factor("allreduce", 2)', E("ValueError", "op must be one of")),
    ("nb17_multi_gpu_training:bus_factor", 'L17.bus_factor("all_gather", 0)', E("ValueError", "world_size must be >= 1")),
    ("nb17_multi_gpu_training:bus_factor", 'L17.bus_factor("all_gather", 2.0)', E("TypeError", "world_size must be an integer")),
    ("nb17_multi_gpu_training:bus_bandwidth", 'L17.bus_bandwidth("all_gather", 10**9, 1.0, np.int64(2))', R("r == 0.5")),
    ("nb17_multi_gpu_training:bus_bandwidth", 'L17.bus_bandwidth("all_reduce", 10**9, 0, 2)', E("ValueError", "seconds must be > 0")),
    ("nb17_multi_gpu_training:bus_bandwidth", 'L17.bus_bandwidth("all_reduce", -1, 1.0, 2)', E("ValueError", "nbytes must be >= 0")),
    ("nb17_multi_gpu_training:bus_bandwidth", 'L17.bus_bandwidth("all_reduce", 10, "1", 2)', E("TypeError", "seconds must be a number")),
    ("nb17_multi_gpu_training:GPTConfig", "L17.GPTConfig(width=100, heads=16)", E("ValueError", r"GPTConfig.width \(100\) must be a multiple of heads")),
    ("nb17_multi_gpu_training:GPTConfig", "L17.GPTConfig(layers=0)", E("ValueError", "GPTConfig.layers must be >= 1")),
    ("nb17_multi_gpu_training:GPTConfig", "L17.GPTConfig().params()", R("r == 150_349_824")),
    ("nb17_multi_gpu_training:Block", "L17.Block(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb17_multi_gpu_training:Block", "L17.Block(T17)(torch.ones(2, 4, 16)).shape", R("r == (2, 4, 16)")),
    ("nb17_multi_gpu_training:GPT", "L17.GPT({'width': 16})", E("TypeError", "cfg must be a GPTConfig")),
    ("nb17_multi_gpu_training:GPT", "L17.GPT(T17)(torch.zeros(2, 4), torch.zeros(2, 4))", E("TypeError", "idx must be an int64 tensor")),
    ("nb17_multi_gpu_training:GPT", "L17.GPT(T17)(torch.zeros(2, 9, dtype=torch.long), torch.zeros(2, 9, dtype=torch.long))", E("ValueError", r"T <= cfg.seq=8")),
    ("nb17_multi_gpu_training:GPT", "L17.GPT(T17)(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))", E("ValueError", "idx and targets must share a shape")),
    ("nb17_multi_gpu_training:GPT", "L17.GPT(T17)(*L17.make_batch(T17)).item()", R("3 < r < 4")),
    ("nb17_multi_gpu_training:make_batch", "L17.make_batch(None)", E("TypeError", "cfg must be a GPTConfig")),
    ("nb17_multi_gpu_training:make_batch", "L17.make_batch(T17, seed=-1)", E("ValueError", "seed must be >= 0")),
    ("nb17_multi_gpu_training:make_batch", "[tuple(t.shape) for t in L17.make_batch(T17, seed=np.int64(1))]", R("r == [(2, 8), (2, 8)]")),
    ("nb17_multi_gpu_training:allreduce_each", "L17.allreduce_each(None)", E("TypeError", "model must be an nn.Module")),
    ("nb17_multi_gpu_training:allreduce_each", "L17.allreduce_each(L17.GPT(T17))", E("RuntimeError", "needs torch.distributed initialized")),
    ("nb17_multi_gpu_training:allreduce_flat", "L17.allreduce_flat([torch.ones(3)])", E("TypeError", "model must be an nn.Module")),
    ("nb17_multi_gpu_training:allreduce_flat", "L17.allreduce_flat(L17.GPT(T17))", E("RuntimeError", "needs torch.distributed initialized")),
    ("nb17_multi_gpu_training:assign_buckets", "L17.assign_buckets([10, 10, 10, 0], np.int64(15))", R("r == [[3, 2, 1], [0]]")),
    ("nb17_multi_gpu_training:assign_buckets", "L17.assign_buckets([], 15)", R("r == []")),
    ("nb17_multi_gpu_training:assign_buckets", "L17.assign_buckets([10, 10], 0)", E("ValueError", "cap_bytes must be >= 1")),
    ("nb17_multi_gpu_training:assign_buckets", "L17.assign_buckets([10, -1], 15)", E("ValueError", r"sizes\[1\] must be >= 0")),
    ("nb17_multi_gpu_training:assign_buckets", "L17.assign_buckets(torch.ones(3), 15)", E("TypeError", "sizes must be a list")),
    ("nb17_multi_gpu_training:BucketedDDP", "L17.BucketedDDP(None)", E("TypeError", "model must be an nn.Module with trainable parameters")),
    ("nb17_multi_gpu_training:BucketedDDP", "L17.BucketedDDP(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).double()))", E("ValueError", "share one dtype and device")),
    ("nb17_multi_gpu_training:BucketedDDP", "L17.BucketedDDP(L17.GPT(T17), cap_mb=0)", E("ValueError", "cap_mb must be >=")),
    ("nb17_multi_gpu_training:BucketedDDP", "L17.BucketedDDP(L17.GPT(T17))", E("RuntimeError", "needs torch.distributed initialized")),
    ("nb17_multi_gpu_training:kernels_from_trace", "L17.kernels_from_trace([])", E("TypeError", "trace must be the dict of a Chrome trace")),
    ("nb17_multi_gpu_training:kernels_from_trace", "L17.kernels_from_trace({'traceEvents': [{'ph': 'X', 'cat': 'kernel', 'name': 'k', 'ts': 1, 'dur': 2}, 3]})", R("r == [{'name': 'k', 'start': 1.0, 'dur': 2.0, 'stream': None}]")),
    ("nb17_multi_gpu_training:overlap", "L17.overlap(None)", E("TypeError", "kernels must be the list kernels_from_trace returns")),
    ("nb17_multi_gpu_training:overlap", "L17.overlap([], steps=0)", E("ValueError", "steps must be >= 1")),
    ("nb17_multi_gpu_training:overlap", "L17.overlap([{'name': 'ncclKernel', 'start': 0.0, 'dur': 1000.0}])", R("r['exposed nccl ms'] == 1.0 and r['hidden share'] == 0.0")),
    ("nb17_multi_gpu_training:torchrun_command", 'L17.torchrun_command("os", nproc=2)', E("ValueError", "module must be one of the chapter's scripts")),
    ("nb17_multi_gpu_training:torchrun_command", 'L17.torchrun_command("lessons.nb17_train", nproc=0)', E("ValueError", "nproc must be >= 1")),
    ("nb17_multi_gpu_training:torchrun_command", 'L17.torchrun_command("lessons.nb17_train", 3, nproc=2)', E("TypeError", "args must be strings")),
    ("nb17_multi_gpu_training:torchrun_command", 'L17.torchrun_command("lessons.nb17_train", nproc=np.int64(2))[-3:]', R("r == ['--nproc-per-node=2', '-m', 'lessons.nb17_train']")),
    ("nb17_multi_gpu_training:torchrun", 'L17.torchrun("os", nproc=2, out=Path(tmp) / "o.json")', E("ValueError", "module must be one of the chapter's scripts")),
    ("nb17_multi_gpu_training:torchrun", 'L17.torchrun("lessons.nb17_train", nproc=2, out=Path(tmp) / "o.json", cpu="yes")', E("TypeError", "cpu must be True or False")),
    ("nb17_multi_gpu_training:torchrun", 'L17.torchrun("lessons.nb17_train", nproc=2, out=Path(tmp) / "o.json", timeout=0)', E("ValueError", "timeout must be a positive number")),
]


# ---------------------------------------------------------------------------------------------- the child
def _namespace(tmp: str) -> dict:
    """What the rows' source text may use."""
    import math

    import numpy as np
    import pandas as pd
    import torch

    import course_utils as cu
    from course_utils import (checks, cuda_build, device, export, fast_interpreter, grading, kernel_inspect, peaks,
                              plots, profiling, results, scripts, sweeps, timing, toolchain, tuning)

    import dataclasses
    import pickle
    import time
    import types

    from hypothesis import strategies as st

    ns = dict(locals())
    ns.update(L11=importlib.import_module("lessons.nb11_dlrm"), L13=importlib.import_module("lessons.nb13_giou"))
    ns.update(L04=importlib.import_module("lessons.nb04_gemm"), L05=importlib.import_module("lessons.nb05_vector_add"),
              L05r=importlib.import_module("lessons.nb05_row_kernels"), L06=importlib.import_module("lessons.nb06_softmax"),
              L06p=importlib.import_module("lessons.nb06_softmax_persistent"),
              L07=importlib.import_module("lessons.nb07_matmul"), L12=importlib.import_module("lessons.nb12_lora"),
              L12p=importlib.import_module("lessons.nb12_peft"), L12b=importlib.import_module("lessons.nb12_bench"))
    # a small exercise for the grader's rows: -x on one input, two drawn cases
    ns["EXERCISE"] = grading.Exercise("t.1 neg", "neg(x): -x", torch.neg, st.just(grading.Inputs(
        lambda: (torch.arange(3.0),), "x: arange(3)")), examples=(2, 2))
    try:
        ns["L10"] = importlib.import_module("lessons.nb10_input_pipeline")
    except Exception:  # noqa: BLE001 - a broken torchvision: its rows report it
        pass

    def write(path: Path, text: str) -> Path:
        path.write_text(text)
        return path

    def criteo() -> Path:
        ns["L11"].generate_criteo_like(Path(tmp) / "criteo", 64, 64, max_vocab=50)
        return Path(tmp) / "criteo" / "train.parquet"

    def jpegs() -> Path:
        ns["L10"].make_image_folder(Path(tmp) / "jpegs", ns["L10"].FolderSpec(1, 2, min_side=16, max_side=24))
        return Path(tmp) / "jpegs"

    def attempt(fn) -> str:  # the result, or the error, as text: for tools a machine may or may not have
        try:
            return str(fn())
        except Exception as err:  # noqa: BLE001
            return f"{type(err).__name__}: {err}"

    def dump(path: Path, obj) -> Path:  # a pickle, as torch.cuda.memory._dump_snapshot writes one
        path.write_bytes(pickle.dumps(obj))
        return path

    def qkv(b: int = 1, n: int = 8, d: int = 16, dtype: torch.dtype = torch.float32) -> tuple:
        """(q, k, v) of shape (b, 2, n, d), the same for the same arguments."""
        gen = torch.Generator().manual_seed(0)
        return tuple(torch.randn(b, 2, n, d, generator=gen).to(dtype) for _ in range(3))

    ns.update(L14=importlib.import_module("lessons.nb14_hopper_matmul"))
    ns.update(L15=importlib.import_module("lessons.nb15_flash_attention"),
              L16=importlib.import_module("lessons.nb16_gpu_memory"), qkv=qkv, dump=dump, json=json)
    ns.update(L17=importlib.import_module("lessons.nb17_multi_gpu_training"))
    ns.update(T17=ns["L17"].GPTConfig(vocab=32, seq=8, width=16, heads=2, layers=1, batch=2))
    ns.update(TINY=ns["L16"].GPTConfig(vocab=32, seq=8, width=16, heads=2, layers=2, batch=4),
              SNAP={"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 100},
                                                        {"action": "free_completed", "addr": 1, "size": 100}]]})
    ns.update(attempt=attempt, write=write, criteo=criteo, jpegs=jpegs, tmp=tmp, Path=Path, __file__=__file__,
              boxes=lambda: ns["L13"].random_boxes(2, 5, seed=1),
              px=lambda: torch.arange(48, dtype=torch.uint8).reshape(1, 3, 4, 4) * 5,
              x6=torch.arange(24.0).reshape(4, 6) - 12,
              # fp16 matrices of small whole numbers (exact products), the same for the same shape
              h=lambda *shape: torch.randint(-3, 4, shape, generator=torch.Generator().manual_seed(0)).half())
    return ns


def _outcome(expect: tuple, ns: dict, code: str) -> dict:
    import matplotlib.pyplot as plt

    try:
        r = eval(code, ns)  # noqa: S307 - the table above, nothing else
    except BaseException as err:  # noqa: BLE001 - every outcome is recorded
        kinds = expect[1].split("|") if expect[0] == "error" else []
        kind = type(err).__name__
        clear = any(k in [c.__name__ for c in type(err).__mro__] for k in kinds)
        clear = clear and re.search(expect[2], str(err), re.IGNORECASE) is not None
        return {"ok": clear, "got": f"{kind}: {str(err)[:300]}"}
    finally:
        plt.close("all")
    if expect[0] == "value":
        try:
            ok = bool(eval(expect[1], {**ns, "r": r}))  # noqa: S307
        except Exception as err:  # noqa: BLE001
            ok, r = False, f"{r!r:.200} ({type(err).__name__} in the test: {err})"
        return {"ok": ok, "got": f"returned {r!r:.300}"}
    return {"ok": False, "got": f"returned {r!r:.300} (no error)"}


def child(start: int) -> None:
    import signal
    import tempfile
    import time

    import matplotlib

    matplotlib.use("Agg")

    def deadline(*_):
        raise TimeoutError(f"still running after {CASE_SECONDS} s")

    signal.signal(signal.SIGALRM, deadline)
    with tempfile.TemporaryDirectory() as tmp:
        ns = _namespace(tmp)
        for i in range(start, len(TABLE)):
            target, code, expect = TABLE[i]
            print(json.dumps({"start": i}), flush=True)
            module = target.split(":")[0]
            if module == "nb10_input_pipeline" and "L10" not in ns:
                result = {"ok": None, "got": "skipped: lessons.nb10_input_pipeline does not import here (torchvision?)"}
            else:
                signal.alarm(CASE_SECONDS)
                began = time.perf_counter()
                result = _outcome(expect, ns, code)
                result["seconds"] = round(time.perf_counter() - began, 3)
                signal.alarm(0)
            print(json.dumps({"done": i, **result}), flush=True)


# ---------------------------------------------------------------------------------------------- the tests
def run_table() -> dict[int, dict]:
    """Every row's outcome; a row whose child crashed or hung is recorded so, and the next child goes on."""
    from course_utils.scripts import run_python

    outcomes: dict[int, dict] = {}
    start = 0
    while start < len(TABLE):
        run = run_python(__file__, "--child", str(start), env={"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"},
                         timeout=240 + 2 * CASE_SECONDS)
        last = None
        for line in run.stdout.splitlines():
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "start" in msg:
                last = msg["start"]
            else:
                outcomes[msg.pop("done")] = msg
                last = None
        if last is None:  # every row it began, it finished
            if run.returncode != 0:
                raise AssertionError(f"the child process failed outside a row:\n{run.tail(30)}")
            break
        how = "hang (killed)" if run.returncode is None else f"crash (exit code {run.returncode})"
        outcomes[last] = {"ok": False, "got": f"{how}: {run.tail(4)}"}
        start = last + 1
    return outcomes


@pytest.mark.skipif(torch.cuda.is_available(), reason="the rows state the CPU run's answers (CI's); the GPU "
                    "behaviour is tested by the gpu-marked tests below")
def test_every_bad_input_gets_a_clear_error_or_the_right_answer():
    outcomes = run_table()
    bad = [f"{TABLE[i][0]}: {TABLE[i][1]}\n    expected {TABLE[i][2]}, got {o['got']}"
           for i, o in sorted(outcomes.items()) if o["ok"] is False]
    counts = {"clear error": sum(1 for i, o in outcomes.items() if o["ok"] and TABLE[i][2][0] == "error"),
              "right answer": sum(1 for i, o in outcomes.items() if o["ok"] and TABLE[i][2][0] == "value"),
              "skipped": sum(1 for o in outcomes.values() if o["ok"] is None), "failed": len(bad)}
    print(counts)
    assert len(outcomes) == len(TABLE)
    assert not bad, f"{len(bad)} of {len(TABLE)} rows failed:\n" + "\n".join(bad)


def _public(module_name: str) -> set[str]:
    """module:name of the module's own public functions and classes, less functions of no parameters (no input
    to get wrong; compiler_choice, for one, builds probe extensions: too slow for a row)."""
    module = importlib.import_module(module_name)
    short = module_name.rsplit(".", 1)[1]
    found = set()
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module_name:
            continue
        if inspect.isclass(value) or (inspect.isfunction(inspect.unwrap(value))
                                      and inspect.signature(value).parameters):
            found.add(f"{short}:{name}")
    return found


def _module_of(target: str) -> str:
    short = target.split(":")[0]
    return f"lessons.{short}" if short.startswith("nb") else f"course_utils.{short}"


def test_every_public_function_is_in_the_table():
    import course_utils

    modules = [f"course_utils.{m.name}" for m in pkgutil.iter_modules(course_utils.__path__)]
    modules += [f"lessons.{m.name}" for m in pkgutil.iter_modules([str(PROJECT / "lessons")])]
    unlisted = {m for m in modules if m not in SCRIPTS and m not in NOT_YET and m.startswith("lessons.")
                and m not in LESSONS}
    assert not unlisted, f"lessons neither covered (LESSONS) nor waiting (NOT_YET): {sorted(unlisted)}"
    wanted = set()
    for name in modules:
        if name in SCRIPTS or name in NOT_YET:
            continue
        try:
            wanted |= _public(name)
        except Exception as err:  # noqa: BLE001 - nb10 needs a working torchvision
            if name != "lessons.nb10_input_pipeline":
                raise
            print(f"skipped {name}: {type(err).__name__}: {err}")
            wanted |= {t for t in [row[0] for row in TABLE] + sorted(RECORDS) if t.startswith("nb10_input_pipeline:")}
    covered = {target for target, _, _ in TABLE}
    missing = sorted(wanted - covered - RECORDS)
    assert not missing, f"public functions that no row of TABLE calls: {missing}"
    def gone(target: str) -> bool:  # a row may also call a function of no parameters
        value = getattr(importlib.import_module(_module_of(target)), target.split(":")[1], None)
        return not inspect.isfunction(inspect.unwrap(value))

    stale = sorted(t for t in (covered | RECORDS) - wanted if gone(t))
    assert not stale, f"rows or RECORDS name functions that are gone: {stale}"


# ---------------------------------------------------------------------------------------------- GPU only
# What the interpreter hides: tl.maximum and fmaxf drop NaN on a GPU (NumPy keeps it), and a kernel that reads
# out of bounds may return garbage there instead of failing.
@pytest.mark.gpu
def test_bias_relu_keeps_nan_and_inf_on_the_gpu_like_torch_relu():
    from course_utils.toolchain import find_nvcc
    from lessons.nb11_dlrm import bias_relu, build_bias_relu_cuda

    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[nan, -1.0, 2.0, inf], [-inf, nan, 0.0, -0.5]], device="cuda").repeat(300, 1)
    bias = torch.tensor([0.0, 0.5, -1.0, 0.25], device="cuda")
    expected = torch.relu(x + bias)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        got = bias_relu(x.to(dtype), bias.to(dtype))
        torch.testing.assert_close(got, expected.to(dtype), equal_nan=True)
    if find_nvcc():
        torch.testing.assert_close(build_bias_relu_cuda().bias_relu_cuda(x, bias), expected, equal_nan=True)


@pytest.mark.gpu
def test_wrappers_refuse_bad_input_on_the_gpu():
    from lessons.nb11_dlrm import bias_relu
    from lessons.nb13_giou import giou_forward, giou_loss_triton, giou_sums_per_image, random_boxes

    x, bias = torch.ones(4, 3, device="cuda"), torch.ones(3, device="cuda")
    with pytest.raises(ValueError, match="x requires grad"):
        bias_relu(x.clone().requires_grad_(), bias)
    with pytest.raises(ValueError, match="must be on one device"):
        bias_relu(x, bias.cpu())
    with pytest.raises(ValueError, match="block must be a positive power of two"):
        bias_relu(x, bias, block=0)
    pred, target, mask = random_boxes(3, 7, device="cuda")
    with pytest.raises(ValueError, match="mask must have shape"):  # a mask larger than the boxes: no stray reads
        giou_sums_per_image(pred, target, torch.ones(3, 9, dtype=torch.bool, device="cuda"))
    with pytest.raises(ValueError, match="this kernel runs on cuda"):
        giou_forward(pred.cpu(), target.cpu(), mask.cpu())
    with pytest.raises(ValueError, match="requires grad"):
        giou_forward(pred.clone().requires_grad_(), target, mask)
    loss = giou_loss_triton(pred.clone().requires_grad_(), target, mask)
    assert loss.grad_fn is not None


@pytest.mark.gpu
def test_input_pipeline_refuses_bad_input_on_the_gpu():
    L10 = pytest.importorskip("lessons.nb10_input_pipeline")
    with pytest.raises(TypeError, match="data must be a list of 1-D uint8 tensors"):
        L10.decode_jpegs(torch.zeros(100, dtype=torch.uint8), "cuda")
    with pytest.raises(ValueError, match="pixels scaled to 0..1"):
        L10.normalize_on_device(torch.rand(2, 3, 8, 8, device="cuda"))
    images, failed = L10.decode_jpegs([torch.zeros(64, dtype=torch.uint8)], "cuda")
    assert images == [None] and failed and failed[0][0] == 0


@pytest.mark.gpu
def test_triton_lessons_refuse_bad_input_and_stay_right_on_the_gpu():
    """Lessons 05-07 on CUDA tensors: the guards as on a CPU, and strided, expanded, empty inputs right (on a GPU
    a kernel that ignored a stride would read other memory, not fail)."""
    from lessons import nb05_row_kernels as L05r, nb05_vector_add as L05, nb06_softmax as L06
    from lessons import nb06_softmax_persistent as L06p, nb07_matmul as L07

    x = torch.arange(4096.0, device="cuda")
    torch.testing.assert_close(L05.add_no_mask(x[::2], x[:2048]), x[::2] + x[:2048], rtol=0, atol=0)
    one = torch.ones(1, device="cuda").expand(1024)
    torch.testing.assert_close(L05.add_no_mask(one, one), torch.full((1024,), 2.0, device="cuda"), rtol=0, atol=0)
    torch.testing.assert_close(L05.add(x[::3], x[:1366]), x[::3] + x[:1366], rtol=0, atol=0)
    assert L05.add(x[:0], x[:0]).shape == (0,) and L05.add_no_mask(x[:0], x[:0]).shape == (0,)
    for bad in (0, -1024, 1000):
        with pytest.raises(ValueError, match="block_size must be|power of two"):
            L05.add(x, x, block_size=bad)
        with pytest.raises(ValueError, match="block_size must be|power of two"):
            L05.add_no_mask(x, x, block_size=bad)
    with pytest.raises(ValueError, match="x requires grad"):
        L05.add(x.clone().requires_grad_(), x)
    m = torch.randn(37, 70, device="cuda")
    for view in (m.t(), m[:, ::2], m[:1].expand(5, 70), m[:0]):
        torch.testing.assert_close(L06.softmax(view), torch.softmax(view, 1))
        torch.testing.assert_close(L06p.softmax_persistent(view, 1, 2), torch.softmax(view, 1))
        torch.testing.assert_close(L05r.square_rowblock(view), view * view)
        torch.testing.assert_close(L05r.square_chunked(view, 16), view * view)
    with pytest.raises(ValueError, match="programs_per_sm must be >= 1"):
        L06p.softmax_persistent(m, programs_per_sm=0)
    with pytest.raises(ValueError, match="block must be a positive power of two"):
        L05r.square_chunked(m, block=0)
    a, b = torch.randn(70, 37, device="cuda", dtype=torch.half).t(), torch.randn(70, 33, device="cuda").half()
    torch.testing.assert_close(L07.matmul_rowmajor(a, b, group_m=2), L07.reference(a, b), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(L07.matmul(a, b), L07.reference(a, b), rtol=1e-2, atol=1e-2)
    assert not L07.matmul_rowmajor(a[:, :0], b[:0]).any()  # K = 0: zeros
    with pytest.raises(ValueError, match="a requires grad"):
        L07.matmul(a.clone().requires_grad_(), b)
    with pytest.raises(ValueError, match="group_m must be >= 1"):
        L07.matmul_rowmajor(a, b, group_m=0)


if __name__ == "__main__":
    sys.path.insert(0, str(PROJECT))
    child(int(sys.argv[sys.argv.index("--child") + 1]))
