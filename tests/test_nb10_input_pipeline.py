"""Notebook 10's helpers (lessons/nb10_input_pipeline.py): the JPEG folder generator, the checked
datasets and collate functions, the device-side preparation and the prefetcher, and failure handling
(corrupt files, dead and stuck workers) without hangs or leaked worker processes."""

import io
import os
import time

import numpy as np
import psutil
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF
from PIL import Image
from torch.utils.data import DataLoader

from lessons.nb10_input_pipeline import (MEAN, STD, BadImageError, CheckedImageFolder, DevicePrefetcher,
                                         FaultyDataset, FolderSpec, JpegBytesFolder, Rung, Skipped, check_jpeg_bytes,
                                         collate_encoded, collate_images, decode_jpegs, device_batches, kernel_classes,
                                         loader_rate, make_image_folder, make_loader, make_model, measure,
                                         normalize_on_device, overlap_share, prepare_batch, resized_crops, run_steps,
                                         shutdown_workers, synthetic_image, train_transform)

SPEC = FolderSpec(n_classes=2, per_class=4, min_side=40, max_side=64, seed=3)
TIMEOUT = 60  # seconds: a test that would hang fails instead


def _children():
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _drain(loader):
    """Iterate to the end and stop the workers right away, also after an error (not when GC gets to it)."""
    it = iter(loader)
    try:
        for batch in it:
            yield batch
    finally:
        shutdown_workers(it)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("jpegs") / SPEC.folder_name()
    make_image_folder(root, SPEC)
    return root


@pytest.fixture
def broken(tmp_path, folder):
    """Six good files, a truncated one, random bytes, an empty file."""
    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
    good = sorted(folder.glob("class_*/*.jpg"))[:6]
    for i, src in enumerate(good):
        (tmp_path / ("a" if i % 2 else "b") / f"good_{i}.jpg").write_bytes(src.read_bytes())
    data = good[0].read_bytes()
    (tmp_path / "a" / "truncated.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "b" / "random.jpg").write_bytes(np.random.default_rng(0).bytes(3000))
    (tmp_path / "b" / "empty.jpg").write_bytes(b"")
    return tmp_path


BAD_NAMES = {"truncated.jpg", "random.jpg", "empty.jpg"}


# ------------------------------------------------------------------------------------ the generator

def test_folder_spec_rejects_bad_values():
    with pytest.raises(TypeError):
        FolderSpec(n_classes=2.0, per_class=3)
    with pytest.raises(ValueError):
        FolderSpec(n_classes=0, per_class=3)
    with pytest.raises(ValueError):
        FolderSpec(n_classes=2, per_class=3, min_side=100, max_side=50)
    with pytest.raises(ValueError):
        FolderSpec(n_classes=2, per_class=3, quality=100)


def test_generator_is_reproducible_and_reuses_its_folder(tmp_path):
    first = make_image_folder(tmp_path / "one", SPEC)
    assert first["written"] == SPEC.n_images == first["images"]
    second = make_image_folder(tmp_path / "two", SPEC, workers=2)  # other processes, same bytes
    files_one = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").glob("class_*/*.jpg"))
    files_two = sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").glob("class_*/*.jpg"))
    assert files_one == files_two and len(files_one) == SPEC.n_images
    assert all((tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes() for f in files_one)
    assert second["bytes"] == first["bytes"]

    again = make_image_folder(tmp_path / "one", SPEC)
    assert again["written"] == 0 and again["bytes"] == first["bytes"]
    lost = tmp_path / "one" / files_one[3]
    original = lost.read_bytes()
    lost.unlink()
    repaired = make_image_folder(tmp_path / "one", SPEC)
    assert repaired["written"] == 1 and lost.read_bytes() == original
    with pytest.raises(ValueError, match="another spec"):
        make_image_folder(tmp_path / "one", FolderSpec(n_classes=2, per_class=4, min_side=40, max_side=64, seed=4))


def test_images_have_varied_sizes_in_range_and_class_folders(folder):
    sizes = {Image.open(p).size for p in folder.glob("class_*/*.jpg")}
    assert len(sizes) > 1
    assert all(SPEC.min_side <= s <= SPEC.max_side for size in sizes for s in size)
    dataset = CheckedImageFolder(folder)
    assert dataset.classes == ["class_000", "class_001"] and len(dataset) == SPEC.n_images
    assert synthetic_image(SPEC, 1, 2).tobytes() == synthetic_image(SPEC, 1, 2).tobytes()


# ------------------------------------------------------------------------------------ datasets

def test_train_transform_outputs_and_arguments():
    image = synthetic_image(SPEC, 0, 0)
    x = train_transform(16)(image)
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32
    u = train_transform(16, output="uint8")(image)
    assert u.shape == (3, 16, 16) and u.dtype == torch.uint8
    with pytest.raises(ValueError):
        train_transform(16, output="half")
    with pytest.raises(ValueError):
        train_transform(4)


def test_corrupt_files_are_skipped_and_reported_through_workers(broken):
    dataset = CheckedImageFolder(broken, train_transform(16))
    loader = DataLoader(dataset, batch_size=3, num_workers=2, collate_fn=collate_images, timeout=TIMEOUT)
    images, skipped = 0, []
    for x, y, bad in _drain(loader):
        assert len(x) == len(y)
        images += len(y)
        skipped += bad
    assert images == 6
    assert {os.path.basename(s.path) for s in skipped} == BAD_NAMES
    assert all(isinstance(s, Skipped) and s.reason for s in skipped)


def test_corrupt_file_raises_with_its_path(broken):
    dataset = CheckedImageFolder(broken, train_transform(16), on_error="raise")
    index = [os.path.basename(p) for p, _ in dataset.samples].index("truncated.jpg")
    with pytest.raises(BadImageError, match="truncated.jpg"):
        dataset[index]
    loader = DataLoader(dataset, batch_size=3, num_workers=2, collate_fn=collate_images, timeout=TIMEOUT)
    with pytest.raises(BadImageError, match=r"(truncated|random|empty)\.jpg"):
        for _ in _drain(loader):
            pass
    with pytest.raises(ValueError):
        CheckedImageFolder(broken, on_error="ignore")


def test_jpeg_bytes_folder_checks_markers_and_draws_boxes(broken):
    dataset = JpegBytesFolder(broken)
    samples = [dataset[i] for i in range(len(dataset))]
    bad = [s for s in samples if isinstance(s, Skipped)]
    assert {os.path.basename(s.path) for s in bad} == BAD_NAMES
    for data, (top, left, h, w), flip, label, path in (s for s in samples if not isinstance(s, Skipped)):
        assert bytes(data.numpy()) == open(path, "rb").read()
        width, height = Image.open(path).size
        assert 0 <= top and 0 <= left and top + h <= height and left + w <= width and h > 0 and w > 0
        assert isinstance(flip, bool) and label in (0, 1)
    with pytest.raises(ValueError, match="truncated"):
        check_jpeg_bytes(samples[0][0].numpy().tobytes()[:-10])
    with pytest.raises(ValueError, match="not a JPEG"):
        check_jpeg_bytes(b"\x89PNG....")


def test_collate_encoded_keeps_every_file_recoverable(broken):
    dataset = JpegBytesFolder(broken)
    batch = [dataset[i] for i in range(len(dataset))]
    flat, lengths, boxes, flips, labels, paths, skipped = collate_encoded(batch)
    parts = torch.split(flat, lengths.tolist())
    assert len(parts) == len(paths) == len(boxes) == len(flips) == len(labels) == 6 and len(skipped) == 3
    assert all(bytes(p.numpy()) == open(path, "rb").read() for p, path in zip(parts, paths))
    empty = collate_encoded([s for s in batch if isinstance(s, Skipped)])
    assert empty[0].numel() == 0 and len(empty[-1]) == 3


# ------------------------------------------------------------------------------------ device side

def test_normalize_on_device_matches_the_float_transforms(folder):
    path = sorted(folder.glob("class_*/*.jpg"))[0]
    image = Image.open(path).convert("RGB")
    torch.manual_seed(7)
    expected = train_transform(24)(image)
    torch.manual_seed(7)
    pixels = train_transform(24, output="uint8")(image)
    got = normalize_on_device(pixels[None])[0]
    assert got.dtype == torch.float32 and torch.allclose(got, expected, rtol=1.3e-6, atol=1e-5)
    last = normalize_on_device(pixels[None], channels_last=True)
    assert last.is_contiguous(memory_format=torch.channels_last) and torch.equal(last, got[None])
    assert torch.equal(normalize_on_device(pixels[None].float()), normalize_on_device(pixels[None]))


def test_normalize_on_device_rejects_bad_input():
    with pytest.raises(TypeError):
        normalize_on_device([1, 2, 3])
    with pytest.raises(TypeError):
        normalize_on_device(torch.zeros(1, 3, 4, 4, dtype=torch.int32))
    with pytest.raises(ValueError):
        normalize_on_device(torch.zeros(3, 4, 4, dtype=torch.uint8))


def _pil_crop(path, box, flip, size):
    pil = TF.resized_crop(Image.open(path).convert("RGB"), *box, [size, size], antialias=True)
    return TF.pil_to_tensor(TF.horizontal_flip(pil) if flip else pil).float()


def test_decode_and_resized_crops_match_pil(folder):
    paths = sorted(folder.glob("class_*/*.jpg"))[:4]
    encoded = [torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8) for p in paths]
    images, failed = decode_jpegs(encoded, "cpu")
    assert not failed and all(im.dtype == torch.uint8 and im.shape[0] == 3 for im in images)
    boxes = [(1, 2, 30, 25), (0, 0, images[1].shape[1], images[1].shape[2]), (5, 3, 12, 20), (10, 10, 20, 20)]
    flips = [False, True, True, False]
    out = resized_crops(images, boxes, flips, 24)
    assert out.shape == (4, 3, 24, 24) and out.dtype == torch.float32
    expected = torch.stack([_pil_crop(p, b, f, 24) for p, b, f in zip(paths, boxes, flips)])
    assert (out - expected).abs().max() <= 1.0  # PyTorch's antialiased bilinear resize vs PIL's: within a grey level
    unflipped = resized_crops(images[1:2], boxes[1:2], [False], 24)
    assert torch.equal(unflipped.flip(-1), out[1:2])


def test_decode_and_crop_report_bad_input(folder):
    good = torch.frombuffer(bytearray(sorted(folder.glob("class_*/*.jpg"))[0].read_bytes()), dtype=torch.uint8)
    images, failed = decode_jpegs([good, torch.zeros(100, dtype=torch.uint8)], "cpu")
    assert images[0] is not None and images[1] is None and failed[0][0] == 1
    with pytest.raises(ValueError, match="does not fit"):
        resized_crops(images[:1], [(0, 0, 10_000, 5)], [False], 8)
    with pytest.raises(ValueError):
        resized_crops(images[:1], [], [], 8)
    assert resized_crops([], [], [], 8).shape == (0, 3, 8, 8)


# ------------------------------------------------------------------------------------ prefetcher

def _loader(folder, num_workers):
    dataset = CheckedImageFolder(folder, train_transform(16))
    return DataLoader(dataset, batch_size=2, num_workers=num_workers, collate_fn=collate_images, timeout=TIMEOUT,
                      generator=torch.Generator().manual_seed(0), shuffle=True)


@pytest.mark.parametrize("thread", [False, True])
def test_prefetcher_yields_the_loaders_batches_in_order(folder, thread):
    before = _children()
    prepare = lambda batch: (batch[0] * 2, batch[1], batch[2])  # noqa: E731
    direct = [prepare(b) for b in _drain(_loader(folder, 2))]
    fetched = list(DevicePrefetcher(_loader(folder, 2), prepare, "cpu", thread=thread))
    assert len(fetched) == len(direct) == SPEC.n_images // 2
    for (x, y, _), (dx, dy, _) in zip(fetched, direct):
        assert torch.equal(x, dx) and torch.equal(y, dy)
    time.sleep(0.2)
    assert _children() <= before, "the prefetcher left worker processes behind"


def test_prefetcher_stopped_early_shuts_down_workers_and_thread(folder):
    before = _children()
    for thread in (False, True):
        batches = iter(DevicePrefetcher(_loader(folder, 2), lambda b: b, "cpu", thread=thread))
        next(batches)
        batches.close()
    time.sleep(0.2)
    assert _children() <= before
    assert not any(t.name == "DevicePrefetcher" and t.is_alive() for t in __import__("threading").enumerate())


def test_prefetcher_thread_passes_errors_on(broken):
    loader = DataLoader(CheckedImageFolder(broken, train_transform(16), on_error="raise"), batch_size=9,
                        num_workers=1, collate_fn=collate_images, timeout=TIMEOUT)
    with pytest.raises(BadImageError):
        list(DevicePrefetcher(loader, lambda b: b, "cpu", thread=True))
    with pytest.raises(ValueError):
        DevicePrefetcher(loader, lambda b: b, "cpu", depth=0)
    with pytest.raises(TypeError):
        DevicePrefetcher(loader, None, "cpu")


# ------------------------------------------------------------------------------------ workers failing

def test_dead_worker_is_reported_not_waited_for(folder):
    before = _children()
    dataset = FaultyDataset(CheckedImageFolder(folder, train_transform(16)), index=3, fault="die")
    loader = DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate_images, timeout=TIMEOUT)
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="worker"):
        for _ in _drain(loader):
            pass
    assert time.perf_counter() - start < TIMEOUT / 2
    time.sleep(0.2)
    assert _children() <= before


def test_stuck_worker_times_out(folder):
    dataset = FaultyDataset(CheckedImageFolder(folder, train_transform(16)), index=3, fault="stall", seconds=2.0)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate_images, timeout=1)
    with pytest.raises(RuntimeError, match="timed out"):
        for _ in _drain(loader):
            pass


def test_faulty_dataset_never_misbehaves_in_the_main_process(folder):
    dataset = FaultyDataset(CheckedImageFolder(folder), index=0, fault="die")
    with pytest.raises(RuntimeError, match="only inside a DataLoader worker"):
        dataset[0]
    with pytest.raises(ValueError):
        FaultyDataset(dataset, 0, fault="explode")


def _source_pixels(path):
    """The uint8 3 x H x W image that was encoded into ``path`` (the generator is deterministic)."""
    label, index = int(path.parent.name.split("_")[1]), int(path.stem.split("_")[1])
    return torch.from_numpy(np.array(synthetic_image(SPEC, label, index))).permute(2, 0, 1)


def _psnr(decoded, source):
    mse = (decoded.float() - source.float()).pow(2).mean().item()
    return float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)


def test_decoded_jpeg_psnr_against_its_source_is_that_of_jpeg_quantization(folder):
    """The reference side of the GPU test: libjpeg-turbo's PSNR against the source is finite and JPEG-like, and a
    wrong decode (channels swapped, flipped) falls far below it, far beyond the 3 dB the GPU test allows."""
    for path in sorted(folder.glob("class_*/*.jpg"))[:3]:
        encoded = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
        (decoded,), _ = decode_jpegs([encoded], "cpu")
        source = _source_pixels(path)
        good = _psnr(decoded, source)
        assert 25 < good < 60, good
        assert _psnr(decoded.flip(0), source) < good - 3 and _psnr(decoded.flip(-1), source) < good - 3


# ------------------------------------------------------------------------------------ the ladder's measurement

def test_rung_validates_its_fields():
    assert Rung("r", num_workers=np.int64(2)).num_workers == 2 and Rung("r", num_workers=3).warmup_steps == 9
    with pytest.raises(ValueError, match="Rung.num_workers must be an int >= 0"):
        Rung("r", num_workers=-1)
    with pytest.raises(TypeError, match="Rung.pinned must be True or False"):
        Rung("r", pinned="yes")
    with pytest.raises(ValueError, match="Rung.device_work must be"):
        Rung("r", device_work="gpu")


@pytest.mark.parametrize("device_work", ["none", "normalize", "decode"])
def test_make_loader_and_prepare_batch_give_model_ready_batches(folder, device_work):
    rung = Rung("r", num_workers=0, fast_model=True, device_work=device_work)
    loader = make_loader(rung, folder, crop=16, batch_size=3, n_batches=2)
    batches = list(device_batches(loader, lambda b: prepare_batch(rung, b, "cpu", 16)))
    assert len(batches) == 2
    for x, y, skipped in batches:
        assert x.shape == (3, 3, 16, 16) and x.dtype == torch.float32 and y.shape == (3,) and not skipped
        assert x.is_contiguous(memory_format=torch.channels_last)
        assert -3 < x.mean() < 3  # normalized, whichever path made it
    with pytest.raises(TypeError, match="batch must be what this rung's collate function returns"):
        prepare_batch(rung, (1, 2), "cpu", 16)


def test_loader_rate_and_measure_on_the_cpu(folder, tmp_path):
    rung = Rung("r", num_workers=0)
    assert loader_rate(make_loader(rung, folder, crop=16, batch_size=2, n_batches=3), warmup=1, steps=2) > 0
    model, opt = make_model("resnet18", 2, "cpu")
    source = device_batches(make_loader(rung, folder, crop=16, batch_size=2, n_batches=6),
                            lambda b: prepare_batch(rung, b, "cpu", 16))
    row, frame = measure("t", source, model, opt, warmup=1, steps=2, profile_steps=1, bf16=False, trace_dir=tmp_path,
                         stages=["layer1"])
    assert row["images_per_s"] > 0 and row["trace"].exists() and 0 < row["busy_pct"] <= 100.5
    assert row["host_step_ms"] > 0 and row["data_ms"] >= 0 and len(frame)
    assert not hasattr(model.layer1, "forward") or "forward" not in vars(model.layer1)  # annotate_calls undone
    with pytest.raises(ValueError, match="name must be a file-name-safe str"):
        measure("a/b", source, model, opt, warmup=0, steps=1, profile_steps=1, bf16=False)


def test_kernel_classes_and_overlap_share():
    import pandas as pd

    frame = pd.DataFrame({"name": ["void nchwToNhwcKernel<float>", "sm90_xmma_fprop_implicit_gemm_bf16",
                                   "cudnn::bn_fw_tr_1C11_kernel_NCHW", "multi_tensor_apply_kernel", "mystery",
                                   "Memcpy HtoD (Pinned -> Device)"],
                          "category": ["kernel"] * 5 + ["memcpy"], "duration_us": [100.0, 300, 50, 20, 10, 999],
                          "start_us": [0.0, 100, 400, 450, 470, 50], "end_us": [100.0, 400, 450, 470, 480, 150]})
    per_step = kernel_classes(frame, 2)
    assert per_step["layout transposes"] == 0.05 and per_step["convolutions, matmuls"] == 0.15
    assert per_step["batch norm"] == 0.025 and per_step["optimizer"] == 0.01 and per_step["other"] == 0.005
    kernels, copies = frame[frame["category"] == "kernel"], frame[frame["category"] == "memcpy"]
    assert overlap_share(kernels, copies) == 1.0
    assert overlap_share(kernels.iloc[2:], copies) == 0.0 and np.isnan(overlap_share(kernels, copies.iloc[:0]))
    with pytest.raises(TypeError, match="frame must be the DataFrame"):
        kernel_classes([1, 2], 1)
    with pytest.raises(TypeError, match="copies must be a DataFrame"):
        overlap_share(kernels, None)


def test_run_steps_labels_and_counts(folder):
    model, opt = make_model("resnet18", 2, "cpu")
    x, y = torch.randn(2, 3, 16, 16), torch.tensor([0, 1])
    batches = iter([(x, y, []), (x[:0], y[:0], [Skipped("p", "r")])])
    images, loss, skipped = run_steps(batches, model, opt, 2, bf16=False)
    assert images == 2 and torch.isfinite(loss) and [s.path for s in skipped] == ["p"]
    with pytest.raises(TypeError, match="batches must be an iterator"):
        run_steps([(x, y, [])], model, opt, 1, bf16=False)
    with pytest.raises(ValueError, match="arch must name a torchvision model"):
        make_model("resnet_big", 2, "cpu")


# ------------------------------------------------------------------------------------ on the GPU

@pytest.mark.gpu
def test_nvjpeg_decode_and_crops_on_cuda_match_the_cpu_twin(folder):
    paths = sorted(folder.glob("class_*/*.jpg"))[:4]
    encoded = [torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8) for p in paths]
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        on_gpu, failed = decode_jpegs(encoded + [torch.zeros(64, dtype=torch.uint8)], "cuda")
    torch.cuda.current_stream().wait_stream(side)
    assert failed and failed[0][0] == 4 and on_gpu[4] is None
    on_cpu, _ = decode_jpegs(encoded, "cpu")
    for path, g, c in zip(paths, on_gpu, on_cpu):
        assert g.is_cuda and g.shape == c.shape
        # nvJPEG and libjpeg-turbo decode the same quantized coefficients, but their inverse DCTs and their
        # upsampling of the subsampled colour planes differ, by an amount that depends on the GPU's decoder. What
        # holds on every GPU: each decoder's error against the image that was encoded is the loss of JPEG's
        # quantization and subsampling, so nvJPEG's PSNR against the source is within 3 dB of libjpeg-turbo's.
        source = _source_pixels(path)
        gpu_db, cpu_db = _psnr(g.cpu(), source), _psnr(c, source)
        assert gpu_db >= cpu_db - 3.0, f"{path.name}: nvJPEG {gpu_db:.1f} dB against the source, libjpeg-turbo {cpu_db:.1f} dB"
    boxes, flips = [(0, 0, 20, 20)] * 4, [False, True, False, True]
    x = normalize_on_device(resized_crops(on_gpu[:4], boxes, flips, 16), channels_last=True)
    ref = normalize_on_device(resized_crops(on_cpu, boxes, flips, 16))
    assert (F.avg_pool2d(x.cpu(), 4) - F.avg_pool2d(ref, 4)).abs().max() < 0.3


@pytest.mark.gpu
@pytest.mark.parametrize("thread", [False, True])
def test_prefetcher_on_a_side_stream_delivers_the_same_batches(folder, thread):
    def prepare(batch):
        x, y, skipped = batch
        return normalize_on_device(x.to("cuda", non_blocking=True)), y.to("cuda", non_blocking=True), skipped

    def loader():
        dataset = CheckedImageFolder(folder, train_transform(16, output="uint8"))
        return DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate_images, pin_memory=True,
                          generator=torch.Generator().manual_seed(0), shuffle=True, timeout=TIMEOUT)

    direct = [(normalize_on_device(x), y) for x, y, _ in _drain(loader())]
    fetched = list(DevicePrefetcher(loader(), prepare, "cuda", thread=thread))
    assert len(fetched) == len(direct)
    for (x, y, _), (dx, dy) in zip(fetched, direct):
        assert x.is_cuda and torch.allclose(x.cpu(), dx, rtol=1e-6, atol=1e-6) and torch.equal(y.cpu(), dy)
