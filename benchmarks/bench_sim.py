"""Simulator speed: physics steps/s, rendered policy queries/s, wall time of a 600-frame rollout.

Run on one core (as for docs/speed/sim.md, which the simulator manual quotes):

    MUJOCO_GL=egl PYOPENGL_PLATFORM=egl taskset -c 1 .venv/bin/python benchmarks/bench_sim.py

Rows, side by side:
- raw ``mj_step`` vs the environment's frame loop (mocap interpolation + grasp rule per step);
- a full 600-frame Cup rollout (chunks of 16, 128x128 wrist fisheye, 50k-Gaussian sample room)
  with the background drawn by the cubemap path vs the direct fisheye path, vs no rendering
  (obs_mode="state"), with the time split into physics / Gaussian render / MuJoCo render /
  composite. The ``hold`` policy is used so every rollout runs the full 600 frames.

``--doc docs/speed/sim.md`` writes the tables with the command, date and machine
(``benchmarks/speed_doc.py``); the simulator manual quotes that file.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")


def physics_rates(scene, steps: int) -> dict[str, float]:
    import gymnasium
    import mujoco
    import numpy as np

    import bench.sim

    env = gymnasium.make(bench.sim.ENV_IDS["cup"], scene=scene, obs_mode="state", control="single")
    env.reset(seed=0)
    world = env.unwrapped.world
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(world.model, world.data)
    raw = steps / (time.perf_counter() - start)
    env.reset(seed=0)
    frames = steps // env.unwrapped.config.substeps
    action = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.11])
    start = time.perf_counter()
    for _ in range(frames):
        env.step(action)
    env_rate = frames * env.unwrapped.config.substeps / (time.perf_counter() - start)
    env.close()
    return {"raw_mj_step_per_s": raw, "env_physics_steps_per_s": env_rate}


def rollout(scene, *, obs_mode: str, fisheye_mode: str, policy: str = "hold") -> dict:
    import gymnasium

    import bench.sim
    from bench.policies import make_policy
    from bench.sim.rollout import run_episode

    env = gymnasium.make(
        bench.sim.ENV_IDS["cup"],
        scene=scene,
        obs_mode=obs_mode,
        fisheye_mode=fisheye_mode,
        execute=16,
        image_size=(128, 128),
    )
    if obs_mode == "rgb":  # warm up: GL context, Warp kernel load, first-touch allocations
        env.reset(seed=0)
    renderer = env.unwrapped._renderer
    if renderer is not None:
        renderer.timings.clear()
    record, _, wall = run_episode(env, make_policy(policy, env), init_index=0)
    timings = dict(renderer.timings) if renderer is not None else {}
    env.close()
    rendered = sum(timings.values())
    return {
        "obs_mode": obs_mode,
        "fisheye_mode": fisheye_mode if obs_mode == "rgb" else "-",
        "policy": policy,
        "frames": record.frames,
        "queries": record.policy_queries,
        "wall_s": wall,
        "physics_s": wall - rendered,
        "gaussians_s": timings.get("gaussians", 0.0),
        "mujoco_s": timings.get("mujoco", 0.0),
        "composite_s": timings.get("composite", 0.0),
        "queries_per_s": record.policy_queries / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaussians", type=int, default=50000, help="background size (count)")
    parser.add_argument("--steps", type=int, default=20000, help="physics steps for the rate rows")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--doc", type=Path, help="write the generated speed doc (Markdown) here")
    args = parser.parse_args()
    from speed_doc import Table, command_line, render_table, run_started, write_speed_doc

    started = run_started()

    from bench.scene.sample import make_sample_scene

    scene = make_sample_scene(seed=0, n_gaussians=args.gaussians)
    rates = physics_rates(scene, args.steps)
    rows = [
        rollout(scene, obs_mode="rgb", fisheye_mode="cubemap"),
        rollout(scene, obs_mode="rgb", fisheye_mode="direct"),
        rollout(scene, obs_mode="state", fisheye_mode="cubemap"),
        rollout(scene, obs_mode="rgb", fisheye_mode="cubemap", policy="expert"),
    ]
    setup = (f"Background: sample room, {scene.background.num:,} SH-3 Gaussians; physics dt "
             "2 ms, 10 Hz control.")
    physics = Table(
        f"Physics rate ({args.steps:,} steps):", ["physics", "steps/s"],
        [["raw `mj_step`", f"{rates['raw_mj_step_per_s']:,.0f}"],
         ["env frame loop (mocap interpolation + grasp rule)",
          f"{rates['env_physics_steps_per_s']:,.0f}"]], align=["l", "r"])
    labels = {"cubemap": "rgb, background by cubemap (default)",
              "direct": "rgb, background by direct fisheye"}
    rollouts = Table(
        "Cup rollout, chunks of 16, 128x128 wrist fisheye; wall time split into physics "
        "(everything but rendering: physics, state snapshot, progress scoring, policy) and "
        "the three render stages:",
        ["rollout", "policy", "frames", "queries", "wall s", "queries/s", "physics s",
         "GS render s", "MuJoCo render s", "composite s"],
        [["state only (no rendering)" if r["obs_mode"] == "state" else labels[r["fisheye_mode"]],
          f"`{r['policy']}`", r["frames"], r["queries"], f"{r['wall_s']:.2f}",
          f"{r['queries_per_s']:.1f}", f"{r['physics_s']:.2f}",
          "-" if r["obs_mode"] == "state" else f"{r['gaussians_s']:.2f}",
          "-" if r["obs_mode"] == "state" else f"{r['mujoco_s']:.2f}",
          "-" if r["obs_mode"] == "state" else f"{r['composite_s']:.3f}"] for r in rows],
        align=["l", "l"] + ["r"] * 8)
    print(f"{setup}\n\n{render_table(physics)}\n\n{render_table(rollouts)}")
    if args.doc:
        write_speed_doc(
            args.doc, title="Simulator speed: physics rate and 600-frame rollouts",
            command=command_line(env_vars=("MUJOCO_GL", "PYOPENGL_PLATFORM")),
            tables=[physics, rollouts], started=started,
            notes=[setup,
                   "The `hold` policy never finishes the task, so its rollouts run all 600 "
                   "frames (30,000 physics steps); the `expert` row is a successful episode, "
                   "which ends early. Each rgb rollout starts after one untimed reset (GL "
                   "context, Warp kernel load). The render columns come from the renderer's own "
                   "timers; \"physics s\" is the wall time minus their sum."])
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rates": rates, "rollouts": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
