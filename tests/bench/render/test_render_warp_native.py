"""The vectorised native tile rasterizer of the ``cpu`` backend vs its plain Warp kernel.

``bench.render.warp_backend`` rasterizes with ``_raster_tile_kernel`` (C++ snippet, masked
16-lane rows, polynomial exp) and keeps ``_raster_kernel`` (Warp language, libm expf) as the
plain implementation; both apply the same per-pixel rules, so they must agree to float
round-off. The only differences allowed come from the two exp implementations (~1 ulp)
occasionally flipping an ``alpha >= ALPHA_MIN`` or ``T < TRANSMITTANCE_MIN`` decision.
"""

import numpy as np
import pytest

from bench.render import warp_backend as wb
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import SH_REST_COUNTS, GaussianSplats


def dense_scene(seed, n=3000):
    # Many overlapping, fairly opaque Gaussians: pixels saturate (T < 1e-4) and rows finish.
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return GaussianSplats(
        means=rng.uniform(-0.6, 0.6, (n, 3)).astype(f32),
        quats=rng.normal(size=(n, 4)).astype(f32),
        log_scales=np.log(rng.uniform(0.01, 0.08, (n, 3))).astype(f32),
        opacity_logits=rng.normal(1.0, 2.0, n).astype(f32),
        sh_dc=rng.normal(0.0, 1.0, (n, 3)).astype(f32),
        sh_rest=rng.normal(0.0, 0.3, (n, SH_REST_COUNTS[3], 3)).astype(f32),
    )


def render_both(monkeypatch, splats, cam, **kwargs):
    native = wb.render_cpu(splats, cam, **kwargs)
    monkeypatch.setattr(wb, "_NATIVE_RASTER", False)
    plain = wb.render_cpu(splats, cam, **kwargs)
    monkeypatch.setattr(wb, "_NATIVE_RASTER", True)
    return native, plain


def assert_round_off_close(native, plain):
    for name in ("rgb", "alpha"):
        a, b = getattr(native, name), getattr(plain, name)
        diff = np.abs(a - b)
        # Decision flips from a 1-ulp exp difference change a pixel by <= one stopped
        # Gaussian's contribution at T ~ 1e-4, i.e. ~1e-4; everything else is round-off.
        assert diff.max() <= 1e-3, name
        assert np.mean(diff > 1e-5) <= 0.01, name
    finite = np.isfinite(plain.depth)
    np.testing.assert_array_equal(np.isfinite(native.depth), finite)
    np.testing.assert_allclose(native.depth[finite], plain.depth[finite], rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(native.valid, plain.valid)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("size", [(64, 48), (53, 37)])  # 37x53: partial edge tiles
@pytest.mark.parametrize("tile_size", [16, 8, 32])  # 16: the constant-trip row loop
def test_native_tiles_match_plain_warp_kernel_pinhole(monkeypatch, seed, size, tile_size):
    width, height = size
    splats = dense_scene(seed)
    cam = Camera("pinhole", width, height, 0.8 * width, 0.8 * width, width / 2 + 0.3,
                 height / 2 - 0.4, look_at((0.4, -2.0, 0.9), (0, 0, 0)))
    native, plain = render_both(monkeypatch, splats, cam, background=(0.2, 0.4, 0.6),
                                tile_size=tile_size)
    assert (plain.alpha > 0.999).mean() > 0.1  # saturated pixels exercise the T stop
    assert_round_off_close(native, plain)


def test_native_tiles_match_plain_warp_kernel_fisheye_and_occluder(monkeypatch):
    splats = dense_scene(2)
    cam = Camera("fisheye", 48, 40, 13.0, 13.5, 24.0, 20.0, look_at((0.3, -1.2, 0.5), (0, 0, 0)),
                 distortion=(0.03, -0.01, 0.002, -0.0003), fov_deg=200.0)
    native, plain = render_both(monkeypatch, splats, cam)
    assert (~plain.valid).any()
    assert_round_off_close(native, plain)
    occluder = np.full((40, 48), np.inf, np.float32)
    occluder[:, :20] = 1.0  # an opaque surface 1 m away over the left part of the image
    native, plain = render_both(monkeypatch, splats, cam, occluder_depth=occluder)
    assert_round_off_close(native, plain)
    # And the occluder really cut something: the occluded render has less alpha there.
    free = wb.render_cpu(splats, cam)
    assert (native.alpha[:, :20] < free.alpha[:, :20] - 1e-3).any()


def test_large_tiles_use_the_plain_kernel():
    # Tiles larger than the native stack buffers fall back to the Warp-language kernel.
    splats = dense_scene(3, n=500)
    cam = Camera("pinhole", 70, 70, 60.0, 60.0, 35.0, 35.0, look_at((0.0, -2.0, 0.5), (0, 0, 0)))
    small = wb.render_cpu(splats, cam, tile_size=16)
    big = wb.render_cpu(splats, cam, tile_size=64)
    # Different tile sizes cut footprints differently (the tile rule), but only at the edges.
    assert np.mean(np.abs(small.rgb - big.rgb) > 1e-3) < 0.05


def test_native_snippets_spell_the_forward_model_constants():
    """The C++ snippets take ALPHA_MIN/MAX, TRANSMITTANCE_MIN, TILE_SIZE from constants.py."""
    from bench.render import constants as K
    from bench.render import warp_culled, warp_grad

    spelled = wb.NATIVE_CONSTANTS
    # a C++ float literal is the decimal rounded once to float32, as numpy parses it
    assert np.float32(spelled["ALPHA_MAX"].removesuffix("f")) == np.float32(K.ALPHA_MAX)
    assert (np.float32(spelled["TRANSMITTANCE_MIN"].removesuffix("f"))
            == np.float32(K.TRANSMITTANCE_MIN))
    # (float)(1.0 / d): a double quotient rounded to float32
    denominator = float(spelled["ALPHA_MIN"].removeprefix("(float)(1.0 / ").removesuffix(")"))
    assert np.float32(1.0 / denominator) == np.float32(K.ALPHA_MIN)
    assert int(spelled["TILE_SIZE"]) == K.TILE_SIZE
    for snippet in (wb._RASTER_TILE_SNIPPET, warp_culled.RASTER_PACKED_SNIPPET,
                    warp_grad._FORWARD_SNIPPET, warp_grad._BACKWARD_SNIPPET):
        assert "$" not in snippet
        assert spelled["ALPHA_MIN"] in snippet and spelled["ALPHA_MAX"] in snippet
    for forward in (wb._RASTER_TILE_SNIPPET, warp_culled.RASTER_PACKED_SNIPPET,
                    warp_grad._FORWARD_SNIPPET):
        assert f"(t_next < {spelled['TRANSMITTANCE_MIN']})" in forward
