"""`run_python`: run a Python script in a child process, the one way the course does it.

Notebooks run scripts for what cannot happen inside a notebook's own process: a profiler that wraps the
whole process (Nsight Compute, `course_utils.profiling.run_ncu`), ``torchrun`` with several processes, a
run with another environment variable (``TRITON_INTERPRET``, ``TORCH_LOGS``). The child finds
``course_utils`` and ``lessons`` (the project root goes on ``PYTHONPATH``), and what it prints comes back
with the project's absolute path cut, so outputs hold no machine path.
"""

from __future__ import annotations

import numbers
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

PROJECT_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ScriptRun:
    """What a child process did: its exit code and its output (project paths made relative)."""

    returncode: int | None  # None: killed after the timeout
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, lines: int = 8) -> str:
        return "\n".join((self.stdout + self.stderr).strip().splitlines()[-lines:])


def child_env(env: Mapping[str, str] | None = None, *, interpret: bool | None = None) -> dict[str, str]:
    """The environment of a course child process: this one's, the project on PYTHONPATH, then ``env``.

    ``interpret``: True/False sets ``TRITON_INTERPRET`` to 1/0; None keeps this process's choice.
    """
    merged = dict(os.environ)
    merged["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_DIR), os.environ.get("PYTHONPATH", "")) if p)
    if interpret is not None:
        merged["TRITON_INTERPRET"] = "1" if interpret else "0"
    for key, value in (env or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env must map str to str, got {key!r}: {value!r}")
        merged[key] = value
    return merged


def _relative(text: str) -> str:
    return text.replace(str(PROJECT_DIR) + os.sep, "").replace(str(PROJECT_DIR), ".")


def run_python(script: str | Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 600,
               interpret: bool | None = None, prefix: Sequence[str] = ()) -> ScriptRun:
    """Run ``python script args...`` (after ``prefix``, e.g. ``["ncu", "--csv"]``) and return a `ScriptRun`.

    A script that does not exist raises; a timeout gives ``returncode=None``, never a hang.
    """
    script = Path(script)
    if not script.is_file() and not script.is_absolute() and (PROJECT_DIR / script).is_file():
        script = PROJECT_DIR / script  # a path from the project's root works from any folder (a notebook's)
    if not script.is_file():
        raise FileNotFoundError(f"script: no such file {script}")
    if not all(isinstance(a, str) for a in (*args, *prefix)):
        raise TypeError("args and prefix must be strings")
    if not isinstance(timeout, numbers.Real) or isinstance(timeout, bool) or not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    command = [*prefix, sys.executable, str(script), *args]
    # a session of its own: on a timeout (or an interrupted kernel) the child, its process group and every process
    # it started are stopped (torchrun's workers run in sessions of their own), so none outlives it
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_DIR,
                          env=child_env(env, interpret=interpret), start_new_session=True) as child:
        try:
            out, err = child.communicate(timeout=timeout)
        except BaseException as stop:
            _stop(child)
            try:
                out, err = child.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a process that escaped still holds the pipes: stop reading
                out, err = "", ""
            if not isinstance(stop, subprocess.TimeoutExpired):
                raise
            return ScriptRun(None, _relative(out or ""), _relative(err or "") + f"\n(killed after {timeout:g} s)")
    return ScriptRun(child.returncode, _relative(out), _relative(err))


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux: from /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in found:
                found.add(c)
                todo.append(c)
    return found


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the child's process group (a launcher then stops its workers), then SIGKILL to the group and to
    every process it started that is still alive."""
    below = _descendants(child.pid)
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if sig == signal.SIGKILL:
            for pid in below | _descendants(child.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM and not any(Path(f"/proc/{pid}").exists() for pid in below):
            return
