"""Gaussian scene model, PLY I/O, scene bundles and cameras."""

from bench.scene.gaussians import SH_C0, GaussianSplats

__all__ = ["SH_C0", "GaussianSplats"]
