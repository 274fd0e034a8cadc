"""Where the course's code runs, how big its problems are there, and a provenance report.

Importing this module on a machine without CUDA sets ``TRITON_INTERPRET=1``. Triton reads that
variable when ``@triton.jit`` is applied, so the import must come before any kernel is defined;
every notebook therefore imports ``course_utils`` in its first code cell after the Colab setup.
An explicit ``TRITON_INTERPRET=0`` is left alone: kernel_inspect's compile worker runs that way,
to compile (not run) kernels on a machine without a GPU.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

import torch

HAS_CUDA: bool = torch.cuda.is_available()
if not HAS_CUDA and os.environ.get("TRITON_INTERPRET") != "0":
    # Without a GPU the compiled path cannot run at all, so the interpreter is not optional here.
    os.environ["TRITON_INTERPRET"] = "1"

#: True when Triton kernels run in the interpreter (on the CPU, with NumPy semantics).
INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") == "1"
if INTERPRET:  # the interpreter without a search it repeats at every call of a helper (course_utils.fast_interpreter)
    from course_utils import fast_interpreter

    fast_interpreter.install()

#: The device every notebook allocates its tensors on.
DEVICE: torch.device = torch.device("cuda" if HAS_CUDA else "cpu")

#: Where build artefacts (CUDA extensions, traces, profiles) go; ignored by git. COURSE_CACHE overrides.
CACHE_DIR: Path = Path(os.environ.get("COURSE_CACHE", Path(__file__).resolve().parent.parent / ".cache"))

T = TypeVar("T")


def pick_size(gpu: T, cpu: T) -> T:
    """Return ``gpu`` on a CUDA machine and ``cpu`` otherwise.

    Notebooks use it for every problem size, so a CPU run (in CI, or a learner's laptop) finishes
    in seconds while a GPU run measures at a size that fills the device.
    """
    return gpu if HAS_CUDA else cpu


def require_device(device: str | torch.device | None) -> torch.device:
    """Resolve ``device`` (None means `DEVICE`) and refuse CUDA when there is no GPU."""
    if device is None:
        return DEVICE
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"device={device!r} is not a device torch understands") from err
    if resolved.type == "cuda" and not HAS_CUDA:
        raise ValueError(f"device={device!r} asks for CUDA, but no CUDA GPU is available on this machine")
    if resolved.type not in ("cuda", "cpu"):
        raise ValueError(f"device={device!r}: the course supports 'cuda' and 'cpu' only")
    return resolved


def _nvidia_smi(query: str) -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment() -> dict[str, str]:
    """What this run ran on: GPU (or CPU), versions, and the Triton mode, as strings."""
    import triton  # here, not at the top: `import course_utils` does not import Triton

    env: dict[str, str] = {}
    if HAS_CUDA:
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = props.name
        env["compute_capability"] = f"sm_{props.major}{props.minor}"
        env["sms"] = str(props.multi_processor_count)
        env["gpu_memory"] = f"{props.total_memory / 2**30:.1f} GiB"
        env["driver"] = _nvidia_smi("driver_version") or "unknown"
        env["cuda_runtime"] = str(torch.version.cuda)
    else:
        env["gpu"] = "none"
        env["cpu"] = f"{_cpu_name()} ({os.cpu_count()} logical cores)"
    env["torch"] = torch.__version__
    env["triton"] = triton.__version__
    env["python"] = sys.version.split()[0]
    env["triton_mode"] = "interpreter (CPU)" if INTERPRET else "compiled"
    return env


def print_environment() -> None:
    """Print `environment` as the provenance block at the top of each notebook."""
    env = environment()
    width = max(map(len, env))
    for key, value in env.items():
        print(f"{key:<{width}} : {value}")
    if not HAS_CUDA:
        print("No CUDA GPU: Triton runs in its interpreter and problem sizes are small. "
              "Timings below are CPU timings, not GPU figures.")
