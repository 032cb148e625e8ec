# /// script
# requires-python = ">=3.10"
# dependencies = ["torch>=2.2", "numpy", "splatserve"]
#
# [tool.uv.sources]
# # the kit beside this script in a splatbench checkout; elsewhere point it at your copy
# splatserve = { path = "..", editable = true }
# ///
r"""Serve a plain PyTorch module over the openpi protocol (single file; uv makes its environment).

    uv run serving/scripts/serve_torch.py --torchscript policy.pt \
        --camera wrist=observation/wrist_image:96x96 \
        --state observation/state=x,y,z,qw,qx,qy,qz,opening \
        --action-layout x,y,z,rx,ry,rz,opening --action-mode delta --port 8000

The module is a TorchScript file (``torch.jit.script(model).save(path)``) or
``--factory package.module:build`` (a callable returning an ``nn.Module``, with
``--weights state_dict.pt``). It is called as ``module(batch)`` with ``batch`` a
``Dict[str, Tensor]`` keyed by the request keys: each camera's image as float32
``[1, 3, H, W]`` in [0, 1], each state key as float32 ``[1, S]``; it returns the action
chunk, ``[T, A]`` or ``[1, T, A]``. The handshake declares the cameras, state keys, action
layout and mode given here, so a splatbench client configures itself. An episode start
re-seeds torch from ``(--seed, episode id)`` and calls the module's ``reset()`` if it has one.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from splatserve.capabilities import Camera, Capabilities
from splatserve.cli import (
    OneLineParser,
    add_server_arguments,
    check_server_arguments,
    guarded,
    run_server,
)
from splatserve.server import KitError, PolicyServer


class TorchServed:
    """An ``nn.Module`` as a kit policy (``infer(obs) -> {"actions": [T, A]}``)."""

    def __init__(self, module: Any, capabilities: Capabilities, *, seed: int = 0,
                 device: str = "cpu") -> None:
        self.module, self.capabilities = module.to(device).eval(), capabilities
        self.seed, self.device = int(seed), device

    def on_episode_start(self, experiment: str, task: str, episode_id: int) -> None:
        """Re-seed torch from (seed, episode id); reset the module if it keeps state."""
        state = np.random.SeedSequence([self.seed, max(int(episode_id), 0)]).generate_state(1)
        torch.manual_seed(int(state[0]))
        if callable(getattr(self.module, "reset", None)):
            self.module.reset()

    def batch(self, obs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """The module's input: images float [1, 3, H, W] in [0, 1], states float [1, S]."""
        batch = {}
        for camera in self.capabilities.cameras.values():
            image = np.asarray(obs[camera.key])
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise ValueError(f"{camera.key} is {image.dtype} {list(image.shape)}, "
                                 "expected uint8 [H, W, 3]")
            tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)
            batch[camera.key] = tensor.float().div(255.0).unsqueeze(0).to(self.device)
        for key, names in self.capabilities.state.items():
            state = np.asarray(obs[key], np.float32).reshape(-1)
            if state.shape != (len(names),):
                raise ValueError(f"{key} has {state.size} values, expected {len(names)}")
            batch[key] = torch.from_numpy(state.copy()).unsqueeze(0).to(self.device)
        return batch

    def infer(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """``{"actions": float32 [T, A]}``."""
        with torch.inference_mode():
            out = self.module(self.batch(obs))
        rows = out.detach().to("cpu").float().numpy()
        rows = rows.reshape(-1, rows.shape[-1])
        if rows.shape[1] != len(self.capabilities.action_layout):
            raise ValueError(f"the module returned {rows.shape[1]} action columns; the "
                             f"action layout names {len(self.capabilities.action_layout)}")
        return {"actions": np.ascontiguousarray(rows, dtype=np.float32)}


def _load(args: argparse.Namespace) -> Any:
    if bool(args.torchscript) == bool(args.factory):
        raise KitError("give exactly one of --torchscript FILE or --factory module:attr")
    if args.torchscript:
        try:
            return torch.jit.load(args.torchscript, map_location="cpu")
        except (OSError, RuntimeError, ValueError) as exc:
            raise KitError(f"--torchscript {args.torchscript}: cannot load "
                           f"({str(exc).splitlines()[0]}); save it with "
                           "torch.jit.script(model).save(path)") from None
    module_name, _, attr = args.factory.partition(":")
    try:
        module = getattr(importlib.import_module(module_name), attr)()
    except Exception as exc:  # noqa: BLE001 - the user's code
        raise KitError(f"--factory {args.factory}: {type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    if args.weights:
        module.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    return module


def _capabilities(args: argparse.Namespace) -> Capabilities:
    cameras = {}
    for item in args.camera:  # NAME=KEY:HxW
        name, _, rest = item.partition("=")
        key, _, size = rest.rpartition(":")
        try:
            height, width = (int(v) for v in size.lower().split("x"))
        except ValueError:
            raise KitError(f"--camera {item!r} is not NAME=KEY:HxW; e.g. "
                           "wrist=observation/wrist_image:96x96") from None
        cameras[name] = Camera(key=key, size=(height, width))
    state = {}
    for item in args.state:  # KEY=name,name,...
        key, _, names = item.partition("=")
        state[key] = tuple(n for n in names.split(",") if n)
    return Capabilities(cameras=cameras, state=state,
                        action_layout=tuple(args.action_layout.split(",")),
                        action_mode=args.action_mode, chunk_length=args.chunk_length,
                        prompt_key=args.prompt_key, latency_budget_ms=args.latency_budget_ms)


def _main(argv: Sequence[str] | None) -> int:
    parser = OneLineParser(prog="serve_torch.py", description=__doc__.split("\n")[0])
    parser.add_argument("--torchscript", default=None, help="a TorchScript file")
    parser.add_argument("--factory", default=None, help="module:attr returning an nn.Module")
    parser.add_argument("--weights", default=None, help="state_dict for --factory")
    parser.add_argument("--camera", action="append", default=[], metavar="NAME=KEY:HxW")
    parser.add_argument("--state", action="append", default=[], metavar="KEY=NAMES")
    parser.add_argument("--action-layout", default="x,y,z,rx,ry,rz,opening")
    parser.add_argument("--action-mode", default="delta", choices=("delta", "absolute"))
    parser.add_argument("--chunk-length", type=int, default=None)
    parser.add_argument("--prompt-key", default="prompt")
    parser.add_argument("--latency-budget-ms", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    check_server_arguments(args)
    sys.path.insert(0, ".")
    caps = _capabilities(args)
    policy = TorchServed(_load(args), caps, seed=args.seed, device=args.device)
    name = args.torchscript or args.factory
    server = PolicyServer(policy, capabilities=caps, name=f"torch:{name}",
                          max_message_bytes=args.max_message_bytes)
    return run_server(server, args)


if __name__ == "__main__":
    sys.exit(guarded(_main, None))
