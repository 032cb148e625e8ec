"""gsplat DefaultStrategy's grow / prune / opacity-reset rules for the CPU trainer.

:class:`SimpleDensifier` has the call pattern of ``gsplat.DefaultStrategy``
(``initialize_state``, ``step_pre_backward``, ``step_post_backward``), so
:mod:`bench.recon.train` runs one loop for both backends. Rules and the list of
what is not ported are in the :mod:`bench.recon.train` module docstring. Parameters
are the trainer's dict of ``torch.nn.Parameter`` keyed by :data:`PARAM_NAMES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.recon.config import TrainConfig

# The trainer's parameters: means [N, 3], log-scales [N, 3], quats [N, 4], opacity logits [N],
# SH DC [N, 1, 3], higher SH [N, K, 3] (gsplat's names).
PARAM_NAMES = ("means", "scales", "quats", "opacities", "sh0", "shN")


def replace_rows(params, optimizers, keep, new: dict[str, Any] | None) -> None:
    """Keep rows ``keep`` [N] bool of every parameter, append ``new`` rows, fix Adam state.

    Adam moments of kept rows are kept; appended rows start with zero moments (gsplat).
    """
    import torch

    for name in PARAM_NAMES:
        old = params[name]
        parts = [old.data[keep]]
        if new is not None:
            parts.append(new[name].to(old.dtype))
        fresh = torch.nn.Parameter(torch.cat(parts, dim=0))
        optimizer = optimizers[name]
        state = optimizer.state.pop(old, None)
        optimizer.param_groups[0]["params"] = [fresh]
        if state is not None:
            extra = 0 if new is None else len(new[name])
            for key in ("exp_avg", "exp_avg_sq"):
                moment = state[key][keep]
                zeros = torch.zeros((extra, *moment.shape[1:]), dtype=moment.dtype)
                state[key] = torch.cat([moment, zeros], dim=0)
            optimizer.state[fresh] = state
        params[name] = fresh


def torch_no_grad_method(method: Callable) -> Callable:
    """Run a method under ``torch.no_grad()`` (imported lazily)."""

    def wrapper(*args, **kwargs):
        import torch

        with torch.no_grad():
            return method(*args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class SimpleDensifier:
    """DefaultStrategy's grow / prune / reset rules on CPU (see the module docstring).

    Same call pattern as ``gsplat.DefaultStrategy`` so the training loop is shared.
    """

    def __init__(self, config: TrainConfig, *, generator) -> None:
        self.config = config
        self.generator = generator

    def initialize_state(self, scene_scale: float = 1.0) -> dict[str, Any]:
        """The densifier's state: empty 2D-gradient accumulators and ``scene_scale``."""
        return {"grad2d": None, "count": None, "scene_scale": scene_scale}

    def step_pre_backward(self, params, optimizers, state, step, info) -> None:
        """Nothing to do before backward (torch_raster retains the means2d gradient)."""
        pass  # torch_raster already calls retain_grad() on means2d

    def step_post_backward(self, params, optimizers, state, step, info) -> None:
        """Accumulate screen-space gradient norms; grow / prune and reset opacities on schedule."""
        import torch

        cfg = self.config
        if step >= cfg.refine_stop_iter:
            return
        n = len(params["means"])
        if state["grad2d"] is None or len(state["grad2d"]) != n:
            state["grad2d"] = torch.zeros(n)
            state["count"] = torch.zeros(n)
        grad = info["means2d"].grad
        if grad is not None:
            scaled = grad * torch.tensor([info["width"] / 2.0, info["height"] / 2.0])
            seen = info["radii"] > 0
            state["grad2d"][seen] += scaled[seen].norm(dim=-1)
            state["count"][seen] += 1
        if step > cfg.refine_start_iter and step % cfg.refine_every == 0:
            self._grow(params, optimizers, state)
            self._prune(params, optimizers, state, step)
            state["grad2d"] = torch.zeros(len(params["means"]))
            state["count"] = torch.zeros(len(params["means"]))
        if step > 0 and step % cfg.reset_every == 0:
            with torch.no_grad():
                cap = math.log(cfg.prune_opa * 2.0 / (1.0 - cfg.prune_opa * 2.0))
                params["opacities"].data.clamp_(max=cap)
            for key in ("exp_avg", "exp_avg_sq"):
                st = optimizers["opacities"].state.get(params["opacities"])
                if st is not None:
                    st[key].zero_()

    @torch_no_grad_method
    def _grow(self, params, optimizers, state) -> None:
        import torch

        cfg = self.config
        n = len(params["means"])
        avg = state["grad2d"] / state["count"].clamp_min(1)
        high = avg > cfg.grow_grad2d
        budget = cfg.max_gaussians - n
        if budget <= 0:
            return
        candidates = torch.nonzero(high).squeeze(1)
        if len(candidates) > budget:  # keep the highest gradients (stable order on ties)
            order = torch.argsort(-avg[candidates], stable=True)[:budget]
            high = torch.zeros(n, dtype=torch.bool)
            high[candidates[order]] = True
        small = torch.exp(params["scales"].data).max(dim=-1).values <= (
            cfg.grow_scale3d * state["scene_scale"]
        )
        dup, split = high & small, high & ~small
        new = {name: params[name].data[dup] for name in PARAM_NAMES}
        if split.any():
            from bench.render.torch_raster import quat_to_rotmat

            idx = torch.nonzero(split).squeeze(1)
            scales = torch.exp(params["scales"].data[idx])  # [S, 3]
            rot = quat_to_rotmat(params["quats"].data[idx])  # [S, 3, 3]
            noise = torch.randn((2, len(idx), 3), generator=self.generator)
            offsets = torch.einsum("sij,ksj->ksi", rot, scales[None] * noise)  # [2, S, 3]
            for name in PARAM_NAMES:
                rows = params[name].data[idx]
                if name == "means":
                    rows2 = (rows[None] + offsets).reshape(-1, 3)
                elif name == "scales":
                    rows2 = torch.log(scales / 1.6).repeat(2, 1)
                else:
                    rows2 = rows.repeat(2, *([1] * (rows.ndim - 1)))
                new[name] = torch.cat([new[name], rows2], dim=0)
        replace_rows(params, optimizers, ~split, new)

    @torch_no_grad_method
    def _prune(self, params, optimizers, state, step) -> None:
        import torch

        cfg = self.config
        prune = torch.sigmoid(params["opacities"].data) < cfg.prune_opa
        if step > cfg.reset_every:
            prune |= torch.exp(params["scales"].data).max(dim=-1).values > (
                cfg.prune_scale3d * state["scene_scale"]
            )
        if prune.all():  # never prune to an empty model
            return
        if prune.any():
            replace_rows(params, optimizers, ~prune, None)
