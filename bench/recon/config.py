"""Typed training configuration of the 3DGS trainer (its one source of defaults).

:class:`TrainConfig` is written as ``train_config.json`` next to every trained
reconstruction; :mod:`bench.recon.train` runs it and :mod:`bench.recon.densify`
reads its refinement settings (both import it from here, so neither imports the other).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.errors import BenchError

__all__ = ["BACKENDS", "RASTERIZERS", "TrainConfig", "resolve_backend"]

BACKENDS = ("auto", "cpu", "gsplat")
RASTERIZERS = ("warp", "torch")  # CPU backend: bench.render.warp_grad / bench.render.torch_raster


@dataclass(frozen=True)
class TrainConfig:
    """Resolved training settings (written as ``train_config.json`` next to the result).

    Attributes:
        iters: Optimisation steps.
        seed: Seed of the view order, the random init and the split samples.
        backend: ``auto`` (gsplat when CUDA is available, else cpu), ``cpu`` or ``gsplat``.
        ssim_lambda: Weight of ``1 - SSIM`` in the loss (the L1 weight is ``1 - ssim_lambda``).
        means_lr: Initial learning rate of the means, times scene_scale.
        means_lr_final: Final learning rate of the means, times scene_scale.
        scales_lr: Learning rate of the log-scales.
        quats_lr: Learning rate of the quaternions.
        opacities_lr: Learning rate of the opacity logits.
        sh0_lr: Learning rate of the SH DC coefficients.
        shN_lr: Learning rate of the higher SH coefficients.
        sh_degree: Maximum SH degree (0-3).
        sh_degree_interval: Steps between SH degree increases.
        densify: Grow and prune Gaussians (DefaultStrategy rules).
        refine_start_iter: First refinement step (exclusive).
        refine_stop_iter: No refinement from this step on.
        refine_every: Steps between refinements.
        reset_every: Steps between opacity resets.
        grow_grad2d: Average NDC screen-space gradient that triggers growth.
        grow_scale3d: Max scale (x scene_scale) up to which a Gaussian is duplicated.
        prune_opa: Opacity below which a Gaussian is pruned.
        prune_scale3d: Max scale (x scene_scale) above which a Gaussian is pruned.
        max_gaussians: CPU only: growth stops at this many Gaussians.
        init_opacity: Opacity of Gaussians made from seed points.
        init_scale: Factor on the nearest-neighbour scale of seed points.
        random_init_points: Points of the random init (used without a seed).
        background: RGB background in [0, 1].
        eval_every: Steps between held-out evaluations (also at step 0 and at the end).
        threads: torch CPU threads (None: leave torch's default); also the threads of the
            Warp tile kernels (None: torch's thread count). Warp results do not depend on it.
        raster: CPU backend rasterizer: ``warp`` (:mod:`bench.render.warp_grad`, Warp tile
            kernels with a hand-written backward pass; default) or ``torch``
            (:mod:`bench.render.torch_raster`, the pure-torch reference, about 10x slower).
    """

    iters: int = 30_000
    seed: int = 0
    backend: str = "auto"
    ssim_lambda: float = 0.2
    means_lr: float = 1.6e-4
    means_lr_final: float = 1.6e-6
    scales_lr: float = 5e-3
    quats_lr: float = 1e-3
    opacities_lr: float = 5e-2
    sh0_lr: float = 2.5e-3
    shN_lr: float = 2.5e-3 / 20  # noqa: N815 - gsplat's parameter name
    sh_degree: int = 3
    sh_degree_interval: int = 1000
    densify: bool = True
    refine_start_iter: int = 500
    refine_stop_iter: int = 15_000
    refine_every: int = 100
    reset_every: int = 3000
    grow_grad2d: float = 2e-4
    grow_scale3d: float = 0.01
    prune_opa: float = 0.005
    prune_scale3d: float = 0.1
    max_gaussians: int = 200_000
    init_opacity: float = 0.1
    init_scale: float = 1.0
    random_init_points: int = 10_000
    background: tuple[float, float, float] = (0.0, 0.0, 0.0)
    eval_every: int = 100
    threads: int | None = None
    raster: str = "warp"

    def validate(self) -> None:
        """Raise a BenchError naming the first bad setting and its valid range."""
        if self.iters < 1:
            raise BenchError(f"--iters must be >= 1, got {self.iters}")
        if self.seed < 0:
            raise BenchError(f"--seed must be >= 0, got {self.seed}")
        if self.backend not in BACKENDS:
            raise BenchError(f"backend {self.backend!r} is unknown; use one of {BACKENDS}")
        if not 0 <= self.sh_degree <= 3:
            raise BenchError(f"sh_degree must be 0-3, got {self.sh_degree}")
        if not 0.0 <= self.ssim_lambda <= 1.0:
            raise BenchError(f"ssim_lambda must be in [0, 1], got {self.ssim_lambda}")
        if self.eval_every < 1:
            raise BenchError(f"--eval-every must be >= 1, got {self.eval_every}")
        if self.threads is not None and self.threads < 1:
            raise BenchError(f"--threads must be >= 1, got {self.threads}")
        if self.raster not in RASTERIZERS:
            raise BenchError(f"raster {self.raster!r} is unknown; use one of {RASTERIZERS}")
        if len(self.background) != 3 or not all(0.0 <= c <= 1.0 for c in self.background):
            raise BenchError(f"background must be 3 values in [0, 1], got {self.background}")


def resolve_backend(backend: str) -> str:
    """The trainer's backend: ``auto`` -> ``gsplat`` with CUDA and gsplat, else ``cpu``.

    ``auto`` uses :func:`bench.render.gsplat_available` (the renderer's own check), so
    training and rendering pick the same backend; an explicit ``gsplat`` that cannot run
    raises a BenchError naming what is missing.
    """
    if backend == "cpu":
        return "cpu"
    if backend == "gsplat":
        import torch

        if not torch.cuda.is_available():
            raise BenchError("backend 'gsplat' needs a CUDA GPU; use --backend cpu on this machine")
        try:
            import gsplat  # noqa: F401
        except ImportError:
            raise BenchError("backend 'gsplat' needs the gsplat package: "
                             "pip install 'splatbench[gpu]'") from None
        return "gsplat"
    from bench.render import gsplat_available

    return "gsplat" if gsplat_available() else "cpu"
