"""The seeded camera sensor model of the ground-truth ("real") worlds.

Applied to a clean render ``x`` (linear RGB in [0, 1], ``[H, W, 3]``), per pixel and
channel::

    y = clip(x * exposure * white_balance[c] * vignette(r) + n, 0, 1),   n ~ N(0, noise_std^2)

quantised to uint8 (round half up). ``vignette(r) = max(0, 1 - vignetting * r^2)`` with
``r`` the distance from the image centre over half the shorter image side (1 at the
edge of a fisheye's image circle). Pixels outside a fisheye's image circle (``valid``
False) stay black. The noise is drawn from
``numpy.random.default_rng([seed, stream, frame])``, so a (camera stream, frame) pair
always gets the same noise and different frames get independent noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SensorConfig:
    """Sensor parameters (defaults: a mild consumer camera).

    Attributes:
        noise_std: Std of the additive Gaussian read noise, in [0, 1] intensity units.
        exposure: Global gain.
        white_balance: Per-channel (r, g, b) gains.
        vignetting: Relative fall-off at r = 1 (0 = none).
        seed: Seed of the noise generator.
    """

    noise_std: float = 0.01
    exposure: float = 1.0
    white_balance: tuple[float, float, float] = (1.0, 1.0, 1.0)
    vignetting: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "white_balance", tuple(float(v) for v in self.white_balance))
        if self.noise_std < 0 or self.exposure <= 0 or not 0 <= self.vignetting <= 1:
            raise ValueError("sensor needs noise_std >= 0, exposure > 0 and vignetting in [0, 1]")
        if len(self.white_balance) != 3 or min(self.white_balance) <= 0:
            raise ValueError("white_balance must be three positive gains (r, g, b)")


def vignette(height: int, width: int, strength: float) -> np.ndarray:  # -> [H, W] float64
    """``max(0, 1 - strength r^2)``, r = pixel-centre distance / (min(H, W) / 2)."""
    rows, cols = np.mgrid[0:height, 0:width] + 0.5
    r2 = ((rows - height / 2) ** 2 + (cols - width / 2) ** 2) / (min(height, width) / 2) ** 2
    return np.maximum(0.0, 1.0 - strength * r2)


def apply_sensor(
    clean: np.ndarray,  # [H, W, 3] float in [0, 1] (or uint8)
    config: SensorConfig,
    *,
    frame: int = 0,
    stream: int = 0,
    valid: np.ndarray | None = None,  # [H, W] bool: pixels inside the image circle
) -> np.ndarray:  # -> [H, W, 3] uint8
    """The sensor image of a clean render (see the module docstring)."""
    x = np.asarray(clean)
    x = x.astype(np.float64) / 255.0 if x.dtype == np.uint8 else x.astype(np.float64)
    h, w = x.shape[:2]
    gain = config.exposure * np.asarray(config.white_balance, np.float64)
    y = x * gain * vignette(h, w, config.vignetting)[..., None]
    if config.noise_std > 0:
        rng = np.random.default_rng([int(config.seed), int(stream), int(frame)])
        y = y + rng.normal(0.0, config.noise_std, size=y.shape)
    out = np.floor(np.clip(y, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    if valid is not None:
        out[~np.asarray(valid, bool)] = 0
    return out
