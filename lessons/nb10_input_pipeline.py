"""Notebook 10's input pipeline, written by hand and shown by the notebooks (10 and deep dive 10b).

- the data: a synthetic ImageNet-style folder of JPEG files (`FolderSpec`, `make_image_folder`);
- loading with the ecosystem's parts: the training augmentation, `CheckedImageFolder` (bad files reported
  with their path), collate functions, `JpegBytesFolder` (bytes for device-side decoding), failure injection;
- the device side: `normalize_on_device`, `decode_jpegs` + `resized_crops` (nvJPEG), `DevicePrefetcher`;
- the ladder's measurement: `Rung`, `make_loader`, `prepare_batch`, the training step, `measure` and the
  figures read from its profile.

DataLoader worker processes import the dataset and collate classes from here by their module path (a class
defined in a notebook cell lives in ``__main__``, which a spawned worker does not have).
"""

import contextlib
import io
import json
import numbers
import os
import queue
import re
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torch.utils.data import Dataset, default_collate, get_worker_info
from torchvision import datasets
from torchvision.transforms import v2

from course_utils.device import require_device

# ---------------------------------------------------------------------------------------------- the data
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


def _check_root(root):
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(f"root must be a folder path (str or Path), got {type(root).__name__}")
    return Path(root)


def image_path(root, label, index):
    root = _check_root(root)
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
    root = _check_root(root)
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



# ------------------------------------------------------------------------ loading with the ecosystem's parts
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
        if not _check_root(root).is_dir():
            raise FileNotFoundError(f"root must be an existing folder of class folders, got {os.fspath(root)!r}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable (e.g. train_transform(224)), got {type(transform).__name__}")
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


# ------------------------------------------------------------------------------------------ the device side
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
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dtype not in (torch.uint8, torch.float32):
        raise TypeError(f"x must hold uint8 pixels (or float32 in 0..255), got {x.dtype}")
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"x must be a batch N x 3 x H x W, got shape {tuple(x.shape)}")
    _flag("channels_last", channels_last)
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
    try:
        boxes = torch.as_tensor(boxes).reshape(-1, 4)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"boxes must be (top, left, height, width) per image, got {boxes!r}") from None
    if boxes.numel() and (boxes.is_floating_point() or boxes.dtype == torch.bool or boxes.is_complex()):
        raise TypeError(f"boxes must hold integers (pixel positions), got {boxes.dtype}")
    boxes = boxes.long().tolist()
    try:
        flips = torch.as_tensor(flips).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"flips must be one bool per image, got {flips!r}") from None
    if flips.numel() and flips.dtype != torch.bool:
        raise TypeError(f"flips must be bools (one per image), got {flips.dtype}")
    flips = flips.bool().tolist()
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
        self.thread, self.depth = _flag("thread", thread), depth
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


# ----------------------------------------------------------------------------------- the ladder's measurement
#: The ranges of one training step, as `run_steps` labels them with `course_utils.profiling.annotate`.
STEP_RANGES = ("data", "forward", "backward", "optimizer")
#: cuDNN's layout transposes between NCHW and NHWC.
LAYOUT_KERNELS = re.compile(r"nchwToNhwc|nhwcToNchw|nchw2nhwc|nhwc2nchw", re.IGNORECASE)
#: Classes of a ResNet step's kernels, by name; the first match wins, the rest is "other".
KERNEL_CLASSES = (
    ("layout transposes", LAYOUT_KERNELS),
    ("batch norm", re.compile(r"batch_?norm|bn_fw|bn_bw|\bbn_", re.IGNORECASE)),
    ("optimizer", re.compile(r"multi_tensor|foreach", re.IGNORECASE)),
    ("convolutions, matmuls", re.compile(r"conv|implicit_gemm|xmma|dgrad|wgrad|fprop|winograd|gemm|cutlass|sm\d+_",
                                         re.IGNORECASE)),
    ("elementwise, pooling", re.compile(r"elementwise|vectorized|unrolled|reduce|pool|relu|threshold", re.IGNORECASE)),
)
_LAUNCH = re.compile(r"^cu(da)?LaunchKernel")
_SYNC = re.compile(r"^cuda(Stream|Device|Event)Synchronize$")


def _positive_int(name, value, *, minimum=1):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def sync(device):
    """Wait for the device's queued work (a no-op on the CPU)."""
    if require_device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: how batches are loaded and prepared, and how the model runs."""

    label: str
    num_workers: int = 0
    pinned: bool = False  # pin_memory=True, non_blocking=True copies
    fast_model: bool = False  # channels_last + bf16 autocast
    prefetch: bool = False  # DevicePrefetcher: next batch prepared on a side stream
    device_work: str = "none"  # "normalize": uint8 batches normalized on the device; "decode": nvJPEG + crops
    thread: bool = False  # the prefetcher in a background thread

    def __post_init__(self):
        if not isinstance(self.label, str) or not self.label:
            raise TypeError(f"Rung.label must be a non-empty str, got {self.label!r}")
        object.__setattr__(self, "num_workers", _positive_int("Rung.num_workers", self.num_workers, minimum=0))
        for name in ("pinned", "fast_model", "prefetch", "thread"):
            object.__setattr__(self, name, _flag(f"Rung.{name}", getattr(self, name)))
        if self.device_work not in ("none", "normalize", "decode"):
            raise ValueError(f"Rung.device_work must be 'none', 'normalize' or 'decode', got {self.device_work!r}")

    @property
    def warmup_steps(self):
        """Steps before timing: the workers' first batches (two each, prefetch_factor=2) are used up first."""
        return 2 * self.num_workers + 3


def make_loader(rung, root, *, crop, batch_size, n_batches, seed=0, timeout=120):
    """The rung's DataLoader over the folder ``root``: ``n_batches`` batches drawn by a seeded sampler."""
    if not isinstance(rung, Rung):
        raise TypeError(f"rung must be a Rung, got {type(rung).__name__}")
    crop, batch_size = _positive_int("crop", crop, minimum=8), _positive_int("batch_size", batch_size)
    n_batches, timeout = _positive_int("n_batches", n_batches), _positive_int("timeout", timeout)
    if rung.device_work == "decode":
        dataset, collate, pin = JpegBytesFolder(root), collate_encoded, False  # bytes: nvJPEG reads host memory
    else:
        output = "uint8" if rung.device_work == "normalize" else "float"
        dataset, collate, pin = CheckedImageFolder(root, train_transform(crop, output=output)), collate_images, rung.pinned
    sampler = torch.utils.data.RandomSampler(dataset, num_samples=n_batches * batch_size,
                                             generator=torch.Generator().manual_seed(seed))
    extra = {"prefetch_factor": 2, "timeout": timeout} if rung.num_workers > 0 else {}
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, num_workers=rung.num_workers,
        pin_memory=pin and torch.cuda.is_available(), collate_fn=collate, drop_last=True, persistent_workers=False,
        generator=torch.Generator().manual_seed(seed), **extra)


def prepare_batch(rung, batch, device, crop):
    """A loader batch -> (x, y, skipped) on ``device``, as the rung prescribes."""
    if not isinstance(rung, Rung):
        raise TypeError(f"rung must be a Rung, got {type(rung).__name__}")
    device, crop = require_device(device), _positive_int("crop", crop)
    if not isinstance(batch, (list, tuple)) or len(batch) != (7 if rung.device_work == "decode" else 3):
        raise TypeError(f"batch must be what this rung's collate function returns "
                        f"({'collate_encoded' if rung.device_work == 'decode' else 'collate_images'}), got "
                        f"{type(batch).__name__}")
    if rung.device_work == "decode":
        flat, lengths, boxes, flips, labels, paths, skipped = batch
        images, failed = decode_jpegs(list(torch.split(flat, lengths.tolist())), device)
        keep = [i for i, image in enumerate(images) if image is not None]
        skipped = skipped + [Skipped(paths[i], reason) for i, reason in failed]
        x = resized_crops([images[i] for i in keep], boxes[keep], flips[keep], crop)
        x = normalize_on_device(x, channels_last=rung.fast_model)
        return x, labels[keep].to(device, non_blocking=True), skipped
    x, y, skipped = batch
    x = x.to(device, non_blocking=rung.pinned)
    y = y.to(device, non_blocking=rung.pinned)
    if rung.device_work == "normalize":
        x = normalize_on_device(x, channels_last=rung.fast_model)
    elif rung.fast_model:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y, skipped


def device_batches(loader, prepare):
    """Without a prefetcher: fetch, then prepare, in the caller's thread and stream; the workers stop in the
    ``finally`` (also after an error, or when the generator is closed early)."""
    if not hasattr(loader, "__iter__"):
        raise TypeError(f"loader must be iterable (a DataLoader), got {type(loader).__name__}")
    if not callable(prepare):
        raise TypeError("prepare must be callable: batch -> (x, y, skipped)")
    return _device_batches(loader, prepare)


def _device_batches(loader, prepare):
    it = iter(loader)
    try:
        for batch in it:
            yield prepare(batch)
    finally:
        shutdown_workers(it)


def loader_rate(loader, *, warmup, steps):
    """Images/s of a DataLoader alone (no model, no copy): ``warmup`` batches, then ``steps`` timed."""
    warmup, steps = _positive_int("warmup", warmup, minimum=0), _positive_int("steps", steps)
    if not hasattr(loader, "__iter__"):
        raise TypeError(f"loader must be iterable (a DataLoader), got {type(loader).__name__}")
    it = iter(loader)
    try:
        for _ in range(warmup):
            next(it)
        start = time.perf_counter()
        images = sum(len(next(it)[1]) for _ in range(steps))
        return images / (time.perf_counter() - start)
    finally:
        shutdown_workers(it)


def make_model(arch, n_classes, device, *, channels_last=False, seed=0):
    """A torchvision model ``arch`` (untrained) on ``device`` and its SGD optimizer (momentum, weight decay)."""
    import torchvision

    if not isinstance(arch, str) or not callable(getattr(torchvision.models, arch, None)):
        raise ValueError(f"arch must name a torchvision model such as 'resnet50', got {arch!r}")
    n_classes, device = _positive_int("n_classes", n_classes), require_device(device)
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)(weights=None, num_classes=n_classes).to(device)
    if _flag("channels_last", channels_last):
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-5)
    return model, opt


def _check_model(model, opt):
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(opt, torch.optim.Optimizer):
        raise TypeError(f"opt must be a torch.optim.Optimizer, got {type(opt).__name__}")


def train_step(model, opt, x, y, *, bf16):
    """One training step: forward (bf16 autocast if asked) and loss, backward, optimizer step, each a range."""
    from course_utils.profiling import annotate

    _check_model(model, opt)
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        raise TypeError(f"x must be a float batch N x C x H x W, got "
                        f"{f'{x.dtype} {tuple(x.shape)}' if isinstance(x, torch.Tensor) else type(x).__name__}")
    if not isinstance(y, torch.Tensor) or y.shape != x.shape[:1] or y.is_floating_point():
        raise TypeError(f"y must hold one integer label per image of x ({x.shape[0]}), got "
                        f"{f'{y.dtype} {tuple(y.shape)}' if isinstance(y, torch.Tensor) else type(y).__name__}")
    bf16 = _flag("bf16", bf16)
    with annotate("forward"):
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
    with annotate("backward"):
        opt.zero_grad(set_to_none=True)
        loss.backward()
    with annotate("optimizer"):
        opt.step()
    return loss.detach()


def run_steps(batches, model, opt, n, *, bf16, on_step=None, sync_last=False):
    """``n`` training steps on batches (x, y, skipped) from the iterator ``batches``, the fetch labelled "data".
    Returns (images, last loss, skipped files)."""
    from course_utils.profiling import annotate

    n = _positive_int("n", n, minimum=0)
    if not hasattr(batches, "__next__"):
        raise TypeError(f"batches must be an iterator of (x, y, skipped), got {type(batches).__name__}")
    images, loss, skipped = 0, None, []
    for i in range(n):
        with annotate("data"):
            x, y, bad = next(batches)
        skipped += bad
        if len(y):
            loss = train_step(model, opt, x, y, bf16=bf16)
            images += len(y)
        if sync_last and i == n - 1 and len(y):
            sync(x.device)  # the window ends when the GPU has finished, not when the last launch returned
        if on_step is not None:
            on_step()
    return images, loss, skipped


def kernel_classes(frame, steps):
    """Device time per step (ms) of each class of `KERNEL_CLASSES` (and "other") in a `device_activity` frame."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame) or not {"name", "category", "duration_us"} <= set(frame.columns):
        raise TypeError("frame must be the DataFrame that course_utils.profiling.device_activity returns")
    steps = _positive_int("steps", steps)
    kernels = frame[frame["category"] == "kernel"]
    label = [next((cls for cls, pattern in KERNEL_CLASSES if pattern.search(name)), "other") for name in kernels["name"]]
    order = [cls for cls, _ in KERNEL_CLASSES] + ["other"]
    per_step = kernels["duration_us"].groupby(pd.Series(label, index=kernels.index)).sum() / steps / 1e3
    return per_step.reindex(order, fill_value=0.0)


def step_figures(prof, steps):
    """The figures of a profiled window of ``steps`` training steps, and its `device_activity` frame.

    ``busy_pct``: share of the window in which a kernel ran on any stream (on a CPU: the share inside forward,
    backward and optimizer); ``data_ms`` / ``data_pct``: host time per step in the "data" range, and its share
    of the window; ``host_step_ms``: host time per step inside forward + backward + optimizer, the training
    thread's time to launch one step's work on a GPU; ``kernel_ms``: time per step in which a kernel ran;
    ``copy_ms``: copy time per step; ``layout_kernels`` per step; ``launches``: kernel-launch calls per step
    (every thread); ``sync_ms``: host time per step in CUDA synchronize calls (every thread).
    """
    from course_utils.profiling import device_activity, idle_fraction, range_times

    if not callable(getattr(prof, "events", None)):
        raise TypeError(f"prof must be a torch.profiler.profile, read after its with block; got {type(prof).__name__}")
    steps = _positive_int("steps", steps)
    frame = device_activity(prof)
    ranges = range_times(prof, list(STEP_RANGES))
    start, end = frame.attrs["window_us"]
    window = max(end - start, 1e-9)
    host_us = ranges.loc[["forward", "backward", "optimizer"], "cpu_us"].sum()
    out = {"data_ms": ranges.loc["data", "cpu_us"] / steps / 1e3, "data_pct": 100 * ranges.loc["data", "cpu_us"] / window,
           "host_step_ms": host_us / steps / 1e3}
    if frame.attrs["device"] == "cuda":
        kernels = frame[frame["category"] == "kernel"].copy()
        kernels.attrs = dict(frame.attrs)
        busy = 1 - idle_fraction(kernels)
        runtime = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
        out.update(busy_pct=100 * busy, kernel_ms=busy * window / steps / 1e3,
                   copy_ms=frame.loc[frame["category"] == "memcpy", "duration_us"].sum() / steps / 1e3,
                   layout_kernels=kernels["name"].str.contains(LAYOUT_KERNELS).sum() / steps,
                   launches=sum(1 for e in runtime if _LAUNCH.match(e.name)) / steps,
                   sync_ms=sum(e.time_range.elapsed_us() for e in runtime if _SYNC.match(e.name)) / steps / 1e3)
    else:  # the CPU is the device: busy = inside forward, backward or optimizer
        nan = float("nan")
        out.update(busy_pct=100 * host_us / window, kernel_ms=nan, copy_ms=nan, layout_kernels=nan, launches=nan,
                   sync_ms=nan)
    return out, frame


def measure(name, source, model, opt, *, warmup, steps, profile_steps, bf16, trace_dir=None, stages=None):
    """Warm up, time ``steps`` training steps (wall clock, synchronized at both ends), then profile
    ``profile_steps`` more with `torch.profiler` (one profiler warm-up step first; ``stages``: submodules to
    label with `annotate_calls`) and read the window with `step_figures`. The trace goes to
    ``trace_dir/<name>.json.gz`` (for https://ui.perfetto.dev) when ``trace_dir`` is given.

    Returns (row, frame): row holds name, images_per_s, step_ms, the figures, skipped, loss and trace.
    """
    from torch.profiler import ProfilerActivity, profile, schedule

    from course_utils.profiling import annotate_calls

    if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"name must be a file-name-safe str (letters, digits, _ . -), got {name!r}")
    warmup = _positive_int("warmup", warmup, minimum=0)
    steps, profile_steps = _positive_int("steps", steps), _positive_int("profile_steps", profile_steps)
    if not hasattr(source, "__iter__"):
        raise TypeError(f"source must be an iterable of (x, y, skipped), got {type(source).__name__}")
    _check_model(model, opt)
    device = next(model.parameters()).device
    trace = None if trace_dir is None else Path(trace_dir) / f"{name}.json.gz"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    batches = iter(source)
    try:
        run_steps(batches, model, opt, warmup, bf16=bf16)
        sync(device)
        start = time.perf_counter()
        images, loss, skipped = run_steps(batches, model, opt, steps, bf16=bf16)
        sync(device)
        seconds = time.perf_counter() - start
        with annotate_calls(model, stages, prefix="model") if stages else contextlib.nullcontext(), \
             profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=profile_steps, repeat=1),
                     on_trace_ready=None if trace is None else (lambda p: p.export_chrome_trace(str(trace)))) as prof:
            _, _, more = run_steps(batches, model, opt, profile_steps + 1, bf16=bf16, on_step=prof.step, sync_last=True)
    finally:
        if hasattr(batches, "close"):
            batches.close()  # a generator: its `finally` stops the DataLoader's workers now
    figures, frame = step_figures(prof, profile_steps)
    row = {"name": name, "images_per_s": images / seconds, "step_ms": 1e3 * seconds / steps, **figures,
           "skipped": len(skipped) + len(more), "loss": float(loss) if loss is not None else float("nan"),
           "trace": trace}
    return row, frame


def overlap_share(kernels, copies):
    """Share (0..1) of the copies' time during which at least one kernel was running, on any stream.
    Both are `device_activity` frames (or any frames with ``start_us`` and ``end_us``); nan without copies."""
    import pandas as pd

    for arg, frame in (("kernels", kernels), ("copies", copies)):
        if not isinstance(frame, pd.DataFrame) or not {"start_us", "end_us"} <= set(frame.columns):
            raise TypeError(f"{arg} must be a DataFrame with start_us and end_us columns (device_activity's rows)")
    merged = []
    for s, e in sorted(zip(kernels["start_us"], kernels["end_us"])):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = np.array([m[0] for m in merged])
    total = covered = 0.0
    for s, e in zip(copies["start_us"], copies["end_us"]):
        total += e - s
        i = max(int(np.searchsorted(starts, s, side="right")) - 1, 0)
        while i < len(merged) and merged[i][0] < e:
            covered += max(0.0, min(e, merged[i][1]) - max(s, merged[i][0]))
            i += 1
    return covered / total if total else float("nan")
