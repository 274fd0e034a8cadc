"""Exported from notebooks/10_input_pipeline_case_study.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import io
import json
import numbers
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

#: Bump when the images a FolderSpec produces change, so that an old cached folder is not reused.
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class FolderSpec:
    """What the synthetic ImageNet-style folder holds: classes, images per class, side lengths, seed."""

    n_classes: int
    per_class: int
    min_side: int = 300
    max_side: int = 500
    seed: int = 0
    quality: int = 90

    def __post_init__(self):
        for name in ("n_classes", "per_class", "min_side", "max_side", "seed", "quality"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise TypeError(f"FolderSpec.{name} must be an int, got {value!r}")
            object.__setattr__(self, name, int(value))  # a NumPy int becomes a Python int
        if self.n_classes < 1 or self.per_class < 1:
            raise ValueError("FolderSpec needs at least one class and one image per class")
        if not 16 <= self.min_side <= self.max_side:
            raise ValueError(f"need 16 <= min_side <= max_side, got {self.min_side} and {self.max_side}")
        if not 1 <= self.quality <= 95:
            raise ValueError(f"JPEG quality must be in 1..95, got {self.quality}")

    @property
    def n_images(self):
        return self.n_classes * self.per_class

    def folder_name(self):
        return (f"synthetic_jpeg_{self.n_classes}x{self.per_class}_{self.min_side}-{self.max_side}px"
                f"_seed{self.seed}_q{self.quality}_v{GENERATOR_VERSION}")


def synthetic_image(spec, label, index):
    """Image ``index`` of class ``label``: a smooth colour field tinted by the class, plus a fine grain.

    Deterministic in (spec.seed, label, index), whatever order or process makes it.
    """
    if not isinstance(spec, FolderSpec):
        raise TypeError(f"spec must be a FolderSpec, got {type(spec).__name__}")
    _check_label_index(label, index, spec)
    rng = np.random.default_rng([spec.seed, label, index])
    height, width = (int(s) for s in rng.integers(spec.min_side, spec.max_side + 1, size=2))
    tint = 50 * np.cos(2 * np.pi * label / spec.n_classes + np.array([0.0, 2.1, 4.2]))
    coarse = np.clip(128 + tint + 60 * rng.standard_normal((6, 6, 3)), 0, 255).astype(np.uint8)
    field = np.asarray(Image.fromarray(coarse).resize((width, height), Image.BICUBIC), dtype=np.int16)
    grain = rng.integers(-20, 21, size=(height, width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(field + grain, 0, 255).astype(np.uint8))


def _check_label_index(label, index, spec=None):
    for name, value in (("label", label), ("index", index)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if spec is not None and label >= spec.n_classes:
        raise ValueError(f"label must be below spec.n_classes = {spec.n_classes}, got {label}")


def image_path(root, label, index):
    _check_label_index(label, index)
    return Path(root) / f"class_{label:03d}" / f"img_{index:05d}.jpg"


def _write_image(job):
    spec, root, label, index = job
    path = image_path(root, label, index)
    buffer = io.BytesIO()
    synthetic_image(spec, label, index).save(buffer, format="JPEG", quality=spec.quality)
    partial = path.with_name(path.name + ".part")  # written whole, then renamed: no half files
    partial.write_bytes(buffer.getvalue())
    os.replace(partial, path)


def make_image_folder(root, spec, *, workers=1):
    """Write, or reuse, an ImageFolder tree of JPEG files: ``root/class_000/img_00000.jpg`` ...

    ``root/manifest.json`` is written last and records the spec: a later call with the same spec
    reuses the folder (and writes only files missing after an interruption); a call with another
    spec raises ValueError rather than mix two datasets. ``workers > 1`` writes in parallel
    processes. Returns {"root", "images", "bytes", "written"} (written is 0 when all was reused).
    """
    if not isinstance(spec, FolderSpec):
        raise TypeError(f"spec must be a FolderSpec, got {type(spec).__name__}")
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    root = Path(root)
    manifest = root / "manifest.json"
    wanted = {"spec": asdict(spec), "generator_version": GENERATOR_VERSION}
    if manifest.exists():
        found = json.loads(manifest.read_text(encoding="utf-8"))
        if {key: found.get(key) for key in wanted} != wanted:
            raise ValueError(f"{root} holds images made from another spec ({found.get('spec')}); "
                             "delete that folder or choose another root")
    paths = [image_path(root, label, index) for label in range(spec.n_classes) for index in range(spec.per_class)]
    todo = [(spec, root, label, index) for label in range(spec.n_classes) for index in range(spec.per_class)
            if not image_path(root, label, index).exists()]
    for label in range(spec.n_classes):
        (root / f"class_{label:03d}").mkdir(parents=True, exist_ok=True)
    if todo and workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            list(pool.map(_write_image, todo, chunksize=16))
    else:
        for job in todo:
            _write_image(job)
    total = sum(p.stat().st_size for p in paths)
    if todo or not manifest.exists():
        manifest.write_text(json.dumps({**wanted, "images": len(paths), "bytes": total}, indent=1), encoding="utf-8")
    return {"root": root, "images": len(paths), "bytes": total, "written": len(todo)}


import io
import numbers
import os
import signal
import time
from dataclasses import dataclass

import torch
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import Dataset, default_collate, get_worker_info
from torchvision import datasets
from torchvision.transforms import v2

#: ImageNet's per-channel means and standard deviations (of pixels scaled to 0..1).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def train_transform(crop, *, output="float"):
    """The standard ImageNet training augmentation of a PIL image: random resized crop, flip, tensor.

    ``output="float"``: a normalized float32 3 x crop x crop tensor, what the model eats;
    ``output="uint8"``: stop before the float conversion (4x fewer bytes to move) and normalize on
    the device with `normalize_on_device`.
    """
    if output not in ("float", "uint8"):
        raise ValueError(f"output must be 'float' or 'uint8', got {output!r}")
    if isinstance(crop, bool) or not isinstance(crop, int) or crop < 8:
        raise ValueError(f"crop must be an int >= 8, got {crop!r}")
    steps = [v2.RandomResizedCrop(crop, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor()]
    if output == "float":
        steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    return v2.Compose(steps)


class BadImageError(RuntimeError):
    """A file of the dataset could not be read as an image; the message names the file."""


@dataclass(frozen=True)
class Skipped:
    """A sample left out of its batch: which file, and why."""

    path: str
    reason: str


class CheckedImageFolder(datasets.ImageFolder):
    """`ImageFolder` that reports unreadable files instead of failing somewhere inside a worker.

    ``on_error="skip"``: a file that fails to decode is returned as `Skipped(path, reason)` (use
    `collate_images`, which leaves it out of the batch and passes it on); ``"raise"``: raise
    `BadImageError` with the path. Only opening and decoding are guarded: a bug in a transform
    still raises as itself.
    """

    def __init__(self, root, transform=None, *, on_error="skip"):
        if on_error not in ("skip", "raise"):
            raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
        super().__init__(os.fspath(root), transform=transform)
        self.on_error = on_error

    def _bad(self, path, err):
        reason = f"{type(err).__name__}: {err}"
        if self.on_error == "raise":
            raise BadImageError(f"cannot read {path}: {reason}") from err
        return Skipped(path, reason)

    def __getitem__(self, index):
        path, label = self.samples[index]
        try:
            image = self.loader(path)  # PIL: open, decode the whole file, convert to RGB
        except Exception as err:  # noqa: BLE001 - any decoder failure is the file's fault: report it
            return self._bad(path, err)
        if self.transform is not None:
            image = self.transform(image)
        return image, label


def _check_batch(batch):
    if not isinstance(batch, (list, tuple)):
        raise TypeError(f"batch must be the list of samples a DataLoader collects, got {type(batch).__name__}")


def collate_images(batch):
    """Batch the good samples; returns (images, labels, skipped) so that the loop can report the bad ones."""
    _check_batch(batch)
    good = [s for s in batch if not isinstance(s, Skipped)]
    skipped = [s for s in batch if isinstance(s, Skipped)]
    if not good:
        return torch.empty(0), torch.empty(0, dtype=torch.long), skipped
    images, labels = default_collate(good)  # in a worker, stacks straight into shared memory
    return images, labels, skipped


def _check_range(name, pair, *, at_most=float("inf")):
    """(low, high) with 0 < low <= high <= at_most, as floats, or a ValueError that names the argument."""
    try:
        low, high = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be two numbers (low, high), got {pair!r}") from None
    if not 0 < low <= high <= at_most:
        raise ValueError(f"{name} must be (low, high) with 0 < low <= high <= {at_most:g}, got {pair!r}")
    return low, high


def check_jpeg_bytes(data):
    """Raise ValueError unless ``data`` starts like a JPEG file and ends with its end-of-image marker."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be the file's bytes, got {type(data).__name__}")
    if len(data) < 4 or data[:2] != b"\xff\xd8":
        raise ValueError("not a JPEG file (no start-of-image marker)")
    if data.rfind(b"\xff\xd9", max(0, len(data) - 64)) < 0:
        raise ValueError("truncated JPEG file (no end-of-image marker)")


class JpegBytesFolder(CheckedImageFolder):
    """The same folder, but a sample is the file's bytes and the crop to take: decoding moves to the device.

    The worker reads the file, checks its JPEG markers, reads its size from the header (no decoding)
    and draws the random resized crop box and the flip as `train_transform` does. A sample is
    ``(bytes as a uint8 tensor, (top, left, height, width), flip, label, path)`` or `Skipped`.
    """

    def __init__(self, root, *, on_error="skip", scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        self.scale = _check_range("scale", scale, at_most=1.0)  # fraction of the image's area
        self.ratio = _check_range("ratio", ratio)                # width / height of the crop
        super().__init__(root, on_error=on_error)

    def __getitem__(self, index):
        path, label = self.samples[index]
        try:
            with open(path, "rb") as f:
                data = f.read()
            check_jpeg_bytes(data)
            with Image.open(io.BytesIO(data)) as header:  # lazy: parses the header only
                if header.format != "JPEG":
                    raise ValueError(f"not a JPEG file but {header.format}")
                box = T.RandomResizedCrop.get_params(header, self.scale, self.ratio)
        except Exception as err:  # noqa: BLE001 - reported with the path, as in CheckedImageFolder
            return self._bad(path, err)
        flip = bool(torch.rand(()) < 0.5)
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), tuple(box), flip, label, path


def collate_encoded(batch):
    """Batch `JpegBytesFolder` samples: (all files' bytes in one flat uint8 tensor, their lengths,
    crop boxes [B, 4], flips [B], labels [B], paths, skipped). One flat tensor crosses from the worker
    in one shared-memory block instead of one per file."""
    _check_batch(batch)
    good = [s for s in batch if not isinstance(s, Skipped)]
    skipped = [s for s in batch if isinstance(s, Skipped)]
    if not good:
        return (torch.empty(0, dtype=torch.uint8), torch.empty(0, dtype=torch.long), torch.empty(0, 4, dtype=torch.long),
                torch.empty(0, dtype=torch.bool), torch.empty(0, dtype=torch.long), [], skipped)
    data, boxes, flips, labels, paths = zip(*good)
    return (torch.cat(data), torch.tensor([len(d) for d in data]), torch.tensor(boxes), torch.tensor(flips),
            torch.tensor(labels), list(paths), skipped)


class FaultyDataset(Dataset):
    """For demonstrations and tests: item ``index`` kills its worker process (``fault="die"``, as the
    out-of-memory killer would) or stalls it for ``seconds`` (``fault="stall"``). Other items come
    from ``base``. Refuses to misbehave outside a DataLoader worker, so it cannot kill the notebook."""

    def __init__(self, base, index, fault="die", seconds=2.0):
        if fault not in ("die", "stall"):
            raise ValueError(f"fault must be 'die' or 'stall', got {fault!r}")
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an int, got {index!r}")
        if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) or not 0 <= seconds < float("inf"):
            raise ValueError(f"seconds must be a number >= 0, got {seconds!r}")
        self.base, self.index, self.fault, self.seconds = base, index, fault, seconds

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        if i == self.index:
            if get_worker_info() is None:
                raise RuntimeError("FaultyDataset misbehaves only inside a DataLoader worker (num_workers > 0)")
            if self.fault == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.seconds)
        return self.base[i]


def shutdown_workers(iterator):
    """Stop a DataLoader iterator's worker processes now (otherwise they stop when it is garbage-collected)."""
    stop = getattr(iterator, "_shutdown_workers", None)
    if stop is not None:
        stop()


import io
import numbers
import queue
import threading

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from course_utils.device import require_device

_STATS = {}


def _mean_std_255(device):
    key = str(device)
    if key not in _STATS:  # made once per device and never freed, so safe to read from any stream
        mean = torch.tensor(MEAN, dtype=torch.float32).mul(255).view(1, 3, 1, 1)
        std = torch.tensor(STD, dtype=torch.float32).mul(255).view(1, 3, 1, 1)
        _STATS[key] = (mean.to(device), std.to(device))
    return _STATS[key]


def normalize_on_device(x, *, channels_last=False):
    """(x / 255 - mean) / std for a batch N x 3 x H x W of uint8 pixels (or floats in 0..255), as float32.

    The same numbers as ``ToDtype(float32, scale=True)`` then ``Normalize(MEAN, STD)``; the conversion
    and the layout change (``channels_last=True``) are one copy.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(x).__name__}")
    if x.dtype not in (torch.uint8, torch.float32):
        raise TypeError(f"expected uint8 pixels (or float32 in 0..255), got {x.dtype}")
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"expected a batch N x 3 x H x W, got shape {tuple(x.shape)}")
    if x.device.type not in ("cpu", "cuda"):
        raise ValueError(f"x must be on the CPU or a CUDA GPU, got {x.device}")
    if x.dtype == torch.float32 and x.numel() and 0 < float(x.amax()) <= 1:  # one sync, float input only
        raise ValueError("x looks like pixels scaled to 0..1; pass uint8 pixels or floats in 0..255 (x * 255)")
    mean, std = _mean_std_255(x.device)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    x = x.to(dtype=torch.float32, memory_format=layout)
    return torch.sub(x, mean).div_(std)


def decode_jpegs(data, device):
    """Decode JPEG files (a list of 1-D uint8 CPU tensors) to uint8 3 x H x W tensors on ``device``.

    Returns (images, failed): ``images[i]`` is None for a file that could not be decoded, and
    ``failed`` lists (i, reason). On CUDA this is one batched `torchvision.io.decode_jpeg` call (nvJPEG;
    the hardware JPEG decoder on GPUs that have one), which returns when the batch is decoded. Its
    outputs are allocated on the current stream but written from nvJPEG's own stream, so the current
    stream is synchronized first: memory freed by kernels still queued on it must not be handed to the
    decoder and overwritten. Call it on a side stream (the prefetcher does), where that wait is short.
    One bad file fails the whole batched call; the batch is then decoded file by file to find it.
    Without CUDA: the same contract, decoded by PIL in this process (the CPU twin).
    """
    if isinstance(data, torch.Tensor) or not isinstance(data, (list, tuple)):
        raise TypeError(f"data must be a list of 1-D uint8 tensors, one per file, got {type(data).__name__} (for "
                        "collate_encoded's flat tensor: list(torch.split(flat, lengths.tolist())))")
    for i, encoded in enumerate(data):
        if not isinstance(encoded, torch.Tensor) or encoded.dtype != torch.uint8 or encoded.dim() != 1 or encoded.is_cuda:
            raise TypeError(f"data[{i}] must be a 1-D uint8 CPU tensor (a file's bytes), got "
                            f"{encoded.dtype if isinstance(encoded, torch.Tensor) else type(encoded).__name__}")
    device = require_device(device)
    if device.type == "cuda":
        from torchvision.io import ImageReadMode, decode_jpeg
        torch.cuda.current_stream(device).synchronize()
        try:
            return list(decode_jpeg(list(data), mode=ImageReadMode.RGB, device=device)), []
        except RuntimeError:
            images, failed = [], []
            for i, encoded in enumerate(data):
                try:
                    images.append(decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device))
                except RuntimeError as err:
                    images.append(None)
                    failed.append((i, f"nvJPEG: {err}"))
            return images, failed
    images, failed = [], []
    for i, encoded in enumerate(data):
        try:
            with Image.open(io.BytesIO(encoded.numpy().tobytes())) as image:
                pixels = np.array(image.convert("RGB"))
            images.append(torch.from_numpy(pixels).permute(2, 0, 1).to(device))
        except Exception as err:  # noqa: BLE001 - reported per file
            images.append(None)
            failed.append((i, f"{type(err).__name__}: {err}"))
    return images, failed


def resized_crops(images, boxes, flips, size):
    """Random-resized-crop on the device: crop ``images[i]`` (uint8 3 x H x W) to ``boxes[i]`` = (top,
    left, height, width), resize to size x size (bilinear, antialiased like PIL), flip where
    ``flips[i]``. Returns float32 N x 3 x size x size in 0..255, rounded like 8-bit pixels."""
    if isinstance(size, (bool, np.bool_)) or not isinstance(size, numbers.Integral) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    if isinstance(images, torch.Tensor) or not isinstance(images, (list, tuple)):
        raise TypeError(f"images must be a list of uint8 3 x H x W tensors, got {type(images).__name__}")
    for i, image in enumerate(images):
        if not isinstance(image, torch.Tensor) or image.dtype != torch.uint8 or image.dim() != 3 or image.shape[0] != 3:
            raise ValueError(f"images[{i}] must be a uint8 3 x H x W tensor (channels first, 0..255), got "
                             + (f"{image.dtype} {tuple(image.shape)}" if isinstance(image, torch.Tensor) else repr(image)))
    boxes = torch.as_tensor(boxes, dtype=torch.long).reshape(-1, 4).tolist()
    flips = torch.as_tensor(flips, dtype=torch.bool).reshape(-1).tolist()
    if not len(images) == len(boxes) == len(flips):
        raise ValueError(f"{len(images)} images, {len(boxes)} boxes and {len(flips)} flips: need one each")
    if not images:
        return torch.empty(0, 3, size, size)
    out = []
    for image, (top, left, height, width), flip in zip(images, boxes, flips):
        if (height < 1 or width < 1 or top < 0 or left < 0
                or top + height > image.shape[1] or left + width > image.shape[2]):
            raise ValueError(f"box {(top, left, height, width)} does not fit an image of shape {tuple(image.shape)}")
        patch = image[None, :, top:top + height, left:left + width].float()
        resized = F.interpolate(patch, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        out.append(resized.flip(-1) if flip else resized)
    return torch.cat(out).round_().clamp_(0, 255)


class DevicePrefetcher:
    """Iterate ``loader`` one batch ahead, preparing batch k+1 on a side CUDA stream while batch k computes.

    ``prepare(batch)`` turns a loader batch into a tuple of device tensors (``non_blocking`` copies,
    device-side decoding or normalization); it runs with the side stream as the current stream.
    Three rules make the overlap correct:

    1. the compute stream waits for the side stream before it uses batch k (``wait_stream``; or
       ``wait_event`` on an event recorded just after batch k's work, when later batches may already
       be queued behind it): no kernel reads a batch whose copy has not finished;
    2. every tensor made on the side stream and used on the compute stream gets
       ``record_stream(compute)``: the caching allocator then does not give its memory back to the
       side stream before the compute stream's work queued so far is done;
    3. the host memory a ``non_blocking`` copy reads stays untouched until the copy ran: DataLoader's
       pinned batches are fresh buffers, and PyTorch's pinned-memory allocator does not reuse one
       before the copies that read it are complete.

    ``thread=True`` loads and prepares in a background thread (a queue of ``depth`` batches), for
    preparation that blocks its caller, such as nvJPEG decoding. Without CUDA there is no stream;
    batches are still prepared one ahead (in the thread, if asked).
    """

    def __init__(self, loader, prepare, device, *, thread=False, depth=2):
        if not callable(prepare):
            raise TypeError("prepare must be callable: batch -> tuple of tensors")
        if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        if not hasattr(loader, "__iter__"):
            raise TypeError(f"loader must be iterable (a DataLoader), got {type(loader).__name__}")
        self.loader, self.prepare, self.device = loader, prepare, require_device(device)
        self.thread, self.depth = thread, depth
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def __iter__(self):
        return self._threaded() if self.thread else self._inline()

    def _prepare(self, batch):
        if self.stream is None:
            return self.prepare(batch), None
        with torch.cuda.stream(self.stream):
            out = self.prepare(batch)
            ready = torch.cuda.Event()
            ready.record(self.stream)
        return out, ready

    def _hand_over(self, out, ready, *, by_event):
        if self.stream is not None:
            compute = torch.cuda.current_stream(self.device)
            if by_event:
                compute.wait_event(ready)  # rule 1, for exactly this batch's work
            else:
                compute.wait_stream(self.stream)  # rule 1: everything queued on the side stream so far
            for t in out:
                if isinstance(t, torch.Tensor) and t.is_cuda:
                    t.record_stream(compute)  # rule 2
        return out

    def _inline(self):
        it = iter(self.loader)
        try:
            pending = None
            batch = next(it, None)
            if batch is not None:
                pending = self._prepare(batch)
            while pending is not None:
                current = self._hand_over(*pending, by_event=False)  # batch k: its copy is waited for...
                batch = next(it, None)
                pending = self._prepare(batch) if batch is not None else None  # ...then k+1's is queued
                yield current
        finally:
            shutdown_workers(it)

    def _threaded(self):
        handoff = queue.Queue(maxsize=self.depth)
        stop = threading.Event()
        done = object()

        def put(item):
            while not stop.is_set():
                try:
                    handoff.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def work():
            it = None
            try:
                it = iter(self.loader)
                for batch in it:
                    if not put(self._prepare(batch)):
                        break
                put(done)
            except BaseException as err:  # noqa: BLE001 - handed to the consumer, which raises it
                put(err)
            finally:
                if it is not None:
                    shutdown_workers(it)

        worker = threading.Thread(target=work, name="DevicePrefetcher", daemon=True)
        worker.start()
        try:
            while True:
                item = handoff.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield self._hand_over(*item, by_event=True)
        finally:
            stop.set()
            worker.join(timeout=60)
