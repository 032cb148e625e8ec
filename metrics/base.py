"""What every scorer is: metadata (:class:`ScorerInfo`) plus a batched call.

Full-reference scorers are called ``scorer(pred, ref)`` (the distorted /
rendered image first, the reference second, as in pyiqa); no-reference
scorers ``scorer(frames)``. Both return float64 numpy arrays: one value per
image (``unit == "image"``) or one value per ordered sequence
(``unit == "sequence"``, an array of length 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from bench.threads import pinned_torch

Mode = Literal["FR", "NR"]
Unit = Literal["image", "sequence"]


@dataclass(frozen=True)
class ScorerInfo:
    """Metadata of one scorer entry.

    Attributes:
        name: Registry key (``psnr``, ``pyiqa:niqe`` ...).
        mode: ``"FR"`` (needs an aligned reference) or ``"NR"`` (no reference).
        lower_better: True when a smaller value means better quality.
        input_range: Range of the float inputs it accepts.
        unit: ``"image"`` (one value per frame, averaged over frames) or ``"sequence"``
            (one value per ordered sequence of views).
        version: Scorer implementation id + version of the package it reproduces.
        arg_order: How it is called: ``"pred, ref"`` or ``"frames"``.
        description: One line for ``--help`` and the README.
        min_size: Smallest image side, pixels, the scorer accepts (1: any).
    """

    name: str
    mode: Mode
    lower_better: bool
    input_range: tuple[float, float]
    unit: Unit
    version: str
    arg_order: str
    description: str
    min_size: int = 1


class Scorer:
    """Base class: subclasses set ``info`` and implement :meth:`score`."""

    info: ScorerInfo

    def score(  # [N,H,W,3] (+ ref [N,H,W,3]) -> [N] per image, or [1] per sequence
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """Score ``pred`` (against ``ref`` if full-reference): [N] per image or [1] per sequence."""
        raise NotImplementedError

    def __call__(  # [N,H,W,3] (+ ref [N,H,W,3]) -> [N] or [1]
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """Score a batch; FR scorers require ``ref`` and NR scorers refuse it."""
        from bench.errors import BenchError

        if self.info.mode == "FR" and ref is None:
            raise BenchError(
                f"{self.info.name} is full-reference: pass aligned reference images (--gt)"
            )
        if self.info.mode == "NR" and ref is not None:
            raise BenchError(f"{self.info.name} is no-reference: do not pass reference images")
        with pinned_torch(SCORER_THREADS):  # threads fixed, no oneDNN (bench.threads)
            return self.score(pred, ref)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name!r}, mode={self.info.mode})"


#: CPU threads of torch while a scorer runs: float reductions depend on the thread count, so a
#: fixed count keeps scores byte-identical whatever the process set before (a trainer's or a
#: worker's ``torch.set_num_threads``) and on every CPU (MKL's CNR needs a fixed count).
SCORER_THREADS = 1


def resolve_device(device: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when available, else ``"cpu"``; validate the others."""
    from bench.errors import BenchError

    if device not in ("auto", "cpu", "cuda") and not device.startswith("cuda:"):
        raise BenchError(f"unknown device {device!r}; use cpu, cuda or auto")
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BenchError("device cuda requested but torch sees no CUDA GPU; use --device cpu")
    return device
