"""Mesh lights fitted to real wrist images of training states (issue 33 item 5).

A task world draws the robot and the task objects under its own
white headlight and sun (:func:`bench.sim.world.add_scene_lights`) whatever the room, while
the Gaussians behind them carry the room's light and the camera's exposure and white
balance. This module estimates, per room, the lights under which the simulator's meshes
look as they do in real images, in MuJoCo's own lighting model
(:class:`bench.sim.lighting.MeshLights`).

Data (training data only): per room and task, ``episodes`` scripted-expert episodes from
the demonstrations' starts (:data:`LIGHTS_CONDITION_OFFSET` + i, the block the policies are
trained on, :mod:`bench.demo.demos`), every ``every``-th policy query. At each such state
the real domain's wrist images (ground-truth world, sensor model) are paired with renders of
the simulator's meshes alone at the same state (``background="none"``): one render per
light term at unit intensity, and one with only the study's specular terms (the offset).
MuJoCo sums the terms of its lights, so per colour channel the real pixels are a
non-negative combination of the term renders plus the offset; the weights are found by
non-negative least squares (``scipy.optimize.nnls``) over the pixels the meshes cover
(eroded by one pixel, so that no silhouette pixel mixes in what lies behind).

``bench demo lights --out DIR`` (:func:`bench.demo.cli.run_lights`, the reference
numerics) writes ``DIR/mesh_lights.json`` (the fitted lights per room, and the manifest),
``DIR/lights.{csv,md}`` (per room: mesh-pixel PSNR against the real images under the
task world's default lights, the fitted ones and the room's true ones) and
``DIR/wrist.{csv,md}`` (the wrist-view PSNR of
:func:`bench.demo.build_report.wrist_view_psnr`, default lights against fitted ones, on its
held-out starts). The committed fit is shipped as :data:`bench.demo.appearance_assets.LIGHTS_ASSET`
(read by :func:`bench.demo.appearance_assets.load_mesh_lights`); the demo's study lights its
simulated meshes with it (:func:`bench.demo.run.profile_spec`, ``real_world.mesh_lights``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.demo.reaction import SCENES, SCREEN_PROFILE

#: First start of the fit's episodes: the demonstrations' block (bench.demo.demos).
LIGHTS_CONDITION_OFFSET = 5000
TOOL = "bench.demo.mesh_lights"
VERSION = 1


@dataclass(frozen=True)
class LightsConfig:
    """One fit of every room's mesh lights.

    Attributes:
        episodes: Expert episodes per room and task.
        every: Every ``every``-th policy query of an episode is a sample.
        tasks: Tasks whose objects and episodes are sampled.
        condition_offset: Start of episode 0 (the demonstrations' block).
        profile: Demo profile whose study settings the envs use (image size, rig).
        seed: The demo's seed (the profile's spec).
    """

    episodes: int = 4
    every: int = 3
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    condition_offset: int = LIGHTS_CONDITION_OFFSET
    profile: str = SCREEN_PROFILE
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        if self.episodes < 1 or self.every < 1 or self.condition_offset < 0 or not self.tasks:
            raise ValueError("episodes and every must be >= 1, condition_offset >= 0, and "
                             "tasks must name at least one task")


def mirror_state(dst: Any, src: Any) -> None:
    """Put ``dst``'s MuJoCo state where ``src``'s is (the same task world, other visuals)."""
    import mujoco

    d, s = dst.unwrapped.world.data, src.unwrapped.world.data
    d.qpos[:] = s.qpos
    d.qvel[:] = s.qvel
    d.mocap_pos[:] = s.mocap_pos
    d.mocap_quat[:] = s.mocap_quat
    mujoco.mj_forward(dst.unwrapped.world.model, d)


def _images(env: Any) -> list[Any]:  # -> per camera float64 [H, W, 3] in [0, 1]
    import numpy as np

    rendered = env.unwrapped._get_renderer().render_cameras()
    return [np.asarray(rendered[cam.key], dtype=np.float64) / 255.0
            for cam in env.unwrapped.rig]


class _TermRenderer:
    """The meshes alone (no Gaussians) under one light term at a time, at a mirrored state."""

    def __init__(self, env: Any) -> None:
        import mujoco

        from bench.sim.lighting import FIT_DIRECTIONS, LIGHT_PREFIX

        self.env = env
        m = self.model = env.unwrapped.world.model
        self.sun = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_LIGHT, "sun")
        self.slots = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_LIGHT, f"{LIGHT_PREFIX}{i}")
                      for i in range(len(FIT_DIRECTIONS))]
        self.default = {"ambient": m.vis.headlight.ambient.copy(),
                      "diffuse": m.vis.headlight.diffuse.copy(),
                      "specular": m.vis.headlight.specular.copy(),
                      "sun_diffuse": m.light_diffuse[self.sun].copy(),
                      "sun_specular": m.light_specular[self.sun].copy()}

    def _set(self, *, ambient: float = 0.0, diffuse: float = 0.0, slot: int | None = None,
             default: bool = False) -> None:
        m, s = self.model, self.default
        m.vis.headlight.ambient[:] = s["ambient"] if default else ambient
        m.vis.headlight.diffuse[:] = s["diffuse"] if default else diffuse
        m.vis.headlight.specular[:] = s["specular"]
        m.light_diffuse[self.sun] = s["sun_diffuse"] if default else 0.0
        m.light_specular[self.sun] = s["sun_specular"]
        for i, light in enumerate(self.slots):
            m.light_diffuse[light] = 1.0 if i == slot else 0.0

    def render(self, source: Any) -> dict[str, list[Any]]:
        """Per term (``ambient``, ``headlight``, ``dir{i}``), ``offset`` and ``default``."""
        mirror_state(self.env, source)
        terms = term_names()  # ambient, headlight, then one per directional slot
        settings = ({"ambient": 1.0}, {"diffuse": 1.0}, *({"slot": i} for i in
                                                          range(len(self.slots))))
        out = {}
        for name, setting in (*zip(terms, settings, strict=True), ("offset", {}),
                              ("default", {"default": True})):
            self._set(**setting)
            out[name] = _images(self.env)
        # the offset (specular only) is in every term render too: keep each term's own part
        for name in terms:
            out[name] = [a - b for a, b in zip(out[name], out["offset"], strict=True)]
        self._set(default=True)
        return out


def term_names() -> tuple[str, ...]:
    """The fitted terms, in :class:`MeshLights` order: ambient, headlight, one per direction."""
    from bench.sim.lighting import FIT_DIRECTIONS

    return ("ambient", "headlight", *(f"dir{i}" for i in range(len(FIT_DIRECTIONS))))


def collect_room(scene: str, config: LightsConfig) -> dict[str, Any]:
    """Paired samples of one room: real images, term renders, offset, default and true lights.

    Returns arrays ``[n, H, W, 3]`` (n = samples x cameras) under ``real``, each term name,
    ``offset``, ``default`` (the task world's own headlight and sun) and ``true`` (the room's
    own lights on the meshes, its geoms hidden: the swap screen's control,
    :func:`bench.demo.background_swap.swap_decorator`).
    """
    import numpy as np

    from bench.demo.background_swap import swap_decorator
    from bench.demo.reaction import screen_spec
    from bench.policies import make_policy
    from bench.policies.base import policy_observation, to_env_chunk
    from bench.scene.bundle import load_scene
    from bench.sim.lighting import add_light_slots
    from bench.study.work_unit import make_study_env
    from bench.study.world_domain import world_domain
    from bench.worlds.rooms import get_world

    parts: dict[str, list[Any]] = {}
    for task in config.tasks:
        spec = screen_spec(task, profile=config.profile, seed=config.seed)
        world = get_world(world_domain(spec).worlds[scene])
        bundle = load_scene(spec.scenes[scene])
        real = make_study_env(spec, scene=scene, task=task, domain="real", bundle=None)
        terms = make_study_env(spec, scene=scene, task=task, domain="sim", bundle=bundle,
                               background="none", world_decorator=add_light_slots)
        true = make_study_env(spec, scene=scene, task=task, domain="sim", bundle=bundle,
                              background="none",
                              world_decorator=swap_decorator(world, "reconstruction"))
        renderer = _TermRenderer(terms)
        try:
            for episode in range(config.episodes):
                start = config.condition_offset + episode
                obs, info = real.reset(seed=start)
                terms.reset(seed=start)
                true.reset(seed=start)
                expert = make_policy("expert", real, seed=0)
                expert.reset(seed=start)
                query = 0
                while True:
                    if query % config.every == 0:
                        keys = [cam.key for cam in real.unwrapped.rig]
                        parts.setdefault("real", []).extend(
                            np.asarray(obs[k], dtype=np.float64) / 255.0 for k in keys)
                        for name, images in renderer.render(real).items():
                            parts.setdefault(name, []).extend(images)
                        mirror_state(true, real)
                        parts.setdefault("true", []).extend(_images(true))
                    chunk = to_env_chunk(expert.act(policy_observation(obs, real), info),
                                         real, info)
                    obs, _, terminated, truncated, info = real.step(chunk)
                    query += 1
                    if terminated or truncated:
                        break
        finally:
            for env in (real, terms, true):
                env.close()
    return {name: np.stack(images) for name, images in parts.items()}


def mesh_mask(ambient: Any) -> Any:  # [n, H, W, 3] -> bool [n, H, W]
    """Pixels the meshes cover (their ambient term is lit), eroded by one pixel."""
    import numpy as np
    from scipy.ndimage import binary_erosion

    covered = ambient.max(axis=-1) > 0.5 / 255.0
    return np.stack([binary_erosion(m, iterations=1) for m in covered])


def fit_lights(samples: dict[str, Any], mask: Any) -> Any:
    """Per channel, the non-negative term weights that best give the real pixels.

    Returns:
        :class:`~bench.sim.lighting.MeshLights` (weights rounded to 1e-4).
    """
    import numpy as np
    from scipy.optimize import nnls

    from bench.sim.lighting import MeshLights

    names = term_names()
    weights = np.zeros((3, len(names)))
    for c in range(3):
        design = np.stack([samples[name][..., c][mask] for name in names], axis=1)
        target = samples["real"][..., c][mask] - samples["offset"][..., c][mask]
        weights[c], _ = nnls(design, target)
    w = np.round(weights, 4)
    return MeshLights(ambient=tuple(w[:, 0]), headlight=tuple(w[:, 1]),
                      directional=tuple(tuple(w[:, 2 + i]) for i in range(len(names) - 2)))


def predict(samples: dict[str, Any], lights: Any) -> Any:  # -> [n, H, W, 3]
    """The meshes' pixels under ``lights`` (offset plus weighted terms, clipped to [0, 1])."""
    import numpy as np

    out = samples["offset"].copy()
    weights = [lights.ambient, lights.headlight, *lights.directional]
    for name, rgb in zip(term_names(), weights, strict=True):
        out += samples[name] * np.asarray(rgb)
    return np.clip(out, 0.0, 1.0)


def masked_psnr(a: Any, b: Any, mask: Any) -> float:
    """PSNR (dB, peak 1) of ``a`` against ``b`` over the ``mask`` pixels (metrics.psnr)."""
    from metrics.psnr import psnr

    return float(psnr(a[mask][None, :, None], b[mask][None, :, None])[0])


def fit_rooms(config: LightsConfig = LightsConfig(), *, progress: bool = True
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every room's fitted lights, and per room its fit's row (samples, mesh-pixel PSNRs)."""
    from bench.progress import progress as progress_bar

    fits, rows = {}, []
    for scene in progress_bar(SCENES, desc="mesh lights", unit="room", disable=not progress):
        samples = collect_room(scene, config)
        mask = mesh_mask(samples["ambient"])
        lights = fits[scene] = fit_lights(samples, mask)
        real = samples["real"]
        rows.append({"scene": scene, "images": len(real), "pixels": int(mask.sum()),
                     "psnr_default": round(masked_psnr(samples["default"], real, mask), 2),
                     "psnr_fitted": round(masked_psnr(predict(samples, lights), real, mask), 2),
                     "psnr_true": round(masked_psnr(samples["true"], real, mask), 2)})
    return fits, rows


def wrist_rows(fits: dict[str, Any], config: LightsConfig) -> list[dict[str, Any]]:
    """Per room and task: the wrist-view PSNR (dB) under the default lights and the fitted."""
    from bench.demo.build_report import wrist_view_psnr
    from bench.demo.reaction import screen_spec
    from bench.study.world_domain import world_domain

    rows = []
    for task in config.tasks:
        worlds = world_domain(screen_spec(task, profile=config.profile,
                                          seed=config.seed)).worlds
        for scene in SCENES:
            default = wrist_view_psnr(worlds[scene], task=task, lights="default")
            fitted = wrist_view_psnr(worlds[scene], task=task, lights=fits[scene])
            rows.append({"task": task, "scene": scene, "wrist_psnr_default": round(default, 2),
                         "wrist_psnr_fitted": round(fitted, 2)})
    return rows


def write_lights(out: Path, fits: dict[str, Any], rows: list[dict[str, Any]],
                 wrist: list[dict[str, Any]], config: LightsConfig, *,
                 command: str = "") -> list[dict[str, Any]]:
    """Write ``lights.{csv,md}``, ``wrist.{csv,md}`` and ``mesh_lights.json`` in ``out``.

    ``mesh_lights.json`` is the fit and its manifest: tool, version, parameters, seed,
    counts and the other files' sha256.
    """
    from bench.demo.evaluation import write_table
    from bench.provenance import atomic_write_json, sha256_file

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| room | images | mesh pixels | PSNR, default lights (dB) | PSNR, fitted (dB) | "
             "PSNR, the room's true lights (dB) |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['scene']} | {r['images']} | {r['pixels']} | {r['psnr_default']:.2f} | "
              f"{r['psnr_fitted']:.2f} | {r['psnr_true']:.2f} |" for r in rows]
    write_table(out, "lights", rows, lines)
    written = ["lights.csv", "lights.md"]
    if wrist:
        lines = ["| task | room | wrist PSNR, default lights (dB) | wrist PSNR, fitted (dB) |",
                 "|---|---|---|---|"]
        lines += [f"| {r['task']} | {r['scene']} | {r['wrist_psnr_default']:.2f} | "
                  f"{r['wrist_psnr_fitted']:.2f} |" for r in wrist]
        write_table(out, "wrist", wrist, lines)
        written += ["wrist.csv", "wrist.md"]
    atomic_write_json(out / "mesh_lights.json", {
        "tool": TOOL, "version": VERSION, "params": asdict(config), "seed": config.seed,
        "command": command,
        "counts": {r["scene"]: {"images": r["images"], "pixels": r["pixels"]} for r in rows},
        "outputs_sha256": {name: sha256_file(out / name) for name in written},
        "lights": {scene: lights.to_json() for scene, lights in fits.items()}})
    return rows
