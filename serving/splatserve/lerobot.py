"""``python -m splatserve.lerobot --checkpoint DIR --port P``: serve a LeRobot checkpoint.

Run inside an environment with LeRobot (splatbench's ``make lerobot-env`` makes
``.venv-lerobot`` with lerobot 0.4.4 and the torch it accepts). ``DIR`` is a
``pretrained_model`` directory as LeRobot's training or ``save_pretrained`` writes it:
``config.json`` (policy ``type``, input and output features), ``model.safetensors`` and
the processor pipelines with their normalisation statistics. They are loaded with LeRobot's
own ``PreTrainedConfig.from_pretrained``, ``get_policy_class(type).from_pretrained`` and
``make_pre_post_processors(config, pretrained_path=DIR)``; nothing is downloaded.

Requests use LeRobot's feature names: each ``observation.images.<name>`` is a uint8
``[H, W, 3]`` image of the feature's size, ``observation.state`` a float32 vector, ``task``
the instruction. The reply is ``{"actions": float32 [T, A]}``: ``predict_action_chunk`` on
the preprocessed batch, unnormalised by the postprocessor. The handshake declares all of
that: camera ``<name>`` (or ``--camera CLIENT=<name>``) with its size, the state and action
layouts (``--state-layout`` / ``--action-layout``; the defaults are splatbench's 8-D proprio
and 7-D end-effector action, used only when the feature sizes match), ``--action-mode``,
``chunk_length`` (the config's ``n_action_steps``), ``task`` as the prompt key. An episode
start re-seeds torch from ``(--seed, episode id)`` and calls the policy's ``reset()``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from splatserve.capabilities import Camera, Capabilities
from splatserve.cli import (
    OneLineParser,
    add_server_arguments,
    check_server_arguments,
    guarded,
    run_server,
)
from splatserve.server import KitError, PolicyServer

IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"
BENCH_STATE = ("x", "y", "z", "qw", "qx", "qy", "qz", "opening")
BENCH_ACTION = ("x", "y", "z", "rx", "ry", "rz", "opening")


def episode_torch_seed(seed: int, episode_id: int) -> int:
    """The torch seed of an episode: SeedSequence([seed, episode_id]) (same as splatbench's)."""
    return int(np.random.SeedSequence([int(seed), max(int(episode_id), 0)]).generate_state(1)[0])


def load_checkpoint(folder: Path, *, device: str = "cpu") -> tuple[Any, Any, Any, str]:
    """(policy, preprocessor, postprocessor, device) of a ``pretrained_model`` directory.

    Loaded the way LeRobot's own scripts load it: the config, the policy class it names,
    ``from_pretrained`` weights and the saved processor pipelines with their normalisation
    statistics; ``device`` "auto" picks CUDA when available. Raises :class:`KitError` where
    LeRobot is not importable. The bench's in-process ``lerobot`` policy loads through this too.
    """
    try:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        raise KitError(f"LeRobot is not importable here ({exc}); run this inside the "
                       "LeRobot environment (make lerobot-env)") from None
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    config = PreTrainedConfig.from_pretrained(folder)
    config.device = device
    model = get_policy_class(config.type).from_pretrained(folder, config=config)
    model.to(device).eval()
    preprocess, postprocess = make_pre_post_processors(
        model.config, pretrained_path=str(folder),
        preprocessor_overrides={"device_processor": {"device": device}})
    return model, preprocess, postprocess, device


class LeRobotServed:
    """A LeRobot ``pretrained_model`` directory as a kit policy (``infer(obs) -> dict``).

    Args:
        checkpoint: The ``pretrained_model`` directory.
        device: "cpu", "cuda" or "auto".
        seed: Base seed (diffusion / flow sampling noise).
        camera_map: Client camera name -> LeRobot image name (default: the same name).
        state_layout: Names of ``observation.state``'s components (None: splatbench's 8-D).
        action_layout: Names of the action columns (None: splatbench's 7-D).
        action_mode: "delta" or "absolute".
        latency_budget_ms: Declared per-query budget (the client's timeout default).
    """

    def __init__(self, checkpoint: str | Path, *, device: str = "cpu", seed: int = 0,
                 camera_map: Mapping[str, str] | None = None,
                 state_layout: Sequence[str] | None = None,
                 action_layout: Sequence[str] | None = None, action_mode: str = "delta",
                 latency_budget_ms: float | None = None) -> None:
        folder = Path(checkpoint)
        if not (folder / "config.json").is_file():
            raise KitError(f"{folder} is not a LeRobot pretrained_model directory (no "
                           "config.json); pass --checkpoint .../pretrained_model")
        try:
            import torch
        except ImportError as exc:
            raise KitError(f"LeRobot is not importable here ({exc}); run this inside the "
                           "LeRobot environment (make lerobot-env)") from None
        self.model, self.preprocess, self.postprocess, device = load_checkpoint(
            folder, device=device)
        self.torch, self.device, self.seed = torch, device, int(seed)
        features = self.model.config.input_features
        self.visual = {k: tuple(v.shape) for k, v in features.items()
                       if k.startswith(IMAGE_PREFIX)}
        self.state_dim = int(features[STATE_KEY].shape[0]) if STATE_KEY in features else 0
        action_dim = int(self.model.config.output_features["action"].shape[0])
        self.capabilities = self._capabilities(
            camera_map or {}, state_layout, action_layout, action_mode, action_dim,
            getattr(self.model.config, "n_action_steps", None), latency_budget_ms)
        self.on_episode_start("", "", 0)

    def _capabilities(self, camera_map: Mapping[str, str], state_layout: Sequence[str] | None,
                      action_layout: Sequence[str] | None, action_mode: str, action_dim: int,
                      n_action_steps: int | None, budget: float | None) -> Capabilities:
        names = {feature[len(IMAGE_PREFIX):]: feature for feature in self.visual}
        by_image = {image: client for client, image in camera_map.items()}
        unknown = sorted(set(by_image) - set(names))
        if unknown:
            raise KitError(f"--camera names LeRobot images {unknown}; the checkpoint has "
                           f"{sorted(names)}")
        cameras = {by_image.get(name, name): Camera(key=feature,
                                                     size=self.visual[feature][1:3])
                   for name, feature in names.items()}
        state = {}
        if self.state_dim:
            layout = tuple(state_layout) if state_layout else BENCH_STATE
            if len(layout) != self.state_dim:
                raise KitError(f"observation.state has {self.state_dim} values but the state "
                               f"layout names {len(layout)} ({','.join(layout)}); pass "
                               "--state-layout with one name per value")
            state[STATE_KEY] = layout
        layout = tuple(action_layout) if action_layout else BENCH_ACTION
        if len(layout) != action_dim:
            raise KitError(f"the action has {action_dim} columns but the action layout names "
                           f"{len(layout)} ({','.join(layout)}); pass --action-layout with one "
                           "name per column")
        return Capabilities(cameras=cameras, state=state, action_key="actions",
                            action_layout=layout, action_mode=action_mode,
                            chunk_length=n_action_steps, prompt_key="task",
                            latency_budget_ms=budget, episode_control=True)

    # -- kit policy hooks -------------------------------------------------------------------
    def on_episode_start(self, experiment: str, task: str, episode_id: int) -> None:
        """Re-seed torch from (seed, episode id) and reset the policy's queues."""
        self.torch.manual_seed(episode_torch_seed(self.seed, episode_id))
        self.model.reset()

    def batch(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """LeRobot's input batch (before the preprocessor) of one request."""
        torch = self.torch
        batch: dict[str, Any] = {}
        for feature, (_, height, width) in self.visual.items():
            if feature not in obs:
                raise KeyError(f"request has no {feature!r} (uint8 [{height}, {width}, 3])")
            image = np.asarray(obs[feature])
            if image.shape != (height, width, 3) or image.dtype != np.uint8:
                raise ValueError(f"{feature} is {image.dtype} {list(image.shape)}, expected "
                                 f"uint8 [{height}, {width}, 3]")
            tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
            batch[feature] = tensor.float().div(255.0).unsqueeze(0)
        if self.state_dim:
            state = np.asarray(obs[STATE_KEY], np.float32).reshape(-1)
            if state.shape != (self.state_dim,):
                raise ValueError(f"{STATE_KEY} has {state.size} values, expected "
                                 f"{self.state_dim}")
            batch[STATE_KEY] = torch.from_numpy(state.copy()).unsqueeze(0)
        batch["task"] = str(obs.get("task", ""))
        return batch

    def infer(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """``{"actions": float32 [T, A]}``: the unnormalised action chunk."""
        with self.torch.inference_mode():
            chunk = self.model.predict_action_chunk(self.preprocess(self.batch(obs)))
            actions = self.postprocess(chunk)  # [1, T, A]
        rows = actions.detach().to("cpu").float().numpy().reshape(-1, actions.shape[-1])
        return {"actions": np.ascontiguousarray(rows, dtype=np.float32)}


def _names(text: str | None) -> tuple[str, ...] | None:
    return tuple(n.strip() for n in text.split(",") if n.strip()) if text else None


def _main(argv: Sequence[str] | None) -> int:
    parser = OneLineParser(prog="python -m splatserve.lerobot",
                           description="Serve a LeRobot pretrained_model directory over the "
                           "openpi websocket protocol.")
    parser.add_argument("--checkpoint", required=True, help="the pretrained_model directory")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    parser.add_argument("--seed", type=int, default=0, help="base seed of sampling noise")
    parser.add_argument("--camera", action="append", default=[], metavar="CLIENT=IMAGE",
                        help="client camera CLIENT feeds observation.images.IMAGE (repeatable)")
    parser.add_argument("--state-layout", default=None,
                        help="comma-separated names of observation.state's values "
                        "[x,y,z,qw,qx,qy,qz,opening]")
    parser.add_argument("--action-layout", default=None,
                        help="comma-separated names of the action columns "
                        "[x,y,z,rx,ry,rz,opening]")
    parser.add_argument("--action-mode", default="delta", choices=("delta", "absolute"))
    parser.add_argument("--latency-budget-ms", type=float, default=None,
                        help="declared per-query budget (clients use it as their timeout)")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    check_server_arguments(args)
    camera_map = {}
    for item in args.camera:
        client, sep, image = item.partition("=")
        if not sep or not client or not image:
            raise KitError(f"--camera {item!r} is not CLIENT=IMAGE; e.g. --camera wrist=top")
        camera_map[client] = image
    policy = LeRobotServed(args.checkpoint, device=args.device, seed=args.seed,
                           camera_map=camera_map, state_layout=_names(args.state_layout),
                           action_layout=_names(args.action_layout),
                           action_mode=args.action_mode,
                           latency_budget_ms=args.latency_budget_ms)
    name = f"lerobot:{policy.model.config.type}:{Path(args.checkpoint).resolve().name}"
    server = PolicyServer(policy, capabilities=policy.capabilities, name=name,
                          metadata={"checkpoint": str(Path(args.checkpoint).resolve())},
                          max_message_bytes=args.max_message_bytes)
    return run_server(server, args)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    return guarded(_main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
