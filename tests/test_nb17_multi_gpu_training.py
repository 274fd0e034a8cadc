"""Notebook 17's lesson (lessons/nb17_multi_gpu_training.py and its torchrun scripts): the bus-bandwidth formula,
the bucket rule against DDP's own, the trace reader, the launcher's error report, and, under torchrun with 2 gloo
processes, data parallelism written from scratch giving the gradients of one process."""

import random

import pytest
import torch
import torch.distributed as dist

from course_utils.scripts import ScriptRun
from exercises.nb17 import _ddp_buckets
from lessons import nb17_multi_gpu_training as L


def test_bus_factor_and_bandwidth_follow_nccl_tests():
    assert L.bus_factor("all_reduce", 2) == 1.0 and L.bus_factor("all_reduce", 8) == 1.75
    assert L.bus_factor("all_gather", 4) == L.bus_factor("reduce_scatter", 4) == 0.75
    assert L.bus_factor("all_reduce", 1) == 0.0
    # 1 GiB all-reduced in 4 ms on 8 ranks: 268 GB/s algorithm bandwidth, x 1.75
    assert L.bus_bandwidth("all_reduce", 2**30, 0.004, 8) == pytest.approx(2**30 / 0.004 * 1.75 / 1e9)
    with pytest.raises(ValueError, match="op must be one of"):
        L.bus_factor("broadcast", 2)
    with pytest.raises(ValueError, match="seconds must be > 0"):
        L.bus_bandwidth("all_reduce", 10, 0.0, 2)


@pytest.mark.parametrize("seed", range(20))
def test_bucket_rule_is_ddps(seed):
    """torch's own assignment (what DDP calls, given the parameters in reverse) is the rule of assign_buckets, and,
    with a smaller first bucket, of exercise 17.1's reference."""
    rng = random.Random(seed)
    sizes = [4 * rng.randint(0, 3000) for _ in range(rng.randint(1, 25))]
    cap, first = 4 * rng.randint(1, 4000), 4 * rng.randint(1, 4000)
    tensors = [torch.empty(s // 4) for s in sizes][::-1]
    order = list(range(len(sizes)))[::-1]
    ddp, _ = dist._compute_bucket_assignment_by_size(tensors, [cap], [False] * len(sizes), order)
    assert L.assign_buckets(sizes, cap) == [list(b) for b in ddp]
    ddp, _ = dist._compute_bucket_assignment_by_size(tensors, [first, cap], [False] * len(sizes), order)
    assert _ddp_buckets(sizes, cap, first) == [list(b) for b in ddp]


def test_model_size_formula_and_the_150m_default():
    tiny = L.GPTConfig(vocab=50, seq=12, width=16, heads=2, layers=3, batch=2)
    assert tiny.params() == sum(p.numel() for p in L.GPT(tiny).parameters())
    assert round(L.GPTConfig().params() / 1e6) == 150
    loss = L.GPT(tiny)(*L.make_batch(tiny, seed=3))
    assert 3 < loss.item() < 5  # about log(50) at initialization


def test_overlap_splits_nccl_time_into_hidden_and_exposed():
    events = [  # compute 0-100 and 150-200 us; NCCL 50-170 (hidden 50-100 and 150-170: 70 of 120)
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "ts": 0, "dur": 100, "tid": 7},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 150, "dur": 50, "tid": 7},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 50, "dur": 120, "tid": 9},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500},
        {"ph": "i", "cat": "kernel", "name": "marker", "ts": 0}]
    kernels = L.kernels_from_trace({"traceEvents": events})
    assert [k["name"][:6] for k in kernels] == ["ampere", "Memcpy", "ncclDe"]
    got = L.overlap(kernels, steps=2)
    assert got["nccl ms"] == pytest.approx(0.060) and got["compute ms"] == pytest.approx(0.075)
    assert got["exposed nccl ms"] == pytest.approx(0.025) and got["hidden share"] == pytest.approx(70 / 120)
    assert got["idle ms"] == 0.0  # 0-200 us: always something running
    gaps = [{"name": "gemm", "start": 0.0, "dur": 100.0}, {"name": "ncclDevKernel_AllGather", "start": 400.0, "dur": 50.0},
            {"name": "gemm", "start": 420.0, "dur": 100.0}]  # nothing runs from 100 to 400 us: the host was late
    assert L.overlap(gaps, steps=3)["idle ms"] == pytest.approx(0.300 / 3)
    with pytest.raises(TypeError, match="trace must be the dict of a Chrome trace"):
        L.kernels_from_trace([])


def test_launcher_reports_each_ranks_error_and_a_timeout():
    out = "\n".join(["[rank1]: Traceback (most recent call last):", "[rank1]: ValueError: rank 1 broke",
                     "[rank0]: RuntimeError: Connection closed by peer", "Root Cause (first observed failure):",
                     "[0]:", "  time      : now", "  host      : localhost", "  rank      : 1 (local_rank: 1)"])
    message = L._failure(ScriptRun(1, "", out))
    assert message.splitlines() == ["failed (exit code 1):", "root cause: rank 1 (local_rank: 1)",
                                    "[rank0]: RuntimeError: Connection closed by peer", "[rank1]: ValueError: rank 1 broke"]
    assert L._failure(ScriptRun(None, "step 3\n", "(killed after 5 s)")).startswith("timed out")
    assert L.torchrun_command("lessons.nb17_train", "--x", nproc=2)[3:] == [
        "--standalone", "--nproc-per-node=2", "-m", "lessons.nb17_train", "--x"]
    with pytest.raises(ValueError, match="module must be one of the chapter's scripts"):
        L.torchrun_command("os", nproc=2)


def test_from_scratch_data_parallelism_gives_one_process_gradients(tmp_path):
    """2 gloo processes under torchrun: every way's gradients equal those of one process that saw both batches; the
    same launch times one way at the batch --batch asks for (the notebooks pass GPU_BATCH on GPUs)."""
    result = L.torchrun("lessons.nb17_train", "--batch", "3", "--variants", "1 GPU (no communication)", nproc=2,
                        out=tmp_path / "check.json", timeout=240, cpu=True)
    assert result["world"] == 2 and result["backend"] == "gloo"
    assert result["config"]["batch"] == 3 and [r["variant"] for r in result["rows"]] == ["1 GPU (no communication)"]
    assert result["rows"][0]["step ms"] > 0
    errors = result["gradient check"]
    assert set(errors) == {"no all-reduce (a control: each rank its own gradient)", "(a) all-reduce each gradient",
                           "(b) one flat all-reduce", "(c) buckets from hooks", "torch DDP"}
    for name, error in errors.items():
        assert (error > 1e-2) if name.startswith("no all-reduce") else (error < 1e-5), (name, error)


def test_train_script_times_only_the_ways_asked_for(capsys):
    """nb17_train's --variants and --skip-check (deep dive 17b runs four ways on each world size, no gradient check);
    by default every way and the check, as notebook 17 runs it."""
    from lessons.nb17_train import PROFILED, VARIANTS, parse_args

    default = parse_args(["--out", "t.json"])
    assert default.variants == list(VARIANTS) and not default.skip_check and not default.check_only
    assert default.batch is None and parse_args(["--out", "t.json", "--batch", "24"]).batch == 24
    chosen = parse_args(["--out", "t.json", "--skip-check", "--variants", "FSDP2", "1 GPU (no communication)",
                         "FSDP2"])
    assert chosen.variants == ["1 GPU (no communication)", "FSDP2"] and chosen.skip_check  # VARIANTS' order, once
    # 17b reads the overlap of these four from their traces: each must be profiled
    assert {"1 GPU (no communication)", "torch DDP, default (25 MB buckets)", "torch DDP, one bucket",
            "FSDP2"} <= set(PROFILED) <= set(VARIANTS)
    for bad, words in ((["--variants", "torch DDP"], "invalid choice: 'torch DDP'"),
                       (["--check-only", "--skip-check"], "exclude each other"),
                       (["--batch", "0"], "--batch must be >= 1, got 0"), (["--batch", "2.5"], "invalid int value")):
        with pytest.raises(SystemExit):
            parse_args(["--out", "t.json", *bad])
        assert words in capsys.readouterr().err
