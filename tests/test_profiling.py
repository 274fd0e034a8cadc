"""course_utils.profiling: ranges, monkey-patching that is undone, and profile -> DataFrame."""

import math
import types

import matplotlib
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from course_utils import profiling as P

matplotlib.use("Agg")
ACTIVITIES = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
COLUMNS = ["name", "category", "op", "op_chain", "start_us", "end_us", "duration_us", "stream"]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _step(model: torch.nn.Module, x: torch.Tensor) -> None:
    model(x).square().mean().backward()


def _counts(prof) -> dict[str, int]:
    return {e.key: e.count for e in prof.key_averages()}


def _union(starts, ends) -> float:
    """Test oracle: total length of the union of intervals."""
    total, cur = 0.0, None
    for s, e in sorted(zip(starts, ends)):
        if cur is None or s > cur[1]:
            total += 0.0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (0.0 if cur is None else cur[1] - cur[0])


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ------------------------------------------------------------------------------------- ranges

def test_annotate_context_manager_and_decorator():
    @P.annotate("decorated")
    def f(x):
        return x * 2

    with profile(activities=ACTIVITIES) as prof:
        with P.annotate("outer"):
            assert torch.equal(f(torch.ones(3)), torch.full((3,), 2.0))
            f(torch.ones(3))
    counts = _counts(prof)
    assert counts["outer"] == 1 and counts["decorated"] == 2
    assert f.__name__ == "f"


def test_range_times_counts_calls_host_time_and_order():
    with profile(activities=ACTIVITIES) as prof:
        for _ in range(2):
            with P.annotate("outer"):
                with P.annotate("inner"):
                    torch.ones(64).square().sum()
    times = P.range_times(prof)
    assert list(times.index) == ["outer", "inner"] and list(times["calls"]) == [2, 2]
    assert times.loc["outer", "cpu_us"] >= times.loc["inner", "cpu_us"] > 0
    cpu_totals = {e.key: e.cpu_time_total for e in prof.key_averages() if e.device_type == DeviceType.CPU}
    assert math.isclose(times.loc["inner", "cpu_us"], cpu_totals["inner"], rel_tol=1e-6)
    picked = P.range_times(prof, ["inner", "never opened"])
    assert list(picked.index) == ["inner", "never opened"]
    assert list(picked["calls"]) == [2, 0] and picked.loc["never opened", "cpu_us"] == 0


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), ("  ", ValueError)])
def test_annotate_rejects_bad_names(bad, error):
    with pytest.raises(error):
        P.annotate(bad)


def test_annotate_calls_on_a_model_is_undone():
    model = _model()
    x = torch.randn(8, 16)
    before = model(x).detach()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with profile(activities=ACTIVITIES) as prof:
        with P.annotate_calls(model, prefix="net") as names:
            assert all("forward" in m.__dict__ for m in model.modules())
            _step(model, x)
    assert names == ["net (Sequential)", "net.0 (Linear)", "net.1 (ReLU)", "net.2 (Linear)"]
    assert all(_counts(prof)[n] == 1 for n in names)
    # the model is exactly as it was: no instance attributes left, same class methods, same outputs
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert all(m.forward.__func__ is type(m).forward for m in model.modules())
    assert torch.equal(model(x), before)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())


def test_annotate_calls_keeps_an_existing_instance_forward_and_restores_after_errors():
    model = _model()
    custom = model[0].forward
    model[0].forward = custom  # an instance attribute that must survive
    with pytest.raises(RuntimeError, match="boom"):
        with P.annotate_calls(model, names=["0", "2"]) as names:
            assert names == ["Sequential.0 (Linear)", "Sequential.2 (Linear)"]
            assert model[0].forward is not custom and "forward" not in model[1].__dict__
            raise RuntimeError("boom")
    assert model[0].__dict__["forward"] is custom
    assert "forward" not in model[2].__dict__ and "forward" not in model.__dict__


def test_annotate_calls_on_python_module_functions():
    originals = (F.linear, F.relu)
    model = _model()
    with profile(activities=ACTIVITIES) as prof:
        with P.annotate_calls(F, ["linear", "relu"], prefix="F") as names:
            assert names == ["F.linear", "F.relu"] and F.linear is not originals[0]
            _step(model, torch.randn(4, 16))
    assert (F.linear, F.relu) == originals
    counts = _counts(prof)
    assert counts["F.linear"] == 2 and counts["F.relu"] == 1


def test_annotate_calls_on_a_class_restores_staticmethods():
    class Tools:
        @staticmethod
        def double(x):
            return 2 * x

    raw = Tools.__dict__["double"]
    with P.annotate_calls(Tools, ["double"]) as names:
        assert names == ["Tools.double"] and Tools.double(3) == 6
    assert Tools.__dict__["double"] is raw and Tools().double(2) == 4
    obj = types.SimpleNamespace(f=lambda: 1)
    original = obj.f
    with P.annotate_calls(obj, ["f"]):
        assert obj.f() == 1 and obj.f is not original
    assert obj.f is original


def test_annotate_calls_validates():
    model, linear = _model(), F.linear
    with pytest.raises(ValueError, match="no submodule"):
        with P.annotate_calls(model, names=["7"]):
            pass
    with pytest.raises(ValueError, match="names"):
        with P.annotate_calls(F):
            pass
    with pytest.raises(TypeError):
        with P.annotate_calls(F, "linear"):
            pass
    with pytest.raises(ValueError, match="no callable"):
        with P.annotate_calls(F, ["linear", "not_a_function"]):
            pass
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert F.linear is linear


# ------------------------------------------------------------------------ real (CPU) profiles

def _profile_small_model(**kwargs):
    model = _model()
    x = torch.randn(32, 16, device="cuda" if torch.cuda.is_available() else "cpu")
    model.to(x.device)
    _step(model, x)
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        with P.annotate("step"):
            _step(model, x)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return prof


def test_cpu_frame_rows_add_up_to_the_profiled_op_time():
    prof = _profile_small_model()
    frame = P.device_activity(prof, device="cpu")
    assert list(frame.columns) == COLUMNS and len(frame) > 5
    assert frame.attrs["device"] == "cpu" and frame["start_us"].is_monotonic_increasing
    assert "cpu_op" in set(frame["category"]) <= {"cpu_op", "runtime"}  # runtime: CUDA API calls on a GPU
    ops = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.name.startswith("aten::")]
    assert math.isclose(frame.loc[frame["name"].str.startswith("aten::"), "duration_us"].sum(),
                        sum(e.self_cpu_time_total for e in ops), rel_tol=1e-9)
    assert "step" not in set(frame["name"])  # annotations are not ops
    # forward ops run inside the range (on a GPU, backward ops run on autograd's own thread)
    assert frame["op_chain"].str.startswith("step > ").any()
    start, end = frame.attrs["window_us"]
    assert start == frame["start_us"].min() and end == frame["end_us"].max()
    breakdown = P.time_breakdown(frame)
    # idle = the window minus the union of the op intervals (ops nest, so not minus their sum)
    assert math.isclose(breakdown.loc["idle", "us"], (end - start) - _union(frame["start_us"], frame["end_us"]),
                        rel_tol=1e-9, abs_tol=1e-6)
    assert math.isclose(breakdown.loc["cpu_op", "us"], frame.loc[frame["category"] == "cpu_op", "duration_us"].sum())
    assert math.isclose(P.idle_fraction(frame), breakdown.loc["idle", "us"] / (end - start))
    top = P.top_kernels(frame, 3, by="op")
    assert len(top) == 3 and top["total_us"].is_monotonic_decreasing
    assert top.index[0] == frame.groupby("op")["duration_us"].sum().idxmax()


def test_stack_config_is_what_fills_op_stacks():
    # the notebook says with_stack=True alone leaves FunctionEvent.stack empty (pytorch #100253); if a
    # torch release fixes that, this fails and the notebook's section 5 needs a new sentence
    plain = _profile_small_model(with_stack=True)
    assert not any(e.stack for e in plain.events() if e.name == "aten::addmm")
    verbose = _profile_small_model(with_stack=True, experimental_config=P.stack_config())
    assert all(any("nn.Module: Linear" in s for s in e.stack) for e in verbose.events() if e.name == "aten::addmm")


def test_time_by_source_charges_every_op():
    prof = _profile_small_model(with_stack=True, experimental_config=P.stack_config())
    frame = P.device_activity(prof)
    total = frame["duration_us"].sum()
    by_function = P.time_by_source(prof, by="function")
    assert list(by_function.columns) == ["us", "percent", "ops"] and by_function.index.name == "function"
    assert math.isclose(by_function["us"].sum(), total, rel_tol=1e-6, abs_tol=0.02)
    assert math.isclose(by_function["percent"].sum(), 100, rel_tol=1e-6)
    assert any(k.startswith("_step (test_profiling.py:") for k in by_function.index)
    by_module = P.time_by_source(prof, by="module")
    assert math.isclose(by_module["us"].sum(), total, rel_tol=1e-6, abs_tol=0.02)
    assert {"Sequential_0.Linear_0", "Sequential_0.Linear_1"} <= set(by_module.index)
    assert by_module["us"].is_monotonic_decreasing
    with pytest.raises(ValueError, match="with_stack"):
        P.time_by_source(_profile_small_model())
    with pytest.raises(ValueError, match="by"):
        P.time_by_source(prof, by="line")


# ------------------------------------------------------- GPU-shaped events, checked on a CPU

class _Span:
    def __init__(self, start, end):
        self.start, self.end = float(start), float(end)

    def elapsed_us(self):
        return self.end - self.start


def _evt(name, start, end, *, device=DeviceType.CPU, parent=None, **extra):
    fields = dict(name=name, device_type=device, time_range=_Span(start, end), cpu_parent=parent, is_async=False,
                  is_python_function=False, is_user_annotation=False, activity_type=None, id=0, thread=1,
                  self_cpu_time_total=float(end - start), kernels=[], device_resource_id=7)
    fields.update(extra)
    return types.SimpleNamespace(**fields)


def _gpu_profile(linked: bool):
    """A GPU profile's events by hand: step > aten::square > aten::pow launches a kernel, aten::mul another,
    aten::copy_ a memcpy. A runtime call's id collides with the mul kernel's link id (it must never win)."""
    step = _evt("ProfilerStep#3", 0, 100)
    rng = _evt("square", 5, 40, parent=step, is_user_annotation=True)
    square = _evt("aten::square", 6, 30, parent=rng, id=11)
    power = _evt("aten::pow", 7, 29, parent=square, id=12)
    mul = _evt("aten::mul", 41, 50, parent=step, id=13)
    copy = _evt("aten::copy_", 51, 60, parent=step, id=14)
    runtime = _evt("cudaLaunchKernel", 42, 45, parent=mul, id=13, activity_type="cuda_runtime")
    gpu_rng = _evt("square", 10, 35, device=DeviceType.CUDA, activity_type="gpu_user_annotation")
    k1 = _evt("void at::native::vectorized_elementwise_kernel<4, at::native::pow_tensor_scalar_kernel_impl<float>>"
              "(int)", 10, 30, device=DeviceType.CUDA, activity_type="kernel")
    k2 = _evt("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int)", 45, 62,
              device=DeviceType.CUDA, activity_type="kernel")
    m1 = _evt("Memcpy HtoD (Pageable -> Device)", 60, 70, device=DeviceType.CUDA, activity_type="gpu_memcpy",
              device_resource_id=9)
    if linked:
        for kernel, op in ((k1, power), (k2, mul), (m1, copy)):
            kernel.linked_correlation_id = op.id
    else:
        for kernel, op in ((k1, power), (k2, mul), (m1, copy)):
            op.kernels = [types.SimpleNamespace(name=kernel.name, duration=kernel.time_range.elapsed_us())]
        runtime.kernels = list(mul.kernels)  # the collision: torch lists the kernel on the runtime call too
    return [step, rng, square, power, runtime, mul, copy, gpu_rng, k1, k2, m1]


@pytest.mark.parametrize("linked", [True, False], ids=["linked_correlation_id", "kernels_lists"])
def test_device_rows_name_their_launching_op_and_idle_time(linked):
    events = _gpu_profile(linked)
    frame = P.device_activity(events)
    assert frame.attrs == {"device": "cuda", "window_us": (0.0, 100.0)}
    assert list(frame["category"]) == ["kernel", "kernel", "memcpy"]  # the GPU-side range is not a row
    assert list(frame["op"]) == ["aten::pow", "aten::mul", "aten::copy_"]
    assert frame.loc[0, "op_chain"] == "square > aten::square > aten::pow"
    assert list(frame["stream"]) == [7, 7, 9]
    bd = P.time_breakdown(frame)
    assert bd["us"].to_dict() == {"kernel": 37.0, "memcpy": 10.0, "idle": 55.0}  # busy: 10-30 and 45-70
    assert math.isclose(P.idle_fraction(frame), 0.55)
    times = P.range_times(events)
    assert times.loc["square"].to_dict() == {"calls": 1, "cpu_us": 35.0, "device_us": 20.0}
    top = P.top_kernels(frame)
    assert list(top["short_name"]) == ["vectorized_elementwise_kernel<pow_tensor_scalar_kernel_impl>",
                                       "vectorized_elementwise_kernel<MulFunctor>", "Memcpy HtoD (Pageable -> Device)"]
    cpu = P.device_activity(events, device="cpu")
    assert dict(zip(cpu["name"], cpu["category"]))["cudaLaunchKernel"] == "runtime"


# ------------------------------------------------------------------ summaries of a handmade frame

def _frame(rows, window=(0.0, 40.0)):
    frame = pd.DataFrame([{"name": n, "category": c, "op": "", "op_chain": "", "start_us": s, "end_us": e,
                           "duration_us": e - s, "stream": st} for n, c, s, e, st in rows], columns=COLUMNS)
    frame.attrs.update(device="cuda", window_us=window)
    return frame


def test_breakdown_counts_overlapping_streams_once():
    frame = _frame([("k1", "kernel", 0, 10, 7), ("m", "memcpy", 10, 14, 7), ("k2", "kernel", 20, 30, 7),
                    ("s", "memset", 30, 31, 7)])
    bd = P.time_breakdown(frame)
    assert bd["us"].to_dict() == {"kernel": 20.0, "memcpy": 4.0, "memset": 1.0, "idle": 15.0}
    assert math.isclose(bd["percent"].sum(), 100.0) and math.isclose(P.idle_fraction(frame), 15 / 40)
    # a copy on a second stream under a kernel: busy time per category adds both, idle counts the union
    overlap = _frame([("k1", "kernel", 0, 10, 7), ("m", "memcpy", 2, 8, 9), ("k2", "kernel", 30, 40, 7)])
    assert P.time_breakdown(overlap)["us"].to_dict() == {"kernel": 20.0, "memcpy": 6.0, "idle": 20.0}
    overlap.attrs["window_us"] = (0.0, 80.0)
    assert math.isclose(P.time_breakdown(overlap).loc["idle", "us"], 60.0)
    with pytest.raises(TypeError):
        P.time_breakdown(pd.DataFrame({"x": [1]}))


def test_top_kernels_groups_and_ranks():
    frame = _frame([("a", "kernel", 0, 1, 7), ("b", "kernel", 1, 5, 7), ("a", "kernel", 5, 6, 7)])
    top = P.top_kernels(frame)
    assert list(top.index) == ["b", "a"] and list(top["calls"]) == [1, 2] and list(top["mean_us"]) == [4.0, 1.0]
    assert list(top["percent"]) == pytest.approx([400 / 6, 200 / 6])
    assert len(P.top_kernels(frame, 1)) == 1
    with pytest.raises(ValueError):
        P.top_kernels(frame, by="stream")
    with pytest.raises(ValueError):
        P.top_kernels(frame, 0)


def test_short_kernel_names():
    assert P.short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, "
                               "float, float, at::native::MulFunctor<float> >, std::array<char*, 3ul> >(int)") \
        == "vectorized_elementwise_kernel<MulFunctor>"
    assert P.short_kernel_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x5_nn_align1>(Params)") \
        == "Kernel2<cutlass_80_simt_sgemm_128x128_8x5_nn_align1>"
    assert P.short_kernel_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert P.short_kernel_name("aten::mm") == "aten::mm"
    assert P.short_kernel_name("void f<false>(int)") == "f"
    assert P.short_kernel_name("x" * 80, width=20) == "x" * 17 + "..."


def test_plot_time_breakdown_draws_each_category_once_per_profile():
    a = _frame([("k", "kernel", 0, 30, 7), ("m", "memcpy", 30, 46, 7)], window=(0.0, 100.0))
    b = _frame([("k", "kernel", 0, 73, 7), ("m", "memcpy", 73, 81, 7)], window=(0.0, 100.0))
    ax = P.plot_time_breakdown({"before": a, "after": b}, title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["after", "before"]  # the first profile on top
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kernel", "memcpy", "idle"]
    widths = [[round(bar.get_width(), 6) for bar in bars] for bars in ax.containers]
    assert widths == [[73.0, 30.0], [8.0, 16.0], [19.0, 54.0]]
    ms = P.plot_time_breakdown({"a": a}, unit="ms")
    assert [round(bars[0].get_width(), 6) for bars in ms.containers] == [0.03, 0.016, 0.054]
    with pytest.raises(ValueError):
        P.plot_time_breakdown({"a": a}, unit="s")
    with pytest.raises(ValueError):
        P.plot_time_breakdown({})


# ----------------------------------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_gpu_kernel_rows_add_up_to_the_profiled_device_total():
    x_host = torch.randn(1 << 16)
    with profile(activities=ACTIVITIES) as prof:
        with P.annotate("copy_and_compute"):
            x = x_host.to("cuda")
            torch.square(x).sum()
            torch.zeros(1 << 16, device="cuda")
            x.zero_()
        model = _model().cuda()
        _step(model, torch.randn(32, 16, device="cuda"))
        torch.cuda.synchronize()
    frame = P.device_activity(prof)
    assert frame.attrs["device"] == "cuda"
    assert {"kernel", "memcpy"} <= set(frame["category"])
    # the profiled total: the table's "Self CUDA time total" (device events, annotations excluded)
    table_total = sum(e.self_device_time_total for e in prof.events()
                      if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False))
    assert math.isclose(frame["duration_us"].sum(), table_total, rel_tol=1e-6)
    assert "copy_and_compute" not in set(frame["name"])
    square = frame[frame["op_chain"].str.contains("aten::square")]
    assert len(square) >= 1 and square["op"].iloc[0] in ("aten::pow", "aten::square")
    assert (frame.loc[frame["category"] == "kernel", "op"] != "").mean() > 0.9
    assert 0 <= P.idle_fraction(frame) < 1
    bd = P.time_breakdown(frame)
    assert math.isclose(bd.drop("idle")["us"].sum() + bd.loc["idle", "us"], bd.attrs["window_us"], rel_tol=1e-6)


@pytest.mark.gpu
def test_gpu_attribution_adds_up_and_never_blames_runtime_calls():
    prof = _profile_small_model(with_stack=True, experimental_config=P.stack_config())
    frame = P.device_activity(prof)
    assert frame.attrs["device"] == "cuda"
    assert not frame["op"].str.match(r"^(cuda|cu[A-Z])").any(), "a kernel was charged to a CUDA runtime call"
    total = frame["duration_us"].sum()
    for by in ("function", "module"):
        table = P.time_by_source(prof, by=by)
        assert math.isclose(table["us"].sum(), total, rel_tol=1e-6, abs_tol=0.02), (by, table)
    assert any(k.endswith("Linear_0") for k in P.time_by_source(prof, by="module").index)
    times = P.range_times(prof, ["step"])
    assert 0 < times.loc["step", "device_us"] <= total + 1e-6
