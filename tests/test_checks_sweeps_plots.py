import matplotlib
import pandas as pd
import pytest
import torch

matplotlib.use("Agg")

import course_utils as cu  # noqa: E402
from course_utils import plots  # noqa: E402
from course_utils.checks import make_tensor  # noqa: E402


def test_awkward_cases_cover_shapes_dtypes_and_strides():
    cases = cu.awkward_cases((1, 1025, (3, 17)), dtypes=(torch.float32, torch.float16), n_inputs=2)
    assert len(cases) == 3 * 2 * 2
    names = [c.name for c in cases]
    assert "1 float32" in names and "1025 float16 strided" in names and "3x17 float32 strided" in names
    x, y = cases[-1].make_inputs()
    assert x.shape == (3, 17) and not x.is_contiguous() and y.dtype == torch.float16
    assert torch.equal(cases[0].make_inputs()[0], cases[0].make_inputs()[0])  # reproducible


def test_check_passes_a_correct_function():
    report = cu.check(lambda a, b: a + b, torch.add, cu.awkward_cases(n_inputs=2))
    assert report.passed and report.summary().startswith("all 16 cases passed")


def test_check_names_the_case_that_failed_and_by_how_much():
    def off_by_one_at_1025(x):  # wrong only past one block of 1024, as a missing mask would be
        out = x * 2
        if x.numel() > 1024:
            out[1024:] = 0
        return out

    report = cu.check(off_by_one_at_1025, lambda x: x * 2, cu.awkward_cases((1000, 1025)))
    assert not report.passed
    assert [r.name for r in report.failures] == ["1025 float32", "1025 float32 strided"]
    assert report.failures[0].max_abs_err > 0
    with pytest.raises(AssertionError, match="1025 float32"):
        report.raise_if_failed()


def test_check_records_exceptions_shape_and_dtype_mismatches():
    cases = cu.awkward_cases((4,), non_contiguous=False)
    assert "ValueError" in cu.check(lambda x: (_ for _ in ()).throw(ValueError("boom")), torch.neg,
                                    cases).failures[0].message
    assert "shape" in cu.check(lambda x: x[:2], torch.neg, cases).failures[0].message
    assert "dtype" in cu.check(lambda x: x.half(), lambda x: x, cases).failures[0].message
    with pytest.raises(TypeError):
        cu.check("not callable", torch.neg, cases)
    with pytest.raises(ValueError):
        cu.check(torch.neg, torch.neg, [])


def test_make_tensor_rejects_negative_shapes():
    with pytest.raises(RuntimeError, match="negative dimension"):  # torch's own check
        make_tensor((-1,))


def test_sweep_returns_a_row_per_provider_and_size():
    providers = {
        "mul": lambda n: (lambda x=torch.randn(n): x * x),
        "square": lambda n: (lambda x=torch.randn(n): torch.square(x)),
    }
    frame = cu.sweep(providers, [64, 128], bytes_moved=lambda n: 8 * n, device="cpu", rep_ms=2)
    assert len(frame) == 4 and set(frame["provider"]) == {"mul", "square"}
    assert (frame["gbps"] > 0).all()


@pytest.mark.parametrize("providers, sizes, error", [
    ({}, [1], TypeError),
    ({"x": 3}, [1], TypeError),
    ({"x": lambda n: (lambda: None)}, [], ValueError),
    ({"x": lambda n: (lambda: None)}, [0], ValueError),
])
def test_sweep_rejects_bad_input(providers, sizes, error):
    with pytest.raises(error):
        cu.sweep(providers, sizes)


def test_plots_draw_and_reject_unknown_metrics():
    frame = pd.DataFrame({"provider": ["a", "a", "b", "b"], "size": [1, 2, 1, 2],
                          "gbps": [1.0, 2.0, 1.5, 2.5]})
    ax = plots.plot_throughput(frame, "gbps", peak=3.0)
    assert len(ax.get_lines()) == 3  # two providers and the peak line
    with pytest.raises(ValueError):
        plots.plot_throughput(frame, metric="speed")
    assert len(plots.plot_bars({"naive": 1.0, "tiled": 3.0}, ylabel="TFLOP/s").patches) == 2
    peaks = cu.lookup_peaks("NVIDIA H100 80GB HBM3")
    ax = plots.plot_roofline({"add": (1 / 12, 0.25), "matmul": (1000.0, 700.0)}, peaks)
    assert len(ax.collections) == 2
    assert {t.get_text() for t in ax.texts} == {"add", "matmul"}
    ax = plots.plot_roofline({"add": (1 / 12, 0.25), "add, CUDA": (1 / 12, 0.26), "matmul": (1000.0, 700.0)}, peaks,
                             labels="legend")
    assert len(ax.collections) == 3 and not ax.texts  # no annotation to overlap another
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[1:] == ["add", "add, CUDA", "matmul"] and legend[0].startswith(peaks.name)
    with pytest.raises(ValueError, match="labels"):
        plots.plot_roofline({"add": (1 / 12, 0.25)}, peaks, labels="above")


def test_sweep_with_shared_inputs_calls_every_provider_on_the_same_arguments():
    seen = {}

    def record(name):
        def fn(x, y):
            seen.setdefault(name, set()).add((id(x), id(y), x.numel()))
            return x + y
        return fn

    frame = cu.sweep({"a": record("a"), "b": record("b")}, [4, 8],
                     inputs=lambda n: (torch.ones(n), torch.ones(n)), bytes_moved=lambda n: 12 * n,
                     device="cpu", warmup_ms=0, rep_ms=1e-3, max_reps=1)
    assert frame["provider"].tolist() == ["a", "b", "a", "b"] and frame["gbps"].notna().all()
    assert {n for _, _, n in seen["a"]} == {4, 8}
    assert seen["a"] == seen["b"]  # the very same tensors at each size
    with pytest.raises(TypeError, match="inputs"):
        cu.sweep({"a": record("a")}, [4], inputs=[1, 2])
