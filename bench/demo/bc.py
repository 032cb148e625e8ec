"""Behaviour cloning of the demo's learned policies: small CNNs on wrist images + proprio.

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

Training is deterministic: ``torch.manual_seed``, ``torch.use_deterministic_algorithms``,
one thread, the epoch order and the augmentation drawn from seeded generators; the same
dataset and :class:`BCConfig` give byte-identical weights (:func:`weights_sha256`).
"""

from __future__ import annotations

import dataclasses
import hashlib
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


def augment_images(x: Any, generator: Any, *, shift_px: int, jitter: float) -> Any:
    """Random shift (replicate-pad, crop) and brightness / channel-gain jitter, per sample."""
    import torch
    import torch.nn.functional as F

    b, _, h, w = x.shape
    padded = F.pad(x, (shift_px,) * 4, mode="replicate")
    offsets = torch.randint(0, 2 * shift_px + 1, (b, 2), generator=generator)
    out = torch.stack([padded[i, :, oy:oy + h, ox:ox + w]
                       for i, (oy, ox) in enumerate(offsets.tolist())])
    gain = 1.0 + jitter * (2 * torch.rand(b, 1, 1, 1, generator=generator) - 1)
    channel = 1.0 + 0.5 * jitter * (2 * torch.rand(b, 3, 1, 1, generator=generator) - 1)
    return (out * gain * channel).clamp(0.0, 1.0)


# -- training -----------------------------------------------------------------------------
def _deterministic_torch() -> None:
    """Deterministic kernels on one thread.

    (Its compiler stack, triton, loads safely after MuJoCo has rendered: the renderer loads
    triton before its first GL context, ``bench.sim.observation._load_triton_first``.)
    """
    import torch

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def train_policy(  # -> (state_dict of tensors, training log)
    config: BCConfig, data: dict[str, np.ndarray], *, select: bool = True,
    init_state: dict[str, Any] | None = None, progress: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train one policy on ``data`` (deterministic).

    Args:
        config: The recipe (``epochs``, ``lr`` and ``seed`` of this run).
        data: A recording (:mod:`bench.demo.demos` arrays; ``object_pose`` when
            ``config.aux_weight > 0``).
        select: Train on the first ``config.episodes`` episodes (False: on all of ``data``,
            e.g. a DAgger aggregate).
        init_state: Warm start from these weights (their standardisation included), as a
            DAgger round fine-tunes the previous round's policy; None: fresh initialisation.
        progress: Show a progress bar.
    """
    import time

    import torch
    from tqdm import tqdm

    from bench.demo.demos import select_episodes
    from bench.errors import BenchError

    torch.manual_seed(config.seed)
    _deterministic_torch()
    subset = select_episodes(data, config.episodes) if select else data
    if config.aux_weight > 0 and "object_pose" not in subset:
        raise BenchError(f"policy {config.name!r} needs the object_pose array of a recording; "
                         "re-record the demonstrations with this version of the bench")
    left = prepare_images(subset["wrist_left"], config.image_size)
    right = prepare_images(subset["wrist_right"], config.image_size)
    proprio = torch.from_numpy(subset["proprio"].astype(np.float32))
    targets = torch.from_numpy(encode_chunk(subset["actions"], config.horizon)
                               .reshape(len(proprio), -1))
    net = build_network(config)
    if init_state is not None:
        net.load_state_dict(init_state)
    else:
        net.proprio_mean.copy_(proprio.mean(0))
        net.proprio_std.copy_(proprio.std(0).clamp_min(1e-3))
        net.target_mean.copy_(targets.mean(0))
        net.target_std.copy_(targets.std(0).clamp_min(1e-3))
    normalised = (targets - net.target_mean) / net.target_std
    aux = None
    if config.aux_weight > 0:
        pose = torch.from_numpy(subset["object_pose"].astype(np.float32))
        if init_state is None:
            net.aux_mean.copy_(pose.mean(0))
            net.aux_std.copy_(pose.std(0).clamp_min(1e-3))
        aux = (pose - net.aux_mean) / net.aux_std
    optimiser = torch.optim.AdamW(net.parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)
    n = len(proprio)
    # what an epoch draws: every query once, first queries first_query_repeat times
    pool = np.arange(n)
    if config.first_query_repeat > 1:
        firsts = np.flatnonzero(subset["frame"] == 0)
        pool = np.concatenate([pool, np.repeat(firsts, config.first_query_repeat - 1)])
    drawn = len(pool)
    steps_per_epoch = (drawn + config.batch_size - 1) // config.batch_size
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser,
                                                          config.epochs * steps_per_epoch)
    generator = torch.Generator().manual_seed(config.seed)
    order_rng = np.random.default_rng(config.seed)
    losses, aux_losses = [], []
    start = time.perf_counter()
    bar = tqdm(range(config.epochs), desc=f"train {config.name}/{config.task}", unit="epoch",
               disable=not progress, mininterval=5.0)
    for _ in bar:
        order = torch.from_numpy(pool[order_rng.permutation(drawn)])
        total = total_aux = 0.0
        for first in range(0, drawn, config.batch_size):
            idx = order[first:first + config.batch_size]
            lb, rb = left[idx], right[idx]
            if config.augment:
                lb = augment_images(lb, generator, shift_px=config.shift_px,
                                    jitter=config.jitter)
                rb = augment_images(rb, generator, shift_px=config.shift_px,
                                    jitter=config.jitter)
            features = net.features(lb, rb, proprio[idx])
            loss = torch.mean((net.head(features) - normalised[idx]) ** 2)
            total += loss.item() * len(idx)
            if aux is not None:  # the encoder must say where the object is
                aux_loss = torch.mean((net.aux(features) - aux[idx]) ** 2)
                total_aux += aux_loss.item() * len(idx)
                loss = loss + config.aux_weight * aux_loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
        losses.append(total / drawn)
        aux_losses.append(total_aux / drawn)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", aux=f"{aux_losses[-1]:.4f}")
    log = {"samples": int(n), "episodes": int(config.episodes) if select else None,
           "epochs": config.epochs,
           "final_loss": round(losses[-1], 6), "losses": [round(v, 6) for v in losses],
           "train_seconds": round(time.perf_counter() - start, 1),
           "parameters": int(sum(p.numel() for p in net.parameters()))}
    if aux is not None:
        log["aux_losses"] = [round(v, 6) for v in aux_losses]
    if drawn != n:
        log["drawn_per_epoch"] = int(drawn)
    return {k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}, log


def weights_sha256(state: dict[str, Any]) -> str:
    """sha256 over the tensors of a state dict (sorted names, dtype, shape, bytes)."""
    digest = hashlib.sha256()
    for name in sorted(state):
        array = state[name].detach().cpu().numpy()
        digest.update(f"{name}:{array.dtype.str}:{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def save_policy(directory: Any, config: BCConfig, state: dict[str, Any],
                manifest: dict[str, Any]) -> None:
    """Write ``model.safetensors``, ``config.json`` and ``manifest.json`` into ``directory``."""
    from pathlib import Path

    from safetensors.torch import save_file

    from bench.provenance import atomic_write_json

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # one metadata key: safetensors writes a multi-key metadata map in a random order,
    # which would make the file bytes (not the tensors) differ between runs
    save_file(state, str(directory / "model.safetensors"),
              metadata={"policy": f"{config.name}/{config.task}"})
    atomic_write_json(directory / "config.json", config.to_json())
    atomic_write_json(directory / "manifest.json", manifest)


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


def predict_chunk(net: Any, config: BCConfig, left: np.ndarray, right: np.ndarray,
                  proprio: np.ndarray) -> np.ndarray:  # uint8 [H, W, 3] x2, [8] -> [h, 7]
    """One query: the env delta rows the network predicts."""
    import torch

    with torch.no_grad():
        out = net(prepare_images(left[None], config.image_size),
                  prepare_images(right[None], config.image_size),
                  torch.from_numpy(np.asarray(proprio, dtype=np.float32)[None]))
        trajectory = (out[0] * net.target_std + net.target_mean).reshape(config.horizon,
                                                                         TARGET_DIM)
    return decode_chunk(trajectory.numpy())


# -- the shipped recipes and `bench demo train-policies` ----------------------------------
TASK_HORIZON = {"cup": 16, "tape": 8, "pen": 8}  # the env's execute rows per task
# Pen episodes give ~1.3x the queries of Cup/Tape: 20 epochs keep the samples seen per run
# close to the others' (~130k vs ~145k) and the CPU time inside the budget.
TASK_EPOCHS = {"cup": 30, "tape": 30, "pen": 20}
DEMO_EPISODES = 300  # demonstrations recorded per task (bc-large uses all of them)
#: name -> the recipe fields that differ (what a real lab varies); task, horizon per task.
#: ``bc-aux``: ``bc-large``'s data, colour jitter but no random shift (a 4 px
#: shift of a 64 px fisheye moves the 2-4 px object as far as its real displacements do,
#: with the same target: it teaches the network to ignore where the object is), a finer
#: last feature map (8 x 8 instead of 4 x 4) for the spatial softmax and the auxiliary
#: object-pose loss (docs/demo-policies.md: bc-large's first chunk went to the same place
#: whatever the object's position; it had not learned to localise the object).
POLICY_RECIPES = {
    "bc-large": {"episodes": DEMO_EPISODES, "image_size": 64, "augment": True},
    "bc-small": {"episodes": 60, "image_size": 32, "augment": False},
    "bc-aux": {"episodes": DEMO_EPISODES, "image_size": 64, "augment": True, "shift_px": 0,
               "strides": (2, 2, 2, 1), "aux_weight": 1.0},
}
TOOL = "train-policies/1"


@dataclass(frozen=True)
class DaggerConfig:
    """DAgger rounds on top of a trained recipe (Ross et al. 2011).

    Round ``r`` rolls out the current policy (the base recipe's weights for round 0, then
    the previous round's), at every query stores what the policy saw and the privileged
    expert's chunk for that state as the label, aggregates the demonstrations and all
    rounds' rollouts so far, and fine-tunes the current weights on the aggregate.

    Attributes:
        base: Recipe (:data:`POLICY_RECIPES`) whose trained weights round 0 rolls out; its
            network config and standardisation are kept.
        rounds: DAgger rounds.
        episodes: Learner rollouts per round (cycled over the ground-truth worlds).
        condition_offset: Round ``r``, episode ``i`` starts from condition
            ``condition_offset + r * episodes + i`` (6000+: disjoint from the demos' 5000+,
            the study's 100+ / 1000+ and the evaluation's 9000+).
        beta: Probability that a query executes the expert's chunk instead of the
            learner's (DAgger's mixture; 0 = pure learner).
        seed: Seed of the mixture draws (``default_rng([seed, r, i])``).
        max_frames: Rollout time limit, 10 Hz frames (as the evaluation).
        epochs: Fine-tuning epochs per round on the aggregate.
        lr: Fine-tuning learning rate (cosine to 0 within each round).
    """

    base: str = "bc-aux"
    rounds: int = 2
    episodes: int = 60
    condition_offset: int = 6000
    beta: float = 0.0
    seed: int = 0
    max_frames: int = 200
    epochs: int = 10
    lr: float = 1e-3

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.episodes < 1 or self.epochs < 1 or self.max_frames < 1:
            raise ValueError("rounds, episodes, epochs and max_frames must be >= 1")
        if not 0.0 <= self.beta <= 1.0 or self.lr <= 0:
            raise ValueError("beta must lie in [0, 1] and lr must be > 0")

    def to_json(self) -> dict[str, Any]:
        """The resolved config as a JSON-ready dict."""
        return dataclasses.asdict(self)


#: name -> DAgger recipe (a registry entry on top of a :data:`POLICY_RECIPES` base).
DAGGER_RECIPES = {"bc-aux-dagger": DaggerConfig()}
#: DAgger fields that differ for one task. Pen runs five rounds: its learner's own rollouts
#: (conditions 6000+) succeeded 0, 3, 9, 16 and 42 times in 60 over rounds 0-4, where Tape's
#: two rounds were enough (docs/demo-policies.md). Cup (trained after Pen) takes Pen's.
TASK_DAGGER_FIELDS = {("bc-aux-dagger", "pen"): {"rounds": 5},
                      ("bc-aux-dagger", "cup"): {"rounds": 5}}


def dagger_recipe(name: str, task: str) -> DaggerConfig:
    """The :class:`DaggerConfig` of DAgger recipe ``name`` on ``task``."""
    return dataclasses.replace(DAGGER_RECIPES[name], **TASK_DAGGER_FIELDS.get((name, task), {}))


#: Tasks each recipe is trained and shipped for (default: all three).
RECIPE_TASKS: dict[str, tuple[str, ...]] = {}
ALL_RECIPES = (*POLICY_RECIPES, *DAGGER_RECIPES)


def recipe_tasks(name: str) -> tuple[str, ...]:
    """The tasks recipe ``name`` is trained and shipped for."""
    return RECIPE_TASKS.get(name, ("cup", "tape", "pen"))


#: Recipe fields that differ for one task. Pen's ``bc-aux`` draws each first query 8 times
#: per epoch (first queries: 4 % of a Pen recording's queries -> 26 % of an epoch): its
#: auxiliary head localised the pen at the first query no better than the mean (9.0 vs 8.9 cm
#: median on its own training episodes), while the same network trained on the first queries
#: alone did to 1.2 cm on held-out episodes (docs/demo-policies.md).
#: Cup (trained after Pen) takes Pen's settings; its bc-aux succeeded 60/60 on its own
#: DAgger rollouts from round 0.
TASK_RECIPE_FIELDS = {("bc-aux", "pen"): {"first_query_repeat": 8},
                      ("bc-aux", "cup"): {"first_query_repeat": 8}}


def recipe(name: str, task: str, **overrides: Any) -> BCConfig:
    """The :class:`BCConfig` of shipped policy ``name`` on ``task``.

    A DAgger recipe has its base's network config under its own name.
    """
    if name in DAGGER_RECIPES:
        return dataclasses.replace(recipe(DAGGER_RECIPES[name].base, task, **overrides),
                                   name=name)
    return BCConfig(name=name, task=task, horizon=TASK_HORIZON[task],
                    **{"epochs": TASK_EPOCHS[task], **POLICY_RECIPES[name],
                       **TASK_RECIPE_FIELDS.get((name, task), {}), **overrides})


@dataclass(frozen=True)
class TrainPoliciesConfig:
    """What ``bench demo train-policies`` records and trains.

    Attributes:
        tasks: Tasks to (re)build.
        policies: Recipe names (:data:`POLICY_RECIPES`, :data:`DAGGER_RECIPES`); each is
            trained on the tasks of :func:`recipe_tasks` only.
        episodes: Demonstrations recorded per task (>= every recipe's ``episodes``).
        epochs: Training epochs (None: :class:`BCConfig`'s default).
        dagger: Override of every DAgger recipe's fields (e.g. ``{"rounds": 1}``; None:
            the recipes' own).
    """

    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    policies: tuple[str, ...] = ALL_RECIPES
    episodes: int = DEMO_EPISODES
    epochs: int | None = None
    dagger: dict[str, Any] | None = None

    def dagger_config(self, name: str, task: str) -> DaggerConfig:
        """The DAgger config of recipe ``name`` on ``task`` (with :attr:`dagger` applied)."""
        return dataclasses.replace(dagger_recipe(name, task), **(self.dagger or {}))

    def jobs(self, task: str) -> list[str]:
        """The recipes trained on ``task``: plain ones first, each DAgger base included."""
        names = [n for n in self.policies if task in recipe_tasks(n)]
        bases = [self.dagger_config(n, task).base for n in names if n in DAGGER_RECIPES]
        plain = [n for n in POLICY_RECIPES if n in names or n in bases]
        return plain + [n for n in names if n in DAGGER_RECIPES]

    def demo_config(self, task: str) -> Any:
        """The demonstration recording config for ``task`` (``episodes`` demonstrations)."""
        from bench.demo.demos import DemonstrationConfig

        return DemonstrationConfig(task=task, episodes=self.episodes)

    def policy_config(self, name: str, task: str) -> BCConfig:
        """The BCConfig of recipe ``name`` on ``task`` (epochs overridden, episodes capped)."""
        overrides: dict[str, Any] = {}
        if self.epochs is not None:
            overrides["epochs"] = self.epochs
        config = recipe(name, task, **overrides)
        if config.episodes > self.episodes:  # a smaller recording trains on all of it
            config = dataclasses.replace(config, episodes=self.episodes)
        return config


def _read_json(path: Any) -> dict[str, Any] | None:
    from pathlib import Path

    path = Path(path)
    return json.loads(path.read_text()) if path.is_file() else None


def build_task_dataset(out: Any, task: str, config: TrainPoliciesConfig, *,
                       resume: bool, progress: bool = True) -> tuple[dict, dict]:
    """Record (or, with ``resume`` and a matching summary, reload) one task's demonstrations."""
    import time
    from pathlib import Path

    from bench.demo.demos import dataset_summary, load_dataset, record_demonstrations, save_dataset
    from bench.provenance import atomic_write_json

    demo_config = config.demo_config(task)
    path = Path(out) / "demos" / f"{task}.npz"
    summary_path = path.with_suffix(".json")
    summary = _read_json(summary_path)
    if resume and summary is not None and summary["config"] == demo_config.to_json() \
            and path.is_file():
        data = load_dataset(path)
        if dataset_summary(data)["sha256"] == summary["sha256"]:
            return data, summary
    start = time.perf_counter()
    data = record_demonstrations(demo_config, progress=progress)
    seconds = time.perf_counter() - start
    save_dataset(path, data)
    summary = {"config": demo_config.to_json(), **dataset_summary(data, seconds=seconds)}
    atomic_write_json(summary_path, summary)
    return data, summary


def build_policy(out: Any, name: str, task: str, data: dict, demo_summary: dict,
                 config: TrainPoliciesConfig, *, resume: bool,
                 progress: bool = True) -> dict[str, Any]:
    """Train (or keep, with ``resume`` and a matching manifest) one policy; its manifest."""
    from pathlib import Path

    from bench.demo.demos import dataset_summary, select_episodes
    from bench.provenance import make_manifest

    bc_config = config.policy_config(name, task)
    directory = Path(out) / "policies" / name / task
    old = _read_json(directory / "manifest.json")
    if resume and old is not None and BCConfig.from_json(old["params"]) == bc_config \
            and old["data"]["recording_sha256"] == demo_summary["sha256"] \
            and old["data"].get("recording_aux_sha256") == demo_summary.get("aux_sha256") \
            and (directory / "model.safetensors").is_file():
        return old
    subset = dataset_summary(select_episodes(data, bc_config.episodes))
    state, log = train_policy(bc_config, data, progress=progress)
    demo = demo_summary["config"]
    manifest = make_manifest(
        tool=TOOL, params=bc_config.to_json(), seed=bc_config.seed,
        counts={"samples": subset["samples"], "episodes": subset["episodes"],
                "parameters": log["parameters"]},
        extra={"data": {
            "recording": demo, "recording_sha256": demo_summary["sha256"],
            **({"recording_aux_sha256": demo_summary["aux_sha256"]}
               if "aux_sha256" in demo_summary else {}),
            "recording_episodes": demo_summary["episodes"],
            "recording_samples": demo_summary["samples"],
            "conditions": [demo["condition_offset"],
                           demo["condition_offset"] + bc_config.episodes - 1],
            "noise_seeds": f"numpy default_rng([{demo['seed']}, episode]), episode 0.."
                           f"{bc_config.episodes - 1}",
            "worlds": demo["worlds"], "episodes": subset["episodes"],
            "samples": subset["samples"], "expert_success": subset["expert_success"],
            "sha256": subset["sha256"]},
            "training": log, "weights_sha256": weights_sha256(state)})
    save_policy(directory, bc_config, state, manifest)
    return manifest


def dagger_rollouts(  # -> dict of arrays (DATASET_ARRAYS, AUX_ARRAYS) + "success"
    policy_root: Any, policy_name: str, task: str, dagger: DaggerConfig, *, round_index: int,
    first_episode: int, progress: bool = True
) -> dict[str, np.ndarray]:
    """One DAgger round's data: the policy's rollouts, every query labelled by the expert.

    The env is the evaluation's (:data:`bench.demo.real.REAL_DOMAIN`, the task's own
    ``execute``); the policy executes its first :data:`bench.policies.learned.EXECUTED_ROWS`
    rows as deployed, or with probability ``beta`` the expert's chunk. Episode ids continue
    from ``first_episode`` (after the demonstrations and earlier rounds).
    """
    from tqdm import tqdm

    from bench.demo.demos import (
        AUX_ARRAYS,
        DATASET_ARRAYS,
        QUERY_ARRAYS,
        WORLD_IDS,
        add_episode,
        append_query,
        stack_episodes,
    )
    from bench.demo.real import REAL_DOMAIN
    from bench.policies import make_policy
    from bench.policies.base import policy_observation, to_env_chunk
    from bench.policies.learned import LearnedPolicy

    envs: dict[str, Any] = {}
    parts: dict[str, list] = {name: [] for name, _ in (*DATASET_ARRAYS, *AUX_ARRAYS)}
    success = []
    bar = tqdm(range(dagger.episodes), desc=f"dagger {policy_name}/{task} round {round_index}",
               unit="ep", disable=not progress, mininterval=5.0)
    for i in bar:
        world_index = i % len(WORLD_IDS)
        world = WORLD_IDS[world_index]
        if world not in envs:
            envs[world] = REAL_DOMAIN.make_env(world, task, max_frames=dagger.max_frames)
        env = envs[world]
        learner = LearnedPolicy(env.unwrapped, name=policy_name, root=policy_root)
        expert = make_policy("expert", env.unwrapped, seed=0)
        condition = dagger.condition_offset + round_index * dagger.episodes + i
        rng = np.random.default_rng([dagger.seed, round_index, i])
        rows: dict[str, list] = {key: [] for key in QUERY_ARRAYS}
        obs, info = env.reset(seed=condition)
        expert.reset(seed=condition)
        while True:
            observation = policy_observation(obs, env, frame=int(info["frame"]))
            label = to_env_chunk(expert.act(observation, info), env, info)
            append_query(rows, obs, info, label, actor=env.unwrapped.task.actor.name)
            executed = label if rng.random() < dagger.beta else \
                to_env_chunk(learner.act(observation, info), env, info)
            obs, _, terminated, truncated, info = env.step(executed)
            if terminated or truncated:
                break
        add_episode(parts, rows, episode=first_episode + i, world_index=world_index,
                    condition=condition)
        success.append(bool(info["success"]))
        bar.set_postfix(samples=sum(len(p) for p in parts["episode"]),
                        success=f"{np.mean(success):.2f}")
    for env in envs.values():
        env.close()
    return stack_episodes(parts, success)


def concat_datasets(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Datasets appended in order (the arrays every part has, and ``success``)."""
    names = [k for k in parts[0] if all(k in p for p in parts)]
    return {k: np.concatenate([p[k] for p in parts]) for k in names}


def build_dagger_policy(out: Any, name: str, task: str, data: dict, demo_summary: dict,
                        config: TrainPoliciesConfig, *, resume: bool,
                        progress: bool = True) -> dict[str, Any]:
    """Run (or, with ``resume``, continue) the DAgger rounds of recipe ``name``; its manifest.

    Stages, each written atomically and kept by ``resume`` when its inputs match:
    ``out/dagger/round<r>/<name>/<task>/rollouts.npz`` (+ ``.json``: config, counts,
    sha256, the weights rolled out) and the weights fine-tuned on the aggregate after it
    in the same folder; the last round's weights are copied to ``out/policies/<name>/<task>/``.
    """
    import shutil
    import time
    from pathlib import Path

    from bench.demo.demos import (
        aux_sha256,
        dataset_summary,
        load_dataset,
        save_dataset,
        select_episodes,
    )
    from bench.provenance import atomic_write_json, make_manifest

    dagger = config.dagger_config(name, task)
    base_config = config.policy_config(dagger.base, task)
    bc_config = dataclasses.replace(base_config, name=name)
    out = Path(out)
    root = out / "policies"  # round 0 rolls out the base recipe's weights
    current = _read_json(root / dagger.base / task / "manifest.json")
    demos = select_episodes(data, base_config.episodes)
    aggregate, rounds = [demos], []
    first_episode = int(data["episode"].max()) + 1
    for r in range(dagger.rounds):
        stage_root = out / "dagger" / f"round{r}"
        stage = stage_root / name / task
        roll_key = {"dagger": dagger.to_json(), "round": r, "task": task,
                    "policy_weights_sha256": current["weights_sha256"]}
        summary = _read_json(stage / "rollouts.json")
        rollouts = None
        if resume and summary is not None and summary["key"] == roll_key \
                and (stage / "rollouts.npz").is_file():
            rollouts = load_dataset(stage / "rollouts.npz")
            if dataset_summary(rollouts)["sha256"] != summary["sha256"]:
                rollouts = None
        if rollouts is None:
            start = time.perf_counter()
            rollouts = dagger_rollouts(root, name if r else dagger.base, task, dagger,
                                       round_index=r, first_episode=first_episode,
                                       progress=progress)
            save_dataset(stage / "rollouts.npz", rollouts)
            summary = {"key": roll_key, **dataset_summary(
                rollouts, seconds=time.perf_counter() - start),
                "learner_success": int(np.sum(rollouts["success"]))}
            atomic_write_json(stage / "rollouts.json", summary)
        first_episode += dagger.episodes
        aggregate.append(rollouts)
        rounds.append({k: summary[k] for k in ("samples", "episodes", "sha256", "aux_sha256",
                                               "learner_success")}
                      | {"rolled_out_weights_sha256": current["weights_sha256"]})
        merged = concat_datasets(aggregate)
        round_config = dataclasses.replace(bc_config, epochs=dagger.epochs, lr=dagger.lr,
                                           seed=base_config.seed + 1 + r)
        old = _read_json(stage / "manifest.json")
        if resume and old is not None and old["params"] == round_config.to_json() \
                and old["data"]["rounds"] == rounds \
                and old["data"]["init_weights_sha256"] == current["weights_sha256"] \
                and (stage / "model.safetensors").is_file():
            current = old
        else:
            from safetensors.torch import load_file

            init = load_file(str(root / (name if r else dagger.base) / task
                                 / "model.safetensors"))
            state, log = train_policy(round_config, merged, select=False, init_state=init,
                                      progress=progress)
            current = make_manifest(
                tool=TOOL, params=round_config.to_json(), seed=round_config.seed,
                counts={"samples": int(len(merged["episode"])),
                        "episodes": int(len(merged["success"])),
                        "parameters": log["parameters"]},
                extra={"dagger": dagger.to_json(), "round": r, "data": {
                    "recording": demo_summary["config"],
                    "recording_sha256": demo_summary["sha256"],
                    "recording_aux_sha256": demo_summary.get("aux_sha256"),
                    "demo_episodes": base_config.episodes,
                    "demo_sha256": dataset_summary(demos)["sha256"],
                    "rounds": rounds, "samples": int(len(merged["episode"])),
                    "sha256": dataset_summary(merged)["sha256"],
                    "aux_sha256": aux_sha256(merged),
                    "init_weights_sha256": current["weights_sha256"]},
                    "training": log, "weights_sha256": weights_sha256(state)})
            save_policy(stage, round_config, state, current)
        root = stage_root
    final = out / "policies" / name / task
    final.mkdir(parents=True, exist_ok=True)
    for filename in ("model.safetensors", "config.json", "manifest.json"):
        shutil.copyfile(root / name / task / filename, final / f".{filename}.tmp")
        (final / f".{filename}.tmp").replace(final / filename)
    return current


def train_policies(out: Any, config: TrainPoliciesConfig, *, resume: bool = False,
                   progress: bool = True) -> dict[str, Any]:
    """Record the demonstrations and train every (policy, task) under ``out``.

    Layout: ``out/demos/<task>.npz`` + ``.json`` (dataset and its summary),
    ``out/policies/<name>/<task>/`` (weights, config, manifest: the shipped asset layout),
    ``out/dagger/round<r>/...`` (each DAgger round's rollouts and weights),
    ``out/manifest.json``. Every file is written atomically; ``resume`` keeps the
    datasets, rounds and policies whose config and input sha256 match.
    """
    from pathlib import Path

    from bench.provenance import atomic_write_json, make_manifest

    entries = {}
    for task in config.tasks:
        jobs = config.jobs(task)
        if not jobs:
            continue
        data, summary = build_task_dataset(out, task, config, resume=resume, progress=progress)
        for name in jobs:
            build = build_dagger_policy if name in DAGGER_RECIPES else build_policy
            manifest = build(out, name, task, data, summary, config, resume=resume,
                             progress=progress)
            entries[f"{name}/{task}"] = {"weights_sha256": manifest["weights_sha256"],
                                         "data_sha256": manifest["data"]["sha256"],
                                         "samples": manifest["data"]["samples"]}
    manifest = make_manifest(
        tool=TOOL, params={"tasks": list(config.tasks), "policies": list(config.policies),
                           "episodes": config.episodes, "epochs": config.epochs,
                           "dagger": config.dagger},
        seed=0, counts={"policies": len(entries)}, extra={"policies": entries})
    atomic_write_json(Path(out) / "manifest.json", manifest)
    return manifest


# -- measuring the "real" success rates ---------------------------------------------------
EVAL_CONDITION_OFFSET = 9000  # fresh starts: past the demos (5000+) and the study (100+, 1000+)


def evaluate_policy(name: str, task: str, *, trials: int,
                    condition_offset: int = EVAL_CONDITION_OFFSET,
                    worlds: tuple[str, ...] | None = None, root: Any = None,
                    progress: bool = True) -> list[dict[str, Any]]:
    """Roll a learned policy out in the ground-truth worlds at the real-domain settings.

    Trial ``t`` runs in ``worlds[t % len(worlds)]`` from condition ``condition_offset + t``
    with :data:`bench.demo.real.REAL_DOMAIN` (the study's rollout loop,
    :func:`bench.sim.rollout.run_episode`). Returns one row per trial.
    """
    from tqdm import tqdm

    from bench.demo.demos import WORLD_IDS
    from bench.demo.real import REAL_DOMAIN
    from bench.policies.learned import LearnedPolicy
    from bench.sim.rollout import run_episode

    worlds = tuple(worlds or WORLD_IDS)
    envs: dict[str, Any] = {}
    rows = []
    for trial in tqdm(range(trials), desc=f"eval {name}/{task}", unit="ep",
                      disable=not progress, mininterval=5.0):
        world = worlds[trial % len(worlds)]
        if world not in envs:
            envs[world] = REAL_DOMAIN.make_env(world, task)
        env = envs[world]
        policy = LearnedPolicy(env.unwrapped, name=name, root=root)
        record, _, _ = run_episode(env, policy, init_index=condition_offset + trial,
                                   episode=trial, policy_name=name)
        rows.append({"policy": name, "task": task, "world": world, "trial": trial,
                     "condition": condition_offset + trial, "success": bool(record.success),
                     "frames": int(record.frames), "status": str(record.status)})
    for env in envs.values():
        env.close()
    return rows


def summarise_rates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (policy, task): successes, trials, rate and its 95 % Wilson interval."""
    from protocols.stats import wilson_interval

    out = []
    for key in sorted({(r["policy"], r["task"]) for r in rows}):
        sel = [r for r in rows if (r["policy"], r["task"]) == key]
        k, n = sum(r["success"] for r in sel), len(sel)
        interval = wilson_interval(k, n)
        out.append({"policy": key[0], "task": key[1], "successes": k, "trials": n,
                    "rate": round(k / n, 4), "wilson_low": round(interval.low, 4),
                    "wilson_high": round(interval.high, 4)})
    return out


def pair_tests(rates: list[dict[str, Any]], pairs: dict[str, tuple[str, str]]
               ) -> list[dict[str, Any]]:
    """Per task, the two policies of ``pairs[task]``: both rates and Fisher's exact p.

    Two-sided :func:`scipy.stats.fisher_exact` on the 2 x 2 table of successes and failures;
    tasks whose pair was not both evaluated are left out.
    """
    from scipy.stats import fisher_exact

    by_key = {(r["policy"], r["task"]): r for r in rates}
    out = []
    for task, (first, second) in pairs.items():
        if (first, task) not in by_key or (second, task) not in by_key:
            continue
        a, b = by_key[first, task], by_key[second, task]
        table = [[a["successes"], a["trials"] - a["successes"]],
                 [b["successes"], b["trials"] - b["successes"]]]
        out.append({"task": task, "policy_1": first, "policy_2": second,
                    "successes_1": a["successes"], "successes_2": b["successes"],
                    "trials": a["trials"], "fisher_p": round(float(fisher_exact(table)[1]), 4)})
    return out


def _write_csv(path: Any, table: list[dict[str, Any]]) -> None:
    import csv
    import io

    from bench.provenance import atomic_write_bytes

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    atomic_write_bytes(path, buffer.getvalue().encode())


def write_evaluation(out: Any, *, tasks: tuple[str, ...], trials: int,
                     policies: tuple[str, ...] = ALL_RECIPES, root: Any = None,
                     rows: list[dict[str, Any]] | None = None,
                     extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Evaluate every (policy, task) ``trials`` times; write ``eval_trials.csv``, ``eval.{csv,md}``.

    A recipe is evaluated on the tasks it is trained for (:func:`recipe_tasks`); the demo's
    pair per task (:data:`bench.policies.learned.DEMO_POLICIES`) is compared by Fisher's
    exact test in ``eval_pairs.{csv,md}``.

    Args:
        out: Output directory.
        tasks: Tasks evaluated.
        trials: Rollouts per (policy, task).
        policies: Recipe names.
        root: Policy asset root (default ``out/policies``, what was just trained).
        rows: Per-trial rows already computed by :func:`evaluate_policy` (e.g. in parallel
            processes; in the order tasks x policies), instead of evaluating here.
        extra: More fields for ``eval_config.json`` (e.g. how the rows were computed).
    """
    from pathlib import Path

    from bench.demo.real import REAL_DOMAIN
    from bench.policies.learned import DEMO_POLICIES
    from bench.provenance import atomic_write_bytes, atomic_write_json

    out = Path(out)
    root = Path(root) if root is not None else out / "policies"
    if rows is None:
        rows = [row for task in tasks for name in policies if task in recipe_tasks(name)
                for row in evaluate_policy(name, task, trials=trials, root=root)]
    rates = summarise_rates(rows)
    _write_csv(out / "eval_trials.csv", rows)
    _write_csv(out / "eval.csv", rates)
    lines = ["| policy | task | successes / trials | rate | 95 % Wilson |", "|---|---|---|---|---|"]
    lines += [f"| {r['policy']} | {r['task']} | {r['successes']} / {r['trials']} | "
              f"{r['rate']:.2f} | {r['wilson_low']:.2f}-{r['wilson_high']:.2f} |" for r in rates]
    atomic_write_bytes(out / "eval.md", ("\n".join(lines) + "\n").encode())
    pairs = pair_tests(rates, {t: DEMO_POLICIES[t] for t in tasks})
    if pairs:
        _write_csv(out / "eval_pairs.csv", pairs)
        lines = ["| task | demo pair | successes / trials | Fisher p (two-sided) |",
                 "|---|---|---|---|"]
        lines += [f"| {p['task']} | {p['policy_1']} vs {p['policy_2']} | {p['successes_1']} vs "
                  f"{p['successes_2']} / {p['trials']} | {p['fisher_p']:.3f} |" for p in pairs]
        atomic_write_bytes(out / "eval_pairs.md", ("\n".join(lines) + "\n").encode())
    atomic_write_json(out / "eval_config.json", {
        "trials": trials, "condition_offset": EVAL_CONDITION_OFFSET, "tasks": list(tasks),
        "policies": list(policies), "demo_pairs": {t: list(DEMO_POLICIES[t]) for t in tasks},
        "real_domain": REAL_DOMAIN.to_json(), **(extra or {})})
    return rates
