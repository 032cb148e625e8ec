"""A study scores Test captures in the frame their camera file states (issue 30, item 1).

The captures are the bench's own clean renders at the sample room's Test cameras
(``bench render --role test``: world-frame cameras), so the clean Test PSNR must be
high. Before the fix the study read every captures camera file as splat-frame and
rendered the splat-frame background: 11.4 dB on these files while ``bench score``
gave 58.9 dB. The sample room's ``world_from_splat`` is not the identity, so the two
frames differ. The preflight (:func:`bench.study.preflight.check_capture_frame`)
refuses a file read in the wrong frame with one line naming the frame and the fix.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bench.errors import BenchError
from bench.scene.bundle import load_scene
from bench.study.captures import capture_views, prepare_test_capture
from bench.study.spec import StudySpec
from metrics.psnr import psnr


@pytest.fixture(scope="module")
def room(rendered_sample_room):
    return rendered_sample_room


def captures(room, folder, *, edit=None, shift=0, fill=None):
    """A captures folder from the renders: images named like their cameras + cameras.json.

    ``edit(entries)`` changes the camera entries (e.g. the frame key); ``shift`` moves every
    pixel by that many grey levels (down where it would pass 255); ``fill`` replaces the
    images by that grey level.
    """
    import imageio.v3 as iio

    entries = json.loads((room / "renders" / "cameras.json").read_text())
    (folder / "images").mkdir(parents=True)
    for i, entry in enumerate(entries):
        image = iio.imread(room / "renders" / "rgb" / f"{i:04d}_{entry['name']}.png")
        image = image.astype(np.int16)
        if shift:
            image = np.where(image + shift <= 255, image + shift, image - shift)
        if fill is not None:
            image = np.full_like(image, fill)
        iio.imwrite(folder / "images" / f"{entry['name']}.png", image.astype(np.uint8))
    if edit is not None:
        entries = edit(entries) or entries
    (folder / "cameras.json").write_text(json.dumps(entries))
    return folder


def spec_for(room, caps) -> StudySpec:
    return StudySpec(name="frames", scenes={"room": str(room / "room")},
                     captures={"room": str(caps)}, metrics=("psnr",), real_domain="simulated")


def clean_psnr(room, caps, out):  # -> [V] dB, the study's clean Test scores
    capture = prepare_test_capture(spec_for(room, caps), out, "room")
    sets = capture_views(load_scene(room / "room"), capture, scene="room", condition="clean",
                         backend="cpu")
    return np.concatenate([psnr(v.frames, v.references) for v in sets]), capture


def relabel(frame):
    def edit(entries):
        for entry in entries:
            entry["frame"] = frame
    return edit


def unlabel(entries):
    for entry in entries:
        entry.pop("frame", None)


def test_issue30_self_render_captures_score_in_their_frame(room, tmp_path):
    """Regression: 11.4 dB in the study vs 58.9 dB in `bench score` on the same files."""
    from bench.geometry import Similarity
    from metrics.views import test_views

    bundle = load_scene(room / "room")
    assert not Similarity.from_matrix(bundle.world_from_splat).is_identity()
    caps = captures(room, tmp_path / "caps")
    study, _ = clean_psnr(room, caps, tmp_path / "out")
    assert len(study) == 8 and study.mean() > 40.0, study  # was 11.4 dB
    score = test_views(bundle, caps / "images", backend="cpu", progress=False)
    scored = psnr(score.frames, score.references)  # `bench score --views test`
    assert scored.mean() > 40.0 and study.min() >= scored.min()  # both see the same views


def test_prepared_capture_keeps_its_frame(room, tmp_path):
    caps = captures(room, tmp_path / "caps")
    _, capture = clean_psnr(room, caps, tmp_path / "out")
    assert capture.frame == "world"
    folder = tmp_path / "out" / "captures" / "room" / "test"
    assert {e["frame"] for e in json.loads((folder / "cameras.json").read_text())} == {"world"}
    manifest = json.loads((folder / "manifest.json").read_text())
    assert (manifest["frame"], manifest["frame_declared"]) == ("world", True)
    again = prepare_test_capture(spec_for(room, caps), tmp_path / "out", "room")  # resumed
    assert again.frame == "world" and len(again.cameras) == 8


def test_splat_frame_captures_render_from_the_splat_background(room, tmp_path):
    from bench.scene.camera_files import move_cameras
    from bench.scene.cameras import Camera

    bundle = load_scene(room / "room")

    def to_splat(entries):
        cams = move_cameras([Camera.from_dict(e) for e in entries], source="world",
                            target="splat", world_from_splat=bundle.world_from_splat)
        return [{**c.to_dict(), "frame": "splat"} for c in cams]

    caps = captures(room, tmp_path / "caps", edit=to_splat)
    study, capture = clean_psnr(room, caps, tmp_path / "out")
    assert capture.frame == "splat" and study.mean() > 40.0, study


def _refusal(room, caps) -> str:
    from bench.study.preflight import check_capture_frame

    with pytest.raises(BenchError) as exc:
        check_capture_frame(spec_for(room, caps), "room", load_scene(room / "room"))
    text = str(exc.value)
    assert "\n" not in text and text.startswith("captures of scene 'room': ")
    return text


def test_world_cameras_labelled_splat_refused(room, tmp_path):
    text = _refusal(room, captures(room, tmp_path / "caps", edit=relabel("splat")))
    assert "the cameras are in the world frame, not splat" in text
    assert "(as the file states)" in text
    assert 'set "frame": "world" in every camera entry' in text


def test_keyless_world_cameras_refused_with_the_default_named(room, tmp_path):
    """A `bench render` output of an older version (no key) is read as splat, and refused."""
    text = _refusal(room, captures(room, tmp_path / "caps", edit=unlabel))
    assert "the default without a \"frame\" key" in text and '"frame": "world"' in text


def test_transforms_json_fix_names_the_top_level_key(room, tmp_path):
    from bench.scene.camera_files import load_cameras, save_cameras

    caps = captures(room, tmp_path / "caps", edit=relabel("splat"))
    save_cameras(caps / "transforms.json", load_cameras(caps / "cameras.json"), frame="splat")
    (caps / "cameras.json").unlink()
    assert 'set the top-level "frame": "world"' in _refusal(room, caps)


def test_unrelated_images_refused(room, tmp_path):
    """Black images (a failed export): 6.7 dB as world, 3.9 dB as splat."""
    text = _refusal(room, captures(room, tmp_path / "caps", fill=0))
    assert "below 12 dB: the images do not show the clean scene" in text


def test_low_psnr_warns_with_the_number(room, tmp_path):
    from bench.study.preflight import CaptureWarning, check_capture_frame

    caps = captures(room, tmp_path / "caps", shift=40)  # 20 log10(255 / 40) = 16.1 dB
    with pytest.warns(CaptureWarning, match=r"mean clean Test PSNR 1[5-7]\.\d dB over 4 views"):
        fit = check_capture_frame(spec_for(room, caps), "room", load_scene(room / "room"))
    assert fit.frame == "world" and fit.other_psnr is not None and fit.other_psnr < fit.psnr


def test_check_study_refuses_before_out_exists(room, tmp_path):
    from bench.study.preflight import check_study

    caps = captures(room, tmp_path / "caps", edit=relabel("splat"))
    with pytest.raises(BenchError, match="in the world frame, not splat"):
        check_study(spec_for(room, caps), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    shutil.rmtree(caps)
    caps = captures(room, tmp_path / "caps")
    check_study(spec_for(room, caps), tmp_path / "out")  # the right frame passes
