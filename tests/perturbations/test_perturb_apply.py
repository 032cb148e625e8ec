"""Mapping edits back to the splat frame: untouched rows bit-exact, edited rows transformed."""

import numpy as np
import pytest

from bench.scene.sample import make_sample_scene
from bench.scene.transforms import transform_splats
from perturbations import apply_perturbation
from perturbations.apply import to_splat_frame


@pytest.mark.parametrize("name", ["hole-90", "floaters-low", "warp"])
def test_changed_hint_and_generic_comparison_agree(name):
    scene = make_sample_scene(seed=0, n_gaussians=3000)
    result = apply_perturbation(scene, name, seed=0)
    world = result.bundle.background
    splat_in = scene.splat_background()
    hinted = result.bundle.splat_background()
    generic = to_splat_frame(world, result.stats.source_index, scene.background, splat_in,
                             scene.similarity, changed=None)
    for field in ("means", "quats", "log_scales", "opacity_logits", "sh_dc", "sh_rest"):
        assert getattr(hinted, field).tobytes() == getattr(generic, field).tobytes(), field
    # every row agrees (to float32 round-off) with mapping the world rows back
    back = transform_splats(world, scene.similarity.inverse())
    np.testing.assert_allclose(hinted.means, back.means, atol=1e-5)
    np.testing.assert_allclose(hinted.sh_rest, back.sh_rest, atol=1e-5)
    # rows that kept their source are exact copies of the stored rows
    src = result.stats.source_index
    same = (src >= 0) & ~result.stats.changed
    np.testing.assert_array_equal(hinted.quats[same], splat_in.quats[src[same]])
    np.testing.assert_array_equal(hinted.means[same], splat_in.means[src[same]])


def test_overrides_on_a_preset_are_listed_in_the_manifest():
    # a preset plus overrides is no longer the study condition: the manifest says so
    from perturbations.apply import perturb_manifest

    scene = make_sample_scene(seed=0, n_gaussians=1000)
    result = apply_perturbation(scene, "floaters-mid", seed=0, num_clusters=3)
    manifest = perturb_manifest(result, {})
    assert manifest["entry"] == "floaters-mid" and manifest["overrides"] == {"num_clusters": 3}
    assert manifest["params"]["num_clusters"] == 3 and manifest["counts"]["added"] == 12
