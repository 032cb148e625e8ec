"""LeRobot policies (ACT, diffusion, ...) from a local ``pretrained_model`` directory.

In-process LeRobot needs the optional extra ``lerobot`` (imported only when such a policy
is built), which no environment with the bench's torch can hold (lerobot 0.4.4 requires
torch<2.11): serve the checkpoint from its own environment instead (``make lerobot-env``,
``python -m splatserve.lerobot --checkpoint DIR --port P``, policy ``openpi``;
docs/policies.md), the path that is tested. The
directory is what LeRobot's ``save_pretrained`` / training writes: ``config.json``
(the policy config with ``type``, ``input_features``, ``output_features``),
``model.safetensors`` and the processor pipelines with the normalisation statistics
(``policy_preprocessor.json`` / ``policy_postprocessor.json`` + their safetensors).
Nothing is downloaded.

Key mapping (LeRobot conventions): each visual input feature
``observation.images.<name>`` takes the bench camera ``<name>`` (or ``camera_map``
``{feature: camera}``; a single camera feeds a single visual feature whatever its
name), as float32 ``[1, 3, H, W]`` in [0, 1], resized with padding to the feature's
shape; ``observation.state`` takes ``state_indices`` of the 8-D proprio
(default all 8; its feature shape must match); the prompt goes in ``task``. The
preprocessor normalises with the stored statistics, ``predict_action_chunk`` gives
``[1, T, A]``, the postprocessor unnormalises; ``action_columns`` picks the seven bench
columns and ``action_mode`` says whether they are deltas or absolute targets.

Registered as policy ``lerobot``: ``{"factory": "lerobot", "kwargs": {"path": "run/
checkpoints/last/pretrained_model", "device": "cuda"}}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.errors import BenchError
from bench.policies.base import ACTION_DIM, ACTION_MODES, POLICIES, camera_images

IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"


def require_lerobot() -> Any:
    """Import lerobot or raise a one-line BenchError saying how to get it."""
    try:
        import lerobot
    except ImportError:
        raise BenchError("LeRobot policies in-process need the optional extra "
                         "'splatbench[lerobot]', whose lerobot needs torch<2.11; serve the "
                         "checkpoint instead: make lerobot-env, then .venv-lerobot/bin/python "
                         "-m splatserve.lerobot --checkpoint DIR --port 8000 and policy "
                         "'openpi' (docs/policies.md)") from None
    return lerobot


class LeRobotPolicy:
    """A LeRobot pretrained policy as a bench :class:`~bench.policies.base.Policy`.

    Args:
        env: The (unwrapped) environment.
        seed: Seeds torch before each episode (diffusion sampling noise).
        path: The ``pretrained_model`` directory.
        device: "cpu", "cuda" or "auto" (CUDA when available).
        camera_map: Visual feature key -> bench camera name (default: by name).
        state_indices: Proprio indices fed as ``observation.state``.
        action_columns: Action columns giving (x, y, z, rx, ry, rz, opening).
        action_mode: "delta" or "absolute".
        name: Policy name (default "lerobot").
    """

    privileged = False

    def __init__(self, env: Any, *, seed: int = 0, path: str = "", device: str = "cpu",
                 camera_map: Mapping[str, str] | None = None,
                 state_indices: Sequence[int] = tuple(range(8)),
                 action_columns: Sequence[int] = tuple(range(ACTION_DIM)),
                 action_mode: str = "delta", name: str = "lerobot") -> None:
        require_lerobot()
        from splatserve.lerobot import load_checkpoint

        folder = Path(path)
        if not (folder / "config.json").is_file():
            raise BenchError(f"{folder} is not a LeRobot pretrained_model directory (no "
                             "config.json); pass path=.../pretrained_model")
        if action_mode not in ACTION_MODES:
            raise BenchError(f"action_mode {action_mode!r} is not one of {ACTION_MODES}")
        self.model, self.preprocess, self.postprocess, device = load_checkpoint(
            folder, device=device)
        self.name, self.seed, self.device = name, seed, device
        self.action_mode = action_mode
        self.action_columns = [int(c) for c in action_columns]
        self.state_indices = [int(i) for i in state_indices]
        features = self.model.config.input_features
        self.visual = {k: tuple(v.shape) for k, v in features.items()
                       if k.startswith(IMAGE_PREFIX)}
        self.camera_map = dict(camera_map or {})
        if STATE_KEY in features and tuple(features[STATE_KEY].shape) != (
                len(self.state_indices),):
            raise BenchError(f"{folder}: observation.state has shape "
                             f"{tuple(features[STATE_KEY].shape)} but state_indices gives "
                             f"{len(self.state_indices)} values; set state_indices")
        self._has_state = STATE_KEY in features

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: seed torch from ``(seed, seed of the episode)`` and reset the model."""
        import torch

        torch.manual_seed(int(np.random.SeedSequence([self.seed, seed or 0]).generate_state(1)[0]))
        self.model.reset()

    def _camera_for(self, feature: str, images: Mapping[str, np.ndarray]) -> np.ndarray:
        camera = self.camera_map.get(feature, feature[len(IMAGE_PREFIX):])
        if camera in images:
            return images[camera]
        if len(images) == 1 and len(self.visual) == 1:
            return next(iter(images.values()))
        raise BenchError(f"LeRobot feature {feature!r} wants camera {camera!r}; the env has "
                         f"{sorted(images)}; set camera_map")

    def batch(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The LeRobot input batch (before the preprocessor) of a policy observation."""
        import torch

        from bench.policies.remote import resize_with_pad

        images = obs.get("images") or camera_images(obs)
        batch: dict[str, Any] = {}
        for feature, (_, height, width) in self.visual.items():
            image = resize_with_pad(np.asarray(self._camera_for(feature, images)), height, width)
            tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
            batch[feature] = tensor.float().div(255.0).unsqueeze(0)
        if self._has_state:
            state = np.asarray(obs["proprio"], np.float32)[self.state_indices]
            batch[STATE_KEY] = torch.from_numpy(state).unsqueeze(0)
        batch["task"] = str(obs.get("prompt", ""))
        return batch

    def act(self, obs: Mapping[str, Any], info: Mapping[str, Any] | None = None
            ) -> np.ndarray:  # -> float32 [T, 7]
        """Predict an action chunk with the LeRobot model; float32 [T, 7] in the env's columns."""
        import torch

        with torch.inference_mode():
            chunk = self.model.predict_action_chunk(self.preprocess(self.batch(obs)))
            actions = self.postprocess(chunk)  # [1, T, A], unnormalised
        rows = actions.detach().to("cpu").float().numpy().reshape(-1, actions.shape[-1])
        return np.ascontiguousarray(rows[:, self.action_columns], dtype=np.float32)


POLICIES.register(
    "lerobot",
    LeRobotPolicy,
    privileged=False,
    description="a LeRobot pretrained_model directory (ACT, diffusion; optional extra "
    "'lerobot'); kwargs: path, device, camera_map, state_indices, action_columns",
)
