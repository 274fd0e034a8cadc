"""nbval, for the notebooks: a checked cell (# NBVAL_CHECK_OUTPUT) is compared on what it prints to stdout
and displays, not on its stderr.

Warnings go to stderr, and which ones appear depends on the device and the library versions: on the H100,
torch 2.11 warns "Attempting to run cuBLAS, but there was no current CUDA context!" in a cell whose CPU run
prints nothing there. A checked cell states its result on stdout, the same on every device; errors still
fail the cell, as they are error outputs, not streams. For the same reason the lines in which a tuned kernel's
probe reports the configs this GPU could not use are left out of stdout.
"""

import copy
import re

import nbval.plugin

_compare_streams = nbval.plugin.transform_streams_for_comparison
#: The lines in which a tuned kernel's probe (lessons/nb14_hopper_matmul.probe) reports the configs this GPU and
#: this Triton could not use: a fact about the device, printed once per process wherever the kernel is first used.
PROBE_LINE = re.compile(r"^.*: (dropped \[.*|\d+ of \d+ configs usable with Triton .*)$")


def _without_probe_lines(output):
    if output.get("output_type") != "stream" or output.get("name") != "stdout":
        return output
    output = copy.copy(output)
    output["text"] = "".join(line for line in output["text"].splitlines(keepends=True)
                             if not PROBE_LINE.match(line.rstrip("\n")))
    return output


def _streams_without_stderr(outputs):
    kept = [_without_probe_lines(o) for o in outputs
            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    return _compare_streams([o for o in kept if not (o.get("output_type") == "stream" and not o["text"])])


nbval.plugin.transform_streams_for_comparison = _streams_without_stderr
