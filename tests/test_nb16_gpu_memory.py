"""Notebook 16's lesson (lessons/nb16_gpu_memory.py): the formulas equal what the saved-tensor hooks count, the
CPU live-storage count agrees with them, checkpointing keeps what it should, the snapshot reader and the offline
plot work on a stored snapshot in torch's format (tests/data/nb16_snapshot.pickle, written by `synthetic_snapshot`
below) and refuse what is not one, and the budget search finds the boundary and refuses a bad budget."""

import pickle
from pathlib import Path

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

from lessons.nb16_gpu_memory import (CATEGORIES, GPT, GPTConfig, block_saved_bytes, forward_kept_bytes,  # noqa: E402
                                     largest_that_fits, make_batch, param_count, plot_timeline, predict_budget,
                                     read_snapshot, saved_bytes_by_module, saved_bytes_formula, timeline,
                                     train_step, trains_by_formula, with_layers)

DATA = Path(__file__).resolve().parent / "data"
SNAPSHOT = DATA / "nb16_snapshot.pickle"
MiB = 2**20
SMALL = GPTConfig(vocab=96, seq=16, width=32, heads=4, layers=2, batch=2)


@pytest.mark.parametrize("cfg", [SMALL, GPTConfig(vocab=50, seq=12, width=24, heads=3, layers=3, batch=3)])
def test_formula_equals_the_saved_tensor_hooks(cfg):
    torch.manual_seed(0)
    model = GPT(cfg)
    by_module = saved_bytes_by_module(model, *make_batch(cfg))
    assert sum(by_module.values()) == sum(saved_bytes_formula(cfg).values())
    block0 = sum(v for k, v in by_module.items() if k == "blocks.0" or k.startswith("blocks.0."))
    assert block0 == block_saved_bytes(cfg.batch, cfg.seq, cfg.width, cfg.heads)
    assert sum(p.numel() for p in model.parameters()) == param_count(cfg)


def test_live_storages_and_checkpointing_keep_what_they_should():
    torch.manual_seed(0)
    model, (idx, targets) = GPT(SMALL), make_batch(SMALL)
    tokens_d = 4 * SMALL.batch * SMALL.seq * SMALL.width
    kept = {how: forward_kept_bytes(model, idx, targets) for how in (None,)}
    saved = sum(saved_bytes_formula(SMALL).values())
    inputs = 2 * 8 * SMALL.batch * SMALL.seq  # token ids and targets: made before the forward, not by it
    assert kept[None] == saved - inputs + 4  # + the loss, a 4-byte scalar
    model.checkpointing = "full"
    full = forward_kept_bytes(model, idx, targets)
    blocks = SMALL.layers * block_saved_bytes(SMALL.batch, SMALL.seq, SMALL.width, SMALL.heads)
    assert full == kept[None] - blocks + SMALL.layers * tokens_d  # each block keeps its input only
    for how in ("every 2", "selective"):
        model.checkpointing = how
        assert full < forward_kept_bytes(model, idx, targets) < kept[None], how
    with pytest.raises(ValueError, match="checkpointing must be"):
        model.checkpointing = "every 0"


def test_checkpointing_and_accumulation_leave_the_gradients_unchanged():
    grads = {}
    for how, accumulation in ((None, 1), ("full", 1), ("selective", 1), (None, 2)):
        torch.manual_seed(0)
        model = GPT(SMALL, checkpointing=how)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        idx, targets = make_batch(SMALL)
        train_step(model, opt, idx, targets, accumulation=accumulation, set_to_none=False)
        grads[how, accumulation] = torch.cat([p.grad.flatten() for p in model.parameters()])
    for key, g in grads.items():
        torch.testing.assert_close(g, grads[None, 1], rtol=1e-4, atol=1e-6, msg=str(key))


def test_budget_parts_add_up():
    parts = predict_budget(SMALL)
    p = 4 * param_count(SMALL)
    assert parts["parameters"] == parts["gradients"] == p and parts["AdamW moments"] == 2 * p
    assert parts["predicted peak"] == 3 * p + parts["activations"] + parts["backward temporaries"]


# ---- the snapshot: a small one in torch's format, stored in tests/data ---------------------------------------
def synthetic_snapshot() -> tuple[dict, list]:
    """Two training steps in the shape torch.cuda.memory._dump_snapshot writes: a 64 MiB segment holding
    parameters (8 MiB) and AdamW moments (16 MiB) from before the trace; per step two 4 MiB activations and a
    2 MiB forward temporary, 8 MiB of gradients (in a 32 MiB segment cudaMalloc'd during the first backward),
    a 4 MiB optimizer temporary; zero_grad(set_to_none=True) frees the gradients."""
    base, extra = 0x7F0000000000, 0x7F0010000000
    trace, marks, t = [], [], [0]

    def event(action, addr, size):
        t[0] += 10
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t[0],
                      "frames": [{"filename": "train.py", "line": 1, "name": "step"}]})

    def alloc(addr, size):
        event("alloc", addr, size)

    def free(addr, size):
        event("free_requested", addr, size)
        event("free_completed", addr, size)

    act1, act2, tmp = base + 24 * MiB, base + 28 * MiB, base + 32 * MiB
    for step in range(2):
        marks.append(("forward", len(trace)))
        alloc(act1, 4 * MiB)
        alloc(tmp, 2 * MiB)
        free(tmp, 2 * MiB)
        alloc(act2, 4 * MiB)
        marks.append(("backward", len(trace)))
        if step == 0:
            event("segment_alloc", extra, 32 * MiB)
        alloc(extra, 8 * MiB)                       # the gradients
        alloc(tmp, 2 * MiB)
        free(tmp, 2 * MiB)
        free(act2, 4 * MiB)
        free(act1, 4 * MiB)
        marks.append(("optimizer", len(trace)))
        alloc(tmp, 4 * MiB)
        free(tmp, 4 * MiB)
        free(extra, 8 * MiB)                        # zero_grad(set_to_none=True)
    marks.append(("end", len(trace)))

    def block(addr, size, state):
        return {"address": addr, "size": size, "requested_size": size, "state": state, "frames": []}

    segments = [
        {"device": 0, "address": base, "total_size": 64 * MiB, "allocated_size": 24 * MiB, "active_size": 24 * MiB,
         "requested_size": 24 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [block(base, 8 * MiB, "active_allocated"), block(base + 8 * MiB, 16 * MiB, "active_allocated"),
                    block(base + 24 * MiB, 40 * MiB, "inactive")]},
        {"device": 0, "address": extra, "total_size": 32 * MiB, "allocated_size": 0, "active_size": 0,
         "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [], "blocks": [block(extra, 32 * MiB, "inactive")]},
    ]
    snapshot = {"segments": segments, "device_traces": [trace],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False}}
    return snapshot, marks


def test_the_stored_snapshot_is_the_synthetic_one():
    snapshot, _ = synthetic_snapshot()
    assert read_snapshot(SNAPSHOT) == snapshot, "regenerate: pickle.dump(synthetic_snapshot()[0], open(SNAPSHOT, 'wb'))"


def test_timeline_of_the_stored_snapshot_attributes_every_byte():
    _, marks = synthetic_snapshot()
    frame = timeline(read_snapshot(SNAPSHOT), marks)
    before, grads, state, acts, temps = CATEGORIES
    assert (frame[before] == 24 * MiB).all() and (frame[state] == 0).all()
    assert frame[acts].max() == 8 * MiB and frame[grads].max() == 8 * MiB and frame[temps].max() == 4 * MiB
    live = frame[list(CATEGORIES)].sum(axis=1)
    assert live.max() == 24 * MiB + 8 * MiB + 8 * MiB + 2 * MiB  # backward's temporary on top of acts and grads
    assert live.iloc[-1] == 24 * MiB  # everything of the steps freed again
    assert frame["reserved"].iloc[0] == 64 * MiB and frame["reserved"].iloc[-1] == 96 * MiB
    assert (frame[list(CATEGORIES)] >= 0).all().all()
    no_marks = timeline(read_snapshot(SNAPSHOT))  # without phases every allocation of the trace is a temporary
    assert no_marks[temps].max() == 8 * MiB + 8 * MiB + 2 * MiB and (no_marks[acts] == 0).all()


def test_offline_plot_of_the_stored_snapshot(tmp_path):
    _, marks = synthetic_snapshot()
    fig = plot_timeline(timeline(read_snapshot(SNAPSHOT), marks), marks, title="synthetic")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [*CATEGORIES, "reserved (segments)"]
    fig.savefig(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="what timeline"):
        plot_timeline({"event": [0]})


@pytest.mark.parametrize("content, words", [
    (b"not a pickle at all", "does not unpickle"),
    (pickle.dumps([{"address": 0, "total_size": 1, "blocks": []}]), "list of segments only"),
    (pickle.dumps({"segments": []}), "not a memory snapshot: it holds a dict with keys"),
    (pickle.dumps(42), "holds a int"),
    (pickle.dumps({"segments": [], "device_traces": [[{"addr": 1}]]}), "not a dict with 'action' and 'size'"),
])
def test_reader_refuses_what_is_not_a_snapshot(tmp_path, content, words):
    path = tmp_path / "file.pickle"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=words):
        read_snapshot(path)


def test_reader_and_timeline_refuse_a_missing_file_or_device():
    with pytest.raises(FileNotFoundError, match="no such snapshot"):
        read_snapshot(DATA / "missing.pickle")
    with pytest.raises(ValueError, match="device must be in"):
        timeline(read_snapshot(SNAPSHOT), device=3)


# ---- the budget search ---------------------------------------------------------------------------------------
def test_search_finds_the_largest_size_that_fits():
    for boundary in (1, 2, 7, 8, 9, 100):
        tried = []

        def try_size(n, boundary=boundary):
            tried.append(n)
            if n > boundary:
                raise torch.OutOfMemoryError(f"{n} > {boundary}")

        assert largest_that_fits(try_size, limit=64) == min(boundary, 64)
        assert len(tried) <= 14
    assert largest_that_fits(lambda n: (_ for _ in ()).throw(torch.OutOfMemoryError("no"))) == 0


def test_search_lets_other_errors_through_and_refuses_bad_arguments():
    with pytest.raises(RuntimeError, match="not memory"):
        largest_that_fits(lambda n: (_ for _ in ()).throw(RuntimeError("not memory")))
    with pytest.raises(ValueError, match="limit"):
        largest_that_fits(lambda n: None, start=4, limit=2)


def test_formula_search_grows_with_checkpointing_and_refuses_a_negative_budget():
    cfg = GPTConfig(vocab=512, seq=128, width=128, heads=4, layers=1, batch=8)
    budget = 64 * MiB
    plain = largest_that_fits(lambda n: trains_by_formula(with_layers(cfg, n), budget))
    full = largest_that_fits(lambda n: trains_by_formula(with_layers(cfg, n), budget, checkpointing="full"))
    assert 1 <= plain < full
    for bad, error in ((-1, ValueError), (0, ValueError), (1.5, TypeError)):
        with pytest.raises(error, match="budget_bytes"):
            trains_by_formula(cfg, bad)


def test_config_refuses_bad_sizes():
    with pytest.raises(ValueError, match="multiple of heads"):
        GPTConfig(width=30, heads=4)
    with pytest.raises(ValueError, match="GPTConfig.layers"):
        GPTConfig(layers=0)
