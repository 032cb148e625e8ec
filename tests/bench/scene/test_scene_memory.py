"""Low-memory paths (issue 15, item 6) against their plain references, byte for byte.

Every chunked / in-place path is run with small chunk sizes (1, 7, 333 rows) so chunk
boundaries fall inside the scene, and compared with the plain whole-array path it
replaces: the PLY writer (:func:`encode_ply`, :func:`encode_ply_reference`), the
similarity transform (:func:`transform_splats`), the render upload
(:func:`device_inputs_reference`), the world-frame loader, and ``bench perturb``'s
:func:`perturb_scene` (against ``apply_perturbation(load_scene(...))``).
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.geometry import Similarity
from bench.scene import ply
from bench.scene.bundle import load_scene, save_scene
from bench.scene.gaussians import GaussianSplats
from bench.scene.sample import make_sample_scene, sample_background, sample_world_from_splat
from bench.scene.transforms import transform_splats, transform_splats_inplace

FIELDS = ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest")


def same_bytes(a: GaussianSplats, b: GaussianSplats) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name
    assert sorted(a.extra) == sorted(b.extra)
    for name in a.extra:
        assert a.extra[name].tobytes() == b.extra[name].tobytes(), name


def copy_of(splats: GaussianSplats) -> GaussianSplats:
    return GaussianSplats(**{n: getattr(splats, n).copy() for n in FIELDS},
                          extra={k: v.copy() for k, v in splats.extra.items()})


@pytest.fixture(scope="module")
def splats() -> GaussianSplats:
    s = sample_background(seed=1, n_gaussians=1000)
    rng = np.random.default_rng(0)
    extra = {"nx": rng.normal(size=len(s)).astype(np.float32),
             "ny": rng.normal(size=len(s)).astype(np.float32),
             "nz": rng.normal(size=len(s)).astype(np.float32),
             "label": rng.integers(0, 9, len(s)).astype(np.int16)}
    return s.replace(extra=extra)


# ------------------------------------------------------------------ PLY writer
@pytest.mark.parametrize("chunk_rows", [1, 7, 333, 1000, 5000])
@pytest.mark.parametrize("normals", [True, False])
def test_chunked_ply_bytes_equal_whole_file_encoders(splats, chunk_rows, normals):
    whole = ply.encode_ply(splats, normals=normals).tobytes()
    chunked = b"".join(c.tobytes() for c in
                       ply.iter_ply_chunks(splats, normals=normals, chunk_rows=chunk_rows))
    assert chunked == whole
    assert chunked == ply.encode_ply_reference(splats, normals=normals)


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_chunked_ply_without_normals_in_extra_and_other_degrees(degree):
    base = sample_background(seed=2, n_gaussians=500)
    k = {0: 0, 1: 3, 3: 15}[degree]
    s = base.replace(sh_rest=np.ascontiguousarray(base.sh_rest[:, :k]))
    chunks = b"".join(c.tobytes() for c in ply.iter_ply_chunks(s, chunk_rows=7))
    assert chunks == ply.encode_ply_reference(s)  # normals absent: zeros in every chunk


def test_write_ply_streams_the_same_file(tmp_path, splats, monkeypatch):
    monkeypatch.setattr(ply, "WRITE_CHUNK_ROWS", 7)
    ply.write_ply(tmp_path / "a.ply", splats)
    ply.write_ply(tmp_path / "b.ply", splats, chunk_rows=100_000)
    data = (tmp_path / "a.ply").read_bytes()
    assert data == (tmp_path / "b.ply").read_bytes() == ply.encode_ply(splats).tobytes()
    same_bytes(ply.read_ply(tmp_path / "a.ply"), splats)


def test_empty_set_streams_the_header_only(tmp_path):
    empty = GaussianSplats.empty(sh_degree=3)
    assert b"".join(c.tobytes() for c in ply.iter_ply_chunks(empty, chunk_rows=3)) == \
        ply.encode_ply(empty).tobytes()
    with pytest.raises(ValueError, match="chunk_rows"):
        next(ply.iter_ply_chunks(empty, chunk_rows=0))


# ------------------------------------------------------------------ transforms
TRANSFORMS = {
    "sample": sample_world_from_splat(),
    "translate+scale": np.array([[2.0, 0, 0, 0.1], [0, 2.0, 0, -0.3], [0, 0, 2.0, 0.7],
                                 [0, 0, 0, 1]]),
    "translate": np.array([[1.0, 0, 0, 0.1], [0, 1.0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1]]),
}


@pytest.mark.parametrize("kind", list(TRANSFORMS))
@pytest.mark.parametrize("chunk_rows", [1, 7, 333])
def test_inplace_transform_equals_plain_transform(splats, kind, chunk_rows):
    matrix = TRANSFORMS[kind]
    plain = transform_splats(splats, matrix)
    work = copy_of(splats)
    inplace = transform_splats_inplace(work, matrix, chunk_rows=chunk_rows)
    same_bytes(inplace, plain)
    assert inplace.means is work.means and inplace.sh_rest is work.sh_rest  # no copies
    back = transform_splats_inplace(inplace, Similarity.from_matrix(matrix).inverse(),
                                    chunk_rows=chunk_rows)
    same_bytes(back, transform_splats(plain, Similarity.from_matrix(matrix).inverse()))


def test_no_rotation_shares_orientation_and_sh(splats):
    out = transform_splats(splats, TRANSFORMS["translate+scale"])
    assert out.quats is splats.quats and out.sh_rest is splats.sh_rest
    np.testing.assert_array_equal(out.log_scales,
                                  (splats.log_scales.astype(np.float64) + np.log(2.0))
                                  .astype(np.float32))
    out = transform_splats(splats, TRANSFORMS["translate"])
    assert out.log_scales is splats.log_scales and out.means is not splats.means
    # a real rotation still rotates (the view-dependent colour follows the scene)
    rotated = transform_splats(splats, TRANSFORMS["sample"])
    assert not np.array_equal(rotated.sh_rest, splats.sh_rest)


# ------------------------------------------------------------------ render upload
@pytest.mark.parametrize("chunk_rows", [1, 7, 333])
def test_chunked_device_inputs_equal_reference(splats, chunk_rows):
    from bench.render import warp_backend as wb

    order = np.random.default_rng(3).permutation(len(splats))[:700]
    ref = wb.device_inputs_reference(splats.subset(order))
    out = {k: np.full_like(v, np.nan) for k, v in ref.items()}
    wb.fill_device_inputs(splats, out, order, chunk_rows=chunk_rows)
    for name, value in ref.items():
        assert value.tobytes() == out[name].tobytes(), name
    whole = wb._SplatArrays(splats)  # the uploaded arrays of the default (unordered) path
    ref = wb.device_inputs_reference(splats)
    for name in ref:
        assert getattr(whole, name).numpy().tobytes() == ref[name].tobytes(), name


# ------------------------------------------------------------------ loader + perturb
@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mem")
    scene = make_sample_scene(seed=0, n_gaussians=3000)
    save_scene(scene, root / "sample")
    save_scene(scene.replace(world_from_splat=TRANSFORMS["translate+scale"]), root / "scaled")
    save_scene(scene.replace(world_from_splat=np.eye(4)), root / "plain")
    return root


@pytest.mark.parametrize("which", ["sample", "scaled", "plain"])
def test_world_frame_loader_equals_plain_loader(bundle_dir, which):
    plain = load_scene(bundle_dir / which)
    lean = load_scene(bundle_dir / which, keep_splat_frame=False)
    same_bytes(lean.background, plain.background)
    assert lean.stored is None


@pytest.mark.parametrize("which", ["sample", "scaled", "plain"])
@pytest.mark.parametrize("name", ["hole-54", "hole-90", "floaters-mid", "warp"])
def test_perturb_scene_equals_plain_path_byte_for_byte(bundle_dir, tmp_path, monkeypatch,
                                                       which, name):
    from perturbations.apply import apply_perturbation, perturb_scene, save_perturbed

    monkeypatch.setattr(ply, "WRITE_CHUNK_ROWS", 7)  # chunk boundaries inside the file
    plain = apply_perturbation(load_scene(bundle_dir / which), name, seed=3)
    lean = perturb_scene(bundle_dir / which, name, seed=3)
    same_bytes(lean.bundle.background, plain.bundle.background)  # world frame
    same_bytes(lean.bundle.splat_background(), plain.bundle.splat_background())
    assert lean.stats.counts() == plain.stats.counts()
    np.testing.assert_array_equal(lean.stats.source_index, plain.stats.source_index)
    save_perturbed(plain, tmp_path / "plain")
    save_perturbed(lean, tmp_path / "lean")
    for rel in ("background.ply", "scene.json"):
        assert (tmp_path / "lean" / rel).read_bytes() == (tmp_path / "plain" / rel).read_bytes()
    assert (tmp_path / "lean" / "background.ply").read_bytes() == \
        ply.encode_ply_reference(plain.bundle.splat_background())


def test_perturb_scene_without_copies_sh_rest_takes_the_plain_path(bundle_dir, monkeypatch):
    from perturbations import apply as apply_mod
    from perturbations.registry import PERTURBATIONS

    entry = PERTURBATIONS.entry("warp")
    monkeypatch.setitem(entry.meta, "copies_sh_rest", False)
    calls = []
    real = apply_mod.apply_perturbation
    monkeypatch.setattr(apply_mod, "apply_perturbation",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    result = apply_mod.perturb_scene(bundle_dir / "sample", "warp", seed=1)
    assert calls and result.bundle.stored is not None


def test_frame_sized_sort_buffers_grow_without_changing_images():
    # A narrow view first (few Gaussians drawn, small sort buffers), then a wide one
    # (the buffers grow): each image equals a render from freshly uploaded arrays.
    from functools import partial

    from bench.render import culling
    from bench.render import warp_backend as wb
    from bench.render.culling import _INDEX
    from bench.scene.cameras import Camera, look_at

    render_cpu_culled = partial(culling.render_cpu_culled, projection="scalar")  # bit for bit

    scene = sample_background(seed=4, n_gaussians=4000)
    pose = look_at((1.2, -0.6, 0.6), (0.0, 0.0, 0.0))
    narrow = Camera.pinhole_from_fov(48, 40, fov_x_deg=20.0, world_from_camera=pose)
    wide = Camera.equidistant_fisheye(64, 64, fov_deg=200.0, world_from_camera=pose)
    reused = [fn(scene, cam) for cam in (narrow, wide)
              for fn in (wb.render_cpu, render_cpu_culled)]
    wb._CACHE.pop(scene, None)
    _INDEX.pop(scene, None)
    fresh = []
    for cam in (narrow, wide):
        for fn in (wb.render_cpu, render_cpu_culled):
            fresh.append(fn(scene, cam))
            wb._CACHE.pop(scene, None)
            _INDEX.pop(scene, None)
    for a, b in zip(reused, fresh, strict=True):
        assert a.rgb.tobytes() == b.rgb.tobytes() and a.depth.tobytes() == b.depth.tobytes()
    assert reused[0].rgb.tobytes() == reused[1].rgb.tobytes()  # culled == plain
    assert reused[2].rgb.tobytes() == reused[3].rgb.tobytes()
