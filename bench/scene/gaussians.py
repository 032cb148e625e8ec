"""The Gaussian scene model in *storage* convention (INRIA 3DGS PLY layout).

Arrays are stored exactly as a 3DGS PLY holds them (pre-activation), so a
read -> write round trip is bit-exact:

- ``means``          [N, 3] float32, centre positions
- ``quats``          [N, 4] float32, rotation quaternion (w, x, y, z), *unnormalised*
- ``log_scales``     [N, 3] float32, log of the per-axis standard deviations
- ``opacity_logits`` [N]    float32, logit of opacity
- ``sh_dc``          [N, 3] float32, degree-0 SH coefficient per channel
- ``sh_rest``        [N, K, 3] float32, higher SH bands, K in {0, 3, 8, 15}
- ``extra``          name -> [N] arrays of any further per-vertex PLY properties
  (including ``nx, ny, nz`` when the file had them), kept on round trip.

Activation: ``rgb = 0.5 + SH_C0 * sh_dc``, ``opacity = sigmoid(logit)``,
``scale = exp(log_scale)``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

# Real spherical-harmonics basis constants of the INRIA 3DGS / gsplat convention, defined
# once here (the storage convention's activation needs SH_C0) and listed with the forward
# model in bench.render.constants.
SH_C0 = 0.28209479177387814  # 1 / (2 sqrt(pi)), the degree-0 real SH basis value
SH_C1 = 0.4886025119029199
SH_C2 = (
    1.0925484305920792,
    -1.0925484305920792,
    0.31539156525252005,
    -1.0925484305920792,
    0.5462742152960396,
)
SH_C3 = (
    -0.5900435899266435,
    2.890611442640554,
    -0.4570457994644658,
    0.3731763325901154,
    -0.4570457994644658,
    1.445305721320277,
    -0.5900435899266435,
)
SH_REST_COUNTS = {0: 0, 1: 3, 2: 8, 3: 15}  # SH degree -> rest coefficients per channel


@dataclass(frozen=True, eq=False)
class GaussianSplats:
    """A set of 3D Gaussians in storage convention (see module docstring)."""

    means: np.ndarray  # [N, 3]
    quats: np.ndarray  # [N, 4] (w, x, y, z)
    log_scales: np.ndarray  # [N, 3]
    opacity_logits: np.ndarray  # [N]
    sh_dc: np.ndarray  # [N, 3]
    sh_rest: np.ndarray  # [N, K, 3]
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [N]

    def __post_init__(self) -> None:
        n = self.means.shape[0]
        expected = {
            "means": (n, 3),
            "quats": (n, 4),
            "log_scales": (n, 3),
            "opacity_logits": (n,),
            "sh_dc": (n, 3),
        }
        for name, shape in expected.items():
            arr = getattr(self, name)
            if arr.shape != shape:
                raise ValueError(f"GaussianSplats.{name} has shape {arr.shape}, expected {shape}")
        if self.sh_rest.ndim != 3 or self.sh_rest.shape[0] != n or self.sh_rest.shape[2] != 3:
            raise ValueError(
                f"GaussianSplats.sh_rest has shape {self.sh_rest.shape}, expected [N, K, 3]"
            )
        if self.sh_rest.shape[1] not in SH_REST_COUNTS.values():
            raise ValueError(
                f"sh_rest has {self.sh_rest.shape[1]} coefficients per channel; "
                "expected 0, 3, 8 or 15 (SH degree 0-3)"
            )
        for name, arr in self.extra.items():
            if arr.shape != (n,):
                raise ValueError(f"extra property {name!r} has shape {arr.shape}, expected ({n},)")

    # ----------------------------------------------------------------- basics
    def __len__(self) -> int:
        return int(self.means.shape[0])

    @property
    def num(self) -> int:
        """Number of Gaussians."""
        return len(self)

    @property
    def sh_degree(self) -> int:
        """SH degree implied by the number of rest coefficients (0-3)."""
        k = self.sh_rest.shape[1]
        return next(d for d, count in SH_REST_COUNTS.items() if count == k)

    @property
    def nbytes(self) -> int:
        """Memory held by all arrays, in bytes."""
        fields = dataclasses.fields(self)
        core = sum(getattr(self, f.name).nbytes for f in fields if f.name != "extra")
        return core + sum(a.nbytes for a in self.extra.values())

    # ------------------------------------------------------------ activations
    def rgb(self) -> np.ndarray:  # [N, 3]
        """View-independent colour ``0.5 + SH_C0 * sh_dc`` (not clipped)."""
        return 0.5 + SH_C0 * self.sh_dc

    def opacities(self) -> np.ndarray:  # [N]
        """Opacity in (0, 1): sigmoid of the stored logit."""
        return 1.0 / (1.0 + np.exp(-self.opacity_logits.astype(np.float64)))

    def scales(self) -> np.ndarray:  # [N, 3]
        """Per-axis standard deviations: exp of the stored log-scales."""
        return np.exp(self.log_scales)

    def normalized_quats(self) -> np.ndarray:  # [N, 4]
        """Unit quaternions (w, x, y, z)."""
        q = self.quats.astype(np.float64)
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    # ---------------------------------------------------------- construction
    def replace(self, **changes: np.ndarray) -> GaussianSplats:
        """Return a copy with some arrays replaced (dataclasses.replace)."""
        return dataclasses.replace(self, **changes)

    def subset(self, index: np.ndarray) -> GaussianSplats:
        """Gaussians selected by a boolean mask [N] or an integer index array."""
        return GaussianSplats(
            means=self.means[index],
            quats=self.quats[index],
            log_scales=self.log_scales[index],
            opacity_logits=self.opacity_logits[index],
            sh_dc=self.sh_dc[index],
            sh_rest=self.sh_rest[index],
            extra={k: v[index] for k, v in self.extra.items()},
        )

    @staticmethod
    def concat(first: GaussianSplats, second: GaussianSplats) -> GaussianSplats:
        """Concatenate two sets (same SH degree); extras missing in one are zero-filled."""
        if first.sh_rest.shape[1] != second.sh_rest.shape[1]:
            raise ValueError(
                f"cannot concatenate SH degree {first.sh_degree} with SH degree {second.sh_degree}"
            )
        names = list(first.extra) + [k for k in second.extra if k not in first.extra]

        def column(s: GaussianSplats, name: str) -> np.ndarray:
            # zero-fill with the dtype the other set uses, so int extras stay int
            like = first.extra.get(name, second.extra.get(name))
            return s.extra.get(name, np.zeros(len(s), dtype=like.dtype))

        return GaussianSplats(
            means=np.concatenate([first.means, second.means]),
            quats=np.concatenate([first.quats, second.quats]),
            log_scales=np.concatenate([first.log_scales, second.log_scales]),
            opacity_logits=np.concatenate([first.opacity_logits, second.opacity_logits]),
            sh_dc=np.concatenate([first.sh_dc, second.sh_dc]),
            sh_rest=np.concatenate([first.sh_rest, second.sh_rest]),
            extra={k: np.concatenate([column(first, k), column(second, k)]) for k in names},
        )

    @staticmethod
    def empty(*, sh_degree: int = 0) -> GaussianSplats:
        """A set with zero Gaussians."""
        k = SH_REST_COUNTS[sh_degree]
        z = np.zeros
        return GaussianSplats(
            z((0, 3), np.float32), z((0, 4), np.float32), z((0, 3), np.float32),
            z((0,), np.float32), z((0, 3), np.float32), z((0, k, 3), np.float32),
        )

    def nonfinite_mask(self) -> np.ndarray:  # [N] bool
        """True for Gaussians with any NaN/Inf in a core array (extras are not checked)."""
        bad = ~np.isfinite(self.means).all(1)
        bad |= ~np.isfinite(self.quats).all(1)
        bad |= ~np.isfinite(self.log_scales).all(1)
        bad |= ~np.isfinite(self.opacity_logits)
        bad |= ~np.isfinite(self.sh_dc).all(1)
        bad |= ~np.isfinite(self.sh_rest).all((1, 2))
        return bad

    def count_nonfinite(self) -> int:
        """Number of Gaussians with any NaN/Inf in a core array."""
        return int(self.nonfinite_mask().sum())
