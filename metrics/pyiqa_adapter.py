"""``pyiqa:<name>``: any pyiqa metric (FR or NR) as a registry scorer, offline-safe.

Metadata (mode, ``lower_better``, version) comes from pyiqa's own model table.
Construction runs with every download path pyiqa uses replaced by a function
that fails at once: torch.hub's downloader (pyiqa's weight cache and
torchvision backbones), ``urllib.request.urlopen`` (CLIP) and the Hugging Face
hub (switched to offline mode). A metric whose weights are not already cached
therefore raises a :class:`~bench.errors.BenchError` naming the missing file
and where to put it, instead of hanging on a network that is not there.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import sys

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair

# dataset-level metrics: they score a set of images, not each frame
_NOT_PER_IMAGE = ("fid", "inception_score")


class MissingWeightError(BenchError):
    """A pyiqa metric tried to download a file that is not in the local cache."""


def _configs() -> dict:
    try:
        from pyiqa.default_model_configs import DEFAULT_CONFIGS
    except ImportError as exc:
        raise BenchError(
            "pyiqa metrics need the pyiqa package: pip install -c constraints.txt pyiqa"
        ) from exc
    return DEFAULT_CONFIGS


def pyiqa_info(name: str) -> ScorerInfo:
    """Registry metadata of pyiqa metric ``name`` (mode and direction as pyiqa defines them)."""
    import pyiqa

    configs = _configs()
    if name not in configs:
        close = difflib.get_close_matches(name, list(configs), n=3, cutoff=0.5)
        hint = f"; did you mean {' or '.join('pyiqa:' + c for c in close)}?" if close else ""
        raise BenchError(f"unknown pyiqa metric {name!r}{hint} (see pyiqa.list_models())")
    if any(tag in name for tag in _NOT_PER_IMAGE):
        raise BenchError(f"pyiqa:{name} scores a whole image set, not frames; use it with pyiqa")
    cfg = configs[name]
    return ScorerInfo(
        name=f"pyiqa:{name}",
        mode=cfg["metric_mode"],
        lower_better=bool(cfg.get("lower_better", False)),
        input_range=(0.0, 1.0),
        unit="image",
        version=f"pyiqa {pyiqa.__version__}",
        arg_order="pred, ref" if cfg["metric_mode"] == "FR" else "frames",
        description=f"pyiqa metric {name} (score range {cfg.get('score_range', 'unknown')})",
    )


@contextlib.contextmanager
def no_downloads(label: str):
    """Make every download path used by pyiqa raise :class:`MissingWeightError` immediately."""
    import urllib.request

    import torch.hub

    def refuse(url, dst=None, *args, **kwargs):
        url = getattr(url, "full_url", url)
        where = f"{dst}" if dst else "the local cache"
        raise MissingWeightError(
            f"{label} needs the weight file {where} (from {url}), which is missing and there is "
            f"no network; download it on a connected machine and copy it to {where}"
        )

    patches = [(torch.hub, "download_url_to_file"), (urllib.request, "urlopen")]
    try:
        import pyiqa.utils.download_util as pyiqa_download

        patches.append((pyiqa_download, "download_url_to_file"))
    except ImportError:
        pass
    saved = [(mod, attr, getattr(mod, attr)) for mod, attr in patches]
    old_env = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    hf_constants = None
    try:
        import huggingface_hub.constants as hf_constants

        hf_saved = hf_constants.HF_HUB_OFFLINE
        hf_constants.HF_HUB_OFFLINE = True
    except ImportError:
        pass
    for mod, attr, _ in saved:
        setattr(mod, attr, refuse)
    try:
        yield
    finally:
        for mod, attr, original in saved:
            setattr(mod, attr, original)
        if hf_constants is not None:
            hf_constants.HF_HUB_OFFLINE = hf_saved
        if old_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old_env


def create_offline(name: str, *, device: str = "cpu"):
    """``pyiqa.create_metric(name)`` failing fast with the missing file instead of downloading."""
    import pyiqa
    import torch

    label = f"pyiqa:{name}"
    chatter = io.StringIO()  # pyiqa prints "Downloading: ..." to stdout before fetching
    try:
        with no_downloads(label), contextlib.redirect_stdout(chatter):
            metric = pyiqa.create_metric(name, as_loss=False, device=torch.device(device))
        sys.stderr.write(chatter.getvalue())  # keep stdout for results
        return metric
    except MissingWeightError:  # the refused download's "Downloading:" line would mislead
        raise
    except OSError as exc:  # Hugging Face offline mode: "... not in cache and offline"
        try:
            from huggingface_hub.constants import HF_HUB_CACHE
        except ImportError:
            HF_HUB_CACHE = "the Hugging Face cache"  # noqa: N806
        raise MissingWeightError(
            f"{label} needs Hugging Face model files that are not in {HF_HUB_CACHE} and there is "
            f"no network ({str(exc).splitlines()[0]}); download them on a connected machine "
            "into that cache"
        ) from exc
    except ImportError as exc:
        raise BenchError(
            f"{label} cannot be built: {exc}; install the missing package into the venv"
        ) from exc


class PyiqaScorer(Scorer):
    """A pyiqa metric called on batches of ``[N, H, W, 3]`` images in [0, 1]."""

    def __init__(self, name: str, *, device: str = "cpu", batch_size: int = 8) -> None:
        self.info = pyiqa_info(name)
        self.device = device
        self.batch_size = batch_size
        self.metric = create_offline(name, device=device)

    def score(  # [N,H,W,3] (+ ref) -> [N]
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """The pyiqa metric per image (or image pair)."""
        import torch

        pred = as_image_batch(pred, name="pred")
        if ref is not None:
            ref = as_image_batch(ref, name="ref")
            check_pair(pred, ref)
        out = []
        with torch.no_grad():
            for start in range(0, pred.shape[0], self.batch_size):
                stop = start + self.batch_size
                x = torch.from_numpy(pred[start:stop]).permute(0, 3, 1, 2).float().to(self.device)
                if ref is None:
                    value = self.metric(x)
                else:
                    y = torch.from_numpy(ref[start:stop]).permute(0, 3, 1, 2).float()
                    value = self.metric(x, y.to(self.device))
                out.append(np.asarray(value.detach().double().cpu()).reshape(-1))
        return np.concatenate(out)
