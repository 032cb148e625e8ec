"""Observation rendering: Gaussian background + MuJoCo objects, composited per pixel by depth.

Wrist view (YUBI): the fisheye camera rides on the gripper. MuJoCo renders only
pinhole views, so the robot and task objects are drawn into cube faces at the
camera centre and remapped to the fisheye with :func:`bench.render.fisheye.render_cubemap`
- the same remap the Gaussian renderer uses, fed a MuJoCo "backend" - which
also turns face z-depth into distance along the ray (the fisheye depth
convention). The background Gaussians are drawn by :func:`bench.render.render`
(``fisheye_mode`` "cubemap" or "direct") and the two are merged by
:func:`bench.render.composite`. The MuJoCo table (geom group 3) is hidden in
these passes: the reconstructed table is part of the background.

A cube-map face that no drawn geom reaches (bounding boxes against its view frustum,
:meth:`MujocoPinhole._sees_nothing`) is not drawn: its empty output is what the draw would
give (``MujocoPinhole.cull = False`` draws every face, the reference).

MuJoCo runs headless through EGL (``MUJOCO_GL=egl``; software GL works without
a GPU). Shadows and reflections are off (shadows cost ~20x in software GL).

Several cameras (a :mod:`bench.sim.camera_rig` rig: dual wrist fisheyes,
exterior views) are drawn per query by :meth:`ObservationRenderer.render_cameras`:
one MuJoCo pass per camera, then every camera's background in one
:func:`bench.render.render_batch` call (the splats are uploaded once), then the
per-pixel depth composite per camera. The default single ``wrist`` camera keeps
the original path (:meth:`ObservationRenderer.render_wrist`).

Every ``render_*`` call adds its wall time to :attr:`ObservationRenderer.timings`
(keys ``mujoco``, ``gaussians``, ``composite``) for the benchmark breakdown.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import time
from collections import defaultdict
from typing import Any

import mujoco
import numpy as np

from bench.errors import BenchError
from bench.render.output import RenderOutput
from bench.scene.cameras import Camera, look_at
from bench.sim.camera_rig import make_rig, wrist_camera_model
from bench.sim.config import EnvConfig
from bench.sim.objects import TABLE_GROUP
from bench.sim.world import World

RENDER_CAMERA = "render_cam"
_CV_TO_MJ = np.diag([1.0, -1.0, -1.0])  # OpenCV camera axes -> MuJoCo camera axes
# enum values read once: an enum lookup per draw costs more than the test it feeds
_CAT_ALL = int(mujoco.mjtCatBit.mjCAT_ALL)
_OBJ_GEOM = int(mujoco.mjtObj.mjOBJ_GEOM)
_CULL_INFLATE = 1.01  # bounding boxes grown by 1 % + 1 mm: a cull never drops a pixel
_CULL_MARGIN_M = 1e-3
_BOX_SIGNS = np.array([[sx, sy, sz] for sx in (-1.0, 1.0) for sy in (-1.0, 1.0)
                       for sz in (-1.0, 1.0)])  # [8, 3] corners of a unit box


def _empty_output(h: int, w: int) -> RenderOutput:
    """A draw without a single fragment, as :meth:`MujocoPinhole.render` returns it."""
    return RenderOutput(np.zeros((h, w, 3), np.float32), np.full((h, w), np.inf, np.float32),
                        np.zeros((h, w), np.float32), np.ones((h, w), bool),
                        background=(0.0, 0.0, 0.0))


@functools.cache
def _load_triton_first() -> None:
    """Import triton, when installed, before the process's first software GL context.

    Mesa's llvmpipe (MuJoCo's offscreen GL without a GPU) and triton each load their own
    LLVM; triton loaded after an llvmpipe context exists segfaults the process, and torch
    loads it lazily (``torchvision.models``, ``torch.optim``, deterministic mode), e.g. a
    visual policy built after the first render. Loaded first, both work (0.1-0.3 s, once).
    """
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: F401


def _gl_context(width: int, height: int):
    """An offscreen GL context, or a BenchError that says how to get one."""
    _load_triton_first()
    try:
        context = mujoco.GLContext(width, height)
        context.make_current()
    except Exception as exc:  # GLFW without a display, missing EGL/OSMesa libraries, ...
        raise BenchError(
            f"cannot create an offscreen OpenGL context for MuJoCo ({type(exc).__name__}: {exc}); "
            "set MUJOCO_GL=egl (or osmesa) before Python starts, or use obs_mode='state'"
        ) from None
    return context


class MujocoPinhole:
    """Offscreen MuJoCo renderer for pinhole views at arbitrary OpenCV poses.

    Uses one model camera (``render_cam``) whose world pose and vertical field of
    view are overwritten before each draw, and reads colour and depth from the
    same draw.

    Args:
        model: The compiled model (must contain the ``render_cam`` camera).
        max_size: Largest (height, width) that will be rendered.
        multisample: Draw with the model's MSAA (``vis.quality.offsamples``). False for a
            mesh layer composited over Gaussians: with MSAA the GL resolves a silhouette
            pixel to a mix of the mesh and the empty (black) clear colour while the depth
            test marks it covered, so every edge carried a dark fringe at full alpha. Without
            it each pixel is covered or not, exactly, and the fisheye remap's bilinear taps
            make the partial coverage that :func:`mesh_layers` reads.
    """

    def __init__(self, model: mujoco.MjModel, max_size: tuple[int, int], *,
                 multisample: bool = True) -> None:
        self.model = model
        h, w = max_size
        if h > model.vis.global_.offheight or w > model.vis.global_.offwidth:
            raise ValueError(
                f"render size {w}x{h} exceeds the model's offscreen buffer "
                f"{model.vis.global_.offwidth}x{model.vis.global_.offheight}"
            )
        self._gl = _gl_context(w, h)
        samples = model.vis.quality.offsamples  # read by MjrContext at creation only
        if not multisample:
            model.vis.quality.offsamples = 0
        try:
            self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        finally:
            model.vis.quality.offsamples = samples
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        self._scene = mujoco.MjvScene(model, maxgeom=2000)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = 0
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._camera.fixedcamid = mujoco.mj_name2id(
            model, mujoco.mjtObj.mjOBJ_CAMERA, RENDER_CAMERA
        )
        if self._camera.fixedcamid < 0:
            raise ValueError(f"model has no '{RENDER_CAMERA}' camera")
        self.options = mujoco.MjvOption()
        for group in range(len(self.options.geomgroup)):
            self.options.geomgroup[group] = 1 if group < 3 else 0
        self.options.sitegroup[:] = 0
        #: Skip the draw of a view no drawn geom reaches (:meth:`_sees_nothing`); False =
        #: draw every view (the reference the tests compare against, bit for bit).
        self.cull = True
        self.culled = 0  # views not drawn so far (count)

    def show_table(self, visible: bool) -> None:
        """Show or hide the MuJoCo table geoms (hidden when the Gaussian table is drawn)."""
        self.options.geomgroup[TABLE_GROUP] = 1 if visible else 0

    def render(self, data: mujoco.MjData, camera: Camera) -> RenderOutput:
        """Colour, camera-z depth (inf where empty) and coverage of a centred pinhole ``camera``."""
        if camera.model != "pinhole":
            raise ValueError("MujocoPinhole renders pinhole cameras only; remap for fisheye")
        h, w = camera.height, camera.width
        if not (
            math.isclose(camera.cx, w / 2)
            and math.isclose(camera.cy, h / 2)
            and math.isclose(camera.fx, camera.fy)
        ):
            raise ValueError("MuJoCo cameras need a centred principal point and square pixels")
        self._gl.make_current()  # several environments may render in one thread
        cam_id = self._camera.fixedcamid
        pose = camera.world_from_camera
        data.cam_xpos[cam_id] = pose[:3, 3]
        data.cam_xmat[cam_id] = (pose[:3, :3] @ _CV_TO_MJ).reshape(9)
        self.model.cam_fovy[cam_id] = math.degrees(2.0 * math.atan(0.5 * h / camera.fy))
        mujoco.mjv_updateScene(
            self.model,
            data,
            self.options,
            None,
            self._camera,
            _CAT_ALL,
            self._scene,
        )
        if self.cull and self._sees_nothing(data, camera):
            self.culled += 1
            return _empty_output(h, w)  # what the draw gives: no fragment anywhere
        viewport = mujoco.MjrRect(0, 0, w, h)
        mujoco.mjr_render(viewport, self._scene, self._context)
        rgb = np.empty((h, w, 3), dtype=np.uint8)
        zbuf = np.empty((h, w), dtype=np.float32)
        mujoco.mjr_readPixels(rgb, zbuf, viewport, self._context)
        rgb, zbuf = rgb[::-1], zbuf[::-1]  # OpenGL rows start at the bottom
        extent = self.model.stat.extent
        near, far = self.model.vis.map.znear * extent, self.model.vis.map.zfar * extent
        hit = zbuf < 1.0
        with np.errstate(divide="ignore"):
            depth = np.where(hit, near / (1.0 - zbuf * (1.0 - near / far)), np.inf)
        alpha = hit.astype(np.float32)
        colour = rgb.astype(np.float32) / 255.0 * alpha[..., None]
        return RenderOutput(
            colour,
            depth.astype(np.float32),
            alpha,
            np.ones((h, w), bool),
            background=(0.0, 0.0, 0.0),
        )

    def _sees_nothing(self, data: mujoco.MjData, camera: Camera) -> bool:
        """True when every drawn geom lies outside ``camera``'s view frustum.

        Conservative: any scene item that is not a model geom (decoration, tendon, flex,
        skin) or an unbounded geom (a plane) counts as seen; a geom is outside when the 8
        corners of its bounding box (MuJoCo's ``geom_aabb`` at ``geom_xpos`` /
        ``geom_xmat``, the poses the draw uses, grown by 1 % + 1 mm) all lie beyond one
        frustum plane. A fisheye cube-map face that sees none of the robot and objects
        (a quarter of them over the table in the simulated domain) is then not drawn.
        """
        scene = self._scene
        count = scene.ngeom
        if count == 0:
            return True
        ids = np.empty(count, dtype=np.int64)
        for index, geom in enumerate(scene.geoms[:count]):
            if geom.objtype != _OBJ_GEOM:
                return False
            ids[index] = geom.objid
        if not np.all(self.model.geom_rbound[ids] > 0):  # a plane or an unbounded geom
            return False
        box = self.model.geom_aabb[ids]  # [K, 6]: centre, half sizes (geom frame)
        half = box[:, None, 3:] * _CULL_INFLATE + _CULL_MARGIN_M
        corners = box[:, None, :3] + _BOX_SIGNS * half  # [K, 8, 3] geom frame
        rot = data.geom_xmat[ids].reshape(-1, 3, 3)
        world = np.einsum("kij,kcj->kci", rot, corners) + data.geom_xpos[ids][:, None, :]
        pose = camera.world_from_camera
        local = (world - pose[:3, 3]) @ pose[:3, :3]  # [K, 8, 3] OpenCV camera frame
        x, y, z = local[..., 0], local[..., 1], local[..., 2]
        tan_x = 0.5 * camera.width / camera.fx  # half extents at unit depth (centred pinhole)
        tan_y = 0.5 * camera.height / camera.fy
        outside = np.zeros(count, dtype=bool)
        for beyond in (x > tan_x * z, -x > tan_x * z, y > tan_y * z, -y > tan_y * z):
            outside |= beyond.all(axis=1)  # the whole box beyond one plane
        return bool(outside.all())

    def render_calibrated(self, data: mujoco.MjData, camera: Camera) -> RenderOutput:
        """Any pinhole ``camera`` (off-centre principal point, fx != fy).

        MuJoCo draws a centred square-pixel pinhole on the same axis that covers the
        calibrated view (focal length max(fx, fy), 2 px margin), resampled bilinearly on
        premultiplied colour, alpha and alpha x depth (z-depth: same optical axis).
        """
        if camera.model != "pinhole":
            raise ValueError("render_calibrated takes pinhole cameras; remap fisheyes")
        if (math.isclose(camera.cx, camera.width / 2) and math.isclose(camera.cy, camera.height / 2)
                and math.isclose(camera.fx, camera.fy)):
            return self.render(data, camera)
        from bench.render.fisheye import _bilinear

        f = max(camera.fx, camera.fy)
        half_w = f * max(camera.cx, camera.width - camera.cx) / camera.fx + 2
        half_h = f * max(camera.cy, camera.height - camera.cy) / camera.fy + 2
        cover_w, cover_h = 2 * math.ceil(half_w), 2 * math.ceil(half_h)
        cover = Camera("pinhole", cover_w, cover_h, f, f, cover_w / 2, cover_h / 2,
                       camera.world_from_camera, name=f"{camera.name}:cover")
        out = self.render(data, cover)
        cols, rows = np.meshgrid(np.arange(camera.width) + 0.5, np.arange(camera.height) + 0.5)
        u = (cols.ravel() - camera.cx) * f / camera.fx + cover.cx
        v = (rows.ravel() - camera.cy) * f / camera.fy + cover.cy
        a = out.alpha.astype(np.float64)
        premult_depth = np.where(a > 0, np.where(np.isfinite(out.depth), out.depth, 0.0) * a, 0.0)
        stacked = np.concatenate([out.rgb, a[..., None], premult_depth[..., None]], axis=-1)
        sampled = _bilinear(stacked, u, v).reshape(camera.height, camera.width, 5)
        alpha = sampled[..., 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            depth = np.where(alpha > 0, sampled[..., 4] / alpha, np.inf)
        shape = (camera.height, camera.width)
        return RenderOutput(sampled[..., :3].astype(np.float32), depth.astype(np.float32),
                            alpha.astype(np.float32), np.ones(shape, bool),
                            background=(0.0, 0.0, 0.0))

    def render_backend(self, data: mujoco.MjData):
        """This renderer as a ``bench.render`` pinhole backend for ``render_cubemap``.

        Signature ``f(splats, camera, *, background, sh_degree)``; the splats argument is
        ignored (MuJoCo draws the model in ``data``).
        """

        def backend(
            _splats: Any, camera: Camera, *, background=(0.0, 0.0, 0.0), sh_degree=None
        ) -> RenderOutput:
            return self.render(data, camera)

        return backend

    def close(self) -> None:
        """Free the MuJoCo render buffers and the OpenGL context.

        The buffers are freed in this renderer's own context: ``MjrContext.free`` deletes GL
        objects by id in whichever context is current, so freeing them while another
        renderer's context is current deleted that renderer's buffers and silently corrupted
        its later draws (several envs live in one process: paired screens, vector envs).
        """
        if getattr(self, "_gl", None) is not None:
            self._gl.make_current()
            self._context.free()
            self._gl.free()
            self._gl = None

    def __del__(self) -> None:  # an env dropped without close(): the same, never the GC's order
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn down GL already
            pass


def mesh_layers(mesh: RenderOutput) -> tuple[np.ndarray, np.ndarray]:
    """Unpremultiplied mesh colour [H, W, 3] and depth [H, W] (inf where coverage < 1/2)."""
    covered = mesh.alpha >= 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        rgb = np.where(covered[..., None], mesh.rgb / np.maximum(mesh.alpha, 1e-6)[..., None], 0.0)
    depth = np.where(covered, mesh.depth, np.inf)
    return np.clip(rgb, 0.0, 1.0).astype(np.float32), depth.astype(np.float32)


def to_uint8(rgb: np.ndarray) -> np.ndarray:  # [H, W, 3] float -> uint8
    """Float RGB in [0, 1] to uint8 (rounded, clipped)."""
    return (np.clip(rgb, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


class ObservationRenderer:
    """Wrist fisheye and exterior views of a :class:`World` over a scene's background.

    Args:
        world: The simulated world.
        scene: The scene bundle (its ``background`` Gaussians are in the world frame).
        config: Environment config (image sizes, fisheye field of view and mode, backend).
    """

    def __init__(self, world: World, scene: Any, config: EnvConfig, *, rig=None) -> None:
        self.world, self.scene, self.config = world, scene, config
        self.wrist = wrist_camera_model(config)
        from bench.render.fisheye import CUBE_MARGIN_PX, default_face_px

        if rig is None:
            rig = make_rig(config, world.robot)
        self.rig = list(rig)
        self.face_px = int(config.cube_face_px or default_face_px(self.wrist))
        self._face_px = {
            c.name: int(config.cube_face_px or default_face_px(c.intrinsics))
            for c in self.rig
            if c.intrinsics.model == "fisheye"
        }
        eh, ew = config.exterior_size
        table = world.table
        centre = np.array([*table.center, table.height])
        front = world.world_from_table[:3, :3] @ np.array([0.0, -0.9, 0.55])
        base = getattr(world.robot, "world_from_base", None)
        if base is not None:  # an arm: look from the side of the table away from its base
            away = centre[:2] - base[:2, 3]
            away = away / max(float(np.linalg.norm(away)), 1e-9)
            front = np.array([0.9 * away[0], 0.9 * away[1], 0.55])
        self.exterior = Camera.pinhole_from_fov(
            ew,
            eh,
            fov_x_deg=60.0,
            world_from_camera=look_at(centre + front, centre + [0, 0, 0.05]),
            name="exterior",
        )
        side = max([self.face_px, *self._face_px.values()]) + 2 * CUBE_MARGIN_PX
        pinholes = [c.intrinsics for c in self.rig if c.intrinsics.model == "pinhole"]
        # a calibrated pinhole is drawn through a centred cover view up to ~2x its size
        pin_h = max([2 * c.height + 8 for c in pinholes], default=0)
        pin_w = max([2 * c.width + 8 for c in pinholes], default=0)
        if config.shadows:  # deployment fidelity (issue 13): shadow map before the GL context
            # a model that already sets a shadow map / shadow casters keeps them (the demo's
            # ground-truth rooms, bench.worlds.rooms); otherwise 2048 px and every light casts
            if world.model.vis.quality.shadowsize == 0:
                world.model.vis.quality.shadowsize = 2048
            if not world.model.light_castshadow.any():
                world.model.light_castshadow[:] = 1
        self.use_gaussians = config.background == "gaussian"
        # a layer under Gaussians must hold its coverage in alpha, not in a black-mixed colour
        self.mujoco = MujocoPinhole(world.model, (max(side, eh, pin_h), max(side, ew, pin_w)),
                                    multisample=config.mesh_msaa or not self.use_gaussians)
        self.mujoco._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(config.shadows)
        self.timings: dict[str, float] = defaultdict(float)

    def wrist_camera(self) -> Camera:
        """The wrist fisheye at its current pose."""
        return self.wrist.with_pose(self.world.robot.camera_pose(self.world.data))

    def _gaussians(self, camera: Camera) -> RenderOutput:
        from bench.render import render

        start = time.perf_counter()
        out = render(
            self.scene.background,
            camera,
            backend=self.config.render_backend,
            fisheye_mode=self.config.fisheye_mode,
            cubemap_face_px=self.face_px if camera.model == "fisheye" else None,
        )
        self.timings["gaussians"] += time.perf_counter() - start
        return out

    def _compose(self, camera: Camera, mesh: RenderOutput) -> np.ndarray:
        mesh_rgb, mesh_depth = mesh_layers(mesh)
        if not self.use_gaussians:
            return to_uint8(np.where(np.isfinite(mesh_depth)[..., None], mesh_rgb, 0.0))
        gs = self._gaussians(camera)
        from bench.render import composite

        start = time.perf_counter()
        rgb = to_uint8(composite(gs, mesh_rgb, mesh_depth))
        self.timings["composite"] += time.perf_counter() - start
        return rgb

    def render_wrist(self) -> np.ndarray:  # -> [H, W, 3] uint8
        """The wrist fisheye observation."""
        from bench.render.fisheye import render_cubemap

        camera = self.wrist_camera()
        start = time.perf_counter()
        self.mujoco.show_table(False)
        mesh = render_cubemap(
            self.mujoco.render_backend(self.world.data), None, camera, face_px=self.face_px
        )
        self.timings["mujoco"] += time.perf_counter() - start
        return self._compose(camera, mesh)

    def rig_cameras(self) -> list[Camera]:
        """Every rig camera at its current pose."""
        robot, data = self.world.robot, self.world.data
        tcp, body = robot.tcp_pose(data), robot.camera_pose(data)
        return [c.intrinsics.with_pose(c.world_pose(tcp, body)) for c in self.rig]

    def _mesh_pass(self, camera: Camera, *, wrist: bool) -> RenderOutput:
        from bench.render.fisheye import render_cubemap

        start = time.perf_counter()
        # the reconstruction shows the real table; without a background the exterior shows it
        self.mujoco.show_table(not self.use_gaussians and not wrist)
        if camera.model == "fisheye":
            mesh = render_cubemap(self.mujoco.render_backend(self.world.data), None, camera,
                                  face_px=self._face_px[camera.name])
        else:
            mesh = self.mujoco.render_calibrated(self.world.data, camera)
        self.timings["mujoco"] += time.perf_counter() - start
        return mesh

    def render_cameras(self) -> dict[str, np.ndarray]:  # -> {"<name>_rgb": [H, W, 3] uint8}
        """Every rig camera's observation; the backgrounds of all cameras in one batch."""
        if len(self.rig) == 1 and self.rig[0].pose is None:  # the default wrist camera
            return {self.rig[0].key: self.render_wrist()}
        cameras = self.rig_cameras()
        meshes = [self._mesh_pass(cam, wrist=rc.mount == "wrist")
                  for cam, rc in zip(cameras, self.rig, strict=True)]
        layers = [mesh_layers(mesh) for mesh in meshes]
        if not self.use_gaussians:
            return {rc.key: to_uint8(np.where(np.isfinite(depth)[..., None], rgb, 0.0))
                    for rc, (rgb, depth) in zip(self.rig, layers, strict=True)}
        backgrounds = self._gaussians_batch(cameras)
        from bench.render import composite

        start = time.perf_counter()
        out = {rc.key: to_uint8(composite(gs, rgb, depth))
               for rc, gs, (rgb, depth) in zip(self.rig, backgrounds, layers, strict=True)}
        self.timings["composite"] += time.perf_counter() - start
        return out

    def _gaussians_batch(self, cameras: list[Camera]) -> list[RenderOutput]:
        """Backgrounds of several cameras: one ``render_batch`` per cube-face size."""
        from bench.render import render_batch

        start = time.perf_counter()
        groups: dict[int | None, list[int]] = {}
        for index, cam in enumerate(cameras):
            groups.setdefault(self._face_px.get(cam.name), []).append(index)
        outputs: list[RenderOutput | None] = [None] * len(cameras)
        for face_px, indices in groups.items():
            rendered = render_batch(
                self.scene.background,
                [cameras[i] for i in indices],
                backend=self.config.render_backend,
                fisheye_mode=self.config.fisheye_mode,
                cubemap_face_px=face_px,
            )
            for i, out in zip(indices, rendered, strict=True):
                outputs[i] = out
        self.timings["gaussians"] += time.perf_counter() - start
        return outputs

    def render_exterior(self) -> np.ndarray:  # -> [H, W, 3] uint8
        """A fixed pinhole view of the table from the front (debugging, videos)."""
        start = time.perf_counter()
        self.mujoco.show_table(not self.use_gaussians)
        mesh = self.mujoco.render(self.world.data, self.exterior)
        self.timings["mujoco"] += time.perf_counter() - start
        return self._compose(self.exterior, mesh)

    def close(self) -> None:
        """Free the MuJoCo renderer."""
        self.mujoco.close()
