"""Colour alignment: a degree-d per-channel polynomial from splat colours to camera colours.

Model (real2sim-eval Eq. 2-3): each output channel ``c`` is
``q_c = sum_{e=0..d} a_{c,e} p_c^e`` (per channel: ``d + 1`` coefficients, the paper's
``f = [f_0 ... f_d] [1 p ... p^d]^T`` with diagonal ``f_e``). It is fitted by iteratively
reweighted least squares with the Tukey bi-weight (50 iterations), each pixel also weighted by
the norm of its captured RGB (so dark regions do not dominate). The scale of the residuals is
re-estimated every iteration as ``1.4826 * MAD``; the Tukey constant is 4.685 (95% efficiency
under Gaussian noise).

Applied to Gaussians: the fitted map is applied to each splat's base colour
``rgb = 0.5 + SH_C0 * sh_dc`` and written back into ``sh_dc`` (view-dependent bands untouched).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

TUKEY_C = 4.685
MAD_SCALE = 1.4826


@dataclass(frozen=True)
class ColorFit:
    """Result of :func:`fit_color_polynomial`.

    Attributes:
        coefficients: [3, d + 1] per channel, ascending powers.
        residual_rms: [3] weighted RMS of inlier residuals per channel (final weights).
        inlier_fraction: [3] share of pixels with non-zero Tukey weight.
        iterations: IRLS iterations run.
    """

    coefficients: np.ndarray
    residual_rms: np.ndarray
    inlier_fraction: np.ndarray
    iterations: int

    @property
    def degree(self) -> int:
        """Polynomial degree of the fit."""
        return self.coefficients.shape[1] - 1

    def apply(self, rgb: np.ndarray) -> np.ndarray:  # [..., 3] -> [..., 3]
        """Map colours through the polynomial (no clipping)."""
        rgb = np.asarray(rgb, np.float64)
        out = np.zeros_like(rgb)
        for c in range(3):
            out[..., c] = np.polynomial.polynomial.polyval(rgb[..., c], self.coefficients[c])
        return out

    def to_dict(self) -> dict:
        """The fit as JSON (degree, coefficients [3, degree + 1])."""
        return {
            "degree": self.degree,
            "coefficients": self.coefficients.tolist(),
            "residual_rms": self.residual_rms.tolist(),
            "inlier_fraction": self.inlier_fraction.tolist(),
            "iterations": self.iterations,
        }

    @classmethod
    def from_dict(cls, data: dict) -> ColorFit:
        """A fit from :meth:`to_dict`'s JSON (only ``coefficients`` is required).

        Raises ValueError when the coefficients are not 3 rows of >= 2 finite numbers or
        disagree with a given ``degree``.
        """
        coefficients = np.asarray(data["coefficients"], np.float64)
        if coefficients.ndim != 2 or coefficients.shape[0] != 3 or coefficients.shape[1] < 2:
            raise ValueError(f"coefficients must be 3 rows of degree + 1 >= 2 numbers, got "
                             f"shape {coefficients.shape}")
        if not np.all(np.isfinite(coefficients)):
            raise ValueError("coefficients must be finite")
        if "degree" in data and data["degree"] != coefficients.shape[1] - 1:
            raise ValueError(f"degree {data['degree']!r} does not match "
                             f"{coefficients.shape[1]} coefficients per channel")
        return cls(coefficients, np.asarray(data.get("residual_rms", np.zeros(3)), np.float64),
                   np.asarray(data.get("inlier_fraction", np.ones(3)), np.float64),
                   int(data.get("iterations", 0)))


def tukey_weights(residual: np.ndarray, scale: float, c: float = TUKEY_C) -> np.ndarray:  # [M]
    """Tukey bi-weights of the residuals, 0 beyond ``c`` robust scales."""
    u = residual / (c * max(scale, 1e-12))
    return np.where(np.abs(u) < 1.0, (1.0 - u**2) ** 2, 0.0)


def fit_color_polynomial(
    rendered: np.ndarray,  # [M, 3] (or [..., 3]) splat colours in [0, 1]
    captured: np.ndarray,  # same shape: camera colours in [0, 1]
    *,
    degree: int = 2,
    iterations: int = 50,
    valid: np.ndarray | None = None,  # [M] bool, pixels to use
) -> ColorFit:
    """Fit the per-channel polynomial by IRLS with the Tukey bi-weight (see module doc)."""
    p = np.asarray(rendered, np.float64).reshape(-1, 3)
    q = np.asarray(captured, np.float64).reshape(-1, 3)
    if p.shape != q.shape:
        raise ValueError(f"rendered {p.shape} and captured {q.shape} pixel sets differ")
    if degree < 1 or iterations < 1:
        raise ValueError("degree and iterations must be >= 1")
    keep = np.all(np.isfinite(p), 1) & np.all(np.isfinite(q), 1)
    if valid is not None:
        keep &= np.asarray(valid, bool).reshape(-1)
    p, q = p[keep], q[keep]
    if len(p) < 4 * (degree + 1):
        raise ValueError(f"only {len(p)} valid pixels; need >= {4 * (degree + 1)}")
    prior = np.linalg.norm(q, axis=1)  # brightness weight per pixel
    coeffs = np.zeros((3, degree + 1))
    rms, inliers = np.zeros(3), np.zeros(3)
    for c in range(3):
        design = np.vander(p[:, c], degree + 1, increasing=True)
        robust = np.ones(len(p))
        for _ in range(iterations):
            w = prior * robust
            sw = np.sqrt(w)
            a, *_ = np.linalg.lstsq(design * sw[:, None], q[:, c] * sw, rcond=None)
            r = q[:, c] - design @ a
            scale = MAD_SCALE * np.median(np.abs(r - np.median(r)))
            robust = tukey_weights(r, scale)
        coeffs[c] = a
        w = prior * robust
        rms[c] = float(np.sqrt((w * r**2).sum() / max(w.sum(), 1e-12)))
        inliers[c] = float((robust > 0).mean())
    return ColorFit(coeffs, rms, inliers, iterations)


def align_splat_colors(splats, fit: ColorFit):
    """Splats with their base colour (SH DC) mapped through ``fit``."""
    from bench.scene.gaussians import SH_C0

    rgb = 0.5 + SH_C0 * np.asarray(splats.sh_dc, np.float64)
    mapped = fit.apply(rgb)
    return splats.replace(sh_dc=((mapped - 0.5) / SH_C0).astype(np.float32))
