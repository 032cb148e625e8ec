"""LPIPS (Zhang et al. 2018) with the ``lpips`` package's network: AlexNet + v0.1 linear layers.

The network object is ``lpips.LPIPS(net="alex", version="0.1")`` itself; only
the ImageNet AlexNet backbone weights come from :mod:`metrics.lpips_weights`
(offline source, verified) instead of torchvision's downloader. Inputs are
images in [0, 1]; they are mapped to [-1, 1] internally, as
``lpips.LPIPS(..., normalize=True)`` does. Argument order is ``(pred, ref)``;
the distance is symmetric.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, check_pair
from metrics.lpips_weights import load_alexnet_features
from metrics.registry import scorer_info

MIN_SIZE = scorer_info("lpips").min_size  # the registry's metadata is the one source


def build_lpips_network(*, device: str = "cpu"):
    """``lpips.LPIPS`` (AlexNet, v0.1) with offline backbone weights, in eval mode.

    Returns:
        (network, description of the backbone weight source).
    """
    import lpips
    import torch

    # pnet_rand=True: no torchvision download; the random init is overwritten below.
    # fork_rng keeps that throwaway init from advancing the caller's global torch RNG.
    with (
        torch.random.fork_rng(devices=[]),
        contextlib.redirect_stdout(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", UserWarning)  # torchvision's 'pretrained' deprecation
        net = lpips.LPIPS(pretrained=True, net="alex", version="0.1", pnet_rand=True, verbose=False)
    features, source = load_alexnet_features()
    slices = {0: "slice1.0", 3: "slice2.3", 6: "slice3.6", 8: "slice4.8", 10: "slice5.10"}
    state = {}
    for idx, prefix in slices.items():
        for kind in ("weight", "bias"):
            array = np.array(features[f"features.{idx}.{kind}"])
            state[f"{prefix}.{kind}"] = torch.from_numpy(array)
    net.net.load_state_dict(state, strict=True)
    net = net.to(device).eval()
    for param in net.parameters():
        param.requires_grad_(False)
    return net, source


def lpips_distance(
    net, pred: np.ndarray, ref: np.ndarray, *, device: str = "cpu", batch_size: int = 8
) -> np.ndarray:  # [N,H,W,3] x2 -> [N]
    """LPIPS per image pair with a network from :func:`build_lpips_network`."""
    import torch

    pred = as_image_batch(pred, name="pred")  # contiguous float64 (torch.from_numpy)
    ref = as_image_batch(ref, name="ref")
    check_pair(pred, ref)
    if min(pred.shape[1:3]) < MIN_SIZE:
        raise BenchError(
            f"LPIPS (AlexNet) needs images of at least {MIN_SIZE}x{MIN_SIZE} pixels, got "
            f"{pred.shape[2]}x{pred.shape[1]}; score larger images"
        )
    out = []
    with torch.no_grad():
        for start in range(0, pred.shape[0], batch_size):
            x = torch.from_numpy(pred[start : start + batch_size]).permute(0, 3, 1, 2)
            y = torch.from_numpy(ref[start : start + batch_size]).permute(0, 3, 1, 2)
            x = x.to(device=device, dtype=torch.float32)
            y = y.to(device=device, dtype=torch.float32)
            d = net(x * 2 - 1, y * 2 - 1)  # [n, 1, 1, 1]
            out.append(d.reshape(-1).double().cpu().numpy())
    return np.concatenate(out)


class LPIPS(Scorer):
    """Registry scorer: LPIPS AlexNet v0.1, batched over frames."""

    def __init__(self, info: ScorerInfo, *, device: str = "cpu", batch_size: int = 8) -> None:
        self.info = info
        self.device = device
        self.batch_size = batch_size
        self.net, self.weights_source = build_lpips_network(device=device)

    def score(  # [N,H,W,3] x2 -> [N]
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """LPIPS distance per image pair (lower is better)."""
        return lpips_distance(self.net, pred, ref, device=self.device, batch_size=self.batch_size)
