"""Input validation and image-folder reading shared by every scorer.

Scorers take images as numpy arrays ``[N, H, W, 3]`` (or one ``[H, W, 3]``),
either ``uint8`` (divided by 255) or floating point already in ``[0, 1]``.
Anything else is refused with a message that says how to fix it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from bench.errors import BenchError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")


def as_image_batch(
    images: np.ndarray, *, name: str = "images", convert: bool = True, check_values: bool = True
) -> np.ndarray:
    """Validate and convert images to float64 ``[N, H, W, 3]`` in ``[0, 1]``.

    Args:
        images: ``[N, H, W, 3]`` or ``[H, W, 3]``; uint8 (0..255) or float in [0, 1].
        name: How to call the argument in error messages.
        convert: False returns the validated array in its own dtype (uint8 stays 0..255),
            for callers that convert chunk by chunk.
        check_values: False checks shape and dtype only; the caller must then run
            :func:`check_unit_range` on every frame it reads (as :func:`metrics.psnr.psnr`
            does, while the frame is in cache).

    Returns:
        A C-contiguous float64 array ``[N, H, W, 3]`` (torch.from_numpy refuses the negative
        strides of a reversed or flipped view; a contiguous float64 input is returned as is),
        or the validated input when ``convert`` is False.

    Raises:
        BenchError: on a wrong shape, dtype, non-finite values or values outside [0, 1].
    """
    arr = np.asarray(images)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4 or arr.shape[-1] != 3:
        raise BenchError(
            f"{name} must have shape [N, H, W, 3] or [H, W, 3] (RGB, channels last), got "
            f"{tuple(np.shape(images))}; drop alpha / convert grayscale to RGB first"
        )
    if arr.shape[0] == 0:
        raise BenchError(f"{name} is empty (0 images); pass at least one image")
    if arr.dtype == np.uint8:
        return arr.astype(np.float64) / 255.0 if convert else arr
    if not np.issubdtype(arr.dtype, np.floating):
        raise BenchError(
            f"{name} has dtype {arr.dtype}; pass uint8 (0..255) or float images in [0, 1]"
        )
    if check_values:
        check_unit_range(arr, name=name)
    return np.ascontiguousarray(arr, dtype=np.float64) if convert else arr


# Unsigned integer views of the IEEE float types, for the one-pass range test.
_BITS = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32,
         np.dtype(np.float64): np.uint64}


def check_unit_range(images: np.ndarray, *, name: str = "images") -> None:  # [...] float
    """Refuse float images with NaN, inf or values outside [0, 1].

    Fast path, one pass: read as unsigned integers, the bit patterns of +0.0 .. 1.0 are
    exactly the integers 0 .. bits(1.0), while every negative value (sign bit set), inf
    and NaN reads larger. So ``max(bits) <= bits(1.0)`` proves the whole array valid
    (half the memory passes of ``min`` + ``max``). When it fails (or for other float
    types) the exact ``min``/``max`` test decides and words the error; it also lets
    ``-0.0`` through.

    Raises:
        BenchError: on NaN/inf or values outside [0, 1].
    """
    arr = np.asarray(images)
    bits = _BITS.get(arr.dtype)
    if bits is not None and arr.dtype.isnative and arr.size:
        one = np.array(1.0, dtype=arr.dtype).view(bits)[()]
        if arr.view(bits).max() <= one:
            return
    lo, hi = float(arr.min()), float(arr.max())  # NaN propagates; inf shows up as a bound
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise BenchError(f"{name} contains NaN or inf; fix the renderer output before scoring")
    if lo < 0.0 or hi > 1.0:
        raise BenchError(
            f"{name} values span [{lo:.4g}, {hi:.4g}] but must lie in [0, 1]; "
            "divide 8-bit images by 255 or clip the render"
        )


def to_float64(images: np.ndarray) -> np.ndarray:
    """A validated batch (see ``convert=False``) as float64 in [0, 1]."""
    if images.dtype == np.uint8:
        return images.astype(np.float64) / 255.0
    return images.astype(np.float64, copy=False)


def check_pair(pred: np.ndarray, ref: np.ndarray) -> None:  # [N,H,W,3] x2
    """Refuse prediction/reference batches whose shapes differ."""
    if pred.shape != ref.shape:
        raise BenchError(
            f"prediction shape {tuple(pred.shape)} != reference shape {tuple(ref.shape)}; "
            "full-reference scores need aligned images of the same size and count"
        )


def quantize_8bit(images: np.ndarray) -> np.ndarray:
    """Round ``[0, 1]`` floats to uint8 exactly as saving a PNG would (round half to even)."""
    return np.clip(np.rint(np.asarray(images, dtype=np.float64) * 255.0), 0, 255).astype(np.uint8)


def natural_key(name: str) -> list[object]:
    """Sort key that orders embedded numbers numerically (frame_2 before frame_10)."""
    return [int(tok) if tok.isdigit() else tok.lower() for tok in re.split(r"(\d+)", name)]


#: The index prefix ``bench render`` puts before a camera's name (``0000_test_00.png``).
_INDEX_PREFIX = re.compile(r"\d{4,}_(.+)")


def images_by_camera(files: list[Path]) -> dict[str, Path]:
    """Name -> image file, for pairing images with cameras by the camera's name.

    Each file answers to its file name, its stem and, when the stem starts with an
    index prefix as ``bench render`` writes (``0000_test_00.png``), the stem after it
    (``test_00``). An exact name or stem wins over a prefix-stripped one.
    """
    stripped = {}
    for p in files:
        match = _INDEX_PREFIX.fullmatch(p.stem)
        if match:
            stripped.setdefault(match.group(1), p)
    return stripped | {p.name: p for p in files} | {p.stem: p for p in files}


def image_for_camera(by_name: dict[str, Path], camera_name: str) -> Path | None:
    """The image of camera ``camera_name`` in :func:`images_by_camera`'s map, or None."""
    name = Path(camera_name).name
    return by_name.get(name) or by_name.get(Path(name).stem)


def list_images(folder: str | os.PathLike) -> list[Path]:
    """Image files directly inside ``folder``, in natural order (frame_2 before frame_10).

    Raises:
        BenchError: if the folder does not exist or holds no image file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BenchError(f"image folder {folder} does not exist or is not a directory")
    files = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    if not files:
        raise BenchError(
            f"image folder {folder} contains no images ({', '.join(IMAGE_SUFFIXES)}); "
            "point it at the folder that holds the frames"
        )
    return sorted(files, key=lambda p: natural_key(p.name))


def read_image(path: str | os.PathLike) -> np.ndarray:
    """Read one image as uint8 RGB ``[H, W, 3]`` (gray is replicated, alpha is dropped)."""
    import imageio.v3 as iio

    img = np.asarray(iio.imread(path))
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    if img.ndim != 3 or img.shape[-1] not in (3, 4):
        raise BenchError(f"{path}: unsupported image layout {img.shape}; expected RGB or RGBA")
    if img.dtype != np.uint8:
        raise BenchError(f"{path}: {img.dtype} images are not supported; save frames as 8-bit")
    return np.ascontiguousarray(img[..., :3])


def read_folder(folder: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """Read every image of a folder into one uint8 batch.

    Returns:
        (file names in natural order, uint8 array ``[N, H, W, 3]``).

    Raises:
        BenchError: on an empty folder or images of different sizes.
    """
    paths = list_images(folder)
    images = [read_image(p) for p in paths]
    sizes = {im.shape for im in images}
    if len(sizes) > 1:
        shown = ", ".join(f"{w}x{h}" for h, w, _ in sorted(sizes)[:4])
        raise BenchError(
            f"images in {folder} have different sizes ({shown}); resize them to one size first"
        )
    return [p.name for p in paths], np.stack(images)
