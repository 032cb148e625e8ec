"""The behaviour-cloned network of the learned policies: small CNNs on wrist images + proprio.

Input: both wrist fisheye images (resized to ``image_size`` by area averaging, so any
env image size works) and the 8-D proprioception; nothing else. Output: the first
``horizon`` rows of the expert's action chunk, predicted as a trajectory in the frame of
the TCP at the query (position x y z, metres; yaw about the tool z axis, rad; finger
opening, metres) and turned back into the env's delta rows (:func:`decode_chunk`): the
rows the env executes (``execute``: 16 Cup, 8 Tape/Pen).

Network (:class:`BCNet`): one convolutional encoder shared by both lenses (stride-2 3x3
convolutions, ReLU), read out by a spatial softmax (expected image position of each
channel: where things are) and a global average (what is there); the two lenses'
features, a lens-independent proprio embedding, then an MLP head. Targets and proprio are
standardised with the training set's mean and std (stored with the weights).

This module is the network, its config and its inference (:func:`load_network`,
:func:`predict_chunk`, used by :class:`bench.policies.learned.LearnedPolicy`); the shipped
recipes are :mod:`bench.policies.bc_recipes`, and the demo trains the weights
(:mod:`bench.demo.bc_training`, ``bench demo train-policies``). numpy only at import
(torch is imported by the functions that need it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

TARGET_DIM = 5  # x, y, z (m, TCP frame at the query), yaw (rad), opening (m)
AUX_DIM = 5  # object pose in the TCP frame: x, y, z (m), cos and sin of 2 x relative yaw


@dataclass(frozen=True)
class BCConfig:
    """One learned policy's training config (the single source of its defaults).

    Attributes:
        name: Policy name (registry name, asset folder).
        task: ``cup``, ``tape`` or ``pen``.
        episodes: Demonstration episodes used (the first ``episodes`` of the dataset).
        image_size: Square network input size per lens, pixels.
        augment: Random shifts (pad ``shift_px``, crop) and colour jitter while training.
        shift_px: Largest random shift of the augmentation, pixels at the input size.
        jitter: Largest relative brightness / per-channel gain change of the augmentation.
        blur_sigma: Largest std (pixels at the input size) of the augmentation's Gaussian
            blur, drawn per sample from U(0, blur_sigma); 0 = no blur.
        channels: Output channels of the encoder's 3x3 convolutions.
        strides: Stride of each convolution (empty: 2 each; ``(2, 2, 2, 2)`` gives a 4 x 4
            map at 64 px; a stride 1 keeps a finer map for the spatial softmax to localise
            small objects).
        hidden: Width of the MLP head.
        horizon: Chunk rows predicted (the env's ``execute`` of the task).
        epochs: Passes over the data.
        batch_size: Samples per step.
        lr: Adam learning rate (cosine decay to 0 over the run).
        weight_decay: AdamW weight decay.
        seed: Seed of the initialisation, the epoch order and the augmentation.
        aux_weight: Weight of the auxiliary loss that predicts the object's pose in the
            TCP frame (``object_pose`` of the recording, a train-time-only privileged
            target; 0 = none). It teaches the encoder where the object is; the policy's
            inputs stay the wrist images and proprio.
        first_query_repeat: Times each episode's first query (``frame == 0``) is drawn per
            epoch (1: once, like every other query). The first view is the only one that
            shows where the object starts, and it is ~4 % of a recording's queries; after
            the first chunk the gripper is always above the object.
    """

    name: str = "bc"
    task: str = "cup"
    episodes: int = 300
    image_size: int = 64
    augment: bool = True
    shift_px: int = 4
    jitter: float = 0.2
    blur_sigma: float = 0.0
    channels: tuple[int, ...] = (16, 32, 32, 32)
    strides: tuple[int, ...] = ()
    hidden: int = 128
    horizon: int = 16
    epochs: int = 30
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0
    aux_weight: float = 0.0
    first_query_repeat: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "channels", tuple(int(c) for c in self.channels))
        object.__setattr__(self, "strides", tuple(int(c) for c in self.strides)
                           or (2,) * len(self.channels))
        if len(self.strides) != len(self.channels) or min(self.strides, default=1) < 1:
            raise ValueError("strides must give one stride >= 1 per entry of channels")
        if self.blur_sigma < 0:
            raise ValueError(f"blur_sigma must be >= 0 px, got {self.blur_sigma}")
        if self.aux_weight < 0:
            raise ValueError(f"aux_weight must be >= 0, got {self.aux_weight}")
        if self.first_query_repeat < 1:
            raise ValueError(f"first_query_repeat must be >= 1, got {self.first_query_repeat}")
        if self.task not in ("cup", "tape", "pen"):
            raise ValueError(f"task must be cup, tape or pen, got {self.task!r}")
        if self.image_size < 16 or self.episodes < 1 or self.horizon < 1 or self.epochs < 1:
            raise ValueError("image_size >= 16, episodes, horizon and epochs >= 1 required")
        if not self.channels or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("channels must be non-empty, batch_size >= 1 and lr > 0")

    def to_json(self) -> dict[str, Any]:
        """The resolved config as a JSON-ready dict."""
        out = dataclasses.asdict(self)
        out["channels"] = list(self.channels)
        out["strides"] = list(self.strides)
        if self.first_query_repeat == 1:  # added after most shipped weights: their configs stay
            del out["first_query_repeat"]
        if self.blur_sigma == 0:  # likewise
            del out["blur_sigma"]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BCConfig:
        """Inverse of :meth:`to_json` (fields added later take their defaults)."""
        return cls(**data)


# -- action chunk <-> trajectory targets --------------------------------------------------
def encode_chunk(actions: np.ndarray, horizon: int) -> np.ndarray:  # [N, T, 7] -> [N, H, 5]
    """Delta rows -> the trajectory in the query's TCP frame (x, y, z, yaw, opening).

    The expert's rows rotate about the tool z axis only (top-down grasps), so the chained
    pose of row ``k`` is ``(R_z(psi_k), p_k)`` with ``psi_k = sum rz`` and
    ``p_k = p_{k-1} + R_z(psi_{k-1}) t_k``.
    """
    rows = np.asarray(actions, dtype=np.float64)[:, :horizon]
    n = len(rows)
    out = np.zeros((n, horizon, TARGET_DIM))
    psi = np.zeros(n)
    p = np.zeros((n, 3))
    for k in range(horizon):
        c, s = np.cos(psi), np.sin(psi)
        t = rows[:, k, :3]
        p = p + np.stack([c * t[:, 0] - s * t[:, 1], s * t[:, 0] + c * t[:, 1], t[:, 2]], 1)
        psi = psi + rows[:, k, 5]
        out[:, k, :3], out[:, k, 3], out[:, k, 4] = p, psi, rows[:, k, 6]
    return out.astype(np.float32)


def decode_chunk(trajectory: np.ndarray) -> np.ndarray:  # [H, 5] -> [H, 7] float32
    """Inverse of :func:`encode_chunk` for one sample: env delta rows."""
    traj = np.asarray(trajectory, dtype=np.float64)
    rows = np.zeros((len(traj), 7))
    prev_p, prev_psi = np.zeros(3), 0.0
    for k, (x, y, z, psi, opening) in enumerate(traj):
        d = np.array([x, y, z]) - prev_p
        c, s = np.cos(-prev_psi), np.sin(-prev_psi)
        rows[k, :3] = [c * d[0] - s * d[1], s * d[0] + c * d[1], d[2]]
        rows[k, 5] = psi - prev_psi
        rows[k, 6] = max(0.0, opening)
        prev_p, prev_psi = np.array([x, y, z]), psi
    return rows.astype(np.float32)


# -- network ------------------------------------------------------------------------------
def build_network(config: BCConfig) -> Any:
    """A :class:`BCNet` (torch module) for ``config``."""
    import torch
    from torch import nn

    class SpatialSoftmax(nn.Module):
        """[B, C, h, w] -> [B, 2C]: expected (x, y) in [-1, 1] of each channel's softmax."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, c, h, w = x.shape
            attention = torch.softmax(x.reshape(b, c, h * w), dim=-1).reshape(b, c, h, w)
            ys = torch.linspace(-1.0, 1.0, h, dtype=x.dtype)
            xs = torch.linspace(-1.0, 1.0, w, dtype=x.dtype)
            ex = (attention.sum(2) * xs).sum(-1)
            ey = (attention.sum(3) * ys).sum(-1)
            return torch.cat([ex, ey], dim=1)

    class BCNet(nn.Module):
        """Shared lens encoder + proprio embedding + MLP head (module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            layers, c_in = [], 3
            for c_out, stride in zip(config.channels, config.strides, strict=True):
                layers += [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.ReLU()]
                c_in = c_out
            self.encoder = nn.Sequential(*layers)
            self.keypoints = SpatialSoftmax()
            c = config.channels[-1]
            self.proprio = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
            self.head = nn.Sequential(
                nn.Linear(2 * 3 * c + 32, config.hidden), nn.ReLU(),
                nn.Linear(config.hidden, config.hidden), nn.ReLU(),
                nn.Linear(config.hidden, config.horizon * TARGET_DIM))
            for name in ("proprio_mean", "proprio_std", "target_mean", "target_std"):
                size = 8 if name.startswith("proprio") else config.horizon * TARGET_DIM
                self.register_buffer(name, torch.zeros(size) if "mean" in name
                                     else torch.ones(size))
            if config.aux_weight > 0:  # train-time head: the object pose in the TCP frame
                self.aux = nn.Sequential(nn.Linear(2 * 3 * c + 32, config.hidden), nn.ReLU(),
                                         nn.Linear(config.hidden, AUX_DIM))
                self.register_buffer("aux_mean", torch.zeros(AUX_DIM))
                self.register_buffer("aux_std", torch.ones(AUX_DIM))

        def lens(self, image: torch.Tensor) -> torch.Tensor:  # [B, 3, S, S] in [0, 1]
            features = self.encoder(image - 0.5)
            return torch.cat([self.keypoints(features), features.mean(dim=(2, 3))], dim=1)

        def features(self, left: torch.Tensor, right: torch.Tensor,
                     proprio: torch.Tensor) -> torch.Tensor:  # -> [B, 6C + 32]
            state = (proprio - self.proprio_mean) / self.proprio_std
            return torch.cat([self.lens(left), self.lens(right), self.proprio(state)], dim=1)

        def forward(self, left: torch.Tensor, right: torch.Tensor,
                    proprio: torch.Tensor) -> torch.Tensor:  # -> [B, H*5] standardised
            return self.head(self.features(left, right, proprio))

    return BCNet()


def prepare_images(images: np.ndarray, size: int) -> Any:  # uint8 [B, H, W, 3] -> [B, 3, S, S]
    """uint8 images -> float tensor in [0, 1] at ``size`` x ``size`` (area resize)."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="area")
    return x



# -- inference ----------------------------------------------------------------------------
def load_network(directory: Any) -> tuple[Any, BCConfig]:
    """The trained network (eval mode) and its config from a policy directory."""
    from pathlib import Path

    from safetensors.torch import load_file

    directory = Path(directory)
    config = BCConfig.from_json(json.loads((directory / "config.json").read_text()))
    net = build_network(config)
    net.load_state_dict(load_file(str(directory / "model.safetensors")))
    net.eval()
    return net, config


#: torch threads of one policy query: a fixed count, so the chunk is the same bits whatever
#: pool the process has (MKL's cross-CPU guarantee, MKL_CBWR in bench.numerics, holds only for
#: a fixed count; on AMD EPYC 1 and 8 threads gave other chunks under it). Its cost beside the
#: unpinned query: docs/speed/numerics.md (about 1.5x of a millisecond; small against a frame).
POLICY_THREADS = 1


def predict_chunk(net: Any, config: BCConfig, left: np.ndarray, right: np.ndarray,
                  proprio: np.ndarray) -> np.ndarray:  # uint8 [H, W, 3] x2, [8] -> [h, 7]
    """One query: the env delta rows the network predicts (:data:`POLICY_THREADS` threads)."""
    import torch

    from bench.threads import pinned_torch

    with torch.no_grad(), pinned_torch(POLICY_THREADS):
        out = net(prepare_images(left[None], config.image_size),
                  prepare_images(right[None], config.image_size),
                  torch.from_numpy(np.asarray(proprio, dtype=np.float32)[None]))
        trajectory = (out[0] * net.target_std + net.target_mean).reshape(config.horizon,
                                                                         TARGET_DIM)
    return decode_chunk(trajectory.numpy())
