"""Arm vs floating gripper: 600-frame rollouts with two 128x128 wrist fisheyes on the sample room.

Run on one core (as in docs/tasks-and-robots.md):

    MUJOCO_GL=egl taskset -c 1 .venv/bin/python benchmarks/bench_rollout_arm.py

Rows, side by side in one run (Cup task, chunks of 16, ``hold`` policy so every rollout runs all
600 frames = 30,000 physics steps and 38 rendered queries, 50,000-Gaussian background drawn by
the cubemap path):
- floating gripper with the default single wrist fisheye (today's configuration);
- floating gripper with the YUBI dual rig (``wrist_left_rgb`` + ``wrist_right_rgb``);
- the ``arm6`` arm (mink differential IK every 5 physics steps) with the dual rig;
- the arm with IK at every physics step (``ik_every=1``), the obvious alternative;
- both robots without rendering (``obs_mode="state"``): physics + control only.
Time is split into physics+control (incl. IK) / IK alone / Gaussian render / MuJoCo render /
composite.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("MUJOCO_GL", "egl")


def rollout(scene, *, robot: str, cameras: str, obs_mode: str = "rgb", ik_every: int = 5) -> dict:
    import gymnasium

    import bench.sim
    from bench.policies import make_policy
    from bench.sim.arm import ArmConfig, ArmRobot
    from bench.sim.rollout import run_episode

    robot_obj = ArmRobot(ArmConfig(ik_every=ik_every)) if robot == "arm6" else None
    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, obs_mode=obs_mode,
                         cameras=cameras, execute=16, image_size=(128, 128),
                         **({"robot": robot_obj} if robot_obj is not None else {}))
    env.reset(seed=0)  # warm up: GL context, Warp kernel load, first-touch allocations
    renderer = env.unwrapped._renderer
    if renderer is not None:
        renderer.timings.clear()
    arm = env.unwrapped.world.robot
    record, _, wall = run_episode(env, make_policy("hold", env), init_index=0)
    timings = dict(renderer.timings) if renderer is not None else {}
    stats = env.unwrapped.robot_stats()
    ik = getattr(arm, "ik_seconds", 0.0)
    env.close()
    rendered = sum(timings.values())
    return {
        "robot": robot if robot != "arm6" else f"arm6 (IK every {ik_every} steps)",
        "cameras": cameras if obs_mode == "rgb" else "- (state)",
        "frames": record.frames, "queries": record.policy_queries, "wall_s": wall,
        "physics_s": wall - rendered, "ik_s": ik, "gaussians_s": timings.get("gaussians", 0.0),
        "mujoco_s": timings.get("mujoco", 0.0), "composite_s": timings.get("composite", 0.0),
        "ik_unreachable": stats.get("ik_unreachable", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, default=50000, help="background size (count)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args()

    from bench.scene.sample import make_sample_scene

    scene = make_sample_scene(seed=0, n_gaussians=args.gaussians)
    rows = [
        rollout(scene, robot="floating-gripper", cameras="wrist"),
        rollout(scene, robot="floating-gripper", cameras="yubi-dual"),
        rollout(scene, robot="arm6", cameras="yubi-dual"),
        rollout(scene, robot="arm6", cameras="yubi-dual", ik_every=1),
        rollout(scene, robot="floating-gripper", cameras="yubi-dual", obs_mode="state"),
        rollout(scene, robot="arm6", cameras="yubi-dual", obs_mode="state"),
    ]
    print(f"background: {scene.background.num} Gaussians; 600 frames, physics dt 2 ms, 10 Hz\n")
    print("| robot | cameras | frames | queries | wall s | physics+control s | IK s | "
          "GS render s | MuJoCo render s | composite s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['robot']} | {r['cameras']} | {r['frames']} | {r['queries']} | "
              f"{r['wall_s']:.2f} | {r['physics_s']:.2f} | {r['ik_s']:.2f} | "
              f"{r['gaussians_s']:.2f} | {r['mujoco_s']:.2f} | {r['composite_s']:.3f} |")
    base = rows[1]["wall_s"]
    print(f"\narm / floating gripper (dual rig, wall): {rows[2]['wall_s'] / base:.2f}x; "
          f"IK every step / every 5 steps: {rows[3]['wall_s'] / rows[2]['wall_s']:.2f}x; "
          f"dual / single wrist camera (floating): {base / rows[0]['wall_s']:.2f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
