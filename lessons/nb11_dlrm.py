"""Notebook 11 (DLRM case study) and its deep dive 11b: Criteo-format data, DLRM, the paper-cut loop, the rungs
past it (data on the device, one fused table, the step in a CUDA graph), the ladder's timing and profiling
protocol, and the fused bias-add + ReLU kernels. Written by hand; the notebooks show it."""

# Criteo-format click data: a synthetic generator, a reader for Parquet and Criteo's TSV day files,
# and a Dataset of whole batches for torch's DataLoader.
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import torch

from course_utils.checks import require_number

LABEL = "label"
DENSE = [f"I{i}" for i in range(1, 14)]    # 13 integer (count) features
SPARSE = [f"C{i}" for i in range(1, 27)]   # 26 categorical features, 32-bit hashed ids
COLUMNS = [LABEL, *DENSE, *SPARSE]
MISSING_ID = -1                            # a missing categorical value, once read into int64
SCHEMA = pa.schema([(LABEL, pa.int8())] + [(c, pa.int32()) for c in DENSE] + [(c, pa.uint32()) for c in SPARSE])


def _zipf_ranks(rng, vocab: int, n: int, exponent: float) -> np.ndarray:
    """n draws from {0, ..., vocab-1} with P(rank k) proportional to 1 / (k + 1) ** exponent."""
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1) ** exponent)
    return np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1]), vocab - 1)


def _vocab_sizes(max_vocab: int) -> list[int]:
    """Vocabulary per categorical feature: from 3 values to max_vocab, spread like Criteo's."""
    spread = np.linspace(0.1, 1.0, len(SPARSE)) ** 1.5
    order = np.random.default_rng(1).permutation(len(SPARSE))
    return [max(3, int(round(max_vocab ** spread[i]))) for i in order]


def _features(rng, n: int, spec: dict) -> tuple[dict, np.ndarray]:
    """n rows of Criteo-like features, and the hidden rule's click logit (without its bias)."""
    columns, logit, effects = {}, np.zeros(n), {}
    for j, name in enumerate(DENSE):                       # heavy-tailed counts, some missing
        values = np.floor(np.expm1(rng.gamma(1.2, spec["dense_scale"][j], n)))
        if name == "I2":                                   # like Criteo's I2: a few small negatives
            values -= rng.binomial(1, 0.05, n) * rng.integers(1, 4, n)
        values = np.minimum(values, 2**31 - 1).astype(np.int32)
        missing = rng.random(n) < spec["dense_missing"][j]
        if j in spec["dense_weights"]:
            logit += spec["dense_weights"][j] * np.where(missing, 0.0, np.log1p(np.maximum(values, 0)))
        columns[name] = pa.array(values, mask=missing)
    for f, name in enumerate(SPARSE):                      # Zipf-skewed ids, some missing
        ranks = _zipf_ranks(rng, spec["vocab"][f], n, spec["zipf"][f])
        missing = rng.random(n) < spec["sparse_missing"][f]
        if f in spec["effects"]:
            effects[f] = np.where(missing, 0.0, spec["effects"][f][ranks])
            logit += effects[f]
        columns[name] = pa.array(spec["ids"][f][ranks], mask=missing)
    a, b = spec["pair"]                                    # one pairwise interaction of two features
    logit += spec["pair_weight"] * effects[a] * effects[b]
    return columns, logit


def _table(rng, n: int, spec: dict) -> pa.Table:
    columns, logit = _features(rng, n, spec)
    labels = (rng.random(n) < 1 / (1 + np.exp(-(logit + spec["bias"])))).astype(np.int8)
    return pa.table({LABEL: pa.array(labels), **columns}, schema=SCHEMA)


def _spec(max_vocab: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    vocab = _vocab_sizes(max_vocab)
    informative = [int(f) for f in rng.permutation(len(SPARSE)) if vocab[f] >= 10][:8]
    return {
        "vocab": vocab,
        "ids": [rng.choice(2**32, size=v, replace=False).astype(np.uint32) for v in vocab],  # rank -> id
        "zipf": rng.uniform(1.05, 1.4, len(SPARSE)),
        "sparse_missing": np.where(rng.random(len(SPARSE)) < 0.3, rng.uniform(0.05, 0.4, len(SPARSE)), 0),
        "dense_scale": rng.uniform(0.4, 1.5, len(DENSE)),
        "dense_missing": np.where(rng.random(len(DENSE)) < 0.6, rng.uniform(0.02, 0.45, len(DENSE)), 0),
        "dense_weights": {0: 0.25, 4: -0.2, 9: 0.15},
        "effects": {f: rng.normal(0.0, 1.0, vocab[f]) for f in informative},
        "pair": informative[:2],
        "pair_weight": 0.6,
        "bias": 0.0,
    }


def generate_criteo_like(folder, n_train: int, n_test: int, *, max_vocab: int = 100_000,
                         positive_rate: float = 0.035, seed: int = 0) -> dict:
    """Write train.parquet, test.parquet, day_sample.tsv and metadata.json (synthetic, Criteo's format).

    Labels follow a hidden rule (three dense features, 8 categorical features with an effect per id,
    one pairwise interaction), its bias set so that about positive_rate of the rows are clicks. A
    folder that already holds data made with the same arguments is reused. Returns the metadata.
    """
    folder = Path(folder)
    n_train, n_test = require_number("n_train", n_train, integer=True), require_number("n_test", n_test, integer=True)
    max_vocab = require_number("max_vocab", max_vocab, integer=True, low=3)
    positive_rate, seed = require_number("positive_rate", positive_rate), require_number("seed", seed, integer=True, low=0)
    if not (0 < positive_rate < 0.5) or min(n_train, n_test) < 1:
        raise ValueError("need 0 < positive_rate < 0.5 and at least one train and one test row")
    params = {"n_train": n_train, "n_test": n_test, "max_vocab": max_vocab, "positive_rate": positive_rate,
              "seed": seed, "version": 1}
    meta_path = folder / "metadata.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params and all((folder / f).exists() for f in meta["files"].values()):
            return meta
    folder.mkdir(parents=True, exist_ok=True)
    spec = _spec(max_vocab, seed)
    _, logit = _features(np.random.default_rng(seed + 1), 50_000, spec)
    lo, hi = -20.0, 5.0                                    # bisect the bias for the wanted click rate
    for _ in range(40):
        spec["bias"] = (lo + hi) / 2
        rate = np.mean(1 / (1 + np.exp(-(logit + spec["bias"]))))
        lo, hi = (spec["bias"], hi) if rate < positive_rate else (lo, spec["bias"])
    files = {"train": "train.parquet", "test": "test.parquet", "tsv_sample": "day_sample.tsv"}
    train = _table(np.random.default_rng(seed + 2), n_train, spec)
    test = _table(np.random.default_rng(seed + 3), n_test, spec)
    pq.write_table(train, folder / files["train"], row_group_size=1 << 20)
    pq.write_table(test, folder / files["test"])
    write_criteo_tsv(test.slice(0, min(n_test, 2000)), folder / files["tsv_sample"])
    distinct = {c: len(pc.unique(pc.drop_null(pa.chunked_array(train[c].chunks + test[c].chunks))))
                for c in SPARSE}
    meta = {"synthetic": True, "params": params, "files": files, "rows": {"train": n_train, "test": n_test},
            "cardinality": distinct, "positive_rate": {"train": pc.mean(train[LABEL]).as_py(),
                                                       "test": pc.mean(test[LABEL]).as_py()}}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def write_criteo_tsv(table: pa.Table, path) -> None:
    """Write rows as a Criteo day file: tab-separated, no header, ids as 8 hex digits, empty if missing."""
    if not isinstance(table, pa.Table) or table.schema != SCHEMA:
        raise TypeError("table must be a pyarrow Table with SCHEMA (from read_criteo or generate_criteo_like)")
    out = {}
    for name in COLUMNS:
        column = table[name].combine_chunks()
        if name in SPARSE:
            hexed = np.char.mod("%08x", column.fill_null(0).to_numpy(zero_copy_only=False))
            column = pa.array(hexed.astype(str), mask=column.is_null().to_numpy(zero_copy_only=False))
        out[name] = pc.cast(column, pa.string())
    lines = pc.binary_join_element_wise(*[pc.fill_null(out[c], "") for c in COLUMNS], "\t")
    Path(path).write_text("\n".join(lines.to_pylist()) + "\n")


_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _ch in enumerate(b"0123456789abcdef"):
    _HEX[_ch] = _i
    _HEX[ord(chr(_ch).upper())] = _i


def _hex_ids(column: pa.ChunkedArray, name: str) -> pa.Array:
    """8-hex-digit strings (nulls kept) -> uint32."""
    strings = pc.cast(column.combine_chunks(), pa.string())
    filled = pc.fill_null(strings, "00000000")
    if len(filled) and not pc.all(pc.equal(pc.binary_length(filled), 8)).as_py():
        raise ValueError(f"column {name}: categorical values must be 8 hex digits (or empty)")
    offsets = np.frombuffer(filled.buffers()[1], dtype=np.int32)[filled.offset:filled.offset + len(filled) + 1]
    raw = np.frombuffer(filled.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    digits = _HEX[raw].reshape(-1, 8)
    if (digits == 255).any():
        raise ValueError(f"column {name}: a categorical value is not hexadecimal")
    values = (digits.astype(np.uint32) << np.arange(28, -1, -4, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)
    return pa.array(values, mask=strings.is_null().to_numpy(zero_copy_only=False))


def read_criteo(path) -> pa.Table:
    """A Criteo-format file as a table with SCHEMA: Parquet (ours or a converted day file) or a TSV day file.

    TSV day files (day_0, day_0.gz, train.txt...) are Criteo's own format: label, 13 integers and 26
    hex ids per line, tab-separated, empty fields missing. Raises ValueError naming missing columns.
    """
    path = Path(path)
    if path.is_file() and path.stat().st_size == 0:
        raise ValueError(f"{path.name} is empty (0 bytes): neither a Parquet file nor a Criteo TSV day file")
    with open(path, "rb") as f:
        is_parquet = f.read(4) == b"PAR1"
    if is_parquet:
        table = pq.read_table(path)
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise ValueError(f"{path.name} lacks Criteo column(s) {missing}; expected {LABEL}, I1..I13, C1..C26")
    else:
        types = {LABEL: pa.int8(), **{c: pa.int32() for c in DENSE}, **{c: pa.string() for c in SPARSE}}
        table = pa_csv.read_csv(path, read_options=pa_csv.ReadOptions(column_names=COLUMNS),
                                parse_options=pa_csv.ParseOptions(delimiter="\t"),
                                convert_options=pa_csv.ConvertOptions(column_types=types, strings_can_be_null=True))
    arrays = []
    for name, field in zip(SCHEMA.names, SCHEMA):
        column = table[name]
        if name in SPARSE and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            arrays.append(_hex_ids(column, name))
        else:
            arrays.append(pc.cast(column, field.type))     # safe cast: out-of-range values raise
    return pa.table(arrays, schema=SCHEMA)


class CriteoDataset(torch.utils.data.Dataset):
    """Rows of a Criteo-format file in memory; an item is a *batch*: ds[[i, j, ...]] -> (dense, ids, label).

    dense: float32 (B, 13), raw counts with NaN where missing (negative values kept: the model decides);
    ids: int64 (B, 26), the 32-bit ids with MISSING_ID where missing; label: float32 (B,).
    """

    def __init__(self, source):
        if not isinstance(source, (pa.Table, str, Path)):
            raise TypeError(f"source must be a path or a pyarrow Table, got {type(source).__name__}")
        table = source if isinstance(source, pa.Table) else read_criteo(source)
        if table.schema != SCHEMA:
            raise ValueError("a table passed directly must have SCHEMA (use read_criteo)")
        labels = table[LABEL].to_numpy()
        if table[LABEL].null_count or not np.isin(labels, (0, 1)).all():
            raise ValueError("labels must be 0 or 1 with none missing")
        self.label = labels.astype(np.float32)
        self.dense = np.empty((table.num_rows, len(DENSE)), dtype=np.float32)
        for j, name in enumerate(DENSE):
            self.dense[:, j] = table[name].to_numpy(zero_copy_only=False)  # nulls become NaN
        self.ids = np.empty((table.num_rows, len(SPARSE)), dtype=np.int64)
        for j, name in enumerate(SPARSE):
            self.ids[:, j] = pc.fill_null(pc.cast(table[name], pa.int64()), MISSING_ID).to_numpy()

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, index):
        index = np.asarray(index)
        return (torch.from_numpy(self.dense[index]), torch.from_numpy(self.ids[index]),
                torch.from_numpy(self.label[index]))


def make_loader(dataset, batch_size: int, *, shuffle: bool = True, seed: int = 0, num_workers: int = 0,
                pin_memory: bool = False) -> torch.utils.data.DataLoader:
    """A DataLoader of whole batches: the sampler yields lists of indices, the dataset slices once per batch.

    With ``shuffle`` the last, partial batch is dropped (every step sees batch_size rows), so the dataset
    must hold at least one whole batch: an epoch of no batches is refused here, not met as a hang later.
    """
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler
    batch_size = require_number("batch_size", batch_size, integer=True, low=1)
    num_workers = require_number("num_workers", num_workers, integer=True, low=0)
    if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise TypeError(f"dataset must be a Dataset with a length (a CriteoDataset), got {type(dataset).__name__}")
    if len(dataset) == 0 or (shuffle and batch_size > len(dataset)):
        raise ValueError(f"batch_size={batch_size:,} but the dataset has {len(dataset):,} rows: an epoch would "
                         "have no batch" + (" (shuffle drops the last partial batch)" if len(dataset) else ""))
    order = (RandomSampler(dataset, generator=torch.Generator().manual_seed(seed)) if shuffle
             else SequentialSampler(dataset))
    return DataLoader(dataset, batch_size=None, sampler=BatchSampler(order, batch_size, drop_last=shuffle),
                      num_workers=num_workers, pin_memory=pin_memory, persistent_workers=num_workers > 0)


import itertools
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import require_number


def dense_transform(x: torch.Tensor) -> torch.Tensor:
    """The model's reading of a raw count: missing (NaN) -> 0, negative -> 0, then log(1 + x)."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a float tensor of raw counts, got {x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    return torch.log1p(torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).clamp_min(0.0))


def hash_rows(ids: torch.Tensor, table_sizes: torch.Tensor) -> torch.Tensor:
    """Table row of every id: ids % size, computed where the ids are (no trip to the host).

    torch.remainder takes the sign of the divisor, so every int64 id, MISSING_ID (-1) included, lands
    in [0, size). ids: int64 (B, F); table_sizes: int64 (F,) of positive sizes.
    """
    if not isinstance(ids, torch.Tensor) or not isinstance(table_sizes, torch.Tensor):
        raise TypeError("ids and table_sizes must be tensors")
    if ids.dtype != torch.int64 or table_sizes.dtype != torch.int64:
        raise TypeError(f"ids and table_sizes must be int64, got {ids.dtype} and {table_sizes.dtype}")
    if table_sizes.dim() != 1 or ids.device != table_sizes.device:
        raise ValueError(f"table_sizes must be 1-D and on ids' device, got {tuple(table_sizes.shape)} on {table_sizes.device}")
    if ids.dim() != 2 or ids.shape[1] != table_sizes.numel():
        raise ValueError(f"ids must be (batch, {table_sizes.numel()}), got {tuple(ids.shape)}")
    return torch.remainder(ids, table_sizes)


class VocabTokenizer:
    """The paper cut: id -> row through a Python dict per feature, one feature at a time.

    Each new id gets the next free row; row 0 is shared by missing ids and by ids that arrive once a
    table is full (or, after freeze(), ids never seen in training). check=True also validates every
    feature with two .item() calls (min and max), as defensive input code often does.
    """

    def __init__(self, table_sizes, *, check: bool = True):
        self.sizes = _table_sizes(table_sizes)
        self.vocab = [dict() for _ in self.sizes]
        self.check, self.frozen = check, False

    def freeze(self) -> "VocabTokenizer":
        self.frozen = True
        return self

    def _row(self, vocab: dict, size: int, key: int) -> int:
        row = vocab.get(key)
        if row is None:
            if key == -1 or self.frozen or len(vocab) >= size - 1:
                return 0
            row = vocab[key] = len(vocab) + 1
        return row

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64:
            raise TypeError(f"ids must be an int64 tensor, got {ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__}")
        if ids.dim() != 2 or ids.shape[1] != len(self.sizes):
            raise ValueError(f"ids must be (batch, {len(self.sizes)}), got {tuple(ids.shape)}")
        for f in range(ids.shape[1] if self.check else 0):      # validation: two host syncs per feature
            if ids[:, f].min().item() < -1 or ids[:, f].max().item() >= 2**32:
                raise ValueError(f"feature {f}: ids must be 32-bit or -1 (missing)")
        columns = []
        for f, (vocab, size) in enumerate(zip(self.vocab, self.sizes)):
            uniq, inverse = torch.unique(ids[:, f], return_inverse=True)   # the device -> host round trip:
            rows = [self._row(vocab, size, key) for key in uniq.tolist()]  # ids to Python, rows back
            columns.append(torch.tensor(rows, dtype=torch.int64, device=ids.device)[inverse])
        return torch.stack(columns, 1)


def _table_sizes(table_sizes) -> list[int]:
    """Table sizes as ints, each >= 1 (NumPy ints too), or a ValueError that names the bad one."""
    if isinstance(table_sizes, (str, bytes)) or not hasattr(table_sizes, "__len__") or len(table_sizes) == 0:
        raise ValueError(f"table_sizes must be a non-empty list of table sizes, got {table_sizes!r}")
    return [require_number(f"table_sizes[{i}]", s, integer=True, low=1) for i, s in enumerate(table_sizes)]


def mlp(sizes, *, last_relu: bool) -> nn.Sequential:
    sizes = [require_number(f"sizes[{i}]", s, integer=True, low=1) for i, s in enumerate(sizes)]
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least an input and an output width, got {sizes}")
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """DLRM: bottom MLP on the dense features, one embedding table per categorical feature, the
    pairwise dot products of all those vectors, and a top MLP that returns the click logit."""

    def __init__(self, table_sizes, *, dim: int = 16, bottom=(64, 32), top=(64, 32), n_dense: int = 13,
                 fused: bool = False):
        super().__init__()
        sizes = _table_sizes(table_sizes)
        dim = require_number("dim", dim, integer=True, low=1)
        self.n_dense = require_number("n_dense", n_dense, integer=True, low=1)
        self.config = {"dim": dim, "bottom": tuple(bottom), "top": tuple(top), "n_dense": n_dense}
        self.fused = bool(fused)
        self.bottom = mlp([n_dense, *bottom, dim], last_relu=True)
        starts = [0, *itertools.accumulate(sizes)][:-1]      # where table f starts in the fused table
        if self.fused:                                        # one table of sum(sizes) rows for all features
            self.table = nn.Embedding(sum(sizes), dim)
            segments = [self.table.weight[s:s + n] for s, n in zip(starts, sizes)]
            self.register_buffer("offsets", torch.tensor(starts, dtype=torch.int64), persistent=False)
        else:                                                 # one table per feature
            self.tables = nn.ModuleList(nn.Embedding(n, dim) for n in sizes)
            segments = [table.weight for table in self.tables]
        for weight, n in zip(segments, sizes):
            nn.init.uniform_(weight, -1 / math.sqrt(n), 1 / math.sqrt(n))
        k = len(sizes) + 1                                   # vectors per sample: dense + one per table
        li, lj = torch.tril_indices(k, k, offset=-1)         # the k(k-1)/2 pairs below the diagonal
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.register_buffer("table_sizes", torch.tensor(sizes, dtype=torch.int64), persistent=False)
        self.top = mlp([dim + k * (k - 1) // 2, *top, 1], last_relu=False)

    def forward(self, dense: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if dense.dim() != 2 or dense.shape[1] != self.n_dense:
            raise ValueError(f"dense must be (batch, {self.n_dense}), got {tuple(dense.shape)}")
        n_tables = self.table_sizes.numel()
        if rows.dtype != torch.int64 or rows.shape != (dense.shape[0], n_tables):
            raise ValueError(f"rows must be int64 (batch, {n_tables}) = {(dense.shape[0], n_tables)}, "
                             f"got {rows.dtype} {tuple(rows.shape)}")
        x = self.bottom(dense_transform(dense))                              # (B, dim)
        if self.fused:                                                       # one lookup for every feature
            t = torch.cat([x.unsqueeze(1), self.table(rows + self.offsets)], dim=1)
        else:                                                                # one lookup per table
            t = torch.stack([x] + [table(rows[:, f]) for f, table in enumerate(self.tables)], dim=1)
        dots = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]          # (B, k(k-1)/2)
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)              # logits; sigmoid -> P(click)


def fuse_tables(model: DLRM) -> DLRM:
    """The same model, weights included, with its tables stored as one: table f's rows start at offsets[f],
    so one lookup (and one gradient) serves every feature instead of one per table."""
    if not isinstance(model, DLRM) or model.fused:
        raise TypeError(f"model must be a DLRM with one table per feature, got {type(model).__name__}")
    fused = DLRM(model.table_sizes.tolist(), fused=True, **model.config).to(model.table_sizes.device)
    with torch.no_grad():
        fused.table.weight.copy_(torch.cat([table.weight for table in model.tables]))
    fused.bottom.load_state_dict(model.bottom.state_dict())
    fused.top.load_state_dict(model.top.state_dict())
    return fused


def rows_loss(model: DLRM, dense, rows, label) -> torch.Tensor:
    """Mean logloss, given table rows (the sigmoid is inside the loss, for numerical stability)."""
    return F.binary_cross_entropy_with_logits(model(dense, rows), label)


def hashed_loss(model: DLRM, dense, ids, label) -> torch.Tensor:
    """Mean logloss from raw ids: the modulus hash runs inside, on the device (and inside torch.compile)."""
    return rows_loss(model, dense, hash_rows(ids, model.table_sizes), label)


def roc_auc(scores, labels) -> float:
    """Area under the ROC curve = P(a random positive scores above a random negative), ties half.

    Mann-Whitney form: (sum of the positives' ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg), with tied
    scores given their average rank.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels).ravel()
    if s.shape != y.shape or not np.isin(y, (0, 1)).all():
        raise ValueError("scores and labels must have the same length, labels 0 or 1")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs at least one positive and one negative")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)                       # 1-based rank of the last member of each tie group
    average_rank = ends - (counts - 1) / 2
    return float((average_rank[inverse][y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auc_standard_error(auc: float, n_pos: int, n_neg: int) -> float:
    """Hanley and McNeil's (1982) standard error of an AUC measured on n_pos positives and n_neg negatives."""
    auc = require_number("auc", auc, low=0, high=1)
    n_pos, n_neg = require_number("n_pos", n_pos, integer=True, low=1), require_number("n_neg", n_neg, integer=True, low=1)
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


@torch.no_grad()
def evaluate(model: DLRM, loader, device, to_rows=None) -> dict:
    """Held-out AUC (with its standard error) and logloss. to_rows maps ids to rows (None: the hash)."""
    model.eval()
    logits, labels = [], []
    for dense, ids, label in loader:
        dense, ids = dense.to(device, non_blocking=True), ids.to(device, non_blocking=True)
        rows = hash_rows(ids, model.table_sizes) if to_rows is None else to_rows(ids)
        logits.append(model(dense, rows).float())
        labels.append(label)
    model.train()
    if not logits:
        raise ValueError("loader gave no batch: nothing to evaluate")
    logit, label = torch.cat(logits).cpu(), torch.cat(labels)
    n_pos = int(label.sum())
    auc = roc_auc(logit.numpy(), label.numpy())
    return {"auc": auc, "auc_se": auc_standard_error(auc, n_pos, len(label) - n_pos),
            "logloss": F.binary_cross_entropy_with_logits(logit, label).item(), "positives": n_pos}


import time
from dataclasses import dataclass

import torch

from course_utils.checks import require_number
from course_utils.profiling import annotate


@dataclass(frozen=True)
class Stage:
    """One rung of the ladder: which paper cuts are still in the training loop."""

    name: str
    tokenizer: str        # "vocab+checks" (dict + .item() checks), "vocab" (dict only) or "hash" (on device)
    sync_logging: bool    # .cpu() of the loss every step
    compiled: bool = False

    def __post_init__(self):
        if self.tokenizer not in ("vocab+checks", "vocab", "hash"):
            raise ValueError(f"Stage.tokenizer must be 'vocab+checks', 'vocab' or 'hash', got {self.tokenizer!r}")


#: The names of the annotate() ranges of a training step.
ANNOTATED = ("data", "tokenize", "forward", "backward", "optimizer", "log", "replay")

STAGES = [
    Stage("0 naive", "vocab+checks", sync_logging=True),
    Stage("1 no .item() checks", "vocab", sync_logging=True),
    Stage("2 modulus hash on device", "hash", sync_logging=True),
    Stage("3 no per-step .cpu()", "hash", sync_logging=False),
    Stage("4 torch.compile", "hash", sync_logging=False, compiled=True),
]


def forever(loader):
    """Batches from a DataLoader, epoch after epoch; an epoch of no batches raises instead of looping forever."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise ValueError("the loader gave no batch in a whole epoch (a batch larger than the dataset?)")


def train_steps(model, optimizer, batches, steps: int, stage: Stage, *, device, tokenizer=None,
                loss_fn=None, losses=None, on_step=None) -> list:
    """Run `steps` training steps of `stage`; returns the list of logged losses (tensors).

    tokenizer: the VocabTokenizer of the "vocab" stages; loss_fn: hashed_loss or its compiled version
    for the "hash" stages. on_step: called after each step (the profiler's step()).
    """
    steps = require_number("steps", steps, integer=True, low=0)
    if not isinstance(stage, Stage):
        raise TypeError(f"stage must be a Stage, got {type(stage).__name__}")
    if stage.tokenizer == "hash" and not callable(loss_fn):
        raise ValueError(f"stage {stage.name!r} hashes ids on the device: pass loss_fn (hashed_loss)")
    if stage.tokenizer != "hash" and not callable(tokenizer):
        raise ValueError(f"stage {stage.name!r} maps ids through a vocabulary: pass tokenizer (a VocabTokenizer)")
    if not hasattr(batches, "__next__"):
        raise TypeError(f"batches must be an iterator of batches (forever(loader)), got {type(batches).__name__}")
    losses = [] if losses is None else losses
    for _ in range(steps):
        with annotate("data"):
            dense, ids, label = next(batches)
            dense, ids, label = (t.to(device, non_blocking=True) for t in (dense, ids, label))
        if stage.tokenizer == "hash":
            with annotate("forward"):
                loss = loss_fn(model, dense, ids, label)
        else:
            with annotate("tokenize"):
                rows = tokenizer(ids)
            with annotate("forward"):
                loss = rows_loss(model, dense, rows, label)
        with annotate("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with annotate("optimizer"):
            optimizer.step()
        with annotate("log"):
            losses.append(loss.detach().cpu() if stage.sync_logging else loss.detach())
        if on_step is not None:
            on_step()
    return losses


# ------------------------------------------------------------------ past the paper cuts: the device rungs

class Vocabulary:
    """The dict tokenizer's exact mapping, built once for a whole data set where its ids are: the k-th smallest
    distinct id of feature f gets row k; missing ids and ids not in the vocabulary share row 0."""

    def __init__(self, ids: torch.Tensor, table_sizes):
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.dim() != 2:
            raise TypeError(f"ids must be an int64 tensor (rows, features), got "
                            f"{ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__}")
        sizes = _table_sizes(table_sizes)
        if ids.shape[1] != len(sizes):
            raise ValueError(f"ids must have {len(sizes)} features (one per table), got {ids.shape[1]}")
        self.keys = [torch.unique(column[column != MISSING_ID]) for column in ids.T]   # sorted distinct ids
        for f, (keys, size) in enumerate(zip(self.keys, sizes)):
            if keys.numel() + 1 > size:
                raise ValueError(f"table_sizes[{f}] = {size} has no room for {keys.numel()} distinct ids + row 0")

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.shape[1:] != (len(self.keys),):
            raise ValueError(f"ids must be int64 (batch, {len(self.keys)})")
        columns = []
        for keys, column in zip(self.keys, ids.T.contiguous()):
            if keys.numel() == 0:
                columns.append(torch.zeros_like(column))
                continue
            at = torch.searchsorted(keys, column).clamp_max(keys.numel() - 1)      # where the id would be
            columns.append(torch.where(keys[at] == column, at + 1, 0))            # found: its row, else row 0
        return torch.stack(columns, 1)


class DeviceBatches:
    """Batches of a data set held on its device: each epoch a permutation made there, each batch a gather
    there, so a step needs no DataLoader, no worker process and no host-to-device copy."""

    def __init__(self, dense: torch.Tensor, rows: torch.Tensor, label: torch.Tensor, batch_size: int, *,
                 seed: int = 0):
        tensors = (dense, rows, label)
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("dense, rows and label must be tensors")
        if len({t.device for t in tensors}) != 1 or len({t.shape[0] for t in tensors}) != 1:
            raise ValueError("dense, rows and label must be on one device with one row per sample each")
        self.batch = require_number("batch_size", batch_size, integer=True, low=1)
        if self.batch > len(label):
            raise ValueError(f"batch_size={self.batch:,} but the data set has {len(label):,} rows")
        self.tensors, self.per_epoch = tensors, len(label) // self.batch
        self.generator = torch.Generator(device=label.device).manual_seed(seed)
        self.i = self.per_epoch                               # the first batch starts an epoch

    def __iter__(self):
        return self

    def __next__(self):
        if self.i == self.per_epoch:                          # a new epoch: a new order, made on the device
            self.order = torch.randperm(len(self.tensors[2]), device=self.tensors[2].device, generator=self.generator)
            self.i = 0
        index = self.order[self.i * self.batch:(self.i + 1) * self.batch]
        self.i += 1
        return tuple(t[index] for t in self.tensors)


def device_step(model, optimizer, loss_fn):
    """One training step on a batch already on the device: forward, backward, optimizer; returns the loss."""
    if not callable(loss_fn) or not hasattr(optimizer, "step"):
        raise TypeError("loss_fn must be callable (rows_loss or its compiled version) and optimizer a torch optimizer")

    def step(dense, rows, label):
        with annotate("forward"):
            loss = loss_fn(model, dense, rows, label)
        with annotate("backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with annotate("optimizer"):
            optimizer.step()
        return loss.detach()
    return step


def graph_step(step, example):
    """`step` captured in a CUDA graph (cu.cuda_graph): each call copies its batch into the graph's fixed
    input buffers and replays every kernel of forward, backward and optimizer with one launch. The optimizer
    must be capturable (Adam(..., capturable=True)); `example` is a batch that sets the buffers' shapes.
    The step returned keeps `step`, and so its model and optimizer, alive: the replays write their memory."""
    from course_utils.timing import cuda_graph
    if not callable(step) or not isinstance(example, (tuple, list)) or \
            not all(isinstance(t, torch.Tensor) for t in example):
        raise TypeError("step must be callable and example a batch (dense, rows, label) of tensors")
    static = [t.clone() for t in example]
    loss = torch.zeros((), device=static[0].device)

    def body():
        loss.copy_(step(*static))
    replay = cuda_graph(body)

    def run_step(dense, rows, label):
        for buffer, t in zip(static, (dense, rows, label)):
            buffer.copy_(t)
        with annotate("replay"):
            replay()
        return loss.clone()                                   # the buffer is overwritten by the next replay
    return run_step


def device_run(step, batches):
    """run(steps, on_step=None) of a device rung: the losses stay on the device, in run.losses."""
    if not callable(step) or not hasattr(batches, "__next__"):
        raise TypeError("step must be callable and batches an iterator of (dense, rows, label)")

    def run(steps, on_step=None):
        for _ in range(require_number("steps", steps, integer=True, low=0)):
            with annotate("data"):
                dense, rows, label = next(batches)
            loss = step(dense, rows, label)
            with annotate("log"):
                run.losses.append(loss)
            if on_step is not None:
                on_step()
    run.losses = []
    return run


def loader_run(stage, model, optimizer, batches, *, device, tokenizer=None, loss_fn=None):
    """run(steps, on_step=None) of a paper-cut stage (train_steps over a DataLoader), losses in run.losses."""
    if not isinstance(stage, Stage):
        raise TypeError(f"stage must be a Stage, got {type(stage).__name__}")

    def run(steps, on_step=None):
        train_steps(model, optimizer, batches, steps, stage, device=device, tokenizer=tokenizer,
                    loss_fn=loss_fn, losses=run.losses, on_step=on_step)
    run.losses = []
    return run


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def steps_per_second(run, steps: int, *, repeats: int = 3, warmup: int = 5) -> tuple[float, list]:
    """The ladder's one timing protocol: `warmup` steps, then `repeats` runs of `steps` steps, each timed by the
    wall clock from a synchronized start to a synchronized end. Returns the median steps/s and every run's."""
    if not callable(run):
        raise TypeError("run must be callable: run(steps, on_step=None) runs that many training steps")
    steps = require_number("steps", steps, integer=True, low=1)
    repeats = require_number("repeats", repeats, integer=True, low=1)
    run(require_number("warmup", warmup, integer=True, low=0))
    _sync()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        _sync()
        rates.append(steps / (time.perf_counter() - start))
    return sorted(rates)[len(rates) // 2], rates


def profile_run(run, steps: int):
    """torch.profiler over `steps` steps of `run` (host ops, and the GPU's kernels, copies and memsets),
    after one step the profiler warms up on. The GPU is drained as the window opens and before it closes,
    so the window holds exactly the GPU work of its steps."""
    from torch.profiler import ProfilerActivity, profile, schedule
    if not callable(run):
        raise TypeError("run must be callable: run(steps, on_step=None) runs that many training steps")
    steps = require_number("steps", steps, integer=True, low=1)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1)) as prof:
        def on_step():
            if prof.step_num in (0, steps):                   # the end of the warm-up step and of the last one
                _sync()
            prof.step()
        run(1 + steps, on_step=on_step)
    return prof


def naive_loop_report(cfg: dict) -> dict:
    """Time and profile stage 0 in this process (deep dive 11b runs it in child processes, with and without
    CUDA_LAUNCH_BLOCKING=1): steps/s and the ops with the most self host time, per step.

    cfg: table "sizes", "model" (DLRM keyword arguments), "batch", "steps" and the "data" file.
    """
    missing = [k for k in ("sizes", "model", "batch", "steps", "data") if not isinstance(cfg, dict) or k not in cfg]
    if missing:
        raise ValueError(f"cfg must be a dict with keys sizes, model, batch, steps and data; missing {missing}")
    from torch.profiler import ProfilerActivity, profile
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(0)
    model = DLRM(cfg["sizes"], **cfg["model"]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokenizer = VocabTokenizer(cfg["sizes"], check=True)
    batches = forever(make_loader(CriteoDataset(cfg["data"]), cfg["batch"], pin_memory=cuda))
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def run(steps, **kwargs):
        train_steps(model, optimizer, batches, steps, STAGES[0], device=device, tokenizer=tokenizer, **kwargs)
        sync()

    run(3)
    start = time.perf_counter()
    run(cfg["steps"])
    steps_per_s = cfg["steps"] / (time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        run(cfg["steps"])
    ops = sorted(((e.key, e.self_cpu_time_total / 1e3 / cfg["steps"], e.count / cfg["steps"])
                  for e in prof.key_averages() if e.key not in ANNOTATED), key=lambda row: -row[1])
    return {"steps_per_s": steps_per_s, "ops": ops[:8]}


import course_utils  # noqa: F401  (first: without a GPU it switches Triton to its interpreter)
import torch
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK: tl.constexpr):
    # x is (rows, n_cols), contiguous, seen as one flat vector; bias has n_cols entries.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(bias_ptr + offsets % n_cols, mask=mask).to(tl.float32)   # column of each element
    y = tl.maximum(x + b, 0.0, propagate_nan=tl.PropagateNan.ALL)   # NaN stays NaN, as in torch.relu
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def _check_bias_relu(x, bias, block) -> int:
    if isinstance(x, torch.Tensor) and isinstance(bias, torch.Tensor) and (
            x.dim() < 1 or bias.dim() != 1 or x.shape[-1] != bias.numel()):
        raise ValueError(f"bias must be 1-D with x.shape[-1] entries: x {tuple(x.shape)}, bias {tuple(bias.shape)}")
    # the kernel reads contiguous copies, so it is their size (numel), not the views' span, that must fit int32
    course_utils.require_tensors(x=x, bias=bias, dtypes=(torch.float32, torch.float16, torch.bfloat16),
                                 max_span=None, differentiable=False)
    return course_utils.require_block_size("block", block)


def bias_relu(x: torch.Tensor, bias: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """relu(x + bias) in one pass over memory: bias broadcast along the last dimension of x."""
    block = _check_bias_relu(x, bias, block)
    x, bias = x.contiguous(), bias.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        bias_relu_kernel[(triton.cdiv(n, block),)](x, bias, out, n, x.shape[-1], BLOCK=block)
    return out


from course_utils.cuda_build import build_extension

BIAS_RELU_CUDA = r"""
#include <cuda_runtime.h>

// max(v, 0) that keeps NaN, as torch.relu does (fmaxf(NaN, 0) is 0).
__device__ __forceinline__ float relu(float v) { return (v > 0.0f || v != v) ? v : 0.0f; }

// One thread per element: out[i] = max(x[i] + bias[i % cols], 0).
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ out, unsigned n, unsigned cols) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = relu(x[i] + bias[i % cols]);
}

// One thread per 4 elements, one 16-byte load and store (needs cols % 4 == 0 and aligned x, out).
__global__ void bias_relu_vec4_kernel(const float4* __restrict__ x, const float* __restrict__ bias,
                                      float4* __restrict__ out, unsigned n4, unsigned cols) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = x[i];
    const float* b = bias + (4 * i) % cols;   // the 4 elements share a row: cols is a multiple of 4
    v.x = relu(v.x + b[0]);
    v.y = relu(v.y + b[1]);
    v.z = relu(v.z + b[2]);
    v.w = relu(v.w + b[3]);
    out[i] = v;
}

cudaError_t launch_bias_relu(const float* x, const float* bias, float* out, unsigned n, unsigned cols,
                             bool vec4, cudaStream_t stream) {
    const unsigned threads = 256;
    if (vec4) {
        unsigned n4 = n / 4;
        bias_relu_vec4_kernel<<<(n4 + threads - 1) / threads, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(x), bias, reinterpret_cast<float4*>(out), n4, cols);
    } else {
        bias_relu_kernel<<<(n + threads - 1) / threads, threads, 0, stream>>>(x, bias, out, n, cols);
    }
    return cudaGetLastError();
}
"""

BIAS_RELU_CPP = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <cstdint>

cudaError_t launch_bias_relu(const float* x, const float* bias, float* out, unsigned n, unsigned cols,
                             bool vec4, cudaStream_t stream);

torch::Tensor bias_relu_cuda(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK_TYPE(x.is_cuda() && bias.device() == x.device(), "bias_relu_cuda: x and bias must be on one CUDA device");
    TORCH_CHECK_TYPE(x.scalar_type() == torch::kFloat && bias.scalar_type() == torch::kFloat,
                     "bias_relu_cuda: x and bias must be float32, got ", x.scalar_type(), " and ", bias.scalar_type());
    TORCH_CHECK_VALUE(x.dim() >= 1 && bias.dim() == 1, "bias_relu_cuda: x must have >= 1 dimension, bias exactly 1");
    TORCH_CHECK_VALUE(x.size(-1) == bias.numel(), "bias_relu_cuda: bias must have x.size(-1) = ", x.size(-1),
                      " entries, got ", bias.numel());
    TORCH_CHECK_VALUE(x.numel() < (int64_t(1) << 31), "bias_relu_cuda: x must have fewer than 2^31 elements");
    const c10::cuda::CUDAGuard guard(x.device());   // launch on x's GPU, on its current stream
    x = x.contiguous();
    bias = bias.contiguous();
    auto out = torch::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    bool vec4 = x.size(-1) % 4 == 0 && reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 == 0 &&
                reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
    cudaError_t err = launch_bias_relu(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
                                       x.numel(), x.size(-1), vec4, c10::cuda::getCurrentCUDAStream());
    TORCH_CHECK(err == cudaSuccess, "bias_relu_cuda: kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""


def build_bias_relu_cuda():
    """Build (or load from the cache) the CUDA extension; needs a CUDA GPU and nvcc."""
    return build_extension("nb11_bias_relu", BIAS_RELU_CPP, BIAS_RELU_CUDA, functions=["bias_relu_cuda"])


# ------------------------------------------------------------------ the deep dives' set-up

def chapter_setup(cache_dir, *, full: bool) -> dict:
    """Notebook 11's data and sizes, for its deep dives: the synthetic data in cache_dir (made if missing),
    the tables (4 rows per distinct id), the model's widths and the batch; full: the GPU sizes, else the CPU's.
    Returns {"data_dir", "meta", "table_sizes", "model", "batch"}."""
    if not isinstance(cache_dir, (str, Path)) or not isinstance(full, bool):
        raise TypeError("cache_dir must be a path and full a bool (True: the GPU sizes)")
    data_dir = Path(cache_dir) / "data" / "nb11_criteo_synthetic"   # where notebook 11 writes them
    meta = generate_criteo_like(data_dir, 2**22 if full else 2**16, 2**18 if full else 2**14,
                                max_vocab=2**20 if full else 2000)
    model = dict(dim=16, bottom=(512, 256, 64), top=(512, 256)) if full else dict(dim=16, bottom=(64, 32), top=(64, 32))
    return {"data_dir": data_dir, "meta": meta, "table_sizes": [4 * meta["cardinality"][c] + 1 for c in SPARSE],
            "model": model, "batch": 4096 if full else 512}


# ------------------------------------------------------------------ deep dive 11c: what torch.compile writes

def compile_logs(cfg: dict) -> None:
    """The child process of deep dive 11c, run under TORCH_LOGS=output_code,recompiles,graph_breaks: compiles
    hashed_loss (part 1), the naive step with the eager backend (part 2: its graph breaks), and hashed_loss at
    three batch sizes with the eager backend (part 3: its recompiles). Each part starts with a line
    '== part N' on stderr, where the logs go. cfg: table "sizes", "model", "batch" and the "data" file."""
    import sys
    missing = [k for k in ("sizes", "model", "batch", "data") if not isinstance(cfg, dict) or k not in cfg]
    if missing:
        raise ValueError(f"cfg must be a dict with keys sizes, model, batch and data; missing {missing}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = DLRM(cfg["sizes"], **cfg["model"]).to(device)
    loader = make_loader(CriteoDataset(cfg["data"]), cfg["batch"])
    dense, ids, label = (t.to(device) for t in next(iter(loader)))
    print("== part 1: torch.compile(hashed_loss), forward and backward", file=sys.stderr)
    torch.compile(hashed_loss)(model, dense, ids, label).backward()
    torch._dynamo.reset()
    print("== part 2: the naive step (dict tokenizer, then the loss), eager backend", file=sys.stderr)
    tokenizer = VocabTokenizer(cfg["sizes"], check=True)
    torch.compile(lambda m, d, i, y: rows_loss(m, d, tokenizer(i), y), backend="eager")(model, dense, ids, label)
    torch._dynamo.reset()
    print("== part 3: hashed_loss at three batch sizes, eager backend", file=sys.stderr)
    fast = torch.compile(hashed_loss, backend="eager")
    for n in (cfg["batch"], cfg["batch"] // 2, cfg["batch"] // 4):
        fast(model, dense[:n], ids[:n], label[:n])


def read_compile_logs(text: str) -> dict:
    """The stderr of compile_logs, parsed: {"parts": {N: lines}, "graphs": [lines of each generated module],
    "kernels": [(graph, kernel name)], "externs": sorted library calls (extern_kernels.mm, ...)}."""
    import re
    if not isinstance(text, str):
        raise TypeError(f"text must be the child's stderr as a str, got {type(text).__name__}")
    prefix = re.compile(r"^[VIWE]\d{4} [\d:.]+ \d+ \S+\] (\[[^\]]*\] )*")
    parts, current = {}, None
    for line in (prefix.sub("", line) for line in text.splitlines()):
        if line.startswith("== part "):
            current = parts.setdefault(int(line.split()[2].rstrip(":")), [])
        elif current is not None:
            current.append(line)
    graphs = []
    for line in parts.get(1, []):
        if line.startswith("Output code:"):
            graphs.append([])
        elif graphs:
            graphs[-1].append(line)
    definition = re.compile(r"^(\w+) = async_compile\.(triton|cpp_pybinding|cpp)\(")
    kernels = [("backward" if any("tangents_1" in line for line in lines) else "forward", m.group(1))
               for lines in graphs for m in map(definition.match, lines) if m]
    externs = sorted({m for lines in graphs for line in lines for m in re.findall(r"extern_kernels\.(\w+)", line)})
    return {"parts": parts, "graphs": graphs, "kernels": kernels, "externs": externs}


if __name__ == "__main__":  # python lessons/nb11_dlrm.py {launch-blocking|compile-logs} '<config as JSON>'
    import sys

    from lessons import nb11_dlrm as _module  # the functions as the package names them (in logs and tracebacks)

    if len(sys.argv) != 3 or sys.argv[1] not in ("launch-blocking", "compile-logs"):
        sys.exit("usage: python lessons/nb11_dlrm.py {launch-blocking|compile-logs} '<config as JSON>'")
    config = json.loads(sys.argv[2])
    if sys.argv[1] == "launch-blocking":
        print(json.dumps(_module.naive_loop_report(config)))
    else:
        _module.compile_logs(config)
