"""Behaviour cloning of the demo's learned policies: one network trained on a recording.

The network, its config and its inference are :mod:`bench.policies.bc_network`, the shipped
recipes :mod:`bench.policies.bc_recipes`; this module records the demonstrations of a task
(:func:`build_task_dataset`, :mod:`bench.demo.demos`) and trains one recipe on them
(:func:`build_policy`, :func:`train_policy`) into the shipped asset layout
(:func:`save_policy`). DAgger rounds are :mod:`bench.demo.dagger`, the whole
``bench demo train-policies`` run :mod:`bench.demo.train_policies`, the measured success
rates :mod:`bench.demo.evaluation`.

Training is deterministic: ``torch.manual_seed``, ``torch.use_deterministic_algorithms``,
one thread, the epoch order and the augmentation drawn from seeded generators; the same
dataset and :class:`~bench.policies.bc_network.BCConfig` give byte-identical weights
(:func:`weights_sha256`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.policies.bc_network import BCConfig, build_network, encode_chunk, prepare_images
from bench.policies.bc_recipes import (
    ALL_RECIPES,
    DAGGER_RECIPES,
    DEMO_EPISODES,
    POLICY_RECIPES,
    DaggerConfig,
    dagger_recipe,
    recipe,
    recipe_tasks,
)

#: Tool id of every training manifest (``bench demo train-policies``).
TOOL = "train-policies/1"


# -- training -----------------------------------------------------------------------------
def augment_images(x: Any, generator: Any, *, shift_px: int, jitter: float,
                   blur_sigma: float = 0.0) -> Any:
    """Random shift, colour jitter and (``blur_sigma`` > 0) Gaussian blur, per sample.

    Shift: replicate-pad and crop; jitter: brightness and channel gains; blur: std drawn
    from U(0, blur_sigma) px. With ``blur_sigma`` 0 no blur is drawn, so the generator's
    stream (and every recipe trained without blur) is unchanged.
    """
    import torch
    import torch.nn.functional as F

    b, _, h, w = x.shape
    padded = F.pad(x, (shift_px,) * 4, mode="replicate")
    offsets = torch.randint(0, 2 * shift_px + 1, (b, 2), generator=generator)
    out = torch.stack([padded[i, :, oy:oy + h, ox:ox + w]
                       for i, (oy, ox) in enumerate(offsets.tolist())])
    gain = 1.0 + jitter * (2 * torch.rand(b, 1, 1, 1, generator=generator) - 1)
    channel = 1.0 + 0.5 * jitter * (2 * torch.rand(b, 3, 1, 1, generator=generator) - 1)
    out = out * gain * channel
    if blur_sigma > 0:
        out = gaussian_blur(out, blur_sigma * torch.rand(b, generator=generator))
    return out.clamp(0.0, 1.0)


def gaussian_blur(x: Any, sigma: Any) -> Any:  # [B, C, H, W], [B] px -> [B, C, H, W]
    """Separable Gaussian blur with a per-sample std (0: unchanged), replicate borders."""
    import math

    import torch
    import torch.nn.functional as F

    b, c, h, w = x.shape
    radius = max(1, math.ceil(3.0 * float(sigma.max())))
    taps = torch.arange(-radius, radius + 1, dtype=x.dtype)
    s = sigma.to(x.dtype).clamp_min(1e-6)[:, None]
    kernel = torch.exp(-0.5 * (taps[None, :] / s) ** 2)  # [B, K]; sigma -> 0 gives a delta
    kernel = (kernel / kernel.sum(1, keepdim=True)).repeat_interleave(c, 0)  # [B * C, K]
    flat = F.pad(x.reshape(1, b * c, h, w), (radius,) * 4, mode="replicate")
    flat = F.conv2d(flat, kernel[:, None, :, None], groups=b * c)
    flat = F.conv2d(flat, kernel[:, None, None, :], groups=b * c)
    return flat.reshape(b, c, h, w)


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

    from bench.demo.demos import select_episodes
    from bench.errors import BenchError
    from bench.progress import progress as progress_bar

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
    bar = progress_bar(range(config.epochs), desc=f"train {config.name}/{config.task}",
                       unit="epoch", disable=not progress, mininterval=5.0)
    for _ in bar:
        order = torch.from_numpy(pool[order_rng.permutation(drawn)])
        total = total_aux = 0.0
        for first in range(0, drawn, config.batch_size):
            idx = order[first:first + config.batch_size]
            lb, rb = left[idx], right[idx]
            if config.augment:
                lb = augment_images(lb, generator, shift_px=config.shift_px,
                                    jitter=config.jitter, blur_sigma=config.blur_sigma)
                rb = augment_images(rb, generator, shift_px=config.shift_px,
                                    jitter=config.jitter, blur_sigma=config.blur_sigma)
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


def read_json(path: Any) -> dict[str, Any] | None:
    """The JSON object of ``path``, or None when there is no such file."""
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
    summary = read_json(summary_path)
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
    old = read_json(directory / "manifest.json")
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
