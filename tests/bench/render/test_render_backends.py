"""Backends agree with the dense reference; analytic footprint; SH; bad input."""

import math

import numpy as np
import pytest

from bench.render import BACKENDS, render, render_batch
from bench.render import constants as K
from bench.scene.cameras import Camera, look_at
from bench.scene.gaussians import SH_C0, SH_REST_COUNTS, GaussianSplats


def random_scene(seed, n=250, *, degree=3, centre=(0.0, 0.0, 0.0), spread=1.0):
    rng = np.random.default_rng(seed)
    f32 = np.float32
    return GaussianSplats(
        means=(np.asarray(centre) + rng.uniform(-spread, spread, (n, 3))).astype(f32),
        quats=rng.normal(size=(n, 4)).astype(f32),
        log_scales=np.log(rng.uniform(0.01, 0.12, (n, 3))).astype(f32),
        opacity_logits=rng.normal(0.5, 2.0, n).astype(f32),
        sh_dc=rng.normal(0.0, 1.0, (n, 3)).astype(f32),
        sh_rest=rng.normal(0.0, 0.3, (n, SH_REST_COUNTS[degree], 3)).astype(f32),
    )


def psnr(a, b):
    return 10 * math.log10(1.0 / max(float(np.mean((a - b) ** 2)), 1e-20))


def pinhole_cam(seed, width=48, height=40):
    rng = np.random.default_rng(seed + 100)
    eye = rng.normal(size=3)
    eye = 3.0 * eye / np.linalg.norm(eye)
    return Camera("pinhole", width, height, 45.0, 47.0, width / 2 + 0.3, height / 2 - 0.7,
                  look_at(eye, (0, 0, 0)))


def fisheye_cam(seed, width=48, height=40):
    rng = np.random.default_rng(seed + 200)
    eye = rng.normal(size=3)
    eye = 1.3 * eye / np.linalg.norm(eye)  # inside the cloud's reach: Gaussians at all angles
    return Camera("fisheye", width, height, 13.0, 13.5, width / 2, height / 2,
                  look_at(eye, (0, 0, 0)), distortion=(0.03, -0.01, 0.002, -0.0003), fov_deg=200.0)


def assert_matches_reference(out, ref, *, min_psnr=40.0):
    assert psnr(out.rgb, ref.rgb) >= min_psnr
    assert psnr(out.alpha, ref.alpha) >= min_psnr
    solid = ref.alpha > 0.5
    assert solid.any()
    # Depth within 1 mm where the reference is mostly opaque (issue 4, item 7).
    np.testing.assert_array_less(np.abs(out.depth[solid] - ref.depth[solid]), 1e-3)
    np.testing.assert_array_equal(np.isinf(out.depth), np.isinf(ref.depth))
    np.testing.assert_array_equal(out.valid, ref.valid)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_pinhole_matches_reference(seed, backend):
    splats, cam = random_scene(seed), pinhole_cam(seed)
    ref = render(splats, cam, backend="reference", background=(0.2, 0.5, 0.9))
    out = render(splats, cam, backend=backend, background=(0.2, 0.5, 0.9))
    assert 0.05 < ref.alpha.mean() < 0.999  # a non-trivial image
    assert_matches_reference(out, ref)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_fisheye_direct_matches_reference(seed, backend):
    splats, cam = random_scene(seed), fisheye_cam(seed)
    ref = render(splats, cam, backend="reference")
    out = render(splats, cam, backend=backend)
    assert 0.05 < ref.alpha[ref.valid].mean() < 0.999
    assert not ref.valid.all() and ref.valid.mean() > 0.5  # the 200-degree image circle
    assert_matches_reference(out, ref)


def test_fisheye_invalid_pixels_are_background():
    splats, cam = random_scene(3), fisheye_cam(3)
    out = render(splats, cam, backend="cpu", background=(0.1, 0.2, 0.3))
    outside = ~out.valid
    assert outside.any()
    bg = np.broadcast_to([0.1, 0.2, 0.3], (outside.sum(), 3))
    np.testing.assert_allclose(out.rgb[outside], bg, atol=1e-7)
    assert (out.alpha[outside] == 0).all() and np.isinf(out.depth[outside]).all()


def test_fisheye_direct_and_cubemap_agree_away_from_border():
    # Gaussians 2-5 m away on all sides, 0.5-3 px wide: both paths linearise the projection
    # accurately there, so they agree up to the cube map's bilinear resampling (~30 dB on this
    # high-frequency random content; a wrong face orientation gives ~12 dB). The low-pass
    # dilation is in pixels, so the cube faces use the default resolution (the fisheye's
    # central pixel density).
    rng = np.random.default_rng(7)
    n = 3000
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    base = random_scene(7, n=n, degree=1)
    splats = base.replace(
        means=(dirs * rng.uniform(2.0, 5.0, (n, 1))).astype(np.float32),
        log_scales=np.log(rng.uniform(0.1, 0.25, (n, 3))).astype(np.float32),
        opacity_logits=rng.normal(0.0, 1.0, n).astype(np.float32),
    )
    cam = Camera("fisheye", 96, 96, 27.0, 27.0, 48.0, 48.0, look_at((0, 0, 0), (1, 0.2, 0.1)),
                 distortion=(0.02, -0.005, 0.0, 0.0), fov_deg=200.0)
    direct = render(splats, cam, backend="cpu", fisheye_mode="direct")
    cube = render(splats, cam, backend="cpu", fisheye_mode="cubemap")
    np.testing.assert_array_equal(direct.valid, cube.valid)
    rays, _ = cam.pixel_rays()
    inner = direct.valid & (np.arccos(np.clip(rays[..., 2], -1, 1)) < math.radians(75))
    assert psnr(direct.rgb[inner], cube.rgb[inner]) >= 27.0
    assert np.abs(direct.alpha[inner] - cube.alpha[inner]).mean() < 0.015
    solid = inner & (direct.alpha > 0.95) & (cube.alpha > 0.95)
    # Expected depth mixes the 2-5 m layers, so it inherits the resampling differences.
    rel = np.abs(direct.depth[solid] - cube.depth[solid]) / direct.depth[solid]
    assert np.median(rel) < 0.05


@pytest.mark.parametrize("backend", ["cpu", "torch", "reference"])
def test_single_isotropic_gaussian_analytic_footprint(backend):
    # A sphere of std s at distance d on the optical axis projects to an isotropic 2D
    # Gaussian with variance (f s / d)^2 + LOW_PASS_PX (closed form of EWA at the axis).
    f, s, d, opacity, rgb = 40.0, 0.05, 2.0, 0.8, np.array([0.9, 0.4, 0.1])
    splats = GaussianSplats(
        means=np.array([[0.0, 0.0, d]], np.float32), quats=np.array([[1, 0, 0, 0]], np.float32),
        log_scales=np.full((1, 3), math.log(s), np.float32),
        opacity_logits=np.array([math.log(opacity / (1 - opacity))], np.float32),
        sh_dc=((rgb - 0.5) / SH_C0)[None].astype(np.float32),
        sh_rest=np.zeros((1, 0, 3), np.float32),
    )
    cam = Camera("pinhole", 32, 32, f, f, 16.0, 16.0, np.eye(4))
    out = render(splats, cam, backend=backend)
    var = (f * s / d) ** 2 + K.LOW_PASS_PX
    jj, ii = np.meshgrid(np.arange(32) + 0.5, np.arange(32) + 0.5)
    expected = opacity * np.exp(-0.5 * ((jj - 16) ** 2 + (ii - 16) ** 2) / var)
    expected = np.where(expected >= K.ALPHA_MIN, np.minimum(expected, K.ALPHA_MAX), 0.0)
    np.testing.assert_allclose(out.alpha, expected, atol=2e-6)
    np.testing.assert_allclose(out.rgb, expected[..., None] * rgb, atol=2e-6)
    np.testing.assert_allclose(out.depth[expected > 0], d, rtol=1e-5)  # float32 D / alpha
    assert np.isinf(out.depth[expected == 0]).all()


def test_alpha_clamp_and_transmittance_stop():
    # Ten coincident opaque sheets: alpha clamps at 0.99 and the pixel stops before T < 1e-4,
    # so exactly two layers contribute: T = 0.01 after one, 1e-4 after two (kept, not < 1e-4),
    # the third would give 1e-6 and is excluded (closed form of the blending rule).
    n = 10
    splats = GaussianSplats(
        means=np.stack([np.zeros(n), np.zeros(n), 1.0 + 0.01 * np.arange(n)], 1).astype(np.float32),
        quats=np.tile([1, 0, 0, 0], (n, 1)).astype(np.float32),
        log_scales=np.full((n, 3), math.log(0.5), np.float32),
        opacity_logits=np.full(n, 12.0, np.float32),
        sh_dc=np.zeros((n, 3), np.float32), sh_rest=np.zeros((n, 0, 3), np.float32),
    )
    cam = Camera("pinhole", 16, 16, 10.0, 10.0, 8.0, 8.0, np.eye(4))
    for backend in ("cpu", "reference", "torch"):
        out = render(splats, cam, backend=backend, background=(1, 1, 1))
        centre_alpha = out.alpha[8, 8]
        assert centre_alpha == pytest.approx(1 - 1e-4, abs=2e-6), backend
        # depth: weights 0.99 at z=1.00 and 0.0099 at z=1.01, normalised by alpha
        assert out.depth[8, 8] == pytest.approx((0.99 * 1.0 + 0.0099 * 1.01) / 0.9999, abs=1e-5)


def test_sh_degree_zero_vs_three_consistency():
    splats = random_scene(11, degree=3)
    cam = pinhole_cam(11)
    dc_only = splats.replace(sh_rest=np.zeros((splats.num, 0, 3), np.float32))
    zero_rest = splats.replace(sh_rest=np.zeros_like(splats.sh_rest))
    a = render(splats, cam, backend="cpu", sh_degree=0)
    b = render(dc_only, cam, backend="cpu")
    c = render(zero_rest, cam, backend="cpu")  # degree 3 with zero higher bands
    np.testing.assert_array_equal(a.rgb, b.rgb)
    np.testing.assert_allclose(c.rgb, b.rgb, atol=1e-6)
    full = render(splats, cam, backend="cpu")
    assert psnr(full.rgb, a.rgb) < 40  # higher bands do change the colours
    ref = render(splats, cam, backend="reference", sh_degree=2)
    assert_matches_reference(render(splats, cam, backend="cpu", sh_degree=2), ref)
    with pytest.raises(ValueError, match="sh_degree"):
        render(dc_only, cam, backend="cpu", sh_degree=1)


def test_view_dependent_colour_closed_form():
    # One Gaussian with only the first degree-1 coefficient (basis -C1 * y): seen from
    # direction y = -1 (camera on +y looking towards -y) the colour is 0.5 + C0 dc + C1 sh1.
    sh_rest = np.zeros((1, 3, 3), np.float32)
    sh_rest[0, 0] = [0.4, 0.0, -0.2]
    splats = GaussianSplats(
        np.zeros((1, 3), np.float32), np.array([[1, 0, 0, 0]], np.float32),
        np.full((1, 3), math.log(0.3), np.float32), np.array([20.0], np.float32),
        np.zeros((1, 3), np.float32), sh_rest)
    cam = Camera("pinhole", 16, 16, 10.0, 10.0, 8.0, 8.0, look_at((0, 3, 0), (0, 0, 0)))
    out = render(splats, cam, backend="cpu")
    expected = 0.5 + K.SH_C1 * np.array([0.4, 0.0, -0.2])  # direction (0,-1,0): -C1*y = +C1
    np.testing.assert_allclose(out.rgb[8, 8] / out.alpha[8, 8], expected, atol=1e-5)


def test_camera_behind_everything_gives_empty_image():
    splats = random_scene(4)
    pose = look_at((0, 0, 5), (0, 1, 10))  # the cloud lies at |z| <= 1, behind this camera
    cam = Camera.pinhole_from_fov(24, 20, fov_x_deg=60, world_from_camera=pose)
    for backend in ("cpu", "torch", "reference"):
        out = render(splats, cam, backend=backend, background=(0.3, 0.3, 0.3))
        assert (out.alpha == 0).all() and np.isinf(out.depth).all()
        np.testing.assert_allclose(out.rgb, 0.3, atol=1e-7)


def test_empty_splats():
    out = render(GaussianSplats.empty(sh_degree=3), pinhole_cam(0), backend="cpu")
    assert out.rgb.shape == (40, 48, 3) and (out.alpha == 0).all()


def test_bad_inputs_raise_with_fix():
    splats, cam = random_scene(5), pinhole_cam(5)
    with pytest.raises(ValueError, match="did you mean 'cpu'"):
        render(splats, cam, backend="cpux")
    with pytest.raises(ValueError, match="fisheye_mode"):
        render(splats, cam, fisheye_mode="sphere")
    with pytest.raises(ValueError, match="background"):
        render(splats, cam, backend="cpu", background=(2, 0, 0))
    bad = splats.means.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="drop_nonfinite"):
        render(splats.replace(means=bad), cam, backend="cpu")
    with pytest.raises(ValueError, match="positive"):
        cam.replace(width=0)
    with pytest.raises(ValueError, match="NaN"):
        cam.with_pose(np.full((4, 4), np.nan))


def test_deterministic_and_cache_independent():
    splats, cam = random_scene(6, n=400), pinhole_cam(6)
    first = render(splats, cam, backend="cpu")
    other = render(random_scene(8), fisheye_cam(8), backend="cpu")  # different sizes in between
    assert other.rgb.shape == (40, 48, 3)
    again = render(splats, cam, backend="cpu")
    fresh = render(random_scene(6, n=400), cam, backend="cpu")  # new object, new upload
    for out in (again, fresh):
        assert first.rgb.tobytes() == out.rgb.tobytes()
        assert first.depth.tobytes() == out.depth.tobytes()


def test_render_batch_matches_single():
    splats = random_scene(9)
    cams = [pinhole_cam(9), fisheye_cam(9), pinhole_cam(10)]
    outs = render_batch(splats, cams, backend="cpu")
    for cam, out in zip(cams, outs, strict=True):
        np.testing.assert_array_equal(out.rgb, render(splats, cam, backend="cpu").rgb)


def test_registry_metadata():
    assert {"cpu", "gsplat", "reference", "torch"} <= set(BACKENDS.names())
    assert BACKENDS.entry("gsplat").meta["device"] == "cuda"
    assert BACKENDS.entry("torch").meta["differentiable"] is True
    with pytest.raises(ValueError, match=r"did you mean 'cpu'.*or 'auto'"):
        render(random_scene(0, n=3), pinhole_cam(0), backend="cpus")


def test_degenerate_gaussians_are_culled_not_fatal():
    splats = random_scene(12, n=50)
    quats = splats.quats.copy()
    quats[:5] = 0.0  # no rotation defined
    scales = splats.log_scales.copy()
    scales[5:10] = -40.0  # vanishing Gaussians: only the 0.3 px low-pass remains
    bad = splats.replace(quats=quats, log_scales=scales)
    good = splats.subset(np.arange(5, 50)).replace(log_scales=scales[5:])
    cam = pinhole_cam(12)
    for backend in ("cpu", "torch", "reference"):
        out = render(bad, cam, backend=backend)
        assert np.isfinite(out.rgb).all() and np.isfinite(out.alpha).all(), backend
        # The zero-quaternion Gaussians are dropped: same image as without them.
        np.testing.assert_allclose(out.rgb, render(good, cam, backend=backend).rgb, atol=1e-6)


def test_cpu_backend_import_prints_nothing():
    # Warp's native init prints a "no CUDA driver" notice on CPU-only machines; the backend
    # filters exactly that line, so `bench render` on a laptop starts without a warning
    import subprocess
    import sys

    code = "import bench.render.warp_backend as w; import warp as wp; print(wp.is_cpu_available())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "True"
    assert "CUDA driver" not in done.stderr, done.stderr
