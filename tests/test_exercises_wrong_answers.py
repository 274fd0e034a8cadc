"""Every plausible wrong answer (tests/wrong_solutions/) fails its exercise's grader with a message that says what is
wrong, within the time bound. The exercises, their references and the fixtures are tests/test_exercises.py's; this file
only holds the wrong answers' test, so that pytest-xdist (--dist loadfile) grades them on another core."""

import pytest

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from course_utils.grading import grade
from test_exercises import NOTEBOOKS, SECONDS_PER_GRADING, _function, _wrong, cpp_ext  # noqa: F401 - cpp_ext: a fixture


@pytest.mark.parametrize("nb, index", [(nb, i) for nb in NOTEBOOKS for i in range(len(_wrong(nb)))],
                         ids=lambda v: v if isinstance(v, str) else str(v))
def test_wrong_answer_fails_with_a_helpful_message(nb, index, request):
    exercise, label, fn, words = _wrong(nb)[index]
    if cu.HAS_CUDA and isinstance(fn, str):
        pytest.skip("a C++ twin: graded on a CPU")
    report = grade(exercise, _function(nb, fn, request), quiet=True)
    assert report.status == "FAILED", f"{exercise.name}, {label}: the grader let it pass ({report})"
    assert report.message.startswith("The smallest failing case: "), str(report)
    missing = [w for w in words if w not in report.message]
    assert not missing, f"{exercise.name}, {label}: {missing} not in {report.message!r}"
    assert report.seconds < SECONDS_PER_GRADING, f"{exercise.name}, {label}: {report.seconds:.1f} s"
