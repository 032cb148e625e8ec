"""Cameras that see the damage: the fraction of wrist pixels each artifact preset changes.

For each task, the scripted expert runs clean rollouts (privileged state,
``obs_mode="state"``) with the demo's tilted ``yubi-dual`` rig
(:func:`bench.demo.real.demo_rig`); at every observation the policy would get
(reset, then once per executed chunk) both wrist fisheyes are rendered twice at
the same MuJoCo state: over the clean background and over the perturbed one
(:func:`perturbations.apply_perturbation`, each preset of the registry). A pixel
counts as changed when any channel of the uint8 image differs by more than
``threshold`` levels; fractions are over the pixels inside the fisheye image
circle, pooled over frames, cameras and rollouts.

``ceiling_fraction`` records, per camera pose, the share of image-circle pixels
whose ray points more than 15 degrees above the horizon (what can see the
ceiling), for the tilted rig and for the untilted preset, at the same states.

Run::

    python -m bench.demo.visibility --out results/demo-visibility [--size 96] [--conditions 2]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CEILING_ELEVATION_DEG = 15.0
TOOL = "demo-visibility/1"


@dataclass(frozen=True)
class VisibilityConfig:
    """Settings of one visibility measurement.

    Attributes:
        presets: Perturbation presets (registry names).
        tasks: Tasks whose expert rollouts are measured.
        conditions: Initial conditions per task (0 .. conditions - 1).
        image_size: Wrist image (height, width).
        tilt_deg: Forward tilt of the yubi-dual rig.
        scene_seed: Seed of the sample room (:func:`bench.scene.sample.make_sample_scene`).
        n_gaussians: Gaussians of the sample room.
        perturb_seed: Seed of every editor.
        thresholds: uint8 levels a channel must differ by to count (one column each).
        max_frames: Rollout time limit in control frames.
    """

    presets: tuple[str, ...] = ("hole-54", "hole-90", "floaters-low", "floaters-mid",
                                "floaters-high", "warp")
    tasks: tuple[str, ...] = ("cup", "tape", "pen")
    conditions: int = 1
    image_size: tuple[int, int] = (64, 64)
    tilt_deg: float = 45.0
    scene_seed: int = 0
    n_gaussians: int = 20000
    perturb_seed: int = 0
    thresholds: tuple[int, ...] = (0, 8)
    max_frames: int = 200


@dataclass
class VisibilityResult:
    """Changed-pixel fractions per (preset, threshold), ceiling fractions, frame count."""

    changed: dict[str, dict[int, float]] = field(default_factory=dict)
    per_task: dict[str, dict[str, float]] = field(default_factory=dict)
    ceiling_tilted: float = 0.0
    ceiling_untilted: float = 0.0
    frames: int = 0


def ceiling_fraction(camera: Any, *, elevation_deg: float = CEILING_ELEVATION_DEG) -> float:
    """Share of a fisheye's image-circle pixels whose world ray rises above ``elevation_deg``."""
    rays, valid = camera.pixel_rays()  # [H, W, 3] camera frame, [H, W]
    world = rays[valid] @ camera.world_from_camera[:3, :3].T
    return float(np.mean(world[:, 2] > math.sin(math.radians(elevation_deg))))


def _rollout_states(env: Any, condition: int, max_frames: int) -> list[np.ndarray]:
    """The qpos at every observation of a clean expert rollout (reset + after each chunk)."""
    from bench.policies.base import make_policy

    policy = make_policy("expert", env)
    policy.reset(seed=condition)
    obs, info = env.reset(seed=condition)
    states = [env.world.data.qpos.copy()]
    while True:
        obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
        states.append(env.world.data.qpos.copy())
        if terminated or truncated or info["frame"] >= max_frames:
            return states


def measure_visibility(config: VisibilityConfig, *, progress: bool = False) -> VisibilityResult:
    """Changed wrist-pixel fractions of every preset along clean expert rollouts."""
    import mujoco

    from bench.demo.real import demo_rig, tilt_rig
    from bench.scene.sample import make_sample_scene
    from bench.sim.env import SplatBenchEnv
    from bench.sim.observation import ObservationRenderer
    from perturbations import apply_perturbation

    scene = make_sample_scene(seed=config.scene_seed, n_gaussians=config.n_gaussians)
    perturbed = {p: apply_perturbation(scene, p, seed=config.perturb_seed).bundle
                 for p in config.presets}
    counts = {p: dict.fromkeys(config.thresholds, 0) for p in config.presets}
    task_counts = {t: dict.fromkeys(config.presets, 0) for t in config.tasks}
    task_total = dict.fromkeys(config.tasks, 0)
    total, frames = 0, 0
    ceiling_t, ceiling_u = [], []
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(config.tasks) * config.conditions, desc="visibility", unit="rollout")
    for task in config.tasks:
        env = SplatBenchEnv(task, scene, obs_mode="state", cameras="yubi-dual",
                            image_size=config.image_size, max_frames=config.max_frames)
        rig = demo_rig(env.config, env.world.robot, tilt_deg=config.tilt_deg)
        untilted = tilt_rig(rig, -config.tilt_deg)
        renderer = ObservationRenderer(env.world, scene, env.config, rig=rig)
        valid = {c.key: c.intrinsics.pixel_rays()[1] for c in rig}
        try:
            for condition in range(config.conditions):
                for qpos in _rollout_states(env, condition, config.max_frames):
                    env.world.data.qpos[:] = qpos
                    mujoco.mj_forward(env.world.model, env.world.data)
                    tcp = env.world.robot.tcp_pose(env.world.data)
                    body = env.world.robot.camera_pose(env.world.data)
                    for cam_t, cam_u in zip(rig, untilted, strict=True):
                        ceiling_t.append(ceiling_fraction(
                            cam_t.intrinsics.with_pose(cam_t.world_pose(tcp, body))))
                        ceiling_u.append(ceiling_fraction(
                            cam_u.intrinsics.with_pose(cam_u.world_pose(tcp, body))))
                    renderer.scene = scene
                    clean = renderer.render_cameras()
                    for preset, bundle in perturbed.items():
                        renderer.scene = bundle
                        damaged = renderer.render_cameras()
                        for key, image in clean.items():
                            diff = np.abs(image.astype(np.int16) - damaged[key]).max(axis=-1)
                            diff = diff[valid[key]]
                            for t in config.thresholds:
                                counts[preset][t] += int(np.sum(diff > t))
                            task_counts[task][preset] += int(np.sum(diff > config.thresholds[0]))
                    n = sum(int(v.sum()) for v in valid.values())
                    total += n
                    task_total[task] += n
                    frames += 1
                if bar is not None:
                    bar.update(1)
        finally:
            renderer.close()
            env.close()
    if bar is not None:
        bar.close()
    return VisibilityResult(
        changed={p: {t: c / total for t, c in per.items()} for p, per in counts.items()},
        per_task={t: {p: c / task_total[t] for p, c in per.items()}
                  for t, per in task_counts.items()},
        ceiling_tilted=float(np.mean(ceiling_t)), ceiling_untilted=float(np.mean(ceiling_u)),
        frames=frames)


def result_table(config: VisibilityConfig, result: VisibilityResult) -> list[dict[str, Any]]:
    """One row per preset: changed-pixel fraction per threshold and per task (rounded to 1e-6)."""
    rows = []
    for preset in config.presets:
        row: dict[str, Any] = {"preset": preset}
        for t in config.thresholds:
            row[f"changed_gt{t}"] = round(result.changed[preset][t], 6)
        for task in config.tasks:
            row[f"{task}_gt{config.thresholds[0]}"] = round(result.per_task[task][preset], 6)
        rows.append(row)
    return rows


def write_outputs(out: Path, config: VisibilityConfig, result: VisibilityResult, *,
                  overwrite: bool = False) -> Path:
    """``visibility.csv``, ``visibility.md``, ``config.json``, ``manifest.json`` in ``out``."""
    from bench.provenance import atomic_write_json, make_manifest, staged_output_dir
    from protocols.tablefmt import write_table

    rows = result_table(config, result)
    header = list(rows[0])
    with staged_output_dir(out, overwrite=overwrite) as tmp:
        note = (f"{result.frames} observations x 2 wrist fisheyes; ceiling-facing share of "
                f"image-circle pixels (ray > {CEILING_ELEVATION_DEG:g} deg above the horizon): "
                f"tilted {result.ceiling_tilted:.3f}, untilted {result.ceiling_untilted:.3f}")
        write_table(tmp, "visibility", header, [[row[h] for h in header] for row in rows],
                    title="Fraction of wrist-view pixels changed per artifact preset",
                    notes=[note])
        atomic_write_json(tmp / "config.json", asdict(config))
        outputs = {name: tmp / name for name in ("visibility.csv", "visibility.md",
                                                 "config.json")}
        manifest = make_manifest(tool=TOOL, params=asdict(config), seed=config.perturb_seed,
                                 outputs=outputs, counts={"observations": result.frames},
                                 extra={"ceiling_tilted": result.ceiling_tilted,
                                        "ceiling_untilted": result.ceiling_untilted})
        atomic_write_json(tmp / "manifest.json", manifest)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line of ``python -m bench.demo.visibility``; returns the exit status (0, or 2)."""
    parser = argparse.ArgumentParser(prog="python -m bench.demo.visibility",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--size", type=int, default=64, help="wrist image side, pixels")
    parser.add_argument("--conditions", type=int, default=1)
    parser.add_argument("--tilt", type=float, default=45.0)
    parser.add_argument("--tasks", default="cup,tape,pen")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    from bench.errors import BenchError

    try:
        if args.size < 8 or args.conditions < 1:
            raise BenchError("--size must be >= 8 and --conditions >= 1")
        if args.out.exists() and not args.overwrite:  # refuse before a minutes-long run
            raise BenchError(f"output directory {args.out} exists; pass --overwrite or choose "
                             "another --out")
        config = VisibilityConfig(conditions=args.conditions, image_size=(args.size, args.size),
                                  tilt_deg=args.tilt, tasks=tuple(args.tasks.split(",")))
        result = measure_visibility(config, progress=True)
        write_outputs(args.out, config, result, overwrite=args.overwrite)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print((args.out / "visibility.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
