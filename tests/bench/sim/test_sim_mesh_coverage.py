"""The mesh layer under Gaussians carries its coverage in alpha, not in a black-mixed colour.

With MSAA the GL resolves a silhouette pixel to a mix of the mesh and the empty (black)
clear colour while the depth test marks it covered, so the composite drew a dark fringe
around every mesh at full alpha (issue 33 item 5: the 2-4 px objects of the demo came out
darker and blockier than in the real camera's single pass, which blends them with the
table). The Gaussian-background renderer now draws its mesh pass without MSAA; the
mesh-only renderer (the real domain's rooms) keeps the model's MSAA.

Golden values: an unlit, emission-only red box is exactly (255, 0, 0) wherever it is drawn
(closed form: colour = emission x rgba, no light reaches it).
"""

import gymnasium
import mujoco
import numpy as np
import pytest

import bench.sim
from bench.scene.cameras import Camera, look_at
from bench.sim.observation import RENDER_CAMERA, MujocoPinhole

_UNLIT_BOX = f"""<mujoco>
  <visual><headlight ambient="0 0 0" diffuse="0 0 0" specular="0 0 0"/>
          <global offwidth="64" offheight="64"/></visual>
  <asset><material name="m" emission="1" specular="0" shininess="0" rgba="1 0 0 1"/></asset>
  <worldbody><camera name="{RENDER_CAMERA}"/>
    <geom type="box" size="0.1 0.07 0.05" euler="10 20 30" material="m"/></worldbody>
</mujoco>"""


def _unlit_box_render(multisample):
    model = mujoco.MjModel.from_xml_string(_UNLIT_BOX)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera = Camera.pinhole_from_fov(48, 48, fov_x_deg=60.0,
                                     world_from_camera=look_at((0.5, 0.2, 0.3), (0, 0, 0)))
    pinhole = MujocoPinhole(model, (48, 48), multisample=multisample)
    try:
        out = pinhole.render(data, camera)
        return out, model, pinhole._context.offSamples
    finally:
        pinhole.close()


def _off_red(out):
    covered = out.alpha > 0
    rgb = np.round(out.rgb[covered] * 255.0)
    return covered.sum(), int((np.abs(rgb - [255.0, 0.0, 0.0]).max(axis=-1) > 0).sum())


def test_without_msaa_every_covered_pixel_is_the_surface_colour():
    out, model, samples = _unlit_box_render(multisample=False)
    covered, off = _off_red(out)
    assert samples == 0
    assert covered > 100 and off == 0
    assert model.vis.quality.offsamples == 4  # the model's own setting is left as it was


def test_with_msaa_silhouette_pixels_mix_with_the_clear_colour():
    # what the Gaussian layer used to get: covered (alpha 1) pixels darker than the surface
    out, _, samples = _unlit_box_render(multisample=True)
    covered, off = _off_red(out)
    assert samples > 0
    assert covered > 100 and off > 0


@pytest.mark.parametrize("background, mesh_msaa, expect_msaa", [
    ("gaussian", False, False), ("gaussian", True, True), ("none", False, True)])
def test_env_mesh_pass_multisampling(small_scene, background, mesh_msaa, expect_msaa):
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=small_scene, cameras="yubi-dual",
                         image_size=(40, 40), max_frames=40, background=background,
                         mesh_msaa=mesh_msaa)
    try:
        env.reset(seed=0)
        renderer = env.unwrapped._get_renderer()
        samples = renderer.mujoco._context.offSamples
        assert (samples > 0) is expect_msaa
        assert env.unwrapped.world.model.vis.quality.offsamples > 0  # not changed for others
    finally:
        env.close()
