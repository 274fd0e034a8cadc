"""nbval, for the notebooks: a checked cell (# NBVAL_CHECK_OUTPUT) is compared on what it prints to stdout
and displays, not on its stderr.

Warnings go to stderr, and which ones appear depends on the device and the library versions: on the H100,
torch 2.11 warns "Attempting to run cuBLAS, but there was no current CUDA context!" in a cell whose CPU run
prints nothing there. A checked cell states its result on stdout, the same on every device; errors still
fail the cell, as they are error outputs, not streams.
"""

import nbval.plugin

_compare_streams = nbval.plugin.transform_streams_for_comparison


def _streams_without_stderr(outputs):
    return _compare_streams([o for o in outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")])


nbval.plugin.transform_streams_for_comparison = _streams_without_stderr
