"""Notebook 11's exported helpers (lessons/nb11_dlrm.py): Criteo-format data, reader, dataset, DLRM,
hashing, AUC, the paper-cut loop, and the fused bias-add + ReLU kernels."""

import gc
import json
import weakref

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import course_utils as cu  # first: without a GPU, Triton runs in its interpreter
from lessons import nb11_dlrm as L

INT64 = st.integers(min_value=-2**63, max_value=2**63 - 1)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("criteo")
    meta = L.generate_criteo_like(folder, 6000, 3000, max_vocab=500, seed=3)
    return folder, meta


# ------------------------------------------------------------------------------------------ data

def test_generated_data_has_criteo_schema_and_statistics(data):
    folder, meta = data
    assert meta["synthetic"] is True
    table = L.read_criteo(folder / meta["files"]["train"])
    assert table.schema == L.SCHEMA and table.num_rows == 6000
    assert table.column_names == [L.LABEL, *[f"I{i}" for i in range(1, 14)], *[f"C{i}" for i in range(1, 27)]]
    rate = np.mean(table[L.LABEL].to_numpy())
    assert 0.01 < rate < 0.08, f"a few percent of clicks expected, got {rate:.3f}"
    assert sum(table[c].null_count for c in L.DENSE) > 0 and sum(table[c].null_count for c in L.SPARSE) > 0
    assert (table["I2"].drop_null().to_numpy() < 0).any(), "I2 has a few negative counts, as in Criteo"
    counts = table["I1"].drop_null().to_numpy()
    assert counts.max() > 20 * max(np.median(counts), 1), "counts are heavy-tailed"
    for column in L.SPARSE:  # the metadata's cardinalities are the distinct ids of train + test
        both = pa.chunked_array(table[column].chunks + L.read_criteo(folder / meta["files"]["test"])[column].chunks)
        assert meta["cardinality"][column] == len(np.unique(both.drop_null().to_numpy()))
    big = max(L.SPARSE, key=lambda c: meta["cardinality"][c])
    _, freq = np.unique(table[big].drop_null().to_numpy(), return_counts=True)
    freq = np.sort(freq)[::-1]
    assert freq[: max(1, len(freq) // 10)].sum() > 0.4 * freq.sum(), "ids are Zipf-skewed"


def test_generation_is_reused_and_deterministic(data, tmp_path):
    folder, meta = data
    before = (folder / "train.parquet").stat().st_mtime_ns
    again = L.generate_criteo_like(folder, 6000, 3000, max_vocab=500, seed=3)
    assert again == meta and (folder / "train.parquet").stat().st_mtime_ns == before
    other = L.generate_criteo_like(tmp_path, 6000, 3000, max_vocab=500, seed=3)
    assert other["cardinality"] == meta["cardinality"]
    assert L.read_criteo(tmp_path / "train.parquet").equals(L.read_criteo(folder / "train.parquet"))


def test_tsv_day_file_reads_like_parquet(data, tmp_path):
    folder, meta = data
    from_tsv = L.read_criteo(folder / meta["files"]["tsv_sample"])
    from_parquet = L.read_criteo(folder / meta["files"]["test"]).slice(0, from_tsv.num_rows)
    assert from_tsv.num_rows == 2000 and from_tsv.equals(from_parquet)
    # upper-case hex digits and a gzip-compressed day file, as Criteo ships them
    import gzip
    text = (folder / meta["files"]["tsv_sample"]).read_text()
    day = tmp_path / "day_0.gz"
    with gzip.open(day, "wt") as f:
        f.write(text.upper())
    assert L.read_criteo(day).equals(from_parquet)


def test_missing_parquet_columns_are_named(data, tmp_path):
    folder, meta = data
    table = L.read_criteo(folder / meta["files"]["test"]).drop_columns(["I3", "C26", "label"])
    pq.write_table(table, tmp_path / "broken.parquet")
    with pytest.raises(ValueError, match=r"\['label', 'I3', 'C26'\]"):
        L.read_criteo(tmp_path / "broken.parquet")


def test_bad_categorical_values_are_refused(tmp_path):
    line = "\t".join(["0"] + ["1"] * 13 + ["0123abcd"] * 25 + ["xyz12345"])
    (tmp_path / "bad.tsv").write_text(line + "\n")
    with pytest.raises(ValueError, match="C26.*hexadecimal"):
        L.read_criteo(tmp_path / "bad.tsv")
    (tmp_path / "short.tsv").write_text("\t".join(["0"] + ["1"] * 13 + ["0123abcd"] * 25 + ["abc"]) + "\n")
    with pytest.raises(ValueError, match="C26.*8 hex digits"):
        L.read_criteo(tmp_path / "short.tsv")


def test_dataset_batches_and_dataloader_workers(data):
    folder, meta = data
    ds = L.CriteoDataset(folder / meta["files"]["test"])
    dense, ids, label = ds[[0, 5, 7]]
    assert dense.dtype == torch.float32 and dense.shape == (3, 13)
    assert ids.dtype == torch.int64 and ids.shape == (3, 26) and label.shape == (3,)
    assert ((ids == L.MISSING_ID) | ((ids >= 0) & (ids < 2**32))).all()
    assert torch.isnan(torch.from_numpy(ds.dense)).any(), "missing counts stay NaN for the model to handle"
    serial = list(L.make_loader(ds, 256, seed=4))
    parallel = list(L.make_loader(ds, 256, seed=4, num_workers=2))
    assert len(serial) == 3000 // 256  # drop_last when shuffling
    for a, b in zip(serial, parallel):
        assert all(torch.equal(x.nan_to_num(-7.0), y.nan_to_num(-7.0)) for x, y in zip(a, b))
    ordered = list(L.make_loader(ds, 1000, shuffle=False))
    assert sum(len(batch[2]) for batch in ordered) == 3000
    with pytest.raises(ValueError, match="batch_size"):
        L.make_loader(ds, 0)


def test_dataset_refuses_bad_labels(data):
    folder, meta = data
    table = L.read_criteo(folder / meta["files"]["test"])
    labels = table[L.LABEL].to_numpy().copy()
    labels[3] = 2
    bad = table.set_column(0, L.LABEL, pa.array(labels, type=pa.int8()))
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        L.CriteoDataset(bad)


# ----------------------------------------------------------------------------- model and ids

@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.lists(INT64, min_size=3, max_size=3), min_size=1, max_size=20),
       sizes=st.lists(st.integers(min_value=1, max_value=2**40), min_size=3, max_size=3))
def test_hashed_rows_are_always_in_range(ids, sizes):
    rows = L.hash_rows(torch.tensor(ids, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64))
    assert ((rows >= 0) & (rows < torch.tensor(sizes))).all()


def test_hash_rows_refuses_bad_input():
    with pytest.raises(TypeError, match="int64"):
        L.hash_rows(torch.zeros(2, 3, dtype=torch.int32), torch.ones(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"\(batch, 3\)"):
        L.hash_rows(torch.zeros(2, 4, dtype=torch.int64), torch.ones(3, dtype=torch.int64))


@settings(max_examples=50, deadline=None)
@given(ids=st.lists(st.lists(st.integers(min_value=-1, max_value=2**32 - 1), min_size=2, max_size=2),
                    min_size=1, max_size=40),
       sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=2, max_size=2))
def test_tokenizer_rows_are_always_in_range_and_stable(ids, sizes):
    tok = L.VocabTokenizer(sizes)
    x = torch.tensor(ids, dtype=torch.int64)
    rows = tok(x)
    assert ((rows >= 0) & (rows < torch.tensor(sizes))).all()
    assert (rows[x == L.MISSING_ID] == 0).all(), "missing ids share row 0"
    assert torch.equal(tok(x), rows), "an id keeps its row"


def test_tokenizer_checks_and_freeze():
    tok = L.VocabTokenizer([10, 10])
    with pytest.raises(ValueError, match="feature 1"):
        tok(torch.tensor([[1, 2**32]]))
    assert torch.equal(tok(torch.tensor([[5, 6], [7, 6]])), torch.tensor([[1, 1], [2, 1]]))
    tok.freeze()
    assert torch.equal(tok(torch.tensor([[9, 6]])), torch.tensor([[0, 1]])), "unseen ids -> row 0 once frozen"
    with pytest.raises(ValueError, match="table_sizes"):
        L.VocabTokenizer([0, 3])


def test_dense_transform_handles_missing_and_negative_counts():
    x = torch.tensor([[float("nan"), -3.0, 0.0, 1.0, float("inf"), -float("inf"), 2.0**31]])
    y = L.dense_transform(x)
    assert torch.isfinite(y).all() and (y >= 0).all()
    assert y[0, :4].tolist() == pytest.approx([0.0, 0.0, 0.0, float(np.log(2.0))])
    assert y[0, 6] == pytest.approx(np.log1p(2.0**31))


def test_dlrm_shapes_interaction_and_nan_inputs():
    torch.manual_seed(0)
    model = L.DLRM([5] * 26, dim=4, bottom=(8,), top=(8,))
    assert len(model.li) == 27 * 26 // 2 and model.top[0].in_features == 4 + 351
    dense = torch.full((6, 13), float("nan"))
    dense[:, 1] = -2.0
    ids = torch.randint(-1, 2**32, (6, 26))
    logits = model(dense, L.hash_rows(ids, model.table_sizes))
    assert logits.shape == (6,) and torch.isfinite(logits).all()
    # the interaction is the pairwise dot products of the 27 vectors
    x = model.bottom(L.dense_transform(dense))
    t = torch.stack([x] + [tab(r) for tab, r in zip(model.tables, L.hash_rows(ids, model.table_sizes).T)], 1)
    pairs = [(t[:, i] * t[:, j]).sum(-1) for i in range(27) for j in range(i)]
    assert torch.allclose(torch.bmm(t, t.transpose(1, 2))[:, model.li, model.lj], torch.stack(pairs, 1), atol=1e-6)


@pytest.mark.parametrize("n", [2, 3, 10, 57])
def test_roc_auc_matches_pairwise_count(n):
    rng = np.random.default_rng(n)
    scores = rng.integers(0, 5, n).astype(float)  # many ties
    labels = np.r_[0, 1, rng.integers(0, 2, n - 2)]
    pos, neg = scores[labels == 1], scores[labels == 0]
    expected = np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])
    assert L.roc_auc(scores, labels) == pytest.approx(expected)


def test_roc_auc_edges_and_errors():
    assert L.roc_auc([0.1, 0.9], [0, 1]) == 1.0 and L.roc_auc([0.9, 0.1], [0, 1]) == 0.0
    assert L.roc_auc([0.5] * 4, [0, 1, 0, 1]) == 0.5
    with pytest.raises(ValueError, match="positive and one negative"):
        L.roc_auc([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="labels 0 or 1"):
        L.roc_auc([0.1, 0.2], [0, 2])
    se = L.auc_standard_error(0.8, 100, 1000)
    assert 0 < se < L.auc_standard_error(0.8, 10, 100)


# ------------------------------------------------------------------------- the training loop

def test_stages_train_the_same_model_and_learn(data):
    folder, meta = data
    ds = L.CriteoDataset(folder / meta["files"]["train"])
    sizes = [meta["cardinality"][c] + 1 for c in L.SPARSE]
    losses = {}
    for stage in L.STAGES[2:4]:  # the hash stages differ only in how losses are logged
        torch.manual_seed(0)
        model = L.DLRM(sizes, dim=8, bottom=(16,), top=(16,))
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        batches = L.forever(L.make_loader(ds, 512, seed=1))
        out = L.train_steps(model, opt, batches, 30, stage, device="cpu", loss_fn=L.hashed_loss)
        assert len(out) == 30 and all(isinstance(t, torch.Tensor) for t in out)
        losses[stage.name] = torch.stack(out)
    first, second = losses.values()
    assert torch.equal(first, second), "logging on the host or on the device must not change the training"
    assert first[-10:].mean() < first[:5].mean(), "the loss must go down"


def test_vocab_stages_and_evaluate(data):
    folder, meta = data
    train, test = (L.CriteoDataset(folder / meta["files"][s]) for s in ("train", "test"))
    sizes = [meta["cardinality"][c] + 1 for c in L.SPARSE]
    torch.manual_seed(0)
    model = L.DLRM(sizes, dim=8, bottom=(16,), top=(16,))
    tok = L.VocabTokenizer(sizes, check=True)
    L.train_steps(model, torch.optim.Adam(model.parameters(), lr=1e-2), L.forever(L.make_loader(train, 512)),
                  20, L.STAGES[0], device="cpu", tokenizer=tok)
    result = L.evaluate(model, L.make_loader(test, 1000, shuffle=False), "cpu", tok.freeze())
    assert set(result) == {"auc", "auc_se", "logloss", "positives"}
    assert 0 <= result["auc"] <= 1 and result["positives"] > 0 and result["logloss"] > 0


def test_naive_loop_report_profiles_the_syncing_ops(data):
    folder, meta = data
    cfg = {"sizes": [meta["cardinality"][c] + 1 for c in L.SPARSE], "model": {"dim": 8, "bottom": [16], "top": [16]},
           "batch": 256, "steps": 2, "data": str(folder / meta["files"]["test"])}
    report = L.naive_loop_report(cfg)
    json.dumps(report)  # what the subprocess prints
    assert report["steps_per_s"] > 0 and len(report["ops"]) == 8
    names = [op for op, _, _ in report["ops"]]
    assert not set(names) & set(L.ANNOTATED), "the loop's own ranges are not ops"


# ------------------------------------------------------------------------ bias-add + ReLU kernels

SHAPES = [(1, 1), (3, 5), (7, 1000), (4, 1025), (33, 1023)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_triton_bias_relu_matches_eager(shape, dtype):
    g = torch.Generator().manual_seed(shape[1])
    x = torch.randn(shape, generator=g).to(cu.DEVICE, dtype)
    b = torch.randn(shape[1], generator=g).to(cu.DEVICE, dtype)
    torch.testing.assert_close(L.bias_relu(x, b), torch.relu(x + b))


def test_triton_bias_relu_strided_3d_and_empty():
    x = torch.randn(5, 6, 40, device=cu.DEVICE)[:, :, ::2]
    b = torch.randn(20, device=cu.DEVICE)
    torch.testing.assert_close(L.bias_relu(x, b), torch.relu(x + b))
    assert L.bias_relu(torch.empty(0, 7, device=cu.DEVICE), torch.zeros(7, device=cu.DEVICE)).shape == (0, 7)


def test_bias_relu_refuses_bad_input():
    x = torch.randn(4, 5)
    with pytest.raises(ValueError, match="x.shape\\[-1\\]"):
        L.bias_relu(x, torch.randn(6))
    with pytest.raises(TypeError, match="bias must have a dtype in"):
        L.bias_relu(x, torch.randn(5, dtype=torch.float64))
    with pytest.raises(TypeError, match="bias must be a torch.Tensor"):
        L.bias_relu(x, [0.0] * 5)
    with pytest.raises(ValueError, match="1-D"):
        L.bias_relu(x, torch.randn(1, 5))


def test_cuda_bias_relu_source_compiles():
    from course_utils.cuda_build import ToolchainError, compile_cuda
    try:
        ptx = compile_cuda(L.BIAS_RELU_CUDA, arch="sm_90")
    except ToolchainError:
        pytest.skip("nvcc is not installed here")
    assert ".entry" in ptx and "ld.global.nc.v4.f32" in ptx, "the float4 path must compile to 128-bit loads"
    # the C++ wrapper too, compiled by nvcc as host code with torch's types (compile_cuda adds torch/types.h:
    # what the wrapper uses, without torch/extension.h's pybind11 and Python headers, which take twice as long)
    assert ".entry" in compile_cuda(L.BIAS_RELU_CPP + L.BIAS_RELU_CUDA, arch="sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES + [(129, 4099), (16, 2048)])
def test_cuda_bias_relu_matches_eager(shape):
    ext = L.build_bias_relu_cuda()
    x, b = torch.randn(shape, device="cuda"), torch.randn(shape[1], device="cuda")
    torch.testing.assert_close(ext.bias_relu_cuda(x, b), torch.relu(x + b))
    strided = torch.randn(shape[0], 2 * shape[1], device="cuda")[:, ::2]
    torch.testing.assert_close(ext.bias_relu_cuda(strided, b), torch.relu(strided + b))
    with pytest.raises((ValueError, RuntimeError)):
        ext.bias_relu_cuda(x, torch.randn(shape[1] + 1, device="cuda"))
    with pytest.raises((TypeError, RuntimeError)):
        ext.bias_relu_cuda(x.double(), b.double())


# ------------------------------------------------------------------ the rungs past the paper cuts

@settings(max_examples=50, deadline=None)
@given(ids=st.lists(st.lists(st.integers(min_value=-1, max_value=40), min_size=2, max_size=2), min_size=1, max_size=30),
       queries=st.lists(st.lists(st.integers(min_value=-1, max_value=60), min_size=2, max_size=2), min_size=1, max_size=30))
def test_vocabulary_is_the_exact_mapping_of_the_training_ids(ids, queries):
    train = torch.tensor(ids, dtype=torch.int64)
    vocab = L.Vocabulary(train, [train.shape[0] + 1] * 2)
    rows = vocab(torch.tensor(queries, dtype=torch.int64))
    for f in range(2):
        known = sorted({i for i in train[:, f].tolist() if i != L.MISSING_ID})
        expected = [known.index(q) + 1 if q in known else 0 for q in torch.tensor(queries)[:, f].tolist()]
        assert rows[:, f].tolist() == expected, "distinct ids get distinct rows from 1; missing and unseen ids row 0"


def test_fused_table_computes_the_same_logits_and_gradients():
    torch.manual_seed(0)
    model = L.DLRM([7, 3, 12], dim=4, bottom=(8,), top=(8,), n_dense=2)
    fused = L.fuse_tables(model)
    assert fused.fused and fused.table.weight.shape == (22, 4) and fused.offsets.tolist() == [0, 7, 10]
    dense, rows, label = torch.randn(9, 2), torch.stack([torch.randint(0, n, (9,)) for n in (7, 3, 12)], 1), \
        torch.randint(0, 2, (9,)).float()
    L.rows_loss(model, dense, rows, label).backward()
    L.rows_loss(fused, dense, rows, label).backward()
    torch.testing.assert_close(fused(dense, rows), model(dense, rows), rtol=0, atol=0)
    torch.testing.assert_close(fused.table.weight.grad, torch.cat([t.weight.grad for t in model.tables]))
    torch.testing.assert_close(fused.top[0].weight.grad, model.top[0].weight.grad)


def test_device_batches_cover_an_epoch_once_and_reshuffle():
    label = torch.arange(12.0)
    batches = L.DeviceBatches(torch.randn(12, 2), torch.zeros(12, 3, dtype=torch.long), label, 4, seed=5)
    first = torch.cat([next(batches)[2] for _ in range(3)])
    second = torch.cat([next(batches)[2] for _ in range(3)])
    assert sorted(first.tolist()) == sorted(second.tolist()) == label.tolist()
    assert not torch.equal(first, second), "each epoch has its own order"
    dense, rows, lab = next(L.DeviceBatches(torch.arange(8.0)[:, None], torch.arange(8)[:, None], torch.arange(8.0), 3))
    assert torch.equal(dense[:, 0], lab) and torch.equal(rows[:, 0].float(), lab), "the gather keeps rows together"


def test_device_run_trains_like_the_paper_cut_loop(data):
    folder, meta = data
    ds = L.CriteoDataset(folder / meta["files"]["train"])
    sizes = [meta["cardinality"][c] + 1 for c in L.SPARSE]
    ids = torch.from_numpy(ds.ids)
    vocab = L.Vocabulary(ids, sizes)
    torch.manual_seed(0)
    model = L.fuse_tables(L.DLRM(sizes, dim=8, bottom=(16,), top=(16,)))
    run = L.device_run(L.device_step(model, torch.optim.Adam(model.parameters(), lr=1e-2), L.rows_loss),
                       L.DeviceBatches(torch.from_numpy(ds.dense), vocab(ids), torch.from_numpy(ds.label), 512))
    rate, rates = L.steps_per_second(run, 3, repeats=3, warmup=1)
    assert len(rates) == 3 and min(rates) <= rate <= max(rates)
    assert len(run.losses) == 1 + 3 * 3, "warm-up and timed steps all ran and logged their loss"
    run(20)
    losses = torch.stack(run.losses)
    assert losses[-8:].mean() < losses[:4].mean(), "the loss must go down"



@pytest.mark.gpu
def test_graph_rung_after_the_compiled_rungs_runs_and_learns(data):
    # The notebook's order in one process: the compiled loss with one table per feature (rung 5), with one fused
    # table (rung 6), then the fused step captured in a CUDA graph (rung 7), each rung a fresh model, optimizer
    # and torch.compile(rows_loss). In the notebook the graph's replays hit a device-side assert (an index out
    # of bounds in the fused table's gather): the replays wrote weights and Adam's state into memory that had
    # been freed and handed to the batches, because nothing but the graph (which holds addresses) used them.
    folder, meta = data
    ds = L.CriteoDataset(folder / meta["files"]["train"])
    sizes = [4 * meta["cardinality"][c] + 1 for c in L.SPARSE]  # the notebook's HEADROOM: 4 rows per id
    ids = torch.from_numpy(ds.ids).cuda()
    vocab = L.Vocabulary(ids, sizes)
    tensors = (torch.from_numpy(ds.dense).cuda(), vocab(ids), torch.from_numpy(ds.label).cuda())
    # Rung 8 follows, a graph again with a batch four times larger: compiled with dynamic=False (the notebook's
    # setting), each batch size gets a graph of its own instead of one with a symbolic batch dimension.
    losses = {}
    for fused, graph, batch in ((False, False, 512), (True, False, 512), (True, True, 512), (True, True, 2048)):
        torch.manual_seed(0)
        model = L.DLRM(sizes, dim=8, bottom=(16,), top=(16,)).cuda()
        model = L.fuse_tables(model) if fused else model
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, fused=True, capturable=graph)
        batches = L.DeviceBatches(*tensors, batch, seed=0)
        step = L.device_step(model, opt, torch.compile(L.rows_loss, dynamic=False))
        run = L.device_run(L.graph_step(step, next(batches)) if graph else step, batches)
        # The notebook keeps only `run` (device_rung(...)[0]). A replay writes the weights and Adam's state at
        # the addresses they had at capture: were they freed, new tensors (the next batches) would get that
        # memory and the replays would scribble over them (the device-side assert seen in the notebook).
        alive = weakref.ref(model)
        del model, opt, step
        gc.collect()
        assert alive() is not None, "the graph's step let its model be freed"
        L.profile_run(run, 3)  # as the notebook's measure() does first: torch.profiler over the replays too
        run(30)
        torch.cuda.synchronize()
        losses[fused, graph, batch] = torch.stack(run.losses).float().cpu()
    for key, curve in losses.items():
        assert torch.isfinite(curve).all() and curve[-10:].mean() < curve[:5].mean(), f"rung {key} did not learn"


def test_profile_run_profiles_exactly_its_steps():
    calls = []

    def run(steps, on_step=None):
        for _ in range(steps):
            calls.append(torch.ones(4) * 2)
            if on_step is not None:
                on_step()
    prof = L.profile_run(run, 3)
    assert len(calls) == 4, "one warm-up step, then the profiled ones"
    assert sum(e.name == "aten::mul" for e in prof.events()) == 3
    assert sum(e.name.startswith("ProfilerStep") for e in prof.events()) == 3, "one step range per profiled step"


def test_read_compile_logs_finds_modules_kernels_and_parts():
    text = "\n".join(["V1126 10:00:00.000 123 torch/_inductor/graph.py:99] [0/0] [__output_code] noise",
                      "== part 1: compile", "Output code:", "k_fwd = async_compile.triton('k_fwd', '''",
                      "buf = extern_kernels.mm(a, b)", "Output code:", "def call(args): tangents_1 = args",
                      "k_bwd = async_compile.cpp_pybinding(['float*'], '''", "x = extern_kernels.bmm(a, b)",
                      "== part 2: breaks", "Graph break in user code at lessons/x.py:3", "== part 3: recompiles"])
    logs = L.read_compile_logs(text)
    assert logs["kernels"] == [("forward", "k_fwd"), ("backward", "k_bwd")]
    assert logs["externs"] == ["bmm", "mm"] and len(logs["graphs"]) == 2
    assert logs["parts"][2] == ["Graph break in user code at lessons/x.py:3"] and logs["parts"][3] == []
