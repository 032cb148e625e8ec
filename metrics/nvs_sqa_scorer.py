"""NVS-SQA (no-reference quality of novel-view-synthesis sequences), run on in-memory frames.

The ``nvs-sqa`` package's ``QualityAssessor`` reads each sequence from a
folder: it sorts ``*.png|jpg|jpeg`` by file name, loads each file with PIL as
8-bit RGB divided by 255, runs the view encoder in batches of 10, adds
sinusoidal position encodings in view order, runs the transformer over the
sequence, keeps the last token ("fuse: last"), projects it to 384 features and
maps those to a JOD-like score with the shipped ridge regressor. Higher is better.

:class:`NVSSQA` loads the same checkpoint and regressor (from the package's
wheel) and repeats those steps on an in-memory ``[N, H, W, 3]`` sequence.
Float frames are first rounded to 8 bits exactly as saving them to PNG would,
so the score equals ``QualityAssessor`` on the same frames written to a folder.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np

from bench.errors import BenchError
from metrics.base import Scorer, ScorerInfo
from metrics.images import as_image_batch, quantize_8bit
from metrics.registry import scorer_info

VIEW_BATCH = 10  # QualityAssessor's encoder batch size (kept: batching changes float rounding)
MIN_SIZE = scorer_info("nvs-sqa").min_size  # the registry's metadata is the one source


def load_nvs_sqa(device: str = "cpu"):
    """(encoder in eval mode, ridge regressor) exactly as ``nvs_sqa.QualityAssessor`` loads them."""
    from nvs_sqa.utils import load_model, load_regression_model

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's nested-tensor notice
        encoder = load_model(device)  # prints the checkpoint path (silenced)
    encoder.eval()
    with warnings.catch_warnings():
        # the ridge was pickled with scikit-learn 1.3; a Ridge's predict is a dot product + bias
        warnings.simplefilter("ignore")
        regressor = load_regression_model()
    return encoder, regressor


def sequence_features(encoder, frames_u8: np.ndarray, *, device: str = "cpu") -> np.ndarray:
    """384-d NVS-SQA features of one ordered sequence ``[N, H, W, 3]`` uint8 (view order kept)."""
    import torch

    if encoder.img_mode != "RGB":
        raise BenchError(f"unsupported nvs-sqa image mode {encoder.img_mode!r}; expected RGB")
    x = torch.from_numpy(np.ascontiguousarray(frames_u8.transpose(0, 3, 1, 2))).float()
    x = x / 255.0  # [N, 3, H, W] in [0, 1], as nvs_sqa's img_path_to_tensor
    with torch.no_grad():
        per_view = []
        for start in range(0, x.shape[0], VIEW_BATCH):
            feats = encoder.view_encoder(x[start : start + VIEW_BATCH].to(device))
            if encoder.with_low_level is not None:
                feats = torch.concat(feats, dim=1)
            per_view.append(feats)
        views = torch.cat(per_view, dim=0).unsqueeze(1)  # [N, 1, F] (sequence, batch, feature)
        if encoder.model_type == "TransEncoder":
            pos = encoder.generate_positional_encodings(
                views.shape[0], encoder.final_view_enc_size, device
            )
            views = views + pos.unsqueeze(1).expand(-1, 1, -1)
        seq = encoder.angular_encoder(views)
        if encoder.model_type == "LSTM":
            seq, _ = seq
        fused = encoder.fuse_angular_features(seq)  # [1, F]
        out = encoder.fc(fused.squeeze(1)).squeeze(0)  # [384]
    return out.cpu().numpy()


def to_sequence_u8(frames: np.ndarray) -> np.ndarray:
    """Validate a sequence and round it to uint8 ``[N, H, W, 3]``."""
    arr = np.asarray(frames)
    if arr.dtype == np.uint8:
        as_image_batch(arr, name="frames", convert=False)  # shape checks only, no copy
        return arr if arr.ndim == 4 else arr[None]
    return quantize_8bit(as_image_batch(arr, name="frames"))


class NVSSQA(Scorer):
    """Registry scorer: one NVS-SQA score per ordered sequence of views (higher is better)."""

    def __init__(self, info: ScorerInfo, *, device: str = "cpu") -> None:
        self.info = info
        self.device = device
        self.encoder, self.regressor = load_nvs_sqa(device)

    def features(self, frames: np.ndarray) -> np.ndarray:  # [N,H,W,3] -> [384]
        """The 384-d NVS-SQA feature of a frame sequence (frames >= MIN_SIZE pixels a side)."""
        seq = to_sequence_u8(frames)
        if min(seq.shape[1:3]) < MIN_SIZE:
            raise BenchError(
                f"NVS-SQA needs frames of at least {MIN_SIZE}x{MIN_SIZE} pixels, got "
                f"{seq.shape[2]}x{seq.shape[1]}; score larger frames"
            )
        return sequence_features(self.encoder, seq, device=self.device)

    def score(  # [N,H,W,3] -> [1] (one sequence)
        self, pred: np.ndarray, ref: np.ndarray | None = None
    ) -> np.ndarray:
        """Score one sequence ``pred`` ``[N, H, W, 3]`` (or a list of equally sized frames)."""
        if isinstance(pred, list | tuple):
            sizes = {np.shape(f) for f in pred}
            if len(sizes) > 1:
                shown = ", ".join(str(s) for s in sorted(sizes)[:4])
                raise BenchError(
                    f"NVS-SQA frames have different resolutions ({shown}); render/resize every "
                    "view of a sequence to one size"
                )
            if not pred:
                raise BenchError("NVS-SQA got an empty sequence; pass at least one frame")
            pred = np.stack(pred)
        feats = self.features(pred)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = self.regressor.predict([feats])[0]
        return np.asarray([value], dtype=np.float64)
