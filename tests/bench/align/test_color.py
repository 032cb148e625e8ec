"""Colour alignment recovers a known degree-2 polynomial with 20% outlier pixels (to 1e-3)."""

from __future__ import annotations

import numpy as np

from bench.align.color import align_splat_colors, fit_color_polynomial
from bench.scene.gaussians import SH_C0


def _known():
    return np.array([[0.05, 0.8, 0.12], [-0.03, 1.1, -0.1], [0.02, 0.9, 0.05]])


def test_irls_tukey_recovers_known_polynomial_with_outliers():
    rng = np.random.default_rng(0)
    coeffs = _known()
    rendered = rng.uniform(0.05, 0.95, (20000, 3))
    captured = np.stack(
        [np.polynomial.polynomial.polyval(rendered[:, c], coeffs[c]) for c in range(3)], 1)
    captured += rng.normal(0, 0.002, captured.shape)
    outliers = rng.random(len(rendered)) < 0.2  # 20 % outlier pixels (specular, occlusion)
    captured[outliers] = rng.uniform(0, 1, (outliers.sum(), 3))
    fit = fit_color_polynomial(rendered, captured, degree=2, iterations=50)
    np.testing.assert_allclose(fit.coefficients, coeffs, atol=1e-3)
    assert np.all(fit.inlier_fraction > 0.75)
    # ordinary least squares is visibly off on the same data (the robustness matters)
    ols = np.stack([np.polynomial.polynomial.polyfit(rendered[:, c], captured[:, c], 2)
                    for c in range(3)])
    assert np.abs(ols - coeffs).max() > 1e-2


def test_fit_is_applied_to_sh_dc():
    from bench.scene.gaussians import GaussianSplats

    rng = np.random.default_rng(1)
    n = 10
    rgb = rng.uniform(0.1, 0.9, (n, 3))
    splats = GaussianSplats(
        means=np.zeros((n, 3), np.float32), quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.zeros((n, 3), np.float32), opacity_logits=np.zeros(n, np.float32),
        sh_dc=((rgb - 0.5) / SH_C0).astype(np.float32), sh_rest=np.zeros((n, 0, 3), np.float32))
    rendered = rng.uniform(0, 1, (500, 3))
    fit = fit_color_polynomial(rendered, rendered**2 * 0.5 + 0.1)
    out = align_splat_colors(splats, fit)
    np.testing.assert_allclose(0.5 + SH_C0 * out.sh_dc, rgb**2 * 0.5 + 0.1, atol=1e-4)
