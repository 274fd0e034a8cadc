"""course_utils.profiling: ranges, monkey-patching that is undone, and profile -> DataFrame."""

import math
import types

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.autograd import DeviceType
from torch.profiler import profile

from course_utils import profiling as P


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _step(model: torch.nn.Module, x: torch.Tensor) -> None:
    model(x).square().mean().backward()


def _keys(prof) -> set[str]:
    return {e.key for e in prof.key_averages()}


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_annotate_context_manager_and_decorator():
    @P.annotate("decorated")
    def f(x):
        return x * 2

    with profile(activities=P.profiler_activities()) as prof:
        with P.annotate("outer"):
            f(torch.ones(3))
            f(torch.ones(3))
    keys = _keys(prof)
    assert {"outer", "decorated"} <= keys
    assert next(e for e in prof.key_averages() if e.key == "decorated").count == 2
    assert f.__name__ == "f"


def test_range_times_counts_calls_and_host_time():
    with profile(activities=P.profiler_activities()) as prof:
        for _ in range(2):
            with P.annotate("outer"):
                with P.annotate("inner"):
                    torch.ones(64).square().sum()
    times = P.range_times(prof)
    assert list(times.index) == ["outer", "inner"] and list(times["calls"]) == [2, 2]
    assert (times.loc["outer", "cpu_us"] >= times.loc["inner", "cpu_us"] > 0)
    assert list(P.range_times(prof, ["inner"]).index) == ["inner"]


@pytest.mark.parametrize("bad, error", [(3, TypeError), ("", ValueError), ("  ", ValueError)])
def test_annotate_rejects_bad_names(bad, error):
    with pytest.raises(error):
        P.annotate(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_annotate_nvtx_needs_cuda():
    with pytest.raises(ValueError, match="CUDA"):
        P.annotate("x", nvtx=True)


def test_annotate_calls_on_a_model_is_undone():
    model = _model()
    x = torch.randn(8, 16)
    before = model(x).detach()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with profile(activities=P.profiler_activities()) as prof:
        with P.annotate_calls(model, prefix="net") as names:
            assert all("forward" in m.__dict__ for m in model.modules())
            _step(model, x)
    assert names == ["net (Sequential)", "net.0 (Linear)", "net.1 (ReLU)", "net.2 (Linear)"]
    assert set(names) <= _keys(prof)
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
            raise RuntimeError("boom")
    assert model[0].__dict__["forward"] is custom
    assert "forward" not in model[2].__dict__ and "forward" not in model.__dict__


def test_annotate_calls_on_python_module_functions():
    originals = (F.linear, F.relu)
    model = _model()
    with profile(activities=P.profiler_activities()) as prof:
        with P.annotate_calls(F, ["linear", "relu"], prefix="F"):
            assert F.linear is not originals[0]
            _step(model, torch.randn(4, 16))
    assert (F.linear, F.relu) == originals
    averages = {e.key: e.count for e in prof.key_averages()}
    assert averages["F.linear"] == 2 and averages["F.relu"] == 1


def test_annotate_calls_on_a_class_restores_staticmethods():
    class Tools:
        @staticmethod
        def double(x):
            return 2 * x

    raw = Tools.__dict__["double"]
    with P.annotate_calls(Tools, ["double"]):
        assert Tools.double(3) == 6
    assert Tools.__dict__["double"] is raw and Tools().double(2) == 4
    obj = types.SimpleNamespace(f=lambda: 1)
    with P.annotate_calls(obj, ["f"]):
        assert obj.f() == 1


def test_annotate_calls_validates():
    model = _model()
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
        with P.annotate_calls(F, ["not_a_function"]):
            pass
    assert not any("forward" in m.__dict__ for m in model.modules())


def _profile_small_model(**kwargs):
    model = _model()
    x = torch.randn(32, 16, device="cuda" if torch.cuda.is_available() else "cpu")
    model.to(x.device)
    _step(model, x)
    with profile(activities=P.profiler_activities(), **kwargs) as prof:
        with P.annotate("step"):
            _step(model, x)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return prof


def test_cpu_frame_rows_add_up_to_the_profiled_op_time():
    prof = _profile_small_model()
    frame = P.device_activity(prof, device="cpu")
    assert list(frame.columns) == P.FRAME_COLUMNS and len(frame) > 5
    assert "cpu_op" in set(frame["category"]) <= {"cpu_op", "runtime"}  # runtime: CUDA API calls on a GPU
    ops = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.name.startswith("aten::")]
    assert math.isclose(frame.loc[frame["name"].str.startswith("aten::"), "duration_us"].sum(),
                        sum(e.self_cpu_time_total for e in ops), rel_tol=1e-9)
    assert "step" not in set(frame["name"])  # annotations are not ops
    # forward ops run inside the range (on a GPU, backward ops run on autograd's own thread)
    assert frame["op_chain"].str.startswith("step > ").any()
    breakdown = P.time_breakdown(frame)
    start, end = frame.attrs["window_us"]
    # one thread: busy time (the union of op intervals) + idle == the window
    assert breakdown.loc["idle", "us"] >= 0
    assert math.isclose(P._union_us(frame) + breakdown.loc["idle", "us"], end - start, rel_tol=1e-9)
    assert 0 <= P.idle_fraction(frame) < 1
    top = P.top_kernels(frame, 3)
    assert len(top) == 3 and top["total_us"].is_monotonic_decreasing


def test_time_by_source_charges_every_op():
    prof = _profile_small_model(with_stack=True, experimental_config=P.stack_config())
    frame = P.device_activity(prof)
    total = frame["duration_us"].sum()
    by_function = P.time_by_source(prof, by="function")
    assert math.isclose(by_function["us"].sum(), total, rel_tol=1e-6, abs_tol=0.02)
    assert any("_step" in k for k in by_function.index)
    by_module = P.time_by_source(prof, by="module")
    assert math.isclose(by_module["us"].sum(), total, rel_tol=1e-6, abs_tol=0.02)
    assert any(k.endswith("Linear_0") for k in by_module.index)
    with pytest.raises(ValueError, match="with_stack"):
        P.time_by_source(_profile_small_model())


def test_breakdown_and_plots_from_a_handmade_frame():
    rows = [("k1", "kernel", 0, 10), ("m", "memcpy", 10, 14), ("k2", "kernel", 20, 30), ("s", "memset", 30, 31)]
    frame = pd.DataFrame([{"name": n, "category": c, "op": "", "op_chain": "", "start_us": s, "end_us": e,
                           "duration_us": e - s, "stream": 7} for n, c, s, e in rows], columns=P.FRAME_COLUMNS)
    frame.attrs.update(device="cuda", window_us=(0.0, 40.0))
    bd = P.time_breakdown(frame)
    assert bd["us"].to_dict() == {"kernel": 20.0, "memcpy": 4.0, "memset": 1.0, "idle": 15.0}
    assert math.isclose(bd["percent"].sum(), 100.0)
    assert math.isclose(P.idle_fraction(frame), 15 / 40)
    assert P.short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, "
                               "float, float, at::native::MulFunctor<float> >, std::array<char*, 3ul> >(int)") \
        == "vectorized_elementwise_kernel<MulFunctor>"
    assert P.short_kernel_name("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x5_nn_align1>(Params)") \
        == "Kernel2<cutlass_80_simt_sgemm_128x128_8x5_nn_align1>"
    assert P.short_kernel_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD (Pageable -> Device)"
    assert P.short_kernel_name("aten::mm") == "aten::mm"
    assert P.short_kernel_name("void f<false>(int)") == "f"
    P.plot_time_breakdown({"a": frame, "b": frame})
    P.plot_top_kernels(P.top_kernels(frame))
    with pytest.raises(TypeError):
        P.time_breakdown(pd.DataFrame({"x": [1]}))


@pytest.mark.gpu
def test_gpu_kernel_rows_add_up_to_the_profiled_device_total():
    x_host = torch.randn(1 << 16)
    with profile(activities=P.profiler_activities()) as prof:
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
