"""Cameras that see the damage: the fraction of wrist pixels each artifact preset changes.

Measured on the demo's own simulated domain. The settings come from a demo profile
(:data:`bench.demo.run.PROFILES`, ``cup`` unless told: the settings the policy screens ran at):
its :class:`~bench.study.spec.StudySpec` (:func:`bench.demo.run.profile_spec`) gives the
scenes (the shipped reconstructions of the ground-truth worlds ``gt-duo``,
``gt-flat``, ``gt-g2``), the artifact presets, the editors' seed, image size, time
limit, render backend, fisheye mode and the tilted ``yubi-dual`` rig, and the env is
the one the study's workers build (:func:`bench.study.work_unit.make_study_env`,
simulated domain). Each preset's background is made as the study makes it
(``apply_perturbation(clean, preset, seed=spec.seed)``, written with
``save_perturbed`` and loaded back, as the workers load it).

Per (scene, task) the privileged scripted expert runs clean rollouts from the
simulated trials' initial conditions (``init_index(spec, "sim", t)``, t < ``conditions``).
At every observation the policy would be given (reset, then after every executed
chunk until the episode ends) both wrist fisheyes are rendered at the same MuJoCo
state with the env's own renderer settings: over the clean reconstruction and over
each perturbed one. A pixel counts as changed when some channel of the uint8 image
differs by more than ``threshold`` levels; fractions are over the pixels inside the
fisheye image circle, pooled over frames, cameras, rollouts (and tasks, scenes).

``ceiling_fraction`` records, per camera pose, the share of image-circle pixels whose
ray points more than 15 degrees above the horizon, for the measured rig and for the
same rig untilted, at the same states.

The scene ``sample`` is the procedural sample room (``bench.scene.sample``; seed
``sample_seed``) instead of a reconstruction, for contrast with earlier numbers.

Run::

    python -m bench.demo.visibility --out results/demo-visibility [--tilt 0] [--conditions 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.demo.reaction import SCREEN_PROFILE

CEILING_ELEVATION_DEG = 15.0
TOOL = "demo-visibility/2"
SAMPLE = "sample"  # scene name of the procedural sample room
CLEAN = "clean"  # the clean background against itself, loaded again


@dataclass(frozen=True)
class VisibilityConfig:
    """Settings of one visibility measurement (None: the demo profile's value).

    Attributes:
        profile: Demo profile whose simulated domain is measured (``bench.demo.run.PROFILES``).
        scenes: Demo scene names (``duo``, ``flat``, ``g2``: the reconstructions of
            ``gt-duo``, ``gt-flat``, ``gt-g2``) or ``sample`` (the procedural sample room).
        tasks: Tasks whose expert rollouts are measured.
        presets: Artifact presets (None: the profile's); ``clean`` compares the clean
            background with a second load of itself (the measurement's floor: exactly 0).
        conditions: Initial conditions per (scene, task): the first ones of the simulated
            trials (None: the profile's simulated trials, i.e. every start the demo uses).
        tilt_deg: Forward tilt of the ``yubi-dual`` rig (None: the profile's, 45).
        image_size: Wrist image (height, width) (None: the profile's).
        max_frames: Rollout time limit in control frames (None: the profile's, which may
            be per scene and task).
        seed: The demo's ``--seed``: seed of every editor.
        thresholds: uint8 levels a channel must differ by to count (one column each).
        sample_seed: Seed of the sample room (scene ``sample`` only).
        sample_gaussians: Gaussians of the sample room (scene ``sample`` only).
    """

    profile: str = SCREEN_PROFILE
    scenes: tuple[str, ...] = ("duo", "flat", "g2")
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    presets: tuple[str, ...] | None = None
    conditions: int | None = None
    tilt_deg: float | None = None
    image_size: tuple[int, int] | None = None
    max_frames: int | dict[str, dict[str, int]] | None = None
    seed: int = 0
    thresholds: tuple[int, ...] = (0, 8)
    sample_seed: int = 0
    sample_gaussians: int = 20000

    def __post_init__(self) -> None:
        from bench.demo.run import TASKS, WORLDS, get_profile
        from bench.errors import BenchError

        get_profile(self.profile)
        for name in ("scenes", "tasks", "thresholds"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            if not getattr(self, name):
                raise BenchError(f"visibility {name} is empty; give at least one")
        unknown = [s for s in self.scenes if s not in (*WORLDS, SAMPLE)]
        if unknown:
            raise BenchError(f"unknown visibility scenes {unknown}; choose from "
                             f"{[*WORLDS, SAMPLE]} (--scenes)")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown:
            raise BenchError(f"unknown visibility tasks {unknown}; choose from {list(TASKS)} "
                             "(--tasks)")
        if self.presets is not None:
            from perturbations.registry import preset_names

            object.__setattr__(self, "presets", tuple(self.presets))
            unknown = [p for p in self.presets if p not in (CLEAN, *preset_names())]
            if unknown or not self.presets:
                raise BenchError(f"unknown artifact presets {unknown or '(none)'}; choose from "
                                 f"{[CLEAN, *preset_names()]} (--presets)")
        if self.image_size is not None:
            object.__setattr__(self, "image_size", tuple(int(v) for v in self.image_size))
            if len(self.image_size) != 2 or min(self.image_size) < 8:
                raise BenchError(f"image_size must be (height, width) >= 8, got "
                                 f"{self.image_size} (--size)")
        if self.conditions is not None and self.conditions < 1:
            raise BenchError(f"conditions must be >= 1, got {self.conditions} (--conditions)")
        if self.tilt_deg is not None and not -90 <= self.tilt_deg <= 90:
            raise BenchError(f"tilt_deg must be in [-90, 90], got {self.tilt_deg} (--tilt)")
        if any(t < 0 for t in self.thresholds) or list(self.thresholds) != sorted(
                set(self.thresholds)):
            raise BenchError(f"thresholds must be increasing levels >= 0, got {self.thresholds}")

    def resolved(self) -> VisibilityConfig:
        """This config with every None filled in from the demo profile (written to config.json)."""
        from bench.demo.run import get_profile, profile_spec

        profile = get_profile(self.profile)
        spec = profile_spec(profile, seed=self.seed)
        return dataclasses.replace(
            self, presets=self.presets or tuple(profile.presets),
            conditions=self.conditions or profile.trials,
            tilt_deg=float(spec.real_world["tilt_deg"] if self.tilt_deg is None
                           else self.tilt_deg),
            image_size=tuple(self.image_size or profile.image_size),
            max_frames=spec.max_frames if self.max_frames is None else self.max_frames)

    def study_spec(self) -> Any:
        """The demo profile's StudySpec with this (resolved) config's rig, image and time limit."""
        from bench.demo.run import get_profile, profile_spec

        config = self.resolved()
        spec = profile_spec(get_profile(config.profile), seed=config.seed)
        return dataclasses.replace(
            spec, image_size=config.image_size, max_frames=config.max_frames,
            real_world={**spec.real_world, "tilt_deg": config.tilt_deg})


@dataclass
class CellCounts:
    """Integer counts of one (scene, task): image-circle pixels and changed pixels."""

    scene: str
    world: str
    task: str
    observations: int = 0
    pixels: int = 0  # image-circle pixels over every observation and camera
    changed: dict[str, dict[int, int]] = field(default_factory=dict)  # preset -> threshold -> n
    ceiling_rig: list[float] = field(default_factory=list)  # per camera pose
    ceiling_untilted: list[float] = field(default_factory=list)


@dataclass
class VisibilityResult:
    """Counts per (scene, task); fractions pooled over any subset of cells."""

    cells: list[CellCounts] = field(default_factory=list)

    def _chosen(self, world: str | None, task: str | None) -> list[CellCounts]:
        return [c for c in self.cells if world in (None, c.world) and task in (None, c.task)]

    def fraction(self, preset: str, threshold: int, *, world: str | None = None,
                 task: str | None = None) -> float:
        """Changed share of the image-circle pixels, pooled over the matching cells."""
        cells = self._chosen(world, task)
        return sum(c.changed[preset][threshold] for c in cells) / sum(c.pixels for c in cells)

    def ceiling(self, *, untilted: bool = False, world: str | None = None,
                task: str | None = None) -> float:
        """Mean ceiling-facing share over the camera poses of the matching cells."""
        poses = [v for c in self._chosen(world, task)
                 for v in (c.ceiling_untilted if untilted else c.ceiling_rig)]
        return float(np.mean(poses))

    @property
    def observations(self) -> int:
        """Observations measured (each: every wrist camera, every preset)."""
        return sum(c.observations for c in self.cells)


def ceiling_fraction(camera: Any, *, elevation_deg: float = CEILING_ELEVATION_DEG) -> float:
    """Share of a fisheye's image-circle pixels whose world ray rises above ``elevation_deg``."""
    rays, valid = camera.pixel_rays()  # [H, W, 3] camera frame, [H, W]
    world = rays[valid] @ camera.world_from_camera[:3, :3].T
    return float(np.mean(world[:, 2] > math.sin(math.radians(elevation_deg))))


def changed_pixels(clean: np.ndarray, damaged: np.ndarray, valid: np.ndarray,  # [H, W, 3] x2,
                   thresholds: tuple[int, ...]) -> dict[int, int]:           # [H, W] bool
    """Pixels inside ``valid`` where some channel differs by more than each threshold."""
    diff = np.abs(clean.astype(np.int16) - damaged.astype(np.int16)).max(axis=-1)[valid]
    return {t: int(np.count_nonzero(diff > t)) for t in thresholds}


def _observations(env: Any, policy: Any, init_index: int) -> Iterator[int]:
    """Run a clean rollout (blocking); pause at every observation the policy is given.

    Yields the env frame; the caller renders the live MuJoCo state, as the env does.
    """
    obs, info = env.reset(seed=init_index)
    policy.reset(seed=init_index)
    while True:
        yield int(info["frame"])
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        if terminated or truncated:
            return


def _scene_bundles(config: VisibilityConfig, spec: Any, scene: str, tmp: Path
                   ) -> tuple[str, Any, dict[str, Any]]:
    """(world label, clean bundle, preset -> perturbed bundle) as the study makes them."""
    from bench.scene.bundle import load_scene
    from perturbations.apply import apply_perturbation, save_perturbed

    def load_clean() -> Any:
        if scene == SAMPLE:
            from bench.scene.sample import make_sample_scene

            return make_sample_scene(seed=config.sample_seed, n_gaussians=config.sample_gaussians)
        return load_scene(spec.scenes[scene])

    world = "sample-room" if scene == SAMPLE else spec.real_world["worlds"][scene]
    clean = load_clean()
    perturbed = {}
    for preset in config.presets:  # written and loaded back, as the study's workers load it
        if preset == CLEAN:
            perturbed[preset] = load_clean()
            continue
        target = tmp / scene / preset
        save_perturbed(apply_perturbation(clean, preset, seed=spec.seed), target)
        perturbed[preset] = load_scene(target)
    return world, clean, perturbed


def _measure_cell(config: VisibilityConfig, spec: Any, cell: CellCounts, clean: Any,
                  perturbed: dict[str, Any], bar: Any) -> None:
    """Fill ``cell`` from ``config.conditions`` expert rollouts of its (scene, task)."""
    from bench.policies.base import make_policy
    from bench.sim.observation import ObservationRenderer
    from bench.study.plan import init_index
    from bench.study.work_unit import make_study_env
    from bench.worlds.real import tilt_rig

    env = make_study_env(spec, scene=cell.scene, task=cell.task, domain="sim", bundle=clean,
                         obs_mode="state")  # the expert needs no images; rendered below
    base = env.unwrapped
    # the renderer the env makes for its own observations (same world, config and rig)
    renderer = ObservationRenderer(base.world, clean, base.config, rig=base.rig)
    untilted = tilt_rig(base.rig, -config.tilt_deg)
    valid = {c.key: c.intrinsics.pixel_rays()[1] for c in base.rig}
    policy = make_policy("expert", env, seed=spec.seed)
    cell.changed = {p: dict.fromkeys(config.thresholds, 0) for p in config.presets}
    try:
        for trial in range(config.conditions):
            for _ in _observations(env, policy, init_index(spec, "sim", trial)):
                tcp = base.world.robot.tcp_pose(base.world.data)
                body = base.world.robot.camera_pose(base.world.data)
                for rig_cam, flat_cam in zip(base.rig, untilted, strict=True):
                    cell.ceiling_rig.append(ceiling_fraction(
                        rig_cam.intrinsics.with_pose(rig_cam.world_pose(tcp, body))))
                    cell.ceiling_untilted.append(ceiling_fraction(
                        flat_cam.intrinsics.with_pose(flat_cam.world_pose(tcp, body))))
                renderer.scene = clean
                reference = renderer.render_cameras()
                for preset, bundle in perturbed.items():
                    renderer.scene = bundle
                    damaged = renderer.render_cameras()
                    for key, image in reference.items():
                        for t, n in changed_pixels(image, damaged[key], valid[key],
                                                   config.thresholds).items():
                            cell.changed[preset][t] += n
                cell.pixels += sum(int(v.sum()) for v in valid.values())
                cell.observations += 1
            if bar is not None:
                bar.update(1)
    finally:
        renderer.close()
        env.close()


def measure_visibility(config: VisibilityConfig, *, progress: bool = False) -> VisibilityResult:
    """Changed wrist-pixel fractions of every preset along clean expert rollouts."""
    config = config.resolved()
    spec = config.study_spec()
    result = VisibilityResult()
    bar = None
    if progress:
        from bench.progress import progress as progress_bar

        bar = progress_bar(total=len(config.scenes) * len(config.tasks) * config.conditions,
                           desc="visibility", unit="rollout", file=sys.stderr)
    try:
        with tempfile.TemporaryDirectory(prefix="splatbench-visibility-") as tmp:
            for scene in config.scenes:
                world, clean, perturbed = _scene_bundles(config, spec, scene, Path(tmp))
                for task in config.tasks:
                    cell = CellCounts(scene=scene, world=world, task=task)
                    _measure_cell(config, spec, cell, clean, perturbed, bar)
                    result.cells.append(cell)
                del clean, perturbed
    finally:
        if bar is not None:
            bar.close()
    return result


def preset_rows(config: VisibilityConfig, result: VisibilityResult) -> list[dict[str, Any]]:
    """One row per preset: pooled fraction per threshold, per world and per task (> top).

    The per-world and per-task columns are at the highest threshold; values rounded to 1e-6.
    """
    config = config.resolved()
    top = config.thresholds[-1]
    worlds = list(dict.fromkeys(c.world for c in result.cells))
    rows = []
    for preset in config.presets:
        row: dict[str, Any] = {"preset": preset}
        for t in config.thresholds:
            row[f"changed_gt{t}"] = round(result.fraction(preset, t), 6)
        for world in worlds:
            row[f"{world}_gt{top}"] = round(result.fraction(preset, top, world=world), 6)
        for task in config.tasks:
            row[f"{task}_gt{top}"] = round(result.fraction(preset, top, task=task), 6)
        rows.append(row)
    return rows


def cell_rows(config: VisibilityConfig, result: VisibilityResult) -> list[dict[str, Any]]:
    """One row per (world, task, preset) with its observations and fractions."""
    config = config.resolved()
    rows = []
    for cell in result.cells:
        for preset in config.presets:
            row: dict[str, Any] = {"world": cell.world, "task": cell.task, "preset": preset,
                                   "observations": cell.observations}
            for t in config.thresholds:
                row[f"changed_gt{t}"] = round(cell.changed[preset][t] / cell.pixels, 6)
            rows.append(row)
    return rows


def ceiling_rows(result: VisibilityResult) -> list[dict[str, Any]]:
    """One row per (world, task): ceiling-facing share, measured rig vs untilted."""
    return [{"world": c.world, "task": c.task, "observations": c.observations,
             "ceiling_rig": round(float(np.mean(c.ceiling_rig)), 6),
             "ceiling_untilted": round(float(np.mean(c.ceiling_untilted)), 6)}
            for c in result.cells]


def _input_bundles(config: VisibilityConfig) -> dict[str, Path]:
    """The bundle directory of each measured reconstruction (none for the sample room)."""
    spec = config.study_spec()
    return {scene: Path(spec.scenes[scene]) for scene in config.scenes if scene != SAMPLE}


def _input_files(config: VisibilityConfig) -> dict[str, Path]:
    return {f"{scene}/{name}": root / name for scene, root in _input_bundles(config).items()
            for name in ("scene.json", "background.ply")}


def write_outputs(out: Path, config: VisibilityConfig, result: VisibilityResult, *,
                  overwrite: bool = False) -> Path:
    """``visibility``, ``visibility_cells``, ``ceiling`` (CSV + Markdown), config, manifest."""
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from protocols.tablefmt import write_table

    config = config.resolved()
    tables = {"visibility": (preset_rows(config, result),
                             "Fraction of wrist-view pixels changed per artifact preset"),
              "visibility_cells": (cell_rows(config, result),
                                   "Fraction changed per world, task and preset"),
              "ceiling": (ceiling_rows(result),
                          f"Ceiling-facing share of the image circle (ray > "
                          f"{CEILING_ELEVATION_DEG:g} deg above the horizon), per camera pose")}
    note = (f"demo profile {config.profile!r} simulated domain; {result.observations} "
            f"observations x 2 wrist fisheyes ({config.image_size[0]} x {config.image_size[1]}, "
            f"tilt {config.tilt_deg:g} deg); pixels inside the image circle; ceiling-facing "
            f"share: this rig {result.ceiling():.3f}, untilted {result.ceiling(untilted=True):.3f}")
    with staged_output_dir(out, overwrite=overwrite,
                           inputs=_input_bundles(config).values()) as tmp:
        outputs = {}
        for stem, (rows, title) in tables.items():
            header = list(rows[0])
            for path in write_table(tmp, stem, header, [[r[h] for h in header] for r in rows],
                                    title=title, notes=[note]):
                outputs[path.name] = path
        atomic_write_json(tmp / "config.json", asdict(config))
        outputs["config.json"] = tmp / "config.json"
        extra = {"ceiling_rig": result.ceiling(),
                 "ceiling_untilted": result.ceiling(untilted=True)}
        manifest = make_manifest(tool=TOOL, params=asdict(config), seed=config.seed,
                                 inputs=_input_files(config), outputs=outputs,
                                 counts={"observations": result.observations,
                                         "cells": len(result.cells)}, extra=extra)
        atomic_write_json(tmp / "manifest.json", manifest)
    return out


def _csv(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def main(argv: list[str] | None = None) -> int:
    """Command line of ``python -m bench.demo.visibility``; returns the exit status (0, or 2)."""
    import time

    parser = argparse.ArgumentParser(prog="python -m bench.demo.visibility",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--profile", default=VisibilityConfig.profile,
                        help="demo profile whose simulated domain is measured")
    parser.add_argument("--scenes", default="duo,flat,g2",
                        help="demo scenes (duo,flat,g2) or 'sample' (the procedural room)")
    parser.add_argument("--tasks", default="cup,tape,pen")
    parser.add_argument("--presets", default=None, help="artifact presets (default: profile's)")
    parser.add_argument("--conditions", type=int, default=None,
                        help="initial conditions per (scene, task) (default: the profile's "
                             "simulated trials)")
    parser.add_argument("--tilt", type=float, default=None,
                        help="forward tilt of the rig, degrees (default: the demo's)")
    parser.add_argument("--size", type=int, default=None,
                        help="wrist image side, pixels (default: the profile's)")
    parser.add_argument("--seed", type=int, default=0, help="the demo's --seed (editors)")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    from bench.errors import BenchError
    from bench.safety import preflight_output_dir

    try:
        config = VisibilityConfig(
            profile=args.profile, scenes=_csv(args.scenes), tasks=_csv(args.tasks),
            presets=_csv(args.presets) if args.presets else None, conditions=args.conditions,
            tilt_deg=args.tilt, image_size=(args.size, args.size) if args.size else None,
            seed=args.seed)
        # every refusal of --out before a minutes-long run (inputs: the measured bundles)
        preflight_output_dir(args.out, overwrite=args.overwrite,
                             inputs=_input_bundles(config).values())
        started = time.perf_counter()
        result = measure_visibility(config, progress=True)
        write_outputs(args.out, config, result, overwrite=args.overwrite)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((args.out / "visibility.md").read_text())
    print(f"measured in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
