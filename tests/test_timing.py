import gc
import statistics
import time
import weakref

import pytest
import torch

import course_utils as cu
from course_utils.tuning import autotune, cpu_do_bench


def test_cpu_benchmark_measures_a_sleep():
    result = cu.benchmark(lambda: time.sleep(0.002), device="cpu", warmup_ms=0, rep_ms=20)
    assert result.timer == "cpu-perf-counter"
    assert 1.9 <= result.median_ms < 20
    assert result.q20_ms <= result.median_ms <= result.q80_ms
    assert result.gbps is None and result.tflops is None


def test_throughput_follows_from_bytes_and_flops():
    r = cu.benchmark(lambda: time.sleep(0.001), bytes_moved=10**9, flops=10**12, device="cpu", rep_ms=10)
    assert r.gbps == pytest.approx(1e9 / (r.median_ms / 1e3) / 1e9)
    assert r.tflops == pytest.approx(1.0 / (r.median_ms / 1e3))
    assert "GB/s" in str(r) and "TFLOP/s" in str(r)


def test_percent_of_peak_uses_given_peaks():
    peaks = cu.DevicePeaks("fake", bandwidth_gbps=1.0, fp32_tflops=1.0, tf32_tflops=None, fp16_tflops=2.0)
    r = cu.benchmark(lambda: time.sleep(0.001), bytes_moved=10**6, flops=10**9, device="cpu",
                     rep_ms=10, peaks=peaks, dtype=torch.float16)
    assert r.pct_peak_bandwidth == pytest.approx(100 * r.gbps / 1.0)
    assert r.pct_peak_flops == pytest.approx(100 * r.tflops / 2.0)


@pytest.mark.parametrize("kwargs, error", [
    ({"fn": 3}, TypeError),
    ({"bytes_moved": -1}, ValueError),
    ({"flops": -5}, ValueError),
    ({"bytes_moved": "10"}, TypeError),
    ({"rep_ms": 0}, ValueError),
    ({"device": "tpu"}, ValueError),
    ({"peaks": "fast"}, TypeError),
])
def test_benchmark_rejects_bad_input(kwargs, error):
    fn = kwargs.pop("fn", lambda: None)
    with pytest.raises(error):
        cu.benchmark(fn, device=kwargs.pop("device", "cpu"), **kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given when there is no GPU")
def test_benchmark_on_cuda_without_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        cu.benchmark(lambda: None, device="cuda")


def test_cpu_do_bench_returns_one_value_per_quantile():
    assert len(cpu_do_bench(lambda: None, quantiles=(0.5, 0.2, 0.8))) == 3
    assert isinstance(cpu_do_bench(lambda: None), float)


def test_autotune_picks_a_config_and_computes_correctly():
    import triton
    import triton.language as tl

    @autotune([triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])
    @triton.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

    x = torch.randn(300, device=cu.DEVICE)
    out = torch.empty_like(x)
    scale[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, out, 300)
    assert torch.equal(out, 2 * x)
    assert scale.best_config.kwargs["BLOCK"] in (64, 128)
    with pytest.raises(ValueError):
        autotune([], key=["n"])


# The course's timer must agree with Triton's on the reference GPU: same recipe, same numbers.
@pytest.mark.gpu
@pytest.mark.parametrize("op", ["copy", "add", "softmax", "matmul"])
def test_benchmark_agrees_with_do_bench(op):
    import triton.testing

    if op == "copy":
        a = torch.empty(2**28, device="cuda")
        b = torch.empty_like(a)
        fn = lambda: b.copy_(a)  # noqa: E731
    elif op == "add":
        a, b = torch.randn(2**28, device="cuda"), torch.randn(2**28, device="cuda")
        fn = lambda: a + b  # noqa: E731
    elif op == "softmax":
        a = torch.randn(4096, 8192, device="cuda")
        fn = lambda: torch.softmax(a, dim=-1)  # noqa: E731
    else:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
        fn = lambda: a @ a  # noqa: E731
    # Interleaved, alternating which goes first: a long matmul run heats the GPU and lowers its
    # clock, so whichever timer always ran second would look slower.
    ours, theirs = [], []
    for round_ in range(4):
        pair = [lambda: ours.append(cu.benchmark(fn).median_ms),
                lambda: theirs.append(triton.testing.do_bench(fn, return_mode="median"))]
        for measure in (pair if round_ % 2 == 0 else pair[::-1]):
            measure()
    ours, theirs = statistics.median(ours), statistics.median(theirs)
    ratio = ours / theirs
    print(f"AGREEMENT {op}: course_utils {ours:.4f} ms, do_bench {theirs:.4f} ms, ratio {ratio:.4f}")
    assert abs(ratio - 1) < 0.05


def test_benchmark_interleaved_times_every_function_each_round():
    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    medians = cu.benchmark_interleaved(fns, rounds=3, device="cpu", warmup_ms=0, rep_ms=1e-3, max_reps=1)
    assert set(medians) == {"a", "b"} and all(m >= 0 for m in medians.values())
    # each round runs a, then b (1 estimate call + 1 timed call each): the pattern alternates
    assert calls == ["a", "a", "b", "b"] * 3
    with pytest.raises(ValueError):
        cu.benchmark_interleaved(fns, rounds=0)
    with pytest.raises(TypeError):
        cu.benchmark_interleaved({})


def test_every_mode_times_on_a_cpu_and_a_bad_mode_is_refused():
    for mode in ("gpu", "wall", "graph"):
        r = cu.benchmark(lambda: time.sleep(0.001), device="cpu", rep_ms=5, mode=mode)
        assert r.timer == "cpu-perf-counter" and r.median_ms >= 0.9
    with pytest.raises(ValueError, match="mode must be one of"):
        cu.benchmark(lambda: None, device="cpu", mode="fast")


def test_cuda_graph_needs_a_gpu_and_a_function():
    with pytest.raises(TypeError, match="fn must be callable"):
        cu.cuda_graph(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs a CUDA GPU"):
            cu.cuda_graph(lambda: None)


def test_cuda_graph_returns_a_replay_that_holds_the_captured_function(monkeypatch):
    # The same contract on a CPU, with torch.cuda's graph API stood in for: warm-up calls, one capture, and a
    # replay that keeps the function (and what its closure holds) referenced after the caller drops it.
    calls = []

    class FakeGraph:
        def replay(self):
            calls.append("replay")

    class FakeContext:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class FakeStream:
        def wait_stream(self, other):
            pass

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: FakeStream())
    monkeypatch.setattr(torch.cuda, "stream", FakeContext)
    monkeypatch.setattr(torch.cuda, "graph", FakeContext)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)

    def adds_one_to(tensor):
        return lambda: (tensor.add_(1), calls.append("fn"))

    weights = torch.zeros(3)
    replay = cu.cuda_graph(adds_one_to(weights), warmup=2)
    alive = weakref.ref(weights)
    del weights
    gc.collect()
    assert alive() is not None, "the replay let the captured function's tensor be freed"
    replay()
    assert calls == ["fn", "fn", "fn", "replay"] and alive().tolist() == [3.0, 3.0, 3.0]  # 2 warm-ups + capture


# A graph holds addresses, not tensors. A caller that keeps only the replay (notebook 11's graph rung keeps no
# model) must not let the captured tensors be freed: a new tensor would get their memory and each replay would
# overwrite it.
@pytest.mark.gpu
def test_a_cuda_graph_replay_keeps_the_tensors_it_writes_alive():
    def adds_one_to(tensor):  # its own closure: `del counter` below leaves the tensor in it
        return lambda: tensor.add_(1)

    counter = torch.zeros(1 << 20, device="cuda")
    replay = cu.cuda_graph(adds_one_to(counter), warmup=1)  # the warm-up adds 1, the capture nothing
    alive = weakref.ref(counter)
    del counter
    gc.collect()
    assert alive() is not None, "the replay let the tensor it writes be freed"
    newcomer = torch.full((1 << 20,), -7.0, device="cuda")  # the allocator's first choice, were it freed
    replay()
    replay()
    torch.cuda.synchronize()
    assert (newcomer == -7).all() and (alive() == 3).all()


# A host-bound small call: its per-call wall time is its host time, which the GPU-time modes do not see; a
# GPU-bound large call: the three modes agree. What notebook 01 teaches, checked on the GPU.
@pytest.mark.gpu
def test_wall_mode_sees_host_time_and_graph_mode_the_gpu_time_alone():
    small = torch.randn(1024, device="cuda")

    def host_bound():
        y = small
        for _ in range(20):  # 20 tiny kernels, each a few microseconds of host launch work
            y = y * 1.0001
        return y

    wall, gpu, graph = (cu.benchmark(host_bound, mode=m, flush_l2=False).median_ms for m in ("wall", "gpu", "graph"))
    print(f"small: wall {wall:.4f}, gpu {gpu:.4f}, graph {graph:.4f} ms")
    assert graph < wall and graph <= gpu * 1.05
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    times = {m: cu.benchmark(lambda: big @ big, mode=m).median_ms for m in ("wall", "gpu", "graph")}
    print("large:", times)
    assert max(times.values()) / min(times.values()) < 1.10
