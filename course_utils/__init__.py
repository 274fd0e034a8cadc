"""Small helpers that every notebook of the course calls.

Importing this package first is what lets a notebook run on a machine without a GPU: `device`
switches Triton to its interpreter before any kernel is defined. One module per concern:

- `device`: where code runs, problem sizes for that device, the provenance report.
- `peaks`: spec-sheet peak bandwidth and FLOP/s of common GPUs.
- `timing`: `benchmark`, the one timer the course uses (CUDA events on a GPU, a CPU clock otherwise;
  modes "gpu", "wall" and "graph"), `benchmark_interleaved`, `cuda_graph`, and `device_peaks`.
- `tuning`: `autotune`, a `triton.autotune` that also works in the interpreter.
- `sweeps`: providers x sizes -> a pandas DataFrame.
- `results`: headline figures saved with their environment; the README's table is made from them.
- `plots`: throughput, bars and roofline plots in one style.
- `checks`: compare a function with a PyTorch reference over awkward cases; `require_tensors`, the
  input validation of every kernel wrapper (with `require_block_size`, `require_number`, `require_choice`).
- `results`: also `verdict`, the one line that states a measurement, its baseline and its prediction.

Lesson-specific helpers live in their own modules and are imported from there: `profiling`, `toolchain`
(nvcc, ptxas, the host compiler), `cuda_build` (``load_inline`` builds, ``nvcc`` without a GPU),
`kernel_inspect` (PTX/SASS of Triton and CUDA kernels), `export` (notebook cells -> `lessons/`),
`scripts` (`run_python`: a script in a child process; `profiling.run_ncu` runs Nsight Compute with it).
Modules import one way: device -> peaks -> timing -> tuning/sweeps -> results; toolchain -> cuda_build
-> kernel_inspect. Where Triton runs in its interpreter, `device` installs `fast_interpreter` (the interpreter
without a search it repeats at every call of a helper; it imports nothing of the course).
"""

from course_utils.device import DEVICE, HAS_CUDA, INTERPRET, environment, pick_size, print_environment
from course_utils.peaks import DevicePeaks, lookup_peaks
from course_utils.timing import BenchmarkResult, benchmark, benchmark_interleaved, cuda_graph, device_peaks
from course_utils.checks import (Case, CheckReport, awkward_cases, check, require_block_size, require_choice,
                                 require_number, require_tensors)
from course_utils.results import Verdict, verdict
from course_utils.sweeps import sweep

__all__ = [
    "DEVICE", "HAS_CUDA", "INTERPRET", "environment", "pick_size", "print_environment",
    "DevicePeaks", "device_peaks", "lookup_peaks",
    "BenchmarkResult", "benchmark", "benchmark_interleaved", "cuda_graph",
    "Case", "CheckReport", "awkward_cases", "check", "require_tensors", "require_block_size", "require_number",
    "require_choice",
    "Verdict", "verdict",
    "sweep",
]
